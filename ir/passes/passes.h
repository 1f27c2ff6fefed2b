/* The passes of ir/passes.def, one per file here; ir/passes.c runs them in that order. */
#ifndef L7_IR_PASSES_H
#define L7_IR_PASSES_H

#include "ir.h"

struct l7_diags;

#define IR_PASS(id, name) void ir_pass_##id(struct ir_program *p, struct l7_diags *d);
#include "passes.def"
#undef IR_PASS

#endif
