/* Conditions: built from the YAML with late-bound atoms (callers, JWT claims), bound once the
 * classes and the Jwt instances are known, folded, and printed as readable .l7. */
#include "model.h"

#include <stdarg.h>
#include <string.h>

#include "regex_dfa.h"

struct cnode *c_new(struct ictx *x, enum ckind k)
{
	struct cnode *c = l7_alloc(x->a, sizeof(*c));
	c->k = k;
	return c;
}

struct cnode *c_text(struct ictx *x, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	struct cnode *c = c_new(x, CK_TEXT);
	c->text = vxprintf(x, fmt, ap);
	va_end(ap);
	return c;
}

struct cnode *c_cmp(struct ictx *x, const char *lhs, bool eq, const char *rhs)
{
	struct cnode *c = c_text(x, "%s %s %s", lhs, eq ? "==" : "!=", rhs);
	c->negated = xprintf(x, "%s %s %s", lhs, eq ? "!=" : "==", rhs);
	return c;
}

static void push(struct ictx *x, struct cnode *p, struct cnode *c)
{
	struct cnode **a = l7_alloc(x->a, sizeof(*a) * (size_t)(p->n + 1));
	if (p->n)
		memcpy(a, p->a, sizeof(*a) * (size_t)p->n);
	a[p->n++] = c;
	p->a = a;
}

struct cnode *c_bin(struct ictx *x, enum ckind k, struct cnode *a, struct cnode *b)
{
	struct cnode *c = c_new(x, k);
	for (int side = 0; side < 2; side++) {
		struct cnode *s = side ? b : a;
		if (!s)
			continue;
		if (s->k == k && !s->comment)
			for (int i = 0; i < s->n; i++)
				push(x, c, s->a[i]);
		else
			push(x, c, s);
	}
	return c;
}

struct cnode *c_not(struct ictx *x, struct cnode *a)
{
	struct cnode *c = c_new(x, CK_NOT);
	push(x, c, a);
	return c;
}

struct cnode *c_caller(struct ictx *x, const struct lset *who)
{
	struct cnode *c = c_new(x, CK_CALLER);
	c->who = who;
	return c;
}

const char *l7_quote(struct ictx *x, const char *s, size_t n)
{
	char *o = l7_alloc(x->a, 2 * n + 3), *p = o;
	*p++ = '"';
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];
		const char *e = ch == '"' ? "\\\"" : ch == '\\' ? "\\\\" : ch == '\t' ? "\\t" : NULL;
		if (e) {
			memcpy(p, e, 2);
			p += 2;
		} else if (ch < 0x20 || ch == 0x7f) {
			return NULL;   /* nothing a request field holds: the caller reports it */
		} else {
			*p++ = (char)ch;
		}
	}
	*p++ = '"';
	*p = 0;
	return o;
}

const char *re_literal(struct ictx *x, const char *s, bool ci)
{
	size_t n = strlen(s);
	char *o = l7_alloc(x->a, 6 * n + 1), *p = o;
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];
		bool alpha = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z');
		if (ci && alpha)
			p += sprintf(p, "[%c%c]", ch | 32, ch & ~32);
		else if (ch < 0x20 || ch >= 0x7f)
			p += sprintf(p, "\\x%02x", ch);
		else if (strchr("\\.[](){}*+?|^$", ch))
			p += sprintf(p, "\\%c", ch);
		else
			*p++ = (char)ch;
	}
	*p = 0;
	return o;
}

enum smatch smatch_of(struct ictx *x, const char *v, const char **lit)
{
	size_t n = strlen(v);
	*lit = v;
	if (!strcmp(v, "*"))
		return SM_PRESENT;
	if (n && v[0] == '*') {   /* Istio: a leading '*' first, so "*a*" is the suffix "a*" */
		*lit = v + 1;
		return SM_SUFFIX;
	}
	if (n && v[n - 1] == '*') {
		*lit = l7_strndup(x->a, v, n - 1);
		return SM_PREFIX;
	}
	return SM_EXACT;
}

