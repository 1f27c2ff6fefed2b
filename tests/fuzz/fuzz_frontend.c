/* libFuzzer harness: policy text through the whole pipeline to IR (parse, resolve, lower, the
 * passes, the IR verifier after each: l7_unit_build), as tests/compiler/test_robustness.c
 * drives it. Any crash, sanitizer report, broken IR invariant or a lowering that fails without
 * reporting an error is a finding. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static FILE *sink;
	if (!sink)
		sink = fopen("/dev/null", "w");
	if (size > 64 * 1024)
		return 0;   /* policies are small; long inputs only slow the search down */
	struct l7_diags d = { .out = sink };
	struct l7_pipeline po = { .verify_ir = true };
	struct l7_unit u;
	if (l7_unit_build(&u, l7_source_from_bytes("fuzz.l7", data, size), &po, &d) == L7_UNIT_INTERNAL)
		abort();   /* lowering that failed without reporting (or the reverse), or a broken IR invariant */
	l7_unit_free(&u);
	return 0;
}
