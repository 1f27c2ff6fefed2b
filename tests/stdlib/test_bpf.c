/* The stdlib/bpf headers in the running kernel: bpf/stdlib_kern.c is loaded with libbpf
 * (verifier log level 4: "processed N insns" is printed per program), each building block is
 * run with BPF_PROG_TEST_RUN on inputs placed in maps, and every result is compared with the
 * corpus' expected values and with the native build of the same headers. Needs root
 * (CAP_BPF); it fails rather than skips without it. */
#include <criterion/criterion.h>
#include <bpf/bpf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base64url.h"
#include "corpus.h"
#include "kobj.h"
#include "hmac.h"
#include "http.h"
#include "xxhash.h"
#include "bpf/stdlib_kern.h"

#ifndef L7_TEST_BPF_OBJ
#define L7_TEST_BPF_OBJ "stdlib_kern.bpf.o"
#endif

static const char *const progs[] = {
	"t_sha256", "t_sha256_stream", "t_hmac", "t_b64dec", "t_b64enc",
	"t_xxh32", "t_xxh64", "t_http", "t_chunked",
};
#define NPROG (int)(sizeof progs / sizeof progs[0])

static struct {
	int in, out, sha, req, chunk;
} K;
static struct t_in tin;
static struct t_out tout;
static struct l7_req kreq, nreq;   /* kernel's and native parse */
static struct l7_sha256 nsha;
static const __u32 zero;
static const struct kobj_fd maps[] = {
	{ "t_in", &K.in }, { "t_out", &K.out }, { "t_sha", &K.sha }, { "t_req", &K.req },
	{ "t_chunk", &K.chunk }, { 0 },
};
static struct kobj KO = { .path = L7_TEST_BPF_OBJ, .progs = progs, .n = NPROG, .maps = maps };

static int prog(const char *name)
{
	for (int i = 0; i < NPROG; i++)
		if (!strcmp(progs[i], name))
			return i;
	cr_assert_fail("no program %s", name);
	return -1;
}

static void put_in(void)
{
	kobj_load(&KO);
	cr_assert_eq(bpf_map_update_elem(K.in, &zero, &tin, BPF_ANY), 0);
}

static void get_out(void)
{
	cr_assert_eq(bpf_map_lookup_elem(K.out, &zero, &tout), 0);
}

static void hex(const __u8 *p, size_t n, char *o)
{
	for (size_t i = 0; i < n; i++)
		sprintf(o + 2 * i, "%02x", p[i]);
	o[2 * n] = 0;
}

Test(bpf, verifier)
{
	kobj_load(&KO);
	for (int i = 0; i < NPROG; i++) {
		printf("verifier: %-16s processed %ld insns\n", progs[i], KO.insns[i]);
		cr_expect_gt(KO.insns[i], 0);
	}
	fflush(stdout);
}

Test(corpus, sha256)
{
	struct tsv t;
	char got[65];
	int n = 0;

	cr_assert_eq(tsv_load("vectors/sha256.tsv", &t), 0, "corpus (set L7_CORPUS)");
	for (int r = 0; r < t.nrows; r++) {
		const char *msg = tsv_get(&t, r, 1);
		int ch, count;

		if (sscanf(msg, "repeat:%x:%d", &ch, &count) == 2) {
			/* one million 'a': block-aligned streaming, state kept in the t_sha map */
			long left = count;
			memset(tin.data, ch, sizeof tin.data);
			tin.op = T_SHA_INIT;
			put_in();
			kobj_run(&KO, prog("t_sha256_stream"), 1);
			while (left > L7_DATA_MASK + 1) {
				tin.op = T_SHA_UPDATE;
				tin.len = L7_DATA_MASK + 1;
				put_in();
				kobj_run(&KO, prog("t_sha256_stream"), 1);
				get_out();
				cr_assert_eq(tout.rc, 0);
				left -= L7_DATA_MASK + 1;
			}
			tin.op = T_SHA_FINAL;
			tin.len = (__u32)left;
			put_in();
			kobj_run(&KO, prog("t_sha256_stream"), 1);
		} else {
			long len = hex_decode(msg, tin.data, sizeof tin.data);
			cr_assert_geq(len, 0);
			tin.len = (__u32)len;
			put_in();
			kobj_run(&KO, prog("t_sha256"), 1);
		}
		get_out();
		cr_expect_eq(tout.rc, 0);
		hex(tout.dig, 32, got);
		cr_expect_str_eq(got, tsv_get(&t, r, 3), "BPF sha256 %s", tsv_get(&t, r, 0));
		n++;
	}
	/* and against the native build for every length across the block boundaries */
	for (__u32 len = 0; len <= 300; len++) {
		__u8 dig[32];
		for (__u32 i = 0; i < len; i++)
			tin.data[i] = (__u8)(i * 131 + len);
		tin.len = len;
		put_in();
		kobj_run(&KO, prog("t_sha256"), 1);
		get_out();
		l7_sha256(&nsha, tin.data, 0, len, dig);
		cr_expect(!memcmp(dig, tout.dig, 32), "BPF vs native sha256, length %u", len);
	}
	tin.len = 1024;
	printf("bpf sha256: %d/%d vectors + 301 lengths vs native; 1 KiB in %u ns\n", n, t.nrows,
	       (put_in(), kobj_run(&KO, prog("t_sha256"), 200)));
	tsv_free(&t);
}

