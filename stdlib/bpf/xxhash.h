/* xxhash.h: XXH32 and XXH64 (Yann Collet's xxHash, spec doc/xxhash_spec.md) with a seed, for
 * BPF and natively. Results are the integers XXH32()/XXH64() return.
 *
 * API (buffer convention of stdlib/bpf: indices masked with L7_DATA_MASK, readable for
 * L7_DATA_MASK + 1 + 64 bytes)
 *   __u32 l7_xxh32(const __u8 *buf, __u32 off, __u32 len, __u32 seed)
 *   __u64 l7_xxh64(const __u8 *buf, __u32 off, __u32 len, __u64 seed)
 *   __u64 l7_xxh64_u32(__u32 w, __u64 seed)        the 4 bytes of w, little endian
 *   A span past L7_DATA_MASK + 1 is clipped to it (callers check their lengths).
 *
 * The four accumulators are the loop context on the stack: they are data-dependent values,
 * so the verifier has nothing to enumerate; each callback eats 64 bytes of stripes. */
#ifndef L7_BPF_XXHASH_H
#define L7_BPF_XXHASH_H

#include "compat.h"
#include <l7/abi.h>

#ifndef L7_DATA_MASK
#define L7_DATA_MASK (L7_MAX_HEAD - 1)
#endif

#define L7_XXH32_P1 2654435761U
#define L7_XXH32_P2 2246822519U
#define L7_XXH32_P3 3266489917U
#define L7_XXH32_P4 668265263U
#define L7_XXH32_P5 374761393U
#define L7_XXH64_P1 11400714785074694791ULL
#define L7_XXH64_P2 14029467366897019727ULL
#define L7_XXH64_P3 1609587929392839161ULL
#define L7_XXH64_P4 9650029242287828579ULL
#define L7_XXH64_P5 2870177450012600261ULL

struct l7_xxh_ctx {
	const __u8 *buf;
	__u32 off, nstripes;
	__u64 v[4];
};

static __always_inline __u32 l7_xxh32_round(__u32 acc, __u32 in)
{
	return l7_rotl32(acc + in * L7_XXH32_P2, 13) * L7_XXH32_P1;
}

static __always_inline __u64 l7_xxh64_round(__u64 acc, __u64 in)
{
	return l7_rotl64(acc + in * L7_XXH64_P2, 31) * L7_XXH64_P1;
}

static __always_inline __u64 l7_xxh64_merge(__u64 h, __u64 v)
{
	return (h ^ l7_xxh64_round(0, v)) * L7_XXH64_P1 + L7_XXH64_P4;
}

static __always_inline __u32 l7_xxh_clip(__u32 off, __u32 len)
{
	if (off > L7_DATA_MASK + 1)
		return 0;
	return len > L7_DATA_MASK + 1 - off ? L7_DATA_MASK + 1 - off : len;
}

L7_LOOP_CB(l7_xxh32_cb)   /* four 16-byte stripes */
{
	struct l7_xxh_ctx *x = l7_ctx;
	__u32 s0 = (__u32)l7_idx * 4, s, j;
	const __u8 *p = x->buf + l7_mask(x->off + 16 * s0, L7_DATA_MASK);

	for (s = 0; s < 4; s++) {
		if (s0 + s >= x->nstripes)
			break;
		for (j = 0; j < 4; j++)
			x->v[j] = l7_xxh32_round((__u32)x->v[j], l7_ld32(p + 16 * s + 4 * j));
	}
	return 0;
}

static __always_inline __u32 l7_xxh32(const __u8 *buf, __u32 off, __u32 len, __u32 seed)
{
	struct l7_xxh_ctx x = { .buf = buf, .off = off };
	const __u8 *p;
	__u32 h, i, rem;

	len = l7_xxh_clip(off, len);
	if (len >= 16) {
		x.v[0] = (__u32)(seed + L7_XXH32_P1 + L7_XXH32_P2);
		x.v[1] = (__u32)(seed + L7_XXH32_P2);
		x.v[2] = seed;
		x.v[3] = (__u32)(seed - L7_XXH32_P1);
		x.nstripes = len / 16;
		l7_loop((x.nstripes + 3) / 4, l7_xxh32_cb, &x);
		h = l7_rotl32((__u32)x.v[0], 1) + l7_rotl32((__u32)x.v[1], 7) +
		    l7_rotl32((__u32)x.v[2], 12) + l7_rotl32((__u32)x.v[3], 18);
	} else {
		h = seed + L7_XXH32_P5;
	}
	h += len;
	rem = len & 15;
	p = buf + l7_mask(off + (len & ~15u), L7_DATA_MASK);
	for (i = 0; i < 3; i++) {
		if (rem < 4 * (i + 1))
			break;
		h = l7_rotl32(h + l7_ld32(p + 4 * i) * L7_XXH32_P3, 17) * L7_XXH32_P4;
	}
	p += rem & ~3u;
	for (i = 0; i < 3; i++) {
		if ((rem & 3) <= i)
			break;
		h = l7_rotl32(h + p[i] * L7_XXH32_P5, 11) * L7_XXH32_P1;
	}
	h ^= h >> 15;
	h *= L7_XXH32_P2;
	h ^= h >> 13;
	h *= L7_XXH32_P3;
	h ^= h >> 16;
	return h;
}

