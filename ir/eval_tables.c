/* Writable definitions of the header-name tables the parser reads (see eval_parse.c). This
 * file must not include http.h, which declares them const for the kernel build. */
#include <string.h>

#include "ir.h"
#include "l7/abi.h"

__u32 l7_n_wanted;
__u8 l7_wanted_len[L7_MAX_WANTED];
char l7_wanted_name[L7_MAX_WANTED][L7_MAX_NAME];

void ir_eval_set_wanted(const struct ir_program *p);
void ir_eval_set_wanted(const struct ir_program *p)
{
	memset(l7_wanted_name, 0, sizeof(l7_wanted_name));
	l7_n_wanted = (__u32)p->nheaders;
	for (int i = 0; i < p->nheaders && i < L7_MAX_WANTED; i++) {
		size_t n = strlen(p->headers[i]);
		l7_wanted_len[i] = (__u8)n;
		memcpy(l7_wanted_name[i], p->headers[i], n);
	}
}
