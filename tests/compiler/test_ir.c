/* IR goldens: ir/NAME.l7 lowers to exactly ir/NAME.ir (set L7C_UPDATE_GOLDENS=1 to rewrite
 * them after an intended change, then review the diff). */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include "policy_files.h"
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline.h"

ParameterizedTestParameters(ir, goldens)
{
	return l7_policy_files(IR_DIR, 1);
}

ParameterizedTest(char **name, ir, goldens)
{
	char src_path[512], ir_path[512];
	snprintf(src_path, sizeof(src_path), "%s/%s.l7", IR_DIR, *name);
	snprintf(ir_path, sizeof(ir_path), "%s/%s.ir", IR_DIR, *name);

	char *diags = NULL, *dump = NULL;
	size_t dl = 0, il = 0;
	FILE *df = open_memstream(&diags, &dl), *irf = open_memstream(&dump, &il);
	struct l7_diags d = { .out = df };
	struct l7_pipeline lowered = { .passes = "none", .verify_ir = true };
	struct l7_unit u;
	enum l7_unit_status rc = l7_unit_load(&u, src_path, &lowered, &d);
	fflush(df);
	cr_assert_eq(rc, L7_UNIT_OK, "%s does not lower:\n%s", *name, diags);
	ir_dump(u.ir, irf);
	fclose(irf);
	l7_unit_free(&u);

	if (getenv("L7C_UPDATE_GOLDENS")) {
		FILE *w = fopen(ir_path, "w");
		fputs(dump, w);
		fclose(w);
	}
	char *want = l7_slurp(ir_path, NULL);
	cr_assert_not_null(want, "missing golden %s (run with L7C_UPDATE_GOLDENS=1)", ir_path);
	cr_expect_str_eq(dump, want, "IR of %s changed:\n%s", *name, dump);

	/* and after the passes: NAME.opt.ir */
	char *opt = NULL;
	size_t ol = 0;
	FILE *of = open_memstream(&opt, &ol);
	struct l7_pipeline optimised = { .verify_ir = true, .quiet_passes = true };
	cr_assert_eq(l7_unit_load(&u, src_path, &optimised, &d), L7_UNIT_OK);
	ir_dump(u.ir, of);
	fclose(of);
	fclose(df);
	char opt_path[512];
	snprintf(opt_path, sizeof(opt_path), "%s/%s.opt.ir", IR_DIR, *name);
	if (getenv("L7C_UPDATE_GOLDENS")) {
		FILE *w = fopen(opt_path, "w");
		fputs(opt, w);
		fclose(w);
	}
	char *want_opt = l7_slurp(opt_path, NULL);
	cr_assert_not_null(want_opt, "missing golden %s (run with L7C_UPDATE_GOLDENS=1)", opt_path);
	cr_expect_str_eq(opt, want_opt, "optimised IR of %s changed:\n%s", *name, opt);
	free(want_opt);
	free(opt);
	l7_unit_free(&u);
	free(want);
	free(diags);
	free(dump);
}