L7_LOOP_CB(l7_xxh64_cb)   /* two 32-byte stripes */
{
	struct l7_xxh_ctx *x = l7_ctx;
	__u32 s0 = (__u32)l7_idx * 2, s, j;
	const __u8 *p = x->buf + l7_mask(x->off + 32 * s0, L7_DATA_MASK);

	for (s = 0; s < 2; s++) {
		if (s0 + s >= x->nstripes)
			break;
		for (j = 0; j < 4; j++)
			x->v[j] = l7_xxh64_round(x->v[j], l7_ld64(p + 32 * s + 8 * j));
	}
	return 0;
}

static __always_inline __u64 l7_xxh64(const __u8 *buf, __u32 off, __u32 len, __u64 seed)
{
	struct l7_xxh_ctx x = { .buf = buf, .off = off };
	const __u8 *p;
	__u64 h;
	__u32 i, rem;

	len = l7_xxh_clip(off, len);
	if (len >= 32) {
		x.v[0] = seed + L7_XXH64_P1 + L7_XXH64_P2;
		x.v[1] = seed + L7_XXH64_P2;
		x.v[2] = seed;
		x.v[3] = seed - L7_XXH64_P1;
		x.nstripes = len / 32;
		l7_loop((x.nstripes + 1) / 2, l7_xxh64_cb, &x);
		h = l7_rotl64(x.v[0], 1) + l7_rotl64(x.v[1], 7) + l7_rotl64(x.v[2], 12) +
		    l7_rotl64(x.v[3], 18);
		for (i = 0; i < 4; i++)
			h = l7_xxh64_merge(h, x.v[i]);
	} else {
		h = seed + L7_XXH64_P5;
	}
	h += len;
	rem = len & 31;
	p = buf + l7_mask(off + (len & ~31u), L7_DATA_MASK);
	for (i = 0; i < 3; i++) {
		if (rem < 8 * (i + 1))
			break;
		h ^= l7_xxh64_round(0, l7_ld64(p + 8 * i));
		h = l7_rotl64(h, 27) * L7_XXH64_P1 + L7_XXH64_P4;
	}
	p += rem & ~7u;
	if (rem & 4) {
		h ^= (__u64)l7_ld32(p) * L7_XXH64_P1;
		h = l7_rotl64(h, 23) * L7_XXH64_P2 + L7_XXH64_P3;
		p += 4;
	}
	for (i = 0; i < 3; i++) {
		if ((rem & 3) <= i)
			break;
		h ^= p[i] * L7_XXH64_P5;
		h = l7_rotl64(h, 11) * L7_XXH64_P1;
	}
	h ^= h >> 33;
	h *= L7_XXH64_P2;
	h ^= h >> 29;
	h *= L7_XXH64_P3;
	h ^= h >> 32;
	return h;
}

/* XXH64 of the four bytes of w as they lie in memory (little endian): the len == 4 path of
 * l7_xxh64, for a value that is in a register, not in a buffer. */
static __always_inline __u64 l7_xxh64_u32(__u32 w, __u64 seed)
{
	__u64 h = seed + L7_XXH64_P5 + 4;

	h ^= (__u64)w * L7_XXH64_P1;
	h = l7_rotl64(h, 23) * L7_XXH64_P2 + L7_XXH64_P3;
	h ^= h >> 33;
	h *= L7_XXH64_P2;
	h ^= h >> 29;
	h *= L7_XXH64_P3;
	h ^= h >> 32;
	return h;
}

#endif /* L7_BPF_XXHASH_H */
