/* http.h: strict HTTP/1.1 request-head parser and message framing, for BPF and natively.
 *
 * API
 *   int l7_http_parse_head(struct l7_req *req, __u32 len)
 *       Parses req->buf[0..len) (len may run past the head into the body or the next request;
 *       only the first L7_MAX_HEAD bytes are looked at).
 *         > 0  head length: the head is complete and valid, every field of *req is filled;
 *              body_len = Content-Length (0 if none); L7_REQ_CHUNKED: body length unknown,
 *              frame it with l7_http_chunked(). Leading empty lines (RFC 9112 2.2) are
 *              skipped and counted in the head length.
 *         0    need more bytes (no end of head yet and len < L7_MAX_HEAD)
 *        -L7_E_BAD           malformed or ambiguous (400): bare CR/LF, obs-fold, NUL/CTL,
 *                            bad token, space before colon, CL+TE, duplicate CL/TE/Host,
 *                            non-digit CL, TE other than exactly "chunked", missing Host in
 *                            1.1, version other than HTTP/1.0 and HTTP/1.1, bad target form
 *        -L7_E_TOO_LARGE     head does not end within L7_MAX_HEAD, or > L7_MAX_HEADERS fields
 *        -L7_E_URI_TOO_LONG  request line longer than L7_HTTP_MAX_LINE
 *        -L7_E_UNSUPPORTED   valid HTTP the kernel path leaves to the slow path: a method
 *                            outside the HTTP method registry subset llhttp knows, a wanted
 *                            header sent twice (which copy would the policy see?), CL > 4 GiB
 *                            or > 19 characters, Expect other than 100-continue, Connection
 *                            values > 63 bytes or > 8 tokens, >= 32 bytes of OWS before or
 *                            after a value,
 *                            an authority (CONNECT / absolute-form) > 63 bytes.
 *       While it runs, scanner state lives in *req itself (map memory, not the stack: constant
 *       state on the stack makes the verifier enumerate it). Until it returns > 0 the fields
 *       are scratch.
 *
 *   int l7_http_chunked(struct l7_chunked *st, const __u8 *buf, __u32 off, __u32 len)
 *       Strict chunked-body framer (RFC 9112 7.1, no BWS, extensions token[=token|quoted],
 *       trailer fields validated like header fields, and none that frames, routes or controls
 *       the connection: Host, Content-Length, Transfer-Encoding, Connection, Upgrade, Expect).
 *       Feed bytes buf[off..len) of one buffer; resumable across calls with the same *st
 *       (zeroed first). Returns the offset just past the message (> 0), 0 when every byte was
 *       consumed and more are needed, -L7_E_* on error.
 *
 *   int l7_http_trailers(struct l7_chunked *st, const __u8 *buf, __u32 off, __u32 len)
 *       The trailer section after a last chunk, as l7_http_chunked frames it, in one call.
 *
 *   __u32 l7_http_msg_end(const struct l7_req *req)
 *       Where the next request starts for a non-chunked message: head_len + body_len.
 *
 * Target forms (RFC 9112 3.2): origin-form; asterisk-form only as "*" with OPTIONS or an
 * extension method (UPnP's M-SEARCH); absolute-form http(s)://authority[path] without
 * userinfo, where host is taken from the target (RFC 9112 3.2.2: the Host field is then
 * ignored) and path/query from after the authority; authority-form host:port only with
 * CONNECT. CTL, SP, bytes >= 0x80, '#' and '\\' are refused in targets (see L7__TGTBAD).
 *
 * Wanted headers: names come from the policy (l7_wanted_*); matched case-insensitively,
 * value trimmed of OWS into hdr[i], bit i of hdr_present. Host is also always parsed into
 * req->host. */
#ifndef L7_BPF_HTTP_H
#define L7_BPF_HTTP_H

#include "compat.h"
#include <l7/abi.h>

extern L7_POLICY_TABLE __u32 l7_n_wanted;
extern L7_POLICY_TABLE __u8 l7_wanted_len[L7_MAX_WANTED];
extern L7_POLICY_TABLE char l7_wanted_name[L7_MAX_WANTED][L7_MAX_NAME];
extern L7_POLICY_TABLE __u32 l7_n_rhdr;
extern L7_POLICY_TABLE __u8 l7_rhdr_len[L7_MAX_RHDR];
extern L7_POLICY_TABLE char l7_rhdr_name[L7_MAX_RHDR][L7_MAX_NAME];

#ifndef L7_HTTP_WIN
#define L7_HTTP_WIN 32          /* bytes looked at per scan step (<= 64) */
#endif
#ifndef L7_HTTP_MAX_LINE
#define L7_HTTP_MAX_LINE 8192   /* request line limit (414) */
#endif
#ifndef L7_HTTP_MAX_STEPS
#define L7_HTTP_MAX_STEPS 1536  /* > 16384/WIN windows + 2 events per field + slack */
#endif
#ifndef L7_DATA_MASK
#define L7_DATA_MASK (L7_MAX_HEAD - 1)  /* index mask for buffers of MAX_HEAD + slack */
#endif
#define L7_HTTP_TRIM 32         /* OWS runs around a value must be shorter than this */

/* The status of the answer to a request that l7_http_parse refused with err (the codes above). */
static __always_inline __u32 l7_http_error_status(int err)
{
	if (err == -L7_E_TOO_LARGE)
		return 431;
	if (err == -L7_E_URI_TOO_LONG)
		return 414;
	if (err == -L7_E_UNSUPPORTED)
		return 501;
	return 400;
}

/* ---- byte classes: one row per scanner state, 1 = "stop here" ---------------------- */
#define L7__CTL(c)   ((c) < 0x20 || (c) == 0x7f)
#define L7__DIGIT(c) ((c) >= '0' && (c) <= '9')
#define L7__ALPHA(c) (((c) >= 'a' && (c) <= 'z') || ((c) >= 'A' && (c) <= 'Z'))
#define L7__TCHAR(c) (L7__DIGIT(c) || L7__ALPHA(c) || (c) == '!' || (c) == '#' ||            \
	(c) == '$' || (c) == '%' || (c) == '&' || (c) == '\'' || (c) == '*' || (c) == '+' ||   \
	(c) == '-' || (c) == '.' || (c) == '^' || (c) == '_' || (c) == '`' || (c) == '|' ||    \
	(c) == '~')
#define L7__WS(c)     ((c) == ' ' || (c) == '\t')
/* Target bytes refused: CTL, SP, DEL, non-ASCII (as llhttp strict), '#' (a fragment that
 * back ends strip: "/admin#x" would dodge a "/admin" rule) and '\\' (back ends that read it
 * as '/'). " < > ^ ` { | } are not URI characters either, but change no path's meaning and
 * are sent by real clients, so they pass. */
#define L7__TGTBAD(c) ((c) <= 0x20 || (c) >= 0x7f || (c) == '#' || (c) == '\\')

