/* What the importer knows between reading the YAML and writing the .l7: label sets and the
 * classes built from them (workloads, caller identities), conditions with their late-bound
 * atoms, and one record per policy to emit. Internal to import/. */
#ifndef L7_IMPORT_MODEL_H
#define L7_IMPORT_MODEL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>

#include "frontend.h"
#include "import.h"
#include "ydoc.h"

/* ---- the schema (fields.def) ---- */

enum fstatus { FS_OK, FS_PART, FS_WARN, FS_ERR, FS_META };
enum fobject {
#define OBJECT(id, name) id,
#define FIELD(o, k, s, n)
#define WHEN(k, s, n)
#include "fields.def"
#undef OBJECT
#undef FIELD
#undef WHEN
	O_COUNT
};

/* ---- label sets: a workload or a caller is the set of labels it carries ---- */

#define NS_KEY "io.kubernetes.pod.namespace"
#define SA_KEY "io.cilium.k8s.policy.serviceaccount"
#define TD_KEY "spiffe.trust-domain"          /* of an Istio principal, when not cluster.local */
#define PRINCIPAL_KEY "istio.principal"       /* a principal not in SPIFFE form */

struct lset {
	int n;
	const char **k, **v;         /* sorted by key, keys distinct */
	const char *canon;           /* "k=v,k=v": equal sets, equal text */
};

/* A class: the callers (or workloads) whose labels include `l` and no larger class's. The
 * classes are closed under the union of compatible sets, so each caller has one largest
 * class that it belongs to: the identity it gets (or the service it is). */
struct klass {
	struct lset *l;
	const char *name;            /* the .l7 identifier */
	const char *desc;            /* for comments */
	int *ports;                  /* workloads: the ports it is served on */
	int nports;
	int jwtset;                  /* workloads: index of its set of Jwt instances (-1: none) */
	bool cilium_default_deny;    /* workloads: a Cilium ingress section selects it */
	bool istio_allow;            /* workloads: an Istio ALLOW policy with rules applies */
};

/* ---- conditions ---- */

enum smatch { SM_EXACT, SM_PREFIX, SM_SUFFIX, SM_PRESENT };   /* Istio's string matches */

enum ckind {
	CK_TRUE, CK_FALSE, CK_AND, CK_OR, CK_NOT,
	CK_TEXT,                     /* a .l7 condition, as written */
	CK_CALLER,                   /* the caller's labels include `who` */
	CK_ANY_AUTH,                 /* the caller has an identity (Istio's principals: ["*"]); m set:
	                              * one with a namespace (namespaces: ["*"]) */
	CK_CLAIM,                    /* a valid token's string claim `claim` matches (m, val) */
	CK_PORT,                     /* the port the request came to is in lo..hi */
	CK_REQP,                     /* the request principal ISS/SUB of a valid token matches (m, val) */
};

struct cnode {
	enum ckind k;
	struct cnode **a;
	int n;
	const char *text;            /* CK_TEXT */
	const char *negated;         /* CK_TEXT of a == or != compare: its opposite */
	const struct lset *who;      /* CK_CALLER */
	const char *claim, *val;     /* CK_CLAIM */
	enum smatch m;
	int lo, hi;                  /* CK_PORT */
	const char *comment;         /* printed above it when the expression spans lines */
};

/* ---- what is emitted ---- */

enum pkind { PK_CUSTOM, PK_AUTHN, PK_DENY, PK_CILIUM, PK_ALLOW, PK_AUDIT };

struct mutation {                /* a Cilium headerMatches action */
	struct cnode *cond;
	const char *op;              /* SetHeader, AddHeader, RemoveHeader */
	const char *name, *value;
	const char *comment;
};

struct irule {
	struct cnode *cond;
	const char *comment;         /* "rules[0] (file:line)" */
	bool uses_jwt;
};

