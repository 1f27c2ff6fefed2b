/* hpack.h: HPACK header block decoding (RFC 7541) with the field checks an HTTP/2 intermediary
 * owes (RFC 9113 8.1-8.3), for BPF and natively.
 *
 * API
 *   int l7_hpack_decode(struct l7_hpack *d, struct l7_req *req)
 *       Decodes the block d->blk[0..d->len) as d->mode (enum l7_hpack_mode) says, for an
 *       encoder whose state is d->conn (the connection's L7_H2_C_HP_* bits; updated: a table
 *       size update at the block's start changes them). The values a policy reads go into
 *       req->buf, the spans as for HTTP/1.1 (http.h): method/method_s, target, path, query,
 *       host (:authority, or the host field), hdr[i] of the names l7_wanted_name[] (the same
 *       table codegen emits for http.h), hdr_present, n_headers, body_len (content-length),
 *       flags (L7_REQ_UPGRADE for CONNECT). What HTTP/1.1 has no place for is in d->msg:
 *       :scheme, :status, grpc-status, which pseudo-headers came, and for every wanted header
 *       its representation (never-indexed ones must stay so, RFC 7541 7.1.3) and where it lies
 *       in the block. Returns
 *          0                      decoded, valid
 *          L7_H2_CONN_ERR(COMPRESSION_ERROR)  a decoding error (RFC 9113 4.3: the connection)
 *          L7_H2_MALFORMED        a malformed message (8.1.1): RST_STREAM PROTOCOL_ERROR
 *          L7_H2_SLOW(reason)     the kernel cannot decide the block (enum l7_h2_slow)
 *       d->msg.at is the block offset of the representation the result is about.
 *
 * What the kernel decodes: the static table, the dynamic table (d->tab, RFC 7541 2.3.2, 4:
 * literals with incremental indexing insert, size updates and inserts evict, indexed fields and
 * indexed names read it), literals, integers of up to L7_HPACK_INT_BYTES continuation bytes,
 * raw and Huffman strings. A reference past the table is a COMPRESSION_ERROR. l7run advertises
 * SETTINGS_HEADER_TABLE_SIZE 0; after the ACK (and the size update to 0 it makes due), or
 * after a size update to 0, the table is empty, and stays so. A caller that keeps no table
 * (or a decode that stopped before the block's end, and so missed its inserts) has
 * L7_H2_C_HP_UNKNOWN: a dynamic reference is then L7_H2_SLOW(DYNAMIC).
 *
 * The table: entries in d->tab.e (newest at head - 1), their names and values in a ring of
 * L7_HPACK_TABLE_RING bytes in insertion order. A string from the table is read as a raw
 * string is read from the block (the same steps, the same checks: a value a malformed block
 * inserted is malformed again where it is referenced). An inserted field's decoded bytes are
 * written after the newest entry as each chunk is decoded, before the evictions its insert
 * makes: they overwrite only entries that insert evicts (what stays and the new entry are at
 * most max - 32 bytes together, the ring is max bytes or more), and writes of a name copied
 * from an entry trail its reads. Bytes past max - 32 are not written: such an entry empties
 * the table (4.4). Native callers may define L7_HPACK_HOOK_FIELD(d, req) (before including
 * this file) to see each field complete, st describing where its parts are
 * (runtime/h2_reenc.c re-encodes blocks with it).
 *
 * Checks (message modes): field names are lowercase tokens (uppercase, ':' inside, CTL, SP
 * are malformed), values hold no NUL/CR/LF and do not start or end with SP/HTAB; no
 * connection-specific field (connection, keep-alive, proxy-connection, transfer-encoding,
 * upgrade), te only "trailers" and only in requests; pseudo-headers known, allowed for the
 * message kind, once each, before every regular field; a request has :method, and :scheme
 * and a non-empty :path (starting with '/', or "*" for OPTIONS) unless it is a CONNECT (then
 * :authority and neither of those); :path and :authority bytes as http.h allows them in a
 * target and authority; :authority and host, when both come, name the same host; one
 * content-length, all digits; a response has a 3-digit :status.
 *
 * How: one l7_loop step per field representation, or per L7_HPACK_CHUNK input bytes of a
 * string (raw copy or Huffman, with the byte classes of the checks folded in), the state in
 * struct l7_hpack (map memory): the verifier walks one step. Strings the policy does not keep
 * are decoded (a name must be known to be checked, a value to be validated) into a window that
 * is rewound after each chunk, so a long unread value costs steps, not buffer space. */
#ifndef L7_BPF_HPACK_H
#define L7_BPF_HPACK_H

#include "compat.h"
#include <l7/abi.h>
#include <l7/h2.h>
#include "http.h"      /* l7_http_method, the wanted-name table, byte class macros */
#include "huffman.h"

/* The decoder's big parts are global functions in BPF (l7g_*: codegen keeps them global): the
 * kernel verifies each once, on its own, with its arguments unknown. Inlined, the constants one
 * part leaves in registers (which name it classified, which check failed) split every path
 * through the parts after it, and the loop callback was walked again for each: 390K processed
 * instructions. Natively they are ordinary static functions. */
#ifdef __bpf__
#define L7_GLOBAL_FN __attribute__((noinline))
#else
#define L7_GLOBAL_FN static inline
#endif

#ifndef L7_HPACK_HOOK_FIELD
#define L7_HPACK_HOOK_FIELD(d, req) ((void)0)
#elif defined(__bpf__)
#error "L7_HPACK_HOOK_FIELD is for native builds"
#endif
#define L7_HT_RING_MASK (L7_HPACK_TABLE_RING - 1)
#define L7_HT_ENT_MASK (L7_HPACK_TABLE_ENTRIES - 1)

/* ---- the static table, padded for whole-word copies ---------------------------------- */
#define L7__HS_NAME(i, n, v)  [i] = n,
#define L7__HS_VAL(i, n, v)   [i] = v,
#define L7__HS_NLEN(i, n, v)  [i] = sizeof(n) - 1,
#define L7__HS_VLEN(i, n, v)  [i] = sizeof(v) - 1,
static const char l7_hpack_sname[64][L7_MAX_NAME] = { L7_HPACK_STATIC_TABLE(L7__HS_NAME) };
static const char l7_hpack_sval[64][16] = { L7_HPACK_STATIC_TABLE(L7__HS_VAL) };
static const __u8 l7_hpack_snlen[64] = { L7_HPACK_STATIC_TABLE(L7__HS_NLEN) };
static const __u8 l7_hpack_svlen[64] = { L7_HPACK_STATIC_TABLE(L7__HS_VLEN) };

