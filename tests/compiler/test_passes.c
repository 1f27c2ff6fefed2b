/* Property: the passes never change a decision. Each policy is lowered without the passes and
 * after each prefix of the pass list (ir/passes.def), and thousands of requests built from the
 * policy's own constants (the paths, prefixes, methods, hosts and header values rules compare
 * with, and near misses) are decided by the reference evaluator on both. */
#include <criterion/criterion.h>
#include <dirent.h>
#include "policy_files.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline.h"
#include "l7/abi.h"

struct pool {
	char *v[256];
	int n;
};

static void add(struct pool *p, const char *s, size_t n)
{
	if (p->n == 256 || n > 200)
		return;
	for (size_t i = 0; i < n; i++)   /* keep only what a request line/field can carry */
		if ((unsigned char)s[i] <= ' ' || s[i] == 127 || s[i] == '"')
			return;
	p->v[p->n++] = strndup(s, n);
}

static unsigned ips[64], nips, ports[64], nports;

static void collect(const struct ir_cond *c, struct pool *paths, struct pool *values)
{
	if (!c)
		return;
	collect(c->a, paths, values);
	collect(c->b, paths, values);
	if (c->kind == IR_C_SOURCE_IN && nips < 62) {   /* inside and just outside the prefix */
		ips[nips++] = c->net;
		ips[nips++] = c->net ^ ~c->netmask;
	}
	if (c->kind == IR_C_PORT_IN && nports < 60) {
		ports[nports++] = c->lo;
		ports[nports++] = c->hi;
		ports[nports++] = c->lo ? c->lo - 1 : 0;
		ports[nports++] = c->hi + 1;
	}
	if (c->kind == IR_C_REGEX) {   /* strings the regex accepts, and one byte short of them */
		unsigned long long seed = (unsigned long long)c->re->index + 1;
		for (int i = 0; i < 6; i++) {
			unsigned char buf[64];
			int n = re_example(&c->re->dfa, &seed, buf, sizeof(buf));
			if (n < 0)
				break;
			add(c->field == IR_F_PATH ? paths : values, (const char *)buf, (size_t)n);
			if (n > 1)
				add(c->field == IR_F_PATH ? paths : values, (const char *)buf, (size_t)n - 1);
		}
		return;
	}
	if (c->kind != IR_C_STR_EQ && c->kind != IR_C_STR_PREFIX)
		return;
	struct pool *p = c->field == IR_F_PATH ? paths : values;
	add(p, c->str, c->len);
	if (c->kind == IR_C_STR_PREFIX) {   /* something longer, and one byte short */
		char buf[256];
		snprintf(buf, sizeof(buf), "%.*sx/y", (int)c->len, c->str);
		add(p, buf, strlen(buf));
	}
	if (c->len > 1)
		add(p, c->str, c->len - 1);
}

static unsigned rng(unsigned long long *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return (unsigned)(*s >> 33);
}

static bool jwt_valid(void *ctx, int jwt, struct l7_req *req)
{
	(void)req;   /* claims are filled by the test */
	return ((unsigned *)ctx)[0] >> jwt & 1;
}
/* FNV-1a of a Limit's key: outcomes depend on the key, so a pass that lost it would show */
static unsigned key_hash(const void *key, size_t len)
{
	unsigned h = 2166136261u;
	for (size_t i = 0; i < len; i++)
		h = (h ^ ((const unsigned char *)key)[i]) * 16777619u;
	return h;
}
static bool bucket_take(void *ctx, int bucket, const void *key, size_t len)
{
	return ((unsigned *)ctx)[1] >> ((unsigned)bucket * 7 + key_hash(key, len)) % 32 & 1;
}
static unsigned long long counter_value(void *ctx, int counter) { return (((unsigned *)ctx)[2] >> (counter & 15)) % 2000; }
static bool timer_elapsed(void *ctx, int timer, unsigned s) { return (((unsigned *)ctx)[3] >> (timer & 31) & 1) && s < 3600; }

