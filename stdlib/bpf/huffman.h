/* huffman.h: HPACK Huffman decoding (RFC 7541 5.2, Appendix B) for BPF and natively.
 *
 * API
 *   struct l7_huff (l7/h2.h)           decoder state of one string; l7_huff_init() it
 *   __u32 l7_huff_chunk_n(struct l7_huff *h, const __u8 *in, __u32 n, __u8 *out, N)
 *       Decodes in[0..n) (n <= N, a constant power of two <= L7_HPACK_CHUNK; in readable for
 *       N bytes) and writes the symbols to out[0..); returns how many (h->n counts them all).
 *       out must have room for 2 * N bytes: bytes past the symbols are written too. The code
 *       is N bytes long whatever n is: short strings want a small N.
 *       l7_huff_chunk(h, in, n, out) is N = L7_HPACK_CHUNK; l7_huff_chunk_full(h, in, out)
 *       the same for n = L7_HPACK_CHUNK, faster.
 *   int l7_huff_end(const struct l7_huff *h)
 *       0 if the string may end here, else -1: EOS was decoded, or the padding is 8 bits or
 *       longer, or not the most significant bits of EOS (all ones) - decoding errors (5.2).
 *   int l7_huff_decode(struct l7_huff *h, const __u8 *src, __u32 soff, __u32 slen,
 *                      __u8 *dst, __u32 doff, __u32 dcap)
 *       A whole string (h: scratch state in map memory): src[soff..soff+slen) to dst[doff..);
 *       returns the decoded length, -1 for a decoding error, -2 if it would not fit in dcap
 *       (checked per chunk, before anything past dcap + 2 * L7_HPACK_CHUNK is written).
 *       Buffers follow the stdlib/bpf convention (indices masked with L7_DATA_MASK,
 *       L7_DATA_MASK + 1 + 64 bytes readable).
 *
 * How: the table of huffman_table.h (generated at build time by stdlib/gen/huffman_gen.c)
 * walks the code tree 4 bits at a time, 2 lookups per input byte. A chunk is straight-line
 * code without a branch per byte: bytes past n are read but their effect is masked off with
 * arithmetic (BPF has no conditional move, and a data-dependent exit in an unrolled loop
 * multiplies the paths the verifier walks through everything after it). The loop body keeps
 * few values live: BPF has 10 registers, and spills past 512 bytes of stack fail to compile.
 * Each l7_loop callback of l7_huff_decode does one chunk. */
#ifndef L7_BPF_HUFFMAN_H
#define L7_BPF_HUFFMAN_H

#include "compat.h"
#include <l7/h2.h>
#include "huffman_table.h"

#ifndef L7_DATA_MASK
#define L7_DATA_MASK (L7_MAX_HEAD - 1)
#endif

/* 1 if i < n else 0, without a branch (i, n < 2^31) */
#define L7__HUFF_LT(i, n) ((((__u32)(i) - (__u32)(n)) >> 31))

static __always_inline void l7_huff_init(struct l7_huff *h)
{
	h->state = 0;
	h->flags = 0;
	h->n = 0;
	h->cls = 0;
	h->q = ~0u;
	h->last = 0;
}

/* One nibble: the symbol (if any) goes to out[o]; act1 is 1 for a byte of the string, 0 past. */
#define L7__HUFF_NIB(nib)                                                                     \
	do {                                                                                  \
		__u32 l7__e = l7_huff_dec[((s << 4) | (nib)) & 4095];                         \
		out[o & (2 * N - 1)] = (__u8)(l7__e >> 8);                                    \
		o += (l7__e >> 16) & act1;                                                    \
		fl |= l7__e & ((__u32)0 - act1);                                              \
		s ^= (s ^ (l7__e & 0xff)) & ((__u32)0 - act1);                                \
	} while (0)

