/* AST -> Parse-Match-Action IR.
 *
 * A policy body is a tree of statements; the data plane wants ordered rules. Every path
 * through the body becomes one rule: its condition is the conjunction of the branch
 * conditions taken (negated for else), its actions the mutations met on the way, its terminal
 * the Route/Deny/Fallback that ends the path (or "continue" into the next policy). Paths are
 * mutually exclusive, so first-match order is kept trivially. */
#include "ir.h"

#include "frontend.h"
#include "l7/abi.h"
#include "l7/dataplane.h"

#include <assert.h>
#include <ctype.h>
#include <limits.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_RULES 65536

struct lx {
	struct ir_program *p;
	const struct l7_module *m;
	struct l7_diags *d;
	struct ir_policy *pol;
	const struct l7_policy *src;
	bool too_many;
	int *kind_index;             /* per module instance: its index among jwts/counters/buckets */
	int nrt;                     /* upstreams with run-time endpoints so far */
};

static void *alloc(struct lx *x, size_t n) { return l7_alloc(&x->p->arena, n); }
static char *dup(struct lx *x, const char *s, size_t n) { return l7_strndup(&x->p->arena, s, n); }

/* ---- conditions, simplified as they are built ---- */

static struct ir_cond *cond_new(struct lx *x, enum ir_cond_kind k, unsigned line)
{
	struct ir_cond *c = alloc(x, sizeof(*c));
	c->kind = k;
	c->line = line;
	return c;
}

static struct ir_cond *cond_not(struct lx *x, struct ir_cond *a)
{
	if (a->kind == IR_C_TRUE || a->kind == IR_C_FALSE)
		return cond_new(x, a->kind == IR_C_TRUE ? IR_C_FALSE : IR_C_TRUE, a->line);
	if (a->kind == IR_C_NOT)
		return a->a;
	struct ir_cond *c = cond_new(x, IR_C_NOT, a->line);
	c->a = a;
	return c;
}

static struct ir_cond *cond_bin(struct lx *x, enum ir_cond_kind k, struct ir_cond *a, struct ir_cond *b)
{
	enum ir_cond_kind unit = k == IR_C_AND ? IR_C_TRUE : IR_C_FALSE;
	if (a->kind == unit)
		return b;
	if (b->kind == unit)
		return a;
	if (a->kind != unit && (a->kind == IR_C_TRUE || a->kind == IR_C_FALSE))
		return a;   /* absorbing element */
	if (b->kind == IR_C_TRUE || b->kind == IR_C_FALSE)
		return b;
	struct ir_cond *c = cond_new(x, k, a->line);
	c->a = a;
	c->b = b;
	return c;
}

static int header_index(struct lx *x, const char *name, size_t len, struct l7_loc loc)
{
	char low[L7_MAX_NAME];
	if (len == 0 || len >= L7_MAX_NAME) {
		l7_diag(x->d, L7_ERROR, loc, "header name must be 1 to %d bytes", L7_MAX_NAME - 1);
		return -1;
	}
	for (size_t i = 0; i < len; i++)
		low[i] = (char)tolower((unsigned char)name[i]);
	low[len] = 0;
	for (int i = 0; i < x->p->nheaders; i++)
		if (!strcmp(x->p->headers[i], low))
			return i;
	if (!strcmp(low, "host")) {
		l7_diag(x->d, L7_ERROR, loc, "use %s.host for the Host header", x->src ? x->src->act.name : "request");
		return -1;
	}
	if (x->p->nheaders == L7_MAX_WANTED) {
		l7_diag(x->d, L7_ERROR, loc, "a policy file can read at most %d distinct headers", L7_MAX_WANTED);
		return -1;
	}
	char **n = alloc(x, sizeof(char *) * (x->p->nheaders + 1));
	if (x->p->nheaders)   /* memcpy from NULL is undefined even for 0 bytes */
		memcpy(n, x->p->headers, sizeof(char *) * x->p->nheaders);
	n[x->p->nheaders] = dup(x, low, len);
	x->p->headers = n;
	assert(x->p->nheaders < L7_MAX_WANTED);
	return x->p->nheaders++;
}

/* A response field name SET/REMOVE act on: the response scanners look for these. */
static int rheader_index(struct lx *x, const struct l7_expr *name)
{
	char low[L7_MAX_NAME];
	if (name->str_len == 0 || name->str_len >= L7_MAX_NAME) {
		l7_diag(x->d, L7_ERROR, name->loc, "header name must be 1 to %d bytes", L7_MAX_NAME - 1);
		return -1;
	}
	for (size_t i = 0; i < name->str_len; i++)
		low[i] = (char)tolower((unsigned char)name->str[i]);
	low[name->str_len] = 0;
	for (int i = 0; i < x->p->nrheaders; i++)
		if (!strcmp(x->p->rheaders[i], low))
			return i;
	if (x->p->nrheaders == L7_MAX_RHDR) {
		l7_diag(x->d, L7_ERROR, name->loc, "a policy file can set or remove at most %d distinct response headers", L7_MAX_RHDR);
		return -1;
	}
	char **n = alloc(x, sizeof(char *) * (x->p->nrheaders + 1));
	if (x->p->nrheaders)
		memcpy(n, x->p->rheaders, sizeof(char *) * x->p->nrheaders);
	n[x->p->nrheaders] = dup(x, low, name->str_len);
	x->p->rheaders = n;
	return x->p->nrheaders++;
}

/* The JWT configuration (counter, timer) a state variable is bound to. */
static int jwt_of(struct lx *x, const struct l7_expr *var)
{
	return x->kind_index[x->src->usings[var->ref_index].instance];
}

static int claim_index(struct lx *x, int jwt, const struct l7_expr *name)
{
	struct ir_program *p = x->p;
	if (name->str_len == 0 || name->str_len >= L7_MAX_NAME) {
		l7_diag(x->d, L7_ERROR, name->loc, "claim name must be 1 to %d bytes", L7_MAX_NAME - 1);
		return -1;
	}
	for (int i = 0; i < p->nclaims; i++)
		if (p->claims[i].jwt == jwt && !strcmp(p->claims[i].name, name->str))
			return i;
	if (p->nclaims == L7_MAX_CLAIMS) {
		l7_diag(x->d, L7_ERROR, name->loc, "a policy file can read at most %d JWT claims", L7_MAX_CLAIMS);
		return -1;
	}
	struct ir_claim *n = alloc(x, sizeof(*n) * (size_t)(p->nclaims + 1));
	if (p->nclaims)
		memcpy(n, p->claims, sizeof(*n) * (size_t)p->nclaims);
	n[p->nclaims] = (struct ir_claim){ jwt, dup(x, name->str, name->str_len) };
	p->claims = n;
	return p->nclaims++;
}

/* ---- the fields of frontend/intrinsics.def: how each is read ---- */

typedef struct ir_cond *field_cond_fn(struct lx *x, const struct l7_expr *e, unsigned line);
#define L7_FIELD(e, name, state, how, irf) FIELD_HOOK_##how(e)
#define L7_ACTION(e, name, state, flags)
#define FIELD_HOOK_STR(e)
#define FIELD_HOOK_COND(e) static field_cond_fn cond_##e;      /* e: the field: the condition it is */
#define FIELD_HOOK_CMP(e) static field_cond_fn compare_##e;    /* e: `field OP constant` */
#include "intrinsics.def"
#undef L7_ACTION
#undef L7_FIELD

static const struct field_reading {
	int string;                  /* STR: the IR field (IR_F_*) it reads; -1 otherwise */
	field_cond_fn *cond, *compare;
} readings[] = {
	[I_NONE] = { -1, NULL, NULL },
#define L7_FIELD(e, name, state, how, irf) [I_##e] = FIELD_##how(e, irf),
#define L7_ACTION(e, name, state, flags) [I_##e] = { -1, NULL, NULL },
#define FIELD_STR(e, irf) { IR_F_##irf, NULL, NULL }
#define FIELD_COND(e, irf) { -1, cond_##e, NULL }
#define FIELD_CMP(e, irf) { -1, NULL, compare_##e }
#include "intrinsics.def"
#undef L7_ACTION
#undef L7_FIELD
};

/* How e reads its field, or NULL when it is not a field. */
static const struct field_reading *reading(const struct l7_expr *e)
{
	return e->ref == REF_FIELD && e->field ? &readings[e->field->intrinsic] : NULL;
}

