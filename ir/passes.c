/* The pass manager: the passes of passes.def, in its order. Each pass rewrites the rules of
 * every policy; after each, the rules that remain are numbered 1..n again (ids index the hit
 * counters). The pipeline (pipeline.c) runs them, dumping and verifying between them. */
#include "ir.h"

#include <string.h>

#include "passes/passes.h"

static const struct {
	const char *name;
	void (*run)(struct ir_program *, struct l7_diags *);
} passes[] = {
#define IR_PASS(id, name) { name, ir_pass_##id },
#include "passes.def"
#undef IR_PASS
};

enum { NPASSES = sizeof(passes) / sizeof(passes[0]) };

int ir_npasses(void) { return NPASSES; }

const char *ir_pass_name(int i) { return i >= 0 && i < NPASSES ? passes[i].name : NULL; }

void ir_run_pass(struct ir_program *p, int i, struct l7_diags *d)
{
	passes[i].run(p, d);
	p->nrules = 0;
	for (int k = 0; k < p->npolicies; k++)
		for (int r = 0; r < p->policies[k].nrules; r++)
			p->policies[k].rules[r].id = ++p->nrules;
}

unsigned ir_pass_select(const char *list, const char **bad, size_t *badlen)
{
	if (!list)
		return (1u << NPASSES) - 1;
	unsigned mask = 0;
	if (!strcmp(list, "none"))
		return 0;
	for (const char *at = list; *at;) {
		size_t n = strcspn(at, ",");
		int found = -1;
		for (int i = 0; i < NPASSES && found < 0; i++)
			if (strlen(passes[i].name) == n && !strncmp(at, passes[i].name, n))
				found = i;
		if (found < 0) {
			*bad = at;
			*badlen = n;
			return IR_PASS_UNKNOWN;
		}
		mask |= 1u << found;
		at += n + (at[n] == ',');
	}
	return mask;
}

const char *ir_pass_names(void)
{
	static const char names[] =
#define IR_PASS(id, name) "," name
#include "passes.def"
#undef IR_PASS
		;
	return names + 1;
}