static __always_inline __u32 l7_huff_chunk_n(struct l7_huff *h, const __u8 *in, __u32 n,
					    __u8 *out, const __u32 N)
{
	__u32 s = h->state, fl = 0, o = 0;

	L7_UNROLL
	for (__u32 i = 0; i < N; i++) {
		__u32 act1 = L7__HUFF_LT(i, n), c = in[i];

		L7__HUFF_NIB(c >> 4);
		L7__HUFF_NIB(c & 15);
		/* one byte at a time: else the scheduler hoists loads and keeps every entry
		 * live for a tree of ORs at the end, and spills (stack) */
		l7_barrier_var(s);
		l7_barrier_var(fl);
		l7_barrier_var(o);
	}
	h->state = s;
	h->flags |= fl & L7_HUFF_FAIL;
	h->n += o;
	return o;
}
#define l7_huff_chunk(h, in, n, out) l7_huff_chunk_n(h, in, n, out, L7_HPACK_CHUNK)

/* A whole chunk (n == L7_HPACK_CHUNK): no byte to mask off, so the dependent chain of table
 * lookups is shorter (the masks were a third of it: 1 KiB of Huffman 30% faster). */
#define L7__HUFF_NIB_FULL(nib)                                                                \
	do {                                                                                  \
		__u32 l7__e = l7_huff_dec[((s << 4) | (nib)) & 4095];                         \
		out[o & (2 * L7_HPACK_CHUNK - 1)] = (__u8)(l7__e >> 8);                       \
		o += (l7__e >> 16) & 1;                                                       \
		fl |= l7__e;                                                                  \
		s = l7__e & 0xff;                                                             \
	} while (0)

static __always_inline __u32 l7_huff_chunk_full(struct l7_huff *h, const __u8 *in, __u8 *out)
{
	__u32 s = h->state, fl = 0, o = 0;

	L7_UNROLL
	for (__u32 i = 0; i < L7_HPACK_CHUNK; i++) {
		__u32 c = in[i];

		L7__HUFF_NIB_FULL(c >> 4);
		L7__HUFF_NIB_FULL(c & 15);
		l7_barrier_var(s);
		l7_barrier_var(fl);
		l7_barrier_var(o);
	}
	h->state = s;
	h->flags |= fl & L7_HUFF_FAIL;
	h->n += o;
	return o;
}

static __always_inline int l7_huff_end(const struct l7_huff *h)
{
	return (h->flags & L7_HUFF_FAIL) || !l7_huff_accept[h->state & 255] ? -1 : 0;
}

struct l7_huff_ctx {
	const __u8 *src;
	__u8 *dst;
	__u32 soff, slen, doff, dcap;
	struct l7_huff *h;
	int rc;
};

L7_LOOP_CB(l7_huff_decode_cb)
{
	struct l7_huff_ctx *x = l7_ctx;
	__u32 at = (__u32)l7_idx * L7_HPACK_CHUNK, n = x->slen - at;

	if (at >= x->slen)
		return 1;
	if (x->h->n > x->dcap) {   /* this chunk writes at most 2 * CHUNK bytes past dcap */
		x->rc = -2;
		return 1;
	}
	l7_huff_chunk(x->h, x->src + l7_mask(x->soff + at, L7_DATA_MASK),
		      n > L7_HPACK_CHUNK ? L7_HPACK_CHUNK : n,
		      x->dst + l7_mask(x->doff + x->h->n, L7_DATA_MASK));
	return 0;
}

static __always_inline int l7_huff_decode(struct l7_huff *h, const __u8 *src, __u32 soff,
					  __u32 slen, __u8 *dst, __u32 doff, __u32 dcap)
{
	struct l7_huff_ctx x = { .src = src, .dst = dst, .soff = soff, .slen = slen,
				 .doff = doff, .dcap = dcap, .h = h, .rc = 0 };

	if (slen > L7_DATA_MASK + 1)
		return -2;
	l7_huff_init(h);
	l7_loop((slen + L7_HPACK_CHUNK - 1) / L7_HPACK_CHUNK, l7_huff_decode_cb, &x);
	if (x.rc)
		return x.rc;
	if (h->n > dcap)
		return -2;
	return l7_huff_end(h) ? -1 : (int)h->n;
}

#endif /* L7_BPF_HUFFMAN_H */
