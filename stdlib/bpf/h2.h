/* h2.h: HTTP/2 framing (RFC 9113 3.4, 4, 5.1, 6) for BPF and natively: the connection
 * preface, frame headers, and the fixed fields of every frame type, checked with the RFC's
 * error codes; header blocks (HEADERS + CONTINUATION) gathered for hpack.h.
 *
 * API (state: one struct l7_h2_conn per connection and direction, in map memory)
 *   void l7_h2_conn_init(struct l7_h2_conn *c, __u32 flags)
 *       flags: L7_H2_C_CLIENT for the client's direction (the preface comes first, stream ids
 *       are odd and increase); L7_H2_C_HP_PENDING when l7run has sent (or will send first)
 *       SETTINGS_HEADER_TABLE_SIZE 0 to this direction's sender. c->stop: frame types
 *       l7_h2_scan stops after (default: all but DATA).
 *   int l7_h2_preface(const __u8 *p, __u32 avail)
 *       L7_H2_PREFACE_LEN: p starts with the client preface; 0: what is there matches its
 *       start; -1: not HTTP/2 (protocol detection: an HTTP/1.1 request never starts so).
 *   int l7_h2_frame(struct l7_h2_conn *c, const __u8 *buf, __u32 off, __u32 len,
 *                   struct l7_h2_frame *f)
 *       The frame at buf[off] (buf[off..len) is there). > 0: its total size (9 + length); f is
 *       filled and c updated (a header block opened or closed, a stream opened, our
 *       SETTINGS acknowledged). Frames whose payload the kernel reads (HEADERS, CONTINUATION,
 *       SETTINGS, and the small fixed-size ones) must be there whole; DATA, GOAWAY's debug
 *       data and unknown types need only their fixed fields, the rest may follow.
 *       0: more bytes are needed. < 0: -(L7_H2_R_CONN | code) or -(L7_H2_R_STREAM | code)
 *       (f.stream is the stream; f.len says how far the frame goes: after RST_STREAM the
 *       caller goes on past it), or L7_H2_SLOW(CONT_FLOOD).
 *   int l7_h2_scan(struct l7_h2_conn *c, struct l7_hpack *d, const __u8 *buf, __u32 len,
 *                  struct l7_h2_ev *ev)
 *       Walks the frames of buf[ev->next .. len) (one direction's bytes; set ev->next to the
 *       first byte, 0 the first time), at most L7_H2_SCAN_FRAMES per call, copying header
 *       block fragments into d->blk. Returns an enum l7_h2_event (see l7/h2.h) or an error as
 *       l7_h2_frame does; ev->next is where to go on, ev->off and ev->f the last frame (on an
 *       error: the frame it is about, which ev->next has not passed).
 *   buf (both) follows the stdlib/bpf buffer convention for L7_H2_BUF: indices masked with
 *   L7_H2_BUF - 1, readable for L7_H2_BUF + 64 bytes.
 *   int l7_h2_decode(struct l7_h2_conn *c, struct l7_hpack *d, struct l7_req *req, __u32 mode)
 *       After L7_H2_EV_HEADERS: decodes the block (hpack.h) with the connection's HPACK
 *       state, and keeps the state the block leaves.
 *
 * Bounded work: a frame is a fixed amount of code; SETTINGS entries go 8 per l7_loop callback;
 * a scan is one l7_loop callback per frame. */
#ifndef L7_BPF_H2_H
#define L7_BPF_H2_H

#include "compat.h"
#include <l7/abi.h>
#include <l7/h2.h>
#include "hpack.h"

#define L7_H2_BUF_MASK (L7_H2_BUF - 1)

/* Copy n (<= L7_H2_BLOCK_MAX) bytes: the kernel's probe read between two map values (the
 * verifier checks dst and the bound on n; src is a map value too). */
static __always_inline int l7_h2_copy(__u8 *dst, const __u8 *src, __u32 n)
{
	l7_barrier_var(n);
	if (n > L7_H2_BLOCK_MAX)
		return -1;
#ifdef __bpf__
	return bpf_probe_read_kernel(dst, n, src) ? -1 : 0;
#else
	memcpy(dst, src, n);
	return 0;
#endif
}

static __always_inline __u32 l7_h2_be32(const __u8 *p)
{
	return (__u32)p[0] << 24 | (__u32)p[1] << 16 | (__u32)p[2] << 8 | p[3];
}