Test(corpus, hmac_sha256)
{
	struct tsv t;
	int n = 0;

	cr_assert_eq(tsv_load("vectors/hmac_sha256.tsv", &t), 0, "corpus (set L7_CORPUS)");
	for (int r = 0; r < t.nrows; r++) {
		long kl = hex_decode(tsv_get(&t, r, 1), tin.key, sizeof tin.key);
		long dl = hex_decode(tsv_get(&t, r, 2), tin.data, sizeof tin.data);
		int mb = atoi(tsv_get(&t, r, 4));
		char got[65];

		cr_assert(kl >= 0 && dl >= 0 && mb > 0 && mb <= 32);
		tin.klen = (__u32)kl;
		tin.len = (__u32)dl;
		put_in();
		kobj_run(&KO, prog("t_hmac"), 1);
		get_out();
		cr_expect_eq(tout.rc, 0);
		hex(tout.dig, (size_t)mb, got);
		cr_expect_str_eq(got, tsv_get(&t, r, 3), "BPF hmac %s", tsv_get(&t, r, 0));
		n++;
	}
	for (__u32 len = 0; len <= 200; len += 7) {
		__u8 mac[32];
		for (__u32 i = 0; i < len; i++)
			tin.data[i] = (__u8)(i ^ len);
		for (__u32 i = 0; i < 100; i++)
			tin.key[i] = (__u8)(i * 7);
		tin.len = len;
		tin.klen = len % 100;
		put_in();
		kobj_run(&KO, prog("t_hmac"), 1);
		get_out();
		l7_hmac_sha256_setkey(&nsha, tin.key, 0, tin.klen);
		l7_hmac_sha256(&nsha, tin.data, 0, len, mac);
		cr_expect(!memcmp(mac, tout.dig, 32), "BPF vs native hmac, length %u", len);
	}
	tin.len = 300;
	tin.klen = 32;
	printf("bpf hmac-sha256: %d/%d vectors + native comparison; 300 B in %u ns\n", n, t.nrows,
	       (put_in(), kobj_run(&KO, prog("t_hmac"), 200)));
	tsv_free(&t);
}

