/* Test-side access to the shared corpus (../shared/corpus beside the repo, or $L7_CORPUS). */
#ifndef L7_TEST_CORPUS_H
#define L7_TEST_CORPUS_H

#include <stddef.h>

/* Corpus root: $L7_CORPUS if set, else the configure-time L7_CORPUS_DIR. */
const char *corpus_dir(void);
/* File under the corpus root, read whole; NULL if missing. Caller frees. */
unsigned char *corpus_read(const char *rel, size_t *len);
/* Any file, read whole; NULL if missing. */
unsigned char *read_file(const char *path, size_t *len);

/* A TSV index: header row and '#' comment lines dropped; fields split on TAB. */
struct tsv {
	char *text;
	int nrows;
	int *nf;        /* fields per row */
	char ***f;      /* f[row][field] */
};
int tsv_load(const char *path, struct tsv *t);  /* path absolute or corpus-relative */
void tsv_free(struct tsv *t);
/* Field by index, "" if the row is short. */
const char *tsv_get(const struct tsv *t, int row, int col);

/* Hex to bytes; returns length or -1. */
long hex_decode(const char *hex, unsigned char *out, size_t cap);
/* The corpus' C-style escapes (\\ \t \r \n \xHH) to bytes; returns length. */
size_t unescape(const char *s, char *out, size_t cap);

#endif
