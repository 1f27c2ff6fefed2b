/* Load balancing at compile time and in the evaluator (ir/balance.c, stdlib/bpf/balance.h built
 * natively: the code the kernel runs). The kernel's agreement with it is tests/balance. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "balance.h"
#include "ring.h"
#include "pipeline.h"
#include "l7/abi.h"
#include "l7/dataplane.h"

/* One upstream set of n endpoints 10.0.0.1:port0+i with the given weights, built as l7c does. */
struct set {
	struct ir_program p;
	struct ir_target t;
	struct ir_endpoint ep[16];
};

static void build(struct set *s, enum ir_balance how, const unsigned *ips, const unsigned *ports, const unsigned *w, int n)
{
	memset(s, 0, sizeof(*s));
	for (int i = 0; i < n; i++)
		s->ep[i] = (struct ir_endpoint){ ips ? ips[i] : 0x0a000001u, ports[i], w ? w[i] : 1 };
	s->t = (struct ir_target){ .name = "s", .endpoints = s->ep, .nendpoints = n, .balance = how, .key_field = -1,
				   .key_header = -1 };
	s->p.upstreams = &s->t;
	s->p.nupstreams = 1;
	s->p.fallback = -1;
	ir_balance_build(&s->p);
}

static void done(struct set *s) { l7_arena_free(s->p.arena); }

/* The endpoint (its port) a key goes to. */
static unsigned owner(const struct set *s, const char *key)
{
	__u32 h = l7_lb_hash((const __u8 *)key, 0, (__u32)strlen(key));
	return s->ep[s->t.ring_slot[l7_ketama_find(s->t.ring, (__u32)s->t.ring_log2, h)] - s->t.slot].port;
}

static unsigned long long rng = 88172645463325252ull;
static unsigned rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (unsigned)(rng >> 11);
}

Test(balance, xxh64_of_a_word_is_xxh64_of_its_bytes)
{
	for (int i = 0; i < 100000; i++) {
		__u32 w = i < 4 ? (unsigned[]){ 0, 1, 0x0100007f, 0xffffffff }[i] : rnd();
		__u8 b[4];
		memcpy(b, &w, 4);
		cr_assert_eq(l7_xxh64_u32(w, 0), l7_xxh64(b, 0, 4, 0), "word %08x", w);
	}
	/* the reference value of XXH64 for "abc" (xxHash's own test vectors) */
	cr_assert_eq(l7_xxh64((const __u8 *)"abc", 0, 3, 0), 0x44bc2cf5ad770999ull);
}

/* The fixed-step search is the first point >= h (lower bound), on every ring size. */
Test(balance, search_is_lower_bound)
{
	static __u32 ring[1 << L7_LB_RING_LOG2];
	for (int log2 = 1; log2 <= L7_LB_RING_LOG2; log2++) {
		int n = 1 << log2, real = n - 1 - (int)(rnd() % (unsigned)(n / 2 + 1));
		for (int i = 0; i < real; i++)
			ring[i] = rnd() | (rnd() & 1u) << 31;
		for (int i = 1; i < real; i++)   /* insertion sort: small rings only cost little */
			for (int j = i; j > 0 && ring[j - 1] > ring[j]; j--) {
				__u32 t = ring[j];
				ring[j] = ring[j - 1];
				ring[j - 1] = t;
			}
		for (int i = real; i < n; i++)
			ring[i] = 0xffffffffu;
		for (int k = 0; k < 3000; k++) {
			__u32 h = k == 0 ? 0 : k == 1 ? 0xffffffffu : k < 40 ? ring[rnd() % (unsigned)n] + (k & 1) : rnd() * 2u + (k & 1);
			int want = 0;
			while (want < n && ring[want] < h)
				want++;
			cr_assert_eq(l7_ketama_find(ring, (__u32)log2, h), (__u32)want, "ring of %d, h %08x", n, h);
		}
	}
}

