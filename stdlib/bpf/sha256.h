/* sha256.h: SHA-256 (FIPS 180-4), one-shot over a span of a large buffer; the engine behind
 * HMAC-SHA256 (hmac.h). Same source for BPF and natively.
 *
 * API
 *   struct l7_sha256            state + message schedule + block; ~450 bytes: keep it in map
 *                               memory in BPF (per-CPU array value), never on the stack.
 *   int l7_sha256(struct l7_sha256 *c, const __u8 *buf, __u32 off, __u32 len, __u8 out[32])
 *       Hashes buf[off..off+len). buf follows the stdlib/bpf buffer convention: indices are
 *       masked with L7_DATA_MASK and it must be readable for L7_DATA_MASK + 1 + 64 bytes
 *       (struct l7_req.buf is). Returns 0, or -1 if off + len > L7_DATA_MASK + 1.
 *   Block-aligned streaming, for inputs longer than one buffer:
 *   void l7_sha256_init(struct l7_sha256 *c)
 *   int  l7_sha256_update(c, buf, off, len)       len must be a multiple of 64 (else -1)
 *   int  l7_sha256_final(c, buf, off, len, out)   last piece, any length
 *
 * Why one-shot with a block "role" per loop index: every 64-byte block, whatever it holds
 * (data, padding, HMAC key pads), is compressed by one l7_loop callback. The verifier then
 * walks the compression function once per call site, not once per block or per role. */
#ifndef L7_BPF_SHA256_H
#define L7_BPF_SHA256_H

#include "compat.h"
#include <l7/abi.h>

#ifndef L7_DATA_MASK
#define L7_DATA_MASK (L7_MAX_HEAD - 1)
#endif

struct l7_sha256 {
	__u32 h[8];
	__u32 w[64];      /* message schedule: map memory, not stack */
	__u8 blk[64];     /* the block being compressed */
	__u8 key[64];     /* HMAC: the key, zero-padded to the block size */
	__u8 dig[32];     /* HMAC: inner digest */
	__u64 total;      /* bytes passed to l7_sha256_update */
} __attribute__((aligned(8)));

static const __u32 l7_sha256_k[64] = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
	0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
	0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
	0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
	0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
	0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
	0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
	0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static __always_inline void l7_sha256_iv(struct l7_sha256 *c)
{
	c->h[0] = 0x6a09e667; c->h[1] = 0xbb67ae85; c->h[2] = 0x3c6ef372; c->h[3] = 0xa54ff53a;
	c->h[4] = 0x510e527f; c->h[5] = 0x9b05688c; c->h[6] = 0x1f83d9ab; c->h[7] = 0x5be0cd19;
}

static __always_inline void l7_sha256_compress(struct l7_sha256 *c)
{
	__u32 a, b, cc, d, e, f, g, h, t1, t2;
	int t;

	for (t = 0; t < 16; t++)
		c->w[t] = __builtin_bswap32(l7_ld32(c->blk + 4 * t));
	for (t = 16; t < 64; t++) {
		__u32 x = c->w[t - 15], y = c->w[t - 2];
		__u32 s0 = l7_rotr32(x, 7) ^ l7_rotr32(x, 18) ^ (x >> 3);
		__u32 s1 = l7_rotr32(y, 17) ^ l7_rotr32(y, 19) ^ (y >> 10);
		c->w[t] = c->w[t - 16] + s0 + c->w[t - 7] + s1;
	}
	a = c->h[0]; b = c->h[1]; cc = c->h[2]; d = c->h[3];
	e = c->h[4]; f = c->h[5]; g = c->h[6]; h = c->h[7];
	for (t = 0; t < 64; t++) {
		t1 = h + (l7_rotr32(e, 6) ^ l7_rotr32(e, 11) ^ l7_rotr32(e, 25)) +
		     ((e & f) ^ (~e & g)) + l7_sha256_k[t] + c->w[t];
		t2 = (l7_rotr32(a, 2) ^ l7_rotr32(a, 13) ^ l7_rotr32(a, 22)) +
		     ((a & b) ^ (a & cc) ^ (b & cc));
		h = g; g = f; f = e; e = d + t1;
		d = cc; cc = b; b = a; a = t1 + t2;
	}
	c->h[0] += a; c->h[1] += b; c->h[2] += cc; c->h[3] += d;
	c->h[4] += e; c->h[5] += f; c->h[6] += g; c->h[7] += h;
}

/* The sequence of blocks one run compresses:
 *   [key ^ ipad]            if hmac
 *   data blocks             nfull = len / 64, copied from buf
 *   1 or 2 padding blocks   tail of the data, 0x80, zeros, bit length
 *   [key ^ opad] [digest, padding]   if hmac (outer hash) */
struct l7_sha256_run {
	struct l7_sha256 *c;
	const __u8 *buf;
	__u32 off, len;
	__u32 nfull;    /* full data blocks */
	__u32 ntail;    /* padding blocks: 1 or 2 */
	__u32 hmac;     /* 0 or 1 */
	__u32 pad_;
	__u64 prior;    /* bytes hashed before this run (for the length field) */
};

