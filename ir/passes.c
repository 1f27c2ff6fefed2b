/* Partial evaluation over what the policy fixes at compile time. Each pass rewrites the rules
 * of every policy and keeps first-match semantics (the evaluator decides identically before
 * and after: tests/compiler property test). The pass order is the table at the bottom. */
#include "ir.h"

#include <stdlib.h>
#include <string.h>

#include "frontend.h"

#define MAX_TERMS 256

/* ---- conditions as conjunct lists ---- */

static bool cond_eq(const struct ir_cond *a, const struct ir_cond *b)
{
	if (a == b)
		return true;
	if (a->kind != b->kind)
		return false;
	switch (a->kind) {
	case IR_C_TRUE:
	case IR_C_FALSE: return true;
	case IR_C_NOT: return cond_eq(a->a, b->a);
	case IR_C_AND:
	case IR_C_OR: return cond_eq(a->a, b->a) && cond_eq(a->b, b->b);
	case IR_C_STR_EQ:
	case IR_C_STR_PREFIX:
		return a->field == b->field && (a->field < IR_F_HEADER || a->header == b->header) && a->len == b->len &&
		       !memcmp(a->str, b->str, a->len);
	case IR_C_METHOD_IS: return a->method == b->method;
	case IR_C_SERVICE_IN: return a->mask == b->mask;
	case IR_C_HAS_HEADER: return a->header == b->header;
	case IR_C_SOURCE_IN: return a->net == b->net && a->netmask == b->netmask;
	case IR_C_PORT_IN: return a->lo == b->lo && a->hi == b->hi;
	case IR_C_JWT_VALID: return a->jwt == b->jwt;
	case IR_C_IDENTITY: return a->ident == b->ident;
	}
	return false;
}

struct terms {
	const struct ir_cond *t[MAX_TERMS];
	int n;
	bool overflow;
};

static void flatten(const struct ir_cond *c, struct terms *out)
{
	if (c->kind == IR_C_AND) {
		flatten(c->a, out);
		flatten(c->b, out);
		return;
	}
	if (c->kind == IR_C_TRUE)
		return;
	for (int i = 0; i < out->n; i++)
		if (cond_eq(out->t[i], c))
			return;   /* x && x */
	if (out->n == MAX_TERMS) {
		out->overflow = true;
		return;
	}
	out->t[out->n++] = c;
}

static struct ir_cond *rebuild(struct ir_program *p, const struct terms *s, unsigned line)
{
	struct ir_cond *acc = NULL;
	for (int i = s->n - 1; i >= 0; i--) {
		if (!acc) {
			acc = (struct ir_cond *)s->t[i];
			continue;
		}
		struct ir_cond *c = l7_alloc(&p->arena, sizeof(*c));
		c->kind = IR_C_AND;
		c->a = (struct ir_cond *)s->t[i];
		c->b = acc;
		c->line = s->t[i]->line;
		acc = c;
	}
	if (!acc) {
		acc = l7_alloc(&p->arena, sizeof(*acc));
		acc->kind = IR_C_TRUE;
		acc->line = line;
	}
	return acc;
}

/* Two facts about one field that cannot both hold. */
static bool contradict(const struct ir_cond *a, const struct ir_cond *b)
{
	bool same_field = a->field == b->field && (a->field < IR_F_HEADER || a->header == b->header);
	if (a->kind == IR_C_METHOD_IS && b->kind == IR_C_METHOD_IS)
		return a->method != b->method;
	if (a->kind == IR_C_IDENTITY && b->kind == IR_C_IDENTITY)
		return false;   /* identities may overlap */
	if (a->kind == IR_C_PORT_IN && b->kind == IR_C_PORT_IN)
		return a->hi < b->lo || b->hi < a->lo;
	if (a->kind == IR_C_SOURCE_IN && b->kind == IR_C_SOURCE_IN)
		return ((a->net ^ b->net) & a->netmask & b->netmask) != 0;
	if (a->kind == IR_C_NOT && cond_eq(a->a, b))
		return true;
	if (b->kind == IR_C_NOT && cond_eq(b->a, a))
		return true;
	if (!same_field)
		return false;
	if (a->kind == IR_C_STR_EQ && b->kind == IR_C_STR_EQ)
		return a->len != b->len || memcmp(a->str, b->str, a->len);
	if (a->kind == IR_C_STR_EQ && b->kind == IR_C_STR_PREFIX)
		return a->len < b->len || memcmp(a->str, b->str, b->len);
	if (a->kind == IR_C_STR_PREFIX && b->kind == IR_C_STR_EQ)
		return contradict(b, a);
	if (a->kind == IR_C_STR_PREFIX && b->kind == IR_C_STR_PREFIX) {
		size_t n = a->len < b->len ? a->len : b->len;
		return memcmp(a->str, b->str, n) != 0;
	}
	return false;
}

