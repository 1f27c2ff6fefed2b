/* stdlib/bpf/jwt.h in the running kernel: bpf/jwt_kern.c is loaded (verifier statistics
 * printed per program), every case is run with BPF_PROG_TEST_RUN and its verdict, reason
 * and claims compared with the native build of the same header; then the time per verify,
 * cold and from the cache, for three token sizes. Needs root (CAP_BPF). */
#include <criterion/criterion.h>
#include <bpf/bpf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jwt_test.h"
#include "kobj.h"
#define L7_JWT_NOW() test_now
#include "jwt.h"
#include "bpf/jwt_kern.h"

#ifndef L7_TEST_BPF_OBJ
#define L7_TEST_BPF_OBJ "jwt_kern.bpf.o"
#endif

static const char *const progs[] = { "t_jwt_check", "t_jwt_check0", "t_jwt_cold", "t_jwt_cached" };
enum { P_CHECK, P_CHECK0, P_COLD, P_CACHED, NPROG };

static struct {
	int in, out, req, keys;
} K;
static const struct kobj_fd maps[] = {
	{ "t_in", &K.in }, { "t_out", &K.out }, { "t_req", &K.req }, { "l7_jwt_keys", &K.keys }, { 0 },
};
static struct kobj KO = { .path = L7_TEST_BPF_OBJ, .progs = progs, .n = NPROG, .maps = maps };
static struct l7_req kreq, nreq;
static const __u32 zero;

/* The object loaded once, with the test keys and the clock offset in its maps. */
static void kern_load(void)
{
	if (!kobj_load(&KO))
		return;
	for (__u32 c = 0; c < L7_MAX_JWT; c++) {
		struct l7_jwt_key k;
		test_key(c, &k);
		if (c == 3)
			k.len = 0;
		cr_assert_eq(bpf_map_update_elem(K.keys, &c, &k, BPF_ANY), 0);
	}
	/* the clock offset l7run writes: CLOCK_TAI - CLOCK_REALTIME */
	struct timespec tai, real;
	clock_gettime(CLOCK_TAI, &tai);
	clock_gettime(CLOCK_REALTIME, &real);
	__s64 off = ((__s64)tai.tv_sec - real.tv_sec) * 1000000000LL + (tai.tv_nsec - real.tv_nsec);
	off = (off + 500000000LL) / 1000000000LL * 1000000000LL;
	cr_assert_eq(bpf_map_update_elem(kobj_map(&KO, "l7_jwt_clock"),
					 &zero, &off, BPF_ANY), 0);
}

/* Run program i on request line `line`; returns the program's average ns per run. */
static __u32 krun(int i, const char *line, unsigned cfg, long long now, struct t_jwt_out *out,
		  __u32 repeat)
{
	struct t_jwt_in in = { .cfg = cfg, .now = now };
	__u32 ns;

	kern_load();
	if (line) {
		cr_assert_gt(make_req(&kreq, line), 0);
		cr_assert_eq(bpf_map_update_elem(K.req, &zero, &kreq, BPF_ANY), 0);
	}
	cr_assert_eq(bpf_map_update_elem(K.in, &zero, &in, BPF_ANY), 0);
	ns = kobj_run(&KO, i, repeat);
	cr_assert_eq(bpf_map_lookup_elem(K.out, &zero, out), 0);
	cr_assert_eq(bpf_map_lookup_elem(K.req, &zero, &kreq), 0);
	return ns;
}

/* Claims of the kernel's and the native request must be the same bytes. */
static void same_claims(const char *what)
{
	for (int i = 0; i < L7_MAX_CLAIMS; i++) {
		struct l7_span a = kreq.claim[i], b = nreq.claim[i];
		cr_expect_eq(a.len, b.len, "%s: claim %d len %u vs %u", what, i, a.len, b.len);
		if (a.len == b.len && a.len)
			cr_expect(!memcmp(kreq.jwt_json + a.off, nreq.jwt_json + b.off, a.len),
				  "%s: claim %d bytes", what, i);
	}
}

struct tcase { char line[9000]; unsigned cfg; long long now; };
static struct tcase cases[64];
static int ncases;

static void add(unsigned cfg, long long now, const char *fmt, const char *tok)
{
	struct tcase *c = &cases[ncases++];
	snprintf(c->line, sizeof c->line, fmt, tok);
	c->cfg = cfg;
	c->now = now;
}

