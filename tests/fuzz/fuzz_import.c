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

#include "import.h"
#include "pipeline.h"

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
	struct l7_source *src = l7_source_from_bytes("fuzz.yaml", data, size);

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
		struct l7_diags dc = { .out = sink };
		struct l7_pipeline po = { .verify_ir = true };
		struct l7_unit u;
		enum l7_unit_status st = l7_unit_build(&u, l7_source_from_string(out, text), &po, &dc);
		l7_unit_free(&u);
		if (st != L7_UNIT_OK) {
			fprintf(stderr, "l7c import wrote a policy the compiler refuses:\n%s\n", text);
			dc.out = stderr;   /* say why, then stop */
			l7_unit_build(&u, l7_source_from_string(out, text), &po, &dc);
			abort();
		}
	}
	free(text);
	l7_source_free(src);
	return 0;
}
