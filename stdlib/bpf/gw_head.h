/* gw_head.h: line scanner for HTTP/1.1 heads in a l7_req buffer, used by the gateway for
 * response heads (status, Content-Length, chunked, Connection: close) and chunk-size lines.
 * Request heads are parsed by http.h (l7_http_parse_head). */
#ifndef L7_GW_HEAD_H
#define L7_GW_HEAD_H

#include "compat.h"
#include "l7/abi.h"

#define L7_HM (L7_MAX_HEAD - 1)

enum l7_hdr_kind { L7_H_OTHER = 0, L7_H_CLEN, L7_H_TE, L7_H_CONN, L7_H_HOST, L7_H_EXPECT, L7_H_UPGRADE };

struct l7_head_scan {
	__u32 len;          /* bytes available in the buffer */
	__u32 pos;
	__u32 line;         /* start of the current line */
	__u32 head_len;     /* set when the empty line is found */
	__u32 status;
	__s64 clen;         /* -1: absent */
	__u32 chunked;
	__u32 close;
	__u32 bad;
	__u32 first;        /* still on the status/request line */
	__u32 request;      /* scanning a request head (else a response) */
	__u32 sp1, sp2, qm; /* first line: the two spaces, the first '?' */
	__u32 colon;        /* this line's name has ended (0 = not yet) */
	__u32 kind;         /* enum l7_hdr_kind of this line */
	__u32 vstart;       /* first non-blank byte of the value (0 = none yet) */
	__u32 ndig;         /* Content-Length: digits seen; then 1000 once trailing blanks began */
	__s64 cur;          /* Content-Length value being read */
	__u32 host_seen;
	/* Response field lines a mutation cuts: names l7_rhdr_name[i] for the bits i of rmask.
	 * Adjacent lines merge into one span; more than L7_MAX_SET spans: cut_over. */
	__u32 rmask;
	__u32 cut_cur;      /* this line is one of them */
	__u32 n_cut;
	__u32 cut_over;
	struct l7_span cut[L7_MAX_SET];
};

static __always_inline __u8 l7_lc(__u8 c) { return (c >= 'A' && c <= 'Z') ? c + 32 : c; }

/* Eight bytes of the buffer at `at`, lower-cased without branches (the buffer has slack). */
static __always_inline __u64 l7_word(const struct l7_req *r, __u32 at)
{
	return l7_lower8(l7_ld64(&r->buf[l7_mask(at, L7_HM)]));
}

/* A constant string's first n (<= 8) bytes as a word; folds to a constant after inlining. */
static __always_inline __u64 l7_strword(const char *s, __u32 n)
{
	__u64 w = 0;
#pragma unroll
	for (__u32 i = 0; i < 8; i++)
		if (i < n)
			w |= (__u64)(__u8)s[i] << (8 * i);
	return w;
}

/* Does buf[at..] start with the lower-case `s` (n <= 16 bytes, a constant)? Word compares:
 * byte loops with branches made the verifier give up ("sequence of jumps is too complex"). */
static __always_inline int l7_line_is(const struct l7_req *r, __u32 at, const char *s, __u32 n)
{
	if (n <= 8)
		return (l7_word(r, at) & l7_bytemask(n)) == l7_strword(s, n);
	return l7_word(r, at) == l7_strword(s, 8) &&
	       (l7_word(r, at + n - 8) == l7_strword(s + n - 8, 8));
}

static __always_inline __u32 l7_classify(const struct l7_req *r, __u32 at, __u32 n)
{
	if (n == 14 && l7_line_is(r, at, "content-length", 14))
		return L7_H_CLEN;
	if (n == 17 && l7_line_is(r, at, "transfer-encoding", 16))
		return L7_H_TE;
	if (n == 10 && l7_line_is(r, at, "connection", 10))
		return L7_H_CONN;
	if (n == 4 && l7_line_is(r, at, "host", 4))
		return L7_H_HOST;
	if (n == 6 && l7_line_is(r, at, "expect", 6))
		return L7_H_EXPECT;
	if (n == 7 && l7_line_is(r, at, "upgrade", 7))
		return L7_H_UPGRADE;
	return L7_H_OTHER;
}

