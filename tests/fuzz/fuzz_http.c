/* libFuzzer harness: the stdlib HTTP parser built natively (stdlib/bpf/http.h): request head,
 * the chunked framer l7_http_chunked, and the gateway's own scanners (gw_head.h: chunk-size
 * lines, response heads). The first input byte picks how the rest is cut, so pipelined
 * streams and bodies get explored too. Beyond crashes it checks two invariants: a head length
 * never exceeds the input, and the gateway's chunk-line scanner accepts a line only if
 * l7_http_chunked accepts the same line (the gateway frames bodies with it: a laxer scanner
 * is a smuggling bug, see gw_head.h). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"
#include "l7/dataplane.h"

/* gw_head.h keeps its scanner state in a per-CPU map; natively that is one static buffer. */
static unsigned char l7_scan[L7_SCAN_STATE];
static void *bpf_map_lookup_elem(void *map, const void *key)
{
	(void)key;
	return map;
}

#include "gw_head.h"

/* The response names a policy sets or removes (gw_head.h cuts their lines): tests/stdlib/wanted.c. */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct l7_req req;     /* 17 KB: not on the stack */
static struct l7_head_scan scan;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	unsigned mode = data[0];
	data++, size--;
	size_t n = size < sizeof req.buf ? size : sizeof req.buf;

	memset(&req, 0, sizeof req);
	memcpy(req.buf, data, n);
	if (mode & 1) {
		/* a chunk-size line, checked against the reference framer */
		__u64 sz = 0;
		size_t w = n < 64 ? n : 64;
		int g = l7_scan_chunk_line(&req, (__u32)w, &sz);
		if (g > 0 && (size_t)g <= w) {
			static __u8 body[L7_MAX_HEAD + 64];
			struct l7_chunked st = { 0 };
			size_t bl = (size_t)g;
			memcpy(body, req.buf, bl);
			if (sz == 0) {   /* the zero chunk: its final CRLF (no trailers) completes the body */
				memcpy(body + bl, "\r\n", 2);
				bl += 2;
			}
			int ref = l7_http_chunked(&st, body, 0, (__u32)bl);
			if (ref < 0)
				abort();   /* the gateway accepted a size line the reference refuses */
		}
		return 0;
	}
	if (mode & 2) {
		memset(&scan, 0, sizeof scan);
		(void)l7_scan_response(&scan, &req, (__u32)n, mode >> 2);
		return 0;
	}
	int h = l7_http_parse_head(&req, (__u32)size);
	if (h > 0 && (size_t)h > size)
		abort();
	if (h > 0 && (req.flags & L7_REQ_CHUNKED)) {
		struct l7_chunked st = { 0 };
		int e = l7_http_chunked(&st, req.buf, (__u32)h, (__u32)n);
		if (e > (int)n)
			abort();
	}
	return 0;
}
