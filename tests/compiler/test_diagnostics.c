/* Every file in cases/ is a self-checking test: its `// expect: L:C: severity: message`
 * comments are exactly the errors, warnings and notes (hints) l7c must report for it (in any
 * order). */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include "policy_files.h"
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline.h"

#define MAX_LINES 64

struct lines {
	char *v[MAX_LINES];
	int n;
};

static void add_line(struct lines *l, const char *s, size_t n)
{
	cr_assert_lt(l->n, MAX_LINES);
	l->v[l->n++] = strndup(s, n);
}

/* Runs the pipeline to IR on path (the passes too: they warn); returns the diagnostics printed. */
static char *compile(const char *path, int *errors)
{
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);
	struct l7_diags d = { .out = f };
	struct l7_pipeline po = { .verify_ir = true };
	struct l7_unit u;
	enum l7_unit_status rc = l7_unit_load(&u, path, &po, &d);
	cr_assert(rc == L7_UNIT_OK || rc == L7_UNIT_ERRORS, "%s: status %d", path, rc);
	l7_unit_free(&u);
	fclose(f);
	*errors = d.errors;
	return out;
}

/* "dir/cases/x.l7:3:4: error: m" -> "3:4: error: m" for the case itself, "bad.l7i:3:4: ..." for others */
static void reported(const char *out, const char *case_base, struct lines *got)
{
	for (const char *line = out; *line;) {
		const char *eol = strchr(line, '\n');
		size_t n = eol ? (size_t)(eol - line) : strlen(line);
		char *l = strndup(line, n);
		char *colon = strchr(l, ':');
		if (colon && (strstr(l, ": error: ") || strstr(l, ": warning: ") || strstr(l, ": note: ")) && l[0] != ' ') {
			char *base = l;
			for (char *p = l; p < colon; p++)
				if (*p == '/')
					base = p + 1;
			size_t bl = strlen(case_base);
			if ((size_t)(colon - base) == bl && !strncmp(base, case_base, bl))
				base = colon + 1;
			add_line(got, base, strlen(base));
		}
		free(l);
		line = eol ? eol + 1 : line + n;
	}
}

static void expected(const char *path, struct lines *want)
{
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f, "cannot open %s", path);
	char buf[1024];
	while (fgets(buf, sizeof(buf), f)) {
		char *e = strstr(buf, "// expect: ");
		if (!e)
			continue;
		e += strlen("// expect: ");
		add_line(want, e, strcspn(e, "\n"));
	}
	fclose(f);
}

static int count_matching(const struct lines *l, const char *s)
{
	int c = 0;
	for (int i = 0; i < l->n; i++)
		c += !strcmp(l->v[i], s);
	return c;
}

ParameterizedTestParameters(diagnostics, cases)
{
	return l7_policy_files(CASES_DIR, 0);
}

ParameterizedTest(char **name, diagnostics, cases)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", CASES_DIR, *name);
	struct lines want = { 0 }, got = { 0 };
	expected(path, &want);
	cr_assert_gt(want.n, 0, "%s has no // expect: lines", *name);
	int errors;
	char *out = compile(path, &errors);
	reported(out, *name, &got);
	for (int i = 0; i < want.n; i++)
		cr_expect_eq(count_matching(&got, want.v[i]), count_matching(&want, want.v[i]),
			     "%s: expected once: %s\n--- l7c printed:\n%s", *name, want.v[i], out);
	for (int i = 0; i < got.n; i++)
		cr_expect_eq(count_matching(&want, got.v[i]), count_matching(&got, got.v[i]),
			     "%s: unexpected diagnostic: %s", *name, got.v[i]);
	free(out);
}

/* Every diagnostic shows the source line and a caret under the column it names. */
Test(diagnostics, caret_under_column)
{
	int errors;
	char *out = compile(CASES_DIR "/five_mistakes.l7", &errors);
	cr_assert_eq(errors, 5);
	const char *at = strstr(out, "unknown action 'SetHeadr'");
	cr_assert_not_null(at);
	const char *src_line = strchr(at, '\n') + 1, *caret_line = strchr(src_line, '\n') + 1;
	cr_assert(strstr(src_line, "SetHeadr(request, \"a\", \"b\");") != NULL, "%s", src_line);
	/* "   10 |     SetHeadr(...)" / "      |     ^~~~" : the caret sits under the 'S' */
	const char *s = strchr(src_line, 'S');
	const char *caret = strchr(caret_line, '^');
	cr_assert_eq(caret - caret_line, s - src_line, "caret misplaced:\n%.*s", (int)(strchr(caret_line, '\n') - src_line), src_line);
	free(out);
}

/* Examples compile without errors, and warn exactly where their // expect: lines say. */
Test(diagnostics, examples_compile_clean)
{
	DIR *d = opendir(EXAMPLES_DIR);
	cr_assert_not_null(d);
	struct dirent *e;
	int seen = 0;
	while ((e = readdir(d))) {
		size_t l = strlen(e->d_name);
		if (l <= 3 || strcmp(e->d_name + l - 3, ".l7"))
			continue;
		char path[512];
		snprintf(path, sizeof(path), "%s/%s", EXAMPLES_DIR, e->d_name);
		int errors;
		char *out = compile(path, &errors);
		cr_expect_eq(errors, 0, "%s:\n%s", e->d_name, out);
		struct lines want = { 0 }, got = { 0 };
		expected(path, &want);
		reported(out, e->d_name, &got);
		for (int i = 0; i < got.n; i++)
			cr_expect_eq(count_matching(&want, got.v[i]), count_matching(&got, got.v[i]),
				     "%s: unexpected diagnostic: %s", e->d_name, got.v[i]);
		for (int i = 0; i < want.n; i++)
			cr_expect_gt(count_matching(&got, want.v[i]), 0, "%s: expected: %s", e->d_name, want.v[i]);
		free(out);
		seen++;
	}
	closedir(d);
	cr_assert_gt(seen, 0);
}
