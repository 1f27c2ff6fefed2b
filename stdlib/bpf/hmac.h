/* hmac.h: HMAC-SHA256 (RFC 2104 / RFC 4231) on top of sha256.h, for BPF and natively.
 *
 * API
 *   int l7_hmac_sha256_setkey(struct l7_sha256 *c, const __u8 *kbuf, __u32 koff, __u32 klen)
 *       Key from kbuf[koff..koff+klen) (stdlib/bpf buffer convention, see sha256.h); keys
 *       longer than the 64-byte block are hashed first (RFC 2104). A key that is already in
 *       a fixed array (e.g. a policy secret in .rodata) may instead be copied into c->key,
 *       zero-padded to 64 bytes. Returns 0 or -1 (span out of range).
 *   int l7_hmac_sha256(struct l7_sha256 *c, const __u8 *buf, __u32 off, __u32 len,
 *                      __u8 out[32])
 *       MAC of buf[off..off+len) with the key in c->key. Returns 0 or -1.
 *   int l7_hmac_equal(const __u8 *a, const __u8 *b, __u32 n)
 *       1 if the first n (<= 32) bytes are equal; no early exit (timing).
 *
 * The inner and outer hash run as one block sequence (one l7_loop, one verified copy of the
 * compression function): ipad block, data, padding, opad block, inner digest + padding. */
#ifndef L7_BPF_HMAC_H
#define L7_BPF_HMAC_H

#include "sha256.h"

static __always_inline int l7_hmac_sha256_setkey(struct l7_sha256 *c, const __u8 *kbuf,
						 __u32 koff, __u32 klen)
{
	__u32 j;

	if (klen > 64) {
		__u8 *k = c->key;
		if (l7_sha256(c, kbuf, koff, klen, k))
			return -1;
		for (j = 32; j < 64; j += 8)
			l7_st64(k + j, 0);
		return 0;
	}
	if (koff > L7_DATA_MASK + 1 || klen > L7_DATA_MASK + 1 - koff)
		return -1;
	/* Word copy of the key, bytes past klen zeroed: no data-dependent loop. */
	for (j = 0; j < 64; j += 8) {
		__u64 w = l7_ld64(kbuf + l7_mask(koff, L7_DATA_MASK) + j);
		if (klen <= j)
			w = 0;
		else if (klen < j + 8)
			w &= l7_bytemask(klen - j);
		l7_st64(c->key + j, w);
	}
	return 0;
}

static __always_inline int l7_hmac_sha256(struct l7_sha256 *c, const __u8 *buf, __u32 off,
					  __u32 len, __u8 out[32])
{
	c->total = 0;
	return l7_sha256_run(c, buf, off, len, L7_SHA_HMAC | L7_SHA_PAD, out);
}

static __always_inline int l7_hmac_equal(const __u8 *a, const __u8 *b, __u32 n)
{
	__u64 d = 0;
	__u32 j;

	if (n > 32)
		return 0;
	for (j = 0; j < 32; j += 8)
		d |= l7_word_upto(l7_ld64(a + j) ^ l7_ld64(b + j), n, j);
	return d == 0;
}

#endif /* L7_BPF_HMAC_H */
