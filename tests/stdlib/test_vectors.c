/* The corpus vectors (sha256, hmac_sha256, xxhash and base64url TSVs) through the
 * stdlib/bpf headers, natively. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base64url.h"
#include "corpus.h"
#include "hmac.h"
#include "xxhash.h"

/* Buffers of the stdlib/bpf convention: L7_DATA_MASK + 1 bytes plus slack. */
#define BUFSZ (L7_DATA_MASK + 1 + 64)
static __u8 in[BUFSZ], in2[BUFSZ], out[BUFSZ];
static struct l7_sha256 sha;

static void hex(const __u8 *p, size_t n, char *o)
{
	for (size_t i = 0; i < n; i++)
		sprintf(o + 2 * i, "%02x", p[i]);
	o[2 * n] = 0;
}

static void load(const char *index, struct tsv *t)
{
	cr_assert_eq(tsv_load(index, t), 0, "cannot read %s/%s (set L7_CORPUS)", corpus_dir(), index);
	cr_assert_gt(t->nrows, 0);
}

Test(corpus, sha256)
{
	struct tsv t;
	int n = 0;

	load("vectors/sha256.tsv", &t);
	for (int r = 0; r < t.nrows; r++) {
		const char *msg = tsv_get(&t, r, 1), *want = tsv_get(&t, r, 3);
		__u8 dig[32];
		char got[65];
		int ch, count;

		if (sscanf(msg, "repeat:%x:%d", &ch, &count) == 2) {
			/* one million 'a': block-aligned streaming through a 16 KiB buffer */
			long left = count;
			memset(in, ch, L7_DATA_MASK + 1);
			l7_sha256_init(&sha);
			while (left > L7_DATA_MASK + 1) {
				cr_assert_eq(l7_sha256_update(&sha, in, 0, L7_DATA_MASK + 1), 0);
				left -= L7_DATA_MASK + 1;
			}
			cr_assert_eq(l7_sha256_final(&sha, in, 0, (__u32)left, dig), 0);
		} else {
			long len = hex_decode(msg, in, L7_DATA_MASK + 1);
			cr_assert_geq(len, 0);
			cr_assert_eq(len, atol(tsv_get(&t, r, 2)));
			/* at offset 0 and at an odd offset: the masked reads must not care */
			cr_assert_eq(l7_sha256(&sha, in, 0, (__u32)len, dig), 0);
			hex(dig, 32, got);
			cr_expect_str_eq(got, want, "sha256 %s", tsv_get(&t, r, 0));
			memmove(in + 13, in, (size_t)len);
			cr_assert_eq(l7_sha256(&sha, in, 13, (__u32)len, dig), 0);
		}
		hex(dig, 32, got);
		cr_expect_str_eq(got, want, "sha256 %s", tsv_get(&t, r, 0));
		n++;
	}
	printf("sha256: %d/%d vectors\n", n, t.nrows);
	tsv_free(&t);
}

Test(vectors, sha256_span_checks)
{
	__u8 dig[32];

	cr_expect_eq(l7_sha256(&sha, in, 0, L7_DATA_MASK + 2, dig), -1);
	cr_expect_eq(l7_sha256(&sha, in, 10, L7_DATA_MASK - 8, dig), -1);
	l7_sha256_init(&sha);
	cr_expect_eq(l7_sha256_update(&sha, in, 0, 65), -1, "update needs whole blocks");
}

Test(corpus, hmac_sha256)
{
	struct tsv t;
	int n = 0;

	load("vectors/hmac_sha256.tsv", &t);
	for (int r = 0; r < t.nrows; r++) {
		long kl = hex_decode(tsv_get(&t, r, 1), in2, L7_DATA_MASK + 1);
		long dl = hex_decode(tsv_get(&t, r, 2), in, L7_DATA_MASK + 1);
		int mb = atoi(tsv_get(&t, r, 4));
		__u8 mac[32], want[32];
		char got[65];

		cr_assert(kl >= 0 && dl >= 0 && mb > 0 && mb <= 32);
		cr_assert_eq(hex_decode(tsv_get(&t, r, 3), want, 32), mb);
		cr_assert_eq(l7_hmac_sha256_setkey(&sha, in2, 0, (__u32)kl), 0);
		cr_assert_eq(l7_hmac_sha256(&sha, in, 0, (__u32)dl, mac), 0);
		hex(mac, (size_t)mb, got);
		cr_expect_str_eq(got, tsv_get(&t, r, 3), "hmac %s", tsv_get(&t, r, 0));
		cr_expect(l7_hmac_equal(mac, want, (__u32)mb), "hmac_equal %s", tsv_get(&t, r, 0));
		if (strcmp(tsv_get(&t, r, 5), "-")) {
			hex(mac, 32, got);
			cr_expect_str_eq(got, tsv_get(&t, r, 5), "full hmac %s", tsv_get(&t, r, 0));
		}
		want[0] ^= 1;
		cr_expect(!l7_hmac_equal(mac, want, (__u32)mb));
		n++;
	}
	printf("hmac-sha256: %d/%d vectors\n", n, t.nrows);
	tsv_free(&t);
}