#define L7__E_ALL(c)  1
#define L7__E_TOK(c)  (!L7__TCHAR(c))
#define L7__E_TGT(c)  (L7__TGTBAD(c) || (c) == '?')
#define L7__E_QRY(c)  (L7__TGTBAD(c))
#define L7__E_VAL(c)  (L7__CTL(c) && (c) != '\t')
#define L7__E_AUTH(c) (L7__TGTBAD(c) || (c) == '/' || (c) == '?' || (c) == '@' ||           \
	(c) == '"' || (c) == '<' || (c) == '>' || (c) == '^' || (c) == '`' || (c) == '{' ||    \
	(c) == '|' || (c) == '}')
#define L7__E_SEP(c)  ((c) == ',' || L7__WS(c))
#define L7__E_NWS(c)  (!L7__WS(c))

#define L7__R4(F, b)   F((b)), F((b) + 1), F((b) + 2), F((b) + 3)
#define L7__R16(F, b)  L7__R4(F, b), L7__R4(F, (b) + 4), L7__R4(F, (b) + 8), L7__R4(F, (b) + 12)
#define L7__R64(F, b)  L7__R16(F, b), L7__R16(F, (b) + 16), L7__R16(F, (b) + 32), L7__R16(F, (b) + 48)
#define L7__ROW(F)     { L7__R64(F, 0), L7__R64(F, 64), L7__R64(F, 128), L7__R64(F, 192) }

/* Scanner states; the row of l7_http_ev with the same number is the stop set. */
enum {
	L7H_S_RL0 = 0,    /* before the request line: leading CRLFs */
	L7H_S_METHOD = 1, /* stop at the SP after the method */
	L7H_S_TARGET = 2, /* stop at '?' or SP */
	L7H_S_QUERY = 3,  /* after the first '?': stop at SP */
	L7H_S_NAME = 4,   /* field line start / name: stop at ':' (or CR of the empty line) */
	L7H_S_VALUE = 5,  /* stop at CR */
	L7H_R_AUTH = 6,   /* authority check (not a state) */
	L7H_R_SEP = 7,    /* list separators (not a state) */
	L7H_R_NWS = 8,    /* not OWS (not a state) */
};
static const __u8 l7_http_ev[9][256] = {
	L7__ROW(L7__E_ALL), L7__ROW(L7__E_TOK), L7__ROW(L7__E_TGT), L7__ROW(L7__E_QRY),
	L7__ROW(L7__E_TOK), L7__ROW(L7__E_VAL), L7__ROW(L7__E_AUTH), L7__ROW(L7__E_SEP),
	L7__ROW(L7__E_NWS),
};

/* Internal bits of req->flags while parsing (cleared before returning). */
#define L7H_ST_SHIFT   8
#define L7H_ST_MASK    (7u << L7H_ST_SHIFT)
#define L7H_F_HOST     (1u << 12)
#define L7H_F_CL       (1u << 13)
#define L7H_F_TE       (1u << 14)
#define L7H_F_CUPG     (1u << 15)  /* Connection: upgrade */
#define L7H_F_UPGHDR   (1u << 16)  /* Upgrade field present */
#define L7H_F_KEEP     (1u << 17)  /* Connection: keep-alive */
#define L7H_F_ABS      (1u << 18)  /* host comes from the target */
#define L7H_F_CCLOSE   (1u << 19)  /* Connection: close */
#define L7H_K_SHIFT    24          /* kind of the current field: 3 bits */
#define L7H_W_SHIFT    27          /* wanted index + 1 of the current field: 5 bits */
#define L7H_PUBLIC     0xffu       /* L7_REQ_* live in the low byte */

enum { L7H_K_NONE = 0, L7H_K_HOST, L7H_K_CL, L7H_K_TE, L7H_K_CONN, L7H_K_UPG, L7H_K_EXPECT };

/* The "mark" (start of the current name or raw value) lives in the upper half of
 * req->method while the fields are parsed: the method number needs 4 bits. */
#define L7H_MARK(r)         ((r)->method >> 16)
#define L7H_SET_MARK(r, m)  ((r)->method = ((r)->method & 0xffffu) | ((__u32)(m) << 16))

struct l7_http_ctx {
	struct l7_req *req;
	__u32 len;   /* clamped to L7_MAX_HEAD */
	int rc;      /* 1 while running */
};

static __always_inline __u32 l7_http_state(const struct l7_req *r)
{
	return (r->flags >> L7H_ST_SHIFT) & 7;
}

static __always_inline void l7_http_set_state(struct l7_req *r, __u32 s)
{
	r->flags = (r->flags & ~L7H_ST_MASK) | (s << L7H_ST_SHIFT);
}

/* Byte at a position < L7_MAX_HEAD + 64. */
static __always_inline __u8 l7_http_at(const struct l7_req *r, __u32 pos)
{
	return r->buf[l7_mask(pos, L7_MAX_HEAD - 1)];
}

/* Stop mask of `n` (<= 64) bytes from pos, with the row's stop set: bit j = byte pos+j
 * stops. Straight-line code: the verifier walks it once per path, no per-byte branches. */
#define L7_HTTP_WINDOW(r, pos, row, n) ({                                                  \
	const __u8 *l7__p = (r)->buf + l7_mask((pos), L7_MAX_HEAD - 1);                    \
	const __u8 *l7__row = l7_http_ev[(row)];                                           \
	__u64 l7__m = 0;                                                                   \
	L7_UNROLL                                                                          \
	for (int l7__i = 0; l7__i < (n) / 8; l7__i++) {                                    \
		__u64 l7__w = l7_ld64(l7__p + 8 * l7__i), l7__e = 0;                       \
		L7_UNROLL                                                                  \
		for (int l7__j = 0; l7__j < 8; l7__j++)                                    \
			l7__e |= (__u64)l7__row[(l7__w >> (8 * l7__j)) & 0xff] << l7__j;   \
		/* one word at a time: keeps the BPF register pressure (and stack) low */ \
		l7_barrier_var(l7__e);                                                     \
		l7__m |= l7__e << (8 * l7__i);                                             \
	}                                                                                  \
	l7__m; })

/* Result when the scan reaches the end of the data at `at` in state `st`. */
static __always_inline int l7_http_eod(__u32 len, __u32 st)
{
	if (len < L7_MAX_HEAD)
		return L7_E_NEED_MORE;
	return st <= L7H_S_QUERY ? -L7_E_URI_TOO_LONG : -L7_E_TOO_LARGE;
}

/* Method number; extension methods of the HTTP method registry that llhttp also knows are
 * L7_M_OTHER; any other token is -1 (slow path decides: RTSP's ANNOUNCE, typos, PRI). */
