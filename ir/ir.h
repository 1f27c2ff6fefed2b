/* ir: the Parse-Match-Action IR of one policy file.
 *
 *   Parse   the header vector: exactly the request fields some rule reads
 *   Match   per policy, ordered rules; each rule a condition over the header vector
 *   Action  per rule, header mutations (of the request, and of its response) then one terminal:
 *           forward, deny, fallback, or continue to the next policy
 *
 * Built from the resolved AST by ir_lower(); printed by ir_dump() (--emit=ir). The IR owns
 * copies of every string it keeps, so the AST can be freed after lowering. */
#ifndef L7_IR_H
#define L7_IR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "regex_dfa.h"

struct l7_module;
struct l7_diags;
struct l7_source;
struct l7_arena;

enum ir_field { IR_F_PATH, IR_F_QUERY, IR_F_METHOD, IR_F_HOST, IR_F_HEADER, IR_F_CLAIM, IR_F_TARGET };
#define IR_F_LAST IR_F_TARGET     /* the verifier's range */
/* The gRPC service and method of a path /SERVICE/METHOD: what lowering reads them as (a
 * frontend field's IR field) before it turns every compare into conditions on the path; never
 * in the IR (past IR_F_LAST, ir_verify refuses them). */
enum { IR_F_GRPC_SERVICE = IR_F_LAST + 1, IR_F_GRPC_METHOD };

/* The condition kinds and the operands each uses: conds.def. */
enum ir_cond_kind {
#define IR_COND(kind, operands) IR_C_##kind,
#include "conds.def"
#undef IR_COND
};


enum ir_operand {                /* fields of struct ir_cond a kind uses */
	IR_O_AB = 1 << 0,            /* a and b: subconditions */
	IR_O_A = 1 << 1,             /* a alone */
	IR_O_FIELD = 1 << 2,         /* field (and header: an index into headers, or claims) */
	IR_O_STR = 1 << 3,           /* str, len: a constant shorter than the head limit */
	IR_O_METHOD = 1 << 4,        /* method: an enum l7_method but OTHER */
	IR_O_SERVICES = 1 << 5,      /* mask: of declared services */
	IR_O_HEADER = 1 << 6,        /* header: an index into headers */
	IR_O_PREFIX = 1 << 7,        /* net, netmask: a prefix, network byte order */
	IR_O_PORTS = 1 << 8,         /* lo <= hi <= 65535 */
	IR_O_JWT = 1 << 9,           /* jwt: an index into jwts */
	IR_O_IDENT = 1 << 10,        /* ident: an index into identities, or nidentities */
	IR_O_TABLE = 1 << 11,        /* table: an index into tables; group: 1..its ngroups */
	IR_O_SET = 1 << 12,          /* set: an index into cidr_sets */
	IR_O_COUNTER = 1 << 13,      /* state: a counter whose value conditions read */
	IR_O_RANGE = 1 << 14,        /* lo <= hi */
	IR_O_TIMER = 1 << 15,        /* state: an index into timers */
	IR_O_SECONDS = 1 << 16,      /* lo: seconds, at most a year */
	IR_O_RE = 1 << 17,           /* re: one of regexes */
	IR_O_PROTO = 1 << 18,        /* lo: an enum l7_proto */
};

/* "HTTP/1.1", "HTTP/1.0", "HTTP/2": request.protocol's values (enum l7_proto), NULL past them */
const char *ir_protocol_name(unsigned proto);

/* The operands of kind k, and its name ("STR_EQ"; NULL for no kind of conds.def). */
unsigned ir_cond_operands(enum ir_cond_kind k);
const char *ir_cond_kind_name(enum ir_cond_kind k);


struct ir_regex {                /* one distinct regex of the policy file, compiled to a DFA */
	int index;                   /* in ir_program.regexes */
	char *src;                   /* the regex text, as after the string's escapes */
	size_t len;
	struct re_dfa dfa;           /* next/accept live in the program's arena */
	bool shared;                 /* lowering's own, of the path, that many rules test (the gRPC form):
	                              * codegen runs it once per function */
};