/* ---- byte classes of the checks ------------------------------------------------------ */
#define L7_HC_NAMEBAD 0x01   /* not in a field name: not a lowercase token char */
#define L7_HC_VALBAD  0x02   /* not in any value: NUL, CR, LF */
#define L7_HC_TGTBAD  0x04   /* not in :path (http.h L7__TGTBAD) */
#define L7_HC_AUTHBAD 0x08   /* not in :authority / host (http.h L7__E_AUTH, '@' among them) */
#define L7_HC_Q       0x10   /* '?': where a path's query starts */
#define L7_HC_TOKBAD  0x20   /* not a token char (:method, :scheme) */
#define L7_HC_WS      0x40   /* SP, HTAB: a value must not start or end with one */
#define L7_HC_NONDIG  0x80   /* not a digit */
#define L7__HC(c) (                                                                           \
	((!L7__TCHAR(c) || ((c) >= 'A' && (c) <= 'Z')) ? L7_HC_NAMEBAD : 0) |                  \
	(((c) == 0 || (c) == '\r' || (c) == '\n') ? L7_HC_VALBAD : 0) |                        \
	(L7__TGTBAD(c) ? L7_HC_TGTBAD : 0) | (L7__E_AUTH(c) ? L7_HC_AUTHBAD : 0) |             \
	((c) == '?' ? L7_HC_Q : 0) | (!L7__TCHAR(c) ? L7_HC_TOKBAD : 0) |                     \
	(L7__WS(c) ? L7_HC_WS : 0) | (!L7__DIGIT(c) ? L7_HC_NONDIG : 0))
static const __u8 l7_hpack_cls[256] = L7__ROW(L7__HC);

/* ---- what a field name is --------------------------------------------------------------- */
enum {
	L7_HK_NONE = 0,
	L7_HK_PSEUDO = 1,      /* 1 + enum l7_h2_pseudo: 1 .. 6 */
	L7_HK_BADPSEUDO = 7,   /* a name that starts with ':' and is no pseudo-header we know */
	L7_HK_CONN = 8,        /* connection-specific (RFC 9113 8.2.2) */
	L7_HK_TE = 9,
	L7_HK_HOST = 10,
	L7_HK_CL = 11,
	L7_HK_CTYPE = 12,
	L7_HK_GSTATUS = 13,
};
#define L7_HK_IS_PSEUDO(k) ((k) >= L7_HK_PSEUDO && (k) < L7_HK_PSEUDO + L7_H2_P_N)

/* Steps (st.step) */
enum { L7_HS_REP = 0, L7_HS_NAME = 1, L7_HS_VALUE = 2 };

struct l7_hpack_ctx {
	struct l7_hpack *d;
	struct l7_req *req;
};

/* Record a result; the first one stays. A connection error or a slow path ends the block. */
static __always_inline int l7_hpack_fail(struct l7_hpack *d, int rc)
{
	struct l7_hpack_st *st = &d->st;

	if (!st->rc || (rc != L7_H2_MALFORMED && st->rc == L7_H2_MALFORMED)) {
		st->rc = rc;
		d->msg.at = st->rep_off;
	}
	return rc == L7_H2_MALFORMED ? 0 : 1;   /* 1: stop the loop */
}
#define L7_HPACK_COMPRESSION L7_H2_CONN_ERR(L7_H2_COMPRESSION_ERROR)

/* Prefix integer (RFC 7541 5.1) at p with an N-bit prefix (mask = 2^N - 1), of at most
 * `avail` bytes. Returns the bytes it takes, or 0: truncated or longer than the limit. */
static __always_inline __u32 l7_hpack_int(const __u8 *p, __u32 mask, __u32 avail, __u32 *v)
{
	__u32 x = p[0] & mask, k;

	if (x < mask) {
		*v = x;
		return 1;
	}
	L7_UNROLL
	for (k = 1; k <= L7_HPACK_INT_BYTES; k++) {
		__u32 c = p[k];

		x += (c & 0x7f) << (7 * (k - 1));
		if (!(c & 0x80)) {
			if (k + 1 > avail)
				return 0;
			*v = x;
			return k + 1;
		}
	}
	return 0;
}

/* Copy n bytes (n <= N, a constant) between two map values in BPF (the kernel's probe read:
 * the verifier checks dst for N bytes), natively memcpy. */
static __always_inline void l7_hpack_copy(__u8 *dst, const __u8 *src, __u32 n, const __u32 N)
{
	l7_barrier_var(n);
	if (n > N)
		return;
#ifdef __bpf__
	bpf_probe_read_kernel(dst, n, src);
#else
	memcpy(dst, src, n);
#endif
}

/* The state an encoder acknowledging our SETTINGS_HEADER_TABLE_SIZE 0 leaves (RFC 9113
 * 6.5.3): it encodes within 0 from now on, and a table it had not shrunk already must be
 * shrunk by its next block (RFC 7541 4.2). The frame parser (h2.h) and l7run's copy of the
 * client's table (runtime/mesh_h2.c) apply it at the same frame. */
static __always_inline __u32 l7_hpack_acked(__u32 conn)
{
	if (conn & L7_H2_C_HP_PENDING) {
		conn &= ~L7_H2_C_HP_PENDING;
		conn |= L7_H2_C_HP_ACKED;
		if (!(conn & L7_H2_C_HP_ZERO))
			conn |= L7_H2_C_HP_UPDATE;
	}
	return conn;
}

/* Evict the oldest entries until the table's size is `room` or less (4.3, 4.4). */
L7_GLOBAL_FN int l7g_hpack_evict(struct l7_hpack *d, __u32 room)
{
	struct l7_hpack_table *t;
	__u32 i;

	if (!d)
		return 0;
	t = &d->tab;
	for (i = 0; i < L7_HPACK_TABLE_ENTRIES; i++) {
		const struct l7_hpack_entry *e;

		if (t->size <= room || !t->count)
			break;
		e = &t->e[(t->head - t->count) & L7_HT_ENT_MASK];
		t->size -= e->nlen + e->vlen + L7_HPACK_ENTRY_OVERHEAD;
		t->count--;
		d->msg.flags |= L7_H2_M_TABLE;
	}
	if (!t->count)
		t->size = 0;
	return 0;
}

/* The chunk the decoder just wrote, req->buf[off, off + n) (n <= 2 * L7_HPACK_CHUNK), is the
 * next part of the entry being inserted: into the ring after what came before (wrapping),
 * unless the entry has outgrown the table (then it is never inserted, 4.4). */
