/* The grammar's corpus (the .txt files of dsl/test/corpus, tree-sitter's format: "=== title ===", source,
 * "---", expected tree) checked with the parser l7c links, so no tree-sitter CLI is needed.
 * A title followed by ":error" expects a tree with an ERROR or MISSING node.
 * L7C_UPDATE_GOLDENS=1 rewrites the expected trees. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tree_sitter/api.h>

#include "policy_files.h"

const TSLanguage *tree_sitter_l7(void);

/* Drops all white space: formatting of the expected tree does not matter. */
static void squeeze(char *s)
{
	char *o = s;
	for (; *s; s++)
		if (*s != ' ' && *s != '\n' && *s != '\t' && *s != '\r')
			*o++ = *s;
	*o = 0;
}

/* ts_node_string's one-line tree, one node per line ("field: (node"), indented by depth. */
static void pretty(FILE *o, const char *t)
{
	int depth = 0;
	for (const char *c = t; *c; c++) {
		if (*c == ' ') {   /* a node or a field label follows: new line */
			fputc('\n', o);
			for (int i = 0; i < depth; i++)
				fputs("  ", o);
			continue;
		}
		if (*c == ':' && c[1] == ' ') {   /* "name: (x" stays on one line */
			fputs(": ", o);
			c++;
			continue;
		}
		depth += *c == '(' ? 1 : *c == ')' ? -1 : 0;
		fputc(*c, o);
	}
	fputc('\n', o);
}

static int is_rule(const char *line, char c)
{
	int n = 0;
	while (line[n] == c)
		n++;
	return n >= 3 && (line[n] == '\n' || line[n] == 0);
}

static int check_file(const char *path, int *cases)
{
	char *text = l7_slurp(path, NULL);
	cr_assert_not_null(text, "%s", path);
	FILE *upd = NULL;
	char *newtext = NULL;
	size_t newlen = 0;
	if (getenv("L7C_UPDATE_GOLDENS"))
		upd = open_memstream(&newtext, &newlen);
	TSParser *parser = ts_parser_new();
	ts_parser_set_language(parser, tree_sitter_l7());
	int failures = 0;
	char *p = text;
	while ((p = strstr(p, "===")) && is_rule(p, '=')) {
		char *title = strchr(p, '\n') + 1;
		char *title_end = strchr(title, '\n');
		int expect_error = !strncmp(title_end + 1, ":error", 6);
		char *close = expect_error ? strchr(title_end + 1, '\n') + 1 : title_end + 1;
		char *src = strchr(close, '\n') + 1;   /* after the closing === line */
		/* the source runs to the first line made of dashes */
		char *sep = src;
		while (sep && !(sep[-1] == '\n' && is_rule(sep, '-')))
			sep = strchr(sep + 1, '-');
		cr_assert_not_null(sep, "%s: case '%.*s' has no --- line", path, (int)(title_end - title), title);
		char *exp = strchr(sep, '\n') + 1;
		char *next = strstr(exp, "\n===");
		char *exp_end = next ? next + 1 : exp + strlen(exp);

		TSTree *tree = ts_parser_parse_string(parser, NULL, src, (uint32_t)(sep - src));
		TSNode root = ts_tree_root_node(tree);
		char *got = ts_node_string(root);
		char *want = strndup(exp, (size_t)(exp_end - exp));
		squeeze(want);
		char *got_sq = strdup(got);
		squeeze(got_sq);
		(*cases)++;
		if (expect_error) {
			if (!ts_node_has_error(root)) {
				failures++;
				cr_log_error("%s: '%.*s' parsed without error", path, (int)(title_end - title), title);
			}
		} else if (!upd && strcmp(got_sq, want)) {
			failures++;
			cr_log_error("%s: '%.*s'\n  want: %s\n  got:  %s", path, (int)(title_end - title), title, want, got_sq);
		}
		if (upd) {
			fprintf(upd, "%.*s", (int)(exp - p), p);
			fputc('\n', upd);
			if (!expect_error)
				pretty(upd, got);
			fputc('\n', upd);
		}
		free(got);
		free(got_sq);
		free(want);
		ts_tree_delete(tree);
		p = exp_end;
	}
	ts_parser_delete(parser);
	if (upd) {
		fclose(upd);
		FILE *w = fopen(path, "w");
		fputs(newtext, w);
		fclose(w);
		free(newtext);
	}
	free(text);
	return failures;
}