/* A conjunction that can never hold. */
static bool never_holds(const struct ir_cond *c)
{
	struct terms s = { .n = 0 };
	flatten(c, &s);
	if (s.overflow)
		return false;
	for (int a = 0; a < s.n; a++) {
		if (s.t[a]->kind == IR_C_FALSE)
			return true;
		for (int b = a + 1; b < s.n; b++)
			if (contradict(s.t[a], s.t[b]))
				return true;
	}
	return false;
}

/* a implies b (so b is redundant next to a) */
static bool implies(const struct ir_cond *a, const struct ir_cond *b)
{
	if (cond_eq(a, b))
		return true;
	if (a->kind == IR_C_PORT_IN && b->kind == IR_C_PORT_IN)
		return a->lo >= b->lo && a->hi <= b->hi;
	if (a->kind == IR_C_SOURCE_IN && b->kind == IR_C_SOURCE_IN)   /* a narrower prefix inside b */
		return (a->netmask & b->netmask) == b->netmask && (a->net & b->netmask) == b->net;
	bool same_field = a->field == b->field && (a->field < IR_F_HEADER || a->header == b->header);
	if (!same_field || b->kind != IR_C_STR_PREFIX)
		return false;
	if (a->kind != IR_C_STR_EQ && a->kind != IR_C_STR_PREFIX)
		return false;
	return a->len >= b->len && !memcmp(a->str, b->str, b->len);
}

static void remove_rule(struct ir_policy *pol, int k)
{
	memmove(&pol->rules[k], &pol->rules[k + 1], sizeof(pol->rules[0]) * (size_t)(pol->nrules - k - 1));
	pol->nrules--;
}

/* ---- pass: simplify ----
 * Per rule: flatten the conjunction, drop duplicates and implied facts (a path equal to "/a/b"
 * needs no "starts with /a" beside it), and remove rules whose facts contradict (path equal to
 * two different strings): those never match. */
static void pass_simplify(struct ir_program *p, struct l7_diags *d)
{
	for (int i = 0; i < p->npolicies; i++) {
		struct ir_policy *pol = &p->policies[i];
		for (int k = 0; k < pol->nrules; k++) {
			struct ir_rule *r = &pol->rules[k];
			struct terms s = { .n = 0 };
			flatten(r->cond, &s);
			if (s.overflow)
				continue;
			if (never_holds(r->cond)) {
				if (d)
					l7_diag(d, L7_WARNING, l7_loc_of_line(p->src, r->line),
						"this rule can never match (its conditions contradict each other); removed");
				remove_rule(pol, k--);
				continue;
			}
			struct terms kept = { .n = 0 };
			for (int a = 0; a < s.n; a++) {
				/* !(x && y) where x && y never holds is always true */
				bool redundant = s.t[a]->kind == IR_C_NOT && never_holds(s.t[a]->a);
				for (int b = 0; b < s.n && !redundant; b++)
					redundant = b != a && implies(s.t[b], s.t[a]) && (!cond_eq(s.t[a], s.t[b]) || b < a);
				if (!redundant)
					kept.t[kept.n++] = s.t[a];
			}
			r->cond = rebuild(p, &kept, r->line);
		}
	}
}