L7_GLOBAL_FN int l7g_hpack_ring_put(struct l7_hpack *d, const struct l7_req *req, __u32 off, __u32 n)
{
	struct l7_hpack_st *st;
	const __u8 *src;
	__u32 w, n1, lim;

	if (!d || !req || n > 2 * L7_HPACK_CHUNK)
		return 0;
	st = &d->st;
	lim = d->tab.max > L7_HPACK_ENTRY_OVERHEAD ? d->tab.max - L7_HPACK_ENTRY_OVERHEAD : 0;
	if (st->ins_n + n <= lim && st->ins_n < L7_HPACK_TABLE_RING) {
		src = req->buf + l7_mask(off, L7_MAX_HEAD - 1);
		w = (st->ins_start + st->ins_n) & L7_HT_RING_MASK;
		n1 = L7_HPACK_TABLE_RING - w;
		if (n1 > n)
			n1 = n;
		l7_hpack_copy(d->tab.ring + l7_mask(w, L7_HT_RING_MASK), src, n1, 2 * L7_HPACK_CHUNK);
		l7_hpack_copy(d->tab.ring, src + (n1 & (4 * L7_HPACK_CHUNK - 1)), n - n1,
			      2 * L7_HPACK_CHUNK);
	}
	st->ins_n += n;
	return 0;
}

/* The field whose name (st->ins_nlen bytes) and value (vlen bytes) were written from
 * st->ins_start is complete: make it the newest entry (4.4). */
L7_GLOBAL_FN int l7g_hpack_insert(struct l7_hpack *d, __u32 vlen)
{
	struct l7_hpack_table *t;
	struct l7_hpack_entry *e;
	__u32 nlen, size;

	if (!d)
		return 0;
	t = &d->tab;
	nlen = d->st.ins_nlen;
	size = nlen + vlen + L7_HPACK_ENTRY_OVERHEAD;
	d->msg.flags |= L7_H2_M_TABLE;
	if (nlen > L7_HPACK_TABLE_RING || vlen > L7_HPACK_TABLE_RING || size > t->max) {
		t->count = 0;   /* larger than the table: it empties it */
		t->size = 0;
		return 0;
	}
	l7g_hpack_evict(d, t->max - size);
	e = &t->e[t->head & L7_HT_ENT_MASK];
	e->off = (__u16)(d->st.ins_start & L7_HT_RING_MASK);
	e->nlen = (__u16)nlen;
	e->vlen = (__u16)vlen;
	t->head++;
	t->count++;
	t->size += size;
	t->wpos = (d->st.ins_start + nlen + vlen) & L7_HT_RING_MASK;
	return 0;
}

/* The name req->buf[off, off + n) (n <= L7_MAX_NAME): L7_HK_* | (wanted index + 1) << 8 */
L7_GLOBAL_FN __u32 l7g_hpack_classify(const struct l7_req *req, __u32 off, __u32 n)
{
	const __u8 *p;
	__u64 w0, w1, w2, w3;
	__u32 kind = L7_HK_NONE, want = 0, i;

	if (!req || n > L7_MAX_NAME)
		return 0;
	p = req->buf + l7_mask(off, L7_MAX_HEAD - 1);
	w0 = l7_ld64(p) & l7_bytemask(n);
	w1 = n > 8 ? l7_ld64(p + 8) & l7_bytemask(n - 8) : 0;
	w2 = n > 16 ? l7_ld64(p + 16) & l7_bytemask(n - 16) : 0;
	w3 = n > 24 ? l7_ld64(p + 24) & l7_bytemask(n - 24) : 0;

	if (n == 7 && w0 == L7_W8(':', 'm', 'e', 't', 'h', 'o', 'd', 0))
		kind = L7_HK_PSEUDO + L7_H2_P_METHOD;
	else if (n == 7 && w0 == L7_W8(':', 's', 'c', 'h', 'e', 'm', 'e', 0))
		kind = L7_HK_PSEUDO + L7_H2_P_SCHEME;
	else if (n == 10 && w0 == L7_W8(':', 'a', 'u', 't', 'h', 'o', 'r', 'i') &&
		 w1 == L7_W8('t', 'y', 0, 0, 0, 0, 0, 0))
		kind = L7_HK_PSEUDO + L7_H2_P_AUTHORITY;
	else if (n == 5 && w0 == L7_W8(':', 'p', 'a', 't', 'h', 0, 0, 0))
		kind = L7_HK_PSEUDO + L7_H2_P_PATH;
	else if (n == 7 && w0 == L7_W8(':', 's', 't', 'a', 't', 'u', 's', 0))
		kind = L7_HK_PSEUDO + L7_H2_P_STATUS;
	else if (n == 9 && w0 == L7_W8(':', 'p', 'r', 'o', 't', 'o', 'c', 'o') && w1 == 'l')
		kind = L7_HK_PSEUDO + L7_H2_P_PROTOCOL;
	else if (n == 10 && w0 == L7_W8('c', 'o', 'n', 'n', 'e', 'c', 't', 'i') &&
		 w1 == L7_W8('o', 'n', 0, 0, 0, 0, 0, 0))
		kind = L7_HK_CONN;
	else if (n == 10 && w0 == L7_W8('k', 'e', 'e', 'p', '-', 'a', 'l', 'i') &&
		 w1 == L7_W8('v', 'e', 0, 0, 0, 0, 0, 0))
		kind = L7_HK_CONN;
	else if (n == 16 && w0 == L7_W8('p', 'r', 'o', 'x', 'y', '-', 'c', 'o') &&
		 w1 == L7_W8('n', 'n', 'e', 'c', 't', 'i', 'o', 'n'))
		kind = L7_HK_CONN;
	else if (n == 17 && w0 == L7_W8('t', 'r', 'a', 'n', 's', 'f', 'e', 'r') &&
		 w1 == L7_W8('-', 'e', 'n', 'c', 'o', 'd', 'i', 'n') && w2 == 'g')
		kind = L7_HK_CONN;
	else if (n == 7 && w0 == L7_W8('u', 'p', 'g', 'r', 'a', 'd', 'e', 0))
		kind = L7_HK_CONN;
	else if (n == 2 && w0 == L7_W8('t', 'e', 0, 0, 0, 0, 0, 0))
		kind = L7_HK_TE;
	else if (n == 4 && w0 == L7_W8('h', 'o', 's', 't', 0, 0, 0, 0))
		kind = L7_HK_HOST;
	else if (n == 14 && w0 == L7_W8('c', 'o', 'n', 't', 'e', 'n', 't', '-') &&
		 w1 == L7_W8('l', 'e', 'n', 'g', 't', 'h', 0, 0))
		kind = L7_HK_CL;
	else if (n == 12 && w0 == L7_W8('c', 'o', 'n', 't', 'e', 'n', 't', '-') &&
		 w1 == L7_W8('t', 'y', 'p', 'e', 0, 0, 0, 0))
		kind = L7_HK_CTYPE;
	else if (n == 11 && w0 == L7_W8('g', 'r', 'p', 'c', '-', 's', 't', 'a') &&
		 w1 == L7_W8('t', 'u', 's', 0, 0, 0, 0, 0))
		kind = L7_HK_GSTATUS;
	else if (n && (w0 & 0xff) == ':')
		kind = L7_HK_BADPSEUDO;

	L7_UNROLL
	for (i = 0; i < L7_MAX_WANTED; i++) {
		const __u8 *q = (const __u8 *)l7_wanted_name[i];

		if (i >= l7_n_wanted)
			break;
		if (l7_wanted_len[i] == n && w0 == (l7_ld64(q) & l7_bytemask(n)) &&
		    w1 == (n > 8 ? l7_ld64(q + 8) & l7_bytemask(n - 8) : 0) &&
		    w2 == (n > 16 ? l7_ld64(q + 16) & l7_bytemask(n - 16) : 0) &&
		    w3 == (n > 24 ? l7_ld64(q + 24) & l7_bytemask(n - 24) : 0)) {
			want = i + 1;
			break;
		}
	}
	return kind | want << 8;
}