struct ir_cond {
	enum ir_cond_kind kind;
	struct ir_cond *a, *b;       /* AND, OR, NOT (a only) */
	enum ir_field field;
	int header;                  /* IR_F_HEADER, HAS_HEADER: index into the header vector's names;
	                              * IR_F_CLAIM: index into claims */
	int jwt;                     /* JWT_VALID */
	int ident;                   /* IDENTITY */
	int table, group;            /* TABLE */
	int set;                     /* SOURCE_SET: index into cidr_sets */
	int state;                   /* COUNTER_IN: counter; TIMER_ELAPSED: timer */
	const struct ir_regex *re;   /* REGEX (field, header as for STR_EQ) */
	unsigned net, netmask;       /* SOURCE_IN, network byte order */
	unsigned lo, hi;             /* PORT_IN, COUNTER_IN; TIMER_ELAPSED: lo seconds */
	char *str;
	size_t len;
	unsigned method;
	unsigned long long mask;
	unsigned line, col;          /* .l7 line and column of the source expression (col 0: none) */
};

enum ir_term { IR_CONTINUE, IR_FORWARD, IR_DENY, IR_FALLBACK, IR_ALLOW };

/* The actions and the operands each uses: actions.def. */
enum ir_action_kind {
#define IR_ACTION(kind, operands) IR_A_##kind,
#include "actions.def"
#undef IR_ACTION
};

enum ir_action_operand {         /* fields of struct ir_action a kind uses */
	IR_AO_MUTATION = 1 << 0,     /* op, response, header (SET, REMOVE), mutation (SET, ADD) */
	IR_AO_COUNTER = 1 << 1,      /* counter: an index into counters */
	IR_AO_BUCKET = 1 << 2,       /* bucket: an index into buckets; key_field, key_header, key_source */
	IR_AO_TIMER = 1 << 3,        /* timer: an index into timers */
};
unsigned ir_action_operands(enum ir_action_kind k);
const char *ir_action_kind_name(enum ir_action_kind k);   /* NULL for no kind of actions.def */

/* Header mutations act, in the order reached, on the message's field lines: SET removes every
 * line of the name (the sender's and lines added before) and adds one, ADD adds one, REMOVE
 * removes every line of the name. */
enum ir_mut_op { IR_MUT_SET, IR_MUT_ADD, IR_MUT_REMOVE };

struct ir_action {               /* non-terminal actions, in order */
	enum ir_action_kind kind;
	enum ir_mut_op op;           /* MUTATE */
	bool response;               /* MUTATE: of the response to the request (else of the request) */
	int header;                  /* MUTATE SET/REMOVE: the name, as an index into headers (request)
	                              * or rheaders (response); -1 for ADD */
	int mutation;                /* MUTATE SET/ADD: the line, an index into ir_program.mutations */
	int counter;                 /* COUNT: index into ir_program.counters */
	int bucket;                  /* LIMIT: index into ir_program.buckets */
	int timer;                   /* TIMER_RESTART: index into ir_program.timers */
	enum ir_field key_field;     /* LIMIT: the key (IR_F_*), or -1 for one bucket for all */
	int key_header;
	bool key_source;             /* LIMIT: the key is the client's address (key_field is -1) */
	unsigned line, col;
};

struct ir_rule {
	int id;                      /* 1-based, unique in the program; 0 = the default */
	struct ir_cond *cond;
	struct ir_action *actions;
	int nactions;
	enum ir_term term;
	int upstream;                /* IR_FORWARD */
	int status;                  /* IR_DENY */
	int grpc;                    /* IR_DENY: 1 + the gRPC status DenyGrpc named; 0: l7_grpc_status_of_http(status) */
	char *reason;                /* IR_FALLBACK: why this goes to the slow path */
	unsigned line, col;          /* of the terminal action (or the last statement) */
};

