/* support: source files and locations in them, for the diagnostics of every stage. */
#ifndef L7_SOURCE_H
#define L7_SOURCE_H

#include <stddef.h>

struct l7_source {
	char *path;
	char *text;                /* len bytes, NUL-terminated (it may hold NULs: l7_source_from_bytes) */
	size_t len;
};

struct l7_loc {
	const struct l7_source *src;
	unsigned line, col;       /* 1-based */
	unsigned start, end;      /* byte offsets, for the caret underline */
};

struct l7_diags;

/* Reads a file; a NUL byte in it is reported (policy files are text). NULL, reported, when
 * it cannot be read. */
struct l7_source *l7_source_load(const char *path, struct l7_diags *d);
/* Copies of text: up to its first NUL, or all len bytes (NULs included: fuzzers, mutators). */
struct l7_source *l7_source_from_string(const char *path, const char *text);
struct l7_source *l7_source_from_bytes(const char *path, const void *bytes, size_t len);
void l7_source_free(struct l7_source *s);

/* The first non-blank column of a line, for diagnostics of stages that keep only lines. */
struct l7_loc l7_loc_of_line(const struct l7_source *src, unsigned line);

/* The location of bytes [start, end) of src. */
struct l7_loc l7_loc_at(const struct l7_source *src, unsigned start, unsigned end);

#endif