/* A raw string's chunk: in[0..n) to out[0..n) (and up to N bytes more; N: a constant). */
static __always_inline __u32 l7_hpack_raw_chunk(struct l7_huff *h, const __u8 *in, __u32 n,
						__u8 *out, const __u32 N)
{
	L7_UNROLL
	for (__u32 j = 0; j < N; j += 8)
		l7_st64(out + j, l7_ld64(in + j));
	h->n += n;
	return n;
}

/* What a chunk wrote, out[0..o) (o <= M, a constant power of two), for the checks: the OR of its byte
 * classes, its first '?' (base: the string's bytes before the chunk), its last byte.
 * Straight-line: bytes past o are masked off, the masks hidden from the optimiser (it turns
 * `k & -(j < o)` back into a branch, and 32 branches per chunk split the verifier's paths). */
static __always_inline void l7_hpack_account(struct l7_huff *h, const __u8 *out, __u32 o,
					     __u32 base, const __u32 M)
{
	__u32 cl = 0;
	__u64 qb = 0;   /* bit j + 4: out[j] is a '?' */

	L7_UNROLL
	for (__u32 j = 0; j < M; j++) {
		__u32 m = (__u32)0 - L7__HUFF_LT(j, o), k;

		l7_barrier_var(m);
		k = l7_hpack_cls[out[j]] & m;
		cl |= k;
		qb |= (__u64)(k & L7_HC_Q) << j;
		l7_barrier_var(cl);   /* one byte at a time (register pressure, as huffman.h) */
		l7_barrier_var(qb);
	}
	h->cls |= cl;
	if (qb && h->q == ~0u)
		h->q = base + l7_ctz64(qb) - 4;
	if (o)
		h->last = out[(o - 1) & (M - 1)];
}

/* Start the string whose header is at st->pos (H bit, 7-bit prefix length). Names are kept
 * (for classify) when short enough to be one the decoder knows; values when `keep`. */
static __always_inline int l7_hpack_str_begin(struct l7_hpack *d, __u32 step, __u32 keep)
{
	struct l7_hpack_st *st = &d->st;
	const __u8 *p = d->blk + l7_mask(st->pos, L7_H2_BLOCK_MAX - 1);
	__u32 len, k;

	if (st->pos >= d->len)
		return -1;
	k = l7_hpack_int(p, 0x7f, d->len - st->pos, &len);
	if (!k || len > d->len - st->pos - k)
		return -1;   /* truncated: the string runs past the block */
	st->huff = p[0] >> 7;
	d->msg.n_huff += st->huff;
	st->src = 0;
	st->pos += k;
	st->send = st->pos + len;
	st->step = step;
	st->keep = step == L7_HS_NAME ? len <= L7_MAX_NAME : keep;
	st->sstart = st->o;
	st->first = 0x100;
	l7_huff_init(&st->h);
	return 0;
}

/* Start a string of the dynamic table: ring[off, off + len) (wrapping), decoded bytes. */
static __always_inline void l7_hpack_tstr_begin(struct l7_hpack *d, __u32 step, __u32 off, __u32 len,
						__u32 keep)
{
	struct l7_hpack_st *st = &d->st;

	st->src = 1;
	st->huff = 0;
	st->tpos = off;
	st->tsend = off + len;
	st->step = step;
	st->keep = step == L7_HS_NAME ? len <= L7_MAX_NAME : keep;
	st->sstart = st->o;
	st->first = 0x100;
	l7_huff_init(&st->h);
}

/* Parse digits [p, p + n) (n <= 10, all checked): the value, or -1 (not all digits / empty),
 * or -2 (more than 32 bits). */
static __always_inline __s64 l7_hpack_digits(const __u8 *p, __u32 n)
{
	__u64 v = 0;
	__u32 i;

	if (n == 0)
		return -1;
	if (n > 10)
		return -2;
	L7_UNROLL
	for (i = 0; i < 10; i++) {
		__u32 c = p[i];

		if (i >= n)
			break;
		if (c < '0' || c > '9')
			return -1;
		v = v * 10 + (c - '0');
	}
	return v > 0xffffffffULL ? -2 : (__s64)v;
}

/* A field is complete (st: its name's kind and want, its value's string): its value has
 * st->h.n bytes, in req->buf from st->sstart when it was kept (pseudo-headers, wanted headers,
 * the L7_HK_* kinds); the string's classes, first and last byte describe it either way.
 * Checks and records it. Returns 1 to stop the loop. */