struct ir_policy {
	char *name;
	unsigned line;
	struct ir_rule *rules;
	int nrules;
	bool has_allow;              /* an ALLOW policy (Meshlib): if it applies and no Allow is
	                              * reached, the request is denied 403 */
	struct ir_cond *applies;     /* its context, for has_allow */
};

struct ir_jwt {                  /* a `Jwt NAME { ... }` instance */
	char *name, *key_file;       /* key_file: absolute path */
	char *issuer, *audience;     /* "" = not checked */
	int header;                  /* header-vector index of the token's header */
	unsigned leeway;
};

struct ir_claim { int jwt; char *name; };

struct ir_bucket { char *name; unsigned rate, burst, status; };

struct ir_table_entry {
	unsigned method;             /* enum l7_method; 0: any */
	bool prefix;                 /* value is a prefix of the field (else equal to it) */
	char *value;
	size_t len;
	int group;                   /* 1..ngroups: the rules that decide alike share one */
	unsigned line;               /* .l7 line of the rule it came from */
};

/* A run of rules that differ only in method and one field's value (the path, Host, a header
 * or the query; the same for the whole run), as one lookup: the first entry the
 * request matches names its group, and one rule per group (the group's actions) tests it.
 * No entry is shadowed by an earlier one (passes/tables.c removes those), so in each of the lookups
 * (exact or prefix, with or without method) the longest match is also the first. */
struct ir_table {
	struct ir_table_entry *entries;   /* in rule order */
	int n, ngroups;
	enum ir_field field;         /* what the entries' values are compared with */
	int header;                  /* IR_F_HEADER: index into the header vector */
	bool exact_any, exact_method, prefix_any, prefix_method;   /* which lookups can match */
};

struct ir_cidr_set {             /* a long `source in [...]` list, as one LPM trie lookup */
	unsigned *nets, *netmasks;   /* network byte order */
	int n;
};

struct ir_identity {
	char *name;
	unsigned *nets, *netmasks;   /* network byte order */
	int n;
};

struct ir_endpoint { unsigned ip, port, weight; };

/* How an upstream picks one of its endpoints (ir/balance.c builds the tables). */
enum ir_balance {
	IR_LB_ONE,                   /* a single endpoint */
	IR_LB_ROUND_ROBIN,           /* smooth weighted turns, a counter per set in the kernel */
	IR_LB_HASH,                  /* Ketama: the first ring point >= xxh64(key), wrapping */
};

struct ir_target {               /* a service, an upstream or the fallback proxy */
	char *name;
	struct ir_endpoint *endpoints;
	int nendpoints;
	/* upstreams and the fallback: every endpoint is a backend slot of its own (the
	 * manifest's UPSTREAM record i is slot i; a decision names a slot) */
	int slot;                    /* slot of endpoint 0; endpoint i is slot + i */
	enum ir_balance balance;
	int key_field;               /* IR_LB_HASH: IR_F_PATH, IR_F_HOST, IR_F_HEADER, or -1: the
	                              * client's address */
	int key_header;              /* IR_F_HEADER: index into the header vector */
	unsigned *ring;              /* IR_LB_HASH: 1 << ring_log2 points, ascending, padded with
	                              * 0xffffffff points of the first point's slot */
	unsigned char *ring_slot;    /* the slot of each point */
	int ring_log2, ring_points;  /* ring_points: before padding */
	unsigned char *turns;        /* IR_LB_ROUND_ROBIN: the slot of each turn, sum(weights) */
	int nturns;
	/* endpoints found at run time: rt is the set's index among them (l7_lb_tab), -1 for
	 * endpoints compiled in. Its nendpoints are L7_RT_SLOTS reserved slots (0.0.0.0:0 here,
	 * l7run gives them addresses); no ring or turns: l7run builds them. */
	int rt;
	enum ir_rt_kind { IR_RT_NONE, IR_RT_NAME, IR_RT_SET } rt_kind;
	char *rt_name;               /* the host name, or the --endpoints set's name */
	unsigned rt_port;            /* IR_RT_NAME */
	/* l7run's: active checks of a run-time set (NULL: none), and how many times a request
	 * whose connect failed goes to another endpoint (idempotent methods only) */
	struct ir_health {
		char *path, *host;       /* host: "" for the default */
		unsigned every_ms, timeout_ms, unhealthy, healthy, status_lo, status_hi;
	} *health;
	int retries;
};

