/* Rules are tried in order and the first match wins, so a rule need not re-check that earlier
 * rules failed: a conjunct !X of rule k goes when some earlier rule j matches every request of
 * X && (the rest of k) — then those requests never reach k. This removes the negated prefixes
 * that if/else chains leave behind. */
#include "passes.h"

#include <string.h>

#include "arena.h"
#include "conj.h"
#include "diag.h"
#include "l7/abi.h"

/* Rule k of pol without the negated tests the rules before it make for it. */
static void first_match(struct ir_program *p, struct ir_policy *pol, int k)
{
	struct ir_rule *r = &pol->rules[k];
	struct conj s = { .n = 0 };
	conj_flatten(r->cond, &s);
	if (s.overflow)
		return;
	for (int t = 0; t < s.n; t++) {
		if (s.t[t]->kind != IR_C_NOT)
			continue;
		/* the requests !X excludes: X plus every other conjunct of k */
		struct conj region = { .n = 0 };
		for (int o = 0; o < s.n; o++)
			if (o != t)
				conj_flatten(s.t[o], &region);
		conj_flatten(s.t[t]->a, &region);
		bool captured = false;
		for (int j = 0; j < k && !captured; j++)
			captured = conj_takes(&pol->rules[j], &region);
		if (captured) {
			memmove(&s.t[t], &s.t[t + 1], sizeof(s.t[0]) * (size_t)(s.n - t - 1));
			s.n--;
			t--;
		}
	}
	r->cond = conj_rebuild(p, &s, r->line);
}

void ir_pass_first_match(struct ir_program *p, struct l7_diags *d)
{
	(void)d;
	for (int i = 0; i < p->npolicies; i++)
		for (int k = 1; k < p->policies[i].nrules; k++)
			first_match(p, &p->policies[i], k);
}