/* The end of a header line (at '\r'). */
static __always_inline void l7_end_header(struct l7_head_scan *s, struct l7_req *r, __u32 end)
{

	if (!s->colon) {
		s->bad = 1;   /* a field line without a name */
		return;
	}
	switch (s->kind) {
	case L7_H_CLEN:
		if (!s->ndig || (s->clen >= 0 && s->clen != s->cur))
			s->bad = 1;   /* empty, or two different lengths: ambiguous framing */
		s->clen = s->cur;
		break;
	case L7_H_TE:
		/* only a final "chunked" frames the body */
		if (s->vstart && end >= s->vstart + 7 && l7_line_is(r, end - 7, "chunked", 7))
			s->chunked = 1;
		else
			s->bad = 1;
		break;
	case L7_H_CONN:
		if (s->vstart && end >= s->vstart + 5 && l7_line_is(r, s->vstart, "close", 5))
			s->close = 1;
		break;
	case L7_H_HOST:
		if (s->host_seen++)
			s->bad = 1;
		r->host.off = s->vstart ? s->vstart : end;
		r->host.len = s->vstart ? end - s->vstart : 0;
		break;
	case L7_H_EXPECT:
		r->flags |= L7_REQ_EXPECT;
		break;
	case L7_H_UPGRADE:
		r->flags |= L7_REQ_UPGRADE;
		break;
	}
}

static __always_inline void l7_end_first_line(struct l7_head_scan *s, struct l7_req *r, __u32 end);

/* The current line [s->line, end) is cut by a response mutation. */
static __always_inline void l7_cut_line(struct l7_head_scan *s, __u32 end)
{
	__u32 n = s->n_cut;
	struct l7_span *last = &s->cut[(n - 1) & (L7_MAX_SET - 1)];

	s->cut_cur = 0;
	if (n && last->off + last->len == s->line) {
		last->len = (__u16)(end - last->off);   /* the line right after the last cut one */
		return;
	}
	if (n >= L7_MAX_SET) {
		s->cut_over = 1;
		return;
	}
	s->cut[n & (L7_MAX_SET - 1)].off = (__u16)s->line;
	s->cut[n & (L7_MAX_SET - 1)].len = (__u16)(end - s->line);
	s->n_cut = n + 1;
}

/* bpf_loop's context must be on the stack; pointers stored in a map would come back as
 * plain numbers, so the stack holds the two pointers and the map holds the state. */
struct l7_scan_ref {
	struct l7_head_scan *s;
	struct l7_req *req;
};

L7_LOOP_CB(l7_head_scan_cb)
{
	struct l7_head_scan *s = ((struct l7_scan_ref *)l7_ctx)->s;
	struct l7_req *r = ((struct l7_scan_ref *)l7_ctx)->req;
	__u32 p = s->pos;

	if (p >= s->len || p >= L7_MAX_HEAD)
		return 1;
	s->pos = p + 1;
	__u8 ch = r->buf[l7_mask(p, L7_HM)];
	if (ch == '\n') {
		if (p == s->line || r->buf[l7_mask(p - 1, L7_HM)] != '\r') {
			s->bad = 1;   /* bare LF: refuse, it is how smuggling starts */
			return 1;
		}
		if (p - 1 == s->line) {
			if (s->first)
				s->bad = 1;
			s->head_len = p + 1;   /* the empty line */
			return 1;
		}
		if (s->first)
			l7_end_first_line(s, r, p - 1);
		else
			l7_end_header(s, r, p - 1);
		if (s->cut_cur)
			l7_cut_line(s, p + 1);
		s->first = 0;
		s->line = p + 1;
		s->colon = s->kind = s->vstart = s->ndig = 0;
		s->cur = 0;
		return s->bad ? 1 : 0;
	}
	if (ch == '\r')
		return 0;
	if (s->first) {
		if (ch == ' ') {
			if (!s->sp1)
				s->sp1 = p;
			else if (!s->sp2)
				s->sp2 = p;
			else if (s->request)
				s->bad = 1;
		} else if (ch == '?' && !s->qm && s->sp1 && !s->sp2) {
			s->qm = p;
		}
		return s->bad ? 1 : 0;
	}
	if (!s->colon) {
		if (ch == ':') {
			s->colon = p;
			s->kind = l7_classify(r, s->line, p - s->line);
			if (l7_n_rhdr && s->rmask) {
				__u32 m = l7_rhdr_match(r, s->line, p - s->line);
				s->cut_cur = m && (s->rmask >> ((m - 1) & 31) & 1);
			}
		} else if (ch == ' ' || ch == '\t') {
			s->bad = 1;   /* blank in a name, or obsolete line folding */
		}
		return s->bad ? 1 : 0;
	}
	if (ch == ' ' || ch == '\t') {
		if (s->kind == L7_H_CLEN && s->ndig)
			s->ndig = 1000;   /* only blanks may follow the digits */
		return 0;
	}
	if (!s->vstart)
		s->vstart = p;
	if (s->kind == L7_H_CLEN) {
		if (ch < '0' || ch > '9' || s->ndig >= 18)
			s->bad = 1;
		else {
			s->cur = s->cur * 10 + (ch - '0');
			s->ndig++;
		}
	}
	return s->bad ? 1 : 0;
}

