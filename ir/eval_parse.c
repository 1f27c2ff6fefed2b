/* The data plane's request parser (stdlib/bpf/http.h) built natively for the evaluator. The
 * parser reads the header names to extract from the l7_wanted_* tables, which in the kernel
 * are constants of the compiled policy; here they are filled from the IR before each parse
 * (eval_tables.c defines them writable). */
#include "eval_tables.h"
#include "ir.h"

#include <string.h>

#include "http.h"


int ir_parse_request(const struct ir_program *p, struct l7_req *req, const void *bytes, unsigned len)
{
	ir_eval_set_wanted(p);
	memset(req, 0, sizeof(*req));
	unsigned n = len < L7_MAX_HEAD ? len : L7_MAX_HEAD;
	memcpy(req->buf, bytes, n);
	return l7_http_parse_head(req, len < L7_MAX_HEAD + 0u ? len : L7_MAX_HEAD);
}
