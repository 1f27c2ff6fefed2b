/* What the stages ask of a program beyond its fields. */
#include "ir.h"

#include <stdlib.h>

#include "arena.h"

static const struct {
	const char *name;
	unsigned operands;
} cond_kinds[] = {
#define IR_COND(kind, operands) { #kind, operands },
#include "conds.def"
#undef IR_COND
};

unsigned ir_cond_operands(enum ir_cond_kind k) { return cond_kinds[k].operands; }

const char *ir_cond_kind_name(enum ir_cond_kind k) { return cond_kinds[k].name; }

static const struct {
	const char *name;
	unsigned operands;
} action_kinds[] = {
#define IR_ACTION(kind, operands) { #kind, operands },
#include "actions.def"
#undef IR_ACTION
};

unsigned ir_action_operands(enum ir_action_kind k) { return action_kinds[k].operands; }

const char *ir_action_kind_name(enum ir_action_kind k) { return action_kinds[k].name; }

const struct ir_cond *ir_rule_table(const struct ir_rule *r)
{
	const struct ir_cond *c = r->cond && r->cond->kind == IR_C_AND ? r->cond->a : r->cond;
	return c && c->kind == IR_C_TABLE ? c : NULL;
}

void ir_free(struct ir_program *p)
{
	if (!p)
		return;
	l7_arena_free(p->arena);
	free(p);
}
