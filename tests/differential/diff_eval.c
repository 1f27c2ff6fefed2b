/* diff_eval: the reference evaluator (ir/eval.c) as a filter for the differential test.
 *
 *   diff_eval --constants POLICY.l7   what requests should be built from, one per line (strings
 *                                     hex-encoded): service/upstream/fallback/mutation names,
 *                                     the share of requests each slot of a set gets,
 *                                     the header names rules read, and the constants rules
 *                                     compare with (path, value, method, net), and strings
 *                                     each regex of matches() accepts
 *                                     and its JWT configurations: "jwt IDX HEADER ISS AUD LEEWAY
 *                                     KEYFILE" (strings hex) and "claim JWT NAME"
 *   diff_eval [--now=EPOCH] POLICY.l7 reads records "SERVICE SRC_IP DST_PORT HEXBYTES\n" on stdin
 *                                     and prints, per record, one line with the decision for each
 *                                     request of the stream (pipelining), separated by " ; ":
 *                                       forward UP MUTS DELS | fallback UP MUTS DELS | deny STATUS
 *                                       | refuse STATUS | incomplete | body
 *                                     UP is a backend slot; a round-robin set adds "any=S,S,.."
 *                                     (its slots: which one has the turn is the kernel's)
 *                                     MUTS: the lines added (mutation ids, comma-separated, or
 *                                     -), DELS: the header names whose lines the client's head
 *                                     loses (hex, comma-separated, or -)
 *                                     each followed by "#RULE" ("rbac", "default" or the rule id)
 *                                     A record "h2 SERVICE SRC_IP DST_PORT HEXBYTES" is one
 *                                     HTTP/2 stream, its request written as text (the version
 *                                     HTTP/2, as for `l7c --eval`): decide_h2() says what it prints
 *
 * The policy is lowered and optimised exactly as l7c does. JWTs are verified as the data plane
 * does (ir_jwt_valid: its code, the policy's key files) at time EPOCH (default: now), as for
 * `l7c --eval --now=EPOCH`; rate limits count as not reached. */
#include <arpa/inet.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "http.h"   /* stdlib/bpf, built natively: the chunked-body framing of the data plane */
#include "ir.h"
#include "l7/abi.h"
#include "l7/h2.h"
#include "pipeline.h"

static void hex(const char *s, size_t n)
{
	if (!n)
		fputc('-', stdout);
	for (size_t i = 0; i < n; i++)
		printf("%02x", (unsigned char)s[i]);
}

static void constants_of(const struct ir_program *p, const struct ir_cond *c)
{
	if (!c)
		return;
	constants_of(p, c->a);
	constants_of(p, c->b);
	switch (c->kind) {
	case IR_C_STR_EQ:
	case IR_C_STR_PREFIX:
		printf("%s %s ", c->field == IR_F_PATH ? "path" : c->field == IR_F_METHOD ? "method" : "value",
		       c->kind == IR_C_STR_EQ ? "eq" : "prefix");
		hex(c->str, c->len);
		putchar('\n');
		break;
	case IR_C_REGEX: {   /* strings the regex accepts (their near misses come from the generator) */
		unsigned long long seed = 1469598103934665603ull + (unsigned long long)c->re->index;
		for (int i = 0; i < 8; i++) {
			unsigned char buf[48];
			int n = re_example(&c->re->dfa, &seed, buf, sizeof(buf));
			if (n < 0)
				break;
			printf("%s eq ", c->field == IR_F_PATH ? "path" : c->field == IR_F_METHOD ? "method" : "value");
			hex((const char *)buf, (size_t)n);
			putchar('\n');
		}
		break;
	}
	case IR_C_METHOD_IS: printf("methodnum %u\n", c->method); break;
	case IR_C_SOURCE_IN: printf("net %08x %08x\n", ntohl(c->net), ntohl(c->netmask)); break;
	case IR_C_PORT_IN: printf("port %u %u\n", c->lo, c->hi); break;
	case IR_C_TABLE:
		for (int i = 0; i < p->tables[c->table].n; i++) {
			const struct ir_table_entry *e = &p->tables[c->table].entries[i];
			printf("%s %s ", p->tables[c->table].field == IR_F_PATH ? "path" : "value", e->prefix ? "prefix" : "eq");
			hex(e->value, e->len);
			printf("\nmethodnum %u\n", e->method);
		}
		break;
	default: break;
	}
}