/* The request string (or claim) an expression reads, or false if it reads none. */
static bool field_of(struct lx *x, const struct l7_expr *e, enum ir_field *f, int *hdr)
{
	const struct field_reading *rd = reading(e);
	if (!rd || rd->string < 0)
		return false;
	*f = (enum ir_field)rd->string;
	switch (rd->string) {
	case IR_F_GRPC_SERVICE:
	case IR_F_GRPC_METHOD:   /* read from the path (grpc_cond) */
	case IR_F_PATH:
	case IR_F_TARGET: x->p->reads_path = true; return true;
	case IR_F_QUERY: x->p->reads_query = true; return true;
	case IR_F_METHOD: x->p->reads_method = true; return true;
	case IR_F_HOST: x->p->reads_host = true; return true;
	case IR_F_HEADER:
		*hdr = header_index(x, e->args[0]->str, e->args[0]->str_len, e->args[0]->loc);
		return *hdr >= 0;
	case IR_F_CLAIM:
		*hdr = claim_index(x, jwt_of(x, e->lhs), e->args[0]);
		return *hdr >= 0;
	}
	return false;
}

static const char *const method_names[] = {
	[L7_M_GET] = "GET", [L7_M_HEAD] = "HEAD", [L7_M_POST] = "POST", [L7_M_PUT] = "PUT",
	[L7_M_DELETE] = "DELETE", [L7_M_CONNECT] = "CONNECT", [L7_M_OPTIONS] = "OPTIONS",
	[L7_M_TRACE] = "TRACE", [L7_M_PATCH] = "PATCH",
};

static const struct ir_regex *regex_src(struct lx *x, const char *src, size_t len, const struct l7_expr *lit);
static struct ir_cond *grpc_cond(struct lx *x, enum ir_cond_kind k, int f, const struct l7_expr *lit, unsigned line);

static struct ir_cond *str_cond(struct lx *x, enum ir_cond_kind k, const struct l7_expr *fe,
				const struct l7_expr *lit, unsigned line)
{
	enum ir_field f;
	int hdr = 0;
	if (!field_of(x, fe, &f, &hdr))
		return cond_new(x, IR_C_FALSE, line);
	if ((int)f > IR_F_LAST)
		return grpc_cond(x, k, (int)f, lit, line);
	if (f == IR_F_METHOD && k == IR_C_STR_EQ)
		for (unsigned m = 1; m < sizeof(method_names) / sizeof(method_names[0]); m++)
			if (lit->str_len == strlen(method_names[m]) && !memcmp(lit->str, method_names[m], lit->str_len)) {
				struct ir_cond *c = cond_new(x, IR_C_METHOD_IS, line);
				c->method = m;
				return c;
			}
	if (lit->str_len >= L7_MAX_HEAD) {
		l7_diag(x->d, L7_ERROR, lit->loc, "string longer than the data plane's head limit (%d bytes)", L7_MAX_HEAD);
		return cond_new(x, IR_C_FALSE, line);
	}
	struct ir_cond *c = cond_new(x, k, line);
	c->field = f;
	c->header = hdr;
	c->str = dup(x, lit->str, lit->str_len);
	c->len = lit->str_len;
	return c;
}

static unsigned be32(unsigned host) { return __builtin_bswap32(host); }

/* client address in a.b.c.d/len */
static struct ir_cond *source_in(struct lx *x, const struct l7_expr *lit, unsigned line)
{
	struct ir_cond *c = cond_new(x, IR_C_SOURCE_IN, line);
	unsigned bits = lit->kind == E_IP ? 32 : (unsigned)lit->num2;
	unsigned mask = bits ? ~0u << (32 - bits) : 0;
	c->netmask = be32(mask);
	c->net = be32(lit->ip & mask);
	return c;
}

/* lo <= an int field <= hi, clamped to the field's range 0..max */
static struct ir_cond *int_in(struct lx *x, enum ir_cond_kind kind, long long lo, long long hi, long long max,
			      unsigned line)
{
	if (lo < 0)
		lo = 0;
	if (hi > max)
		hi = max;
	if (lo > hi)
		return cond_new(x, IR_C_FALSE, line);
	struct ir_cond *c = cond_new(x, kind, line);
	c->lo = (unsigned)lo;
	c->hi = (unsigned)hi;
	return c;
}

/* Names the counter or timer on every leaf of c. */
static void set_state(struct ir_cond *c, int state)
{
	if (!c)
		return;
	c->state = state;
	set_state(c->a, state);
	set_state(c->b, state);
}

/* An int field compared with constants: `port >= 8000`, `hits.value in 0..10`, `port in [80, 443]`. */
static struct ir_cond *int_compare(struct lx *x, enum ir_cond_kind kind, long long max, const struct l7_expr *e,
				   unsigned line)
{
	const struct l7_expr *r = e->rhs;
	long long v = r->num;
	switch (e->op) {
	case OP_EQ: return int_in(x, kind, v, v, max, line);
	case OP_NE: return cond_not(x, int_in(x, kind, v, v, max, line));
	case OP_LT: return int_in(x, kind, 0, v - 1, max, line);
	case OP_LE: return int_in(x, kind, 0, v, max, line);
	case OP_GT: return int_in(x, kind, v + 1, max, max, line);
	case OP_GE: return int_in(x, kind, v, max, max, line);
	case OP_IN:
		if (r->kind == E_RANGE)
			return int_in(x, kind, r->num, r->num2, max, line);
		if (r->kind == E_LIST) {
			struct ir_cond *acc = cond_new(x, IR_C_FALSE, line);
			for (int i = 0; i < r->nargs; i++)
				acc = cond_bin(x, IR_C_OR, acc, int_in(x, kind, r->args[i]->num, r->args[i]->num, max, line));
			return acc;
		}
		return NULL;
	default: return NULL;
	}
}

/* `request.source in [...]`, `!= 10.0.0.0/8` */
static struct ir_cond *compare_SOURCE(struct lx *x, const struct l7_expr *e, unsigned line)
{
	const struct l7_expr *r = e->rhs;
	struct ir_cond *acc = cond_new(x, IR_C_FALSE, line);
	if (r->kind == E_IP || r->kind == E_CIDR)
		acc = source_in(x, r, line);
	else if (r->kind == E_LIST)
		for (int i = 0; i < r->nargs; i++)
			acc = cond_bin(x, IR_C_OR, acc, source_in(x, r->args[i], line));
	else
		return NULL;
	return e->op == OP_NE ? cond_not(x, acc) : acc;
}

/* request.protocol == "HTTP/2" / != / in [...] (resolve.c checked the names) */
static struct ir_cond *compare_PROTOCOL(struct lx *x, const struct l7_expr *e, unsigned line)
{
	const struct l7_expr *r = e->rhs;
	struct ir_cond *acc = cond_new(x, IR_C_FALSE, line);
	for (int i = 0; i < (r->kind == E_LIST ? r->nargs : 1); i++) {
		const struct l7_expr *v = r->kind == E_LIST ? r->args[i] : r;
		for (unsigned p = 0; v->kind == E_STRING && ir_protocol_name(p); p++)
			if (strlen(ir_protocol_name(p)) == v->str_len && !memcmp(ir_protocol_name(p), v->str, v->str_len)) {
				struct ir_cond *c = cond_new(x, IR_C_PROTOCOL, line);
				c->lo = p;
				acc = cond_bin(x, IR_C_OR, acc, c);
			}
	}
	return e->op == OP_NE ? cond_not(x, acc) : acc;
}

static struct ir_cond *compare_PORT(struct lx *x, const struct l7_expr *e, unsigned line)
{
	return int_compare(x, IR_C_PORT_IN, 65535, e, line);
}

/* the counter's value, read by a condition */
static struct ir_cond *compare_COUNTER_VALUE(struct lx *x, const struct l7_expr *e, unsigned line)
{
	const struct l7_expr *l = e->lhs;
	struct ir_cond *c = int_compare(x, IR_C_COUNTER_IN, UINT_MAX, e, line);
	int counter = jwt_of(x, l->lhs);
	if (counter >= L7_MAX_READ_COUNTERS) {
		l7_diag(x->d, L7_ERROR, l->loc, "a policy file may read the value of at most %d counters", L7_MAX_READ_COUNTERS);
		return cond_new(x, IR_C_FALSE, line);
	}
	set_state(c, counter);
	x->p->counters_read |= 1ull << counter;
	return c;
}

