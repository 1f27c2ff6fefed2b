/* Conditions as conjunct lists, and what the passes know about their facts: which contradict,
 * which imply others (by the constants they compare with; a regex by running its DFA). */
#include "conj.h"

#include <assert.h>
#include <string.h>

#include "arena.h"
#include "diag.h"

/* The same condition: the same kind and the same operands (those of its kind, conds.def). */
bool conj_eq(const struct ir_cond *a, const struct ir_cond *b)
{
	if (a == b)
		return true;
	if (a->kind != b->kind)
		return false;
	unsigned o = ir_cond_operands(a->kind);
	return (!(o & (IR_O_AB | IR_O_A)) || conj_eq(a->a, b->a)) && (!(o & IR_O_AB) || conj_eq(a->b, b->b)) &&
	       (!(o & IR_O_FIELD) || (a->field == b->field && (a->field < IR_F_HEADER || a->header == b->header))) &&
	       (!(o & IR_O_STR) || (a->len == b->len && !memcmp(a->str, b->str, a->len))) &&
	       (!(o & IR_O_METHOD) || a->method == b->method) && (!(o & IR_O_SERVICES) || a->mask == b->mask) &&
	       (!(o & IR_O_HEADER) || a->header == b->header) &&
	       (!(o & IR_O_PREFIX) || (a->net == b->net && a->netmask == b->netmask)) &&
	       (!(o & (IR_O_PORTS | IR_O_RANGE)) || (a->lo == b->lo && a->hi == b->hi)) &&
	       (!(o & IR_O_SECONDS) || a->lo == b->lo) && (!(o & IR_O_JWT) || a->jwt == b->jwt) &&
	       (!(o & IR_O_IDENT) || a->ident == b->ident) &&
	       (!(o & IR_O_TABLE) || (a->table == b->table && a->group == b->group)) && (!(o & IR_O_SET) || a->set == b->set) &&
	       (!(o & (IR_O_COUNTER | IR_O_TIMER)) || a->state == b->state) && (!(o & IR_O_RE) || a->re == b->re) &&
	       (!(o & IR_O_PROTO) || a->lo == b->lo);
}

/* What a regex says about a field compared with a constant: its DFA runs on the constant at
 * compile time. */
static bool regex_accepts(const struct ir_cond *re, const struct ir_cond *eq)
{
	return re_match(&re->re->dfa, (const unsigned char *)eq->str, eq->len);
}

static bool regex_dead_after(const struct ir_cond *re, const struct ir_cond *prefix)
{
	const struct re_dfa *d = &re->re->dfa;
	return re_run(d, d->start, (const unsigned char *)prefix->str, prefix->len) == 0;
}

/* Every value the regex accepts starts with the prefix: on the way through the prefix no
 * state accepts, and every byte but the prefix's next one leads to the dead state. */
static bool regex_implies_prefix(const struct ir_cond *re, const struct ir_cond *prefix)
{
	const struct re_dfa *d = &re->re->dfa;
	int s = d->start;
	for (size_t i = 0; i < prefix->len; i++) {
		if (d->accept[s])
			return false;
		unsigned char want = (unsigned char)prefix->str[i];
		for (int b = 0; b < 256; b++)
			if (d->cls[b] != d->cls[want] && d->next[(size_t)s * (size_t)d->nclasses + d->cls[b]])
				return false;
		for (int b = 0; b < 256; b++)   /* and the prefix's byte must be alone in its class */
			if (b != want && d->cls[b] == d->cls[want])
				return false;
		s = d->next[(size_t)s * (size_t)d->nclasses + d->cls[want]];
	}
	return true;
}

void conj_flatten(const struct ir_cond *c, struct conj *out)
{
	if (c->kind == IR_C_AND) {
		conj_flatten(c->a, out);
		conj_flatten(c->b, out);
		return;
	}
	if (c->kind == IR_C_TRUE)
		return;
	for (int i = 0; i < out->n; i++)
		if (conj_eq(out->t[i], c))
			return;   /* x && x */
	if (out->n == MAX_TERMS) {
		out->overflow = true;
		return;
	}
	out->t[out->n++] = c;
}

struct ir_cond *conj_rebuild(struct ir_program *p, const struct conj *s, unsigned line)
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
		c->col = s->t[i]->col;
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
	if (a->kind == IR_C_NOT && conj_eq(a->a, b))
		return true;
	if (b->kind == IR_C_NOT && conj_eq(b->a, a))
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
	if (a->kind == IR_C_REGEX && b->kind == IR_C_STR_EQ)
		return !regex_accepts(a, b);
	if (a->kind == IR_C_REGEX && b->kind == IR_C_STR_PREFIX)
		return regex_dead_after(a, b);
	if (b->kind == IR_C_REGEX && (a->kind == IR_C_STR_EQ || a->kind == IR_C_STR_PREFIX))
		return contradict(b, a);
	return false;
}

/* A conjunction that can never hold. */
bool conj_never_holds(const struct ir_cond *c)
{
	struct conj s = { .n = 0 };
	conj_flatten(c, &s);
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
bool conj_implies(const struct ir_cond *a, const struct ir_cond *b)
{
	if (conj_eq(a, b))
		return true;
	if (a->kind == IR_C_PORT_IN && b->kind == IR_C_PORT_IN)
		return a->lo >= b->lo && a->hi <= b->hi;
	if (a->kind == IR_C_SOURCE_IN && b->kind == IR_C_SOURCE_IN)   /* a narrower prefix inside b */
		return (a->netmask & b->netmask) == b->netmask && (a->net & b->netmask) == b->net;
	bool same_field = a->field == b->field && (a->field < IR_F_HEADER || a->header == b->header);
	if (same_field && a->kind == IR_C_STR_EQ && b->kind == IR_C_REGEX)
		return regex_accepts(b, a);
	if (same_field && a->kind == IR_C_REGEX && b->kind == IR_C_STR_PREFIX)
		return regex_implies_prefix(a, b);
	if (!same_field || b->kind != IR_C_STR_PREFIX)
		return false;
	if (a->kind != IR_C_STR_EQ && a->kind != IR_C_STR_PREFIX)
		return false;
	return a->len >= b->len && !memcmp(a->str, b->str, b->len);
}

void conj_remove_rule(struct ir_policy *pol, int k)
{
	assert(k >= 0 && k < pol->nrules);
	memmove(&pol->rules[k], &pol->rules[k + 1], sizeof(pol->rules[0]) * (size_t)(pol->nrules - k - 1));
	pol->nrules--;
}

bool conj_takes(const struct ir_rule *j, const struct conj *region)
{
	struct conj cj = { .n = 0 };
	conj_flatten(j->cond, &cj);
	if (cj.overflow || region->overflow)
		return false;
	for (int c = 0; c < cj.n; c++) {
		bool covered = false;
		for (int q = 0; q < region->n && !covered; q++)
			covered = conj_implies(region->t[q], cj.t[c]);
		if (!covered)
			return false;
	}
	return true;
}

void conj_warn_shadowed(const struct ir_program *p, struct l7_diags *d, unsigned line, unsigned by)
{
	if (d && line != by)
		l7_diag(d, L7_WARNING, l7_loc_of_line(p->src, line),
			"this rule is shadowed by the rule at line %u, which takes all its requests; removed", by);
}