L7_GLOBAL_FN int l7g_hpack_field(struct l7_hpack *d, struct l7_req *req)
{
	struct l7_hpack_st *st;
	struct l7_h2_msg *m;
	__u32 kind, want, mode, adv = 0, vs, vl, cls, first, last, q;
	const __u8 *v;

	if (!d || !req)
		return 1;
	st = &d->st;
	m = &d->msg;
	kind = st->kind;
	want = st->want;
	mode = d->mode;
	vs = l7_mask(st->sstart, L7_MAX_HEAD - 1);
	vl = st->h.n;
	cls = st->h.cls;
	first = st->first;
	last = st->h.last;
	q = st->h.q;
	v = req->buf + vs;

	st->step = L7_HS_REP;
	st->o = st->sstart;
	if (++m->fields > L7_MAX_HEADERS)
		return l7_hpack_fail(d, L7_H2_SLOW(L7_H2_SLOW_FIELDS));
	req->n_headers = m->fields;
	if (st->rep == L7_HPACK_R_NEVER)
		m->n_never++;

	if (mode != L7_HPACK_FIELDS) {
		int bad = 0;

		if (cls & L7_HC_VALBAD)
			bad = 1;
		if (vl && ((l7_hpack_cls[first & 0xff] | l7_hpack_cls[last & 0xff]) & L7_HC_WS))
			bad = 1;
		if (L7_HK_IS_PSEUDO(kind)) {
			__u32 p = kind - L7_HK_PSEUDO, allowed;

			allowed = mode == L7_HPACK_REQUEST ?
					  (1u << L7_H2_P_METHOD | 1u << L7_H2_P_SCHEME |
					   1u << L7_H2_P_AUTHORITY | 1u << L7_H2_P_PATH) :
				  mode == L7_HPACK_RESPONSE ? 1u << L7_H2_P_STATUS : 0;
			if ((m->flags & L7_H2_M_REGULAR) || (m->pseudo & (1u << p)) ||
			    !(allowed & (1u << p)))
				bad = 1;
			if (p == L7_H2_P_PATH && (cls & L7_HC_TGTBAD))
				bad = 1;
			if (p == L7_H2_P_AUTHORITY && (cls & L7_HC_AUTHBAD))
				bad = 1;
			if ((p == L7_H2_P_METHOD || p == L7_H2_P_SCHEME) &&
			    (!vl || (cls & L7_HC_TOKBAD)))
				bad = 1;
			if (p == L7_H2_P_STATUS && (vl != 3 || (cls & L7_HC_NONDIG)))
				bad = 1;
		} else {
			m->flags |= L7_H2_M_REGULAR;
			if (kind == L7_HK_BADPSEUDO || kind == L7_HK_CONN)
				bad = 1;
			if (kind == L7_HK_TE &&
			    (mode != L7_HPACK_REQUEST || vl != 8 ||
			     l7_ld64(v) != L7_W8('t', 'r', 'a', 'i', 'l', 'e', 'r', 's')))
				bad = 1;
			if (kind == L7_HK_HOST && (cls & L7_HC_AUTHBAD))
				bad = 1;
		}
		if (bad && l7_hpack_fail(d, L7_H2_MALFORMED))
			return 1;
	}

	if (L7_HK_IS_PSEUDO(kind)) {
		__u32 p = kind - L7_HK_PSEUDO;

		m->pseudo |= 1u << p;
		m->preps |= st->rep << (2 * p);
		adv = 1;
		switch (p) {
		case L7_H2_P_METHOD:
			req->method_s.off = (__u16)vs;
			req->method_s.len = (__u16)vl;
			break;
		case L7_H2_P_SCHEME:
			m->scheme.off = (__u16)vs;
			m->scheme.len = (__u16)vl;
			break;
		case L7_H2_P_AUTHORITY:
			if (vl > L7_H2_MAX_AUTH)
				return l7_hpack_fail(d, L7_H2_SLOW(L7_H2_SLOW_VALUE_SIZE));
			req->host.off = (__u16)vs;
			req->host.len = (__u16)vl;
			break;
		case L7_H2_P_PATH:
			req->target.off = req->path.off = (__u16)vs;
			req->target.len = req->path.len = (__u16)vl;
			req->query.off = (__u16)(vs + vl);
			req->query.len = 0;
			if (q < vl) {
				req->path.len = (__u16)q;
				req->query.off = (__u16)(vs + q + 1);
				req->query.len = (__u16)(vl - q - 1);
			}
			break;
		case L7_H2_P_STATUS:
			m->status_s.off = (__u16)vs;
			m->status_s.len = (__u16)vl;
			break;
		default:
			m->protocol.off = (__u16)vs;
			m->protocol.len = (__u16)vl;
			break;
		}
	} else if (kind == L7_HK_HOST) {
		if (m->flags & L7_H2_M_HOST) {
			if (mode != L7_HPACK_FIELDS && l7_hpack_fail(d, L7_H2_MALFORMED))
				return 1;
		} else if (vl > L7_H2_MAX_AUTH) {
			return l7_hpack_fail(d, L7_H2_SLOW(L7_H2_SLOW_VALUE_SIZE));
		}
		m->flags |= L7_H2_M_HOST;
		m->host_hdr.off = (__u16)vs;
		m->host_hdr.len = (__u16)vl;
		adv = 1;
	} else if (kind == L7_HK_CL && mode != L7_HPACK_FIELDS) {
		__s64 n = l7_hpack_digits(v, vl);

		if (n == -2)
			return l7_hpack_fail(d, L7_H2_SLOW(L7_H2_SLOW_VALUE_SIZE));
		if ((n < 0 || (m->flags & L7_H2_M_CL)) && l7_hpack_fail(d, L7_H2_MALFORMED))
			return 1;
		m->flags |= L7_H2_M_CL;
		req->body_len = n > 0 ? (__u32)n : 0;
	} else if (kind == L7_HK_CTYPE) {
		/* application/grpc, alone or followed by '+' (a codec) or ';' (parameters) */
		__u32 c16 = v[16];

		if (vl >= 16 && l7_ld64(v) == L7_W8('a', 'p', 'p', 'l', 'i', 'c', 'a', 't') &&
		    l7_ld64(v + 8) == L7_W8('i', 'o', 'n', '/', 'g', 'r', 'p', 'c') &&
		    (vl == 16 || c16 == '+' || c16 == ';'))
			m->flags |= L7_H2_M_GRPC;
	} else if (kind == L7_HK_GSTATUS) {
		__s64 n = l7_hpack_digits(v, vl);

		if (n >= 0) {
			m->flags |= L7_H2_M_GRPC_STATUS;
			m->grpc_status = (__u32)n;
		}
	} else if (kind == L7_HK_TE && mode != L7_HPACK_FIELDS) {
		m->flags |= L7_H2_M_TE_TRAILERS;
	}

	if (want) {
		__u32 i = (want - 1) & (L7_MAX_WANTED - 1), bit = 1u << i;

		if (req->hdr_present & bit)
			return l7_hpack_fail(d, L7_H2_SLOW(L7_H2_SLOW_DUP_WANTED));
		req->hdr_present |= bit;
		req->hdr[i].off = (__u16)vs;
		req->hdr[i].len = (__u16)vl;
		m->reps |= st->rep << (2 * i);
		m->rep[i].off = (__u16)st->rep_off;
		m->rep[i].len = (__u16)(st->pos - st->rep_off);
		if (st->rep == L7_HPACK_R_NEVER)
			m->never |= bit;
		adv = 1;
	}
	if (adv)
		st->o = vs + vl;
	return 0;
}