static __always_inline void l7_h2_conn_init(struct l7_h2_conn *c, __u32 flags)
{
	__builtin_memset(c, 0, sizeof *c);
	c->flags = flags | L7_H2_C_SETTINGS | ((flags & L7_H2_C_CLIENT) ? L7_H2_C_PREFACE : 0);
	c->stop = ~(1u << L7_H2_DATA);
}

static __always_inline int l7_h2_preface(const __u8 *p, __u32 avail)
{
	const __u64 w0 = L7_W8('P', 'R', 'I', ' ', '*', ' ', 'H', 'T');
	const __u64 w1 = L7_W8('T', 'P', '/', '2', '.', '0', '\r', '\n');
	const __u64 w2 = L7_W8('\r', '\n', 'S', 'M', '\r', '\n', '\r', '\n');
	__u64 d0 = l7_ld64(p) ^ w0, d1 = l7_ld64(p + 8) ^ w1, d2 = l7_ld64(p + 16) ^ w2;

	if (avail >= L7_H2_PREFACE_LEN)
		return d0 | d1 | d2 ? -1 : L7_H2_PREFACE_LEN;
	d0 &= l7_bytemask(avail);
	d1 &= avail > 8 ? l7_bytemask(avail - 8) : 0;
	d2 &= avail > 16 ? l7_bytemask(avail - 16) : 0;
	return d0 | d1 | d2 ? -1 : 0;
}

/* SETTINGS entries, 8 per callback (6.5.1: 16-bit id, 32-bit value; unknown ids ignored). */
struct l7_h2_set_ctx {
	const __u8 *buf;
	__u32 off;       /* the first entry */
	__u32 n;         /* entries */
	int rc;
	__u32 table;     /* SETTINGS_HEADER_TABLE_SIZE, or ~0u if absent */
};

L7_LOOP_CB(l7_h2_settings_cb)
{
	struct l7_h2_set_ctx *x = l7_ctx;
	__u32 i0 = (__u32)l7_idx * 8, i;

	L7_UNROLL
	for (i = 0; i < 8; i++) {
		const __u8 *e = x->buf + l7_mask(x->off + 6 * (i0 + i), L7_H2_BUF_MASK);
		__u32 id = (__u32)e[0] << 8 | e[1], v = l7_h2_be32(e + 2);

		if (i0 + i >= x->n)
			return 1;
		if (id == L7_H2_S_HEADER_TABLE_SIZE)
			x->table = v;
		else if ((id == L7_H2_S_ENABLE_PUSH || id == L7_H2_S_ENABLE_CONNECT_PROTOCOL ||
			  id == L7_H2_S_NO_RFC7540_PRIORITIES) && v > 1)
			x->rc = L7_H2_CONN_ERR(L7_H2_PROTOCOL_ERROR);
		else if (id == L7_H2_S_INITIAL_WINDOW_SIZE && v > 0x7fffffff)
			x->rc = L7_H2_CONN_ERR(L7_H2_FLOW_CONTROL_ERROR);
		else if (id == L7_H2_S_MAX_FRAME_SIZE && (v < 16384 || v > 0xffffff))
			x->rc = L7_H2_CONN_ERR(L7_H2_PROTOCOL_ERROR);
		if (x->rc)
			return 1;
	}
	return 0;
}

/* A frame on a stream this (client) direction has not opened: idle (5.1). */
static __always_inline int l7_h2_idle(const struct l7_h2_conn *c, __u32 stream)
{
	return (c->flags & L7_H2_C_CLIENT) && stream > c->last_stream;
}

