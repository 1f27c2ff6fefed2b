/* `request.source in [...]` is an OR of prefix compares: three instructions each on every path
 * through the list, and verifier work per prefix. A list of SET_MIN_PREFIXES or more becomes
 * one lookup in the l7_cidrs LPM trie (a helper call and ~20 instructions whatever its size),
 * which l7run fills from the manifest before traffic. Below that the compares are cheaper. */
#include "passes.h"

#include <string.h>

#include "arena.h"
#include "conj.h"
#include "diag.h"
#include "l7/abi.h"

#define SET_MIN_PREFIXES 8

/* Prefix compares under an OR tree of only such compares (FALSE leaves allowed), or -1. */
static int source_leaves(const struct ir_cond *c)
{
	if (c->kind == IR_C_SOURCE_IN)
		return 1;
	if (c->kind == IR_C_FALSE)
		return 0;
	if (c->kind != IR_C_OR)
		return -1;
	int a = source_leaves(c->a), b = source_leaves(c->b);
	return a < 0 || b < 0 ? -1 : a + b;
}

static void collect_sources(const struct ir_cond *c, struct ir_cidr_set *s)
{
	if (c->kind == IR_C_SOURCE_IN) {
		s->nets[s->n] = c->net;
		s->netmasks[s->n++] = c->netmask;
	} else if (c->kind == IR_C_OR) {
		collect_sources(c->a, s);
		collect_sources(c->b, s);
	}
}

static struct ir_cond *to_sets(struct ir_program *p, struct ir_cond *c)
{
	int n = source_leaves(c);
	if (n >= SET_MIN_PREFIXES) {
		struct ir_cidr_set *sets = l7_alloc(&p->arena, sizeof(*sets) * (size_t)(p->ncidr_sets + 1));
		if (p->ncidr_sets)
			memcpy(sets, p->cidr_sets, sizeof(*sets) * (size_t)p->ncidr_sets);
		struct ir_cidr_set *s = &sets[p->ncidr_sets];
		s->n = 0;
		s->nets = l7_alloc(&p->arena, sizeof(unsigned) * (size_t)n);
		s->netmasks = l7_alloc(&p->arena, sizeof(unsigned) * (size_t)n);
		collect_sources(c, s);
		struct ir_cond *sc = l7_alloc(&p->arena, sizeof(*sc));
		sc->kind = IR_C_SOURCE_SET;
		sc->set = p->ncidr_sets;
		sc->line = c->line;
		sc->col = c->col;
		p->cidr_sets = sets;
		p->ncidr_sets++;
		return sc;
	}
	if (n < 0 && (c->kind == IR_C_AND || c->kind == IR_C_OR || c->kind == IR_C_NOT)) {
		c->a = to_sets(p, c->a);
		if (c->kind != IR_C_NOT)
			c->b = to_sets(p, c->b);
	}
	return c;
}

void ir_pass_sets(struct ir_program *p, struct l7_diags *d)
{
	(void)d;
	for (int i = 0; i < p->npolicies; i++)
		for (int k = 0; k < p->policies[i].nrules; k++)
			p->policies[i].rules[k].cond = to_sets(p, p->policies[i].rules[k].cond);
}
