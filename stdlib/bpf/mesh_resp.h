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
	__u32 pos, len, line, colon, head_len, status, bad, chunked, first;
	__u32 pad;            /* digits of the current Content-Length */
	__u64 clen;           /* Content-Length, valid when has_clen */
	__u32 has_clen;
	__u32 kind;           /* L7_RS_* of the current field */
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

enum { L7_RS_OTHER = 0, L7_RS_CLEN, L7_RS_TE };

/* The end of the line at p ('\n'; p - 1 is '\r'). */
static __always_inline void l7_rs_eol(struct l7_mesh_rscan *s, const struct l7_req *r, __u32 p)
{
	__u32 l = s->line;

	if (s->first) {
		/* "HTTP/1.x NNN" */
		__u32 d0 = l7_rs_at(r, l + 9) - '0', d1 = l7_rs_at(r, l + 10) - '0', d2 = l7_rs_at(r, l + 11) - '0';
		if (p - 1 - l < 12 || l7_rs_at(r, l + 8) != ' ' || d0 > 9 || d1 > 9 || d2 > 9)
			s->bad = 1;
		s->status = d0 * 100 + d1 * 10 + d2;
		s->first = 0;
	} else if (!s->colon) {
		s->bad = 1;
	} else if (s->kind == L7_RS_TE) {
		/* only a final "chunked" frames a body; anything else cannot be framed here */
		if (p < s->colon + 9 || !l7_rs_is(r, p - 8, "chunked", 7))
			s->bad = 1;
		s->chunked = 1;
	} else if (s->kind == L7_RS_CLEN && !s->pad) {
		s->bad = 1;   /* empty Content-Length */
	}
	if (s->cut_cur) {
		__u32 n = s->n_cut;
		struct l7_span *last = &s->cut[(n - 1) & (L7_MAX_SET - 1)];
		if (n && last->off + last->len == l)
			last->len = (__u16)(p + 1 - last->off);   /* right after the last cut line */
		else if (n >= L7_MAX_SET)
			s->cut_over = 1;
		else {
			s->cut[n & (L7_MAX_SET - 1)].off = (__u16)l;
			s->cut[n & (L7_MAX_SET - 1)].len = (__u16)(p + 1 - l);
			s->n_cut = n + 1;
		}
		s->cut_cur = 0;
	}
	s->line = p + 1;
	s->colon = 0;
	s->kind = 0;
	s->pad = 0;   /* digits of the current Content-Length */
}

L7_LOOP_CB(l7_rs_cb)
{
	struct l7_req *r = ((struct l7_mesh_rctx *)l7_ctx)->r;
	struct l7_mesh_rscan *s = l7_rs_state(r);
	__u32 p = s->pos;

	if (p >= s->len || p >= L7_RS_MAXHEAD)
		return 1;
	s->pos = p + 1;
	__u8 c = l7_rs_at(r, p);
	if (c == '\n') {
		if (p == s->line || l7_rs_at(r, p - 1) != '\r') {
			s->bad = 1;   /* bare LF */
			return 1;
		}
		if (p - 1 == s->line) {
			s->head_len = p + 1;   /* the empty line ends the head */
			return 1;
		}
		l7_rs_eol(s, r, p);
		return s->bad ? 1 : 0;
	}
	if (s->first || c == '\r')
		return 0;
	if (!s->colon) {
		if (c != ':')
			return 0;
		__u32 n = p - s->line;
		s->colon = p;
		if (l7_n_rhdr && s->rmask) {
			__u32 m = l7_rhdr_match(r, s->line, n);
			s->cut_cur = m && (s->rmask >> ((m - 1) & 31) & 1);
		}
		if (n == 14 && l7_rs_is(r, s->line, "content-length", 14)) {
			if (s->has_clen)
				s->bad = 1;   /* two lengths: ambiguous framing */
			s->kind = L7_RS_CLEN;
			s->has_clen = 1;
		} else if (n == 17 && l7_rs_is(r, s->line, "transfer-encoding", 17)) {
			s->kind = L7_RS_TE;
		}
		return s->bad ? 1 : 0;
	}
	if (s->kind != L7_RS_CLEN || c == ' ' || c == '\t')
		return 0;
	if (c < '0' || c > '9' || s->pad >= 15) {
		s->bad = 1;
		return 1;
	}
	s->clen = s->clen * 10 + (c - '0');
	s->pad++;
	return 0;
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
	l7_loop(L7_RS_MAXHEAD, l7_rs_cb, &ctx);
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