static void constants(const struct ir_program *p)
{
	for (int i = 0; i < p->nservices; i++)
		printf("service %d %s %u\n", i, p->services[i].name, p->services[i].endpoints[0].port);
	for (int i = 0; i < p->nupstreams; i++)   /* backend slots, named as l7run names them */
		for (int e = 0; e < p->upstreams[i].nendpoints; e++)
			if (p->upstreams[i].nendpoints > 1)
				printf("upstream %d %s#%d\n", p->upstreams[i].slot + e, p->upstreams[i].name, e);
			else
				printf("upstream %d %s\n", p->upstreams[i].slot, p->upstreams[i].name);
	printf("fallback %d\n", p->fallback < 0 ? -1 : p->upstreams[p->fallback].slot);
	for (int i = 0; i < p->nupstreams; i++) {   /* the share of requests each slot of a set gets */
		double share[64];
		if (p->upstreams[i].nendpoints < 2 || p->upstreams[i].nendpoints > 64)
			continue;
		ir_balance_shares(&p->upstreams[i], share);
		for (int e = 0; e < p->upstreams[i].nendpoints; e++)
			printf("share %d %.6f\n", p->upstreams[i].slot + e, share[e]);
	}
	for (int i = 0; i < p->nmutations; i++) {
		printf("mutation %d ", i);
		hex(p->mutations[i].name, strlen(p->mutations[i].name));
		putchar(' ');
		hex(p->mutations[i].value, strlen(p->mutations[i].value));
		putchar('\n');
	}
	for (int i = 0; i < p->nheaders; i++) {
		printf("header ");
		hex(p->headers[i], strlen(p->headers[i]));
		putchar('\n');
	}
	for (int i = 0; i < p->nidentities; i++)
		for (int k = 0; k < p->identities[i].n; k++)
			printf("net %08x %08x\n", ntohl(p->identities[i].nets[k]), ntohl(p->identities[i].netmasks[k]));
	for (int i = 0; i < p->npolicies; i++) {
		if (p->policies[i].has_allow)
			constants_of(p, p->policies[i].applies);
		for (int k = 0; k < p->policies[i].nrules; k++)
			constants_of(p, p->policies[i].rules[k].cond);
	}
	for (int i = 0; i < p->njwts; i++) {
		const struct ir_jwt *j = &p->jwts[i];
		printf("jwt %d ", i);
		hex(p->headers[j->header], strlen(p->headers[j->header]));
		putchar(' ');
		hex(j->issuer, strlen(j->issuer));
		putchar(' ');
		hex(j->audience, strlen(j->audience));
		printf(" %u ", j->leeway);
		hex(j->key_file, strlen(j->key_file));
		putchar('\n');
	}
	for (int i = 0; i < p->nclaims; i++) {
		printf("claim %d ", p->claims[i].jwt);
		hex(p->claims[i].name, strlen(p->claims[i].name));
		putchar('\n');
	}
	printf("njwts %d\nnbuckets %d\n", p->njwts, p->nbuckets);
}

static int unhex(const char *s, unsigned char *out, size_t cap)
{
	size_t n = 0;
	while (s[0] && s[1] && s[0] != '\n' && n < cap) {
		unsigned v;
		if (sscanf(s, "%2x", &v) != 1)
			return -1;
		out[n++] = (unsigned char)v;
		s += 2;
	}
	return (int)n;
}

static void rule_tag(const struct ir_program *p, const struct ir_decision *d)
{
	if (d->rule == &p->rbac_rule)
		printf(" #rbac");
	else if (!d->rule || !d->rule->id)
		printf(" #default");
	else
		printf(" #%d", d->rule->id);
}