Test(grammar, corpus)
{
	DIR *d = opendir(CORPUS_DIR);
	cr_assert_not_null(d);
	struct dirent *e;
	int failures = 0, cases = 0;
	while ((e = readdir(d))) {
		size_t l = strlen(e->d_name);
		if (l < 5 || strcmp(e->d_name + l - 4, ".txt"))
			continue;
		char path[512];
		snprintf(path, sizeof(path), "%s/%s", CORPUS_DIR, e->d_name);
		failures += check_file(path, &cases);
	}
	closedir(d);
	cr_assert_gt(cases, 0);
	cr_assert_eq(failures, 0, "%d of %d corpus cases failed", failures, cases);
}

/* Every example parses without syntax errors (what tree-sitter grammars' CI does). */
Test(grammar, examples_parse)
{
	DIR *d = opendir(EXAMPLES_DIR);
	cr_assert_not_null(d);
	struct dirent *e;
	TSParser *parser = ts_parser_new();
	ts_parser_set_language(parser, tree_sitter_l7());
	while ((e = readdir(d))) {
		size_t l = strlen(e->d_name);
		if (l < 4 || strcmp(e->d_name + l - 3, ".l7"))
			continue;
		char path[512];
		snprintf(path, sizeof(path), "%s/%s", EXAMPLES_DIR, e->d_name);
		char *s = l7_slurp(path, NULL);
		cr_assert_not_null(s, "%s", path);
		TSTree *t = ts_parser_parse_string(parser, NULL, s, (uint32_t)strlen(s));
		cr_expect(!ts_node_has_error(ts_tree_root_node(t)), "%s has syntax errors", e->d_name);
		ts_tree_delete(t);
		free(s);
	}
	ts_parser_delete(parser);
	closedir(d);
}

/* The text of route.l7 that capture `name` of queries/highlights.scm marks, joined by '|'. */
static void captured(const TSQuery *q, TSNode root, const char *src, const char *name, char *out, size_t cap)
{
	TSQueryCursor *c = ts_query_cursor_new();
	ts_query_cursor_exec(c, q, root);
	TSQueryMatch m;
	uint32_t ci;
	size_t n = 0;
	out[0] = 0;
	while (ts_query_cursor_next_capture(c, &m, &ci)) {
		uint32_t len;
		const char *cn = ts_query_capture_name_for_id(q, m.captures[ci].index, &len);
		if (len != strlen(name) || strncmp(cn, name, len))
			continue;
		uint32_t a = ts_node_start_byte(m.captures[ci].node), b = ts_node_end_byte(m.captures[ci].node);
		n += (size_t)snprintf(out + n, n < cap ? cap - n : 0, "%.*s|", (int)(b - a), src + a);
	}
	ts_query_cursor_delete(c);
}

/* queries/highlights.scm (what editors highlight with) is a valid query of this grammar, and
 * marks what it should in an example. */
Test(grammar, highlights_query)
{
	char *qs = l7_slurp(QUERIES_DIR "/highlights.scm", NULL);
	cr_assert_not_null(qs, "%s", QUERIES_DIR "/highlights.scm");
	uint32_t err_off;
	TSQueryError err;
	TSQuery *q = ts_query_new(tree_sitter_l7(), qs, (uint32_t)strlen(qs), &err_off, &err);
	cr_assert_not_null(q, "highlights.scm: query error %d at offset %u: %.40s", err, err_off, qs + err_off);
	char *s = l7_slurp(EXAMPLES_DIR "/load_balance.l7", NULL);
	cr_assert_not_null(s, "%s", EXAMPLES_DIR "/load_balance.l7");
	TSParser *parser = ts_parser_new();
	ts_parser_set_language(parser, tree_sitter_l7());
	TSTree *t = ts_parser_parse_string(parser, NULL, s, (uint32_t)strlen(s));
	static char got[65536];
	static const struct { const char *capture, *text; } want[] = {
		{ "keyword", "|policy|" }, { "keyword", "|upstream|" }, { "keyword", "|balance|" },
		{ "keyword", "|weight|" }, { "keyword", "|act|" }, { "string", "|\"x-user\"|" },
		{ "function.call", "|Route|" }, { "constant", "|127.0.0.1:9001|" }, { "comment", "|// " },
		{ "type", "|HttpRequest|" }, { "attribute", "|Ingress|" },
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		captured(q, ts_tree_root_node(t), s, want[i].capture, got + 1, sizeof(got) - 1);
		got[0] = '|';
		cr_expect(strstr(got, want[i].text) != NULL, "@%s does not mark %s in load_balance.l7: %.300s",
			  want[i].capture, want[i].text, got);
	}
	ts_tree_delete(t);
	ts_parser_delete(parser);
	ts_query_delete(q);
	free(s);
	free(qs);
}