struct jwt {                     /* one Jwt instance: a key of a JWT rule */
	const char *name, *key_file, *issuer, *audience, *header;
	const char **auds;           /* more than one audience: the aud claim must be one of them */
	int nauds;
	const unsigned char *key;
	size_t key_len;
	const char *source;          /* comment: RequestAuthentication ns/name rules[i] */
	int failure;                 /* 0 PERMISSIVE, 1 IGNORE, 2 STRICT */
	bool forward;                /* forwardOriginalToken */
};

struct ipol {
	enum pkind k;
	const char *kind, *ns, *name, *where;   /* ns NULL: cluster-scoped; where: "file:line" */
	const char *title;           /* "Kind ns/name", for comments */
	const struct lset *target;   /* the workloads: those whose labels include it */
	struct irule *rules;
	int nrules;
	const char *provider;        /* CUSTOM */
	bool commented;              /* CUSTOM's dry run: emitted as a comment */
	bool audited;                /* AUDIT, and DENY/ALLOW's dry run: its denies audited, not enforced */
	const char *why_commented;
	int *jwts;                   /* RequestAuthentication: its Jwt instances */
	int njwts;
	/* Cilium: one record per rule (spec, specs[i]) */
	struct cnode **allow, **deny;
	const char **allow_comment, **deny_comment;
	int nallow, ndeny;
	struct mutation *muts;
	int nmuts;
	bool default_deny;
};

struct ictx {
	struct l7_arena **a;
	struct l7_diags *d;
	const struct l7_import_opts *o;
	struct lset **wl_atoms, **id_atoms;   /* selectors of workloads, of callers */
	int nwl_atoms, nid_atoms;
	bool any_auth;                        /* CK_ANY_AUTH is used: callers "mesh" need a class */
	struct klass *wls, *ids;
	int nwls, nids;
	struct ipol **pols;
	int npols;
	struct jwt *jwts;
	int njwts;
	int **jwtsets;                        /* distinct sets of Jwt instances of workloads */
	int *njwtset;
	int njwtsets;
	bool need_fallback;
	int *atom_ports;                      /* ports named by policies */
	struct ipol **port_pol;               /* the policy that named atom_ports[i] */
	int nports_named;
	const char **header_names;            /* every header name the output reads or edits */
	struct l7_loc *header_locs;
	int nheader_names;
	const char **claim_names;             /* "instance.claim" pairs the output reads */
	int nclaim_names;
	bool count_claims;
	const char **regexes;                 /* the distinct regexes written, and their DFA cost */
	long re_total;
	int nregexes;
};

/* ---- walk.c: the schema, typed reads, diagnostics ---- */

/* Checks every key of map against object o of the schema: unknown keys are errors (with a
 * suggestion), WARN and ERR fields are reported with their note. false if map is not a
 * mapping (reported). */