/* The name string ended at st->o: classify it, then start the value. */
static __always_inline int l7_hpack_name_end(struct l7_hpack *d, struct l7_req *req)
{
	struct l7_hpack_st *st = &d->st;
	__u32 n = st->h.n, kw = 0, kind;

	if (st->keep && n <= L7_MAX_NAME)
		kw = l7g_hpack_classify(req, st->sstart, n);
	kind = kw & 0xff;
	if (st->first == ':' && !L7_HK_IS_PSEUDO(kind))
		kind = L7_HK_BADPSEUDO;   /* also the long ones classify does not look at */
	st->kind = kind;
	st->want = kw >> 8;
	if (d->mode != L7_HPACK_FIELDS &&
	    (n == 0 || ((st->h.cls & L7_HC_NAMEBAD) && !L7_HK_IS_PSEUDO(kind))) &&
	    l7_hpack_fail(d, L7_H2_MALFORMED))
		return 1;
	st->o = st->sstart;   /* the value overwrites the name */
	st->ins_nlen = n;
	if (st->dyn & L7_HPACK_DYN_VALUE) {
		l7_hpack_tstr_begin(d, L7_HS_VALUE, st->vt_off, st->vt_len, kind != L7_HK_NONE || st->want);
		return 0;
	}
	st->vstart = st->pos;
	if (l7_hpack_str_begin(d, L7_HS_VALUE, kind != L7_HK_NONE || st->want))
		return l7_hpack_fail(d, L7_HPACK_COMPRESSION);
	return 0;
}

/* One chunk of the current string; at its end, the name or the field is complete. */
static __always_inline int l7_hpack_str(struct l7_hpack *d, struct l7_req *req)
{
	struct l7_hpack_st *st = &d->st;
	__u32 left, n, before = st->h.n;
	const __u8 *in;
	__u8 *out;

	/* (what is live across a chunk's decoding is kept to what it was before the table: the
	 * step's stack is part of the deepest call chain, and at its limit) */
	if (st->src) {   /* from the table's ring: a chunk stops at its end, the next starts at 0 */
		__u32 w = st->tpos & L7_HT_RING_MASK;

		left = st->tsend - st->tpos;
		n = left > L7_HPACK_CHUNK ? L7_HPACK_CHUNK : left;
		if (n > L7_HPACK_TABLE_RING - w)
			n = L7_HPACK_TABLE_RING - w;
		in = d->tab.ring + l7_mask(w, L7_HT_RING_MASK);
	} else {
		left = st->send - st->pos;
		n = left > L7_HPACK_CHUNK ? L7_HPACK_CHUNK : left;
		in = d->blk + l7_mask(st->pos, L7_H2_BLOCK_MAX - 1);
	}
	if (n) {
		__u32 o;

		if (st->keep && st->o + 2 * L7_HPACK_CHUNK > L7_MAX_HEAD)
			return l7_hpack_fail(d, L7_H2_SLOW(L7_H2_SLOW_OUT_SIZE));
		out = req->buf + l7_mask(st->o, L7_MAX_HEAD - 1);
		/* a chunk's code is as long as its size class, not its bytes: most header strings
		 * are short, and a 5-byte value should not pay for 16 */
		if (!st->huff && n <= 8) {
			o = l7_hpack_raw_chunk(&st->h, in, n, out, 8);
			l7_hpack_account(&st->h, out, o, before, 8);
		} else if (!st->huff) {
			o = l7_hpack_raw_chunk(&st->h, in, n, out, L7_HPACK_CHUNK);
			l7_hpack_account(&st->h, out, o, before, L7_HPACK_CHUNK);
		} else if (n <= 8) {   /* 8 bytes decode to at most 13 symbols */
			o = l7_huff_chunk_n(&st->h, in, n, out, 8);
			l7_hpack_account(&st->h, out, o, before, 16);
		} else {
			o = n == L7_HPACK_CHUNK ? l7_huff_chunk_full(&st->h, in, out) :
						  l7_huff_chunk(&st->h, in, n, out);
			l7_hpack_account(&st->h, out, o, before, 2 * L7_HPACK_CHUNK);
		}
		if (st->first == 0x100 && o)
			st->first = out[0];
		if (st->ins)
			l7g_hpack_ring_put(d, req, st->o, o);
		/* kept: the output grows; else the next chunk writes over this one */
		st->o = st->keep ? st->sstart + st->h.n : st->sstart;
		if (st->src) {
			st->tpos += n;
			if (st->tpos < st->tsend)
				return 0;
		} else {
			st->pos += n;
			if (st->pos < st->send)
				return 0;
		}
	}
	if (st->huff && l7_huff_end(&st->h))
		return l7_hpack_fail(d, L7_HPACK_COMPRESSION);
	if (st->step == L7_HS_NAME)
		return l7_hpack_name_end(d, req);
	if (st->ins)
		l7g_hpack_insert(d, st->h.n);
	L7_HPACK_HOOK_FIELD(d, req);
	return l7g_hpack_field(d, req);
}

