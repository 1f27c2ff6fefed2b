/* balance.h: which endpoint of an upstream set takes a request. The same code runs in BPF
 * (stdlib/bpf/policy.c, called by the generated policy) and natively (ir/balance.c builds the
 * rings with it, ir/eval.c predicts the kernel's choice with it).
 *
 * Ketama (libketama's consistent hashing, with xxHash instead of MD5): every endpoint owns
 * points on a ring of 32-bit hashes, in proportion to its weight; a request goes to the
 * endpoint of the first point >= the hash of its key, wrapping past the last point. Removing
 * an endpoint moves only the keys that were on its points.
 *
 *   point k of endpoint A.B.C.D:P   low 32 bits of XXH64("A.B.C.D:P-k", seed 0)
 *   key                              low 32 bits of XXH64(key bytes, seed 0); a header that is
 *                                    absent hashes as "" (so does an empty one); the source is
 *                                    the 4 address bytes in network order
 *   points of endpoint i             256 * w_i / g, g the greatest common divisor of the
 *                                    set's weights (100,200 is 1,2): the points of an endpoint
 *                                    do not depend on the rest of the set, so removing or
 *                                    adding one moves only keys to or from it (unless that
 *                                    changes g). libketama gives 160 * n * w_i / sum(w) for
 *                                    a set of n: the same for equal weights, but removing one
 *                                    of weights 1,2,3,4 moves 11% of the others' keys too.
 *                                    Past L7_LB_RING_MAX - 1 points (sum(w) / g > 63) they are
 *                                    scaled to max(1, floor((L7_LB_RING_MAX - 1) * w_i /
 *                                    sum(w))), and then depend on the set. Shares of weights
 *                                    1,1,2 deviate ~1.5 percentage points RMS from the weights
 *                                    (tests/compiler/test_balance.c).
 *
 * The ring is sorted and padded to a power of two with 0xffffffff points that belong to the
 * first point's endpoint, so the first point >= h always exists and the search is log2(size)
 * fixed steps without a branch on the data (the verifier walks it once). With log2n a constant
 * (the generated policy's call, inlined), LLVM unrolls the steps. */
#ifndef L7_BPF_BALANCE_H
#define L7_BPF_BALANCE_H

#include "compat.h"
#include "xxhash.h"

#define L7_LB_POINTS    256   /* ring points per unit of weight */
#define L7_LB_RING_LOG2 14    /* rings of at most 16384 entries (64 KiB of points + 16 KiB) */
#define L7_LB_RING_MAX  (1u << L7_LB_RING_LOG2)

static __always_inline __u32 l7_lb_hash(const __u8 *buf, __u32 off, __u32 len)
{
	return (__u32)l7_xxh64(buf, off, len, 0);
}

static __always_inline __u32 l7_lb_hash_addr(__u32 ip_be)
{
	return (__u32)l7_xxh64_u32(ip_be, 0);
}

/* Index of the first of the 1 << log2n points >= h (the padding guarantees one). Each step
 * halves the range: lo += step when ring[lo + step - 1] < h, computed as the sign of a 64-bit
 * difference of a value hidden from the optimiser, which would otherwise turn it back into a
 * compare and branch (and the verifier would walk up to 2^log2n paths). */
static __always_inline __u32 l7_ketama_find(const __u32 *ring, __u32 log2n, __u32 h)
{
	__u32 n = 1u << (log2n & 31), lo = 0;

	for (__u32 i = 0; i < L7_LB_RING_LOG2; i++) {
		if (i >= log2n)
			break;
		__u32 step = n >> (i + 1);
		__u64 point = ring[(lo + step - 1) & (n - 1)];
		l7_barrier_var(point);   /* unknown high bits: the shift cannot become a compare */
		__u64 below = (point - (__u64)h) >> 63;
		lo += step & (__u32)-below;
	}
	return lo & (n - 1);
}

#endif /* L7_BPF_BALANCE_H */