/* The decision for one parsed request: "forward UP MUTS DELS [any=..] [rmut]",
 * "fallback ...", "deny STATUS grpc=G", then " #RULE"; rmut: the response is mutated too. */
static void decide(const struct ir_program *p, const struct ir_eval_env *env, struct l7_req *req)
{
	struct ir_decision d;
	ir_eval_with(p, req, env, &d);
	switch (d.term) {
	case IR_FORWARD:
	case IR_FALLBACK: {
		const struct ir_target *t = &p->upstreams[d.upstream];
		printf("%s %d ", d.term == IR_FORWARD ? "forward" : "fallback", d.slot < 0 ? t->slot : d.slot);
		for (int i = 0; i < d.nset; i++)
			printf("%s%d", i ? "," : "", d.set[i]);
		if (!d.nset)
			putchar('-');
		putchar(' ');
		for (int i = 0, any = 0; i < p->nheaders; i++)
			if (d.del >> i & 1) {
				if (any++)
					putchar(',');
				hex(p->headers[i], strlen(p->headers[i]));
			}
		if (!d.del)
			putchar('-');
		if (d.slot < 0)   /* round robin: whichever slot of the set has the turn */
			for (int i = 0; i < t->nendpoints; i++)
				printf("%s%d", i ? "," : " any=", t->slot + i);
		if (d.nrset || d.rdel)
			printf(" rmut");
		break;
	}
	case IR_DENY: printf("deny %d grpc=%d", d.status, d.grpc); break;
	default: printf("unknown %d", d.term); break;
	}
	rule_tag(p, &d);
}

/* One HTTP/2 request written as text (ir_h2_block): "h2 DECISION call=grpc|http block=HEX", DECISION
 * as decide() prints it or "h2err stream|conn|refused CODE" (the decoder's refusal: RST_STREAM
 * with CODE, GOAWAY with CODE, RST_STREAM REFUSED_STREAM for slow-path reason CODE), or
 * "h2 bad" if the text is no HTTP/2 request of at most one frame's block. */
static void decide_h2(const struct ir_program *p, const struct ir_eval_env *env, unsigned svc, unsigned src_be,
		      unsigned port, const unsigned char *bytes, size_t len)
{
	static unsigned char blk[L7_H2_BLOCK_MAX];
	static struct l7_req req;
	unsigned head = 0, flags = 0;
	int n = ir_h2_block(bytes, (unsigned)len, blk, sizeof(blk), &head);
	if (n <= 0) {
		printf("h2 bad\n");
		fflush(stdout);
		return;
	}
	int rc = ir_parse_request_h2(p, &req, blk, (unsigned)n, &flags);
	printf("h2 ");
	if (rc) {
		unsigned r = (unsigned)-rc;
		printf("h2err %s %u", r & L7_H2_R_SLOW ? "refused" : r & L7_H2_R_CONN ? "conn" : "stream", r & 0xff);
	} else {
		req.service = svc;
		req.src_ip4 = src_be;
		req.dst_port = port;
		decide(p, env, &req);
	}
	printf(" call=%s block=", flags & L7_H2_M_GRPC ? "grpc" : "http");
	hex((const char *)blk, (size_t)n);
	putchar('\n');
	fflush(stdout);
}

