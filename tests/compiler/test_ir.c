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

/* The IR dump of the policy at src after pipeline o, NULL if it does not lower (d says why). */
static char *ir_after(const char *src, const struct l7_pipeline *o, struct l7_diags *d)
{
	struct l7_unit u;
	char *dump = NULL;
	size_t n = 0;

	if (l7_unit_load(&u, src, o, d) != L7_UNIT_OK)
		return NULL;
	FILE *f = open_memstream(&dump, &n);
	ir_dump(u.ir, f);
	fclose(f);
	l7_unit_free(&u);
	return dump;
}

/* got against the golden IR_DIR/NAME.EXT (rewritten first with L7C_UPDATE_GOLDENS=1). */
static void golden(const char *name, const char *ext, const char *got, const char *what)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s.%s", IR_DIR, name, ext);
	if (getenv("L7C_UPDATE_GOLDENS")) {
		FILE *w = fopen(path, "w");
		fputs(got, w);
		fclose(w);
	}
	char *want = l7_slurp(path, NULL);
	cr_assert_not_null(want, "missing golden %s (run with L7C_UPDATE_GOLDENS=1)", path);
	cr_expect_str_eq(got, want, "%s of %s changed:\n%s", what, name, got);
	free(want);
}

ParameterizedTest(char **name, ir, goldens)
{
	char src_path[512];
	snprintf(src_path, sizeof(src_path), "%s/%s.l7", IR_DIR, *name);

	char *diags = NULL;
	size_t dl = 0;
	FILE *df = open_memstream(&diags, &dl);
	struct l7_diags d = { .out = df };
	struct l7_pipeline lowered = { .passes = "none", .verify_ir = true };
	char *dump = ir_after(src_path, &lowered, &d);
	fflush(df);
	cr_assert_not_null(dump, "%s does not lower:\n%s", *name, diags);
	golden(*name, "ir", dump, "IR");

	/* and after the passes: NAME.opt.ir */
	struct l7_pipeline optimised = { .verify_ir = true, .quiet_passes = true };
	char *opt = ir_after(src_path, &optimised, &d);
	fflush(df);
	cr_assert_not_null(opt, "%s does not compile:\n%s", *name, diags);
	golden(*name, "opt.ir", opt, "optimised IR");
	fclose(df);
	free(opt);
	free(diags);
	free(dump);
}