struct ir_mutation {              /* a field line some SET/ADD adds (request or response) */
	char *name, *value;
	char *line;                  /* "name: value\r\n", what goes on the wire */
	size_t line_len;
};

struct ir_program {
	char *source_path;
	const struct l7_source *src;  /* for diagnostics of later passes; not owned */
	struct ir_target *services, *upstreams;
	int nservices, nupstreams;
	int fallback;                /* upstream index of the fallback proxy, -1 if none */
	int nslots;                  /* backend slots: the endpoints of all upstreams and the fallback */
	/* header vector */
	bool reads_path, reads_query, reads_method, reads_host;
	char **headers;              /* lower-case names of the headers rules read */
	int nheaders;
	struct ir_mutation *mutations;
	int nmutations;
	char **rheaders;             /* lower-case names of the response fields SET/REMOVE act on */
	int nrheaders;
	struct ir_policy *policies;
	int npolicies;
	struct ir_jwt *jwts;
	int njwts;
	struct ir_claim *claims;
	int nclaims;
	char **counters;             /* Counter instances, by name */
	int ncounters;
	unsigned long long counters_read;   /* bit i: a condition reads counter i's value */
	char **timers;               /* Timer instances, by name */
	int ntimers;
	struct ir_bucket *buckets;
	int nbuckets;
	struct ir_identity *identities;
	int nidentities;
	struct ir_table *tables;
	int ntables;
	struct ir_cidr_set *cidr_sets;
	int ncidr_sets;
	struct ir_regex **regexes;   /* distinct regexes of matches() */
	int nregexes;
	struct ir_rule default_rule; /* what a request no policy decided gets */
	struct ir_rule rbac_rule;    /* the 403 of an ALLOW policy that applied but did not allow */
	int nrules;                  /* rules in all policies */
	struct l7_arena *arena;      /* owns everything above */
};

/* Lowers a resolved module. Returns NULL when it reported errors. */
struct ir_program *ir_lower(const struct l7_module *m, struct l7_diags *d);
void ir_dump(const struct ir_program *p, FILE *out);

/* Partial evaluation: the passes of passes.def, in that order (the pipeline, pipeline.c, runs
 * them). ir_run_pass runs pass i (its warnings for removed rules to d, which may be NULL) and
 * numbers the remaining rules 1..n again. ir_pass_select: the passes a --passes list names, as
 * a mask of indices (NULL: all; "none": none; "simplify,shadow"), or IR_PASS_UNKNOWN with the
 * unknown name in *bad (*badlen bytes). ir_pass_names: "simplify,tables,...". */
int ir_npasses(void);
const char *ir_pass_name(int i);
void ir_run_pass(struct ir_program *p, int i, struct l7_diags *d);
#define IR_PASS_UNKNOWN (~0u)
unsigned ir_pass_select(const char *list, const char **bad, size_t *badlen);
const char *ir_pass_names(void);
/* The table test a rule begins with when it stands for the rules of a table (passes/tables.c
 * "tables": the test comes first), or NULL. */
const struct ir_cond *ir_rule_table(const struct ir_rule *r);
/* Every request table entry b matches, entry a matches too. */
bool ir_table_entry_covers(const struct ir_table_entry *a, const struct ir_table_entry *b);
void ir_free(struct ir_program *p);

