/* A rule every request of which an earlier rule already takes never decides anything: remove
 * it and say which line shadows it. */
#include "passes.h"

#include <string.h>

#include "arena.h"
#include "conj.h"
#include "diag.h"
#include "l7/abi.h"

void ir_pass_shadow(struct ir_program *p, struct l7_diags *d)
{
	for (int i = 0; i < p->npolicies; i++) {
		struct ir_policy *pol = &p->policies[i];
		for (int k = 1; k < pol->nrules; k++) {
			struct conj s = { .n = 0 };
			conj_flatten(pol->rules[k].cond, &s);
			for (int j = 0; j < k && !s.overflow; j++) {
				if (!conj_takes(&pol->rules[j], &s))
					continue;
				conj_warn_shadowed(p, d, pol->rules[k].line, pol->rules[j].line);
				conj_remove_rule(pol, k--);
				break;
			}
		}
	}
}
