/* frontend: policy source -> typed, resolved AST.
 *
 *   l7_source_load()      read a .l7 file
 *   l7_parse()            tree-sitter CST -> AST (syntax errors reported, parsing continues)
 *   l7_resolve()          names and types against the interface files (*.l7i)
 *
 * Every error is reported through the diagnostics engine (file:line:col, source line, caret),
 * all of them in one run. Nothing here aborts on bad input. */
#ifndef L7_FRONTEND_H
#define L7_FRONTEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* sources, diagnostics and arenas: support/ */
#include "arena.h"
#include "diag.h"
#include "source.h"

/* Levenshtein distance of two names (UINT_MAX past 64 bytes), for "did you mean". */
unsigned l7_edit_distance(const char *a, const char *b);

/* ---- AST ---- */

enum l7_type {
	T_ERROR = 0, T_VOID, T_BOOL, T_INT, T_STRING, T_IP, T_CIDR, T_ADDRESS,
	T_UPSTREAM, T_LIST, T_RANGE, T_ACT, T_STATE,
	T_IDENTITY,                 /* a caller identity (request.caller), or external */
	T_GRPC_STATUS,              /* a gRPC status code by its name (l7/grpc.h): PERMISSION_DENIED */
};
const char *l7_type_name(enum l7_type t);

enum l7_expr_kind {
	E_STRING, E_INT, E_BOOL, E_IP, E_CIDR, E_ADDRESS, E_IDENT, E_MEMBER, E_CALL,
	E_BINARY, E_NOT, E_LIST, E_RANGE,
};

enum l7_binop { OP_OR, OP_AND, OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_IN };

/* What a name or member resolved to. */
enum l7_ref_kind {
	REF_NONE, REF_ACT_VAR, REF_STATE_VAR, REF_UPSTREAM, REF_FIELD, REF_BUILTIN,
	REF_RESP_VAR,               /* the policy's response act variable (`act (HttpResponse response)`) */
	REF_IDENTITY,               /* a declared identity (ref_index), or external (nidentities) */
};

/* Built-in functions of the language (not act-type specific): builtins.def. */
enum l7_builtin {
	B_NONE,
#define L7_BUILTIN(e, name, what) B_##e,
#include "builtins.def"
#undef L7_BUILTIN
};

struct l7_iface_field;
struct l7_iface_action;

struct l7_expr {
	enum l7_expr_kind kind;
	struct l7_loc loc;
	enum l7_type type;          /* set by l7_resolve */
	char *str;                  /* E_STRING value (escapes decoded), E_IDENT/E_MEMBER name, E_CALL name */
	size_t str_len;
	long long num;              /* E_INT, E_BOOL, E_RANGE low */
	long long num2;             /* E_RANGE high, E_CIDR prefix length, E_ADDRESS port */
	unsigned ip;                /* E_IP/E_CIDR/E_ADDRESS, host byte order */
	enum l7_binop op;
	struct l7_expr *lhs, *rhs;  /* E_BINARY; E_NOT uses lhs; E_MEMBER object in lhs */
	struct l7_expr **args;      /* E_CALL arguments, E_LIST items */
	int nargs;
	/* resolution */
	enum l7_ref_kind ref;
	int ref_index;              /* upstream index; identity index (REF_IDENTITY) */
	enum l7_builtin builtin;
	const struct l7_iface_field *field;
};

enum l7_stmt_kind { S_ACTION, S_IF, S_BLOCK, S_SECTION };

struct l7_stmt {
	enum l7_stmt_kind kind;
	struct l7_loc loc;
	struct l7_expr *call;       /* S_ACTION */
	const struct l7_iface_action *action;  /* S_ACTION, set by l7_resolve */
	struct l7_expr *cond;       /* S_IF */
	struct l7_stmt *then, *otherwise;      /* S_IF */
	struct l7_stmt **body;      /* S_BLOCK */
	int nbody;
	char *section;              /* S_SECTION: Ingress / Egress */
};

struct l7_binding {
	char *type, *name;
	struct l7_loc loc, type_loc;
	const struct l7_iface_type *iface;    /* set by l7_resolve */
	int instance;                         /* using: index into l7_module.instances */
};

/* `Jwt auth { key_file = "k"; }`: a named state instance and its settings. */
struct l7_setting {
	char *name;
	struct l7_expr *value;
	struct l7_loc loc;
};

struct l7_instance {
	char *type, *name;
	struct l7_loc loc, type_loc;
	struct l7_setting *settings;
	int nsettings;
	bool implicit;                        /* created by a `using` of a type without settings */
	const struct l7_iface_type *iface;    /* set by l7_resolve */
};

/* `identity login = [10.0.1.0/24];`: who a caller is, by source address. */
struct l7_identity {
	char *name;
	struct l7_loc loc;
	unsigned *ips, *prefixes;
	int n;
};

struct l7_policy {
	char *name;
	struct l7_loc loc;
	struct l7_binding act;
	bool has_act;
	struct l7_binding resp;     /* optional second act binding: the request's response */
	bool has_resp;
	struct l7_binding *usings;
	int nusings;
	char *context;              /* regex over caller->callee, or NULL */
	struct l7_loc context_loc;
	struct l7_stmt *body;
};

struct l7_endpoint {
	unsigned ip;                /* host byte order */
	unsigned port;
	unsigned weight;
	struct l7_loc loc;
};

/* How an upstream with several endpoints picks one for each request. */
enum l7_balance { LB_DEFAULT, LB_ROUND_ROBIN, LB_HASH };
enum l7_lb_key { LBK_PATH, LBK_SOURCE, LBK_HEADER };