static __always_inline int l7_http_method(const struct l7_req *r, __u32 off, __u32 n)
{
	const __u8 *p = r->buf + l7_mask(off, L7_MAX_HEAD - 1);
	__u64 w = l7_ld64(p) & l7_bytemask(n), w1;

	if (n > 8) {
		/* the long ones: PROPPATCH SUBSCRIBE MKACTIVITY MKCALENDAR UNSUBSCRIBE */
		if (n > 11)
			return -1;
		w1 = l7_ld64(p + 8) & l7_bytemask(n - 8);
		if ((w == L7_W8('P', 'R', 'O', 'P', 'P', 'A', 'T', 'C') && w1 == 'H') || (w == L7_W8('S', 'U', 'B', 'S', 'C', 'R', 'I', 'B') && w1 == 'E') ||
		    (w == L7_W8('M', 'K', 'A', 'C', 'T', 'I', 'V', 'I') && w1 == ('T' | 'Y' << 8)) ||
		    (w == L7_W8('M', 'K', 'C', 'A', 'L', 'E', 'N', 'D') && w1 == ('A' | 'R' << 8)) ||
		    (w == L7_W8('U', 'N', 'S', 'U', 'B', 'S', 'C', 'R') && w1 == ('I' | 'B' << 8 | 'E' << 16)))
			return L7_M_OTHER;
		return -1;
	}
	/* Methods are case-sensitive (RFC 9110 9.1). */
	switch (w) {
	case L7_W8('G', 'E', 'T', 0, 0, 0, 0, 0): return L7_M_GET;
	case L7_W8('H', 'E', 'A', 'D', 0, 0, 0, 0): return L7_M_HEAD;
	case L7_W8('P', 'O', 'S', 'T', 0, 0, 0, 0): return L7_M_POST;
	case L7_W8('P', 'U', 'T', 0, 0, 0, 0, 0): return L7_M_PUT;
	case L7_W8('D', 'E', 'L', 'E', 'T', 'E', 0, 0): return L7_M_DELETE;
	case L7_W8('C', 'O', 'N', 'N', 'E', 'C', 'T', 0): return L7_M_CONNECT;
	case L7_W8('O', 'P', 'T', 'I', 'O', 'N', 'S', 0): return L7_M_OPTIONS;
	case L7_W8('T', 'R', 'A', 'C', 'E', 0, 0, 0): return L7_M_TRACE;
	case L7_W8('P', 'A', 'T', 'C', 'H', 0, 0, 0): return L7_M_PATCH;
	case L7_W8('C', 'O', 'P', 'Y', 0, 0, 0, 0):
	case L7_W8('L', 'O', 'C', 'K', 0, 0, 0, 0):
	case L7_W8('M', 'K', 'C', 'O', 'L', 0, 0, 0):
	case L7_W8('M', 'O', 'V', 'E', 0, 0, 0, 0):
	case L7_W8('P', 'R', 'O', 'P', 'F', 'I', 'N', 'D'):
	case L7_W8('S', 'E', 'A', 'R', 'C', 'H', 0, 0):
	case L7_W8('U', 'N', 'L', 'O', 'C', 'K', 0, 0):
	case L7_W8('B', 'I', 'N', 'D', 0, 0, 0, 0):
	case L7_W8('R', 'E', 'B', 'I', 'N', 'D', 0, 0):
	case L7_W8('U', 'N', 'B', 'I', 'N', 'D', 0, 0):
	case L7_W8('A', 'C', 'L', 0, 0, 0, 0, 0):
	case L7_W8('R', 'E', 'P', 'O', 'R', 'T', 0, 0):
	case L7_W8('C', 'H', 'E', 'C', 'K', 'O', 'U', 'T'):
	case L7_W8('M', 'E', 'R', 'G', 'E', 0, 0, 0):
	case L7_W8('M', '-', 'S', 'E', 'A', 'R', 'C', 'H'):
	case L7_W8('N', 'O', 'T', 'I', 'F', 'Y', 0, 0):
	case L7_W8('P', 'U', 'R', 'G', 'E', 0, 0, 0):
	case L7_W8('L', 'I', 'N', 'K', 0, 0, 0, 0):
	case L7_W8('U', 'N', 'L', 'I', 'N', 'K', 0, 0):
	case L7_W8('S', 'O', 'U', 'R', 'C', 'E', 0, 0):
	case L7_W8('Q', 'U', 'E', 'R', 'Y', 0, 0, 0):
		return L7_M_OTHER;
	}
	return -1;
}

/* "HTTP/1.0\r\n" or "HTTP/1.1\r\n" at v; 1 = 1.0, 2 = 1.1, 0 = need more, <0 error. */
static __always_inline int l7_http_version(const struct l7_req *r, __u32 v, __u32 len)
{
	const __u8 *p = r->buf + l7_mask(v, L7_MAX_HEAD - 1);
	__u64 want = L7_W8('H', 'T', 'T', 'P', '/', '1', '.', '1');
	__u64 w = l7_ld64(p) ^ want;
	__u32 avail = len > v ? len - v : 0;
	__u32 crlf = (__u32)p[8] | (__u32)p[9] << 8;

	if (avail < 10) {
		/* Refuse early when the bytes so far already differ (bare LF, junk). */
		__u64 m = l7_bytemask(avail) & ~(0xffULL << 56);
		if (w & m)
			return -L7_E_BAD;
		if (avail >= 8 && (p[7] | 1) != '1')
			return -L7_E_BAD;
		if (avail == 9 && p[8] != '\r')
			return -L7_E_BAD;
		return 0;
	}
	if ((w & ~(0xffULL << 56)) || (p[7] | 1) != '1' || crlf != ('\r' | '\n' << 8))
		return -L7_E_BAD;
	return p[7] == '0' ? 1 : 2;
}

/* Check the target form once the request line is complete; set path/query/host. */
static __always_inline int l7_http_target_form(struct l7_req *r, __u32 end, int has_q)
{
	__u32 t = r->target.off, tl = r->target.len;
	__u8 c0 = l7_http_at(r, t);
	__u32 pend = has_q ? (__u32)r->query.off - 1 : end;
	__u64 w, m;
	__u32 a, e;

	if (r->method == L7_M_CONNECT) {
		/* authority-form: host ":" port, nothing else (RFC 9112 3.2.3). */
		__u32 i, nd = 0;

		if (tl > 63)
			return -L7_E_UNSUPPORTED;
		m = L7_HTTP_WINDOW(r, t, L7H_R_AUTH, 64) | (1ULL << 63);
		if (l7_ctz64(m) != tl)
			return -L7_E_BAD;
	L7_UNROLL
		for (i = 1; i <= 6; i++) {
			__u8 c = l7_http_at(r, end - i);
			if (i > tl)
				break;
			if (L7__DIGIT(c)) {
				nd++;
				continue;
			}
			if (c != ':' || nd == 0 || i == tl)
				return -L7_E_BAD;
			break;
		}
		if (nd == 0 || nd > 5 || nd + 1 >= tl)
			return -L7_E_BAD;
		r->host = r->target;
		r->path.off = (__u16)end;
		r->path.len = 0;
		r->flags |= L7H_F_ABS | L7_REQ_UPGRADE;
		return 0;
	}
	if (c0 == '/') {
		r->path.off = (__u16)t;
		r->path.len = (__u16)(pend - t);
		return 0;
	}
	if (c0 == '*') {
		/* asterisk-form is "*" alone, for OPTIONS (and extension methods, M-SEARCH). */
		if (tl != 1 || (r->method != L7_M_OPTIONS && r->method != L7_M_OTHER))
			return -L7_E_BAD;
		r->path = r->target;
		return 0;
	}
	/* absolute-form: http:// or https:// (scheme case-insensitive), no userinfo. */
	w = l7_lower8(l7_ld64(r->buf + l7_mask(t, L7_MAX_HEAD - 1)));
	if ((w & l7_bytemask(7)) == L7_W8('h', 't', 't', 'p', ':', '/', '/', 0))
		a = t + 7;
	else if (w == L7_W8('h', 't', 't', 'p', 's', ':', '/', '/'))
		a = t + 8;
	else
		return -L7_E_BAD;
	if (a >= end)
		return -L7_E_BAD;
	m = L7_HTTP_WINDOW(r, a, L7H_R_AUTH, 64) | (1ULL << 63);
	e = l7_ctz64(m);
	if (e >= 63)
		return -L7_E_UNSUPPORTED;
	if (e == 0 || l7_http_at(r, a + e) == '@')
		return -L7_E_BAD;
	r->host.off = (__u16)a;
	r->host.len = (__u16)e;
	a += e;
	if (a > pend)
		a = pend;
	r->path.off = (__u16)a;
	r->path.len = (__u16)(pend - a);
	r->flags |= L7H_F_ABS;
	return 0;
}

