/* A source holding a fuzzer's input as it is: all `size` bytes, NULs included
 * (l7_source_from_string copies only up to the first NUL). */
#ifndef L7_FUZZ_SOURCE_H
#define L7_FUZZ_SOURCE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "frontend.h"

static inline struct l7_source *fuzz_source(const char *path, const uint8_t *data, size_t size)
{
	struct l7_source *src = l7_source_from_string(path, "");
	free(src->text);
	src->text = malloc(size + 1);
	memcpy(src->text, data, size);
	src->text[size] = 0;
	src->len = size;
	return src;
}

#endif