/* request.caller == NAME / in [NAME, ...] (resolve.c checked) */
static struct ir_cond *compare_CALLER(struct lx *x, const struct l7_expr *e, unsigned line)
{
	const struct l7_expr *r = e->rhs;
	struct ir_cond *acc = cond_new(x, IR_C_FALSE, line);
	for (int i = 0; i < (r->kind == E_LIST ? r->nargs : 1); i++) {
		struct ir_cond *who = cond_new(x, IR_C_IDENTITY, line);
		who->ident = (r->kind == E_LIST ? r->args[i] : r)->ref_index;
		if (!x->m->nidentities)   /* no identities: every caller is external */
			who = cond_new(x, IR_C_TRUE, line);
		acc = cond_bin(x, IR_C_OR, acc, who);
	}
	return e->op == OP_NE ? cond_not(x, acc) : acc;
}

static struct ir_cond *cond_JWT_VALID(struct lx *x, const struct l7_expr *e, unsigned line)
{
	struct ir_cond *c = cond_new(x, IR_C_JWT_VALID, line);
	c->jwt = jwt_of(x, e->lhs);
	return c;
}

static struct ir_cond *cond_TIMER_ELAPSED(struct lx *x, const struct l7_expr *e, unsigned line)
{
	struct ir_cond *c = cond_new(x, IR_C_TIMER_ELAPSED, line);
	c->state = jwt_of(x, e->lhs);
	c->lo = e->args[0]->num < 0 ? 0 : e->args[0]->num > 31536000 ? 31536000 : (unsigned)e->args[0]->num;
	return c;
}

/* request.is_grpc: the Content-Type is gRPC's ("application/grpc" [("+" / ";") ...], as gRPC
 * servers accept it), compared as sent (gRPC clients send it in lower case). */
static struct ir_cond *cond_IS_GRPC(struct lx *x, const struct l7_expr *e, unsigned line)
{
	static const char ct[] = "content-type", *const forms[] = { "application/grpc", "application/grpc+", "application/grpc;" };
	int h = header_index(x, ct, sizeof(ct) - 1, e->loc);
	struct ir_cond *acc = cond_new(x, IR_C_FALSE, line);
	for (size_t i = 0; h >= 0 && i < sizeof(forms) / sizeof(forms[0]); i++) {
		struct ir_cond *c = cond_new(x, i ? IR_C_STR_PREFIX : IR_C_STR_EQ, line);
		c->field = IR_F_HEADER;
		c->header = h;
		c->str = dup(x, forms[i], strlen(forms[i]));
		c->len = strlen(forms[i]);
		acc = cond_bin(x, IR_C_OR, acc, c);
	}
	return acc;
}

static struct ir_cond *cond_HAS_HEADER(struct lx *x, const struct l7_expr *e, unsigned line)
{
	struct ir_cond *c = cond_new(x, IR_C_HAS_HEADER, line);
	c->header = header_index(x, e->args[0]->str, e->args[0]->str_len, e->args[0]->loc);
	return c->header < 0 ? cond_new(x, IR_C_FALSE, line) : c;
}

/* A claim is read only from a valid token: claim == "x" means valid && claim == "x". */
static struct ir_cond *guard_claim(struct lx *x, const struct l7_expr *fe, struct ir_cond *c)
{
	const struct field_reading *rd = reading(fe);
	if (!rd || rd->string != IR_F_CLAIM || c->kind == IR_C_FALSE)
		return c;
	struct ir_cond *v = cond_new(x, IR_C_JWT_VALID, c->line);
	v->jwt = jwt_of(x, fe->lhs);
	return cond_bin(x, IR_C_AND, v, c);
}

/* ---- regexes ---- */

/* The location of bytes [pos, pos+len) of a string literal's value in the source: the value
 * is what remains after the string's own escapes, so walk the literal as written. */
static size_t raw_offset(const char *raw, size_t rawlen, size_t value_index)
{
	size_t i = 0;
	for (size_t o = 0; o < value_index && i < rawlen; o++)
		i += raw[i] == '\\' && i + 1 < rawlen ? 2 : 1;
	return i;
}

static struct l7_loc loc_in_literal(const struct l7_expr *lit, size_t pos, size_t len)
{
	struct l7_loc loc = lit->loc;
	if (!loc.src || loc.end < loc.start + 2 || loc.end > loc.src->len)
		return loc;
	const char *raw = loc.src->text + loc.start + 1;
	size_t rawlen = loc.end - loc.start - 2;
	size_t start = raw_offset(raw, rawlen, pos), end = raw_offset(raw, rawlen, pos + len);
	loc.start += 1 + (unsigned)start;
	loc.col += 1 + (unsigned)start;
	loc.end = loc.start + (unsigned)(end > start ? end - start : 1);
	return loc;
}

/* The compiled regex of a literal: one DFA per distinct regex of the file. NULL after an error. */
static const struct ir_regex *regex_of(struct lx *x, const struct l7_expr *lit)
{
	return regex_src(x, lit->str, lit->str_len, lit);
}

/* The same for a regex lowering wrote (src), with what the policy wrote (lit) for errors. */
static const struct ir_regex *regex_src(struct lx *x, const char *src, size_t len, const struct l7_expr *lit)
{
	struct ir_program *p = x->p;
	for (int i = 0; i < p->nregexes; i++)
		if (p->regexes[i]->len == len && !memcmp(p->regexes[i]->src, src, len))
			return p->regexes[i];
	struct re_dfa dfa;
	struct re_error err;
	if (re_compile(src, len, &dfa, &err)) {
		l7_diag(x->d, L7_ERROR, loc_in_literal(lit, err.pos, err.len), "%s", err.msg);
		return NULL;
	}
	long total = (long)dfa.nstates * dfa.nclasses;
	for (int i = 0; i < p->nregexes; i++)
		total += (long)p->regexes[i]->dfa.nstates * p->regexes[i]->dfa.nclasses;
	if (total > RE_MAX_TOTAL) {
		l7_diag(x->d, L7_ERROR, lit->loc, "the regexes of this policy file need %ld DFA table entries; the limit is %d", total,
			RE_MAX_TOTAL);
		re_free(&dfa);
		return NULL;
	}
	struct ir_regex *re = alloc(x, sizeof(*re));
	re->index = p->nregexes;
	re->src = dup(x, src, len);
	re->len = len;
	re->dfa = dfa;   /* the tables move into the arena */
	size_t cells = (size_t)dfa.nstates * (size_t)dfa.nclasses;
	re->dfa.next = alloc(x, sizeof(unsigned short) * cells);
	memcpy(re->dfa.next, dfa.next, sizeof(unsigned short) * cells);
	re->dfa.accept = alloc(x, (size_t)dfa.nstates);
	memcpy(re->dfa.accept, dfa.accept, (size_t)dfa.nstates);
	re_free(&dfa);
	struct ir_regex **n = alloc(x, sizeof(*n) * (size_t)(p->nregexes + 1));
	if (p->nregexes)
		memcpy(n, p->regexes, sizeof(*n) * (size_t)p->nregexes);
	n[p->nregexes++] = re;
	p->regexes = n;
	return re;
}

/* ---- gRPC: the service and method of a path /SERVICE/METHOD ----
 * A path is of that form when it is '/', a service, '/', a method, both non-empty and without
 * '/' (gRPC's "/" Service-Name "/" method; the query is not part of the path). The fields are
 * read as conditions on the path, no copy: a service compare is a prefix compare of
 * "/SERVICE/" and the form (a small DFA over the path), a method compare one DFA that checks
 * the form too. The resolver refused names with '/' and empty ones (they never match). */

#define GRPC_FORM "/[^/]+/[^/]+"

static struct ir_cond *regex_cond(struct lx *x, const char *src, size_t len, const struct l7_expr *lit, unsigned line)
{
	const struct ir_regex *re = regex_src(x, src, len, lit);
	if (re && len == strlen(GRPC_FORM) && !memcmp(src, GRPC_FORM, len))
		((struct ir_regex *)re)->shared = true;   /* every service compare tests it */
	if (!re)
		return cond_new(x, IR_C_FALSE, line);
	struct ir_cond *c = cond_new(x, IR_C_REGEX, line);
	c->field = IR_F_PATH;
	c->re = re;
	return c;
}

