/* mesh_resp.h: response framing for mesh mode: a response head (status, Content-Length,
 * chunked) and a chunk-size line, scanned from the per-CPU scratch buffer. The scanner state
 * lives in map memory (the slack after the buffer), not on the stack: constant state on the
 * stack makes the verifier enumerate it through every bpf_loop iteration (platform.md). */
#ifndef L7_BPF_MESH_RESP_H
#define L7_BPF_MESH_RESP_H

#include "compat.h"
#include "l7/abi.h"
#include "http.h"   /* l7_rhdr_match: the response names a policy sets or removes */

#define L7_RS_MAXHEAD 2048    /* response heads framed here; longer ones are passed raw */

struct l7_mesh_rscan {
	__u32 pos, len, line, head_len, status, bad, chunked, first;
	__u32 colon;          /* the current line's first ':' (0: none yet) */
	__u32 wbase, wlen;    /* the last 64-byte window (wlen 0: none yet) and its masks of */
	__u64 wnl, wco;       /* '\n' and ':' (bit j: byte wbase + j), for the lines after */
	__u32 has_clen;
	__u64 clen;           /* Content-Length, valid when has_clen; a chunk's size */
	/* Field lines a response mutation cuts (names l7_rhdr_name[i], bits i of rmask), adjacent
	 * ones merged; past L7_MAX_SET spans, cut_over. */
	__u32 rmask, cut_cur, n_cut, cut_over;
	struct l7_span cut[L7_MAX_SET];
};

struct l7_mesh_rctx {
	struct l7_req *r;
};

static __always_inline struct l7_mesh_rscan *l7_rs_state(struct l7_req *r)
{
	return (struct l7_mesh_rscan *)&r->buf[L7_MAX_HEAD];
}

static __always_inline __u8 l7_rs_at(const struct l7_req *r, __u32 i)
{
	return r->buf[i & (L7_RS_MAXHEAD - 1)];
}

/* Case-insensitive compare with a lower-case constant, without branches: one walk for the
 * verifier instead of one per mismatch position. ('-' already has bit 5 set.) */
static __always_inline int l7_rs_is(const struct l7_req *r, __u32 at, const char *s, __u32 n)
{
	__u32 acc = 0;

	for (__u32 i = 0; i < n; i++)
		acc |= (__u32)(l7_rs_at(r, at + i) | 0x20) ^ (__u8)s[i];
	return acc == 0;
}

/* Bit j set for each byte j of w equal to c (exact: no borrow between bytes). */
static __always_inline __u64 l7_rs_eq8(__u64 w, __u8 c)
{
	const __u64 lo7 = 0x7f7f7f7f7f7f7f7fULL;
	__u64 x = w ^ (0x0101010101010101ULL * c);
	__u64 z = ~(((x & lo7) + lo7) | x | lo7);   /* 0x80 in each zero byte */
	return (z >> 7) * 0x0102040810204080ULL >> 56;   /* gather the eight bits */
}

/* The value of a Content-Length line, [vs, ve): digits with optional OWS around them, at most
 * 15 digits and L7_RS_CLEN_MAX bytes in all. *ok = 0 if it is anything else. The OWS is found
 * with a stop mask (http.h), so the digit loop has one exit and no state the verifier could
 * enumerate (a byte loop branching on OWS took the program past the 1M budget). */
#define L7_RS_CLEN_MAX 32
static __always_inline __u64 l7_rs_clen(const struct l7_req *r, __u32 vs, __u32 ve, __u32 *ok)
{
	__u32 vl = ve - vs, bad = 0;
	__u64 v = 0;

	*ok = 0;
	if (vl > L7_RS_CLEN_MAX)
		return 0;
	__u64 m = L7_HTTP_WINDOW(r, vs, L7H_R_NWS, L7_RS_CLEN_MAX) & ((1ULL << vl) - 1);
	if (!m)
		return 0;   /* empty */
	__u32 first = l7_ctz64(m), nd = 64 - (__u32)__builtin_clzll(m) - first;
	if (nd > 15)
		return 0;
	L7_UNROLL
	for (__u32 i = 0; i < 15; i++) {
		if (i < nd) {
			__u32 d = (__u8)(l7_rs_at(r, vs + first + i) - '0');
			bad |= d > 9;   /* OWS inside the digits too */
			v = v * 10 + d;
		}
	}
	*ok = !bad;
	return v;
}