/* Tail block `which` (0 or 1) of the data: remaining bytes, 0x80, zeros, length. */
static __always_inline void l7_sha256_tail(struct l7_sha256_run *r, __u32 which)
{
	struct l7_sha256 *c = r->c;
	__u32 rem = r->len & 63;
	const __u8 *p = r->buf + l7_mask(r->off + (r->len & ~63u), L7_DATA_MASK);
	__u64 bits = (r->prior + r->len + 64 * r->hmac) * 8;
	int j;

	for (j = 0; j < 8; j++) {
		__u64 w = 0;
		__u32 lo = 8 * j;

		if (which == 0) {
			/* data bytes below rem, 0x80 at rem, zeros after */
			w = l7_ld64(p + lo);
			if (rem <= lo)
				w = 0;
			else if (rem < lo + 8)
				w &= l7_bytemask(rem - lo);
			if (rem >= lo && rem < lo + 8)
				w |= 0x80ULL << (8 * (rem - lo));
		}
		l7_st64(c->blk + lo, w);
	}
	if (r->ntail == which + 1)
		l7_st64(c->blk + 56, __builtin_bswap64(bits));
}

L7_LOOP_CB(l7_sha256_block_cb)
{
	struct l7_sha256_run *r = l7_ctx;
	struct l7_sha256 *c = r->c;
	__u32 i = (__u32)l7_idx, j;

	if (r->hmac) {
		if (i == 0) {
			/* inner hash: key ^ ipad */
			l7_sha256_iv(c);
			for (j = 0; j < 64; j += 8)
				l7_st64(c->blk + j, l7_ld64(c->key + j) ^ 0x3636363636363636ULL);
			goto compress;
		}
		i--;
	}
	if (i < r->nfull) {
		const __u8 *p = r->buf + l7_mask(r->off + 64 * i, L7_DATA_MASK);
		for (j = 0; j < 64; j += 8)
			l7_st64(c->blk + j, l7_ld64(p + j));
	} else if (i < r->nfull + r->ntail) {
		l7_sha256_tail(r, i - r->nfull);
	} else if (i == r->nfull + r->ntail) {
		/* outer hash: save the inner digest, key ^ opad */
		for (j = 0; j < 8; j++)
			l7_st32(c->dig + 4 * j, __builtin_bswap32(c->h[j]));
		l7_sha256_iv(c);
		for (j = 0; j < 64; j += 8)
			l7_st64(c->blk + j, l7_ld64(c->key + j) ^ 0x5c5c5c5c5c5c5c5cULL);
	} else {
		/* inner digest, 0x80, zeros, length (64 + 32) * 8 bits */
		for (j = 0; j < 32; j += 8)
			l7_st64(c->blk + j, l7_ld64(c->dig + j));
		l7_st64(c->blk + 32, 0x80);
		l7_st64(c->blk + 40, 0);
		l7_st64(c->blk + 48, 0);
		l7_st64(c->blk + 56, __builtin_bswap64(96 * 8));
	}
compress:
	l7_sha256_compress(c);
	return 0;
}

#define L7_SHA_HMAC 1u  /* wrap the data in the HMAC key pads */
#define L7_SHA_PAD  2u  /* last piece: append padding and length */

/* Shared by all entry points: one l7_loop over the block sequence. */
static __always_inline int l7_sha256_run(struct l7_sha256 *c, const __u8 *buf, __u32 off,
					 __u32 len, __u32 how, __u8 out[32])
{
	struct l7_sha256_run r = { .c = c, .buf = buf, .off = off, .len = len,
				   .hmac = how & L7_SHA_HMAC, .prior = c->total };
	__u32 j;

	if (off > L7_DATA_MASK + 1 || len > L7_DATA_MASK + 1 - off)
		return -1;
	if (!(how & L7_SHA_PAD) && (len & 63))
		return -1;
	r.nfull = len / 64;
	r.ntail = !(how & L7_SHA_PAD) ? 0 : (len & 63) < 56 ? 1 : 2;
	l7_loop(r.hmac * 3 + r.nfull + r.ntail, l7_sha256_block_cb, &r);
	c->total += len;
	if (!(how & L7_SHA_PAD))
		return 0;
	for (j = 0; j < 8; j++)
		l7_st32(out + 4 * j, __builtin_bswap32(c->h[j]));
	return 0;
}

static __always_inline void l7_sha256_init(struct l7_sha256 *c)
{
	l7_sha256_iv(c);
	c->total = 0;
}

static __always_inline int l7_sha256_update(struct l7_sha256 *c, const __u8 *buf, __u32 off,
					    __u32 len)
{
	return l7_sha256_run(c, buf, off, len, 0, 0);
}

static __always_inline int l7_sha256_final(struct l7_sha256 *c, const __u8 *buf, __u32 off,
					   __u32 len, __u8 out[32])
{
	return l7_sha256_run(c, buf, off, len, L7_SHA_PAD, out);
}

static __always_inline int l7_sha256(struct l7_sha256 *c, const __u8 *buf, __u32 off, __u32 len,
				     __u8 out[32])
{
	l7_sha256_init(c);
	return l7_sha256_final(c, buf, off, len, out);
}

#endif /* L7_BPF_SHA256_H */