Test(corpus, xxhash)
{
	struct tsv t;
	int n = 0;

	cr_assert_eq(tsv_load("vectors/xxhash.tsv", &t), 0, "corpus (set L7_CORPUS)");
	for (int r = 0; r < t.nrows; r++) {
		int is32 = !strcmp(tsv_get(&t, r, 0), "xxh32");
		long len = hex_decode(tsv_get(&t, r, 3), tin.data, sizeof tin.data);
		unsigned long long seed = strtoull(tsv_get(&t, r, 4), NULL, 10);
		unsigned long long want = strtoull(tsv_get(&t, r, 5), NULL, 16);

		tin.len = (__u32)len;
		tin.seed32 = (__u32)seed;
		tin.seed64 = seed;
		put_in();
		kobj_run(&KO, prog(is32 ? "t_xxh32" : "t_xxh64"), 1);
		get_out();
		cr_expect_eq(tout.h, want, "BPF %s %s", tsv_get(&t, r, 0), tsv_get(&t, r, 1));
		n++;
	}
	for (__u32 len = 0; len <= 200; len++) {
		for (__u32 i = 0; i < len; i++)
			tin.data[i] = (__u8)(i * 29 + 3);
		tin.len = len;
		tin.seed32 = len;
		tin.seed64 = 0x9e3779b97f4a7c15ULL * len;
		put_in();
		kobj_run(&KO, prog("t_xxh32"), 1);
		get_out();
		cr_expect_eq(tout.h, l7_xxh32(tin.data, 0, len, len), "BPF vs native xxh32 %u", len);
		kobj_run(&KO, prog("t_xxh64"), 1);
		get_out();
		cr_expect_eq(tout.h, l7_xxh64(tin.data, 0, len, tin.seed64), "BPF vs native xxh64 %u",
			     len);
	}
	printf("bpf xxhash: %d/%d vectors + 201 lengths vs native\n", n, t.nrows);
	tsv_free(&t);
}

Test(corpus, base64url)
{
	struct tsv t;
	int n = 0;

	cr_assert_eq(tsv_load("vectors/base64url.tsv", &t), 0, "corpus (set L7_CORPUS)");
	for (int r = 0; r < t.nrows; r++) {
		const char *kind = tsv_get(&t, r, 0);
		char text[1024];
		__u8 bytes[512];
		size_t tl = unescape(tsv_get(&t, r, 3), text, sizeof text);
		long bl = strcmp(kind, "decode-reject") ? hex_decode(tsv_get(&t, r, 1), bytes, 512) : -1;

		memcpy(tin.data, text, tl);
		tin.len = (__u32)tl;
		tin.klen = 4096;
		put_in();
		kobj_run(&KO, prog("t_b64dec"), 1);
		get_out();
		cr_expect_eq(tout.rc, bl, "BPF decode \"%s\"", tsv_get(&t, r, 3));
		if (bl > 0)
			cr_expect(!memcmp(tout.data, bytes, (size_t)bl));
		if (!strcmp(kind, "encode")) {
			memcpy(tin.data, bytes, (size_t)bl);
			tin.len = (__u32)bl;
			put_in();
			kobj_run(&KO, prog("t_b64enc"), 1);
			get_out();
			cr_expect_eq(tout.rc, (long)tl, "BPF encode %s", tsv_get(&t, r, 1));
			cr_expect(!memcmp(tout.data, text, tl));
		}
		n++;
	}
	printf("bpf base64url: %d/%d vectors\n", n, t.nrows);
	tsv_free(&t);
}

/* Parse data[0..len) in the kernel and natively; compare everything the parse defines. */
static int compare_parse(const char *what, const unsigned char *data, size_t len)
{
	size_t inbuf = len < sizeof kreq.buf ? len : sizeof kreq.buf;
	int nrc;

	memset(&kreq, 0x5a, sizeof kreq);
	memcpy(kreq.buf, data, inbuf);
	nreq = kreq;
	nrc = l7_http_parse_head(&nreq, (__u32)len);
	cr_assert_eq(bpf_map_update_elem(K.req, &zero, &kreq, BPF_ANY), 0);
	tin.len = (__u32)len;
	put_in();
	kobj_run(&KO, prog("t_http"), 1);
	get_out();
	cr_assert_eq(bpf_map_lookup_elem(K.req, &zero, &kreq), 0);
	cr_expect_eq(tout.rc, nrc, "%s: BPF rc %lld, native %d", what, (long long)tout.rc, nrc);
	if (nrc > 0 && tout.rc == nrc) {
		/* every field before hdr[], then the wanted values that are present */
		cr_expect(!memcmp(&kreq, &nreq, offsetof(struct l7_req, hdr)), "%s: fields differ", what);
		for (int i = 0; i < L7_MAX_WANTED; i++)
			if (nreq.hdr_present & (1u << i))
				cr_expect(!memcmp(&kreq.hdr[i], &nreq.hdr[i], sizeof nreq.hdr[i]),
					  "%s: hdr[%d] differs", what, i);
	}
	return nrc;
}