/* The fields the parser gives a meaning to (framing, routing, the connection), by their
 * name's length and its lower-cased words w0..w2: L7H_K_*. */
static __always_inline __u32 l7_http_kind(__u32 n, __u64 w0, __u64 w1, __u64 w2)
{
	__u32 kind = L7H_K_NONE;

	if (n == 4 && w0 == L7_W8('h', 'o', 's', 't', 0, 0, 0, 0))
		kind = L7H_K_HOST;
	else if (n == 14 && w0 == L7_W8('c', 'o', 'n', 't', 'e', 'n', 't', '-') &&
		 w1 == L7_W8('l', 'e', 'n', 'g', 't', 'h', 0, 0))
		kind = L7H_K_CL;
	else if (n == 17 && w0 == L7_W8('t', 'r', 'a', 'n', 's', 'f', 'e', 'r') &&
		 w1 == L7_W8('-', 'e', 'n', 'c', 'o', 'd', 'i', 'n') && w2 == 'g')
		kind = L7H_K_TE;
	else if (n == 10 && w0 == L7_W8('c', 'o', 'n', 'n', 'e', 'c', 't', 'i') &&
		 w1 == L7_W8('o', 'n', 0, 0, 0, 0, 0, 0))
		kind = L7H_K_CONN;
	else if (n == 7 && w0 == L7_W8('u', 'p', 'g', 'r', 'a', 'd', 'e', 0))
		kind = L7H_K_UPG;
	else if (n == 6 && w0 == L7_W8('e', 'x', 'p', 'e', 'c', 't', 0, 0))
		kind = L7H_K_EXPECT;
	return kind;
}

/* The lower-cased words of the name at p (n <= L7_MAX_NAME; 32 bytes readable), zero past n. */
#define L7_NAME_WORDS(p, n, w0, w1, w2, w3) do {                                             	w0 = l7_lower8(l7_ld64(p)) & l7_bytemask(n);                                         	w1 = (n) > 8 ? l7_lower8(l7_ld64((p) + 8)) & l7_bytemask((n) - 8) : 0;               	w2 = (n) > 16 ? l7_lower8(l7_ld64((p) + 16)) & l7_bytemask((n) - 16) : 0;            	w3 = (n) > 24 ? l7_lower8(l7_ld64((p) + 24)) & l7_bytemask((n) - 24) : 0;            } while (0)

/* Classify the field name [s, s+n): known framing fields and the policy's wanted ones. */
static __always_inline __u32 l7_http_classify(const struct l7_req *r, __u32 s, __u32 n)
{
	const __u8 *p = r->buf + l7_mask(s, L7_MAX_HEAD - 1);
	__u64 w0, w1, w2, w3;
	__u32 kind, want = 0, i;

	if (n > L7_MAX_NAME)
		return 0;
	L7_NAME_WORDS(p, n, w0, w1, w2, w3);
	kind = l7_http_kind(n, w0, w1, w2);

	L7_UNROLL
	for (i = 0; i < L7_MAX_WANTED; i++) {
		const __u8 *q = (const __u8 *)l7_wanted_name[i];
		__u32 wl = l7_wanted_len[i];

		if (i >= l7_n_wanted)
			break;
		if (wl != n)
			continue;
		if (w0 == (l7_ld64(q) & l7_bytemask(n)) &&
		    w1 == (n > 8 ? l7_ld64(q + 8) & l7_bytemask(n - 8) : 0) &&
		    w2 == (n > 16 ? l7_ld64(q + 16) & l7_bytemask(n - 16) : 0) &&
		    w3 == (n > 24 ? l7_ld64(q + 24) & l7_bytemask(n - 24) : 0)) {
			want = i + 1;
			break;
		}
	}
	return kind | want << 3;
}

/* A response's field name [s, s+n) against the names policies set or remove in responses
 * (l7_rhdr_*): 1 + the name's index, or 0. The response scanners (gateway gw_head.h, mesh
 * mesh_resp.h) call it at each ':' of a head whose response has such mutations. */
static __always_inline __u32 l7_rhdr_match(const struct l7_req *r, __u32 s, __u32 n)
{
	const __u8 *p = r->buf + l7_mask(s, L7_MAX_HEAD - 1);
	__u64 w0, w1, w2, w3;
	__u32 i;

	if (n > L7_MAX_NAME || n == 0)
		return 0;
	L7_NAME_WORDS(p, n, w0, w1, w2, w3);
	L7_UNROLL
	for (i = 0; i < L7_MAX_RHDR; i++) {
		const __u8 *q = (const __u8 *)l7_rhdr_name[i];

		if (i >= l7_n_rhdr)
			break;
		if (l7_rhdr_len[i] == n && w0 == (l7_ld64(q) & l7_bytemask(n)) &&
		    w1 == (n > 8 ? l7_ld64(q + 8) & l7_bytemask(n - 8) : 0) &&
		    w2 == (n > 16 ? l7_ld64(q + 16) & l7_bytemask(n - 16) : 0) &&
		    w3 == (n > 24 ? l7_ld64(q + 24) & l7_bytemask(n - 24) : 0))
			return i + 1;
	}
	return 0;
}