/* The IR verifier (verify.c): checks every invariant the later stages rely on, printing each
 * broken one to out ("l7c: internal error: the IR after <stage> breaks an invariant: ...").
 * Returns how many are broken. */
int ir_verify(const struct ir_program *p, const char *stage, FILE *out);

/* ---- the reference evaluator: the IR's meaning, run in userspace ----
 * The oracle for differential tests against the kernel data plane, and `l7c --eval`. */

struct l7_req;

struct ir_decision {
	enum ir_term term;           /* IR_FORWARD, IR_DENY or IR_FALLBACK */
	int upstream, status;
	int grpc;                    /* IR_DENY: the gRPC status a gRPC client gets (l7_grpc_status_of) */
	bool grpc_named;             /* ... named by the rule (DenyGrpc), not the HTTP status's */
	int slot;                    /* FORWARD/FALLBACK: the backend slot the kernel sends it to;
	                              * -1 for round robin (any slot of the upstream: it rotates) */
	const struct ir_rule *rule;  /* the deciding rule (&p->default_rule when none matched) */
	unsigned line;               /* its .l7 line; for a rule standing for a table (passes/tables.c), the
	                              * line of the rule of the run the request matched */
	int set[16];                 /* lines added to the request (mutations), in order */
	int nset;
	unsigned del;                /* bit i: the client's lines of header i removed */
	int rset[16];                /* lines added to the response, in order */
	int nrset;
	unsigned rdel;               /* bit i: the upstream's lines of response field i removed */
	int counted[16];             /* counters incremented, in order */
	int ncounted;
	/* audited denies (Audit(request), and with audit_all every Deny and the 403 of an ALLOW
	 * policy), in order: the rule whose audit counter counts it and the line */
	int audit_rule[16];
	unsigned audit_line[16];
	int naudit;
	bool nolog;                  /* NoLog(request): not in the access log */
	bool no_endpoint;            /* DENY 503: the run-time set routed to has no endpoint
	                              * (upstream still names it, as the kernel's answer does) */
};

/* What the evaluator cannot know by itself: JWT validity (and claim values, which the check
 * writes into req as the data plane's does) come from the caller (ir_jwt_valid: the data
 * plane's verifier), as do rate-limit outcomes. NULL: every token invalid, every Limit passes. */
struct ir_eval_env {
	bool (*jwt_valid)(void *ctx, int jwt, struct l7_req *req);
	/* a token of bucket for the key: the field's bytes, the client's address (4 bytes, network
	 * order), or none (len 0: one bucket for all) */
	bool (*bucket_take)(void *ctx, int bucket, const void *key, size_t len);
	void *ctx;
	/* Counter values and timers (NULL: every value 0, no timer elapsed) */
	unsigned long long (*counter_value)(void *ctx, int counter);
	bool (*timer_elapsed)(void *ctx, int timer, unsigned seconds);
	/* `l7run --audit`: no Deny is enforced (nor an ALLOW policy's 403); each is audited and the
	 * policy decides nothing (a Limit's deny and the 404 of no route stay) */
	bool audit_all;
	/* The table l7run would hold for run-time upstream `upstream` (l7c --eval --endpoints,
	 * --resolve); NULL (or no hook): not known, the endpoint is chosen at run time */
	const struct l7_lb_tab *(*lb_tab)(void *lb_ctx, int upstream);
	void *lb_ctx;
};

/* Decides for a parsed request (the header vector of l7/abi.h, filled by the stdlib parser
 * with the header names of p; JWT checks add their claims). */
void ir_eval(const struct ir_program *p, struct l7_req *req, struct ir_decision *out);
void ir_eval_with(const struct ir_program *p, struct l7_req *req, const struct ir_eval_env *env,
		  struct ir_decision *out);

