/* stdlib/bpf/jwt.h natively: tokens built here with the stdlib's own HMAC and base64url
 * (those are checked against RFC 4231 / RFC 4648 in tests/stdlib), plus the RFC 7515 A.1
 * example token, whose signature comes from the RFC. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "jwt_test.h"
#define L7_JWT_NOW() test_now
#include "jwt.h"

#define HDR "{\"alg\":\"HS256\",\"typ\":\"JWT\"}"
#define ISS "\"iss\":\"https://issuer.example\""

static struct l7_req req;
static char tok[8192], line[16384], pay[8192];

static void setup(void)
{
	env_reset();
	test_now = T_NOW;
}
TestSuite(jwt, .init = setup);

static int verify_line(const char *l, unsigned cfg)
{
	cr_assert_gt(make_req(&req, l), 0, "request with %.60s", l);
	return l7__jwt_verify(&req, cfg, L7_JWT_NO_LOOKUP);
}

static int verify_tok(const char *t, unsigned cfg)
{
	snprintf(line, sizeof line, "%s: Bearer %s", cfg == 1 ? "X-Token" : "Authorization", t);
	return verify_line(line, cfg);
}

/* Token of cfg's key over these JSON texts, checked for cfg. */
static int vt(const char *hdr, const char *p, unsigned cfg)
{
	make_token_cfg(tok, sizeof tok, hdr, p, cfg);
	return verify_tok(tok, cfg);
}

/* The usual claims of configuration 0 with exp = now + dexp and extra members. */
static const char *pay0(long long dexp, const char *extra)
{
	snprintf(pay, sizeof pay, "{" ISS ",\"aud\":\"l7c\",\"sub\":\"alice\",\"role\":\"admin\","
		 "\"exp\":%lld%s}", T_NOW + dexp, extra);
	return pay;
}

static void expect_claim(unsigned i, const char *want)
{
	struct l7_span s = req.claim[i];
	cr_expect_eq(s.len, strlen(want), "claim %u: len %u, want %zu", i, s.len, strlen(want));
	if (s.len == strlen(want))
		cr_expect(!memcmp(req.jwt_json + s.off, want, s.len), "claim %u: %.*s, want %s", i,
			  (int)s.len, req.jwt_json + s.off, want);
}

Test(jwt, valid_and_claims)
{
	cr_expect_eq(vt(HDR, pay0(3600, ""), 0), L7_JWT_OK);
	expect_claim(0, "alice");
	expect_claim(1, "admin");
	expect_claim(2, "l7c");
	cr_expect_eq(req.claim[3].len, 0);   /* other configuration */
}

Test(jwt, claim_escapes_and_types)
{
	cr_expect_eq(vt(HDR, "{\"iss\":\"https:\\/\\/issuer.example\",\"aud\":[\"x\",\"l7c\"],"
			"\"sub\":\"al\\u0069ce \\\"q\\\" \\u00e9\\u20ac\",\"role\":7,\"exp\":1900000000}", 0),
		     L7_JWT_OK);
	expect_claim(0, "alice \"q\" \xc3\xa9\xe2\x82\xac");
	cr_expect_eq(req.claim[1].len, 0, "number claim");
	cr_expect_eq(req.claim[2].len, 0, "array aud is not a string claim");
	/* absent claims */
	cr_expect_eq(vt(HDR, "{" ISS ",\"aud\":\"l7c\",\"exp\":1900000000}", 0), L7_JWT_OK);
	cr_expect_eq(req.claim[0].len, 0);
	cr_expect_eq(req.claim[1].len, 0);
}

