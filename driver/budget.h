/* The verifier budget model: reads the BPF assembly l7c emits and estimates, per function,
 * what the kernel verifier will process. */
#ifndef L7_BUDGET_H
#define L7_BUDGET_H

#include <stdbool.h>

#define BUDGET_MAX_FUNCS 32
#define BUDGET_MAX_CALLEES 32   /* symbols loaded as immediates: maps and callbacks */

struct budget_func {
	char name[64], section[64];
	int insns, stack, policy_insns;
	bool is_subprog;                 /* a bpf_loop callback or a global function (in .text) */
	long paths_estimate;             /* this function's own walk */
	long estimate;                   /* with the callbacks it reaches */
	char callees[BUDGET_MAX_CALLEES][64];
	bool callee_global[BUDGET_MAX_CALLEES];   /* called directly: a global function (l7g_*) */
	int ncallees;
};

struct budget {
	struct budget_func funcs[BUDGET_MAX_FUNCS];
	int nfuncs;
	int *line_insns;                 /* instructions per line of the .l7 file */
	int *line_func;                  /* first function a line landed in, -1 if none */
	unsigned nlines;
};

/* Fills b from asm text; nlines sizes the per-line arrays (caller frees them). */
void budget_analyse(struct budget *b, const char *asm_text, const char *l7_basename, unsigned nlines);

#endif
