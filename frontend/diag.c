/* Sources and clang-style diagnostics: "file:line:col: error: msg", the line, a caret. */
#include "frontend.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

struct l7_source *l7_source_from_string(const char *path, const char *text)
{
	struct l7_source *s = calloc(1, sizeof(*s));
	s->path = strdup(path);
	s->len = strlen(text);
	s->text = malloc(s->len + 1);
	memcpy(s->text, text, s->len + 1);
	return s;
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

static const char *sev_name[] = { "note", "warning", "error" };
static const char *sev_color[] = { "\033[1;36m", "\033[1;35m", "\033[1;31m" };

/* "file:line:col: severity: message" */
static void vheadline(struct l7_diags *d, enum l7_severity sev, struct l7_loc loc, const char *fmt, va_list ap)
{
	FILE *out = d->out ? d->out : stderr;
	if (loc.src)
		fprintf(out, "%s%s:%u:%u: ", d->color ? "\033[1m" : "", loc.src->path, loc.line, loc.col);
	else
		fprintf(out, "%sl7c: ", d->color ? "\033[1m" : "");
	fprintf(out, "%s%s:%s ", d->color ? sev_color[sev] : "", sev_name[sev], d->color ? "\033[0m\033[1m" : "");
	vfprintf(out, fmt, ap);
	fprintf(out, "%s\n", d->color ? "\033[0m" : "");
}

void l7_diag(struct l7_diags *d, enum l7_severity sev, struct l7_loc loc, const char *fmt, ...)
{
	FILE *out = d->out ? d->out : stderr;
	if (sev == L7_ERROR)
		d->errors++;
	else if (sev == L7_WARNING)
		d->warnings++;
	va_list ap;
	va_start(ap, fmt);
	vheadline(d, sev, loc, fmt, ap);
	va_end(ap);
	if (!loc.src || loc.start > loc.src->len)
		return;

	/* The source line, then a caret at the column and '~' under the rest of the range. */
	const char *text = loc.src->text;
	size_t bol = loc.start;
	while (bol > 0 && text[bol - 1] != '\n')
		bol--;
	size_t eol = loc.start;
	while (eol < loc.src->len && text[eol] != '\n' && text[eol] != '\r')
		eol++;
	fprintf(out, "%5u | %.*s\n      | ", loc.line, (int)(eol - bol), text + bol);
	for (size_t i = bol; i < loc.start; i++)
		fputc(text[i] == '\t' ? '\t' : ' ', out);
	fprintf(out, "%s^", d->color ? "\033[1;32m" : "");
	size_t end = loc.end < eol ? loc.end : eol;
	for (size_t i = loc.start + 1; i < end; i++)
		fputc('~', out);
	fprintf(out, "%s\n", d->color ? "\033[0m" : "");
}

void l7_hint(struct l7_diags *d, struct l7_loc loc, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vheadline(d, L7_NOTE, loc, fmt, ap);
	va_end(ap);
}

/* ---- arena ---- */

struct l7_arena {
	struct l7_arena *next;
	size_t used, cap;
	char data[];
};

void *l7_alloc(struct l7_arena **a, size_t size)
{
	size = (size + 15) & ~(size_t)15;
	if (!*a || (*a)->used + size > (*a)->cap) {
		size_t cap = size > 65536 ? size : 65536;
		struct l7_arena *n = malloc(sizeof(*n) + cap);
		if (!n)
			abort();
		n->next = *a;
		n->used = 0;
		n->cap = cap;
		*a = n;
	}
	void *p = (*a)->data + (*a)->used;
	(*a)->used += size;
	memset(p, 0, size);
	return p;
}

char *l7_strndup(struct l7_arena **a, const char *s, size_t n)
{
	char *p = l7_alloc(a, n + 1);
	memcpy(p, s, n);
	p[n] = 0;
	return p;
}

void l7_arena_free(struct l7_arena *a)
{
	while (a) {
		struct l7_arena *next = a->next;
		free(a);
		a = next;
	}
}
