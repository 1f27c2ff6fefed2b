/* The .l7 files of a directory as criterion parameters (one test per policy file), with or
 * without their extension, or as paths; and reading a whole file. Shared by the compiler and
 * kernel test suites. */
#ifndef L7_TEST_POLICY_FILES_H
#define L7_TEST_POLICY_FILES_H

#include <criterion/parameterized.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline struct criterion_test_params l7_policy_files(const char *dir, int strip_ext)
{
	static char names[64][128];
	int n = 0;
	DIR *d = opendir(dir);
	struct dirent *e;
	while (d && (e = readdir(d)) && n < 64) {
		size_t l = strlen(e->d_name);
		if (l > 3 && !strcmp(e->d_name + l - 3, ".l7"))
			snprintf(names[n++], sizeof(names[0]), "%.*s", (int)(strip_ext ? l - 3 : l), e->d_name);
	}
	if (d)
		closedir(d);
	char **params = cr_malloc(sizeof(char *) * (size_t)n);
	for (int i = 0; i < n; i++) {
		params[i] = cr_malloc(strlen(names[i]) + 1);
		strcpy(params[i], names[i]);
	}
	return cr_make_param_array(char *, params, (size_t)n, NULL);
}

/* The paths of the .l7 files of dir, at most max; returns how many. */
static inline int l7_policy_paths(const char *dir, char (*paths)[512], int max)
{
	int n = 0;
	DIR *d = opendir(dir);
	struct dirent *e;
	while (d && (e = readdir(d)) && n < max) {
		size_t l = strlen(e->d_name);
		if (l > 3 && !strcmp(e->d_name + l - 3, ".l7"))
			snprintf(paths[n++], sizeof(paths[0]), "%s/%s", dir, e->d_name);
	}
	if (d)
		closedir(d);
	return n;
}

/* A whole file, NUL-terminated (its length in *len when len is not NULL), or NULL. */
static inline char *l7_slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	rewind(f);
	char *s = malloc((size_t)n + 1);
	size_t got = fread(s, 1, (size_t)n, f);
	s[got] = 0;
	fclose(f);
	if (len)
		*len = got;
	return s;
}

#endif