/* Connection: comma/space-separated tokens; we need close, keep-alive and upgrade. */
static __always_inline int l7_http_connection(struct l7_req *r, __u32 vs, __u32 n)
{
	__u64 sep, ns, starts, ends;
	int i;

	if (n > 63)
		return -L7_E_UNSUPPORTED;
	sep = L7_HTTP_WINDOW(r, vs, L7H_R_SEP, 64) | ~((1ULL << n) - 1);
	ns = ~sep;
	starts = ns & ~(ns << 1);
	ends = sep & (ns << 1);   /* first separator after each token */
	L7_UNROLL
	for (i = 0; i < 8; i++) {
		__u32 s, e, tl;
		__u64 w;

		if (!starts)
			return 0;
		s = l7_ctz64(starts) & 63;
		e = l7_ctz64(ends & ~((2ULL << s) - 1)) & 63;
		tl = e - s;
		w = l7_lower8(l7_ld64(r->buf + l7_mask(vs + s, L7_MAX_HEAD - 1)));
		if (tl == 5 && (w & l7_bytemask(5)) == L7_W8('c', 'l', 'o', 's', 'e', 0, 0, 0))
			r->flags |= L7H_F_CCLOSE;
		else if (tl == 7 && (w & l7_bytemask(7)) == L7_W8('u', 'p', 'g', 'r', 'a', 'd', 'e', 0))
			r->flags |= L7H_F_CUPG;
		else if (tl == 10 && w == L7_W8('k', 'e', 'e', 'p', '-', 'a', 'l', 'i') &&
			 (l7_lower8(l7_ld64(r->buf + l7_mask(vs + s + 8, L7_MAX_HEAD - 1))) & 0xffff) ==
				 ('v' | 'e' << 8))
			r->flags |= L7H_F_KEEP;
		starts &= starts - 1;
	}
	return starts ? -L7_E_UNSUPPORTED : 0;
}

/* A complete field line: raw value [vs, ve) before trimming. */
static __always_inline int l7_http_field(struct l7_req *r, __u32 vs, __u32 ve)
{
	__u32 kind = (r->flags >> L7H_K_SHIFT) & 7, want = r->flags >> L7H_W_SHIFT, i, n;
	__u32 raw_vs = vs, line_end = ve + 2;   /* the field line: name, ':', value, CRLF */
	__u64 w, m;

	/* Trim OWS (SP/HT, RFC 9110 5.5); obs-text and other bytes are kept as sent. Done with
	 * two stop masks rather than loops: a data-dependent loop exit multiplies the paths the
	 * verifier has to walk through everything after it. */
	n = ve - vs;
	__u8 b0 = l7_http_at(r, vs), b1 = l7_http_at(r, vs + 1), bl = l7_http_at(r, ve - 1);
	if (n && !L7__WS(bl) && (!L7__WS(b0) || !L7__WS(b1))) {
		/* "name: value", at most one OWS byte before the value and none after: what the
		 * two stop masks below would find, without their ~70 instructions each */
		vs += L7__WS(b0);
	} else {
		m = L7_HTTP_WINDOW(r, vs, L7H_R_NWS, L7_HTTP_TRIM) | (1ULL << L7_HTTP_TRIM);
		i = l7_ctz64(m) & 63;                   /* leading OWS */
		if (i >= n) {
			if (n > L7_HTTP_TRIM)
				return -L7_E_UNSUPPORTED;
			ve = vs;                        /* all OWS: empty value */
		} else if (i >= L7_HTTP_TRIM) {
			return -L7_E_UNSUPPORTED;       /* >= TRIM bytes of leading OWS */
		} else {
			vs += i;
			n -= i;
			/* Window of TRIM bytes ending at ve (or starting at 0); only bits of
			 * [vs, ve) count; the last non-OWS byte ends the value. */
			__u32 st = ve > L7_HTTP_TRIM ? ve - L7_HTTP_TRIM : 0;

			m = L7_HTTP_WINDOW(r, st, L7H_R_NWS, L7_HTTP_TRIM);
			if (vs > st)
				m &= ~0ULL << ((vs - st) & 63);
			m &= (1ULL << ((ve - st) & 63)) - 1;
			if (!m)
				return -L7_E_UNSUPPORTED;       /* >= TRIM bytes of trailing OWS */
			ve = st + (63 - (__u32)__builtin_clzll(m)) + 1;
		}
	}
	/* Forget how the trims went so the verifier can merge the paths. */
	vs = l7_mask(vs, L7_MAX_HEAD - 1);
	ve = l7_mask(ve, L7_MAX_HEAD - 1);
	n = ve - vs;

	if (want) {
		__u32 bit = 1u << ((want - 1) & (L7_MAX_WANTED - 1));
		if (r->hdr_present & bit)
			return -L7_E_UNSUPPORTED;
		r->hdr_present |= bit;
		r->hdr[(want - 1) & (L7_MAX_WANTED - 1)].off = (__u16)vs;
		r->hdr[(want - 1) & (L7_MAX_WANTED - 1)].len = (__u16)n;
		/* the whole line, for a mutation that removes it: the name matched a wanted one
		 * exactly, so it starts that many bytes before the ':' */
		__u32 k = r->n_wline++ & (L7_MAX_WANTED - 1);
		__u32 ls = raw_vs - 1 - l7_wanted_len[(want - 1) & (L7_MAX_WANTED - 1)];
		r->wline[k].off = (__u16)ls;
		r->wline[k].len = (__u16)(line_end - ls);
		r->wline_hdr[k] = (__u8)(want - 1);
	}
	w = l7_lower8(l7_ld64(r->buf + vs));
	switch (kind) {
	case L7H_K_HOST:
		if (r->flags & L7H_F_HOST)
			return -L7_E_BAD;
		r->flags |= L7H_F_HOST;
		if (!(r->flags & L7H_F_ABS)) {
			r->host.off = (__u16)vs;
			r->host.len = (__u16)n;
		}
		break;
	case L7H_K_CL:
		if (r->flags & L7H_F_CL)
			return -L7_E_BAD;
		r->flags |= L7H_F_CL;
		if (n == 0)
			return -L7_E_BAD;
		if (n > 19)
			return -L7_E_UNSUPPORTED;
		r->body_len = vs | n << 16;   /* digits are checked at the end */
		break;
	case L7H_K_TE:
		/* Only "chunked" alone: any other coding list is refused (smuggling). */
		if (r->flags & L7H_F_TE)
			return -L7_E_BAD;
		r->flags |= L7H_F_TE | L7_REQ_CHUNKED;
		if (n != 7 || (w & l7_bytemask(7)) != L7_W8('c', 'h', 'u', 'n', 'k', 'e', 'd', 0))
			return -L7_E_BAD;
		break;
	case L7H_K_CONN:
		r->flags |= L7_REQ_CONNHDR;   /* the only trace of it: the parser is mesh mode's too */
		return l7_http_connection(r, vs, n);
	case L7H_K_UPG:
		r->flags |= L7H_F_UPGHDR;
		break;
	case L7H_K_EXPECT:
		if (n != 12 || w != L7_W8('1', '0', '0', '-', 'c', 'o', 'n', 't') ||
		    (l7_lower8(l7_ld64(r->buf + vs + 8)) & 0xffffffffULL) !=
			    L7_W8('i', 'n', 'u', 'e', 0, 0, 0, 0))
			return -L7_E_UNSUPPORTED;
		r->flags |= L7_REQ_EXPECT;
		break;
	}
	return 0;
}

