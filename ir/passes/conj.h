/* Internal to ir/passes/: conditions as lists of conjuncts, what every pass reasons with. */
#ifndef L7_IR_CONJ_H
#define L7_IR_CONJ_H

#include <stdbool.h>

#include "ir.h"

#define MAX_TERMS 256

struct conj {                    /* a flattened conjunction, duplicates dropped */
	const struct ir_cond *t[MAX_TERMS];
	int n;
	bool overflow;               /* more than MAX_TERMS: the passes leave such a rule alone */
};

bool conj_eq(const struct ir_cond *a, const struct ir_cond *b);
/* Appends c's conjuncts to out (TRUE and repeats dropped). */
void conj_flatten(const struct ir_cond *c, struct conj *out);
/* The conjunction of s as a condition tree (TRUE at line when empty), allocated in p. */
struct ir_cond *conj_rebuild(struct ir_program *p, const struct conj *s, unsigned line);
/* c is a conjunction that can never hold. */
bool conj_never_holds(const struct ir_cond *c);
/* a implies b (so b is redundant next to a). */
bool conj_implies(const struct ir_cond *a, const struct ir_cond *b);
/* Rule j matches every request of region: each of its conjuncts is implied by one of region's. */
bool conj_takes(const struct ir_rule *j, const struct conj *region);
void conj_remove_rule(struct ir_policy *pol, int k);
/* The warning for a rule at line that the rule at line `by` takes all requests of (none for
 * two rules of one line: the paths of one statement). */
void conj_warn_shadowed(const struct ir_program *p, struct l7_diags *d, unsigned line, unsigned by);

#endif