/* HS256 JWTs for the evaluator (eval_jwt.c): stdlib/bpf/jwt.h natively, the keys read from
 * the policy's key files as l7run reads them, exp and nbf checked against `now` (Unix
 * seconds). ir_jwt_valid is an ir_eval_env.jwt_valid (ctx: the environment); ir_jwt_why says
 * why a token of configuration jwt is valid or not ("expired", "bad signature", ...). */
struct ir_jwt_env;
struct ir_jwt_env *ir_jwt_env_new(const struct ir_program *p, long long now, char *err, size_t errlen);
void ir_jwt_env_free(struct ir_jwt_env *env);
bool ir_jwt_valid(void *env, int jwt, struct l7_req *req);
const char *ir_jwt_why(void *env, int jwt, const struct l7_req *req);

/* JWT configuration jwt as the data plane's table holds it (l7/abi.h struct l7_jwt_cfg):
 * what codegen emits and the evaluator's verifier reads. */
struct l7_jwt_cfg;
void ir_jwt_cfg(const struct ir_program *p, int jwt, struct l7_jwt_cfg *out);

/* The caller identity of a client address (network byte order): the identity of the longest
 * declared prefix holding it, or nidentities ("external"). */
int ir_identity_of(const struct ir_program *p, unsigned src_be);

/* Parses raw request bytes with the data plane's own parser (stdlib/bpf/http.h, built
 * natively) for the header names p reads. Returns the head length, 0 if incomplete, or
 * -L7_E_* like the parser. */
int ir_parse_request(const struct ir_program *p, struct l7_req *req, const void *bytes, unsigned len);

/* HTTP/2 (mesh mode decides each stream at its header block). ir_h2_block: the header block an
 * HTTP/2 client sends for a request written as text, HTTP/1.1's form with the version HTTP/2
 * (eval_parse.c says how fields map), into blk (cap bytes); *head_len: the text's head.
 * Returns the block's length, 0 if the text's request line is no HTTP/2 one, -1 if a line is
 * no field or the block exceeds cap, -2 if the head does not end (no empty line). ir_parse_request_h2: decodes a block with the data
 * plane's decoder (stdlib/bpf/hpack.h, built natively) in the state mesh mode decides a
 * client's blocks in; *msg_flags: its L7_H2_M_* (L7_H2_M_GRPC: a gRPC call). Returns 0, or
 * the decoder's L7_H2_* result (l7/h2.h: a stream or connection error, or L7_H2_SLOW: the
 * kernel refuses the stream, REFUSED_STREAM). */
int ir_h2_block(const void *text, unsigned len, unsigned char *blk, unsigned cap, unsigned *head_len);
int ir_parse_request_h2(const struct ir_program *p, struct l7_req *req, const void *blk, unsigned len,
			unsigned *msg_flags);

/* Load balancing (balance.c): builds every upstream's slots, Ketama ring or round-robin
 * turns (called by ir_lower); the slot a hashed upstream picks for a request, as the kernel
 * does (stdlib/bpf/balance.h, the same code built natively). */
void ir_balance_build(struct ir_program *p);
int ir_balance_pick(const struct ir_program *p, const struct ir_target *t, const struct l7_req *req);
/* The slot the kernel picks for run-time upstream t over table tab (l7/dataplane.h, the one
 * l7run writes: ring.h's l7_ring_tab): -1 for round robin (it rotates), L7_NO_SLOT when the
 * set has no endpoint (the 503). */
struct l7_lb_tab;
int ir_balance_pick_tab(const struct ir_target *t, const struct l7_lb_tab *tab, const struct l7_req *req);
/* The ring's share of the hash space each endpoint of t owns (out[i] for endpoint i, sum 1). */
void ir_balance_shares(const struct ir_target *t, double *out);

/* Text of a condition, as in the dump ("starts_with(path, \"/api\") && method == GET"). */
void ir_cond_print(const struct ir_program *p, const struct ir_cond *c, FILE *out);

#endif