/* Checks that need the whole head; fixes up flags. */
static __always_inline int l7_http_finish(struct l7_req *r, __u32 head_len)
{
	__u32 f = r->flags, i;

	if (!(f & L7_REQ_HTTP10) && !(f & L7H_F_HOST))
		return -L7_E_BAD;                     /* RFC 9112 3.2 */
	if ((f & L7H_F_CL) && (f & L7H_F_TE))
		return -L7_E_BAD;                     /* RFC 9112 6.3: smuggling vector */
	if ((f & L7H_F_TE) && (f & L7_REQ_HTTP10))
		return -L7_E_BAD;                     /* RFC 9112 6.1: faulty framing */
	if (f & L7H_F_CL) {
		__u32 s = r->body_len & 0xffff, n = r->body_len >> 16;
		__u64 v = 0;

	L7_UNROLL
		for (i = 0; i < 19; i++) {
			__u8 c = l7_http_at(r, s + i);
			if (i >= n)
				break;
			if (!L7__DIGIT(c))
				return -L7_E_BAD;
			v = v * 10 + (c - '0');
		}
		if (v > 0xffffffffULL)
			return -L7_E_UNSUPPORTED;
		r->body_len = (__u32)v;
	} else {
		r->body_len = 0;
	}
	if ((f & L7H_F_HOST) && !(f & L7H_F_ABS) && r->host.len) {
		/* Host must be an authority without userinfo or path; long ones go slow. */
		__u64 m;

		if (r->host.len > 63)
			return -L7_E_UNSUPPORTED;
		m = L7_HTTP_WINDOW(r, r->host.off, L7H_R_AUTH, 64) | (1ULL << 63);
		if (l7_ctz64(m) < r->host.len)
			return -L7_E_BAD;
	}
	if (f & L7_REQ_HTTP10 ? !(f & L7H_F_KEEP) || (f & L7H_F_CCLOSE) : (f & L7H_F_CCLOSE))
		f |= L7_REQ_CLOSE;
	if ((f & L7H_F_UPGHDR) && (f & L7H_F_CUPG))
		f |= L7_REQ_UPGRADE;
	r->flags = f & L7H_PUBLIC;
	r->method &= 0xffff;
	r->head_len = head_len;
	return (int)head_len;
}

/* One scan step: look at a window from the current position, act on the first stop byte. */
L7_LOOP_CB(l7_http_step)
{
	struct l7_http_ctx *c = l7_ctx;
	struct l7_req *r = c->req;
	__u32 len = c->len, pos = r->head_len, st = l7_http_state(r);
	__u32 avail, k, at, mark;
	__u64 m;
	__u8 b;
	int rc;

	if (pos >= len) {
		c->rc = l7_http_eod(len, st);
		return 1;
	}
	if (st <= L7H_S_QUERY && pos > L7_HTTP_MAX_LINE) {
		c->rc = -L7_E_URI_TOO_LONG;
		return 1;
	}
	if (st == L7H_S_RL0) {
		/* RFC 9112 2.2: ignore empty lines before the request line. */
		b = l7_http_at(r, pos);
		if (b == '\r') {
			if (pos + 1 >= len) {
				c->rc = l7_http_eod(len, st);
				return 1;
			}
			if (l7_http_at(r, pos + 1) != '\n')
				goto bad;
			r->head_len = pos + 2;
			return 0;
		}
		/* The request line starts here: scan the method in this same step. */
		r->method_s.off = (__u16)pos;
		l7_http_set_state(r, L7H_S_METHOD);
		st = L7H_S_METHOD;
	}

	m = L7_HTTP_WINDOW(r, pos, st, L7_HTTP_WIN);
	avail = len - pos;
	if (avail < L7_HTTP_WIN)
		m |= ~0ULL << avail;
	if (!m) {
		r->head_len = pos + L7_HTTP_WIN;
		return 0;
	}
	k = l7_ctz64(m) & 63;
	if (k >= avail) {
		c->rc = l7_http_eod(len, st);
		return 1;
	}
	at = pos + k;
	b = l7_http_at(r, at);
	mark = L7H_MARK(r);

	switch (st) {
	case L7H_S_METHOD:
		if (b != ' ' || at == r->method_s.off)
			goto bad;
		r->method_s.len = (__u16)(at - r->method_s.off);
		rc = l7_http_method(r, r->method_s.off, r->method_s.len);
		if (rc < 0) {
			c->rc = -L7_E_UNSUPPORTED;
			return 1;
		}
		r->method = (__u32)rc;
		r->target.off = (__u16)(at + 1);
		l7_http_set_state(r, L7H_S_TARGET);
		r->head_len = at + 1;
		return 0;
	case L7H_S_TARGET:
		if (b == '?') {
			r->query.off = (__u16)(at + 1);
			l7_http_set_state(r, L7H_S_QUERY);
			r->head_len = at + 1;
			return 0;
		}
		__attribute__((fallthrough));
	case L7H_S_QUERY:
		if (b != ' ' || at == r->target.off)
			goto bad;
		r->target.len = (__u16)(at - r->target.off);
		if (st == L7H_S_QUERY) {
			r->query.len = (__u16)(at - r->query.off);
		} else {
			r->query.off = (__u16)at;
			r->query.len = 0;
		}
		rc = l7_http_version(r, at + 1, len);
		if (rc <= 0) {
			c->rc = rc ? rc : l7_http_eod(len, st);
			return 1;
		}
		if (rc == 1)
			r->flags |= L7_REQ_HTTP10;
		rc = l7_http_target_form(r, at, st == L7H_S_QUERY);
		if (rc) {
			c->rc = rc;
			return 1;
		}
		L7H_SET_MARK(r, at + 11);
		l7_http_set_state(r, L7H_S_NAME);
		r->head_len = at + 11;
		return 0;
	case L7H_S_NAME:
		if (at == mark) {
			/* Empty line: end of head. Anything else here (SP/HT = obs-fold, ':' =
			 * empty name, CTL, non-token) is refused. */
			if (b != '\r')
				goto bad;
			if (at + 1 >= len) {
				c->rc = l7_http_eod(len, st);
				return 1;
			}
			if (l7_http_at(r, at + 1) != '\n')
				goto bad;
			c->rc = l7_http_finish(r, at + 2);
			return 1;
		}
		if (b != ':')
			goto bad;   /* whitespace before colon, CR/LF, NUL, non-token byte */
		if (++r->n_headers > L7_MAX_HEADERS) {
			c->rc = -L7_E_TOO_LARGE;
			return 1;
		}
		r->flags = (r->flags & ((1u << L7H_K_SHIFT) - 1)) |
			   l7_http_classify(r, mark, at - mark) << L7H_K_SHIFT;
		L7H_SET_MARK(r, at + 1);
		l7_http_set_state(r, L7H_S_VALUE);
		r->head_len = at + 1;
		return 0;
	case L7H_S_VALUE:
		/* Only CRLF ends a value: bare CR, bare LF, NUL and other CTLs are refused. */
		if (b != '\r')
			goto bad;
		if (at + 1 >= len) {
			c->rc = l7_http_eod(len, st);
			return 1;
		}
		if (l7_http_at(r, at + 1) != '\n')
			goto bad;
		rc = l7_http_field(r, mark, at);
		if (rc) {
			c->rc = rc;
			return 1;
		}
		L7H_SET_MARK(r, at + 2);
		l7_http_set_state(r, L7H_S_NAME);
		r->head_len = at + 2;
		return 0;
	}
bad:
	c->rc = -L7_E_BAD;
	return 1;
}

