/* base64url.h: strict base64url (RFC 4648 section 5) as JWS uses it (RFC 7515 2): no
 * padding, no whitespace, no standard-alphabet '+' '/', canonical (unused low bits zero).
 * For BPF and natively.
 *
 * API (buffers follow the stdlib/bpf convention: indices masked with L7_DATA_MASK, readable
 * and writable for L7_DATA_MASK + 1 + 64 bytes)
 *   int l7_b64url_decode(const __u8 *src, __u32 soff, __u32 slen,
 *                        __u8 *dst, __u32 doff, __u32 dcap)
 *       Decodes src[soff..soff+slen) to dst[doff..). Returns the decoded length, or -1 for
 *       any byte outside the alphabet (including '='), slen % 4 == 1, non-zero unused bits,
 *       or output longer than dcap. dst may be written past the returned length (up to the
 *       next multiple of 3, and on error) but never past doff + dcap + 2.
 *   int l7_b64url_encode(const __u8 *src, __u32 soff, __u32 slen,
 *                        __u8 *dst, __u32 doff, __u32 dcap)
 *       Unpadded encoding; returns its length or -1 if it does not fit in dcap.
 *
 * Each l7_loop callback handles 8 quanta (32 characters / 24 bytes), so a token costs one
 * callback per 32 characters, and the verifier walks one callback. */
#ifndef L7_BPF_BASE64URL_H
#define L7_BPF_BASE64URL_H

#include "compat.h"
#include <l7/abi.h>

#ifndef L7_DATA_MASK
#define L7_DATA_MASK (L7_MAX_HEAD - 1)
#endif

#define L7__B64V(c) ((__u8)((c) >= 'A' && (c) <= 'Z' ? (c) - 'A' :                          \
			   (c) >= 'a' && (c) <= 'z' ? (c) - 'a' + 26 :                      \
			   (c) >= '0' && (c) <= '9' ? (c) - '0' + 52 :                      \
			   (c) == '-' ? 62 : (c) == '_' ? 63 : 0xff))
#define L7__B4(b)   L7__B64V((b)), L7__B64V((b) + 1), L7__B64V((b) + 2), L7__B64V((b) + 3)
#define L7__B16(b)  L7__B4(b), L7__B4((b) + 4), L7__B4((b) + 8), L7__B4((b) + 12)
#define L7__B64(b)  L7__B16(b), L7__B16((b) + 16), L7__B16((b) + 32), L7__B16((b) + 48)
/* 0..63, or 0xff for bytes outside the base64url alphabet */
static const __u8 l7_b64url_dec[256] = {
	L7__B64(0), L7__B64(64), L7__B64(128), L7__B64(192),
};
static const char l7_b64url_enc[64] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

struct l7_b64_ctx {
	const __u8 *src;
	__u8 *dst;
	__u32 soff, doff;
	__u32 nq;     /* whole 4-character quanta (decode) / 3-byte groups (encode) */
	__u32 bad;    /* OR of the decoded values: bit 7 set = invalid byte */
};

L7_LOOP_CB(l7_b64url_dec_cb)
{
	struct l7_b64_ctx *x = l7_ctx;
	__u32 q0 = (__u32)l7_idx * 8, g;
	const __u8 *s = x->src + l7_mask(x->soff + 4 * q0, L7_DATA_MASK);
	__u8 *d = x->dst + l7_mask(x->doff + 3 * q0, L7_DATA_MASK);
	__u32 bad = 0;

	for (g = 0; g < 8; g++) {
		__u32 a, b, c, e, v;

		if (q0 + g >= x->nq)
			break;
		a = l7_b64url_dec[s[4 * g]];
		b = l7_b64url_dec[s[4 * g + 1]];
		c = l7_b64url_dec[s[4 * g + 2]];
		e = l7_b64url_dec[s[4 * g + 3]];
		bad |= a | b | c | e;
		v = a << 18 | b << 12 | c << 6 | e;
		d[3 * g] = (__u8)(v >> 16);
		d[3 * g + 1] = (__u8)(v >> 8);
		d[3 * g + 2] = (__u8)v;
	}
	x->bad |= bad;
	return 0;
}