/* ---- pass: first-match ----
 * Rules are tried in order and the first match wins, so a rule need not re-check that earlier
 * rules failed: a conjunct !X of rule k goes when some earlier rule j matches every request of
 * X && (the rest of k) — then those requests never reach k. This removes the negated prefixes
 * that if/else chains leave behind. */
static void pass_first_match(struct ir_program *p, struct l7_diags *d)
{
	(void)d;
	for (int i = 0; i < p->npolicies; i++) {
		struct ir_policy *pol = &p->policies[i];
		for (int k = 1; k < pol->nrules; k++) {
			struct ir_rule *r = &pol->rules[k];
			struct terms s = { .n = 0 };
			flatten(r->cond, &s);
			if (s.overflow)
				continue;
			for (int t = 0; t < s.n; t++) {
				if (s.t[t]->kind != IR_C_NOT)
					continue;
				/* the requests !X excludes: X plus every other conjunct of k */
				struct terms region = { .n = 0 };
				for (int o = 0; o < s.n; o++)
					if (o != t)
						flatten(s.t[o], &region);
				flatten(s.t[t]->a, &region);
				bool captured = false;
				for (int j = 0; j < k && !captured && !region.overflow; j++) {
					struct terms cj = { .n = 0 };
					flatten(pol->rules[j].cond, &cj);
					captured = !cj.overflow;
					for (int c = 0; c < cj.n && captured; c++) {
						bool covered = false;
						for (int q = 0; q < region.n && !covered; q++)
							covered = implies(region.t[q], cj.t[c]);
						captured = covered;
					}
				}
				if (captured) {
					memmove(&s.t[t], &s.t[t + 1], sizeof(s.t[0]) * (size_t)(s.n - t - 1));
					s.n--;
					t--;
				}
			}
			r->cond = rebuild(p, &s, r->line);
		}
	}
}

/* ---- pass: shadow ----
 * A rule every request of which an earlier rule already takes never decides anything: remove
 * it and say which line shadows it. */
static void pass_shadow(struct ir_program *p, struct l7_diags *d)
{
	for (int i = 0; i < p->npolicies; i++) {
		struct ir_policy *pol = &p->policies[i];
		for (int k = 1; k < pol->nrules; k++) {
			struct terms s = { .n = 0 };
			flatten(pol->rules[k].cond, &s);
			for (int j = 0; j < k && !s.overflow; j++) {
				struct terms cj = { .n = 0 };
				flatten(pol->rules[j].cond, &cj);
				bool shadows = !cj.overflow;
				for (int c = 0; c < cj.n && shadows; c++) {
					bool covered = false;
					for (int q = 0; q < s.n && !covered; q++)
						covered = implies(s.t[q], cj.t[c]);
					shadows = covered;
				}
				if (!shadows)
					continue;
				if (d && pol->rules[k].line != pol->rules[j].line)
					l7_diag(d, L7_WARNING, l7_loc_of_line(p->src, pol->rules[k].line),
						"this rule is shadowed by the rule at line %u, which takes all its requests; removed",
						pol->rules[j].line);
				remove_rule(pol, k--);
				break;
			}
		}
	}
}

/* The pass order. */
static const struct ir_pass {
	const char *name;
	void (*run)(struct ir_program *, struct l7_diags *);
} passes[] = {
	{ "simplify", pass_simplify },
	{ "first-match", pass_first_match },
	{ "shadow", pass_shadow },
};

int ir_optimise(struct ir_program *p, const char *only, struct l7_diags *d, FILE *dump_each)
{
	if (only && !strcmp(only, "none"))
		return 0;
	for (size_t i = 0; i < sizeof(passes) / sizeof(passes[0]); i++) {
		if (only) {   /* a comma-separated list of pass names */
			const char *at = strstr(only, passes[i].name);
			size_t n = strlen(passes[i].name);
			if (!at || (at != only && at[-1] != ',') || (at[n] && at[n] != ','))
				continue;
		}
		passes[i].run(p, d);
		if (dump_each) {
			fprintf(dump_each, "; ---- after pass %s ----\n", passes[i].name);
			ir_dump(p, dump_each);
		}
	}
	return 0;
}

const char *ir_pass_names(void) { return "simplify,first-match,shadow"; }