/* ---- path check: forms that would let a path evade a policy's prefix rules ----------
 * A backend normalises "/x/../admin", "//admin" and "/%61dmin" to "/admin"; a policy testing
 * starts_with(path, "/admin") must see the same path, so such paths are refused (400), the
 * way Envoy's normalize_path + reject options do: dot segments, empty segments, and
 * percent-encoded unreserved characters, '/' or '\'. Other percent-encodings pass. */

struct l7_path_ctx {
	const struct l7_req *req;
	__u32 off, len, pos;
	__u32 last3;        /* the last three bytes, newest in the low byte */
	__u32 pct, pct_val; /* inside %XX: digits seen, value */
	int bad;
};

#define L7_PATH_WIN 1   /* one byte per callback: the body is verified in every state the parse is reached in (mesh + JWT: 828K of 1M) */

static __always_inline int l7__hexval(__u32 c)
{
	if (c >= '0' && c <= '9')
		return (int)(c - '0');
	c |= 0x20;
	return c >= 'a' && c <= 'f' ? (int)(c - 'a' + 10) : -1;
}

/* The segment that ends here is "." or ".." (the bytes before are "/." or "/..") */
static __always_inline int l7__dot_seg(__u32 last3)
{
	return (last3 & 0xffff) == (('/' << 8) | '.') || (last3 & 0xffffff) == (('/' << 16) | ('.' << 8) | '.');
}

L7_LOOP_CB(l7_path_step)
{
	struct l7_path_ctx *x = l7_ctx;
	L7_UNROLL
	for (__u32 i = 0; i < L7_PATH_WIN; i++) {
		if (x->pos >= x->len)
			return 1;
		__u32 c = x->req->buf[l7_mask(x->off + x->pos, L7_DATA_MASK)];
		if (x->pct) {
			int h = l7__hexval(c);
			if (h < 0) {
				x->bad = 1;
				return 1;
			}
			x->pct_val = (x->pct_val << 4) | (__u32)h;
			if (++x->pct == 3) {
				__u32 v = x->pct_val & 0xff;
				if (L7__ALPHA(v) || L7__DIGIT(v) || v == '-' || v == '.' || v == '_' || v == '~' || v == '/' || v == '\\') {
					x->bad = 1;
					return 1;
				}
				x->pct = 0;
				c = 'x';   /* an encoded byte counts as an ordinary one in its segment */
			} else {
				x->pos++;
				continue;
			}
		} else if (c == '%') {
			x->pct = 1;
			x->pct_val = 0;
			x->pos++;
			continue;
		} else if (c == '/' && ((x->last3 & 0xff) == '/' || l7__dot_seg(x->last3))) {   /* "//", "/./", "/../" */
			x->bad = 1;
			return 1;
		}
		x->last3 = (x->last3 << 8) | c;
		x->pos++;
	}
	return 0;
}

static __always_inline int l7_http_path_ok(const struct l7_req *req)
{
	struct l7_path_ctx x = { .req = req, .off = req->path.off, .len = req->path.len };
	if (x.len == 0 || req->buf[l7_mask(x.off, L7_DATA_MASK)] != '/')
		return 1;   /* "*" and authority forms have no segments */
	x.last3 = '/';
	x.pos = 1;
	l7_loop(L7_MAX_HEAD / L7_PATH_WIN, l7_path_step, &x);
	if (x.pct)
		return 0;                                        /* a truncated %X */
	return !x.bad && !l7__dot_seg(x.last3);            /* "/." "/.." at the end */
}

static __always_inline int l7_http_parse_head(struct l7_req *req, __u32 len)
{
	struct l7_http_ctx c = { .req = req, .len = len > L7_MAX_HEAD ? L7_MAX_HEAD : len, .rc = 1 };

	req->head_len = 0;
	req->body_len = 0;
	req->method = 0;
	req->flags = 0;
	req->n_headers = 0;
	req->hdr_present = 0;
	req->n_wline = 0;
	l7_st64(req->wline_hdr, 0x1f1f1f1f1f1f1f1fULL);   /* 31: no wanted header (mutate.h) */
	l7_st64(req->wline_hdr + 8, 0x1f1f1f1f1f1f1f1fULL);
	req->method_s.off = req->method_s.len = 0;
	req->target = req->method_s;
	req->path = req->method_s;
	req->query = req->method_s;
	req->host = req->method_s;
	/* The spans of wanted headers too: the request buffer is reused (a per-CPU scratch map in
	 * the kernel), and a policy reads hdr[i] whether or not the header came ("" when absent). */
	for (int i = 0; i < L7_MAX_WANTED; i++)
		req->hdr[i] = req->method_s;
	l7_loop(L7_HTTP_MAX_STEPS, l7_http_step, &c);
	if (c.rc == 1)
		return -L7_E_TOO_LARGE;   /* ran out of steps: pathological head */
	if (c.rc > 0 && !l7_http_path_ok(req))
		return -L7_E_BAD;
	return c.rc;
}

static __always_inline __u32 l7_http_msg_end(const struct l7_req *req)
{
	return req->head_len + req->body_len;
}

/* ---- chunked body framing ----------------------------------------------------------- */

struct l7_chunked {
	__u64 remain;   /* chunk-data bytes still to skip */
	__u32 state;    /* L7C_* */
	__u32 n;        /* hex digits of the current size; in a trailer line, where its name starts */
	__u32 pos;      /* while a call runs: the next byte (here, not on the stack, for the verifier:
			 * a stack cursor starting at a constant was walked byte by byte, +35K
			 * processed instructions for the trailer framer) */
	__u32 pad;
};

enum {
	L7C_SIZE0 = 0,  /* first hex digit of a chunk-size */
	L7C_SIZE,       /* more digits, ';' or CR */
	L7C_EXT_NAME0,  /* first byte of an extension name */
	L7C_EXT_NAME,
	L7C_EXT_VAL0,   /* after '=' */
	L7C_EXT_TOK,    /* token value */
	L7C_EXT_Q,      /* quoted-string value */
	L7C_EXT_QESC,   /* after a backslash */
	L7C_EXT_QEND,   /* after the closing quote: ';' or CR */
	L7C_SIZE_LF,    /* LF after the size line */
	L7C_DATA,       /* skipping chunk-data */
	L7C_DATA_CR,
	L7C_DATA_LF,
	L7C_TR0,        /* start of a trailer line or the final empty line */
	L7C_TR_NAME,
	L7C_TR_VAL,
	L7C_TR_LF,      /* LF ending a trailer line */
	L7C_END_LF,     /* LF of the final empty line */
};

#ifndef L7_CHUNK_STEPS
#define L7_CHUNK_STEPS 4096
#endif

struct l7_chunk_ctx {
	struct l7_chunked *st;
	const __u8 *buf;
	__u32 len;
	int rc;        /* 1 while running */
};