Test(jwt, expiry_and_leeway)
{
	/* leeway 30: valid while now < exp + 30 */
	cr_expect_eq(vt(HDR, pay0(-29, ""), 0), L7_JWT_OK);
	cr_expect_eq(vt(HDR, pay0(-30, ""), 0), L7_JWTE_EXP);
	cr_expect_eq(vt(HDR, pay0(-31, ""), 0), L7_JWTE_EXP);
	cr_expect_eq(vt(HDR, pay0(-100000, ""), 0), L7_JWTE_EXP);
	/* no leeway (configuration 1) */
	snprintf(pay, sizeof pay, "{\"exp\":%lld}", T_NOW + 1);
	cr_expect_eq(vt(HDR, pay, 1), L7_JWT_OK);
	snprintf(pay, sizeof pay, "{\"exp\":%lld}", T_NOW);
	cr_expect_eq(vt(HDR, pay, 1), L7_JWTE_EXP);
	snprintf(pay, sizeof pay, "{\"exp\":%lld.75}", T_NOW);
	cr_expect_eq(vt(HDR, pay, 1), L7_JWTE_EXP, "fraction ignored");
	snprintf(pay, sizeof pay, "{\"exp\":%lld.5}", T_NOW + 1);
	cr_expect_eq(vt(HDR, pay, 1), L7_JWT_OK);
	cr_expect_eq(vt(HDR, "{\"sub\":\"x\"}", 1), L7_JWTE_NOEXP);
	cr_expect_eq(vt(HDR, "{\"exp\":\"1900000000\"}", 1), L7_JWTE_JSON, "exp as string");
	cr_expect_eq(vt(HDR, "{\"exp\":1.9e9}", 1), L7_JWTE_JSON, "exponent");
	cr_expect_eq(vt(HDR, "{\"exp\":null}", 1), L7_JWTE_JSON);
	cr_expect_eq(vt(HDR, "{\"exp\":1900000000,\"exp\":1}", 1), L7_JWTE_JSON, "duplicate exp");
	cr_expect_eq(vt(HDR, "{\"exp\":-5}", 1), L7_JWTE_EXP);
}

Test(jwt, not_before)
{
	char extra[64];
	snprintf(extra, sizeof extra, ",\"nbf\":%lld", T_NOW + 30);
	cr_expect_eq(vt(HDR, pay0(3600, extra), 0), L7_JWT_OK, "nbf = now + leeway");
	snprintf(extra, sizeof extra, ",\"nbf\":%lld", T_NOW + 31);
	cr_expect_eq(vt(HDR, pay0(3600, extra), 0), L7_JWTE_NBF);
	snprintf(pay, sizeof pay, "{\"exp\":%lld,\"nbf\":%lld}", T_NOW + 60, T_NOW);
	cr_expect_eq(vt(HDR, pay, 1), L7_JWT_OK);
	snprintf(pay, sizeof pay, "{\"exp\":%lld,\"nbf\":%lld}", T_NOW + 60, T_NOW + 1);
	cr_expect_eq(vt(HDR, pay, 1), L7_JWTE_NBF);
}

Test(jwt, signature_and_key)
{
	static const unsigned char other[] = "another-key";
	size_t n;

	make_token_cfg(tok, sizeof tok, HDR, pay0(3600, ""), 0);
	n = strlen(tok);
	tok[n - 10] = tok[n - 10] == 'A' ? 'B' : 'A';
	cr_expect_eq(verify_tok(tok, 0), L7_JWTE_SIG, "flipped signature");
	make_token(tok, sizeof tok, HDR, pay0(3600, ""), other, sizeof other - 1);
	cr_expect_eq(verify_tok(tok, 0), L7_JWTE_SIG, "wrong key");
	/* payload changed after signing */
	make_token_cfg(tok, sizeof tok, HDR, pay0(3600, ""), 0);
	char *p = strchr(tok, '.') + 5;
	*p = *p == 'a' ? 'b' : 'a';
	cr_expect_eq(verify_tok(tok, 0), L7_JWTE_SIG, "payload changed");
	/* truncated / extended signature */
	make_token_cfg(tok, sizeof tok, HDR, pay0(3600, ""), 0);
	tok[strlen(tok) - 1] = 0;
	cr_expect_eq(verify_tok(tok, 0), L7_JWTE_SIG);
	/* long key (100 bytes, hashed by l7run) */
	snprintf(pay, sizeof pay, "{\"exp\":%lld,\"sub\":\"bob\"}", T_NOW + 60);
	cr_expect_eq(vt(HDR, pay, 1), L7_JWT_OK);
	expect_claim(3, "bob");
	/* a configuration without a key refuses everything */
	cr_expect_eq(vt(HDR, pay, 3), L7_JWTE_KEY);
}