static __always_inline int l7_h2_frame(struct l7_h2_conn *c, const __u8 *buf, __u32 at,
				       __u32 end, struct l7_h2_frame *f)
{
	const __u8 *p = buf + l7_mask(at, L7_H2_BUF_MASK);
	__u32 avail = end > at ? end - at : 0;
	__u32 len, type, fl, sid, need = 9, off = 9, pad = 0, total;

	if (avail < 9)
		return 0;
	len = (__u32)p[0] << 16 | (__u32)p[1] << 8 | p[2];
	type = p[3];
	fl = p[4];
	sid = l7_h2_be32(p + 5) & 0x7fffffff;   /* the reserved bit is ignored (4.1) */
	f->len = len;
	f->type = type;
	f->flags = fl;
	f->stream = sid;
	f->data_off = 9;
	f->data_len = 0;
	f->value = f->value2 = 0;
	f->opaque = 0;
	total = 9 + len;

	/* header-only checks first: a frame that can never be whole fails now */
	if (len > L7_H2_MAX_FRAME)
		return L7_H2_CONN_ERR(L7_H2_FRAME_SIZE_ERROR);
	if ((c->flags & L7_H2_C_SETTINGS) && (type != L7_H2_SETTINGS || (fl & L7_H2_F_ACK)))
		return L7_H2_CONN_ERR(L7_H2_PROTOCOL_ERROR);   /* 3.4: SETTINGS comes first */
	if ((c->flags & L7_H2_C_BLOCK) && (type != L7_H2_CONTINUATION || sid != c->hb_stream))
		return L7_H2_CONN_ERR(L7_H2_PROTOCOL_ERROR);   /* 6.2, 6.10 */
	switch (type) {
	case L7_H2_DATA:
		if (!sid || l7_h2_idle(c, sid))
			return L7_H2_CONN_ERR(L7_H2_PROTOCOL_ERROR);
		if (fl & L7_H2_F_PADDED) {
			if (len < 1)
				return L7_H2_CONN_ERR(L7_H2_FRAME_SIZE_ERROR);
			need = off = 10;
		}
		break;
	case L7_H2_HEADERS:
		if (!sid)
			return L7_H2_CONN_ERR(L7_H2_PROTOCOL_ERROR);
		off += (fl & L7_H2_F_PADDED ? 1 : 0) + (fl & L7_H2_F_PRIORITY ? 5 : 0);
		if (len < off - 9)
			return L7_H2_CONN_ERR(L7_H2_FRAME_SIZE_ERROR);
		need = total;
		break;
	case L7_H2_PRIORITY:
		if (!sid)
			return L7_H2_CONN_ERR(L7_H2_PROTOCOL_ERROR);
		if (len != 5)
			return L7_H2_STREAM_ERR(L7_H2_FRAME_SIZE_ERROR);   /* 6.3 */
		need = total;
		break;
	case L7_H2_RST_STREAM:
		if (!sid || l7_h2_idle(c, sid))
			return L7_H2_CONN_ERR(L7_H2_PROTOCOL_ERROR);
		if (len != 4)
			return L7_H2_CONN_ERR(L7_H2_FRAME_SIZE_ERROR);
		need = total;
		break;
	case L7_H2_SETTINGS:
		if (sid)
			return L7_H2_CONN_ERR(L7_H2_PROTOCOL_ERROR);
		if (((fl & L7_H2_F_ACK) && len) || len % 6)
			return L7_H2_CONN_ERR(L7_H2_FRAME_SIZE_ERROR);
		need = total;
		break;
	case L7_H2_PUSH_PROMISE:
		/* l7run advertises SETTINGS_ENABLE_PUSH 0, and clients cannot push (8.4) */
		return L7_H2_CONN_ERR(L7_H2_PROTOCOL_ERROR);
	case L7_H2_PING:
		if (sid)
			return L7_H2_CONN_ERR(L7_H2_PROTOCOL_ERROR);
		if (len != 8)
			return L7_H2_CONN_ERR(L7_H2_FRAME_SIZE_ERROR);
		need = total;
		break;
	case L7_H2_GOAWAY:
		if (sid)
			return L7_H2_CONN_ERR(L7_H2_PROTOCOL_ERROR);
		if (len < 8)
			return L7_H2_CONN_ERR(L7_H2_FRAME_SIZE_ERROR);
		need = 17;
		break;
	case L7_H2_WINDOW_UPDATE:
		if (len != 4)
			return L7_H2_CONN_ERR(L7_H2_FRAME_SIZE_ERROR);
		if (sid && l7_h2_idle(c, sid))
			return L7_H2_CONN_ERR(L7_H2_PROTOCOL_ERROR);
		need = total;
		break;
	case L7_H2_CONTINUATION:
		if (!(c->flags & L7_H2_C_BLOCK))
			return L7_H2_CONN_ERR(L7_H2_PROTOCOL_ERROR);   /* not after HEADERS (6.10) */
		if (c->hb_cont >= L7_H2_MAX_CONT)
			return L7_H2_SLOW(L7_H2_SLOW_CONT_FLOOD);
		need = total;
		break;
	default:
		break;   /* unknown types are ignored (4.1, 5.5) */
	}
	if (avail < need)
		return 0;

	/* the payload's fixed fields, and what the frame changes */
	switch (type) {
	case L7_H2_DATA:
		if (fl & L7_H2_F_PADDED) {
			pad = p[9];
			if (pad >= len)
				return L7_H2_CONN_ERR(L7_H2_PROTOCOL_ERROR);   /* 6.1 */
		}
		f->data_off = off;
		f->data_len = len - (off - 9) - pad;
		break;
	case L7_H2_HEADERS:
		if (fl & L7_H2_F_PADDED)
			pad = p[9];
		if (pad > len - (off - 9))
			return L7_H2_CONN_ERR(L7_H2_PROTOCOL_ERROR);       /* 6.2 */
		if (fl & L7_H2_F_PRIORITY) {
			const __u8 *q = p + ((fl & L7_H2_F_PADDED) ? 10 : 9);

			f->value = l7_h2_be32(q) & 0x7fffffff;
			f->value2 = q[4];
			if (f->value == sid) {   /* a stream cannot depend on itself (5.3.1) */
				/* its block is not decoded: what it inserts is not in the table */
				if (!(c->flags & L7_H2_C_HP_ZERO))
					c->flags |= L7_H2_C_HP_UNKNOWN;
				return L7_H2_STREAM_ERR(L7_H2_PROTOCOL_ERROR);
			}
		}
		/* clients open odd streams (5.1.1), and with push off a server has no even
		 * ones to send on; a new stream's id is above every earlier one */
		if (!(sid & 1))
			return L7_H2_CONN_ERR(L7_H2_PROTOCOL_ERROR);
		if (sid > c->last_stream)
			c->last_stream = sid;
		f->data_off = off;
		f->data_len = len - (off - 9) - pad;
		c->hb_stream = sid;
		c->hb_flags = fl;
		c->hb_len = 0;
		c->hb_cont = 0;
		if (!(fl & L7_H2_F_END_HEADERS))
			c->flags |= L7_H2_C_BLOCK;
		break;
	case L7_H2_PRIORITY:
		f->value = l7_h2_be32(p + 9) & 0x7fffffff;
		f->value2 = p[13];
		if (f->value == sid)
			return L7_H2_STREAM_ERR(L7_H2_PROTOCOL_ERROR);
		break;
	case L7_H2_RST_STREAM:
		f->value = l7_h2_be32(p + 9);
		break;
	case L7_H2_SETTINGS:
		if (fl & L7_H2_F_ACK) {
			/* the peer now encodes within our SETTINGS_HEADER_TABLE_SIZE 0 (6.5.3) */
			c->flags = l7_hpack_acked(c->flags);
		} else {
			struct l7_h2_set_ctx x = { .buf = buf, .off = at + 9, .n = len / 6, .rc = 0,
						   .table = ~0u };

			l7_loop((x.n + 7) / 8, l7_h2_settings_cb, &x);
			if (x.rc)
				return x.rc;
			f->value = x.n;
			f->value2 = x.table;
			c->flags &= ~L7_H2_C_SETTINGS;
		}
		break;
	case L7_H2_PING:
		f->opaque = l7_ld64(p + 9);
		break;
	case L7_H2_GOAWAY:
		f->value2 = l7_h2_be32(p + 9) & 0x7fffffff;
		f->value = l7_h2_be32(p + 13);
		break;
	case L7_H2_WINDOW_UPDATE:
		f->value = l7_h2_be32(p + 9) & 0x7fffffff;
		if (!f->value)   /* 6.9: a stream error on a stream, else the connection's */
			return sid ? L7_H2_STREAM_ERR(L7_H2_PROTOCOL_ERROR) :
				     L7_H2_CONN_ERR(L7_H2_PROTOCOL_ERROR);
		break;
	case L7_H2_CONTINUATION:
		f->data_len = len;
		c->hb_cont++;
		if (fl & L7_H2_F_END_HEADERS)
			c->flags &= ~L7_H2_C_BLOCK;
		break;
	default:
		break;
	}
	c->frames++;
	return (int)total;
}