/* The verdicts of test_jwt.c's groups, one or more cases each. */
static void build_cases(void)
{
	static char tok[8192], t2[8300], pay[8192];
	const char *H = "{\"alg\":\"HS256\",\"typ\":\"JWT\"}", *A = "Authorization: Bearer %s",
		   *X = "X-Token: Bearer %s";
	long long n = T_NOW;

	env_reset();
#define P0(dexp, extra) (snprintf(pay, sizeof pay, "{\"iss\":\"https://issuer.example\",\"aud\":%s," \
	"\"sub\":\"al\\u0069ce\",\"role\":\"admin\",\"exp\":%lld}", extra, n + (dexp)), pay)
	make_token_cfg(tok, sizeof tok, H, P0(3600, "\"l7c\""), 0); add(0, n, A, tok);      /* valid */
	add(0, n + 3629, A, tok); add(0, n + 3630, A, tok);                                /* leeway edge */
	add(2, n, A, tok);                                                                 /* wrong key, iss */
	add(0, n, "Authorization: Basic %s", tok); add(1, n, A, tok);                      /* scheme, header */
	make_token_cfg(tok, sizeof tok, H, P0(3600, "[\"x\",\"l7c\"]"), 0); add(0, n, A, tok);
	make_token_cfg(tok, sizeof tok, H, P0(3600, "[\"x\",\"y\"]"), 0); add(0, n, A, tok);
	make_token_cfg(tok, sizeof tok, H, P0(3600, "\"l7\""), 0); add(0, n, A, tok);
	make_token_cfg(tok, sizeof tok, H, P0(-31, "\"l7c\""), 0); add(0, n, A, tok);       /* expired */
	snprintf(pay, sizeof pay, "{\"exp\":%lld,\"nbf\":%lld,\"sub\":\"b\"}", n + 60, n + 1);
	make_token_cfg(tok, sizeof tok, H, pay, 1); add(1, n, X, tok); add(1, n + 1, X, tok);
	snprintf(pay, sizeof pay, "{\"iss\":\"https://issuer.exampl\",\"aud\":\"l7c\",\"exp\":%lld}", n + 60);
	make_token_cfg(tok, sizeof tok, H, pay, 0); add(0, n, A, tok);
	snprintf(pay, sizeof pay, "{\"exp\":%lld}", n + 60);
	const char *algs[] = { "{\"alg\":\"none\"}", "{\"alg\":\"HS512\"}", "{\"typ\":\"JWT\"}",
			       "{\"alg\":\"HS256\",\"typ\":\"JWS\"}", "{\"alg\":\"HS256\",\"crit\":[\"a\"]}",
			       "{\"alg\":\"HS256\",\"alg\":\"HS256\"}", "{\"alg\":\"HS256\"" };
	for (size_t i = 0; i < sizeof algs / sizeof algs[0]; i++) {
		make_token_cfg(tok, sizeof tok, algs[i], pay, 1);
		add(1, n, X, tok);
	}
	make_token_cfg(tok, sizeof tok, H, "{\"exp\":1.9e9}", 1); add(1, n, X, tok);
	make_token_cfg(tok, sizeof tok, H, "{\"sub\":\"x\"}", 1); add(1, n, X, tok);
	make_token_cfg(tok, sizeof tok, H, "{\"exp\":1900000000,}", 1); add(1, n, X, tok);
	add(3, n, A, tok);                                                                 /* no key */
	/* base64 and structure */
	make_token_cfg(tok, sizeof tok, H, pay, 1);
	strcpy(t2, tok); t2[3] = '+'; *strrchr(t2, '.') = 0; sign_raw(t2, sizeof t2, t2, 1); add(1, n, X, t2);
	strcpy(t2, tok); strchr(t2, '.')[3] = '='; *strrchr(t2, '.') = 0; sign_raw(t2, sizeof t2, t2, 1); add(1, n, X, t2);
	strcpy(t2, tok); t2[strlen(t2) - 5] = '/'; add(1, n, X, t2);
	strcpy(t2, tok); t2[strlen(t2) - 8] ^= 1; add(1, n, X, t2);
	strcpy(t2, tok); *strrchr(t2, '.') = 0; add(1, n, X, t2);
	snprintf(t2, sizeof t2, "%s.x", tok); add(1, n, X, t2);
	add(1, n, "X-Token: bearer   %s", tok);
	/* sizes */
	char filler[3100];
	memset(filler, 'x', sizeof filler - 1);
	filler[sizeof filler - 1] = 0;
	for (int f = 2900; f < 3100; f += 17) {
		snprintf(pay, sizeof pay, "{\"exp\":1900000000,\"sub\":\"s\",\"pad\":\"%.*s\"}", f, filler);
		make_token_cfg(tok, sizeof tok, H, pay, 1);
		add(1, n, X, tok);
	}
	/* RFC 7515 A.1 */
	add(2, 1300819379, A, "eyJ0eXAiOiJKV1QiLA0KICJhbGciOiJIUzI1NiJ9.eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ.dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk");
	strcpy(t2, cases[ncases - 1].line + strlen("Authorization: Bearer "));
	add(2, 1300819380, A, t2);
	cr_assert_lt(ncases, 64);
}