static __always_inline int l7_b64url_decode(const __u8 *src, __u32 soff, __u32 slen, __u8 *dst,
					    __u32 doff, __u32 dcap)
{
	struct l7_b64_ctx x = { .src = src, .dst = dst, .soff = soff, .doff = doff };
	__u32 rem = slen & 3, out, a, b, c = 0, v;
	const __u8 *s;
	__u8 *d;

	if (rem == 1 || soff > L7_DATA_MASK + 1 || slen > L7_DATA_MASK + 1 - soff)
		return -1;
	out = slen / 4 * 3 + (rem ? rem - 1 : 0);
	if (out > dcap || doff > L7_DATA_MASK + 1 || out > L7_DATA_MASK + 1 - doff)
		return -1;
	x.nq = slen / 4;
	l7_loop((x.nq + 7) / 8, l7_b64url_dec_cb, &x);
	if (x.bad & 0x80)
		return -1;
	if (!rem)
		return (int)out;
	/* Last 2 or 3 characters: 1 or 2 bytes; the bits they do not fill must be zero. */
	s = src + l7_mask(soff + 4 * x.nq, L7_DATA_MASK);
	d = dst + l7_mask(doff + 3 * x.nq, L7_DATA_MASK);
	a = l7_b64url_dec[s[0]];
	b = l7_b64url_dec[s[1]];
	if (rem == 3)
		c = l7_b64url_dec[s[2]];
	if ((a | b | c) & 0x80)
		return -1;
	v = a << 18 | b << 12 | c << 6;
	if (rem == 2 ? (v & 0xffff) : (v & 0xff))
		return -1;
	d[0] = (__u8)(v >> 16);
	if (rem == 3)
		d[1] = (__u8)(v >> 8);
	return (int)out;
}

L7_LOOP_CB(l7_b64url_enc_cb)
{
	struct l7_b64_ctx *x = l7_ctx;
	__u32 q0 = (__u32)l7_idx * 8, g;
	const __u8 *s = x->src + l7_mask(x->soff + 3 * q0, L7_DATA_MASK);
	__u8 *d = x->dst + l7_mask(x->doff + 4 * q0, L7_DATA_MASK);

	for (g = 0; g < 8; g++) {
		__u32 v;

		if (q0 + g >= x->nq)
			break;
		v = (__u32)s[3 * g] << 16 | (__u32)s[3 * g + 1] << 8 | s[3 * g + 2];
		d[4 * g] = l7_b64url_enc[(v >> 18) & 63];
		d[4 * g + 1] = l7_b64url_enc[(v >> 12) & 63];
		d[4 * g + 2] = l7_b64url_enc[(v >> 6) & 63];
		d[4 * g + 3] = l7_b64url_enc[v & 63];
	}
	return 0;
}

static __always_inline int l7_b64url_encode(const __u8 *src, __u32 soff, __u32 slen, __u8 *dst,
					    __u32 doff, __u32 dcap)
{
	struct l7_b64_ctx x = { .src = src, .dst = dst, .soff = soff, .doff = doff };
	__u32 rem = slen % 3, out = slen / 3 * 4 + (rem ? rem + 1 : 0), v;
	const __u8 *s;
	__u8 *d;

	if (soff > L7_DATA_MASK + 1 || slen > L7_DATA_MASK + 1 - soff)
		return -1;
	if (out > dcap || doff > L7_DATA_MASK + 1 || out > L7_DATA_MASK + 1 - doff)
		return -1;
	x.nq = slen / 3;
	l7_loop((x.nq + 7) / 8, l7_b64url_enc_cb, &x);
	if (!rem)
		return (int)out;
	s = src + l7_mask(soff + 3 * x.nq, L7_DATA_MASK);
	d = dst + l7_mask(doff + 4 * x.nq, L7_DATA_MASK);
	v = (__u32)s[0] << 16 | (rem == 2 ? (__u32)s[1] << 8 : 0);
	d[0] = l7_b64url_enc[(v >> 18) & 63];
	d[1] = l7_b64url_enc[(v >> 12) & 63];
	if (rem == 2)
		d[2] = l7_b64url_enc[(v >> 6) & 63];
	return (int)out;
}

#endif /* L7_BPF_BASE64URL_H */
