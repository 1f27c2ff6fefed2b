/* HTTP/2 clients while the data plane does not serve HTTP/2 (issue 14): l7run's end of such a
 * connection speaks just enough HTTP/2 to answer every request stream at once, so clients
 * fail fast instead of retrying: a GOAWAY alone made grpcio retry the call on new connections
 * until its deadline (RFC 9113 6.8: streams past last-stream-id were not processed, so may be
 * retried), where an answered stream is final. Each stream gets 505 (HTTP Version Not
 * Supported, RFC 9110 15.6.6) with a short text body, or, when it is a gRPC call
 * (content-type application/grpc...), a trailers-only response whose grpc-status is the one
 * l7/grpc.h maps 505 to, with a grpc-message. Nothing is forwarded; SETTINGS and PING are
 * acknowledged; a framing error ends the connection with GOAWAY and the RFC's code.
 *
 * The request's header block is decoded with stdlib/bpf/hpack.h, built natively, only to tell
 * a gRPC call (a block it cannot decode, e.g. one referring to the dynamic table, gets the
 * plain answer). Bounded: one frame at a time, at most L7_H2_MAX_FRAME bytes of payload, a
 * header block of at most L7_H2_BLOCK_MAX bytes is kept (the rest of a longer one is read
 * past). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "h2_refuse.h"
#include "h2_frames.h"
#include "h2_reenc.h"
#include "../stdlib/bpf/hpack.h"
#include "l7/grpc.h"

/* hpack.h classifies the names a policy reads (l7_wanted_name): the refusal reads none; the
 * re-encoder (h2_reenc_want) sets them for a block whose fields a mutation removes. Writable:
 * l7run builds with L7_POLICY_TABLE empty (compat.h). */
__u32 l7_n_wanted;
__u8 l7_wanted_len[L7_MAX_WANTED];
char l7_wanted_name[L7_MAX_WANTED][L7_MAX_NAME];

void h2_reenc_want(uint32_t n, const char *const *names)
{
	memset(l7_wanted_name, 0, sizeof l7_wanted_name);
	l7_n_wanted = n < L7_MAX_WANTED ? n : L7_MAX_WANTED;
	for (uint32_t i = 0; i < l7_n_wanted; i++) {
		size_t k = strnlen(names[i], L7_MAX_NAME);
		l7_wanted_len[i] = (uint8_t)k;
		memcpy(l7_wanted_name[i], names[i], k);
	}
}


#define REFUSE_STATUS 505
static const char why[] = "HTTP/2 is not served here yet";

struct h2_refuser {
	int preface;             /* seen */
	uint32_t last;           /* highest stream id opened by the client */
	uint32_t cont;           /* stream whose header block CONTINUATION frames go on, 0: none */
	int cont_end_stream;     /* that HEADERS ended its stream */
	struct l7_hpack d;
	struct l7_req req;
	char *buf;               /* bytes of a frame not yet whole (at most one frame and a header) */
	size_t len, cap;
};

struct h2_refuser *h2_refuser_new(void)
{
	return calloc(1, sizeof(struct h2_refuser));
}

void h2_refuser_free(struct h2_refuser *r)
{
	if (r)
		free(r->buf);
	free(r);
}

static int is_grpc(struct h2_refuser *r);

static void answer(struct h2_refuser *r, uint32_t s, h2_send_fn send, void *ctx)
{
	char o[H2_ANSWER_MAX];
	int grpc = is_grpc(r);
	size_t data;

	send(ctx, o, h2_answer(o, s, REFUSE_STATUS, grpc, l7_grpc_status_of_http(REFUSE_STATUS), why,
			       r->cont_end_stream, &data), grpc ? 200 : REFUSE_STATUS);
}

/* Is the header block gathered in d a gRPC call? */
static int is_grpc(struct h2_refuser *r)
{
	r->d.mode = L7_HPACK_REQUEST;
	r->d.conn = L7_H2_C_HP_UNKNOWN;   /* the client's table: not kept (our SETTINGS sets no size) */
	l7_hpack_decode(&r->d, &r->req);
	return !!(r->d.msg.flags & L7_H2_M_GRPC);
}

static void gather(struct h2_refuser *r, const uint8_t *p, uint32_t n)
{
	if (r->d.len + n > L7_H2_BLOCK_MAX) {
		r->d.len = L7_H2_BLOCK_MAX + 1;   /* too long to decode here: the plain answer */
		return;
	}
	memcpy(r->d.blk + r->d.len, p, n);
	r->d.len += n;
}