/* The program of path after the passes `passes` names (a --passes list), verified after each. */
static struct ir_program *lower(const char *path, struct l7_unit *u, const char *passes)
{
	FILE *sink = fopen("/dev/null", "w");
	struct l7_diags d = { .out = sink };
	struct l7_pipeline po = { .passes = passes, .quiet_passes = true, .verify_ir = true };
	enum l7_unit_status rc = l7_unit_load(u, path, &po, &d);
	fclose(sink);
	cr_assert(rc == L7_UNIT_OK || rc == L7_UNIT_ERRORS, "%s: status %d after passes %s", path, rc, passes);
	return u->ir;
}

/* The decisions after the passes `passes` are those of the policy as lowered. */
static int check_policy(const char *path, const char *passes)
{
	struct l7_unit u0, u1;
	struct ir_program *p0 = lower(path, &u0, "none"), *p1 = lower(path, &u1, passes);
	cr_assert(p0 && p1, "%s does not compile", path);
	struct pool paths = { .n = 0 }, values = { .n = 0 };
	nips = nports = 0;
	for (int i = 0; i < p0->npolicies; i++)
		for (int k = 0; k < p0->policies[i].nrules; k++)
			collect(p0->policies[i].rules[k].cond, &paths, &values);
	for (int i = 0; i < p0->nidentities; i++)
		for (int k = 0; k < p0->identities[i].n && nips < 64; k++)
			ips[nips++] = p0->identities[i].nets[k];
	ips[nips++] = 0x0100007f;   /* 127.0.0.1 */
	ports[nports++] = 8080;
	add(&paths, "/", 1);
	add(&paths, "/other", 6);
	add(&values, "none", 4);
	static const char *methods[] = { "GET", "POST", "PUT", "DELETE", "HEAD", "PATCH", "MKCOL", "OPTIONS" };
	unsigned long long seed = 42;
	static struct l7_req r0, r1;
	int decided = 0;
	unsigned valid_bits = 0, take_bits = 0;
	struct ir_eval_env env = { .jwt_valid = jwt_valid, .bucket_take = bucket_take, .counter_value = counter_value,
				   .timer_elapsed = timer_elapsed };
	for (int iter = 0; iter < 3000; iter++) {
		char req[2048];
		int n = snprintf(req, sizeof(req), "%s %s%s%s HTTP/1.1\r\nHost: %s\r\n",
				 methods[rng(&seed) % 8], paths.v[rng(&seed) % paths.n], rng(&seed) % 3 ? "" : "?",
				 rng(&seed) % 2 ? "" : values.v[rng(&seed) % values.n], values.v[rng(&seed) % values.n]);
		for (int h = 0; h < p0->nheaders; h++)
			if (rng(&seed) % 2)
				n += snprintf(req + n, sizeof(req) - (size_t)n, "%s: %s\r\n", p0->headers[h],
					      values.v[rng(&seed) % values.n]);
		n += snprintf(req + n, sizeof(req) - (size_t)n, "\r\n");
		int h0 = ir_parse_request(p0, &r0, req, (unsigned)n);
		int h1 = ir_parse_request(p1, &r1, req, (unsigned)n);
		cr_assert_eq(h0, h1);
		if (h0 <= 0)
			continue;
		/* what the parser does not fill: the client, the port, JWT outcomes and claims */
		r0.src_ip4 = r1.src_ip4 = ips[rng(&seed) % nips];
		r0.dst_port = r1.dst_port = ports[rng(&seed) % nports];
		valid_bits = rng(&seed);
		take_bits = rng(&seed) | rng(&seed);
		unsigned at = 0;
		for (int c = 0; c < p0->nclaims && c < L7_MAX_CLAIMS; c++) {
			const char *v = values.v[rng(&seed) % values.n];
			size_t n = strlen(v);
			memcpy(r0.jwt_json + at, v, n);
			memcpy(r1.jwt_json + at, v, n);
			r0.claim[c] = r1.claim[c] = (struct l7_span){ (__u16)at, (__u16)n };
			at += (unsigned)n;
		}
		for (unsigned svc = 0; svc < (unsigned)(p0->nservices ? p0->nservices : 1); svc++) {
			r0.service = r1.service = svc;
			struct ir_decision d0, d1;
			unsigned bits[4] = { valid_bits, take_bits, valid_bits * 2654435761u, take_bits ^ valid_bits };
			env.ctx = bits;
			ir_eval_with(p0, &r0, &env, &d0);
			ir_eval_with(p1, &r1, &env, &d1);
			cr_assert(d0.term == d1.term && d0.upstream == d1.upstream && d0.status == d1.status &&
					  d0.nset == d1.nset && !memcmp(d0.set, d1.set, sizeof(int) * (size_t)d0.nset) &&
					  d0.del == d1.del && d0.rdel == d1.rdel && d0.nrset == d1.nrset &&
					  !memcmp(d0.rset, d1.rset, sizeof(int) * (size_t)d0.nrset),
				  "%s: the passes %s changed the decision for\n%s(service %u): %d/%d/%d vs %d/%d/%d", path, passes,
				  req, svc,
				  d0.term, d0.upstream, d0.status, d1.term, d1.upstream, d1.status);
			decided++;
		}
	}
	cr_assert_gt(decided, 1000, "%s: only %d requests parsed", path, decided);
	l7_unit_free(&u0);
	l7_unit_free(&u1);
	return decided;
}

