/* What the stages ask of a program beyond its fields. */
#include "ir.h"

#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "l7/abi.h"

/* The rows of conds.def and actions.def */
static const struct kind {
	const char *name;
	unsigned operands;
} cond_kinds[] = {
#define IR_COND(kind, operands) { #kind, operands },
#include "conds.def"
#undef IR_COND
}, action_kinds[] = {
#define IR_ACTION(kind, operands) { #kind, operands },
#include "actions.def"
#undef IR_ACTION
};

static const struct kind *row(const struct kind *rows, size_t n, int k)
{
	static const struct kind none = { NULL, 0 };
	return k >= 0 && (size_t)k < n ? &rows[k] : &none;
}

#define ROW(rows, k) row(rows, sizeof(rows) / sizeof(rows[0]), (int)(k))

unsigned ir_cond_operands(enum ir_cond_kind k) { return ROW(cond_kinds, k)->operands; }
const char *ir_cond_kind_name(enum ir_cond_kind k) { return ROW(cond_kinds, k)->name; }
unsigned ir_action_operands(enum ir_action_kind k) { return ROW(action_kinds, k)->operands; }
const char *ir_action_kind_name(enum ir_action_kind k) { return ROW(action_kinds, k)->name; }

const char *ir_protocol_name(unsigned proto)
{
	static const char *const names[] = L7_PROTO_NAMES;
	return proto < sizeof(names) / sizeof(names[0]) ? names[proto] : NULL;
}

/* Every request entry b matches, entry a matches too. */
bool ir_table_entry_covers(const struct ir_table_entry *a, const struct ir_table_entry *b)
{
	if (a->method && a->method != b->method)
		return false;
	if (a->prefix)
		return b->len >= a->len && !memcmp(a->value, b->value, a->len);
	return !b->prefix && a->len == b->len && !memcmp(a->value, b->value, a->len);
}

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
