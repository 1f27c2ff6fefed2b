/* gw_req_tmp.h: TEMPORARY request-head parser with the signature of http.h's
 * l7_http_parse_head, used until stdlib/bpf/http.h is committed (then this file goes).
 * Fills head_len, method, method_s, target, path, query, host, body_len and the flags; refuses
 * bare LF, CL with TE, differing Content-Lengths, duplicate Host, line folding. */
#ifndef L7_GW_REQ_TMP_H
#define L7_GW_REQ_TMP_H

#include "gw_head.h"

static __always_inline int l7_http_parse_head(struct l7_req *req, __u32 len)
{
	struct l7_head_scan *sp = l7_scan_state();

	if (!sp)
		return -L7_E_BAD;

	req->flags = 0;
	req->n_headers = 0;
	req->hdr_present = 0;
	req->host.off = req->host.len = 0;
	req->query.off = req->query.len = 0;
	int h = l7_scan_head(sp, req, len, 1);
	struct l7_head_scan s = *sp;
	if (h == -2)
		return -L7_E_TOO_LARGE;
	if (h < 0 || s.clen > 0x7fffffff)
		return -L7_E_BAD;
	if (h == 0)
		return 0;
	if (req->target.len > 8192)
		return -L7_E_URI_TOO_LONG;
	req->head_len = (__u32)h;
	req->body_len = s.clen > 0 ? (__u32)s.clen : 0;
	if (s.chunked)
		req->flags |= L7_REQ_CHUNKED;
	if (s.close || (req->flags & L7_REQ_HTTP10))
		req->flags |= L7_REQ_CLOSE;
	if (req->method == L7_M_CONNECT)
		req->flags |= L7_REQ_UPGRADE;
	return h;
}

#endif
