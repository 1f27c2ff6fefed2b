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

/* The source file named by the xlated line info of a loaded program. */
static int line_info_mentions(__u32 id, const char *file)
{
	char cmd[256], line[4096];
	snprintf(cmd, sizeof(cmd), "bpftool prog dump xlated id %u linum 2>&1", id);
	FILE *p = popen(cmd, "r");
	if (!p)
		return 0;
	int found = 0;
	while (fgets(line, sizeof(line), p))
		if (strstr(line, file) && strstr(line, "line_num:"))
			found = 1;
	pclose(p);
	return found;
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
	size_t sl = 0;
	bpf_object__for_each_program(prog, o) {
		const char *stats = strstr(logs[i], "processed ");
		long insns = stats ? strtol(stats + strlen("processed "), NULL, 10) : -1;
		cr_expect(err == 0 && bpf_program__fd(prog) >= 0, "%s: verifier rejected %s:\n%s", *name,
			  bpf_program__name(prog), logs[i] + (strlen(logs[i]) > 4000 ? strlen(logs[i]) - 4000 : 0));
		cr_expect_gt(insns, 0, "%s: no 'processed N insns' for %s", *name, bpf_program__name(prog));
		sl += (size_t)snprintf(summary + sl, sizeof(summary) - sl, " %s=%ld", bpf_program__name(prog), insns);
		if (err == 0 && !strcmp(bpf_program__name(prog), "l7_client_verdict")) {
			struct bpf_prog_info info = { 0 };
			__u32 len = sizeof(info);
			cr_assert_eq(bpf_obj_get_info_by_fd(bpf_program__fd(prog), &info, &len), 0);
			cr_expect_gt(info.nr_line_info, 0, "%s: no line info in the loaded program", *name);
			cr_expect(line_info_mentions(info.id, *name), "%s: xlated line info does not name the .l7 file", *name);
		}
		free(logs[i]);
		i++;
	}
	printf("example %s: compile %.1f ms; verifier processed insns:%s\n", *name, compile_ms, summary);
	fflush(stdout);
	bpf_object__close(o);
	unlink(obj);
}
