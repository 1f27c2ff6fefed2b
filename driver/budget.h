/* The verifier budget model: reads the BPF object l7c emits and estimates, per function, what
 * the kernel verifier will process. */
#ifndef L7_BUDGET_H
#define L7_BUDGET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "calib.h"

#define BUDGET_MAX_FUNCS 192    /* programs, callbacks, and split programs' decide chains */
#define BUDGET_MAX_CALLEES 32   /* symbols loaded as immediates (maps, callbacks) or called */

struct budget_func {
	char name[64], section[64];
	int insns, stack, policy_insns;
	int helper_calls;                /* calls of kernel helpers: what the verifier may patch */
	bool tail_call;                  /* calls bpf_tail_call */
	int patched;                     /* insns after the verifier's patching (an upper estimate) */
	int jump_reach;                  /* the longest jump's offset once patched: what must fit a
	                                  * jump's 16 bits (driver/limits.def JUMP) */
	int chain_stack;                 /* stack of the deepest call chain from here, callbacks
	                                  * included, as the kernel counts it (budget.c reach) */
	long chain_insns;                /* instructions of this function and all it reaches: what the
	                                  * kernel loads as one program */
	bool is_subprog;                 /* a bpf_loop callback, a global function or a rule chunk
	                                  * (in .text) */
	bool is_global;                  /* a global function of the machinery (l7g_*), verified once */
	bool is_chunk;                   /* a rule chunk: a static subprogram called directly */
	int caller;                      /* chunks: the first program calling it, -1 if none */
	long paths_estimate;             /* this function's own walk */
	long policy_walk;                /* the part of it on the .l7 file's lines */
	uint64_t msig;                   /* the machinery's source lines it holds (budget.c decode) */
	uint64_t csig;                   /* its instructions, less the immediates relocations fill */
	uint64_t chain_code;             /* csig of it and all it reaches: the program as the kernel
	                                  * loads it (a calibration's exact key) */
	uint64_t chain_sig;              /* msig of it and all it reaches: the machinery's
	                                  * configuration, the calibration's key */
	uint64_t chain_feat;             /* the names of the functions it reaches: the features the
	                                  * policy selected (a calibration's coarser key) */
	long chain_policy_walk;          /* policy_walk of it and all it reaches */
	long model_estimate;             /* the structural model's estimate, before calibration */
	enum calib_level calib;          /* programs: what of the calibration the estimate used */
	long machinery_estimate;         /* programs: what of the estimate is the machinery's */
	long estimate;                   /* with the callbacks it reaches */
	char callees[BUDGET_MAX_CALLEES][64];
	bool called[BUDGET_MAX_CALLEES]; /* a direct call (a subprogram or a global function), not a
	                                  * callback's address */
	int ncallees;
};

struct budget {
	struct budget_func funcs[BUDGET_MAX_FUNCS];
	int nfuncs;
	int *line_insns;                 /* instructions per line of the .l7 file */
	int *line_func;                  /* first function a line landed in, -1 if none */
	unsigned nlines;
};

/* Fills b from a BPF ELF object; nlines sizes the per-line arrays (the caller frees them).
 * Returns 0, or -1 if the object cannot be read. */
int budget_analyse(struct budget *b, const char *obj, size_t len, const char *l7_basename, unsigned nlines);

#endif
