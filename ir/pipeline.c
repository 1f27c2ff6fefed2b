/* The pipeline from source to IR, in order: l7_parse, l7_resolve, ir_lower, the passes. */
#include "pipeline.h"

#include <stdlib.h>
#include <string.h>

#ifndef L7_STDLIB_DIR
#define L7_STDLIB_DIR "/usr/share/l7c/stdlib"
#endif

const char *l7_stdlib_dir(void) { return L7_STDLIB_DIR; }

/* After a stage: the dump, and the verifier. False when the IR breaks an invariant. */
static bool after(const struct l7_unit *u, const struct l7_pipeline *o, const char *stage, struct l7_diags *d)
{
	if (o->dump_each) {
		if (!strcmp(stage, "lowering"))
			fputs("; ---- lowered ----\n", o->dump_each);
		else
			fprintf(o->dump_each, "; ---- after pass %s ----\n", stage);
		ir_dump(u->ir, o->dump_each);
	}
	return !o->verify_ir || ir_verify(u->ir, stage, d->out ? d->out : stderr) == 0;
}

enum l7_unit_status l7_unit_build(struct l7_unit *u, struct l7_source *src, const struct l7_pipeline *o,
				  struct l7_diags *d)
{
	memset(u, 0, sizeof(*u));
	u->src = src;
	const char *bad = NULL;
	size_t badlen = 0;
	unsigned passes = ir_pass_select(o->passes, &bad, &badlen);
	if (passes == IR_PASS_UNKNOWN) {
		l7_diag(d, L7_ERROR, (struct l7_loc){ 0 }, "--passes: no pass '%.*s' (the passes: none, or some of %s)",
			(int)badlen, bad, ir_pass_names());
		return L7_UNIT_USAGE;
	}
	if (!src)
		return L7_UNIT_USAGE;   /* l7_source_load said why */

	const char **dirs = calloc((size_t)o->ninclude + 1, sizeof(*dirs));
	for (int i = 0; i < o->ninclude; i++)
		dirs[i] = o->include_dirs[i];
	dirs[o->ninclude] = l7_stdlib_dir();
	struct l7_tick t = l7_tick();
	l7_parse(&u->ast, src, false, d);
	t = l7_timers_add(o->timers, L7_T_PARSE, t);
	l7_resolve(&u->ast, dirs, o->ninclude + 1, d);
	t = l7_timers_add(o->timers, L7_T_RESOLVE, t);
	free(dirs);
	if (d->errors)
		return L7_UNIT_ERRORS;
	if (o->ast_only)
		return L7_UNIT_OK;

	u->ir = ir_lower(&u->ast, d);
	t = l7_timers_add(o->timers, L7_T_LOWER, t);
	if (!u->ir || d->errors) {
		if (!d->errors)
			l7_diag(d, L7_ERROR, (struct l7_loc){ 0 }, "internal error: lowering failed without a diagnostic");
		if (u->ir)
			l7_diag(d, L7_ERROR, (struct l7_loc){ 0 }, "internal error: lowering reported errors but made a program");
		return u->ir || !d->errors ? L7_UNIT_INTERNAL : L7_UNIT_ERRORS;
	}
	if (!after(u, o, "lowering", d))
		return L7_UNIT_INTERNAL;
	for (int i = 0; i < ir_npasses(); i++) {
		if (!(passes >> i & 1))
			continue;
		ir_run_pass(u->ir, i, o->quiet_passes ? NULL : d);
		if (!after(u, o, ir_pass_name(i), d))
			return L7_UNIT_INTERNAL;
	}
	l7_timers_add(o->timers, L7_T_PASSES, t);
	return d->errors ? L7_UNIT_ERRORS : L7_UNIT_OK;
}

enum l7_unit_status l7_unit_load(struct l7_unit *u, const char *path, const struct l7_pipeline *o, struct l7_diags *d)
{
	return l7_unit_build(u, l7_source_load(path, d), o, d);
}

void l7_unit_free(struct l7_unit *u)
{
	ir_free(u->ir);
	l7_module_free(&u->ast);
	l7_source_free(u->src);
	memset(u, 0, sizeof(*u));
}
