/* libFuzzer harness: YAML through `l7c import` (import/), and whatever it imports through the
 * front end, lowering and passes (as fuzz_frontend.c drives them). Findings: any crash or
 * sanitizer report, an import that fails without reporting an error, and an import that
 * succeeds but writes a policy the compiler reports errors for (the importer's promise is that
 * its output compiles). Seeds: tests/import/cases. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "frontend.h"
#include "fuzz_source.h"
#include "import.h"
#include "ir.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static FILE *sink;
	static char dir[64], out[96];
	if (!sink) {
		sink = fopen("/dev/null", "w");
		snprintf(dir, sizeof dir, "/tmp/l7c-fuzz-import-%d", (int)getpid());
		mkdir(dir, 0700);   /* JWT key files are written next to the output */
		snprintf(out, sizeof out, "%s/policy.l7", dir);
	}
	if (size > 64 * 1024)
		return 0;
	struct l7_source *src = fuzz_source("fuzz.yaml", data, size);

	struct l7_import_opts o = { .out_path = out, .ns = "default", .istio_root = "istio-system", .port = 80,
				    .fallback_ip = 0x7f000001, .fallback_port = 15001 };
	struct l7_diags d = { .out = sink };
	char *text = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&text, &len);
	int rc = l7_import(&o, &src, 1, mem, &d);
	fclose(mem);
	if ((rc != 0) != (d.errors != 0))
		abort();   /* a failure must be reported, a report must fail */
	if (!rc) {
		struct l7_source *pol = l7_source_from_string(out, text);
		struct l7_diags dc = { .out = sink };
		struct l7_module m = { 0 };
		const char *inc[] = { L7_STDLIB_DIR };
		l7_parse(&m, pol, false, &dc);
		l7_resolve(&m, inc, 1, &dc);
		struct ir_program *p = dc.errors ? NULL : ir_lower(&m, &dc);
		if (p)
			ir_optimise(p, NULL, &dc, NULL);
		if (dc.errors) {
			fprintf(stderr, "l7c import wrote a policy the compiler refuses:\n%s\n", text);
			dc.out = stderr;
			l7_module_free(&m);
			m = (struct l7_module){ 0 };
			l7_parse(&m, pol, false, &dc);
			l7_resolve(&m, inc, 1, &dc);
			abort();
		}
		ir_free(p);
		l7_module_free(&m);
		l7_source_free(pol);
	}
	free(text);
	l7_source_free(src);
	return 0;
}
