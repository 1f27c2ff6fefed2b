/* libFuzzer harness: policy text through the whole front end (parse, resolve, lower, optimise),
 * as tests/compiler/test_robustness.c drives it. Any crash, sanitizer report or a lowering
 * that fails without reporting an error is a finding. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend.h"
#include "fuzz_source.h"
#include "ir.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static FILE *sink;
	if (!sink)
		sink = fopen("/dev/null", "w");
	if (size > 64 * 1024)
		return 0;   /* policies are small; long inputs only slow the search down */
	struct l7_source *src = fuzz_source("fuzz.l7", data, size);
	struct l7_diags d = { .out = sink };
	struct l7_module m = { 0 };
	const char *inc[] = { L7_STDLIB_DIR };
	l7_parse(&m, src, false, &d);
	l7_resolve(&m, inc, 1, &d);
	if (!d.errors) {
		struct ir_program *p = ir_lower(&m, &d);
		if ((p != NULL) != (d.errors == 0))
			abort();   /* lowering must fail exactly when it reports */
		if (p)
			ir_optimise(p, NULL, &d, NULL);
		ir_free(p);
	}
	l7_module_free(&m);
	l7_source_free(src);
	return 0;
}
