/* support/bpfobj/vlog.c on logs it is given by hand: what the kernel prints is tested in
 * tests/kernel/refusals.py; here, the shapes a log can take (truncated, empty, garbage, lines
 * longer than a buffer) never crash it, and each part of a well-formed log lands where it must:
 * the failing instruction, the error lines after it, vmsg.def's sentence, the source line,
 * the count. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bpfobj/vlog.h"

static void explain_all_ways(const char *log, const void *obj, size_t len)
{
	struct vlog_explained x;
	char line[2048];
	vlog_explain(log, obj, len, "l7_client_parser", &x);
	cr_assert(x.error[0], "an error line for %.40s", log ? log : "(null)");
	FILE *null = fopen("/dev/null", "w");
	vlog_print(null, &x, "l7_client_parser");
	fclose(null);
	vlog_line(line, sizeof(line), &x, "l7_client_parser");
	cr_assert(strstr(line, "error: the kernel refused program l7_client_parser: "));
}

Test(vlog, any_log_any_object)
{
	static const char *const logs[] = {
		NULL, "", "\n\n\n", "no newline at all", "processed 5 insns (limit 1000000)\n",
		"0: (85) call bpf_loop#181\n", "; @ :\n; x @ f.c:\n; x @ :12\n", "1: (\n2: (xx\n33: (07)\n",
		"; a @ b @ c.l7:4\n7: (b7) r0 = 0\nR0 !read_ok\nverification time 3 usec\nstack depth 0\n",
		"-1: (07) r1 += 1\nboom\n", "99999999999999999999: (07) r1 += 1\nboom\n",
	};
	char junk[4096];
	unsigned long long s = 7;
	for (size_t i = 0; i < sizeof(junk) - 1; i++) {   /* bytes of every value, lines of any length */
		s = s * 6364136223846793005ull + 1442695040888963407ull;
		junk[i] = (char)((s >> 33) % 255 + 1);
	}
	junk[sizeof(junk) - 1] = 0;
	char *longline = malloc(100000);
	memset(longline, 'x', 99999);
	memcpy(longline, "5: (07) ", 8);
	longline[99999] = 0;
	for (size_t i = 0; i < sizeof logs / sizeof logs[0]; i++) {
		explain_all_ways(logs[i], NULL, 0);
		explain_all_ways(logs[i], junk, sizeof(junk));   /* not an ELF object */
	}
	explain_all_ways(junk, NULL, 0);
	explain_all_ways(longline, junk, 16);
	free(longline);
}

Test(vlog, parts_of_a_log)
{
	struct vlog_explained x;
	vlog_explain("func#0 @0\n0: R1=ctx() R10=fp0\n; return v[i]; @ lookup.c:31\n"
		     "0: (61) r0 = *(u32 *)(r1 +0)        ; R0=scalar()\n"
		     "1: (71) r2 = *(u8 *)(r0 +8)\n"
		     "invalid access to map value, value_size=8 off=8 size=1\n"
		     "R0 min value is outside of the allowed memory range\n"
		     "processed 2 insns (limit 1000000) max_states_per_insn 0 total_states 0 peak_states 0 mark_read 0\n",
		     NULL, 0, "p", &x);
	cr_assert_eq(x.insn_idx, 1);
	cr_assert_str_eq(x.insn, "1: r2 = *(u8 *)(r0 +8)");
	cr_assert_str_eq(x.error, "invalid access to map value, value_size=8 off=8 size=1; R0 min value is outside of the "
				  "allowed memory range");
	cr_assert(x.cause && strstr(x.cause, "map value"), "the first row that matches: %s", x.cause);
	cr_assert_str_eq(x.at.file, "lookup.c");   /* no object: the log's own source line */
	cr_assert_eq(x.at.line, 31);
	cr_assert_eq(x.processed, 2);
	cr_assert_eq(x.policy.file[0], 0);

	vlog_explain("; if (x) @ r.l7:9\n3: (15) if r1 == 0x0 goto pc+2\n; f(); @ m.h:40\n4: (85) call pc+7\n"
		     "the verifier's new complaint\nprocessed 9 insns\n", NULL, 0, "p", &x);
	cr_assert_null(x.cause, "not in vmsg.def");
	cr_assert_str_eq(x.error, "the verifier's new complaint");
	cr_assert_str_eq(x.at.file, "m.h");
	cr_assert_str_eq(x.policy.file, "r.l7", "the last .l7 line on the path");
	cr_assert_eq(x.policy.line, 9);
	char line[1024];
	vlog_line(line, sizeof(line), &x, "p");
	cr_assert(strstr(line, "r.l7:9: error: the kernel refused program p: the verifier's new complaint"), "%s", line);
}