static __always_inline void l7_end_first_line(struct l7_head_scan *s, struct l7_req *r, __u32 end)
{
	__u32 at = s->line;

	if (!s->request) {
		/* "HTTP/1.x NNN ..." */
		if (end - at < 12 || !l7_line_is(r, at, "http/1.", 7) || s->sp1 != at + 8) {
			s->bad = 1;
			return;
		}
		__u32 st = 0;
#pragma unroll
		for (int i = 9; i < 12; i++) {
			__u8 c = r->buf[l7_mask(at + i, L7_HM)];
			if (c < '0' || c > '9')
				s->bad = 1;
			st = st * 10 + (c - '0');
		}
		s->status = st;
		return;
	}
	__u32 sp1 = s->sp1, sp2 = s->sp2;
	if (!sp1 || !sp2 || sp2 <= sp1 + 1 || end - sp2 != 9 || !l7_line_is(r, sp2 + 1, "http/1.", 7)) {
		s->bad = 1;
		return;
	}
	r->method_s.off = at;
	r->method_s.len = sp1 - at;
	r->target.off = sp1 + 1;
	r->target.len = sp2 - sp1 - 1;
	r->path = r->target;
	if (s->qm && s->qm < sp2) {
		r->path.len = s->qm - r->path.off;
		r->query.off = s->qm + 1;
		r->query.len = sp2 - s->qm - 1;
	}
	if (r->buf[l7_mask(sp2 + 8, L7_HM)] == '0')
		r->flags |= L7_REQ_HTTP10;
	__u32 ml = sp1 - at;
	__u8 c0 = r->buf[l7_mask(at, L7_HM)];
	r->method = L7_M_OTHER;
	if (ml == 3 && c0 == 'G' && l7_line_is(r, at, "get", 3))
		r->method = L7_M_GET;
	else if (ml == 4 && c0 == 'H' && l7_line_is(r, at, "head", 4))
		r->method = L7_M_HEAD;
	else if (ml == 4 && c0 == 'P' && l7_line_is(r, at, "post", 4))
		r->method = L7_M_POST;
	else if (ml == 3 && c0 == 'P' && l7_line_is(r, at, "put", 3))
		r->method = L7_M_PUT;
	else if (ml == 6 && c0 == 'D' && l7_line_is(r, at, "delete", 6))
		r->method = L7_M_DELETE;
	else if (ml == 7 && c0 == 'C' && l7_line_is(r, at, "connect", 7))
		r->method = L7_M_CONNECT;
}

/* Scan a head in req->buf[0, len). Returns head length, 0 if incomplete, -1 bad. */
/* l7_scan is declared with the other maps (gateway.h, from l7/maps.def). */
/* The scanner's state, in the per-CPU l7_scan map (see L7_SCAN_STATE). */
static __always_inline struct l7_head_scan *l7_scan_state(void)
{
	__u32 zero = 0;
	_Static_assert(sizeof(struct l7_head_scan) <= L7_SCAN_STATE, "l7_scan value too small");
	return bpf_map_lookup_elem(&l7_scan, &zero);
}

static __always_inline int l7_scan_head(struct l7_head_scan *s, struct l7_req *req, __u32 len, int request,
					__u32 rmask)
{
	struct l7_scan_ref ref = { .s = s, .req = req };

	__builtin_memset(s, 0, sizeof(*s));
	s->rmask = rmask;
	s->len = len;
	s->clen = -1;
	s->first = 1;
	s->request = request;
	l7_loop(L7_MAX_HEAD, l7_head_scan_cb, &ref);
	if (s->bad || (s->chunked && s->clen >= 0))
		return -1;
	if (!s->head_len)
		return len >= L7_MAX_HEAD ? -2 : 0;
	return (int)s->head_len;
}

/* rmask: which response names' lines to find (bits of l7_rhdr_name), into s->cut. */
static __always_inline int l7_scan_response(struct l7_head_scan *s, struct l7_req *req, __u32 len, __u32 rmask)
{
	int h = l7_scan_head(s, req, len, 0, rmask);
	return h < 0 ? -1 : h;
}