Test(corpus, xxhash)
{
	struct tsv t;
	int n = 0;

	load("vectors/xxhash.tsv", &t);
	for (int r = 0; r < t.nrows; r++) {
		const char *algo = tsv_get(&t, r, 0);
		long len = hex_decode(tsv_get(&t, r, 3), in, L7_DATA_MASK + 1);
		unsigned long long seed = strtoull(tsv_get(&t, r, 4), NULL, 10);
		unsigned long long want = strtoull(tsv_get(&t, r, 5), NULL, 16), got;

		cr_assert_eq(len, atol(tsv_get(&t, r, 2)), "%s", tsv_get(&t, r, 1));
		for (__u32 off = 0; off < 2; off++) {   /* aligned and unaligned start */
			if (off)
				memmove(in + 7, in, (size_t)len);
			if (!strcmp(algo, "xxh32"))
				got = l7_xxh32(in, off * 7, (__u32)len, (__u32)seed);
			else
				got = l7_xxh64(in, off * 7, (__u32)len, seed);
			cr_expect_eq(got, want, "%s %s seed %llu: %llx != %llx", algo, tsv_get(&t, r, 1),
				     seed, got, want);
		}
		n++;
	}
	printf("xxhash: %d/%d vectors\n", n, t.nrows);
	tsv_free(&t);
}

Test(corpus, base64url)
{
	struct tsv t;
	int n = 0;

	load("vectors/base64url.tsv", &t);
	for (int r = 0; r < t.nrows; r++) {
		const char *kind = tsv_get(&t, r, 0), *bytes = tsv_get(&t, r, 1);
		char text[1024];
		size_t tl = unescape(tsv_get(&t, r, 3), text, sizeof text);
		long bl;
		int got;

		memcpy(in, text, tl);
		if (!strcmp(kind, "decode-reject")) {
			got = l7_b64url_decode(in, 0, (__u32)tl, out, 0, 4096);
			cr_expect_eq(got, -1, "must reject \"%s\"", tsv_get(&t, r, 3));
		} else {
			bl = hex_decode(bytes, in2, 4096);
			cr_assert_geq(bl, 0);
			got = l7_b64url_decode(in, 0, (__u32)tl, out, 0, 4096);
			cr_expect_eq(got, bl, "decode \"%s\"", text);
			cr_expect(got < 0 || !memcmp(out, in2, (size_t)bl), "decode \"%s\" bytes", text);
			got = l7_b64url_decode(in, 0, (__u32)tl, out, 0, (__u32)bl - (bl > 0));
			cr_expect(bl == 0 || got == -1, "decode must respect the output capacity");
			if (!strcmp(kind, "encode")) {
				got = l7_b64url_encode(in2, 0, (__u32)bl, out, 0, 4096);
				cr_expect_eq(got, (int)tl, "encode %s", bytes);
				cr_expect(got < 0 || !memcmp(out, text, tl), "encode %s text", bytes);
				/* the padded form is not JWS base64url */
				if (strchr(tsv_get(&t, r, 2), '=')) {
					size_t pl = strlen(tsv_get(&t, r, 2));
					memcpy(in, tsv_get(&t, r, 2), pl);
					cr_expect_eq(l7_b64url_decode(in, 0, (__u32)pl, out, 0, 4096), -1);
				}
			}
		}
		n++;
	}
	printf("base64url: %d/%d vectors\n", n, t.nrows);
	tsv_free(&t);
}

Test(vectors, base64url_roundtrip_lengths)
{
	/* every length 0..300 at two offsets: callback boundaries at 8 quanta */
	for (__u32 len = 0; len <= 300; len++) {
		for (__u32 i = 0; i < len; i++)
			in[100 + i] = (__u8)(i * 37 + len);
		int e = l7_b64url_encode(in, 100, len, in2, 3, 4096);
		cr_assert_geq(e, 0);
		int d = l7_b64url_decode(in2, 3, (__u32)e, out, 5, 4096);
		cr_assert_eq(d, (int)len);
		cr_assert(!memcmp(out + 5, in + 100, len), "roundtrip %u", len);
	}
}
