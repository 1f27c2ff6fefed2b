/* libFuzzer harness: the --endpoints file parser l7run and l7c --eval share (support/epfile.c).
 * Beyond crashes it checks what both rely on: every endpoint kept has a port and a weight
 * 1-255, at most L7_EP_MAX of them, and an error points inside the input (its caret). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "epfile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct l7_eps eps;
	struct l7_epfile_err err;
	const char *sets[] = { "", "api", "users" };
	for (int k = 0; k < 3; k++) {
		memset(&err, 0, sizeof err);
		if (l7_epfile_parse((const char *)data, size, sets[k], &eps, &err)) {
			if (!err.line || !err.col || err.start > size || err.end < err.start || !err.msg[0])
				abort();
			continue;
		}
		if (eps.n < 0 || eps.n > L7_EP_MAX || (k == 0 && eps.n))
			abort();
		for (int i = 0; i < eps.n; i++)
			if (!eps.e[i].addr.sin_port || eps.e[i].weight < 1 || eps.e[i].weight > 255)
				abort();
	}
	return 0;
}