/* A chunk-size line at buf[0, len): RFC 9112 7.1 exactly, as l7_http_chunked in http.h
 * frames it (the native corpus test checks that one): 1*HEXDIG *(";" token ["=" (token /
 * quoted-string)]) CRLF, no BWS, no bare CR or LF. The gateway frames bodies itself, so a laxer
 * scanner here (it skipped every CR) forwarded "5\r\r;..." style smuggling payloads.
 * Returns line length, 0 if incomplete, -1 bad; *size gets the chunk size. One byte per
 * bpf_loop step: a plain loop with this much state makes the verifier enumerate it past its
 * 1M-instruction limit. */
enum { L7_CS_SIZE0, L7_CS_SIZE, L7_CS_NAME0, L7_CS_NAME, L7_CS_VAL0, L7_CS_TOK, L7_CS_Q,
       L7_CS_QESC, L7_CS_QEND, L7_CS_LF };

struct l7_chunk_scan {
	const struct l7_req *r;
	__u32 len;
	__u32 nd;
	__u32 in_ext;       /* L7_CS_* state */
	int result;
	__u64 v;
};

static __always_inline int l7_cs_tchar(__u8 c)
{
	if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
		return 1;
	switch (c) {
	case '!': case '#': case '$': case '%': case '&': case '\'': case '*': case '+':
	case '-': case '.': case '^': case '_': case '`': case '|': case '~':
		return 1;
	}
	return 0;
}

L7_LOOP_CB(l7_chunk_cb)
{
	struct l7_chunk_scan *s = l7_ctx;
	__u32 i = (__u32)l7_idx & 63;

	if (i >= s->len) {
		s->result = 0;
		return 1;
	}
	__u8 c = s->r->buf[i];
	__u32 st = s->in_ext;
	if (st == L7_CS_LF) {
		s->result = c == '\n' ? (int)i + 1 : -1;
		return 1;
	}
	if (st == L7_CS_Q) {
		if (c == '"')
			s->in_ext = L7_CS_QEND;
		else if (c == '\\')
			s->in_ext = L7_CS_QESC;
		else if ((c < 0x20 && c != '\t') || c == 0x7f)
			goto bad;
		return 0;
	}
	if (st == L7_CS_QESC) {
		if ((c < 0x20 && c != '\t') || c == 0x7f)
			goto bad;
		s->in_ext = L7_CS_Q;
		return 0;
	}
	if (st <= L7_CS_SIZE) {
		__u8 lc = l7_lc(c), d = 0xff;
		if (c >= '0' && c <= '9')
			d = c - '0';
		else if (lc >= 'a' && lc <= 'f')
			d = lc - 'a' + 10;
		if (d != 0xff) {
			if (s->nd >= 15)
				goto bad;
			s->v = s->v * 16 + d;
			s->nd++;
			s->in_ext = L7_CS_SIZE;
			return 0;
		}
		if (st == L7_CS_SIZE0)
			goto bad;
		goto ext_end;
	}
	if (st == L7_CS_NAME0 || st == L7_CS_NAME) {
		if (l7_cs_tchar(c)) {
			s->in_ext = L7_CS_NAME;
			return 0;
		}
		if (st == L7_CS_NAME0)
			goto bad;
		if (c == '=') {
			s->in_ext = L7_CS_VAL0;
			return 0;
		}
		goto ext_end;
	}
	if (st == L7_CS_VAL0) {
		if (c == '"')
			s->in_ext = L7_CS_Q;
		else if (l7_cs_tchar(c))
			s->in_ext = L7_CS_TOK;
		else
			goto bad;
		return 0;
	}
	if (st == L7_CS_TOK && l7_cs_tchar(c))
		return 0;
ext_end:   /* after the size, a name, a value: ";" starts an extension, CR ends the line */
	if (c == ';') {
		s->in_ext = L7_CS_NAME0;
		return 0;
	}
	if (c == '\r') {
		s->in_ext = L7_CS_LF;
		return 0;
	}
bad:
	s->result = -1;
	return 1;
}

static __always_inline int l7_scan_chunk_line(const struct l7_req *r, __u32 len, __u64 *size)
{
	struct l7_chunk_scan s = { .r = r, .len = len, .result = -1 };

	l7_loop(64, l7_chunk_cb, &s);
	*size = s.v;
	return s.result;
}

#endif