Test(balance, ring_points_sorted_padded_in_proportion)
{
	struct set s;
	unsigned ports[] = { 9001, 9002, 9003 }, w[] = { 1, 1, 2 };
	build(&s, IR_LB_HASH, NULL, ports, w, 3);
	cr_assert_eq(s.t.ring_points, 4 * 256);   /* 256 per unit of weight */
	cr_assert_eq(s.t.ring_log2, 11);          /* strictly more: room for padding */
	int count[3] = { 0 };
	for (int i = 0; i < s.t.ring_points; i++) {
		count[s.t.ring_slot[i]]++;
		cr_assert(i == 0 || s.t.ring[i - 1] <= s.t.ring[i]);
	}
	cr_assert(count[0] == 256 && count[1] == 256 && count[2] == 512);
	for (int i = s.t.ring_points; i < 1 << s.t.ring_log2; i++)   /* wraps to the first point */
		cr_assert(s.t.ring[i] == 0xffffffffu && s.t.ring_slot[i] == s.t.ring_slot[0]);
	/* point 0 of endpoint 0 is xxh64("10.0.0.1:9001-0") */
	__u32 p0 = l7_lb_hash((const __u8 *)"10.0.0.1:9001-0", 0, 15);
	bool found = false;
	for (int i = 0; i < s.t.ring_points; i++)
		found |= s.t.ring[i] == p0 && s.t.ring_slot[i] == 0;
	cr_assert(found);
	/* weights are relative: 100, 100, 200 is 1, 1, 2 (their gcd) */
	unsigned w100[] = { 100, 100, 200 };
	struct set s100;
	build(&s100, IR_LB_HASH, NULL, ports, w100, 3);
	cr_assert(s100.t.ring_points == s.t.ring_points);
	cr_assert(!memcmp(s100.t.ring, s.t.ring, sizeof(unsigned) << s.t.ring_log2));
	done(&s100);
	done(&s);
	/* the largest set: 16 endpoints, one of weight 255: scaled to fit */
	unsigned big_ports[16], big_w[16];
	for (int i = 0; i < 16; i++)
		big_ports[i] = 9000 + (unsigned)i, big_w[i] = i ? 1 : 255;
	build(&s, IR_LB_HASH, NULL, big_ports, big_w, 16);
	cr_assert(s.t.ring_log2 == L7_LB_RING_LOG2 && s.t.ring_points < 1 << s.t.ring_log2);
	for (int i = 1; i < 16; i++)   /* every endpoint keeps its share of points */
		cr_assert(memchr(s.t.ring_slot, i, (size_t)s.t.ring_points));
	double share[16];
	ir_balance_shares(&s.t, share);
	cr_assert(share[0] > 0.9 && share[0] < 0.98, "%.3f", share[0]);   /* 255 / 270 = 0.944 */
	done(&s);
}

/* Consistency (Ketama's point): removing one of four endpoints moves only the keys that were
 * on it; the others keep theirs (an endpoint's points do not depend on the rest of the set).
 * A set scaled to fit the ring loses that: its points depend on the sum of the weights. */
static double moved_others(const unsigned *w, int gone, int nkeys, double *moved_gone)
{
	struct set all, rest;
	unsigned ports[4] = { 9001, 9002, 9003, 9004 }, rp[3], rw[3];
	for (int i = 0, k = 0; i < 4; i++)
		if (i != gone)
			rp[k] = ports[i], rw[k++] = w[i];
	build(&all, IR_LB_HASH, NULL, ports, w, 4);
	build(&rest, IR_LB_HASH, NULL, rp, rw, 3);
	int others = 0, others_moved = 0, on_gone = 0;
	for (int i = 0; i < nkeys; i++) {
		char key[32];
		snprintf(key, sizeof(key), "user-%d", i);
		unsigned a = owner(&all, key), b = owner(&rest, key);
		if (a == ports[gone]) {
			on_gone++;
			cr_assert_neq(b, ports[gone]);
		} else {
			others++;
			others_moved += a != b;
		}
	}
	*moved_gone = (double)on_gone / nkeys;
	done(&all);
	done(&rest);
	return (double)others_moved / others;
}

Test(balance, removing_an_endpoint_moves_only_its_keys)
{
	unsigned sets[][4] = { { 1, 1, 1, 1 }, { 1, 2, 3, 4 }, { 3, 3, 6, 6 }, { 50, 7, 5, 3 } };
	double share;
	for (size_t c = 0; c < sizeof(sets) / sizeof(sets[0]); c++)
		for (int gone = 0; gone < 4; gone++) {
			double m = moved_others(sets[c], gone, 40000, &share);
			unsigned total = sets[c][0] + sets[c][1] + sets[c][2] + sets[c][3];
			cr_assert(fabs(share - (double)sets[c][gone] / total) < 0.05, "its share was %.3f", share);
			if (c < 3)
				cr_assert_eq(m, 0.0, "weights %zu, endpoint %d removed: %.4f of the other keys moved", c, gone, m);
			else {   /* 65 units > 63: scaled, the others' points change a little */
				printf("scaled set 50,7,5,3 without endpoint %d (%.3f of the keys): %.4f of the others moved\n",
				       gone, share, m);
				cr_assert_lt(m, 0.02);
			}
		}
}

/* The shares of weights 1, 1, 2 over 2000 rings (different ports): what the kernel test's
 * tolerance of 0.08 between a ring's share and the weight rests on. Prints the table. */
