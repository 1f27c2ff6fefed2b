/* Per rule: flatten the conjunction, drop duplicates and implied facts (a path equal to "/a/b"
 * needs no "starts with /a" beside it), and remove rules whose facts contradict (path equal to
 * two different strings): those never match. */
#include "passes.h"

#include <string.h>

#include "arena.h"
#include "conj.h"
#include "diag.h"
#include "l7/abi.h"

void ir_pass_simplify(struct ir_program *p, struct l7_diags *d)
{
	for (int i = 0; i < p->npolicies; i++) {
		struct ir_policy *pol = &p->policies[i];
		for (int k = 0; k < pol->nrules; k++) {
			struct ir_rule *r = &pol->rules[k];
			struct conj s = { .n = 0 };
			conj_flatten(r->cond, &s);
			if (s.overflow)
				continue;
			if (conj_never_holds(r->cond)) {
				if (d)
					l7_diag(d, L7_WARNING, l7_loc_of_line(p->src, r->line),
						"this rule can never match (its conditions contradict each other); removed");
				conj_remove_rule(pol, k--);
				continue;
			}
			struct conj kept = { .n = 0 };
			for (int a = 0; a < s.n; a++) {
				/* !(x && y) where x && y never holds is always true */
				bool redundant = s.t[a]->kind == IR_C_NOT && conj_never_holds(s.t[a]->a);
				for (int b = 0; b < s.n && !redundant; b++)
					redundant = b != a && conj_implies(s.t[b], s.t[a]) && (!conj_eq(s.t[a], s.t[b]) || b < a);
				if (!redundant)
					kept.t[kept.n++] = s.t[a];
			}
			r->cond = conj_rebuild(p, &kept, r->line);
		}
	}
}
