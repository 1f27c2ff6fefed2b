/* Splitting programs that are too big for the verifier: whether, and where, decided from the
 * budget model (budget.c) and the rules' sizes; see docs/architecture.md. */
#ifndef L7_SPLIT_H
#define L7_SPLIT_H

#include <stddef.h>

#include "budget.h"
#include "codegen.h"

struct split_build {
	struct codegen_split plan;
	char *obj;                 /* the object, malloc'd */
	size_t obj_len;
	struct budget b;           /* the model of obj (line arrays malloc'd) */
	char warnings[4][512];     /* programs still over the budget once nothing can be split */
	int nwarnings;
};

enum split_mode {
	SPLIT_AUTO,    /* split what the budget model finds over the budget */
	SPLIT_NONE,    /* split only rules that cannot fit in one function at all */
	SPLIT_PARSE,   /* always split both hosts at the parse/decide point (then as AUTO) */
	SPLIT_RULES,   /* that, and a decide program per rule (at most CODEGEN_MAX_CHUNKS): a chain
	                * whatever the budget (the machinery dominates most decide programs, and
	                * cutting their rules by the budget rarely helps) */
};

/* Compiles p into an object of the programs of `progs` (l7c --mode), splitting what the budget
 * model finds over `budget` processed instructions; with `full`, the machinery functions no
 * policy reaches are compiled again instead of joined from l7c's build (l7c --machinery=full). Returns 0, 1 when the policy cannot fit
 * (the message is printed), 2 when code generation failed. timers: NULL, or where the rounds'
 * stages add up (l7c --time). */
struct l7_timers;
int split_build(const struct ir_program *p, int opt_level, long budget, enum split_mode mode, enum codegen_mode progs,
		int full, struct split_build *sb, struct l7_timers *timers);
void split_build_free(struct split_build *sb);

/* Why program f, `used` processed instructions (the kernel's count, else the estimate), is over
 * `budget`: its machinery alone (the model's machinery_estimate), or its rules, and what to do. */
void split_advice(const struct split_build *sb, const struct budget_func *f, long used, long budget, char *buf, size_t n);

/* The hosts that can be split and their decide chains (l7/progs.def). */
#define SPLIT_HOST_GW   "l7_client_parser"
#define SPLIT_HOST_MESH "l7_mesh_msg_prog"
#define SPLIT_CHAIN_GW   "l7_gw_decide_"
#define SPLIT_CHAIN_MESH "l7_mesh_decide_"

#endif