struct cnode *c_match(struct ictx *x, const char *field, enum smatch m, const char *v, bool ci)
{
	if (m == SM_PRESENT)
		return c_cmp(x, field, false, "\"\"");
	size_t n = strlen(v);
	if (!ci && m == SM_EXACT)
		return c_cmp(x, field, true, l7_quote(x, v, n));
	if (!ci && m == SM_PREFIX)
		return c_text(x, "starts_with(%s, %s)", field, l7_quote(x, v, n));
	const char *re = re_literal(x, v, ci);
	re = m == SM_EXACT ? re : m == SM_PREFIX ? xprintf(x, "%s.*", re) : xprintf(x, ".*%s", re);
	return c_text(x, "matches(%s, %s)", field, l7_quote(x, re, strlen(re)));
}

bool re_ok(struct ictx *x, const char *re, struct l7_loc at, const char *what)
{
	for (int i = 0; i < x->nregexes; i++)
		if (!strcmp(x->regexes[i], re))
			return true;   /* l7c compiles each distinct regex once */
	struct re_dfa dfa;
	struct re_error err;
	if (re_compile(re, strlen(re), &dfa, &err)) {
		l7_diag(x->d, L7_ERROR, at, "%s: %s", what, err.msg);
		return false;
	}
	long cost = (long)dfa.nstates * dfa.nclasses;
	re_free(&dfa);
	const char **n = l7_alloc(x->a, sizeof(*n) * (size_t)(x->nregexes + 1));
	if (x->nregexes)
		memcpy(n, x->regexes, sizeof(*n) * (size_t)x->nregexes);
	n[x->nregexes++] = xprintf(x, "%s", re);
	x->regexes = n;
	if ((x->re_total += cost) > RE_MAX_TOTAL) {
		l7_diag(x->d, L7_ERROR, at, "%s: the regexes of the policy need more than %d DFA transitions in all (the data "
			"plane's limit)", what, RE_MAX_TOTAL);
		return false;
	}
	return true;
}

bool match_ok(struct ictx *x, enum smatch m, const char *lit, bool ci, struct l7_loc at)
{
	if (m == SM_PRESENT || (!ci && (m == SM_EXACT || m == SM_PREFIX)))
		return true;   /* no regex */
	const char *re = re_literal(x, lit, ci);
	re = m == SM_EXACT ? re : m == SM_PREFIX ? xprintf(x, "%s.*", re) : xprintf(x, ".*%s", re);
	return re_ok(x, re, at, "the regex this value matches with");
}


bool c_uses(const struct cnode *c, enum ckind k)
{
	if (c->k == k || (k == CK_CLAIM && c->k == CK_REQP))
		return true;
	for (int i = 0; i < c->n; i++)
		if (c_uses(c->a[i], k))
			return true;
	return false;
}

struct cnode *c_port(struct ictx *x, int lo, int hi)
{
	struct cnode *c = c_new(x, CK_PORT);
	c->lo = lo;
	c->hi = hi;
	return c;
}

/* ---- binding and folding ---- */

static struct cnode *fold(struct ictx *x, struct cnode *c)
{
	if (c->k == CK_NOT) {
		struct cnode *a = c->a[0];
		if (a->k == CK_TRUE || a->k == CK_FALSE)
			return c_new(x, a->k == CK_TRUE ? CK_FALSE : CK_TRUE);
		if (a->k == CK_NOT)
			return a->a[0];
		return c;
	}
	if (c->k != CK_AND && c->k != CK_OR)
		return c;
	enum ckind unit = c->k == CK_AND ? CK_TRUE : CK_FALSE, zero = c->k == CK_AND ? CK_FALSE : CK_TRUE;
	struct cnode *r = c_new(x, c->k);
	r->comment = c->comment;
	for (int i = 0; i < c->n; i++) {
		struct cnode *a = c->a[i];
		if (a->k == zero)
			return c_new(x, zero);
		if (a->k == unit)
			continue;
		if (a->k == c->k && !a->comment)
			for (int j = 0; j < a->n; j++)
				push(x, r, a->a[j]);
		else
			push(x, r, a);
	}
	if (!r->n)
		return c_new(x, unit);
	if (r->n == 1 && !(r->comment && !r->a[0]->comment)) {
		if (!r->a[0]->comment)
			r->a[0]->comment = r->comment;
		return r->a[0];
	}
	return r;
}