bool walk_fields(struct ictx *x, const struct ynode *map, enum fobject o);
/* The string of a scalar (numbers and booleans as written), or NULL reported as "expected". */
const char *y_str(struct ictx *x, const struct ynode *n, const char *what);
/* The items of a sequence; NULL and *count 0 for null/absent; a non-sequence is reported. */
struct ynode **y_list(struct ictx *x, const struct ynode *n, const char *what, int *count);
bool y_bool(struct ictx *x, const struct ynode *n, const char *what, bool *out);
char *xprintf(struct ictx *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
char *vxprintf(struct ictx *x, const char *fmt, va_list ap);
const char *where_of(struct ictx *x, struct l7_loc l);   /* "file:line" */
void print_fields(FILE *out);                           /* l7c import --fields */
const char *when_find(const char *key, enum fstatus *s, const char **note);

/* ---- labels.c ---- */

struct lset *lset_new(struct ictx *x, int n, const char **k, const char **v);
struct lset *lset_add(struct ictx *x, const struct lset *s, const char *k, const char *v);
bool lset_sub(const struct lset *small, const struct lset *big);
const char *lset_get(const struct lset *s, const char *k);
/* Selector labels as written (matchLabels), with Cilium's source prefixes dropped. */
struct lset *lset_from_map(struct ictx *x, const struct ynode *match_labels, bool cilium);
int atom_add(struct ictx *x, struct lset ***atoms, int *n, struct lset *s);
/* Builds the classes of a set of atoms (closure under compatible unions), names them. Errors
 * past max classes. */
bool classes_build(struct ictx *x, struct lset **atoms, int n, bool workloads, struct klass **out, int *nout, int max);
const char *class_desc(struct ictx *x, const struct lset *l);

/* ---- cond.c ---- */

struct cnode *c_new(struct ictx *x, enum ckind k);
struct cnode *c_text(struct ictx *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* lhs == rhs (eq) or lhs != rhs, which prints negated as the other */
struct cnode *c_cmp(struct ictx *x, const char *lhs, bool eq, const char *rhs);
struct cnode *c_bin(struct ictx *x, enum ckind k, struct cnode *a, struct cnode *b);   /* AND, OR (n-ary) */
struct cnode *c_not(struct ictx *x, struct cnode *a);
struct cnode *c_caller(struct ictx *x, const struct lset *who);
/* A .l7 string literal, escaped; NULL if s holds a byte a policy string cannot. */
const char *l7_quote(struct ictx *x, const char *s, size_t n);
/* The regex that matches s literally (ci: either case of letters). */
const char *re_literal(struct ictx *x, const char *s, bool ci);
/* A string match of a .l7 field expression against the literal v (ci: either case). */
struct cnode *c_match(struct ictx *x, const char *field, enum smatch m, const char *v, bool ci);
/* Istio's forms: "*" presence, "*x" suffix, "x*" prefix, else exact; *lit without the '*'. */
enum smatch smatch_of(struct ictx *x, const char *pattern, const char **lit);
/* The regex a match would compile to: it must compile within l7c's limits (each regex, and all
 * of them together); an error at `at` otherwise. */
bool match_ok(struct ictx *x, enum smatch m, const char *lit, bool ci, struct l7_loc at);
bool re_ok(struct ictx *x, const char *re, struct l7_loc at, const char *what);
/* What a condition is bound to where it is printed: the Jwt instances of its workloads (NULL/0:
 * none), the one port of its services (0: several; request.port then tests it). */
struct benv {
	const int *jwt;
	int njwt;
	int port;
};
/* Binds callers, JWT atoms and ports, folds constants. */
struct cnode *c_bind(struct ictx *x, const struct cnode *c, const struct benv *env);
bool c_uses(const struct cnode *c, enum ckind k);
struct cnode *c_port(struct ictx *x, int lo, int hi);
/* Prints a bound condition: one line if short, else broken at its && and ||. */
void c_print(struct ictx *x, FILE *o, const struct cnode *c, int indent);

/* ---- cilium.c, istio.c ---- */

const char *cidr_text(struct ictx *x, const struct ynode *n, const char *what);
struct cnode *source_in(struct ictx *x, struct ynode **items, int n, const char *what);

void cilium_object(struct ictx *x, const struct ynode *doc, const char *kind, const char *ns, const char *name,
		   const struct ynode *meta);
void istio_authz(struct ictx *x, const struct ynode *doc, const char *ns, const char *name, const struct ynode *meta);
void istio_authn(struct ictx *x, const struct ynode *doc, const char *ns, const char *name);

/* Remembers a header name the output reads or edits (the data plane reads at most 16). */
void note_header(struct ictx *x, const char *name, struct l7_loc at);
/* Remembers the ports a policy names for its workloads. */
void note_port(struct ictx *x, struct ipol *p, int port);
struct ipol *pol_new(struct ictx *x, enum pkind k, const char *kind, const char *ns, const char *name, struct l7_loc at);

/* ---- emit.c ---- */

int emit(struct ictx *x, FILE *out);

#endif