/* The whole frames of in[0..n): the bytes consumed, or -1 (close). */
static long feed(struct h2_refuser *r, const char *in, size_t n, h2_send_fn send, void *ctx)
{
	static const char pre[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
	const uint8_t *p = (const uint8_t *)in;
	char o[1024];
	size_t at = 0;

	if (!r->preface) {
		if (n < sizeof pre - 1)
			return 0;
		if (memcmp(in, pre, sizeof pre - 1))
			goto protocol;
		r->preface = 1;
		at = sizeof pre - 1;
		send(ctx, o, h2_frame(o, 0, L7_H2_SETTINGS, 0, 0), 0);   /* the server preface (3.4) */
	}
	while (n - at >= 9) {
		const uint8_t *f = p + at;
		uint32_t len = (uint32_t)f[0] << 16 | (uint32_t)f[1] << 8 | f[2];
		uint8_t type = f[3], flags = f[4];
		uint32_t s = ((uint32_t)f[5] << 24 | (uint32_t)f[6] << 16 | (uint32_t)f[7] << 8 | f[8]) & 0x7fffffff;
		if (len > L7_H2_MAX_FRAME) {
			send(ctx, o, h2_goaway(o, r->last, L7_H2_FRAME_SIZE_ERROR), 0);
			return -1;
		}
		if (n - at < 9 + (size_t)len)
			break;   /* the rest of the frame is on its way */
		const uint8_t *pl = f + 9;
		if (r->cont && (type != L7_H2_CONTINUATION || s != r->cont))
			goto protocol;   /* a header block is contiguous (4.3) */
		switch (type) {
		case L7_H2_SETTINGS:
			if (s || len % 6 || ((flags & L7_H2_F_ACK) && len))
				goto protocol;
			if (!(flags & L7_H2_F_ACK))
				send(ctx, o, h2_frame(o, 0, L7_H2_SETTINGS, L7_H2_F_ACK, 0), 0);
			break;
		case L7_H2_PING:
			if (s || len != 8) {
				send(ctx, o, h2_goaway(o, r->last, s ? L7_H2_PROTOCOL_ERROR : L7_H2_FRAME_SIZE_ERROR), 0);
				return -1;
			}
			if (!(flags & L7_H2_F_ACK)) {
				size_t k = h2_frame(o, 8, L7_H2_PING, L7_H2_F_ACK, 0);
				memcpy(o + k, pl, 8);
				send(ctx, o, k + 8, 0);
			}
			break;
		case L7_H2_GOAWAY:
			return -1;
		case L7_H2_HEADERS: {
			if (!(s & 1) || s <= r->last)
				goto protocol;   /* client streams are odd and only increase (5.1.1) */
			r->last = s;
			uint32_t skip = 0, pad = 0;
			if (flags & L7_H2_F_PADDED) {
				if (!len)
					goto protocol;
				pad = pl[0];
				skip = 1;
			}
			if (flags & L7_H2_F_PRIORITY)
				skip += 5;
			if (skip + pad > len)
				goto protocol;
			r->d.len = 0;
			gather(r, pl + skip, len - skip - pad);
			r->cont_end_stream = flags & L7_H2_F_END_STREAM;
			if (!(flags & L7_H2_F_END_HEADERS)) {
				r->cont = s;
				break;
			}
			answer(r, s, send, ctx);
			break;
		}
		case L7_H2_CONTINUATION:
			if (!r->cont)
				goto protocol;
			gather(r, pl, len);
			if (flags & L7_H2_F_END_HEADERS) {
				r->cont = 0;
				answer(r, s, send, ctx);
			}
			break;
		default:
			break;   /* DATA, WINDOW_UPDATE, PRIORITY, RST_STREAM, unknown: nothing to do */
		}
		at += 9 + (size_t)len;
	}
	return (long)at;
protocol:
	send(ctx, o, h2_goaway(o, r->last, L7_H2_PROTOCOL_ERROR), 0);
	return -1;
}

int h2_refuser_take(struct h2_refuser *r, const char *in, size_t n, h2_send_fn send, void *ctx)
{
	long k;

	if (!r->len) {   /* the common case: nothing kept, no copy */
		k = feed(r, in, n, send, ctx);
		if (k < 0)
			return -1;
		in += k;
		n -= (size_t)k;
	} else {
		if (r->len + n > r->cap) {
			size_t cap = r->len + n;
			char *b = realloc(r->buf, cap);
			if (!b)
				return -1;
			r->buf = b;
			r->cap = cap;
		}
		memcpy(r->buf + r->len, in, n);
		r->len += n;
		k = feed(r, r->buf, r->len, send, ctx);
		if (k < 0)
			return -1;
		memmove(r->buf, r->buf + k, r->len - (size_t)k);
		r->len -= (size_t)k;
		return 0;
	}
	/* the rest is less than a frame (feed refuses a longer one at its header) */
	if (n) {
		if (n > r->cap) {
			char *b = realloc(r->buf, n);
			if (!b)
				return -1;
			r->buf = b;
			r->cap = n;
		}
		memcpy(r->buf, in, n);
		r->len = n;
	}
	return 0;
}

void h2_refuser_goaway(struct h2_refuser *r, h2_send_fn send, void *ctx)
{
	char o[32];

	send(ctx, o, h2_goaway(o, r->last, L7_H2_HTTP_1_1_REQUIRED), 0);
}