/* the bytes of s as regex literals: \xHH for all but letters and digits */
static size_t re_quote(char *out, const char *s, size_t n)
{
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char b = (unsigned char)s[i];
		if ((b >= '0' && b <= '9') || ((b | 0x20) >= 'a' && (b | 0x20) <= 'z'))
			out[o++] = (char)b;
		else
			o += (size_t)sprintf(out + o, "\\x%02x", b);
	}
	return o;
}

/* the gRPC field f compared with lit: k is STR_EQ (==, in) or STR_PREFIX (starts_with) */
static struct ir_cond *grpc_cond(struct lx *x, enum ir_cond_kind k, int f, const struct l7_expr *lit, unsigned line)
{
	if (lit->str_len + 2 >= L7_MAX_HEAD)
		return cond_new(x, IR_C_FALSE, line);
	if (f == IR_F_GRPC_SERVICE) {
		struct ir_cond *c = cond_new(x, IR_C_STR_PREFIX, line);
		c->field = IR_F_PATH;
		c->len = lit->str_len + 1 + (k == IR_C_STR_EQ);
		c->str = alloc(x, c->len + 1);
		c->str[0] = '/';
		memcpy(c->str + 1, lit->str, lit->str_len);
		if (k == IR_C_STR_EQ)   /* the whole service: its '/' follows */
			c->str[lit->str_len + 1] = '/';
		return cond_bin(x, IR_C_AND, c, regex_cond(x, GRPC_FORM, strlen(GRPC_FORM), lit, line));
	}
	/* the method: one DFA, "/[^/]+/" then the name (then [^/]* for a prefix) */
	char *re = alloc(x, 16 + 4 * lit->str_len);
	size_t n = (size_t)sprintf(re, "/[^/]+/");
	n += re_quote(re + n, lit->str, lit->str_len);
	if (k == IR_C_STR_PREFIX)
		n += (size_t)sprintf(re + n, lit->str_len ? "[^/]*" : "[^/]+");
	return regex_cond(x, re, n, lit, line);
}

/* matches(grpc field, R): R over the whole service (method): with the form, the regex
 * "/(R)/[^/]+" ("/[^/]+/(R)") can only split the path at its two slashes. */
static struct ir_cond *grpc_matches(struct lx *x, int f, const struct l7_expr *lit, unsigned line)
{
	struct re_dfa dfa;
	struct re_error err;
	if (re_compile(lit->str, lit->str_len, &dfa, &err)) {   /* said at R's own bytes */
		l7_diag(x->d, L7_ERROR, loc_in_literal(lit, err.pos, err.len), "%s", err.msg);
		return cond_new(x, IR_C_TRUE, line);
	}
	re_free(&dfa);
	char *re = alloc(x, lit->str_len + 16);
	int n = f == IR_F_GRPC_SERVICE ? sprintf(re, "/(%.*s)/[^/]+", (int)lit->str_len, lit->str)
				       : sprintf(re, "/[^/]+/(%.*s)", (int)lit->str_len, lit->str);
	return cond_bin(x, IR_C_AND, regex_cond(x, GRPC_FORM, strlen(GRPC_FORM), lit, line),
			regex_cond(x, re, (size_t)n, lit, line));
}

/* `grpc_service == "S"`: S, else NULL (and the same for the method) */
/* The names of `grpc_service == "S"` or `in ["S", ...]` (and the same for the method): a
 * list of constants (*n of them: the literal itself for ==), or NULL. */
static const struct l7_expr *const *grpc_names(const struct l7_expr *e, int f, int *n)
{
	if (e->kind != E_BINARY || (e->op != OP_EQ && e->op != OP_IN))
		return NULL;
	const struct l7_expr *l = e->lhs->kind == E_STRING ? e->rhs : e->lhs, *r = l == e->lhs ? e->rhs : e->lhs;
	if (!reading(l) || reading(l)->string != f)
		return NULL;
	if (e->op == OP_EQ && r->kind == E_STRING) {
		*n = 1;
		return e->rhs == r ? (const struct l7_expr *const *)&e->rhs : (const struct l7_expr *const *)&e->lhs;
	}
	if (e->op == OP_IN && r->kind == E_LIST && l == e->lhs) {
		for (int i = 0; i < r->nargs; i++)
			if (r->args[i]->kind != E_STRING)
				return NULL;
		*n = r->nargs;
		return (const struct l7_expr *const *)r->args;
	}
	return NULL;
}

/* A service compare && a method compare (either order, == or in): the path is one of
 * "/S/M", exact compares (which rule tables can hold), or NULL when e is not such a pair (or
 * names more than 64 calls: then each side as it is). */
static struct ir_cond *grpc_call(struct lx *x, const struct l7_expr *e)
{
	int ns = 0, nm = 0;
	const struct l7_expr *const *svc = grpc_names(e->lhs, IR_F_GRPC_SERVICE, &ns), *const *m = grpc_names(e->rhs, IR_F_GRPC_METHOD, &nm);
	if (!svc || !m) {
		svc = grpc_names(e->rhs, IR_F_GRPC_SERVICE, &ns);
		m = grpc_names(e->lhs, IR_F_GRPC_METHOD, &nm);
	}
	if (!svc || !m || ns * nm > 64)
		return NULL;
	x->p->reads_path = true;
	struct ir_cond *acc = cond_new(x, IR_C_FALSE, e->loc.line);
	for (int i = 0; i < ns; i++)
		for (int k = 0; k < nm; k++) {
			size_t ls = svc[i]->str_len, lm = m[k]->str_len;
			if (ls + lm + 2 >= L7_MAX_HEAD)
				continue;   /* longer than any path */
			struct ir_cond *c = cond_new(x, IR_C_STR_EQ, e->loc.line);
			c->field = IR_F_PATH;
			c->len = ls + lm + 2;
			c->str = alloc(x, c->len + 1);
			c->str[0] = '/';
			memcpy(c->str + 1, svc[i]->str, ls);
			c->str[ls + 1] = '/';
			memcpy(c->str + ls + 2, m[k]->str, lm);
			acc = cond_bin(x, IR_C_OR, acc, c);
		}
	return acc;
}

/* ---- the built-ins of frontend/builtins.def ---- */

/* matches(field, "regex"): the whole value matches. On a constant it folds. */
static struct ir_cond *lower_MATCHES(struct lx *x, const struct l7_expr *e, unsigned line)
{
	const struct l7_expr *fe = e->args[0];
	if (reading(fe) && reading(fe)->string > IR_F_LAST) {   /* a gRPC field: R over its part of the path */
		x->p->reads_path = true;
		return grpc_matches(x, reading(fe)->string, e->args[1], line);
	}
	const struct ir_regex *re = regex_of(x, e->args[1]);
	if (!re)   /* reported; true keeps a follow-on "condition is always false" away */
		return cond_new(x, IR_C_TRUE, line);
	if (fe->kind == E_STRING)
		return cond_new(x, re_match(&re->dfa, (const unsigned char *)fe->str, fe->str_len) ? IR_C_TRUE : IR_C_FALSE, line);
	enum ir_field f;
	int hdr = 0;
	if (!field_of(x, fe, &f, &hdr)) {
		l7_diag(x->d, L7_ERROR, fe->loc, "matches() tests a request field or a constant string");
		return cond_new(x, IR_C_FALSE, line);
	}
	struct ir_cond *c = cond_new(x, IR_C_REGEX, line);
	c->field = f;
	c->header = hdr;
	c->re = re;
	return guard_claim(x, fe, c);
}

static struct ir_cond *lower_STARTS_WITH(struct lx *x, const struct l7_expr *e, unsigned line)
{
	return guard_claim(x, e->args[0], str_cond(x, IR_C_STR_PREFIX, e->args[0], e->args[1], line));
}

static field_cond_fn *const builtin_hooks[] = {
	[B_NONE] = NULL,
#define L7_BUILTIN(e, name, what) [B_##e] = lower_##e,
#include "builtins.def"
#undef L7_BUILTIN
};

static struct ir_cond *lower_cond(struct lx *x, const struct l7_expr *e);

/* The column of the expression a condition came from, for the line info (a line often holds
 * several tests: `if a && b`): the operands are stamped first, by their own lowering, so a
 * node left without one here was made for e itself (an AND of its parts, a list's ORs). */
static void stamp_col(struct ir_cond *c, const struct l7_loc *at)
{
	if (!c || c->col || c->line != at->line)
		return;
	c->col = at->col;
	stamp_col(c->a, at);
	stamp_col(c->b, at);
}

