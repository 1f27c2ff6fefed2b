/* l7c_fixed_gen POLICY.l7 BUNDLE: build time. Compiles the machinery functions no policy symbol
 * reaches (codegen/fixed.c) into the bundle l7c embeds. POLICY only gives codegen a module to
 * link the stdlib into: which functions are fixed, and their code, do not depend on it. */
#include <stdio.h>

#include "codegen.h"
#include "diag.h"
#include "pipeline.h"

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: l7c_fixed_gen POLICY.l7 BUNDLE\n");
		return 2;
	}
	struct l7_diags d = { .out = stderr };
	struct l7_pipeline po = { 0 };
	struct l7_unit u;
	int rc = (int)l7_unit_load(&u, argv[1], &po, &d);
	if (!rc) {
		struct codegen_opts o = { .opt_level = 2, .output = CG_EMIT_OBJ, .fixed_out = argv[2], .diags = &d };
		rc = codegen_emit(u.ir, &o) ? 1 : 0;
	}
	l7_unit_free(&u);
	return rc ? 1 : 0;
}