struct l7_decl {                /* service, upstream or fallback */
	char *name;
	struct l7_loc loc;
	bool syntax_error;          /* its address did not parse (reported): declared, with no endpoint */
	struct l7_endpoint *endpoints;
	int nendpoints;
	/* upstreams: `balance round_robin` or `balance hash(KEY)`; LB_DEFAULT when not written */
	enum l7_balance balance;
	enum l7_lb_key key;         /* LB_HASH */
	/* upstreams whose endpoints l7run finds at run time (no endpoints here): a DNS name it
	 * resolves ("NAME:PORT"), or a set of its --endpoints file (endpoints("NAME")) */
	enum l7_dyn { DYN_NONE, DYN_NAME, DYN_SET } dyn;
	char *dyn_name;             /* the host name, or the set's name */
	unsigned dyn_port;          /* DYN_NAME */
	struct l7_loc dyn_loc;
	char *key_header;           /* LBK_HEADER: the header name as written (escapes decoded) */
	size_t key_header_len;
	struct l7_loc balance_loc, key_loc;
	/* upstreams: `health "PATH" OPTIONS` (active checks, l7run's) and `retries N` */
	struct l7_health {
		bool on;
		char *path, *host;      /* host: NULL, the default (the name, or the endpoint's address) */
		unsigned every_ms, timeout_ms, unhealthy, healthy, status_lo, status_hi;
		struct l7_loc loc;
	} health;
	int retries;                /* -1: not written (the default) */
	struct l7_loc retries_loc;
};

/* ---- interfaces (*.l7i) ---- */

/* What interfaces bind to: intrinsics.def. */
enum l7_intrinsic {
	I_NONE = 0,
#define L7_FIELD(e, name, state, how, irf) I_##e,
#define L7_ACTION(e, name, state, flags) I_##e,
#include "intrinsics.def"
#undef L7_ACTION
#undef L7_FIELD
};

enum { L7_TERMINAL = 1, L7_MUTATION = 2, L7_SLOW = 4 };   /* action flags (intrinsics.def) */

/* What a state type is, judged from the intrinsics its members bind to: decides which
 * settings an instance takes. */
enum l7_state_kind { SK_NONE, SK_JWT, SK_COUNTER, SK_BUCKET, SK_TIMER };

/* An action intrinsic's flags (L7_TERMINAL, ...), 0 for fields and I_NONE. */
unsigned l7_action_flags(enum l7_intrinsic in);

struct l7_iface_param {
	char *type, *name;
	bool is_self;
	enum l7_type ty;
};

struct l7_iface_field {
	char *name;
	struct l7_loc loc;
	struct l7_iface_param *params;
	int nparams;
	char *type_name, *intrinsic_name;     /* as written; interpreted by l7_resolve */
	enum l7_type type;
	enum l7_intrinsic intrinsic;
};

struct l7_iface_action {
	char *name;
	struct l7_loc loc;
	struct l7_iface_param *params;
	int nparams;
	char *intrinsic_name;
	enum l7_intrinsic intrinsic;
	bool proxy_only, ingress_only, egress_only;
};

struct l7_iface_type {
	char *name;
	bool is_state;
	bool is_response;                 /* `act T : Response`: what a policy's second act binds */
	enum l7_state_kind state_kind;    /* set by l7_resolve */
	struct l7_loc loc;
	struct l7_iface_field *fields;
	int nfields;
	struct l7_iface_action *actions;
	int nactions;
};

struct l7_module {                      /* one policy file with its interfaces */
	const struct l7_source *src;
	struct l7_decl *services, *upstreams, *fallback;
	int nservices, nupstreams;
	struct l7_policy *policies;
	int npolicies;
	char **imports;
	struct l7_loc *import_locs;
	int nimports;
	struct l7_iface_type *types;          /* from the interface files */
	int ntypes;
	struct l7_instance *instances;
	int ninstances;
	struct l7_identity *identities;
	int nidentities;
	struct l7_source **iface_sources;     /* kept alive for diagnostics */
	int niface_sources;
	struct l7_arena *arena;               /* owns every node above */
};

/* Parses src (a .l7 policy file, or a .l7i interface file with is_interface) into m. */
void l7_parse(struct l7_module *m, const struct l7_source *src, bool is_interface, struct l7_diags *d);

/* Loads the imported interface files (searched in include_dirs) and resolves m. */
void l7_resolve(struct l7_module *m, const char *const *include_dirs, int ninclude, struct l7_diags *d);

void l7_ast_dump(const struct l7_module *m, FILE *out);

/* regcomp of a `context` pattern (POSIX ERE), for the front end's check and the lowering's
 * use alike: 0, or a regcomp error, or -1 with why[] when the pattern's repetitions would make
 * the C library build a tree past L7_CONTEXT_MAX_COPIES copies of its atoms (glibc writes X+
 * as X X* and X{n,m} as m copies, so stacked ones multiply: 40 '+' took 2 GB, found by
 * reliability.fuzz_frontend), or when repetitions nest past L7_CONTEXT_MAX_DEPTH (a repetition
 * of something that repeats: glibc's time is exponential in it), parts that may match nothing
 * number past L7_CONTEXT_MAX_LOOPS once copied (its time grows with their cube) or groups past
 * L7_CONTEXT_MAX_GROUPS. On 0, *re is to be regfree()d. */
#define L7_CONTEXT_MAX_COPIES 4096
#define L7_CONTEXT_MAX_DEPTH 2
#define L7_CONTEXT_MAX_LOOPS 256
#define L7_CONTEXT_MAX_GROUPS 64
struct re_pattern_buffer;
int l7_context_regcomp(struct re_pattern_buffer *re, const char *pattern, char *why, size_t whylen);

/* A setting of a state instance, or NULL when not given. */
const struct l7_expr *l7_instance_setting(const struct l7_instance *in, const char *name);
void l7_module_free(struct l7_module *m);

#endif