Test(balance, ring_shares_follow_the_weights)
{
	unsigned w[3] = { 1, 1, 2 };
	double sum2 = 0, worst = 0;
	int rings = 2000;
	for (int r = 0; r < rings; r++) {
		unsigned ports[3] = { 20000u + 3u * (unsigned)r, 20001u + 3u * (unsigned)r, 20002u + 3u * (unsigned)r };
		struct set s;
		double share[3];
		build(&s, IR_LB_HASH, NULL, ports, w, 3);
		ir_balance_shares(&s.t, share);
		cr_assert_float_eq(share[0] + share[1] + share[2], 1.0, 1e-9);
		for (int i = 0; i < 3; i++) {
			double d = share[i] - w[i] / 4.0;
			sum2 += d * d;
			worst = fabs(d) > worst ? fabs(d) : worst;
		}
		if (r < 3)
			printf("ring %d (ports %u-%u, %d points): shares %.3f %.3f %.3f for weights 1 1 2\n", r, ports[0],
			       ports[2], s.t.ring_points, share[0], share[1], share[2]);
		done(&s);
	}
	double rms = sqrt(sum2 / (3.0 * rings));
	printf("over %d rings: RMS deviation from the weights %.4f, largest %.4f\n", rings, rms, worst);
	cr_assert_lt(rms, 0.02);
	cr_assert_lt(worst, 0.08);
}

/* Round robin: sum(weights) turns, each endpoint exactly its weight, spread out. */
Test(balance, round_robin_turns_are_smooth)
{
	unsigned ports[4] = { 1, 2, 3, 4 };
	unsigned cases[][4] = { { 1, 2, 0, 0 }, { 5, 1, 1, 0 }, { 3, 3, 3, 3 }, { 255, 1, 0, 0 }, { 4, 3, 2, 1 } };
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		int n = cases[c][2] ? (cases[c][3] ? 4 : 3) : 2;
		unsigned total = 0;
		for (int i = 0; i < n; i++)
			total += cases[c][i];
		struct set s;
		build(&s, IR_LB_ROUND_ROBIN, NULL, ports, cases[c], n);
		cr_assert_eq(s.t.nturns, (int)total);
		int count[4] = { 0 }, last[4] = { -1, -1, -1, -1 };
		for (int k = 0; k < s.t.nturns; k++) {
			int e = s.t.turns[k] - s.t.slot;
			count[e]++;
			/* smooth: an endpoint's turns are at most ceil(total / w) apart */
			if (last[e] >= 0)
				cr_assert_leq((unsigned)(k - last[e]), (total + cases[c][e] - 1) / cases[c][e], "case %zu", c);
			last[e] = k;
		}
		for (int i = 0; i < n; i++)
			cr_assert_eq(count[i], (int)cases[c][i], "case %zu endpoint %d", c, i);
		done(&s);
	}
	struct set s;
	unsigned w[2] = { 1, 2 };
	build(&s, IR_LB_ROUND_ROBIN, NULL, ports, w, 2);
	cr_assert(s.t.turns[0] == 1 && s.t.turns[1] == 0 && s.t.turns[2] == 1);   /* B A B */
	done(&s);
}

/* The evaluator on a whole policy: hash(header) reads the header (it joins the vector only
 * when routed to), an absent header hashes as "", the source as its 4 bytes. */
static struct ir_program *lower(const char *text, struct l7_unit *u)
{
	struct l7_diags d = { .out = stderr };
	struct l7_pipeline po = { .passes = "none", .verify_ir = true };
	cr_assert_eq(l7_unit_build(u, l7_source_from_string("lb.l7", text), &po, &d), L7_UNIT_OK);
	return u->ir;
}

static int pick(const struct ir_program *p, const char *raw, unsigned src_be)
{
	static struct l7_req req;
	cr_assert_gt(ir_parse_request(p, &req, raw, (unsigned)strlen(raw)), 0);
	req.src_ip4 = src_be;
	struct ir_decision d;
	ir_eval(p, &req, &d);
	cr_assert_eq(d.term, IR_FORWARD);
	return d.slot;
}