/* Every request of one stream, in order, until one is refused or incomplete. */
static void decide_stream(const struct ir_program *p, const struct ir_eval_env *env, unsigned svc, unsigned src_be,
			  unsigned port, const unsigned char *bytes, size_t len)
{
	static const int status[] = { [L7_E_BAD] = 400, [L7_E_TOO_LARGE] = 431, [L7_E_UNSUPPORTED] = 501,
				      [L7_E_URI_TOO_LONG] = 414 };
	static struct l7_req req;
	size_t at = 0;
	int first = 1;
	while (at < len) {
		if (!first)
			printf(" ; ");
		first = 0;
		int head = ir_parse_request(p, &req, bytes + at, (unsigned)(len - at));
		if (head == 0) {
			printf("incomplete @%zu", at);
			break;
		}
		if (head < 0) {
			printf("refuse %d @%zu", -head < 5 && status[-head] ? status[-head] : 400, at);
			break;
		}
		req.service = svc;
		req.src_ip4 = src_be;
		req.dst_port = port;
		decide(p, env, &req);
		printf(" @%zu", at);
		if (req.flags & L7_REQ_UPGRADE) {   /* the rest is not HTTP */
			printf(" ; body");
			break;
		}
		if (req.flags & L7_REQ_CHUNKED) {
			/* the body framed as the data plane frames it; a body it cannot frame is
			 * answered 400 (the head was decided, nothing more is) */
			static __u8 body[L7_MAX_HEAD + L7_BUF_SLACK];
			size_t from = at + (size_t)head, n = len - from < L7_MAX_HEAD ? len - from : L7_MAX_HEAD;
			memset(body, 0, sizeof(body));
			memcpy(body, bytes + from, n);
			struct l7_chunked st = { 0 };
			int rc = n ? l7_http_chunked(&st, body, 0, (__u32)n) : 0;
			if (rc == 0) {
				printf(" partial");
				break;
			}
			if (rc < 0) {
				printf(" ; refuse 400 @%zu body", from);
				break;
			}
			at = from + (size_t)rc;
			if ((req.flags & L7_REQ_CLOSE) && at < len) {
				printf(" ; closed");
				break;
			}
			continue;
		}
		if (at + (size_t)head + req.body_len > len) {   /* the body is not all there */
			printf(" partial");
			break;
		}
		at += (size_t)head + req.body_len;
		if ((req.flags & L7_REQ_CLOSE) && at < len) {
			printf(" ; closed");
			break;
		}
	}
	putchar('\n');
	fflush(stdout);
}

int main(int argc, char **argv)
{
	int want_constants = argc == 3 && !strcmp(argv[1], "--constants");
	long long now = time(NULL);
	if (argc == 3 && !strncmp(argv[1], "--now=", 6))
		now = atoll(argv[1] + 6);
	else if (argc != 2 && !want_constants) {
		fprintf(stderr, "usage: diff_eval [--constants | --now=EPOCH] POLICY.l7\n");
		return 2;
	}
	const char *path = argv[argc - 1];
	/* its errors said, the passes' warnings (rules removed) not: the test reads stdout */
	struct l7_diags d = { .out = stderr };
	struct l7_pipeline po = { .quiet_passes = true, .verify_ir = true };
	struct l7_unit u;
	enum l7_unit_status rc = l7_unit_load(&u, path, &po, &d);
	if (rc)
		return rc == L7_UNIT_ERRORS ? 1 : 2;
	const struct ir_program *p = u.ir;
	if (want_constants) {
		constants(p);
		return 0;
	}
	char err[1024];
	struct ir_eval_env env = { .jwt_valid = ir_jwt_valid, .ctx = ir_jwt_env_new(p, now, err, sizeof(err)) };
	if (!env.ctx)
		return fprintf(stderr, "diff_eval: %s\n", err), 1;
	static char line[4 * L7_MAX_HEAD * 2 + 256];
	static unsigned char bytes[4 * L7_MAX_HEAD];
	while (fgets(line, sizeof(line), stdin)) {
		unsigned svc, port;
		char ip[64];
		int off = 0;
		bool h2 = !strncmp(line, "h2 ", 3);   /* one HTTP/2 stream */
		if (sscanf(line + (h2 ? 3 : 0), "%u %63s %u %n", &svc, ip, &port, &off) < 3 || !off) {
			printf("error bad record\n");
			fflush(stdout);
			continue;
		}
		struct in_addr a;
		inet_pton(AF_INET, ip, &a);
		int n = unhex(line + (h2 ? 3 : 0) + off, bytes, sizeof(bytes));
		if (n < 0) {
			printf("error bad hex\n");
			fflush(stdout);
			continue;
		}
		if (h2)
			decide_h2(p, &env, svc, a.s_addr, port, bytes, (size_t)n);
		else
			decide_stream(p, &env, svc, a.s_addr, port, bytes, (size_t)n);
	}
	ir_jwt_env_free(env.ctx);
	l7_unit_free(&u);
	return 0;
}