Test(jwt_bpf, verifier)
{
	kern_load();
	for (int i = 0; i < NPROG; i++) {
		printf("verifier: %-13s processed %ld insns, %ld us\n", progs[i], KO.insns[i], KO.usec[i]);
		cr_expect_gt(KO.insns[i], 0);
	}
	fflush(stdout);
}

Test(jwt_bpf, same_verdicts)
{
	struct t_jwt_out out;
	int ok = 0;

	build_cases();
	for (int i = 0; i < ncases; i++) {
		struct tcase *c = &cases[i];
		make_req(&nreq, c->line);
		test_now = c->now;
		int rn = l7__jwt_verify(&nreq, c->cfg, L7_JWT_NO_LOOKUP);
		krun(P_COLD, c->line, c->cfg, c->now, &out, 1);
		cr_expect_eq(out.rc, rn, "case %d (%.70s): kernel %lld, native %d", i, c->line,
			     (long long)out.rc, rn);
		if (rn > 0)
			same_claims("cold");
		ok += rn > 0;
		/* what the policy calls, twice: the second answer comes from the cache */
		for (int round = 0; round < 2; round++) {
			make_req(&nreq, c->line);
			int cn = l7_jwt_check(&nreq, c->cfg);
			krun(P_CHECK, c->line, c->cfg, c->now, &out, 1);
			cr_expect_eq(out.rc, cn, "case %d round %d: check kernel %lld native %d", i, round,
				     (long long)out.rc, cn);
			cr_expect_eq(out.jwt_ok, nreq.jwt_ok);
			if (cn)
				same_claims("check");
		}
	}
	printf("jwt_bpf: %d cases, %d valid, same verdicts, reasons and claims in the kernel\n", ncases, ok);
	cr_expect_gt(ok, 5);
	cr_expect_gt(ncases - ok, 20);
}

Test(jwt_bpf, kernel_clock)
{
	static char tok[4096], pay[256], line[4200];
	struct t_jwt_out out;
	long long now = time(NULL);

	snprintf(pay, sizeof pay, "{\"exp\":%lld}", now + 120);
	make_token_cfg(tok, sizeof tok, "{\"alg\":\"HS256\"}", pay, 1);
	snprintf(line, sizeof line, "X-Token: Bearer %s", tok);
	krun(P_COLD, line, 1, 0, &out, 1);
	cr_expect_eq(out.rc, L7_JWT_OK, "exp in 2 minutes, kernel clock: %lld", (long long)out.rc);
	snprintf(pay, sizeof pay, "{\"exp\":%lld}", now - 3);
	make_token_cfg(tok, sizeof tok, "{\"alg\":\"HS256\"}", pay, 1);
	snprintf(line, sizeof line, "X-Token: Bearer %s", tok);
	krun(P_COLD, line, 1, 0, &out, 1);
	cr_expect_eq(out.rc, L7_JWTE_EXP, "expired 3 s ago, kernel clock: %lld", (long long)out.rc);
}

static double native_ns(const char *line, __u32 flags, int reps)
{
	struct timespec a, b;
	make_req(&nreq, line);
	l7__jwt_verify(&nreq, 1, 0);   /* fill the cache */
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (int i = 0; i < reps; i++)
		l7__jwt_verify(&nreq, 1, flags);
	clock_gettime(CLOCK_MONOTONIC, &b);
	return ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / reps;
}

Test(jwt_bpf, time_per_verify)
{
	static char tok[8192], pay[8192], line[9000], filler[4096];
	struct t_jwt_out out;
	const int sizes[] = { 300, 1024, 4000 };

	env_reset();
	test_now = T_NOW;
	memset(filler, 'x', sizeof filler - 1);
	for (size_t s = 0; s < 3; s++) {
		size_t n = 0;
		int f = 0;
		for (f = 0; f < 3100; f++) {
			snprintf(pay, sizeof pay, "{\"sub\":\"user-1234\",\"exp\":1900000000,\"pad\":\"%.*s\"}", f, filler);
			n = make_token_cfg(tok, sizeof tok, "{\"alg\":\"HS256\",\"typ\":\"JWT\"}", pay, 1);
			if (n >= (size_t)sizes[s])
				break;
		}
		snprintf(line, sizeof line, "X-Token: Bearer %s", tok);
		__u32 cold = krun(P_COLD, line, 1, T_NOW, &out, 2000);
		cr_expect_eq(out.rc, L7_JWT_OK);
		krun(P_CACHED, line, 1, T_NOW, &out, 1);
		__u32 hit = krun(P_CACHED, NULL, 1, T_NOW, &out, 2000);
		cr_expect_eq(out.rc, L7_JWT_OK_CACHED);
		printf("ns per verify, %4zu-byte token: BPF cold %u, cached %u; native cold %.0f, cached %.0f\n",
		       n, cold, hit, native_ns(line, L7_JWT_NO_LOOKUP, 2000), native_ns(line, 0, 2000));
	}
	fflush(stdout);
}