static int compare_chunked(const char *what, __u32 off, __u32 len)
{
	struct l7_chunked st = { 0 };
	int nrc = l7_http_chunked(&st, nreq.buf, off, len);

	struct l7_chunked fresh = { 0 };

	cr_assert_eq(bpf_map_update_elem(K.chunk, &zero, &fresh, BPF_ANY), 0);
	tin.klen = off;
	tin.len = len;
	put_in();
	kobj_run(&KO, prog("t_chunked"), 1);
	get_out();
	cr_expect_eq(tout.rc, nrc, "%s: BPF chunked %lld, native %d", what, (long long)tout.rc, nrc);
	return nrc;
}

/* Every request of every corpus stream, framed as walk.c does, in both builds. */
static void corpus_streams(const char *index, int *heads, int *bodies)
{
	struct tsv t;

	kobj_load(&KO);
	cr_assert_eq(tsv_load(index, &t), 0, "corpus (set L7_CORPUS)");
	for (int r = 0; r < t.nrows; r++) {
		size_t len, off = 0;
		unsigned char *d = corpus_read(tsv_get(&t, r, 1), &len);

		cr_assert_not_null(d);
		for (int k = 0; k < 8 && off < len; k++) {
			int rc = compare_parse(tsv_get(&t, r, 0), d + off, len - off);
			size_t inbuf = len - off < sizeof nreq.buf ? len - off : sizeof nreq.buf, end;

			(*heads)++;
			if (rc <= 0 || (nreq.flags & (L7_REQ_UPGRADE | L7_REQ_CLOSE)))
				break;
			if (nreq.flags & L7_REQ_CHUNKED) {
				int e = compare_chunked(tsv_get(&t, r, 0), nreq.head_len, (__u32)inbuf);
				(*bodies)++;
				if (e <= 0)
					break;
				end = (size_t)e;
			} else {
				end = l7_http_msg_end(&nreq);
			}
			off += end;
		}
		free(d);
	}
	tsv_free(&t);
}

Test(corpus, http_corpus)
{
	int heads = 0, bodies = 0;

	corpus_streams("http/index.tsv", &heads, &bodies);
	corpus_streams("smuggling/index.tsv", &heads, &bodies);
	printf("bpf http: %d heads and %d chunked bodies of the corpus identical to native\n", heads,
	       bodies);
}

/* Heads at the limits: the masked indices near L7_MAX_HEAD are where BPF and native could
 * part ways. */
Test(bpf, http_limits)
{
	static unsigned char b[L7_MAX_HEAD + L7_BUF_SLACK];
	const char *typical = "GET /api/v1/items?id=42 HTTP/1.1\r\nHost: example.com\r\n"
			      "User-Agent: curl/8.0\r\nAccept: */*\r\nX-User: alice\r\n"
			      "Authorization: Bearer abc.def.ghi\r\n\r\n";
	size_t n;

	kobj_load(&KO);
	for (size_t total = L7_MAX_HEAD - 40; total <= L7_MAX_HEAD + 3; total++) {
		n = (size_t)sprintf((char *)b, "GET / HTTP/1.1\r\nHost: h\r\nPad: ");
		while (n < total - 4)
			b[n++] = 'x';
		memcpy(b + n, "\r\n\r\n", 4);
		compare_parse("padded head", b, total);
		compare_parse("padded head + junk", b, sizeof b);
		compare_parse("padded head, cut", b, total - 1);
	}
	memset(b, 'a', sizeof b);
	memcpy(b, "GET /", 5);
	compare_parse("long target", b, sizeof b);
	compare_parse("long target, cut", b, L7_HTTP_MAX_LINE);
	for (n = 0; n + 2 <= sizeof b; n += 2)
		memcpy(b + n, "\r\n", 2);
	compare_parse("empty lines", b, sizeof b);
	n = strlen(typical);
	for (size_t cut = 0; cut <= n; cut++)
		compare_parse("typical, every prefix", (const unsigned char *)typical, cut);
	cr_assert_eq(compare_parse("typical", (const unsigned char *)typical, n), (int)n);
	printf("bpf http: typical %zu-byte head parsed in %u ns (native build: same result)\n", n,
	       kobj_run(&KO, prog("t_http"), 1000));
}