/* The end of the line at p ('\n'; p - 1 is '\r'); s->colon is the line's first ':', or 0. */
static __always_inline void l7_rs_eol(struct l7_mesh_rscan *s, struct l7_req *r, __u32 p)
{
	__u32 l = s->line, co = s->colon;

	if (s->first) {
		/* "HTTP/1.x NNN" */
		__u32 d0 = l7_rs_at(r, l + 9) - '0', d1 = l7_rs_at(r, l + 10) - '0', d2 = l7_rs_at(r, l + 11) - '0';
		if (p - 1 - l < 12 || l7_rs_at(r, l + 8) != ' ' || d0 > 9 || d1 > 9 || d2 > 9)
			s->bad = 1;
		s->status = d0 * 100 + d1 * 10 + d2;
		s->first = 0;
	} else if (!co) {
		s->bad = 1;
	} else {
		__u32 n = co - l;
		if (n == 14 && l7_rs_is(r, l, "content-length", 14)) {
			__u32 ok = 0;
			__u64 v = l7_rs_clen(r, co + 1, p - 1, &ok);
			if (s->has_clen || !ok)
				s->bad = 1;   /* two lengths (ambiguous framing), or not a number */
			s->clen = v;
			s->has_clen = 1;
		} else if (n == 17 && l7_rs_is(r, l, "transfer-encoding", 17)) {
			/* only a final "chunked" frames a body; anything else cannot be framed here */
			if (p < co + 9 || !l7_rs_is(r, p - 8, "chunked", 7))
				s->bad = 1;
			s->chunked = 1;
		}
		if (l7_n_rhdr && s->rmask) {
			__u32 m = l7_rhdr_match(r, l, n);
			if (m && (s->rmask >> ((m - 1) & 31) & 1)) {
				__u32 k = s->n_cut;
				struct l7_span *last = &s->cut[(k - 1) & (L7_MAX_SET - 1)];
				if (k && last->off + last->len == l)
					last->len = (__u16)(p + 1 - last->off);   /* right after the last cut line */
				else if (k >= L7_MAX_SET)
					s->cut_over = 1;
				else {
					s->cut[k & (L7_MAX_SET - 1)].off = (__u16)l;
					s->cut[k & (L7_MAX_SET - 1)].len = (__u16)(p + 1 - l);
					s->n_cut = k + 1;
				}
			}
		}
	}
	s->line = p + 1;
	s->colon = 0;
}

/* One step of the head scan: from pos, 64 bytes at a time (eight words, each compared with
 * '\n' and ':' at once), to the next line end; the line's first ':' is noted on the way.
 * A line per bpf_loop call, not a byte (each call costs ~6.5 ns, platform.md): a 160-byte
 * nginx head took 160 calls, now its 7 lines, and 3 windows (a line that starts inside the
 * last window reuses its masks). The buffer's slack keeps the window inside it. */