/* The field representation at st->pos. */
static __always_inline int l7_hpack_rep(struct l7_hpack *d, struct l7_req *req)
{
	struct l7_hpack_st *st = &d->st;
	const __u8 *p = d->blk + l7_mask(st->pos, L7_H2_BLOCK_MAX - 1);
	__u32 b = p[0], avail = d->len - st->pos, idx = 0, k, rep, kw;
	__u8 *out;

	st->rep_off = st->pos;
	if ((b & 0xe0) == 0x20) {
		/* dynamic table size update (6.3): only at the start of a block (4.2), and within
		 * the limit in force: 0 once our SETTINGS_HEADER_TABLE_SIZE 0 is acknowledged */
		k = l7_hpack_int(p, 0x1f, avail, &idx);
		if (!k || d->msg.fields ||
		    idx > ((d->conn & L7_H2_C_HP_ACKED) ? 0 : L7_HPACK_TABLE_DEFAULT))
			return l7_hpack_fail(d, L7_HPACK_COMPRESSION);
		d->conn &= ~(L7_H2_C_HP_UPDATE | L7_H2_C_HP_ZERO);
		if (idx == 0)   /* the table is empty: known again if it was not */
			d->conn = (d->conn | L7_H2_C_HP_ZERO) & ~L7_H2_C_HP_UNKNOWN;
		d->msg.flags |= L7_H2_M_UPDATE | L7_H2_M_TABLE;
		d->msg.table_size = idx;
		d->tab.max = idx;
		l7g_hpack_evict(d, idx);
		st->pos += k;
		return 0;
	}
	if (d->conn & L7_H2_C_HP_UPDATE)   /* the size update the ACK made due did not come */
		return l7_hpack_fail(d, L7_HPACK_COMPRESSION);
	if (b & 0x80) {
		rep = L7_HPACK_R_INDEXED;
		k = l7_hpack_int(p, 0x7f, avail, &idx);
	} else if (b & 0x40) {
		rep = L7_HPACK_R_INCREMENTAL;
		k = l7_hpack_int(p, 0x3f, avail, &idx);
	} else {
		rep = (b & 0x10) ? L7_HPACK_R_NEVER : L7_HPACK_R_WITHOUT;
		k = l7_hpack_int(p, 0x0f, avail, &idx);
	}
	if (!k || (rep == L7_HPACK_R_INDEXED && idx == 0))
		return l7_hpack_fail(d, L7_HPACK_COMPRESSION);
	st->pos += k;
	st->rep = rep;
	st->sstart = st->o;
	st->dyn = 0;
	/* a literal with incremental indexing inserts what it decodes (unless the table is not
	 * kept: then only a later dynamic reference reads it, and that is the slow path) */
	st->ins = rep == L7_HPACK_R_INCREMENTAL && !(d->conn & L7_H2_C_HP_UNKNOWN);
	st->ins_start = d->tab.wpos & L7_HT_RING_MASK;
	st->ins_n = 0;
	if (idx > L7_HPACK_STATIC) {   /* the dynamic table: newest first (2.3.3) */
		const struct l7_hpack_entry *e;

		if (d->conn & L7_H2_C_HP_UNKNOWN)
			return l7_hpack_fail(d, L7_H2_SLOW(L7_H2_SLOW_DYNAMIC));
		if (idx - L7_HPACK_STATIC - 1 >= d->tab.count)
			return l7_hpack_fail(d, L7_HPACK_COMPRESSION);
		e = &d->tab.e[(d->tab.head - (idx - L7_HPACK_STATIC)) & L7_HT_ENT_MASK];
		d->msg.flags |= L7_H2_M_DYNAMIC;
		st->dyn = L7_HPACK_DYN_NAME | (rep == L7_HPACK_R_INDEXED ? L7_HPACK_DYN_VALUE : 0);
		st->vt_off = e->off + e->nlen;
		st->vt_len = e->vlen;
		/* the name as this field has it: the new entry's copy when it is inserted (the
		 * writes may overwrite the entry it came from), else the entry's */
		st->nt_off = st->ins ? st->ins_start : e->off;
		l7_hpack_tstr_begin(d, L7_HS_NAME, e->off, e->nlen, 1);
		return 0;
	}
	if (idx == 0) {   /* literal name */
		if (l7_hpack_str_begin(d, L7_HS_NAME, 1))
			return l7_hpack_fail(d, L7_HPACK_COMPRESSION);
		return 0;
	}
	/* a static name: copy it, classify it, then the static value or the literal one */
	idx &= 63;
	out = req->buf + l7_mask(st->o, L7_MAX_HEAD - 1);
	if (st->o + L7_MAX_NAME > L7_MAX_HEAD)
		return l7_hpack_fail(d, L7_H2_SLOW(L7_H2_SLOW_OUT_SIZE));
	L7_UNROLL
	for (k = 0; k < L7_MAX_NAME; k += 8)
		l7_st64(out + k, l7_ld64((const __u8 *)l7_hpack_sname[idx] + k));
	kw = l7g_hpack_classify(req, st->o, l7_hpack_snlen[idx]);
	st->kind = kw & 0xff;
	st->want = kw >> 8;
	st->ins_nlen = l7_hpack_snlen[idx];
	if (st->ins)
		l7g_hpack_ring_put(d, req, st->o, st->ins_nlen);
	if (rep != L7_HPACK_R_INDEXED) {
		st->vstart = st->pos;
		if (l7_hpack_str_begin(d, L7_HS_VALUE, st->kind != L7_HK_NONE || st->want))
			return l7_hpack_fail(d, L7_HPACK_COMPRESSION);
		return 0;
	}
	l7_st64(out, l7_ld64((const __u8 *)l7_hpack_sval[idx]));
	l7_st64(out + 8, l7_ld64((const __u8 *)l7_hpack_sval[idx] + 8));
	/* static values are valid, hold no '?' ("/", "/index.html"), no SP at either end */
	st->h.n = l7_hpack_svlen[idx];
	st->h.cls = 0;
	st->h.q = ~0u;
	st->first = st->h.last = 'x';
	L7_HPACK_HOOK_FIELD(d, req);
	return l7g_hpack_field(d, req);
}

/* One step, as a global function in BPF (as the parts below): see L7_GLOBAL_FN. */
L7_GLOBAL_FN int l7g_hpack_step(struct l7_hpack *d, struct l7_req *req)
{
	if (!d || !req)
		return 1;
	if (d->st.step != L7_HS_REP)
		return l7_hpack_str(d, req);
	if (d->st.pos >= d->len) {
		d->st.done = 1;
		return 1;
	}
	return l7_hpack_rep(d, req);
}

L7_LOOP_CB(l7_hpack_cb)
{
	struct l7_hpack_ctx *x = l7_ctx;

	int r = l7g_hpack_step(x->d, x->req);

	/* bpf_loop wants 0 or 1, provably: linked into a policy, LLVM knows the global function
	 * returns 0 or 1 and drops a bare `& 1`, which the verifier (global: assumed any value)
	 * then refuses */
	l7_barrier_var(r);
	return r & 1;
}

/* 1 if req->buf[a, a + n) and [b, b + n) (n <= L7_H2_MAX_AUTH) are the same, ignoring ASCII
 * case (host names). A global function: its loop is walked once, not once per path to it. */
