/* compat.h: the thin layer that lets the same building blocks compile natively (gcc/clang,
 * unit tests and the userspace slow path) and for BPF (clang -target bpf, kernel verifier).
 *
 * Rules the other stdlib/bpf headers follow, and why:
 *  - everything is `static __always_inline`: l7c links the bitcode into the generated policy
 *    and a helper left as a real BPF function is verified on its own (platform.md);
 *  - long scans go through l7_loop(): bpf_loop() in BPF (the callback is verified once, not
 *    per iteration), a plain for-loop natively;
 *  - every variable index into a buffer is masked with l7_mask() so the verifier can bound it;
 *    buffers carry slack after the masked range for fixed offsets added to a masked base. */
#ifndef L7_BPF_COMPAT_H
#define L7_BPF_COMPAT_H

#include <linux/types.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "stdlib/bpf assumes a little-endian host and BPF target"
#endif

#ifdef __bpf__
#include <bpf/bpf_helpers.h>   /* bpf_loop (helper 181), __always_inline, SEC */
#else
#include <string.h>
#ifndef __always_inline
#define __always_inline inline __attribute__((always_inline))
#endif
#endif

/* Full unrolling: straight-line code verifies in one walk; gcc spells the pragma differently. */
#if defined(__clang__)
#define L7_UNROLL _Pragma("clang loop unroll(full)")
#elif defined(__GNUC__)
#define L7_UNROLL _Pragma("GCC unroll 64")
#else
#define L7_UNROLL
#endif

#define l7_likely(x)   __builtin_expect(!!(x), 1)
#define l7_unlikely(x) __builtin_expect(!!(x), 0)

/* Hide a value from the optimiser so that a following mask is not dropped: clang removes an
 * `& mask` it can prove redundant from an earlier compare, and the verifier then loses the
 * bound it needs (it tracks the mask, not the compare, on the computed register). */
#ifdef __bpf__
#define l7_barrier_var(v) asm volatile("" : "+r"(v))
#else
#define l7_barrier_var(v) ((void)0)
#endif

/* Masked index: (x & m) with m = 2^k - 1, kept through optimisation. */
#define l7_mask(x, m) ({ __u32 l7__v = (__u32)(x); l7_barrier_var(l7__v); l7__v & (__u32)(m); })

/* Loop callbacks have bpf_loop's signature: return 0 to continue, 1 to stop. */
#define L7_LOOP_CB(name) static long name(__u64 l7_idx __attribute__((unused)), void *l7_ctx)
typedef long (*l7_loop_fn)(__u64, void *);

#ifdef __bpf__
/* Returns the number of iterations run, as bpf_loop does. */
#define l7_loop(n, cb, ctx) bpf_loop((n), (void *)(cb), (ctx), 0)
#else
static __always_inline long l7_loop(__u32 n, l7_loop_fn cb, void *ctx)
{
	__u32 i;

	for (i = 0; i < n; i++)
		if (cb(i, ctx))
			return i + 1;
	return n;
}
#endif

/* Unaligned little-endian loads. BPF: the kernel allows unaligned map-value access on x86
 * and a plain load is one instruction (memcpy becomes eight byte loads). */
#ifdef __bpf__
static __always_inline __u64 l7_ld64(const __u8 *p) { return *(const __u64 *)p; }
static __always_inline __u32 l7_ld32(const __u8 *p) { return *(const __u32 *)p; }
static __always_inline void l7_st64(__u8 *p, __u64 v) { *(__u64 *)p = v; }
static __always_inline void l7_st32(__u8 *p, __u32 v) { *(__u32 *)p = v; }
#else
static __always_inline __u64 l7_ld64(const __u8 *p) { __u64 v; memcpy(&v, p, 8); return v; }
static __always_inline __u32 l7_ld32(const __u8 *p) { __u32 v; memcpy(&v, p, 4); return v; }
static __always_inline void l7_st64(__u8 *p, __u64 v) { memcpy(p, &v, 8); }
static __always_inline void l7_st32(__u8 *p, __u32 v) { memcpy(p, &v, 4); }
#endif

/* Count trailing zeros; x must be non-zero (callers OR in a sentinel bit). */
static __always_inline __u32 l7_ctz64(__u64 x) { return (__u32)__builtin_ctzll(x); }

/* BPF has no rotate instruction; a 64-bit double copy and a single shift is cheaper there
 * than the usual two shifts and an or (measured: 15% on SHA-256, platform.md). */
static __always_inline __u32 l7_rotr32(__u32 x, unsigned n)
{
#ifdef __bpf__
	__u64 d = (__u64)x | ((__u64)x << 32);
	return (__u32)(d >> n);
#else
	return (x >> n) | (x << ((32 - n) & 31));
#endif
}
static __always_inline __u32 l7_rotl32(__u32 x, unsigned n) { return l7_rotr32(x, (32 - n) & 31); }
static __always_inline __u64 l7_rotl64(__u64 x, unsigned n) { return (x << n) | (x >> ((64 - n) & 63)); }

/* Eight lower-case ASCII letters at once (other bytes unchanged). */
static __always_inline __u64 l7_lower8(__u64 w)
{
	const __u64 ones = 0x0101010101010101ULL;
	__u64 h = w & (0x7f * ones);
	__u64 ge_a = h + (0x80 - 'A') * ones;      /* high bit: byte >= 'A' (7-bit) */
	__u64 gt_z = h + (0x80 - 'Z' - 1) * ones;  /* high bit: byte >  'Z' (7-bit) */
	__u64 up = ge_a & ~gt_z & ~w & (0x80 * ones);
	return w | (up >> 2);
}

/* Mask of the low n bytes of a word (n <= 8). */
static __always_inline __u64 l7_bytemask(__u32 n)
{
	return n >= 8 ? ~0ULL : ((1ULL << (n * 8)) - 1);
}

/* x, the xor of two words compared at bytes [j, j + 8), cut to the first n bytes of the
 * compare: bytes at n and past it count as equal. */
static __always_inline __u64 l7_word_upto(__u64 x, __u32 n, __u32 j)
{
	if (n <= j)
		return 0;
	return n < j + 8 ? x & l7_bytemask(n - j) : x;
}

/* Eight characters as the little-endian word a l7_ld64 of them returns. */
#define L7_W8(a, b, c, d, e, f, g, h)                                                        \
	((__u64)(__u8)(a) | (__u64)(__u8)(b) << 8 | (__u64)(__u8)(c) << 16 |                   \
	 (__u64)(__u8)(d) << 24 | (__u64)(__u8)(e) << 32 | (__u64)(__u8)(f) << 40 |            \
	 (__u64)(__u8)(g) << 48 | (__u64)(__u8)(h) << 56)

/* The policy's own tables (header names, JWT settings; l7/abi.h): constants of the compiled
 * object in BPF. The reference evaluator (ir/eval_tables.c) defines them writable and fills
 * them from each program it runs, and builds with L7_POLICY_TABLE defined empty, so that every
 * declaration it sees says what its definitions are. */
#ifndef L7_POLICY_TABLE
#define L7_POLICY_TABLE const
#endif

#endif /* L7_BPF_COMPAT_H */
