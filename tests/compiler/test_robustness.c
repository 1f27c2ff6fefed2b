/* No input crashes the compiler: thousands of mutations of real policies (byte flips,
 * insertions of grammar tokens, truncations, deletions) go through parsing, resolution,
 * lowering and the passes (l7_unit_build, the IR verifier after each). A crash fails the test;
 * each result must be either clean or reported errors. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline.h"
#include "policy_files.h"

static const char *seeds[] = {
	EXAMPLES_DIR "/route.l7",
	CASES_DIR "/five_mistakes.l7",
	CASES_DIR "/types.l7",
	CASES_DIR "/warnings.l7",
	CASES_DIR "/addresses.l7",
	CASES_DIR "/strings.l7",
};

static const char *tokens[] = {
	"(", ")", "{", "}", "[", "]", ";", ",", ".", "\"", "'", "==", "&&", "||", "!", "in", "..",
	"policy", "act", "using", "context", "if", "else", "Route", "Deny", "SetHeader", "request",
	"1.2.3.4", "1.2.3.4/33", "1.2.3.4:0", "99999999999999999999", "\\", "/*", "---", "\xff", "\0",
	"upstream", "service", "identity", "fallback", "::", "::1", "host.name:80", "\\d", "=",
};

static unsigned rng(unsigned long long *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return (unsigned)(*s >> 33);
}

Test(robustness, mutated_policies_never_crash, .timeout = 240)
{
	unsigned long long seed = 0x17c;
	int runs = 0, clean = 0;
	FILE *sink = fopen("/dev/null", "w");
	for (size_t si = 0; si < sizeof(seeds) / sizeof(seeds[0]); si++) {
		size_t len;
		char *orig = l7_slurp(seeds[si], &len);
		cr_assert_not_null(orig, "%s", seeds[si]);
		for (int iter = 0; iter < 1000; iter++) {
			char *buf = malloc(len + 64 * 8 + 1);
			memcpy(buf, orig, len);
			size_t n = len;
			int edits = 1 + rng(&seed) % 4;
			for (int e = 0; e < edits && n > 0; e++) {
				size_t at = rng(&seed) % n;
				switch (rng(&seed) % 4) {
				case 0: buf[at] = (char)rng(&seed); break;                       /* flip */
				case 1: n = at; break;                                            /* truncate */
				case 2: memmove(buf + at, buf + at + 1, n - at - 1); n--; break;  /* delete */
				case 3: {                                                         /* insert a token */
					const char *t = tokens[rng(&seed) % (sizeof(tokens) / sizeof(tokens[0]))];
					size_t tl = strlen(t) ? strlen(t) : 1;
					memmove(buf + at + tl, buf + at, n - at);
					memcpy(buf + at, t, tl);
					n += tl;
					break;
				}
				}
			}
			buf[n] = 0;
			/* the mutated bytes may hold NULs: the source has their real length */
			struct l7_diags d = { .out = sink };
			struct l7_pipeline po = { .verify_ir = true };
			struct l7_unit u;
			enum l7_unit_status rc = l7_unit_build(&u, l7_source_from_bytes(seeds[si], buf, n), &po, &d);
			cr_assert(rc != L7_UNIT_INTERNAL, "lowering must fail exactly when it reports, and keep the IR's invariants");
			clean += rc == L7_UNIT_OK;
			l7_unit_free(&u);
			free(buf);
			runs++;
		}
		free(orig);
	}
	fclose(sink);
	cr_log_info("%d mutated policies, %d still valid", runs, clean);
	cr_assert_eq(runs, (int)(sizeof(seeds) / sizeof(seeds[0])) * 1000);
}
