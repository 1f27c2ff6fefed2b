/* Clang-style diagnostics: "file:line:col: error: msg", the line, a caret. */
#include "diag.h"

#include <stdarg.h>
#include <stdlib.h>

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

void l7_diag_again(struct l7_diags *d, struct l7_loc loc, struct l7_loc prev, const char *what, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	l7_diag(d, L7_ERROR, loc, "%s", msg);
	l7_diag(d, L7_NOTE, prev, "previous %s is here", what);
}