Test(jwt, algorithms)
{
	const char *p = pay0(3600, "");
	cr_expect_eq(vt("{\"alg\":\"none\",\"typ\":\"JWT\"}", p, 0), L7_JWTE_ALG);
	cr_expect_eq(vt("{\"alg\":\"HS512\",\"typ\":\"JWT\"}", p, 0), L7_JWTE_ALG);
	cr_expect_eq(vt("{\"alg\":\"RS256\"}", p, 0), L7_JWTE_ALG);
	cr_expect_eq(vt("{\"alg\":\"hs256\"}", p, 0), L7_JWTE_ALG);
	cr_expect_eq(vt("{\"alg\":\"HS2560\"}", p, 0), L7_JWTE_ALG);
	cr_expect_eq(vt("{\"typ\":\"JWT\"}", p, 0), L7_JWTE_ALG, "missing alg");
	cr_expect_eq(vt("{\"alg\":256}", p, 0), L7_JWTE_ALG);
	cr_expect_eq(vt("{\"alg\":\"HS256\",\"typ\":\"JWS\"}", p, 0), L7_JWTE_ALG);
	cr_expect_eq(vt("{\"alg\":\"HS256\",\"typ\":\"jwt\"}", p, 0), L7_JWT_OK);
	cr_expect_eq(vt("{\"alg\":\"HS256\"}", p, 0), L7_JWT_OK);
	cr_expect_eq(vt("{\"alg\":\"HS256\",\"kid\":\"k1\",\"x\":{\"alg\":\"none\"}}", p, 0), L7_JWT_OK,
		     "nested alg is not the alg");
	cr_expect_eq(vt("{\"alg\":\"HS256\",\"alg\":\"none\"}", p, 0), L7_JWTE_JSON, "duplicate alg");
	cr_expect_eq(vt("{\"alg\":\"HS256\",\"crit\":[\"exp\"]}", p, 0), L7_JWTE_JSON, "crit");
	/* alg none with the empty signature of an unsecured JWT */
	char *dot;
	make_token_cfg(tok, sizeof tok, "{\"alg\":\"none\"}", p, 0);
	dot = strrchr(tok, '.');
	dot[1] = 0;
	cr_expect_eq(verify_tok(tok, 0), L7_JWTE_FORMAT);
}

Test(jwt, issuer_and_audience)
{
	char p[512];
	cr_expect_eq(vt(HDR, "{\"iss\":\"https://issuer.example/\",\"aud\":\"l7c\",\"exp\":1900000000}", 0), L7_JWTE_ISS);
	cr_expect_eq(vt(HDR, "{\"iss\":\"https://issuer.exampl\",\"aud\":\"l7c\",\"exp\":1900000000}", 0), L7_JWTE_ISS);
	cr_expect_eq(vt(HDR, "{\"aud\":\"l7c\",\"exp\":1900000000}", 0), L7_JWTE_ISS, "missing iss");
	cr_expect_eq(vt(HDR, "{\"iss\":[\"https://issuer.example\"],\"aud\":\"l7c\",\"exp\":1900000000}", 0), L7_JWTE_ISS);
	cr_expect_eq(vt(HDR, "{" ISS ",\"aud\":\"l7\",\"exp\":1900000000}", 0), L7_JWTE_AUD);
	cr_expect_eq(vt(HDR, "{" ISS ",\"aud\":\"L7C\",\"exp\":1900000000}", 0), L7_JWTE_AUD);
	cr_expect_eq(vt(HDR, "{" ISS ",\"exp\":1900000000}", 0), L7_JWTE_AUD, "missing aud");
	cr_expect_eq(vt(HDR, "{" ISS ",\"aud\":[\"a\",\"b\"],\"exp\":1900000000}", 0), L7_JWTE_AUD);
	cr_expect_eq(vt(HDR, "{" ISS ",\"aud\":[],\"exp\":1900000000}", 0), L7_JWTE_AUD);
	cr_expect_eq(vt(HDR, "{" ISS ",\"aud\":[[\"l7c\"]],\"exp\":1900000000}", 0), L7_JWTE_AUD, "nested");
	cr_expect_eq(vt(HDR, "{" ISS ",\"aud\":{\"x\":\"l7c\"},\"exp\":1900000000}", 0), L7_JWTE_AUD);
	cr_expect_eq(vt(HDR, "{" ISS ",\"aud\":[\"a\",\"l7c\",3,{\"b\":1}],\"exp\":1900000000}", 0), L7_JWT_OK);
	cr_expect_eq(vt(HDR, "{" ISS ",\"aud\":\"l7c\",\"aud\":\"x\",\"exp\":1900000000}", 0), L7_JWTE_JSON);
	snprintf(p, sizeof p, "{" ISS ",\"aud\":\"l7c\",\"exp\":1900000000,\"sub\":\"a\",\"sub\":\"b\"}");
	cr_expect_eq(vt(HDR, p, 0), L7_JWTE_JSON, "duplicate claim");
	/* configuration 1 checks neither */
	cr_expect_eq(vt(HDR, "{\"iss\":\"x\",\"aud\":\"y\",\"exp\":1900000000}", 1), L7_JWT_OK);
}