static __always_inline int l7_hexval(__u8 c)
{
	if (L7__DIGIT(c))
		return c - '0';
	c |= 0x20;
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* One byte of chunk grammar (or one run of chunk-data) per call. */
L7_LOOP_CB(l7_chunk_step)
{
	struct l7_chunk_ctx *c = l7_ctx;
	struct l7_chunked *st = c->st;
	__u32 pos = st->pos, s = st->state;
	__u8 b;
	int h;

	if (pos >= c->len) {
		c->rc = 0;
		return 1;
	}
	if (s == L7C_DATA) {
		__u64 run = c->len - pos;
		if (run > st->remain)
			run = st->remain;
		st->remain -= run;
		st->pos = pos + (__u32)run;
		if (!st->remain)
			st->state = L7C_DATA_CR;
		return 0;
	}
	b = c->buf[l7_mask(pos, L7_DATA_MASK)];
	st->pos = pos + 1;
	switch (s) {
	case L7C_SIZE0:
	case L7C_SIZE:
		h = l7_hexval(b);
		if (h >= 0) {
			if (++st->n > 15)
				goto bad;   /* > 2^60: nobody sends that, and it would overflow */
			st->remain = st->remain << 4 | (__u32)h;
			st->state = L7C_SIZE;
			return 0;
		}
		if (s == L7C_SIZE0)
			goto bad;   /* no digits (leading space, empty line, "-0x0") */
		if (b == ';') {
			st->state = L7C_EXT_NAME0;
			return 0;
		}
		if (b == '\r') {
			st->state = L7C_SIZE_LF;
			return 0;
		}
		goto bad;    /* BWS, junk after the size ("0_2e", "5 ") */
	case L7C_EXT_NAME0:
	case L7C_EXT_NAME:
		if (L7__TCHAR(b)) {
			st->state = L7C_EXT_NAME;
			return 0;
		}
		if (s == L7C_EXT_NAME0)
			goto bad;
		if (b == '=') {
			st->state = L7C_EXT_VAL0;
			return 0;
		}
		goto ext_end;
	case L7C_EXT_VAL0:
		if (b == '"') {
			st->state = L7C_EXT_Q;
			return 0;
		}
		if (!L7__TCHAR(b))
			goto bad;
		st->state = L7C_EXT_TOK;
		return 0;
	case L7C_EXT_TOK:
		if (L7__TCHAR(b))
			return 0;
		goto ext_end;
	case L7C_EXT_Q:
		if (b == '"')
			st->state = L7C_EXT_QEND;
		else if (b == '\\')
			st->state = L7C_EXT_QESC;
		else if (L7__CTL(b) && b != '\t')
			goto bad;
		return 0;
	case L7C_EXT_QESC:
		if (L7__CTL(b) && b != '\t')
			goto bad;
		st->state = L7C_EXT_Q;
		return 0;
	case L7C_EXT_QEND:
		goto ext_end;
	case L7C_SIZE_LF:
		if (b != '\n')
			goto bad;
		if (st->remain) {
			st->state = L7C_DATA;
		} else {
			st->state = L7C_TR0;   /* last-chunk: trailer section follows */
		}
		st->n = 0;
		return 0;
	case L7C_DATA_CR:
		if (b != '\r')
			goto bad;
		st->state = L7C_DATA_LF;
		return 0;
	case L7C_DATA_LF:
		if (b != '\n')
			goto bad;
		st->state = L7C_SIZE0;
		st->remain = 0;
		return 0;
	case L7C_TR0:
		if (b == '\r') {
			st->state = L7C_END_LF;
			return 0;
		}
		if (!L7__TCHAR(b))
			goto bad;   /* obs-fold, empty name, CTL */
		st->state = L7C_TR_NAME;
		st->n = pos;   /* where the name starts */
		return 0;
	case L7C_TR_NAME:
		if (b == ':') {
			/* RFC 9110 6.5.1: a field that frames the message, routes it or controls the
			 * connection means nothing after the body, and a recipient that merged it
			 * would act on what the data plane never judged: refused. */
			__u32 n = pos - st->n;
			__u64 w0, w1, w2, w3;
			const __u8 *p = c->buf + l7_mask(st->n, L7_DATA_MASK);
			L7_NAME_WORDS(p, n, w0, w1, w2, w3);
			(void)w3;
			if (n <= L7_MAX_NAME && l7_http_kind(n, w0, w1, w2) != L7H_K_NONE)
				goto bad;
			st->state = L7C_TR_VAL;
		} else if (!L7__TCHAR(b)) {
			goto bad;
		}
		return 0;
	case L7C_TR_VAL:
		if (b == '\r')
			st->state = L7C_TR_LF;
		else if (L7__CTL(b) && b != '\t')
			goto bad;
		return 0;
	case L7C_TR_LF:
		if (b != '\n')
			goto bad;
		st->state = L7C_TR0;
		return 0;
	case L7C_END_LF:
		if (b != '\n')
			goto bad;
		c->rc = (int)(pos + 1);
		return 1;
	}
	goto bad;
ext_end:
	if (b == ';') {
		st->state = L7C_EXT_NAME0;
		return 0;
	}
	if (b == '\r') {
		st->state = L7C_SIZE_LF;
		return 0;
	}
bad:
	c->rc = -L7_E_BAD;
	return 1;
}

static __always_inline int l7_http_chunked(struct l7_chunked *st, const __u8 *buf, __u32 off,
					   __u32 len)
{
	struct l7_chunk_ctx c = { .st = st, .buf = buf, .len = len, .rc = 1 };

	st->pos = off;

	if (len > L7_DATA_MASK + 1)
		c.len = L7_DATA_MASK + 1;
	l7_loop(L7_CHUNK_STEPS, l7_chunk_step, &c);
	if (c.rc == 1)
		return -L7_E_UNSUPPORTED;   /* too many tiny chunks for one call */
	if (c.rc == 0 && len > L7_DATA_MASK + 1)
		return -L7_E_UNSUPPORTED;
	return c.rc;
}

/* The trailer section at buf[off, len) (what follows the last chunk's size line, RFC 9112
 * 7.1.2): field lines, checked as l7_http_chunked checks them, up to an empty line. Returns
 * its length with that line's CRLF (> 0), 0 when it does not end yet, or -L7_E_*: malformed,
 * a field that must not be a trailer, or longer than one call frames (L7_CHUNK_STEPS bytes).
 * Not resumable: every call scans from off (buf must hold L7_MAX_NAME readable bytes past
 * len); *st is the framer's state while it runs (in BPF map memory, not the stack: constant
 * state on the stack makes the verifier enumerate it). The data planes frame a trailer
 * section as one piece with it. */
static __always_inline int l7_http_trailers(struct l7_chunked *st, const __u8 *buf, __u32 off, __u32 len)
{
	st->remain = 0;
	st->state = L7C_TR0;
	st->n = 0;
	int rc = l7_http_chunked(st, buf, off, len);

	return rc > 0 ? rc - (int)off : rc;
}

#endif /* L7_BPF_HTTP_H */
