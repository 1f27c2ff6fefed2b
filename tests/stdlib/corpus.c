#include "corpus.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef L7_CORPUS_DIR
#define L7_CORPUS_DIR "../shared/corpus"
#endif

const char *corpus_dir(void)
{
	const char *e = getenv("L7_CORPUS");
	return e && *e ? e : L7_CORPUS_DIR;
}

unsigned char *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	unsigned char *p;
	long n;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	p = malloc((size_t)n + 1);
	if (p && fread(p, 1, (size_t)n, f) != (size_t)n) {
		free(p);
		p = NULL;
	}
	fclose(f);
	if (p) {
		p[n] = 0;
		*len = (size_t)n;
	}
	return p;
}

unsigned char *corpus_read(const char *rel, size_t *len)
{
	char path[4096];

	snprintf(path, sizeof path, "%s/%s", corpus_dir(), rel);
	return read_file(path, len);
}

int tsv_load(const char *path, struct tsv *t)
{
	size_t len;
	char *s, *line, *next;
	int header = 1;

	memset(t, 0, sizeof *t);
	t->text = (char *)(path[0] == '/' ? read_file(path, &len) : corpus_read(path, &len));
	if (!t->text)
		return -1;
	for (s = t->text; s; s = next) {
		char **fields = NULL;
		int n = 0;

		line = s;
		next = strchr(s, '\n');
		if (next)
			*next++ = 0;
		if (!*line || *line == '#')
			continue;
		if (header) {
			header = 0;
			continue;
		}
		for (char *p = line;;) {
			char *tab = strchr(p, '\t');
			fields = realloc(fields, sizeof(char *) * (size_t)(n + 1));
			fields[n++] = p;
			if (!tab)
				break;
			*tab = 0;
			p = tab + 1;
		}
		t->f = realloc(t->f, sizeof(char **) * (size_t)(t->nrows + 1));
		t->nf = realloc(t->nf, sizeof(int) * (size_t)(t->nrows + 1));
		t->f[t->nrows] = fields;
		t->nf[t->nrows] = n;
		t->nrows++;
	}
	return 0;
}

void tsv_free(struct tsv *t)
{
	for (int i = 0; i < t->nrows; i++)
		free(t->f[i]);
	free(t->f);
	free(t->nf);
	free(t->text);
	memset(t, 0, sizeof *t);
}

const char *tsv_get(const struct tsv *t, int row, int col)
{
	return col < t->nf[row] ? t->f[row][col] : "";
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

long hex_decode(const char *hex, unsigned char *out, size_t cap)
{
	size_t n = strlen(hex), i;

	if (n % 2 || n / 2 > cap)
		return -1;
	for (i = 0; i < n / 2; i++) {
		int a = hexval(hex[2 * i]), b = hexval(hex[2 * i + 1]);
		if (a < 0 || b < 0)
			return -1;
		out[i] = (unsigned char)(a << 4 | b);
	}
	return (long)(n / 2);
}

size_t unescape(const char *s, char *out, size_t cap)
{
	size_t n = 0;

	while (*s && n + 1 < cap) {
		if (*s == '\\' && s[1]) {
			s++;
			switch (*s) {
			case 't': out[n++] = '\t'; s++; continue;
			case 'r': out[n++] = '\r'; s++; continue;
			case 'n': out[n++] = '\n'; s++; continue;
			case 'x':
				if (hexval(s[1]) >= 0 && hexval(s[2]) >= 0) {
					out[n++] = (char)(hexval(s[1]) << 4 | hexval(s[2]));
					s += 3;
					continue;
				}
				break;
			default:
				out[n++] = *s++;
				continue;
			}
		}
		out[n++] = *s++;
	}
	out[n] = 0;
	return n;
}