Test(jwt, malformed_base64)
{
	const char *p = pay0(3600, "");
	char t2[16384];
	make_token_cfg(tok, sizeof tok, HDR, p, 0);
	char *d1 = strchr(tok, '.'), *d2 = strrchr(tok, '.');

	/* malformed parts signed as they are, so that only the decoding can refuse them */
	strcpy(t2, tok); t2[3] = '+'; *strrchr(t2, '.') = 0;
	sign_raw(t2, sizeof t2, t2, 0);
	cr_expect_eq(verify_tok(t2, 0), L7_JWTE_B64, "header");
	strcpy(t2, tok); t2[d1 - tok + 4] = '/'; *strrchr(t2, '.') = 0;
	sign_raw(t2, sizeof t2, t2, 0);
	cr_expect_eq(verify_tok(t2, 0), L7_JWTE_B64, "payload");
	strcpy(t2, tok); *strrchr(t2, '.') = 0; strcat(t2, "==");
	sign_raw(t2, sizeof t2, t2, 0);
	cr_expect_eq(verify_tok(t2, 0), L7_JWTE_B64, "padded payload");
	strcpy(t2, tok); t2[d2 - tok + 2] = '*';
	cr_expect_eq(verify_tok(t2, 0), L7_JWTE_B64, "signature");
	/* padded signature: 44 characters */
	snprintf(t2, sizeof t2, "%s=", tok);
	cr_expect_eq(verify_tok(t2, 0), L7_JWTE_SIG);
	/* non-canonical last character of the signature (unused bits set) */
	strcpy(t2, tok);
	char *last = t2 + strlen(t2) - 1;
	*last = *last == 'B' ? 'C' : 'B';   /* 43 chars: the last holds 2 unused bits */
	cr_expect(verify_tok(t2, 0) < 0);
	/* header/payload lengths of 4n+1 characters cannot be base64 */
	make_token_cfg(tok, sizeof tok, HDR, p, 0);
	strcpy(t2, tok);
	memmove(strchr(t2, '.') + 1, strchr(t2, '.'), strlen(strchr(t2, '.')) + 1);
	strchr(t2, '.')[0] = 'A';
	*strrchr(t2, '.') = 0;
	sign_raw(t2, sizeof t2, t2, 0);
	cr_expect_eq(verify_tok(t2, 0), L7_JWTE_B64, "4n+1 characters");
}

Test(jwt, structure)
{
	const char *p = pay0(3600, "");
	char t2[16384];
	make_token_cfg(tok, sizeof tok, HDR, p, 0);

	strcpy(t2, tok); *strrchr(t2, '.') = 0;
	cr_expect_eq(verify_tok(t2, 0), L7_JWTE_FORMAT, "two parts");
	strcpy(t2, tok); *strchr(t2, '.') = 'A'; *strrchr(t2, '.') = 'A';
	cr_expect_eq(verify_tok(t2, 0), L7_JWTE_FORMAT, "no dot");
	snprintf(t2, sizeof t2, "%s.", tok);
	cr_expect_eq(verify_tok(t2, 0), L7_JWTE_FORMAT, "four parts");
	snprintf(t2, sizeof t2, ".%s", strchr(tok, '.') + 1);
	cr_expect_eq(verify_tok(t2, 0), L7_JWTE_FORMAT, "empty header");
	cr_expect_eq(verify_tok("..", 0), L7_JWTE_FORMAT);
	cr_expect_eq(verify_tok("a", 0), L7_JWTE_FORMAT);
	/* schemes */
	snprintf(line, sizeof line, "Authorization: Basic %s", tok);
	cr_expect_eq(verify_line(line, 0), L7_JWTE_SCHEME);
	snprintf(line, sizeof line, "Authorization: Bearer,%s", tok);
	cr_expect_eq(verify_line(line, 0), L7_JWTE_SCHEME);
	snprintf(line, sizeof line, "Authorization: %s", tok);
	cr_expect_eq(verify_line(line, 0), L7_JWTE_SCHEME);
	snprintf(line, sizeof line, "Authorization: bEARER   %s", tok);
	cr_expect_eq(verify_line(line, 0), L7_JWT_OK, "scheme is case-insensitive, 1*SP");
	snprintf(line, sizeof line, "Authorization: Bearer");
	cr_expect_eq(verify_line(line, 0), L7_JWTE_SCHEME);
	cr_expect_eq(verify_line("X-Other: 1", 0), L7_JWTE_CFG, "no header");
	cr_expect_eq(verify_tok(tok, 7), L7_JWTE_CFG, "no such configuration");
	/* token in the wrong header for configuration 1 */
	snprintf(line, sizeof line, "Authorization: Bearer %s", tok);
	cr_expect_eq(verify_line(line, 1), L7_JWTE_CFG);
}

