#include "walk.h"

#include <stdio.h>
#include <string.h>

#include "http.h"

static struct l7_req req;   /* 17 KB: not on the stack */

const char *walk_errname(int err)
{
	switch (err) {
	case 0: return "ok";
	case -L7_E_BAD: return "BAD";
	case -L7_E_TOO_LARGE: return "TOO_LARGE";
	case -L7_E_UNSUPPORTED: return "UNSUPPORTED";
	case -L7_E_URI_TOO_LONG: return "URI_TOO_LONG";
	case WALK_E_AFTER_CLOSE: return "AFTER_CLOSE";
	}
	return "?";
}

void walk_stream(const unsigned char *data, size_t len, struct walk *w)
{
	size_t off = 0;

	memset(w, 0, sizeof *w);
	while (off < len) {
		size_t n = len - off, inbuf = n < sizeof req.buf ? n : sizeof req.buf;
		size_t end;
		int rc;

		memset(req.buf, 0, sizeof req.buf);
		memcpy(req.buf, data + off, inbuf);
		rc = l7_http_parse_head(&req, (__u32)n);
		if (rc == 0) {
			w->incomplete = 1;
			return;
		}
		if (rc < 0) {
			w->err = rc;
			w->err_req = w->nreq + 1;
			return;
		}
		if (w->nreq < WALK_MAX) {
			struct walk_req *q = &w->req[w->nreq];
			snprintf(q->method, sizeof q->method, "%.*s", req.method_s.len,
				 (const char *)req.buf + req.method_s.off);
			snprintf(q->target, sizeof q->target, "%.*s", req.target.len,
				 (const char *)req.buf + req.target.off);
			q->n_headers = req.n_headers;
			q->flags = req.flags;
		}
		w->nreq++;
		if (req.flags & L7_REQ_UPGRADE) {
			w->upgraded = 1;   /* the rest is tunnel data, not HTTP */
			return;
		}
		if (req.flags & L7_REQ_CHUNKED) {
			struct l7_chunked st = { 0 };
			int e = l7_http_chunked(&st, req.buf, req.head_len, (__u32)inbuf);
			if (e == 0) {
				w->incomplete = 1;
				return;
			}
			if (e < 0) {
				w->err = e;
				w->err_req = w->nreq;
				w->body_err = 1;
				return;
			}
			end = (size_t)e;
		} else {
			end = l7_http_msg_end(&req);
			if (end > n) {
				w->incomplete = 1;
				return;
			}
		}
		w->complete++;
		off += end;
		if ((req.flags & L7_REQ_CLOSE) && off < len) {
			w->err = WALK_E_AFTER_CLOSE;
			w->err_req = w->nreq + 1;
			return;
		}
	}
}
