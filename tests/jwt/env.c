/* Native environment of stdlib/bpf/jwt.h for the tests: what the maps are in BPF (work area,
 * keys, a small direct-mapped cache, stats), plus token building and request set-up. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jwt_test.h"
#define L7_JWT_NOW() test_now
#include "base64url.h"
#include "http.h"
#include "jwt.h"
#include "jwt_key.h"
#include "jwt_tables.h"

long long test_now = T_NOW;

static struct l7_jwt_work work;
static struct l7_jwt_key keys[L7_MAX_JWT];
#define NCACHE 64
static struct {
	int used;
	struct l7_jwt_cache_key k;
	struct l7_jwt_cached v;
} cache[NCACHE];
static unsigned long long stats[L7_STAT_MAX];

static const unsigned char key0[] = "secret-key-0123456789";
static unsigned char key1[100];
/* RFC 7515 A.1: the JWK "k" value, base64url-decoded */
static const unsigned char key2[64] = {
	0x03, 0x23, 0x35, 0x4b, 0x2b, 0x0f, 0xa5, 0xbc, 0x83, 0x7e, 0x06, 0x65, 0x77, 0x7b, 0xa6, 0x8f,
	0x5a, 0xb3, 0x28, 0xe6, 0xf0, 0x54, 0xc9, 0x28, 0xa9, 0x0f, 0x84, 0xb2, 0xd2, 0x50, 0x2e, 0xbf,
	0xd3, 0xfb, 0x5a, 0x92, 0xd2, 0x06, 0x47, 0xef, 0x96, 0x8a, 0xb4, 0xc3, 0x77, 0x62, 0x3d, 0x22,
	0x3d, 0x2e, 0x21, 0x72, 0x05, 0x2e, 0x4f, 0x08, 0xc0, 0xcd, 0x9a, 0xf5, 0x67, 0xd0, 0x80, 0xa3,
};

const unsigned char *test_raw_key(unsigned cfg, size_t *len)
{
	for (int i = 0; i < 100; i++)
		key1[i] = (unsigned char)(i * 7 + 1);
	switch (cfg) {
	case 0: *len = sizeof key0 - 1; return key0;
	case 1: *len = sizeof key1; return key1;
	case 2: *len = sizeof key2; return key2;
	default: *len = 0; return key0;
	}
}

/* As l7run does it (jwt_key.h): keys over 64 bytes are replaced by their SHA-256. */
void test_key(unsigned cfg, struct l7_jwt_key *k)
{
	size_t n;
	const unsigned char *raw = test_raw_key(cfg, &n);

	l7_jwt_key_set(k, raw, n);
	k->gen = 1;
}

size_t make_token(char *out, size_t cap, const char *hdr, const char *pay,
		  const unsigned char *key, size_t klen)
{
	static __u8 src[L7_MAX_HEAD + 64], tok[L7_MAX_HEAD + 64], kb[L7_MAX_HEAD + 64];
	static struct l7_sha256 sha;
	__u8 mac[32];
	size_t hl = strlen(hdr), pl = strlen(pay);
	int n = 0, m;

	memcpy(src, hdr, hl);
	m = l7_b64url_encode(src, 0, (__u32)hl, tok, 0, 8192);
	n = m;
	tok[n++] = '.';
	memcpy(src, pay, pl);
	m = l7_b64url_encode(src, 0, (__u32)pl, tok, (__u32)n, 8192);
	n += m;
	memcpy(kb, key, klen);
	l7_hmac_sha256_setkey(&sha, kb, 0, (__u32)klen);
	l7_hmac_sha256(&sha, tok, 0, (__u32)n, mac);
	tok[n++] = '.';
	memcpy(src, mac, 32);
	n += l7_b64url_encode(src, 0, 32, tok, (__u32)n, 64);
	if ((size_t)n >= cap)
		abort();
	memcpy(out, tok, (size_t)n);
	out[n] = 0;
	return (size_t)n;
}

size_t make_token_cfg(char *out, size_t cap, const char *hdr, const char *pay, unsigned cfg)
{
	size_t kl;
	const unsigned char *k = test_raw_key(cfg, &kl);
	return make_token(out, cap, hdr, pay, k, kl);
}

size_t sign_raw(char *out, size_t cap, const char *input, unsigned cfg)
{
	static __u8 src[L7_MAX_HEAD + 64], kb[L7_MAX_HEAD + 64], tail[128];
	static struct l7_sha256 sha;
	__u8 mac[32];
	size_t n = strlen(input), kl;
	const unsigned char *k = test_raw_key(cfg, &kl);
	int m;

	memcpy(src, input, n);
	memcpy(kb, k, kl);
	l7_hmac_sha256_setkey(&sha, kb, 0, (__u32)kl);
	l7_hmac_sha256(&sha, src, 0, (__u32)n, mac);
	memcpy(src, mac, 32);
	m = l7_b64url_encode(src, 0, 32, tail, 0, 64);
	if (n + 1 + (size_t)m >= cap)
		abort();
	memmove(out, input, n);   /* out may be input */
	out[n] = '.';
	memcpy(out + n + 1, tail, (size_t)m);
	out[n + 1 + m] = 0;
	return n + 1 + (size_t)m;
}

int make_req(struct l7_req *req, const char *line)
{
	int n;

	memset(req, 0, sizeof *req);
	n = snprintf((char *)req->buf, L7_MAX_HEAD, "GET /feed HTTP/1.1\r\nHost: svc\r\n%s%s\r\n",
		     line, *line ? "\r\n" : "");
	if (n >= L7_MAX_HEAD)
		return -1;
	return l7_http_parse_head(req, (__u32)n);
}

void env_reset(void)
{
	memset(cache, 0, sizeof cache);
	memset(stats, 0, sizeof stats);
	for (unsigned i = 0; i < L7_MAX_JWT; i++)
		test_key(i, &keys[i]);
	keys[3].len = 0;   /* configuration 3 has no key */
}

unsigned long long env_stat(unsigned idx) { return stats[idx]; }
void env_set_gen(unsigned cfg, unsigned gen) { keys[cfg].gen = gen; }

struct l7_jwt_work *l7_jwt_native_work(void) { return &work; }
const struct l7_jwt_key *l7_jwt_native_key(__u32 cfg) { return cfg < L7_MAX_JWT ? &keys[cfg] : NULL; }
void l7_jwt_native_stat(__u32 idx) { if (idx < L7_STAT_MAX) stats[idx]++; }

const struct l7_jwt_cached *l7_jwt_native_cache_get(const struct l7_jwt_cache_key *k)
{
	unsigned i = (unsigned)(k->hash % NCACHE);
	return cache[i].used && !memcmp(&cache[i].k, k, sizeof *k) ? &cache[i].v : NULL;
}

void l7_jwt_native_cache_put(const struct l7_jwt_cache_key *k, const struct l7_jwt_cached *v)
{
	unsigned i = (unsigned)(k->hash % NCACHE);
	cache[i].used = 1;
	cache[i].k = *k;
	cache[i].v = *v;
}