Test(jwt, malformed_json)
{
	static const char *bad[] = {
		"{\"exp\":1900000000", "{\"exp\":1900000000,}", "{exp:1900000000}",
		"{\"exp\":1900000000} x", "[{\"exp\":1900000000}]", "{\"exp\":1900000000}}",
		"{\"exp\" 1900000000}", "{\"a\":tru,\"exp\":1900000000}", "{\"a\":\"\\x\",\"exp\":1900000000}",
		"{\"a\":\"\\u12G4\",\"exp\":1900000000}", "{\"a\":\"x\ny\",\"exp\":1900000000}",
		"{\"a\":[1,],\"exp\":1900000000}", "{\"a\":{\"b\"},\"exp\":1900000000}", "",
		"{\"a\":[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]],\"exp\":1900000000}",
		"{\"a\":\"b\"\"exp\":1900000000}", "{\"a\":]\"exp\":1900000000}",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		cr_expect_eq(vt(HDR, bad[i], 1), bad[i][0] ? L7_JWTE_JSON : L7_JWTE_FORMAT, "%s", bad[i]);
	cr_expect_eq(vt(HDR, " {\"a\":[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]], \"b\" : { \"c\" : [true,false,null,-1.5e3] },"
			"\"exp\":1900000000}\r\n", 1), L7_JWT_OK, "depth 16, whitespace, literals");
	cr_expect_eq(vt("{\"alg\":\"HS256\"", pay0(3600, ""), 0), L7_JWTE_JSON, "header");
}

Test(jwt, sizes)
{
	char filler[4096];
	int seen_ok = 0, seen_big = 0;
	for (size_t f = 2800; f < 3100 && !(seen_ok && seen_big); f++) {
		memset(filler, 'x', f);
		filler[f] = 0;
		snprintf(pay, sizeof pay, "{\"exp\":1900000000,\"sub\":\"big\",\"pad\":\"%s\"}", filler);
		size_t n = make_token_cfg(tok, sizeof tok, HDR, pay, 1);
		int r = verify_tok(tok, 1);
		if (n <= L7_JWT_MAX_TOKEN) {
			cr_expect_eq(r, L7_JWT_OK, "token of %zu bytes", n);
			seen_ok |= n >= L7_JWT_MAX_TOKEN - 1;
		} else {
			cr_expect_eq(r, L7_JWTE_SIZE, "token of %zu bytes", n);
			seen_big = 1;
		}
	}
	cr_expect(seen_ok && seen_big);
	/* claims past L7_JWT_JSON bytes */
	memset(filler, 'y', 2100);
	filler[2100] = 0;
	snprintf(pay, sizeof pay, "{\"exp\":1900000000,\"sub\":\"%s\"}", filler);
	cr_expect_eq(vt(HDR, pay, 1), L7_JWTE_JSON);
}

/* RFC 7515 appendix A.1, byte for byte (the JSON has CRLFs); its exp is 1300819380. */
static const char rfc_token[] =
	"eyJ0eXAiOiJKV1QiLA0KICJhbGciOiJIUzI1NiJ9"
	".eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ"
	".dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";

Test(jwt, rfc7515_a1)
{
	test_now = 1300819379;
	cr_expect_eq(verify_tok(rfc_token, 2), L7_JWT_OK);
	expect_claim(4, "joe");
	test_now = 1300819380;
	cr_expect_eq(verify_tok(rfc_token, 2), L7_JWTE_EXP);
	test_now = 1300819000;
	cr_expect_eq(verify_tok(rfc_token, 0), L7_JWTE_SIG, "other key");
	/* our builder reproduces the RFC's token from its JSON and key */
	size_t kl;
	const unsigned char *k = test_raw_key(2, &kl);
	make_token(tok, sizeof tok, "{\"typ\":\"JWT\",\r\n \"alg\":\"HS256\"}",
		   "{\"iss\":\"joe\",\r\n \"exp\":1300819380,\r\n \"http://example.com/is_root\":true}", k, kl);
	cr_expect_str_eq(tok, rfc_token);
}

Test(jwt, cache)
{
	snprintf(pay, sizeof pay, "{" ISS ",\"aud\":\"l7c\",\"sub\":\"carol\",\"exp\":%lld}", T_NOW + 100);
	make_token_cfg(tok, sizeof tok, HDR, pay, 0);
	snprintf(line, sizeof line, "Authorization: Bearer %s", tok);
	make_req(&req, line);
	cr_expect_eq(l7__jwt_verify(&req, 0, 0), L7_JWT_OK);
	cr_expect_eq(env_stat(L7_STAT_JWT_VERIFY), 1);
	make_req(&req, line);
	cr_expect_eq(l7__jwt_verify(&req, 0, 0), L7_JWT_OK_CACHED);
	expect_claim(0, "carol");
	cr_expect_eq(req.claim[1].len, 0);
	cr_expect_eq(env_stat(L7_STAT_JWT_VERIFY), 1, "no second HMAC");
	/* exp is still checked on a hit */
	test_now = T_NOW + 129;
	make_req(&req, line);
	cr_expect_eq(l7__jwt_verify(&req, 0, 0), L7_JWT_OK_CACHED);
	test_now = T_NOW + 130;
	make_req(&req, line);
	cr_expect_eq(l7__jwt_verify(&req, 0, 0), L7_JWTE_EXP);
	test_now = T_NOW;
	/* same hash slot, different token: the full compare refuses it */
	tok[strlen(tok) - 3] ^= 1;
	snprintf(line, sizeof line, "Authorization: Bearer %s", tok);
	make_req(&req, line);
	cr_expect(l7__jwt_verify(&req, 0, 0) < 0);
	/* a new key generation invalidates entries */
	tok[strlen(tok) - 3] ^= 1;
	snprintf(line, sizeof line, "Authorization: Bearer %s", tok);
	make_req(&req, line);
	env_set_gen(0, 2);
	cr_expect_eq(l7__jwt_verify(&req, 0, 0), L7_JWT_OK);
	cr_expect_eq(l7__jwt_verify(&req, 0, 0), L7_JWT_OK_CACHED);
	/* the cache is per configuration: cfg 3 (no key) still refuses */
	cr_expect_eq(l7__jwt_verify(&req, 3, 0), L7_JWTE_KEY);
}

Test(jwt, per_request_bits_and_two_configurations)
{
	char t1[8192];
	make_token_cfg(tok, sizeof tok, HDR, pay0(3600, ""), 0);
	snprintf(pay, sizeof pay, "{\"exp\":%lld,\"sub\":\"svc-b\"}", T_NOW + 60);
	make_token_cfg(t1, sizeof t1, HDR, pay, 1);
	snprintf(line, sizeof line, "Authorization: Bearer %.4000s\r\nX-Token: Bearer %.4000s", tok, t1);
	for (int round = 0; round < 2; round++) {   /* cold, then from the cache */
		make_req(&req, line);
		cr_expect_eq(l7_jwt_check(&req, 0), 1);
		cr_expect_eq(l7_jwt_check(&req, 1), 1);
		cr_expect_eq(l7_jwt_check(&req, 2), 0, "iss joe");
		cr_expect_eq(l7_jwt_check(&req, 0), 1);
		cr_expect_eq(req.jwt_done, 7u);
		cr_expect_eq(req.jwt_ok, 3u);
		expect_claim(0, "alice");
		expect_claim(1, "admin");
		expect_claim(3, "svc-b");
		cr_expect_eq(req.claim[4].len, 0);
	}
	/* cfg 2 fails at the signature (other key) and is not cached: 2 + 1 + 1 HMACs */
	cr_expect_eq(env_stat(L7_STAT_JWT_VERIFY), 4);
	cr_expect_eq(env_stat(L7_STAT_JWT_HIT), 2);
	cr_expect_eq(env_stat(L7_STAT_JWT_REJECT), 2);
}