L7_LOOP_CB(l7_rs_cb)
{
	struct l7_req *r = ((struct l7_mesh_rctx *)l7_ctx)->r;
	struct l7_mesh_rscan *s = l7_rs_state(r);
	__u32 p = s->pos;

	if (p >= s->len || p >= L7_RS_MAXHEAD)
		return 1;
	__u64 nl, co;
	__u32 off = p - s->wbase;   /* past the window when p is before it, too (unsigned) */
	if (off < s->wlen) {
		/* the window an earlier line was found in still covers p: its masks, from p */
		nl = s->wnl >> (off & 63);
		co = s->wco >> (off & 63);
	} else {
		__u32 avail = s->len - p;
		const __u8 *q = r->buf + l7_mask(p, L7_RS_MAXHEAD - 1);
		nl = co = 0;
		L7_UNROLL
		for (int i = 0; i < 8; i++) {
			__u64 w = l7_ld64(q + 8 * i);
			nl |= l7_rs_eq8(w, '\n') << (8 * i);
			co |= l7_rs_eq8(w, ':') << (8 * i);
			/* a word at a time: unrolled and interleaved, the words' values spilled
			 * (160 bytes of stack, on top of the program's 400 in the deepest chain) */
			l7_barrier_var(nl);
			l7_barrier_var(co);
		}
		if (avail < 64) {
			nl &= (1ULL << avail) - 1;
			co &= (1ULL << avail) - 1;
		}
		s->wbase = p;
		s->wlen = 64;
		s->wnl = nl;
		s->wco = co;
	}
	if (nl)
		co &= (nl & -nl) - 1;   /* a ':' of this line, not the next */
	if (co && !s->colon)
		s->colon = p + l7_ctz64(co);
	if (!nl) {
		s->pos = s->wbase + 64;   /* none up to the window's end */
		return 0;
	}
	__u32 e = p + l7_ctz64(nl);
	s->pos = e + 1;
	if (e == s->line || l7_rs_at(r, e - 1) != '\r') {
		s->bad = 1;   /* bare LF */
		return 1;
	}
	if (e - 1 == s->line) {
		s->head_len = e + 1;   /* the empty line ends the head */
		return 1;
	}
	l7_rs_eol(s, r, e);
	return s->bad ? 1 : 0;
}

/* Scan r->buf[0, len), finding the lines of the response names in rmask. Returns head length,
 * 0 if incomplete, -1 if unframeable. */
static __always_inline int l7_mesh_scan_response(struct l7_req *r, __u32 len, struct l7_mesh_rscan **out, __u32 rmask)
{
	struct l7_mesh_rscan *s = l7_rs_state(r);
	struct l7_mesh_rctx ctx = { .r = r };

	__builtin_memset(s, 0, sizeof(*s));
	s->rmask = rmask;
	s->len = len;
	s->first = 1;
	l7_loop(L7_RS_MAXHEAD / 2, l7_rs_cb, &ctx);   /* a line is at least 2 bytes */
	*out = s;
	if (s->bad || (s->chunked && s->has_clen))
		return -1;
	if (!s->head_len)
		return len >= L7_RS_MAXHEAD ? -1 : 0;
	return (int)s->head_len;
}

L7_LOOP_CB(l7_rs_chunk_cb)
{
	struct l7_req *r = ((struct l7_mesh_rctx *)l7_ctx)->r;
	struct l7_mesh_rscan *s = l7_rs_state(r);
	__u32 i = (__u32)l7_idx & 63;

	if (i >= s->len)
		return 1;   /* head_len stays 0: need more */
	__u8 c = r->buf[i];
	if (c == '\n') {
		if (i == 0 || r->buf[(i - 1) & 63] != '\r' || !s->pos)
			s->bad = 1;
		else
			s->head_len = i + 1;
		return 1;
	}
	if (s->first || c == '\r')
		return 0;   /* first: inside a chunk extension */
	if (c == ';') {
		s->first = 1;
		return 0;
	}
	__u8 d = c >= '0' && c <= '9' ? c - '0' : (c | 32) >= 'a' && (c | 32) <= 'f' ? (c | 32) - 'a' + 10 : 0xff;
	if (d == 0xff || s->pos >= 15) {
		s->bad = 1;
		return 1;
	}
	s->clen = s->clen * 16 + d;
	s->pos++;
	return 0;
}

/* A chunk-size line at r->buf[0, len) (len <= 64). Returns its length, 0 if incomplete, -1 bad;
 * *size gets the chunk size. */
static __always_inline int l7_mesh_scan_chunk(struct l7_req *r, __u32 len, __u64 *size)
{
	struct l7_mesh_rscan *s = l7_rs_state(r);
	struct l7_mesh_rctx ctx = { .r = r };

	__builtin_memset(s, 0, sizeof(*s));
	s->len = len;
	l7_loop(64, l7_rs_chunk_cb, &ctx);
	*size = s->clen;
	if (s->bad)
		return -1;
	return (int)s->head_len;
}

#endif