L7_GLOBAL_FN int l7g_hpack_same(const struct l7_req *req, __u32 a, __u32 b, __u32 n)
{
	const __u8 *p, *q;
	__u64 diff = 0;
	__u32 i;

	if (!req || n > L7_H2_MAX_AUTH)
		return 0;
	p = req->buf + l7_mask(a, L7_MAX_HEAD - 1);
	q = req->buf + l7_mask(b, L7_MAX_HEAD - 1);
	/* whole words, then the last one masked: one exit per word for the verifier */
	for (i = 0; i < (L7_H2_MAX_AUTH + 1) / 8; i++) {
		if (i >= n / 8)
			break;
		diff |= l7_lower8(l7_ld64(p + 8 * i)) ^ l7_lower8(l7_ld64(q + 8 * i));
	}
	i = n / 8;
	diff |= (l7_lower8(l7_ld64(p + 8 * i)) ^ l7_lower8(l7_ld64(q + 8 * i))) &
		((1ULL << (8 * (n & 7))) - 1);
	return !diff;
}

/* After the last field: what a request or response must have (RFC 9113 8.3). */
L7_GLOBAL_FN int l7g_hpack_message(struct l7_hpack *d, struct l7_req *req)
{
	struct l7_h2_msg *m;
	__u32 ps;

	if (!d || !req)
		return L7_H2_CONN_ERR(L7_H2_INTERNAL_ERROR);
	m = &d->msg;
	ps = m->pseudo;

	if (d->mode == L7_HPACK_RESPONSE) {
		__s64 s;

		if (!(ps & (1u << L7_H2_P_STATUS)))
			return L7_H2_MALFORMED;
		s = l7_hpack_digits(req->buf + l7_mask(m->status_s.off, L7_MAX_HEAD - 1),
				    m->status_s.len);
		if (s < 100 || s > 599)
			return L7_H2_MALFORMED;
		m->status = (__u32)s;
		return 0;
	}
	if (d->mode != L7_HPACK_REQUEST)
		return 0;
	if (!(ps & (1u << L7_H2_P_METHOD)))
		return L7_H2_MALFORMED;
	{
		int meth = l7_http_method(req, req->method_s.off, req->method_s.len);

		if (req->method_s.len > 11 || meth < 0)
			return L7_H2_SLOW(L7_H2_SLOW_METHOD);
		req->method = (__u32)meth;
	}
	if (req->method == L7_M_CONNECT) {
		/* 8.5: :authority only (extended CONNECT's :protocol is not enabled) */
		if (!(ps & (1u << L7_H2_P_AUTHORITY)) ||
		    (ps & (1u << L7_H2_P_SCHEME | 1u << L7_H2_P_PATH)))
			return L7_H2_MALFORMED;
		m->flags |= L7_H2_M_CONNECT;
		req->flags |= L7_REQ_UPGRADE;
	} else {
		__u32 c0 = req->buf[l7_mask(req->target.off, L7_MAX_HEAD - 1)];

		if ((ps & (1u << L7_H2_P_SCHEME | 1u << L7_H2_P_PATH)) !=
			    (1u << L7_H2_P_SCHEME | 1u << L7_H2_P_PATH) ||
		    !req->target.len)
			return L7_H2_MALFORMED;
		/* origin-form, or "*" for OPTIONS (8.3.1) */
		if (c0 != '/' && !(c0 == '*' && req->target.len == 1 && req->method == L7_M_OPTIONS))
			return L7_H2_MALFORMED;
	}
	if (ps & (1u << L7_H2_P_AUTHORITY)) {
		if (!req->host.len)
			return L7_H2_MALFORMED;
		/* a host field naming another host than :authority: malformed (8.3.1) */
		if ((m->flags & L7_H2_M_HOST) &&
		    (m->host_hdr.len != req->host.len ||
		     !l7g_hpack_same(req, req->host.off, m->host_hdr.off, req->host.len)))
			return L7_H2_MALFORMED;
	} else if (m->flags & L7_H2_M_HOST) {
		if (!m->host_hdr.len)
			return L7_H2_MALFORMED;
		req->host = m->host_hdr;
	}
	return 0;
}

static __always_inline int l7_hpack_decode(struct l7_hpack *d, struct l7_req *req)
{
	struct l7_hpack_ctx x = { .d = d, .req = req };
	struct l7_h2_msg *m = &d->msg;
	int rc;

	__builtin_memset(m, 0, sizeof *m);
	__builtin_memset(&d->st, 0, sizeof d->st);
	m->mode = d->mode;
	req->head_len = d->len;
	req->body_len = 0;
	req->method = L7_M_OTHER;
	req->flags = L7_REQ_HTTP2;   /* request.protocol is "HTTP/2" (l7/abi.h) */
	req->n_headers = 0;
	req->hdr_present = 0;
	req->n_wline = 0;
	req->method_s.off = req->method_s.len = 0;
	req->target = req->path = req->query = req->host = req->method_s;
	for (int i = 0; i < L7_MAX_WANTED; i++)   /* as http.h: absent wanted headers read "" */
		req->hdr[i] = req->method_s;
	if (d->conn & L7_H2_C_HP_ZERO) {   /* a table of size 0 is empty */
		d->tab.init = 1;
		d->tab.max = d->tab.size = d->tab.count = 0;
	} else if (!d->tab.init) {         /* the initial table (4.2, RFC 9113 6.5.2) */
		d->tab.init = 1;
		d->tab.max = L7_HPACK_TABLE_DEFAULT;
		d->tab.size = d->tab.count = d->tab.head = d->tab.wpos = 0;
	}
	if (d->len <= L7_H2_BLOCK_MAX)
		l7_loop(L7_HPACK_MAX_STEPS, l7_hpack_cb, &x);
	/* stopped before the block's end: what the rest inserts is not in the table */
	if (!d->st.done && !(d->conn & L7_H2_C_HP_ZERO))
		d->conn |= L7_H2_C_HP_UNKNOWN;
	if (d->len > L7_H2_BLOCK_MAX) {
		rc = L7_H2_SLOW(L7_H2_SLOW_BLOCK_SIZE);
		goto out;
	}
	rc = d->st.rc;
	if (rc && rc != L7_H2_MALFORMED)
		goto out;
	if (!d->st.done) {
		rc = L7_H2_SLOW(L7_H2_SLOW_STEPS);
		m->at = d->st.pos;
		goto out;
	}
	if (d->conn & L7_H2_C_HP_UPDATE) {   /* an empty block where a size update was due */
		rc = L7_HPACK_COMPRESSION;
		m->at = 0;
		goto out;
	}
	if (!rc) {
		rc = l7g_hpack_message(d, req);
		if (rc)
			m->at = d->len;
	}
out:
	m->rc = rc;
	return rc;
}

#endif /* L7_BPF_HPACK_H */
