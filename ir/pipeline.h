/* A policy file from source to IR in one call: parse, resolve against the interface files,
 * lower, run the passes of passes.def (the IR verifier between them when asked), every
 * diagnostic through one l7_diags. What l7c, the tests and the fuzzers share. */
#ifndef L7_IR_PIPELINE_H
#define L7_IR_PIPELINE_H

#include <stdbool.h>
#include <stdio.h>

#include "frontend.h"
#include "ir.h"
#include "timers.h"

struct l7_pipeline {           /* how far, and what to show on the way */
	const char *const *include_dirs;   /* -I: searched for interface files after the policy's own
	                                    * folder and before the stdlib's */
	int ninclude;
	bool ast_only;             /* stop after resolving (l7c --emit=ast) */
	const char *passes;        /* NULL: all, in order; "none"; or a comma-separated list of names */
	bool quiet_passes;         /* the passes' warnings (rules removed) are not reported */
	bool verify_ir;            /* ir_verify after lowering and after every pass */
	FILE *dump_each;           /* the IR after lowering and after every pass (l7c --emit=ir) */
	struct l7_timers *timers;  /* NULL: not timed (l7c --time) */
};

struct l7_unit {               /* one policy file through the pipeline */
	struct l7_source *src;     /* owned */
	struct l7_module ast;
	struct ir_program *ir;     /* NULL after errors, or with ast_only */
};

/* What l7_unit_build returns (l7c's exit status for the first three). */
enum l7_unit_status {
	L7_UNIT_OK = 0,
	L7_UNIT_ERRORS = 1,        /* the policy has errors (reported) */
	L7_UNIT_USAGE = 2,         /* an unknown pass, an unreadable file (reported) */
	L7_UNIT_INTERNAL = 3,      /* a broken IR invariant, or lowering that failed without saying why */
};

/* Builds u from src (which u owns from now on, even on failure). */
enum l7_unit_status l7_unit_build(struct l7_unit *u, struct l7_source *src, const struct l7_pipeline *o,
				  struct l7_diags *d);
/* The same from a file. */
enum l7_unit_status l7_unit_load(struct l7_unit *u, const char *path, const struct l7_pipeline *o, struct l7_diags *d);
void l7_unit_free(struct l7_unit *u);

/* The stdlib's interface files, searched last (the build's stdlib/). */
const char *l7_stdlib_dir(void);

#endif
