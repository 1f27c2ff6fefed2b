/* Every example, compiled by l7c, loads into the running kernel: the verifier accepts every
 * program, and the line info of the loaded programs points back at the .l7 source.
 * Prints, per example: compile time and the verifier's processed-insns of each program. */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include "policy_files.h"
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define LOG_SIZE (1 << 20)   /* level 4 logs only statistics */

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

ParameterizedTestParameters(kernel, load_example)
{
	return l7_policy_files(EXAMPLES_DIR, 0);
}

/* The xlated line info of a loaded program, read against the .l7 source: whether it names the
 * file, how many of its records carry a column, and how many of those do not point at the start
 * of a token of that line (the column is 1-based; 0 means none, as for a policy's own header). */
struct line_info_seen { int mentions, with_col, bad_col; };

static struct line_info_seen line_info_check(__u32 id, const char *file, const char *src)
{
	struct line_info_seen s = { 0 };
	char cmd[256], *text[1024] = { 0 }, *buf = NULL, *line = NULL;
	size_t size = 0, cap = 0;
	FILE *f = fopen(src, "r");
	if (f) {
		getdelim(&buf, &size, 0, f);
		fclose(f);
	}
	char *l = buf;
	for (int n = 0; l && n < 1024; n++) {   /* text[n]: line n + 1 */
		char *nl = strchr(l, '\n');
		text[n] = l;
		if (nl)
			*nl = 0;
		l = nl ? nl + 1 : NULL;
	}
	snprintf(cmd, sizeof(cmd), "bpftool prog dump xlated id %u linum 2>&1", id);
	FILE *p = popen(cmd, "r");
	while (p && getline(&line, &cap, p) > 0) {
		const char *ln = strstr(line, "line_num:"), *lc = strstr(line, "line_col:");
		if (!strstr(line, file) || !ln)
			continue;
		s.mentions = 1;
		unsigned n = (unsigned)atoi(ln + 9), c = lc ? (unsigned)atoi(lc + 9) : 0;
		if (!c)
			continue;
		s.with_col++;
		const char *t = n >= 1 && n <= 1024 && text[n - 1] ? text[n - 1] : "";
		/* a token starts after a blank or punctuation (a member's column is its name's) */
		int starts = c <= strlen(t) && t[c - 1] != ' ' && t[c - 1] != '\t' &&
			     (c == 1 || strchr(" \t(![{,|&.", t[c - 2]));
		if (!starts) {
			s.bad_col++;
			fprintf(stderr, "%s:%u:%u: a line-info column not at a token's start: %s\n", file, n, c, t);
		}
	}
	if (p)
		pclose(p);
	free(line);
	free(buf);
	return s;
}

ParameterizedTest(char **name, kernel, load_example, .timeout = 120)
{
	char src[512], obj[512], cmd[1200];
	snprintf(src, sizeof(src), "%s/%s", EXAMPLES_DIR, *name);
	snprintf(obj, sizeof(obj), "%s/load-%d-%s.o", TMP_DIR, getpid(), *name);
	mkdir(TMP_DIR, 0755);
	snprintf(cmd, sizeof(cmd), "%s %s -o %s", L7C, src, obj);
	double t0 = now();
	cr_assert_eq(system(cmd), 0, "l7c failed: %s", cmd);
	double compile_ms = (now() - t0) * 1e3;

	struct bpf_object *o = bpf_object__open_file(obj, NULL);
	cr_assert(libbpf_get_error(o) == 0, "libbpf cannot open %s", obj);
	struct bpf_program *prog;
	char *logs[16] = { 0 };
	int np = 0;
	bpf_object__for_each_program(prog, o) {
		cr_assert_lt(np, 16);
		logs[np] = calloc(1, LOG_SIZE);
		bpf_program__set_log_buf(prog, logs[np], LOG_SIZE);
		bpf_program__set_log_level(prog, 4);   /* the stats line; level 1 logs every insn (ENOSPC) */
		np++;
	}
	cr_assert_gt(np, 0);
	int err = bpf_object__load(o);
	int i = 0;
	char summary[2048] = "";
	int with_col = 0, bad_col = 0;
	size_t sl = 0;
	bpf_object__for_each_program(prog, o) {
		const char *stats = strstr(logs[i], "processed ");
		long insns = stats ? strtol(stats + strlen("processed "), NULL, 10) : -1;
		cr_expect(err == 0 && bpf_program__fd(prog) >= 0, "%s: verifier rejected %s:\n%s", *name,
			  bpf_program__name(prog), logs[i] + (strlen(logs[i]) > 4000 ? strlen(logs[i]) - 4000 : 0));
		cr_expect_gt(insns, 0, "%s: no 'processed N insns' for %s", *name, bpf_program__name(prog));
		sl += (size_t)snprintf(summary + sl, sizeof(summary) - sl, " %s=%ld", bpf_program__name(prog), insns);
		if (err == 0) {
			struct bpf_prog_info info = { 0 };
			__u32 len = sizeof(info);
			cr_assert_eq(bpf_obj_get_info_by_fd(bpf_program__fd(prog), &info, &len), 0);
			struct line_info_seen li = line_info_check(info.id, *name, src);
			with_col += li.with_col;
			bad_col += li.bad_col;
			if (!strcmp(bpf_program__name(prog), "l7_client_verdict")) {
				cr_expect_gt(info.nr_line_info, 0, "%s: no line info in the loaded program", *name);
				cr_expect(li.mentions, "%s: xlated line info does not name the .l7 file", *name);
			}
		}
		free(logs[i]);
		i++;
	}
	/* a newcomer follows one test of a line to its instructions: the column says which */
	cr_expect_gt(with_col, 0, "%s: no line-info record of any program has a column", *name);
	cr_expect_eq(bad_col, 0, "%s: %d line-info columns do not start a token", *name, bad_col);
	printf("example %s: compile %.1f ms; verifier processed insns:%s\n", *name, compile_ms, summary);
	fflush(stdout);
	bpf_object__close(o);
	unlink(obj);
}