struct cnode *c_bind(struct ictx *x, const struct cnode *c, const struct benv *env)
{
	static const struct benv none = { NULL, 0, 0 };
	env = env ? env : &none;
	const int *jwt = env->jwt;
	int njwt = env->njwt;
	struct cnode *r;
	switch (c->k) {
	case CK_CALLER: {
		const char *list = "";
		int hits = 0;
		for (int i = 0; i < x->nids; i++)
			if (lset_sub(c->who, x->ids[i].l)) {
				list = xprintf(x, "%s%s%s", list, hits ? ", " : "", x->ids[i].name);
				hits++;
			}
		r = !hits ? c_new(x, CK_FALSE)
		  : hits == x->nids && hits > 1 ? c_cmp(x, "request.caller", false, "external")
		  : hits == 1 ? c_cmp(x, "request.caller", true, list) : c_text(x, "request.caller in [%s]", list);
		break;
	}
	case CK_ANY_AUTH: {   /* any identity; namespaces ["*"] (c->m): one with a namespace */
		const char *list = "";
		int hits = 0;
		for (int i = 0; i < x->nids; i++)
			if (!c->m || !lset_get(x->ids[i].l, PRINCIPAL_KEY)) {
				list = xprintf(x, "%s%s%s", list, hits ? ", " : "", x->ids[i].name);
				hits++;
			}
		r = !hits ? c_new(x, CK_FALSE)
		  : hits == x->nids ? c_cmp(x, "request.caller", false, "external")
		  : hits == 1 ? c_cmp(x, "request.caller", true, list) : c_text(x, "request.caller in [%s]", list);
		break;
	}
	case CK_CLAIM:
		r = c_new(x, CK_OR);
		for (int i = 0; i < njwt; i++) {
			const char *inst = x->jwts[jwt[i]].name;
			/* a valid token's iss is the instance's issuer: decided here, no claim read */
			const char *iss = x->jwts[jwt[i]].issuer;
			if (!strcmp(c->claim, "iss") && iss) {
				size_t il = strlen(iss), vl = strlen(c->val);
				bool hit = c->m == SM_PRESENT ? il > 0
					 : c->m == SM_EXACT ? !strcmp(iss, c->val)
					 : c->m == SM_PREFIX ? il >= vl && !strncmp(iss, c->val, vl)
							     : il >= vl && !strcmp(iss + il - vl, c->val);
				if (hit)
					push(x, r, c_text(x, "%s.valid", inst));
				continue;
			}
			if (c->m == SM_SUFFIX && !*c->val) {   /* ends with "": any value (present is implied below) */
				push(x, r, c_text(x, "%s.valid", inst));
				continue;
			}
			const char *pairname = xprintf(x, "%s.%s", inst, c->claim);
			bool seen = !x->count_claims;
			for (int k = 0; k < x->nclaim_names && !seen; k++)
				seen = !strcmp(x->claim_names[k], pairname);
			if (!seen) {
				const char **nn = l7_alloc(x->a, sizeof(*nn) * (size_t)(x->nclaim_names + 1));
				if (x->nclaim_names)
					memcpy(nn, x->claim_names, sizeof(*nn) * (size_t)x->nclaim_names);
				nn[x->nclaim_names++] = pairname;
				x->claim_names = nn;
			}
			push(x, r, c_match(x, xprintf(x, "%s.claim(%s)", inst, l7_quote(x, c->claim, strlen(c->claim))), c->m,
						   c->val, false));
		}
		r = fold(x, r);
		break;
	case CK_REQP:   /* ISS/SUB, ISS the instance's issuer: a compare of its sub claim at most */
		r = c_new(x, CK_OR);
		for (int i = 0; i < njwt; i++) {
			const char *inst = x->jwts[jwt[i]].name, *iss = x->jwts[jwt[i]].issuer, *v = c->val;
			size_t il = strlen(iss), vl = strlen(v);
			struct cnode *sub = c_new(x, CK_CLAIM);
			sub->claim = "sub";
			sub->m = SM_PRESENT;
			sub->val = "";
			if (c->m == SM_EXACT || c->m == SM_PREFIX) {
				if (c->m == SM_PREFIX && il >= vl && !strncmp(iss, v, vl))
					;   /* ISS itself starts with it: any sub */
				else if (vl > il && !strncmp(iss, v, il) && v[il] == '/' && (v[il + 1] || c->m == SM_PREFIX))
					sub->m = c->m, sub->val = v + il + 1;
				else
					continue;
				if (sub->m == SM_PREFIX && !*sub->val)
					sub->m = SM_PRESENT;
			} else if (c->m == SM_SUFFIX) {   /* SUB ends with it, or it is T/SUB with ISS ending in T */
				struct cnode *any = c_new(x, CK_OR);
				struct cnode *ends = c_new(x, CK_CLAIM);
				*ends = (struct cnode){ .k = CK_CLAIM, .claim = "sub", .m = *v ? SM_SUFFIX : SM_PRESENT, .val = v };
				push(x, any, ends);
				for (size_t k = 0; k < vl; k++)
					if (v[k] == '/' && il >= k && !strncmp(iss + il - k, v, k) && v[k + 1]) {
						struct cnode *eq = c_new(x, CK_CLAIM);
						*eq = (struct cnode){ .k = CK_CLAIM, .claim = "sub", .m = SM_EXACT, .val = v + k + 1 };
						push(x, any, eq);
					}
				sub = any;
			}
			struct benv one = { &jwt[i], 1, env->port };
			push(x, r, c_bind(x, sub, &one));
			(void)inst;
		}
		r = fold(x, r);
		break;
	case CK_PORT:   /* folded where the services have one port: no test of request.port left */
		if (env->port)
			r = c_new(x, env->port >= c->lo && env->port <= c->hi ? CK_TRUE : CK_FALSE);
		else
			r = c->lo == c->hi ? c_text(x, "request.port == %d", c->lo) : c_text(x, "request.port in %d..%d", c->lo, c->hi);
		break;
	case CK_AND:
	case CK_OR:
	case CK_NOT:
		r = c_new(x, c->k);
		for (int i = 0; i < c->n; i++)
			push(x, r, c_bind(x, c->a[i], env));
		r->comment = c->comment;
		r = fold(x, r);
		break;
	default:
		r = c_new(x, c->k);
		r->text = c->text;
		r->negated = c->negated;
		break;
	}
	if (c->comment && !r->comment)
		r->comment = c->comment;
	return r;
}

