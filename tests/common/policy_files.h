/* The .l7 files of a directory as criterion parameters (one test per policy file), with or
 * without their extension. Shared by the compiler and kernel test suites. */
#ifndef L7_TEST_POLICY_FILES_H
#define L7_TEST_POLICY_FILES_H

#include <criterion/parameterized.h>
#include <dirent.h>
#include <stdio.h>
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

#endif
