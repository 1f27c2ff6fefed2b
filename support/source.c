/* Source files, and locations in them. */
#include "source.h"

#include "diag.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct l7_source *l7_source_from_bytes(const char *path, const void *bytes, size_t len)
{
	struct l7_source *s = calloc(1, sizeof(*s));
	s->path = strdup(path);
	s->len = len;
	s->text = malloc(len + 1);
	if (len)
		memcpy(s->text, bytes, len);
	s->text[len] = 0;
	return s;
}

struct l7_source *l7_source_from_string(const char *path, const char *text)
{
	return l7_source_from_bytes(path, text, strlen(text));
}

struct l7_source *l7_source_load(const char *path, struct l7_diags *d)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		fprintf(d->out, "l7c: error: cannot open '%s': %s\n", path, strerror(errno));
		d->errors++;
		return NULL;
	}
	struct l7_source *s = calloc(1, sizeof(*s));
	size_t cap = 4096;
	s->text = malloc(cap);
	size_t n;
	while ((n = fread(s->text + s->len, 1, cap - s->len - 1, f)) > 0) {
		s->len += n;
		if (cap - s->len - 1 == 0)
			s->text = realloc(s->text, cap *= 2);
	}
	fclose(f);
	s->text[s->len] = 0;
	s->path = strdup(path);
	if (memchr(s->text, 0, s->len)) {
		struct l7_loc loc = { s, 1, 1, 0, 0 };
		l7_diag(d, L7_ERROR, loc, "file contains a NUL byte; policy files are text");
	}
	return s;
}

void l7_source_free(struct l7_source *s)
{
	if (!s)
		return;
	free(s->path);
	free(s->text);
	free(s);
}

struct l7_loc l7_loc_of_line(const struct l7_source *src, unsigned line)
{
	struct l7_loc loc = { src, line, 1, 0, 0 };
	if (!src)
		return loc;
	size_t at = 0;
	for (unsigned l = 1; l < line && at < src->len; at++)
		if (src->text[at] == '\n')
			l++;
	size_t eol = at;
	while (eol < src->len && src->text[eol] != '\n')
		eol++;
	while (at < eol && (src->text[at] == ' ' || src->text[at] == '\t')) {
		at++;
		loc.col++;
	}
	loc.start = (unsigned)at;
	loc.end = (unsigned)eol;
	while (loc.end > loc.start && (src->text[loc.end - 1] == '\r' || src->text[loc.end - 1] == ' '))
		loc.end--;
	return loc;
}

struct l7_loc l7_loc_at(const struct l7_source *src, unsigned start, unsigned end)
{
	struct l7_loc loc = { src, 1, 1, start, end };
	for (unsigned i = 0; i < start && i < src->len; i++) {
		loc.col++;
		if (src->text[i] == '\n') {
			loc.line++;
			loc.col = 1;
		}
	}
	return loc;
}