/* ---- printing ---- */

enum { P_OR = 1, P_AND = 2, P_UNARY = 3 };

static int prec(const struct cnode *c)
{
	return c->k == CK_OR ? P_OR : c->k == CK_AND ? P_AND : P_UNARY;
}

static const char *flat(struct ictx *x, const struct cnode *c)
{
	switch (c->k) {
	case CK_TRUE: return "true";
	case CK_FALSE: return "false";
	case CK_TEXT: return c->text;
	case CK_NOT: {
		const struct cnode *a = c->a[0];
		if (a->k == CK_TEXT && a->negated)
			return a->negated;
		bool simple = a->k == CK_TEXT && !strchr(a->text, ' ');
		return xprintf(x, simple ? "!%s" : "!(%s)", flat(x, a));
	}
	case CK_AND:
	case CK_OR: {
		const char *s = "";
		for (int i = 0; i < c->n; i++) {
			const char *k = flat(x, c->a[i]);
			if (prec(c->a[i]) < prec(c) || (c->k == CK_OR && c->a[i]->k == CK_AND))   /* (a && b) || c: clearer */
				k = xprintf(x, "(%s)", k);
			s = xprintf(x, "%s%s%s", s, i ? (c->k == CK_AND ? " && " : " || ") : "", k);
		}
		return s;
	}
	default:
		return "false";   /* unbound: never printed (c_bind binds every atom) */
	}
}

static bool has_comments(const struct cnode *c)
{
	for (int i = 0; i < c->n; i++)
		if (c->a[i]->comment)
			return true;
	return false;
}

void c_print(struct ictx *x, FILE *o, const struct cnode *c, int indent)
{
	const char *s = flat(x, c);
	if ((c->k != CK_AND && c->k != CK_OR) || (strlen(s) + (size_t)indent <= 100 && !has_comments(c))) {
		fputs(s, o);
		return;
	}
	for (int i = 0; i < c->n; i++) {
		const struct cnode *a = c->a[i];
		if (i)
			fprintf(o, "\n%*s", indent, "");
		if (a->comment)
			fprintf(o, "// %s\n%*s", a->comment, indent, "");
		bool paren = prec(a) < prec(c) || (c->k == CK_OR && a->k == CK_AND);
		if (paren)   /* a comment of its first operand goes on a line of its own */
			fprintf(o, (a->k == CK_AND || a->k == CK_OR) && a->n && a->a[0]->comment ? "(\n%*s" : "(", indent + 1, "");
		c_print(x, o, a, indent + paren);
		if (paren)
			fputc(')', o);
		if (i < c->n - 1)
			fputs(c->k == CK_AND ? " &&" : " ||", o);
	}
}