static struct ir_cond *lower_cond_of(struct lx *x, const struct l7_expr *e);

static struct ir_cond *lower_cond(struct lx *x, const struct l7_expr *e)
{
	struct ir_cond *c = lower_cond_of(x, e);
	stamp_col(c, &e->loc);
	return c;
}

static struct ir_cond *lower_cond_of(struct lx *x, const struct l7_expr *e)
{
	unsigned line = e->loc.line;
	switch (e->kind) {
	case E_BOOL:
		return cond_new(x, e->num ? IR_C_TRUE : IR_C_FALSE, line);
	case E_NOT:
		return cond_not(x, lower_cond(x, e->lhs));
	case E_MEMBER:   /* a bool field (auth.valid), or one with arguments (request.has_header("x")) */
	case E_CALL:
		if (reading(e) && reading(e)->cond)
			return reading(e)->cond(x, e, line);
		if (e->kind == E_CALL && e->builtin != B_NONE)
			return builtin_hooks[e->builtin](x, e, line);
		break;
	case E_BINARY: {
		const struct l7_expr *l = e->lhs, *r = e->rhs;
		struct ir_cond *call = e->op == OP_AND ? grpc_call(x, e) : NULL;
		if (call)   /* one compare of the whole path */
			return call;
		if (e->op == OP_AND || e->op == OP_OR) {
			/* left first, in statements of their own: C leaves the order of arguments open,
			 * and lowering numbers headers, claims and regexes as it meets them */
			struct ir_cond *a = lower_cond(x, l);
			struct ir_cond *b = lower_cond(x, r);
			return cond_bin(x, e->op == OP_AND ? IR_C_AND : IR_C_OR, a, b);
		}
		if (reading(l) && reading(l)->compare) {   /* a value compared with constants */
			struct ir_cond *c = reading(l)->compare(x, e, line);
			if (c)
				return c;
		}
		if ((e->op == OP_EQ || e->op == OP_NE) && l->type == T_STRING) {
			if (l->kind == E_STRING && r->kind == E_STRING) {   /* constant: fold */
				bool eq = l->str_len == r->str_len && !memcmp(l->str, r->str, l->str_len);
				return cond_new(x, eq == (e->op == OP_EQ) ? IR_C_TRUE : IR_C_FALSE, line);
			}
			if (l->kind == E_STRING) {
				const struct l7_expr *t = l;
				l = r;
				r = t;
			}
			if (r->kind == E_STRING) {
				struct ir_cond *c = str_cond(x, IR_C_STR_EQ, l, r, line);
				return guard_claim(x, l, e->op == OP_EQ ? c : cond_not(x, c));
			}
			l7_diag(x->d, L7_ERROR, e->loc, "the data plane compares a request field with a constant; comparing two fields is not supported");
			return cond_new(x, IR_C_FALSE, line);
		}
		if (e->op == OP_IN && r->kind == E_LIST && l->type == T_STRING) {
			struct ir_cond *acc = cond_new(x, IR_C_FALSE, line);
			for (int i = 0; i < r->nargs; i++)
				if (r->args[i]->kind == E_STRING)
					acc = cond_bin(x, IR_C_OR, acc, str_cond(x, IR_C_STR_EQ, l, r->args[i], line));
			return guard_claim(x, l, acc);
		}
		if ((e->op == OP_EQ || e->op == OP_NE) && l->kind == E_BOOL && r->kind == E_BOOL)
			return cond_new(x, (l->num == r->num) == (e->op == OP_EQ) ? IR_C_TRUE : IR_C_FALSE, line);
		break;
	}
	default:
		break;
	}
	l7_diag(x->d, L7_ERROR, e->loc, "this condition cannot be evaluated by the kernel data plane yet");
	return cond_new(x, IR_C_FALSE, line);
}

/* ---- mutations ---- */

static int mutation_index(struct lx *x, const struct l7_expr *name, const struct l7_expr *value)
{
	struct ir_program *p = x->p;
	for (int i = 0; i < p->nmutations; i++)
		if (!strcmp(p->mutations[i].name, name->str) && strlen(p->mutations[i].value) == value->str_len &&
		    !memcmp(p->mutations[i].value, value->str, value->str_len))
			return i;
	struct ir_mutation *n = alloc(x, sizeof(*n) * (p->nmutations + 1));
	if (p->nmutations)
		memcpy(n, p->mutations, sizeof(*n) * p->nmutations);
	struct ir_mutation *mu = &n[p->nmutations];
	mu->name = dup(x, name->str, name->str_len);
	mu->value = dup(x, value->str, value->str_len);
	mu->line_len = name->str_len + 2 + value->str_len + 2;
	mu->line = alloc(x, mu->line_len + 1);
	snprintf(mu->line, mu->line_len + 1, "%s: %s\r\n", mu->name, mu->value);
	p->mutations = n;
	return p->nmutations++;
}

/* ---- paths through the body ---- */

struct seq {                       /* the statements still to run on a path */
	const struct l7_stmt *s;
	const struct seq *next;
};

struct path {
	struct ir_cond *cond;
	struct ir_action *actions;
	int nactions;
	struct l7_loc at;              /* of the statement that made the path (its if) */
};

/* Emits the rule for a finished path. Returns whether every request of the path is now taken
 * by some rule (emitted, or the path is empty): what lets later rules skip re-testing it. */
static bool emit_rule(struct lx *x, const struct path *pa, enum ir_term term, int upstream, int status,
		      const char *reason, const struct l7_loc *at)
{
	if (pa->cond->kind == IR_C_FALSE)
		return true;   /* never taken */
	if (term == IR_CONTINUE && pa->nactions == 0)
		return false;  /* a path that does nothing: no rule, and nothing taken */
	if (x->p->nrules >= MAX_RULES) {
		if (!x->too_many)
			l7_diag(x->d, L7_ERROR, x->src->loc, "policy '%s' has more than %d paths; split it", x->src->name, MAX_RULES);
		x->too_many = true;
		return false;
	}
	struct ir_policy *pol = x->pol;
	struct ir_rule *n = pol->rules;
	if ((pol->nrules & (pol->nrules - 1)) == 0) {   /* capacity doubles at powers of two */
		n = alloc(x, sizeof(*n) * (size_t)(pol->nrules ? pol->nrules * 2 : 4));
		if (pol->nrules)
			memcpy(n, pol->rules, sizeof(*n) * pol->nrules);
	}
	struct ir_rule *r = &n[pol->nrules];
	assert(term != IR_FORWARD || (upstream >= 0 && upstream < x->p->nupstreams));
	assert(term != IR_DENY || (status >= 200 && status <= 599));   /* the resolver checked Deny's */
	r->id = ++x->p->nrules;
	r->cond = pa->cond;
	r->actions = pa->actions;
	r->nactions = pa->nactions;
	r->term = term;
	r->upstream = upstream;
	r->status = status;
	r->reason = reason ? dup(x, reason, strlen(reason)) : NULL;
	r->line = at->line;
	r->col = at->col;
	pol->rules = n;
	pol->nrules++;
	return true;
}

static bool lower_seq(struct lx *x, const struct seq *q, struct path pa);

/* ---- the actions of frontend/intrinsics.def: one hook each ---- */

typedef bool lower_action_fn(struct lx *x, const struct l7_stmt *s, const struct seq *rest, struct path pa);

/* A non-terminal action: appended to the path, which goes on with the statements after it. */
static struct ir_action *push_action(struct lx *x, struct path *pa, enum ir_action_kind kind, const struct l7_loc *at)
{
	struct ir_action *n = alloc(x, sizeof(*n) * (pa->nactions + 1));
	if (pa->nactions)
		memcpy(n, pa->actions, sizeof(*n) * pa->nactions);
	struct ir_action *na = &n[pa->nactions];
	memset(na, 0, sizeof(*na));
	na->kind = kind;
	na->line = at->line;
	na->col = at->col;
	pa->actions = n;
	pa->nactions++;
	pa->at = *at;
	return na;
}