Test(passes, same_decisions, .timeout = 120)
{
	static char paths[128][512];
	int files = l7_policy_paths(IR_DIR, paths, 64);
	files += l7_policy_paths(EXAMPLES_DIR, paths + files, 64);
	for (int i = 0; i < files; i++) {
		/* after each prefix of the pass list: a pass that changes a decision is named */
		char passes[256] = "";
		int n = 0;
		for (int k = 0; k < ir_npasses(); k++) {
			snprintf(passes + strlen(passes), sizeof(passes) - strlen(passes), "%s%s", k ? "," : "", ir_pass_name(k));
			n += check_policy(paths[i], passes);
		}
		cr_log_info("%s: %d decisions agree", paths[i], n);
	}
	cr_assert_gt(files, 1);
}

/* Token buckets of a model data plane: tokens taken per (bucket, key), none refilled. */
struct buckets {
	const struct ir_program *p;
	struct { int bucket; unsigned hash; unsigned taken; } used[64];
	int n;
};

static bool model_take(void *ctx, int bucket, const void *key, size_t len)
{
	struct buckets *b = ctx;
	unsigned h = key_hash(key, len) ^ (unsigned)len;
	int i = 0;
	while (i < b->n && (b->used[i].bucket != bucket || b->used[i].hash != h))
		i++;
	if (i == b->n) {
		cr_assert_lt(b->n, 64);
		b->used[b->n++] = (typeof(b->used[0])){ bucket, h, 0 };
	}
	return b->used[i].taken++ < b->p->buckets[bucket].burst;
}

/* The evaluator keys Limit(b, request.source) on the client's address: one client runs out of
 * its burst while another still has its own (examples/rate_limit.l7, anonymous callers). */
Test(eval, limit_by_source)
{
	struct l7_unit u;
	struct ir_program *p = lower(EXAMPLES_DIR "/rate_limit.l7", &u, NULL);
	cr_assert_not_null(p);
	struct buckets b = { .p = p };
	struct ir_eval_env env = { .bucket_take = model_take, .ctx = &b };
	static const struct { unsigned src; const char *path; int status; } reqs[] = {
		{ 0x0100007f, "/a", 200 }, { 0x0100007f, "/a", 200 }, { 0x0100007f, "/a", 503 },
		{ 0x0200007f, "/a", 200 }, { 0x0200007f, "/b", 200 }, { 0x0200007f, "/a", 503 },
		{ 0x0100007f, "/public/a", 200 }, { 0x0200007f, "/public/a", 200 }, { 0x0300007f, "/public/a", 429 },
	};
	static struct l7_req r;
	for (size_t i = 0; i < sizeof(reqs) / sizeof(reqs[0]); i++) {
		char req[128];
		int n = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: example\r\n\r\n", reqs[i].path);
		cr_assert_gt(ir_parse_request(p, &r, req, (unsigned)n), 0);
		r.src_ip4 = reqs[i].src;
		struct ir_decision d;
		ir_eval_with(p, &r, &env, &d);
		int status = d.term == IR_FORWARD ? 200 : d.status;
		cr_expect_eq(status, reqs[i].status, "request %zu (%s from %08x): %d, want %d", i, reqs[i].path,
			     reqs[i].src, status, reqs[i].status);
	}
	l7_unit_free(&u);
}