struct l7_h2_scan_ctx {
	struct l7_h2_conn *c;
	struct l7_hpack *d;
	const __u8 *buf;
	struct l7_h2_ev *ev;
	__u32 len;
	int rc;   /* L7__H2_WALKING until a callback stops the walk */
};
#define L7__H2_WALKING 0x7fffffff

L7_LOOP_CB(l7_h2_scan_cb)
{
	struct l7_h2_scan_ctx *x = l7_ctx;
	struct l7_h2_conn *c = x->c;
	struct l7_h2_ev *ev = x->ev;
	struct l7_h2_frame *f = &ev->f;
	__u32 pos = ev->next, len = x->len;
	const __u8 *p;
	int r;

	if (c->skip) {   /* the rest of a frame the kernel does not read */
		__u32 n = len - pos < c->skip ? len - pos : c->skip;

		c->skip -= n;
		ev->next = pos + n;
		if (c->skip) {
			x->rc = L7_H2_EV_MORE;
			return 1;
		}
		return 0;
	}
	if (pos >= len) {
		x->rc = L7_H2_EV_MORE;
		return 1;
	}
	p = x->buf + l7_mask(pos, L7_H2_BUF_MASK);
	ev->off = pos;
	if (c->flags & L7_H2_C_PREFACE) {
		r = l7_h2_preface(p, len - pos);
		if (r <= 0) {
			x->rc = r ? L7_H2_CONN_ERR(L7_H2_PROTOCOL_ERROR) : L7_H2_EV_MORE;
			return 1;
		}
		c->flags &= ~L7_H2_C_PREFACE;
		ev->next = pos + L7_H2_PREFACE_LEN;
		return 0;
	}
	r = l7_h2_frame(c, x->buf, pos, len, f);
	if (r <= 0) {
		x->rc = r;
		return 1;
	}
	ev->frames++;
	if (f->type == L7_H2_HEADERS || f->type == L7_H2_CONTINUATION) {
		struct l7_hpack *d = x->d;
		__u32 n = f->data_len;

		if (c->hb_len + n > L7_H2_BLOCK_MAX) {
			x->rc = L7_H2_SLOW(L7_H2_SLOW_BLOCK_SIZE);
			return 1;
		}
		if (l7_h2_copy(d->blk + l7_mask(c->hb_len, L7_H2_BLOCK_MAX - 1),
			       x->buf + l7_mask(pos + f->data_off, L7_H2_BUF_MASK), n)) {
			x->rc = L7_H2_CONN_ERR(L7_H2_INTERNAL_ERROR);
			return 1;
		}
		c->hb_len += n;
		ev->next = pos + (__u32)r;
		if (f->flags & L7_H2_F_END_HEADERS) {
			d->len = c->hb_len;
			x->rc = L7_H2_EV_HEADERS;
			return 1;
		}
		return 0;
	}
	if (pos + (__u32)r > len) {   /* DATA, GOAWAY, unknown: the rest passes unread */
		c->skip = pos + (__u32)r - len;
		ev->next = len;
	} else {
		ev->next = pos + (__u32)r;
	}
	if (f->type < 32 && ((c->stop >> f->type) & 1)) {
		x->rc = L7_H2_EV_FRAME;
		return 1;
	}
	return 0;
}

static __always_inline int l7_h2_scan(struct l7_h2_conn *c, struct l7_hpack *d, const __u8 *buf,
				      __u32 len, struct l7_h2_ev *ev)
{
	struct l7_h2_scan_ctx x = { .c = c, .d = d, .buf = buf, .ev = ev, .len = len,
				    .rc = L7__H2_WALKING };

	if (len > L7_H2_BUF)
		len = x.len = L7_H2_BUF;
	ev->frames = 0;
	l7_loop(L7_H2_SCAN_FRAMES, l7_h2_scan_cb, &x);
	return x.rc == L7__H2_WALKING ? L7_H2_EV_LIMIT : x.rc;
}

static __always_inline int l7_h2_decode(struct l7_h2_conn *c, struct l7_hpack *d,
					struct l7_req *req, __u32 mode)
{
	int rc;

	d->mode = mode;
	d->conn = c->flags & L7_H2_C_HPACK;
	rc = l7_hpack_decode(d, req);
	c->flags = (c->flags & ~L7_H2_C_HPACK) | (d->conn & L7_H2_C_HPACK);
	return rc;
}

#endif /* L7_BPF_H2_H */