static bool lower_mutation(struct lx *x, const struct l7_stmt *s, const struct seq *rest, struct path pa, enum ir_mut_op op)
{
	const struct l7_expr *c = s->call;
	struct ir_action *na = push_action(x, &pa, IR_A_MUTATE, &s->loc);
	na->op = op;
	na->response = c->args[0]->ref == REF_RESP_VAR;
	na->header = na->mutation = -1;
	if (na->op != IR_MUT_ADD) {
		/* the sender's lines of this name must be found to be removed */
		na->header = na->response ? rheader_index(x, c->args[1])
					  : header_index(x, c->args[1]->str, c->args[1]->str_len, c->args[1]->loc);
		if (na->header < 0)
			return false;
	}
	if (na->op != IR_MUT_REMOVE)
		na->mutation = mutation_index(x, c->args[1], c->args[2]);
	return lower_seq(x, rest, pa);
}

static bool lower_SET_HEADER(struct lx *x, const struct l7_stmt *s, const struct seq *rest, struct path pa)
{
	return lower_mutation(x, s, rest, pa, IR_MUT_SET);
}

static bool lower_ADD_HEADER(struct lx *x, const struct l7_stmt *s, const struct seq *rest, struct path pa)
{
	return lower_mutation(x, s, rest, pa, IR_MUT_ADD);
}

static bool lower_REMOVE_HEADER(struct lx *x, const struct l7_stmt *s, const struct seq *rest, struct path pa)
{
	return lower_mutation(x, s, rest, pa, IR_MUT_REMOVE);
}

/* An action on the state instance its first argument names (a counter, a bucket, a timer). */
static struct ir_action *state_action(struct lx *x, const struct l7_stmt *s, struct path *pa, enum ir_action_kind kind)
{
	struct ir_action *na = push_action(x, pa, kind, &s->loc);
	na->counter = na->bucket = na->timer = x->kind_index[x->src->usings[s->call->args[0]->ref_index].instance];
	na->key_field = (enum ir_field)-1;
	return na;
}

static bool lower_COUNT(struct lx *x, const struct l7_stmt *s, const struct seq *rest, struct path pa)
{
	state_action(x, s, &pa, IR_A_COUNT);
	return lower_seq(x, rest, pa);
}

static bool lower_COUNTER_RESET(struct lx *x, const struct l7_stmt *s, const struct seq *rest, struct path pa)
{
	state_action(x, s, &pa, IR_A_COUNTER_RESET);
	return lower_seq(x, rest, pa);
}

static bool lower_TIMER_RESTART(struct lx *x, const struct l7_stmt *s, const struct seq *rest, struct path pa)
{
	state_action(x, s, &pa, IR_A_TIMER_RESTART);
	return lower_seq(x, rest, pa);
}

/* Limit(bucket, key): one bucket for all (a constant key), per client address or per value
 * of a request field */
static bool lower_LIMIT(struct lx *x, const struct l7_stmt *s, const struct seq *rest, struct path pa)
{
	struct ir_action *na = state_action(x, s, &pa, IR_A_LIMIT);
	const struct l7_expr *key = s->call->args[1];
	if (key->ref == REF_FIELD && key->field && key->field->intrinsic == I_SOURCE)
		na->key_source = true;
	else if (key->kind != E_STRING && !field_of(x, key, &na->key_field, &na->key_header))
		return false;
	return lower_seq(x, rest, pa);
}

/* Audit(request): a deny that is not enforced. The path goes on, as if it were not there. */
static bool lower_AUDIT(struct lx *x, const struct l7_stmt *s, const struct seq *rest, struct path pa)
{
	push_action(x, &pa, IR_A_AUDIT, &s->loc);
	return lower_seq(x, rest, pa);
}

/* NoLog(request): the request is not written to the access log; the path goes on. */
static bool lower_NOLOG(struct lx *x, const struct l7_stmt *s, const struct seq *rest, struct path pa)
{
	push_action(x, &pa, IR_A_NOLOG, &s->loc);
	return lower_seq(x, rest, pa);
}

static bool lower_ALLOW(struct lx *x, const struct l7_stmt *s, const struct seq *rest, struct path pa)
{
	(void)rest;
	x->pol->has_allow = true;
	return emit_rule(x, &pa, IR_ALLOW, -1, 0, NULL, &s->loc);
}

static bool lower_ROUTE(struct lx *x, const struct l7_stmt *s, const struct seq *rest, struct path pa)
{
	(void)rest;
	return emit_rule(x, &pa, IR_FORWARD, s->call->args[1]->ref_index, 0, NULL, &s->loc);
}

static bool lower_DENY(struct lx *x, const struct l7_stmt *s, const struct seq *rest, struct path pa)
{
	(void)rest;
	int n = x->pol->nrules;
	bool taken = emit_rule(x, &pa, IR_DENY, -1, (int)s->call->args[1]->num, NULL, &s->loc);
	if (s->call->nargs == 3 && x->pol->nrules > n)   /* DenyGrpc: the status it names */
		x->pol->rules[n].grpc = 1 + (int)s->call->args[2]->num;
	return taken;
}

/* l7_resolve warned about the statement (here it is met once per path through it) */
static bool lower_FALLBACK(struct lx *x, const struct l7_stmt *s, const struct seq *rest, struct path pa)
{
	(void)rest;
	char why[256];
	snprintf(why, sizeof(why), "Fallback() at line %u", s->loc.line);
	return emit_rule(x, &pa, IR_FALLBACK, x->p->fallback, 0, why, &s->loc);
}

static bool lower_PROXY_ONLY(struct lx *x, const struct l7_stmt *s, const struct seq *rest, struct path pa)
{
	(void)rest;
	char why[256];
	snprintf(why, sizeof(why), "action '%s' (line %u) runs only in the fallback proxy", s->action->name, s->loc.line);
	return emit_rule(x, &pa, IR_FALLBACK, x->p->fallback, 0, why, &s->loc);
}

static lower_action_fn *const action_hooks[] = {
	[I_NONE] = NULL,
#define L7_FIELD(e, name, state, how, irf) [I_##e] = NULL,
#define L7_ACTION(e, name, state, flags) [I_##e] = lower_##e,
#include "intrinsics.def"
#undef L7_ACTION
#undef L7_FIELD
};

static bool lower_seq(struct lx *x, const struct seq *q, struct path pa)
{
	if (x->too_many)
		return false;
	if (!q)
		return emit_rule(x, &pa, IR_CONTINUE, -1, 0, NULL, &pa.at);
	const struct l7_stmt *s = q->s;
	switch (s->kind) {
	case S_SECTION:
		if (!strcmp(s->section, "Egress"))
			l7_diag(x->d, L7_WARNING, s->loc, "[Egress] placement: gateway mode enforces every policy at ingress");
		return lower_seq(x, q->next, pa);
	case S_ACTION:
		return s->action && action_hooks[s->action->intrinsic] ? action_hooks[s->action->intrinsic](x, s, q->next, pa)
								       : false;
	case S_BLOCK: {
		/* Splice the block's statements in front of the rest, back to front. */
		const struct seq *head = q->next;
		struct seq *nodes = alloc(x, sizeof(*nodes) * (s->nbody ? s->nbody : 1));
		for (int i = s->nbody - 1; i >= 0; i--) {
			nodes[i].s = s->body[i];
			nodes[i].next = head;
			head = &nodes[i];
		}
		return lower_seq(x, head, pa);
	}
	case S_IF: {
		struct ir_cond *c = lower_cond(x, s->cond);
		struct path yes = pa, no = pa;
		yes.cond = cond_bin(x, IR_C_AND, pa.cond, c);
		yes.at = no.at = s->loc;
		if (c->kind == IR_C_FALSE && s->then)
			l7_diag(x->d, L7_WARNING, s->cond->loc, "condition is always false");
		struct seq then = { s->then, q->next }, other = { s->otherwise, q->next };
		bool yes_taken = lower_seq(x, s->then ? &then : q->next, yes);
		/* Rules keep their order and the first match wins: when the then-branch's rules take
		 * every request with c, the else-branch's rules need not test !c again (an if/else
		 * chain of n rules stays n conditions, not n^2). */
		no.cond = yes_taken ? pa.cond : cond_bin(x, IR_C_AND, pa.cond, cond_not(x, c));
		bool no_taken = lower_seq(x, s->otherwise ? &other : q->next, no);
		return yes_taken && no_taken;
	}
	}
	return false;
}

/* Every policy runs for a request (each to its first matching rule), so the mutations one
 * request can collect are, at most, each policy's longest path summed: past what the data
 * plane applies (L7_MAX_SET, L7_MAX_INSERT bytes of lines), refuse the file rather than drop
 * mutations at run time. */