Test(balance, evaluator_keys)
{
	struct l7_unit unit;
	struct ir_program *p = lower("service f = 127.0.0.1:8080;\n"
				     "upstream x = 127.0.0.1:9000;\n"
				     "upstream u = [127.0.0.1:9001, 127.0.0.1:9002, 127.0.0.1:9003 weight 2] balance hash(header \"X-User\");\n"
				     "upstream unused = [127.0.0.1:9004, 127.0.0.1:9005] balance hash(header \"x-never\");\n"
				     "upstream s = [127.0.0.1:9006, 127.0.0.1:9007] balance hash(source);\n"
				     "upstream r = [127.0.0.1:9008, 127.0.0.1:9009];\n"
				     "policy q (act (HttpRequest request)) {\n"
				     "  if (request.path == \"/s\") { Route(request, s); }\n"
				     "  if (request.path == \"/r\") { Route(request, r); }\n"
				     "  Route(request, u);\n}\n",
				     &unit);
	cr_assert_eq(p->nheaders, 1);   /* x-user only: nothing routes to `unused` */
	cr_assert_str_eq(p->headers[0], "x-user");
	cr_assert_eq(p->upstreams[1].slot, 1);
	cr_assert_eq(p->nslots, 10);
	const struct ir_target *u = &p->upstreams[1], *s = &p->upstreams[3];
	unsigned lo = 0x0100007f;
	int seen[16] = { 0 };
	for (int i = 0; i < 300; i++) {
		char raw[128], key[32];
		snprintf(key, sizeof(key), "user%d", i);
		snprintf(raw, sizeof(raw), "GET / HTTP/1.1\r\nHost: a\r\nx-user: %s\r\n\r\n", key);
		int slot = pick(p, raw, lo);
		__u32 h = l7_lb_hash((const __u8 *)key, 0, (__u32)strlen(key));
		cr_assert_eq(slot, u->ring_slot[l7_ketama_find(u->ring, (__u32)u->ring_log2, h)]);
		seen[slot]++;
	}
	cr_assert(seen[1] && seen[2] && seen[3] && !seen[0] && !seen[4]);
	/* absent and empty hash alike, as "" */
	int absent = pick(p, "GET / HTTP/1.1\r\nHost: a\r\n\r\n", lo);
	cr_assert_eq(absent, pick(p, "GET / HTTP/1.1\r\nHost: a\r\nx-user:\r\n\r\n", lo));
	cr_assert_eq(absent, u->ring_slot[l7_ketama_find(u->ring, (__u32)u->ring_log2, l7_lb_hash((const __u8 *)"", 0, 0))]);
	/* the source: its four bytes, network order */
	for (unsigned i = 1; i < 200; i++) {
		unsigned ip = 0x7f010000u + i, be = __builtin_bswap32(ip);
		__u8 b[4] = { 127, 1, (__u8)(i >> 8), (__u8)i };
		int want = s->ring_slot[l7_ketama_find(s->ring, (__u32)s->ring_log2, l7_lb_hash(b, 0, 4))];
		cr_assert_eq(pick(p, "GET /s HTTP/1.1\r\nHost: a\r\n\r\n", be), want);
	}
	cr_assert_eq(pick(p, "GET /r HTTP/1.1\r\nHost: a\r\n\r\n", lo), -1);   /* round robin: rotates */
	l7_unit_free(&unit);
}

/* The ring l7run builds for a run-time set (runtime/endpoints.c, the same ring.h, in the
 * 4,096 entries of l7_lb_tab): removing one of N endpoints moves only the keys that were on it,
 * about 1/N of them, and the set's slots may be any (an endpoint keeps its slot while it stays). */
struct rt_ring {
	__u32 ring[L7_LB_DRING];
	__u8 slot[L7_LB_DRING];
};

static void rt_build(struct rt_ring *r, const struct l7_ring_ep *e, int n)
{
	int npts;
	struct l7_ring_point *pts = l7_ring_points(e, n, L7_LB_DRING_LOG2, &npts);
	cr_assert(pts && npts < (int)L7_LB_DRING);
	l7_ring_fill(e, pts, npts, L7_LB_DRING, r->ring, r->slot);
	free(pts);
}

static unsigned rt_owner(const struct rt_ring *r, const char *key)
{
	__u32 h = l7_lb_hash((const __u8 *)key, 0, (__u32)strlen(key));
	return r->slot[l7_ketama_find(r->ring, L7_LB_DRING_LOG2, h)];
}

Test(balance, run_time_ring_moves_only_the_removed_keys)
{
	for (int n = 2; n <= L7_RT_SLOTS; n++)
		for (int gone = 0; gone < n; gone++) {
			struct l7_ring_ep all[L7_RT_SLOTS], rest[L7_RT_SLOTS];
			int m = 0;
			for (int i = 0; i < n; i++) {
				all[i] = (struct l7_ring_ep){ 0x7f000001u, 20000u + (unsigned)i, 1, 6u + (unsigned)i };
				if (i != gone)
					rest[m++] = all[i];
			}
			static struct rt_ring ra, rb;
			rt_build(&ra, all, n);
			rt_build(&rb, rest, m);
			int moved = 0, keys = 4000;
			for (int k = 0; k < keys; k++) {
				char key[32];
				snprintf(key, sizeof key, "user-%d", k);
				unsigned a = rt_owner(&ra, key), b = rt_owner(&rb, key);
				if (a != b) {
					cr_assert_eq(a, all[gone].slot, "n=%d gone=%d: %s moved from slot %u", n, gone, key, a);
					moved++;
				}
				cr_assert_neq(b, all[gone].slot);
			}
			double share = (double)moved / keys;
			cr_expect(share > 0.5 / n && share < 1.6 / n, "n=%d gone=%d: %.3f of the keys moved", n, gone, share);
		}
}