static void check_mutation_limits(struct lx *x)
{
	const struct ir_program *p = x->p;
	for (int resp = 0; resp < 2; resp++) {
		int count = 0;
		size_t bytes = 0;
		bool said_count = false, said_bytes = false;
		for (int i = 0; i < p->npolicies; i++) {
			int worst = 0;
			size_t worst_bytes = 0;
			unsigned at = 0, at_bytes = 0;
			for (int k = 0; k < p->policies[i].nrules; k++) {
				const struct ir_rule *r = &p->policies[i].rules[k];
				int n = 0;
				size_t b = 0;
				unsigned first = 0;
				for (int a = 0; a < r->nactions; a++) {
					const struct ir_action *ac = &r->actions[a];
					if (ac->kind != IR_A_MUTATE || ac->response != resp)
						continue;
					n++;
					first = first ? first : ac->line;
					if (ac->mutation >= 0)
						b += p->mutations[ac->mutation].line_len;
				}
				if (n > worst) {
					worst = n;
					at = first;
				}
				if (b > worst_bytes) {
					worst_bytes = b;
					at_bytes = first;
				}
			}
			count += worst;
			bytes += worst_bytes;
			if (count > L7_MAX_SET && !said_count) {
				l7_diag(x->d, L7_ERROR, l7_loc_of_line(p->src, at),
					"up to %d %s header mutations can apply to one request here (each policy's longest path, summed over the policies); the data plane applies at most %d",
					count, resp ? "response" : "request", L7_MAX_SET);
				said_count = true;
			}
			if (bytes > L7_MAX_INSERT && !said_bytes) {
				l7_diag(x->d, L7_ERROR, l7_loc_of_line(p->src, at_bytes),
					"up to %zu bytes of %s header lines can be added to one request here; the data plane adds at most %d",
					bytes, resp ? "response" : "request", L7_MAX_INSERT);
				said_bytes = true;
			}
		}
	}
}

/* ---- declarations ---- */

static void copy_target(struct lx *x, struct ir_target *t, const struct l7_decl *d)
{
	t->name = dup(x, d->name, strlen(d->name));
	t->rt = -1;
	if (d->dyn != DYN_NONE) {   /* slots reserved for what l7run finds */
		t->rt = x->nrt++;
		t->rt_kind = d->dyn == DYN_NAME ? IR_RT_NAME : IR_RT_SET;
		t->rt_name = dup(x, d->dyn_name ? d->dyn_name : "", d->dyn_name ? strlen(d->dyn_name) : 0);
		t->rt_port = d->dyn_port;
		t->nendpoints = L7_RT_SLOTS;
		t->endpoints = alloc(x, sizeof(*t->endpoints) * L7_RT_SLOTS);
		for (int i = 0; i < L7_RT_SLOTS; i++)
			t->endpoints[i] = (struct ir_endpoint){ 0, 0, 1 };
	} else {
		t->nendpoints = d->nendpoints;
		t->endpoints = alloc(x, sizeof(*t->endpoints) * (d->nendpoints ? d->nendpoints : 1));
		for (int i = 0; i < d->nendpoints; i++)
			t->endpoints[i] = (struct ir_endpoint){ d->endpoints[i].ip, d->endpoints[i].port, d->endpoints[i].weight };
	}
	t->balance = t->nendpoints <= 1 ? IR_LB_ONE : d->balance == LB_HASH ? IR_LB_HASH : IR_LB_ROUND_ROBIN;
	/* one retry by default wherever there is another endpoint to go to */
	t->retries = d->retries >= 0 ? d->retries : t->nendpoints > 1 ? 1 : 0;
	if (d->health.on) {
		const struct l7_health *h = &d->health;
		t->health = alloc(x, sizeof *t->health);
		*t->health = (struct ir_health){ dup(x, h->path, strlen(h->path)), dup(x, h->host ? h->host : "", h->host ? strlen(h->host) : 0),
						 h->every_ms, h->timeout_ms, h->unhealthy, h->healthy, h->status_lo, h->status_hi };
	}
	t->key_field = -1;
	t->key_header = -1;
	if (t->balance == IR_LB_HASH && d->key == LBK_PATH)
		t->key_field = IR_F_PATH;
	if (t->balance == IR_LB_HASH && d->key == LBK_HEADER)
		t->key_field = IR_F_HEADER;   /* the header joins the vector if a Route uses the set */
}

/* Backend slots: the data plane holds L7_MAX_UPSTREAMS, one per endpoint (fallback included).
 * The declaration whose endpoints do not fit is the one named. */
static void check_slots(struct lx *x)
{
	const struct l7_module *m = x->m;
	int used = m->fallback ? 1 : 0;
	for (int i = 0; i < m->nupstreams; i++) {
		used += m->upstreams[i].dyn != DYN_NONE ? L7_RT_SLOTS : m->upstreams[i].nendpoints;
		if (used > L7_MAX_UPSTREAMS) {
			l7_diag(x->d, L7_ERROR, m->upstreams[i].loc,
				"upstream '%s' does not fit: it brings the endpoints%s to %d, the data plane holds %d backends%s",
				m->upstreams[i].name, m->fallback ? " (fallback proxy included)" : "", used, L7_MAX_UPSTREAMS,
				m->upstreams[i].dyn != DYN_NONE ? " (an upstream with run-time endpoints reserves 6)" : "");
			_Static_assert(L7_RT_SLOTS == 6, "the message above says 6");
			return;
		}
	}
}

/* A header that a hashed set keys on is read only when some rule routes to that set
 * (header-vector minimisation); `hash(header "host")` keys on the Host field the parser
 * always extracts. */
static void balance_keys(struct lx *x)
{
	struct ir_program *p = x->p;
	for (int u = 0; u < x->m->nupstreams; u++) {
		struct ir_target *t = &p->upstreams[u];
		const struct l7_decl *d = &x->m->upstreams[u];
		if (t->balance != IR_LB_HASH || t->key_field != IR_F_HEADER)
			continue;
		bool used = false;
		for (int i = 0; i < p->npolicies && !used; i++)
			for (int k = 0; k < p->policies[i].nrules && !used; k++)
				used = p->policies[i].rules[k].term == IR_FORWARD && p->policies[i].rules[k].upstream == u;
		if (d->key_header_len == 4 && !strncasecmp(d->key_header, "host", 4)) {
			t->key_field = IR_F_HOST;
			p->reads_host |= used;
		} else if (used) {
			t->key_header = header_index(x, d->key_header, d->key_header_len, d->key_loc);
		}
	}
}

/* State instances: each kind numbered on its own (JWT configurations, counters, buckets). */
static void lower_instances(struct lx *x)
{
	const struct l7_module *m = x->m;
	struct ir_program *p = x->p;
	x->kind_index = calloc((size_t)m->ninstances + 1, sizeof(int));
	p->jwts = alloc(x, sizeof(*p->jwts) * (size_t)(m->ninstances + 1));
	p->counters = alloc(x, sizeof(*p->counters) * (size_t)(m->ninstances + 1));
	p->buckets = alloc(x, sizeof(*p->buckets) * (size_t)(m->ninstances + 1));
	p->timers = alloc(x, sizeof(*p->timers) * (size_t)(m->ninstances + 1));
	for (int i = 0; i < m->ninstances; i++) {
		const struct l7_instance *in = &m->instances[i];
		if (!in->iface)
			continue;
		const struct l7_expr *v;
		switch (in->iface->state_kind) {
		case SK_JWT: {
			if (p->njwts == L7_MAX_JWT) {
				l7_diag(x->d, L7_ERROR, in->loc, "at most %d Jwt instances per policy file", L7_MAX_JWT);
				continue;
			}
			struct ir_jwt *j = &p->jwts[p->njwts];
			x->kind_index[i] = p->njwts++;
			j->name = dup(x, in->name, strlen(in->name));
			v = l7_instance_setting(in, "key_file");
			char path[4096], abs[4096];
			const char *slash = strrchr(m->src->path, '/');
			if (v->str[0] == '/')
				snprintf(path, sizeof(path), "%s", v->str);
			else
				snprintf(path, sizeof(path), "%.*s%s", slash ? (int)(slash - m->src->path + 1) : 0, m->src->path, v->str);
			j->key_file = dup(x, realpath(path, abs) ? abs : path, strlen(realpath(path, abs) ? abs : path));
			v = l7_instance_setting(in, "issuer");
			j->issuer = dup(x, v ? v->str : "", v ? v->str_len : 0);
			v = l7_instance_setting(in, "audience");
			j->audience = dup(x, v ? v->str : "", v ? v->str_len : 0);
			v = l7_instance_setting(in, "leeway");
			j->leeway = v ? (unsigned)v->num : 0;
			v = l7_instance_setting(in, "header");
			j->header = v ? header_index(x, v->str, v->str_len, v->loc)
				      : header_index(x, "authorization", 13, in->loc);
			break;
		}
		case SK_COUNTER:
			x->kind_index[i] = p->ncounters;
			p->counters[p->ncounters++] = dup(x, in->name, strlen(in->name));
			break;
		case SK_TIMER:
			if (p->ntimers == L7_MAX_TIMERS) {
				l7_diag(x->d, L7_ERROR, in->loc, "at most %d Timer instances per policy file", L7_MAX_TIMERS);
				continue;
			}
			x->kind_index[i] = p->ntimers;
			p->timers[p->ntimers++] = dup(x, in->name, strlen(in->name));
			break;
		case SK_BUCKET: {
			struct ir_bucket *b = &p->buckets[p->nbuckets];
			x->kind_index[i] = p->nbuckets++;
			b->name = dup(x, in->name, strlen(in->name));
			b->rate = (unsigned)l7_instance_setting(in, "rate")->num;
			v = l7_instance_setting(in, "burst");
			b->burst = v ? (unsigned)v->num : b->rate;
			v = l7_instance_setting(in, "status");
			b->status = v ? (unsigned)v->num : 429;
			break;
		}
		case SK_NONE:
			break;
		}
	}
}

static void lower_identities(struct lx *x)
{
	const struct l7_module *m = x->m;
	struct ir_program *p = x->p;
	p->nidentities = m->nidentities;
	p->identities = alloc(x, sizeof(*p->identities) * (size_t)(m->nidentities + 1));
	for (int i = 0; i < m->nidentities; i++) {
		const struct l7_identity *id = &m->identities[i];
		struct ir_identity *o = &p->identities[i];
		o->name = dup(x, id->name, strlen(id->name));
		o->n = id->n;
		o->nets = alloc(x, sizeof(unsigned) * (size_t)(id->n + 1));
		o->netmasks = alloc(x, sizeof(unsigned) * (size_t)(id->n + 1));
		for (int k = 0; k < id->n; k++) {
			unsigned mask = id->prefixes[k] ? ~0u << (32 - id->prefixes[k]) : 0;
			o->netmasks[k] = be32(mask);
			o->nets[k] = be32(id->ips[k] & mask);
		}
	}
}

/* The services (as a mask) a context pattern selects for one caller. */
static unsigned long long services_for(const struct l7_module *m, regex_t *re, const char *caller)
{
	unsigned long long mask = 0;
	int n = m->nservices ? m->nservices : 1;
	for (int i = 0; i < n && i < 64; i++) {
		char chain[256];
		snprintf(chain, sizeof(chain), "%s->%s", caller, m->nservices ? m->services[i].name : "");
		if (regexec(re, chain, 0, NULL, 0) == 0)
			mask |= 1ull << i;
	}
	return mask;
}

/* context ('regex over caller->callee'): the callee is the service the client connected to;
 * the caller is the identity its address belongs to, or "external". Resolved here against
 * the declared services and identities: the data plane only tests what the pattern leaves. */
static struct ir_cond *context_cond(struct lx *x, const struct l7_policy *pol)
{
	const struct l7_module *m = x->m;
	unsigned line = pol->loc.line;
	if (!pol->context)
		return cond_new(x, IR_C_TRUE, line);
	size_t n = strlen(pol->context) + 8;
	char *anchored = malloc(n);
	snprintf(anchored, n, "^(%s)$", pol->context);
	regex_t re;
	char why[160];
	int rc = l7_context_regcomp(&re, anchored, why, sizeof why);
	free(anchored);
	if (rc)
		return cond_new(x, IR_C_FALSE, line);   /* reported by the front end */
	int ns = m->nservices ? m->nservices : 1;
	unsigned long long all = ns >= 64 ? ~0ull : (1ull << ns) - 1;
	unsigned long long masks[65];
	bool same = true;
	for (int i = 0; i <= m->nidentities && i < 65; i++) {   /* the last "identity" is external */
		masks[i] = services_for(m, &re, i < m->nidentities ? m->identities[i].name : "external");
		same &= masks[i] == masks[0];
	}
	regfree(&re);
	struct ir_cond *acc = cond_new(x, IR_C_FALSE, line);
	bool everything = true, nothing = true;
	for (int i = 0; i <= m->nidentities && i < 65; i++) {
		everything &= masks[i] == all;
		nothing &= masks[i] == 0;
		if (!masks[i])
			continue;
		struct ir_cond *svc = cond_new(x, IR_C_TRUE, line);
		if (masks[i] != all && m->nservices) {
			svc = cond_new(x, IR_C_SERVICE_IN, line);
			svc->mask = masks[i];
		}
		if (same)   /* the caller does not matter: the services decide */
			return svc;
		struct ir_cond *who = cond_new(x, IR_C_TRUE, line);
		if (m->nidentities) {
			who = cond_new(x, IR_C_IDENTITY, line);
			who->ident = i;
		}
		acc = cond_bin(x, IR_C_OR, acc, cond_bin(x, IR_C_AND, who, svc));
	}
	if (nothing)
		l7_diag(x->d, L7_WARNING, pol->context_loc, "context matches none of the declared services and callers; policy '%s' never applies",
			pol->name);
	if (everything)
		return cond_new(x, IR_C_TRUE, line);
	return acc;
}

struct ir_program *ir_lower(const struct l7_module *m, struct l7_diags *d)
{
	int errors_before = d->errors;
	struct ir_program *p = calloc(1, sizeof(*p));
	struct lx x = { .p = p, .m = m, .d = d };
	p->source_path = dup(&x, m->src->path, strlen(m->src->path));
	p->src = m->src;
	p->nservices = m->nservices;
	p->services = alloc(&x, sizeof(*p->services) * (m->nservices + 1));
	for (int i = 0; i < m->nservices; i++)
		copy_target(&x, &p->services[i], &m->services[i]);
	p->nupstreams = m->nupstreams + (m->fallback ? 1 : 0);
	p->upstreams = alloc(&x, sizeof(*p->upstreams) * (p->nupstreams + 1));
	for (int i = 0; i < m->nupstreams; i++)
		copy_target(&x, &p->upstreams[i], &m->upstreams[i]);
	p->fallback = -1;
	if (m->fallback) {   /* the fallback proxy is the last upstream: pooled like any other */
		p->fallback = m->nupstreams;
		copy_target(&x, &p->upstreams[p->fallback], m->fallback);
	}
	lower_instances(&x);
	lower_identities(&x);
	p->policies = alloc(&x, sizeof(*p->policies) * (m->npolicies + 1));
	for (int i = 0; i < m->npolicies; i++) {
		const struct l7_policy *src = &m->policies[i];
		struct ir_policy *pol = &p->policies[p->npolicies++];
		pol->name = dup(&x, src->name, strlen(src->name));
		pol->line = src->loc.line;
		x.pol = pol;
		x.src = src;
		struct path start = { .cond = context_cond(&x, src), .at = src->loc };
		pol->applies = start.cond;
		struct seq body = { src->body, NULL };
		if (src->body)
			lower_seq(&x, &body, start);
		if (pol->has_allow && !p->rbac_rule.line)
			p->rbac_rule.line = pol->line;
	}
	check_slots(&x);
	balance_keys(&x);
	ir_balance_build(p);
	/* Meshlib: an ALLOW policy that applies without allowing denies, before the application */
	p->rbac_rule.term = IR_DENY;
	p->rbac_rule.status = 403;
	p->rbac_rule.cond = cond_new(&x, IR_C_TRUE, 0);
	/* Like a gateway with no matching route: 404, never forwarded unchecked. */
	p->default_rule = (struct ir_rule){ .id = 0, .term = IR_DENY, .status = 404, .line = 0 };
	p->default_rule.cond = cond_new(&x, IR_C_TRUE, 0);
	check_mutation_limits(&x);
	free(x.kind_index);
	if (d->errors > errors_before) {
		ir_free(p);
		return NULL;
	}
	return p;
}

