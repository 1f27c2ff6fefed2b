/* l7c: the policy compiler's command line. The pipeline, in order:
 *
 *   source --l7_parse--> AST --l7_resolve--> typed AST --ir_lower--> PMA IR --passes--> IR
 *          (l7_unit_build, ir/pipeline.c)                --split_build/codegen_emit--> BPF object
 *
 * Exit status: 0 compiled, 1 the policy has errors or cannot be served (past a kernel limit; with
 * --explain --verify, refused by the kernel), 2 usage or I/O errors. An object that exits 1 is
 * never written, and an older file at its path is removed. */
#include <arpa/inet.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "codegen.h"
#include "eval_ep.h"
#include "explain.h"
#include "frontend.h"
#include "import.h"
#include "split.h"
#include "ir.h"
#include "l7/abi.h"
#include "l7/grpc.h"
#include "l7/h2.h"
#include "pipeline.h"
#include "timers.h"

#ifndef L7C_VERIFY_IR_DEFAULT
#define L7C_VERIFY_IR_DEFAULT 0   /* 1 in Debug builds (driver/CMakeLists.txt) */
#endif
#ifndef L7C_VERSION
#define L7C_VERSION "0.0.0"
#endif

enum emit { EMIT_AST, EMIT_IR, EMIT_LLVM, EMIT_ASM, EMIT_OBJ };

/* Every option, in the order --help lists them: getopt_long's tables and --help are both made
 * from this list, so no option can be accepted and not listed (tests/compiler/cli.sh checks
 * --help against it). */
static const struct opt {
	const char *name;   /* the long option, or NULL */
	int val;            /* getopt's answer: the short option's letter, or a code of its own */
	int has_arg;
	const char *shown;  /* the left column of --help */
	const char *help;   /* '\n' starts a continuation line */
} opts[] = {
	{ NULL, 'o', required_argument, "-o FILE",
	  "write the output to FILE ('-' for stdout; default POLICY.o for objects,\nstdout for text)" },
	{ "emit", 'e', required_argument, "--emit=KIND", "ast | ir | llvm | asm | obj (default obj)" },
	{ NULL, 'O', required_argument, "-O1, -O2", "optimisation level (default -O2)" },
	{ NULL, 'I', required_argument, "-I DIR", "also search DIR for interface files (*.l7i)" },
	{ "passes", 'P', required_argument, "--passes=LIST",
	  "partial-evaluation passes to run: 'none', or a comma-separated\nsubset of %s (default:\nall, in order); "
	  "with --emit=ir the IR is printed after each pass" },
	{ "verify-ir", 'R', no_argument, "--verify-ir",
	  "check the IR's invariants after lowering and after each pass (also\nwith L7C_VERIFY_IR=1 in the environment, and in Debug builds)" },
	{ "explain", 'X', no_argument, "--explain",
	  "report, per program, the verifier budget (instructions, estimated\nprocessed instructions, stack, tail calls), "
	  "the object's worst\nagainst each kernel limit and, per rule, where it landed and what\ngoes to the slow path" },
	{ "verify", 'Y', no_argument, "--verify",
	  "with --explain: load every program into the running kernel and\nattach it as l7run would (needs root); exit 1 "
	  "if the kernel\nrefuses any (--explain -o FILE also writes the object it\nexplained, unless it was refused)" },
	{ "verify-cgroup", 'G', required_argument, "--verify-cgroup=DIR",
	  "with --verify: the cgroup v2 directory in which to make (and\nremove) a child cgroup for sock_ops (default: "
	  "the cgroup2 mount)" },
	{ "format", 'F', required_argument, "--format=FMT", "with --explain: text (default), json or html" },
	{ "budget", 'B', required_argument, "--budget=N",
	  "processed-instruction budget per program (default 1000000): a\nprogram the budget model estimates over it is "
	  "split into a chain\nof tail calls (see --explain)" },
	{ "split", 'L', required_argument, "--split=WHEN",
	  "auto (default): split what the budget model finds over the\nbudget; none: only what cannot be one program "
	  "(a jump's reach);\nparse: always end the parse half with a tail call into a decide\nprogram; rules: that, "
	  "and a decide program per rule (at most 33)" },
	{ "mode", 'M', required_argument, "--mode=MODE",
	  "both (default): the programs of both l7run modes; gateway or mesh:\nonly that mode's (compiles in about half "
	  "the time; l7run in the\nother mode refuses the object)" },
	{ "machinery", 'm', required_argument, "--machinery=HOW",
	  "prebuilt (default): the machinery functions no policy constant\nreaches come compiled with l7c and are "
	  "joined to the object; full:\nevery function through -O2 and the backend (slower, the same code)" },
	{ "eval", 'E', required_argument, "--eval=REQUEST",
	  "decide one raw HTTP request (a file of wire bytes) with the\nreference evaluator and print the decision; a request line\n"
	  "ending in HTTP/2: the stream an HTTP/2 client sends for it,\ndecided as mesh mode decides it" },
	{ "eval-source", 'S', required_argument, "--eval-source=IP", "with --eval: the client's address (default 127.0.0.1)" },
	{ "eval-service", 'Z', required_argument, "--eval-service=NAME",
	  "with --eval: the service the client connected to (default the first)" },
	{ "endpoints", 'D', required_argument, "--endpoints=FILE",
	  "with --eval: the sets of `endpoints(\"SET\")` upstreams are FILE's\n`NAME A.B.C.D:PORT [weight W]` lines, "
	  "read as l7run --endpoints\nreads them: the endpoint a request gets, the turns, or an\nempty set's 503" },
	{ "resolve", 'U', no_argument, "--resolve",
	  "with --eval: resolve the host names of `\"HOST:PORT\"` upstreams\nnow (getaddrinfo, as l7run does) and say "
	  "which endpoint a\nrequest gets" },
	{ "now", 'N', required_argument, "--now=EPOCH",
	  "with --eval: the Unix time JWTs' exp and nbf are checked against\n(default: now; l7run's clock for tests: L7RUN_JWT_NOW=EPOCH)" },
	{ "eval-audit", 'A', no_argument, "--eval-audit",
	  "with --eval: decide as `l7run --audit` does (no Deny enforced,\neach one audited)" },
	{ "time", 'T', no_argument, "--time",
	  "print the wall and CPU time of each stage (parse, resolve, lower,\npasses, codegen, link, optimise, emit, "
	  "budget model, verify) and\nthe splitter's compile rounds to stderr" },
	{ "color", 'c', required_argument, "--color=WHEN", "never | always | auto (default auto)" },
	{ "version", 'V', no_argument, "--version", "print the version" },
	{ "help", 'h', no_argument, "-h, --help", "print this text" },
};
#define NOPTS (sizeof opts / sizeof opts[0])

static void usage(FILE *o)
{
	fprintf(o, "usage: l7c [options] POLICY.l7\n"
		   "       l7c import [options] FILE.yaml... -o POLICY.l7   (Cilium and Istio policies; l7c import -h)\n"
		   "Compiles an L7 policy into a BPF object that l7run loads.\n"
		   "Exit status: 0 compiled, 1 the policy has errors or cannot be served (a kernel limit, or\n"
		   "--verify found the kernel refusing it: no object is written), 2 usage or I/O errors.\n\n");
	for (size_t i = 0; i < NOPTS; i++) {
		char buf[512];
		const char *h = opts[i].help;
		if (strstr(h, "%s")) {   /* the pass list, from ir/passes.def */
			snprintf(buf, sizeof buf, h, ir_pass_names());
			h = buf;
		}
		fprintf(o, "  %-20s", opts[i].shown);
		if (strlen(opts[i].shown) > 20)
			fprintf(o, "\n  %-20s", "");
		for (const char *nl; (nl = strchr(h, '\n')); h = nl + 1)
			fprintf(o, "%.*s\n  %-20s", (int)(nl - h), h, "");
		fprintf(o, "%s\n", h);
	}
}

static char *default_output(const char *in)
{
	const char *base = strrchr(in, '/');
	base = base ? base + 1 : in;
	size_t n = strlen(base);
	const char *dot = strrchr(base, '.');
	if (dot && dot != base)
		n = (size_t)(dot - base);
	char *out = malloc(n + 3);
	memcpy(out, base, n);
	memcpy(out + n, ".o", 3);
	return out;
}

/* An added field as the upstream (request) or the client (response) gets it. */
static void print_add(const char *what, const char *name, const char *value, int h2)
{
	printf("%s-add: ", what);
	for (const char *p = name; *p; p++)
		putchar(h2 && *p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p);
	printf(": %s\n", value);
}

/* An HTTP/2 error code's name (RFC 9113 7) */
static const char *h2_error_name(unsigned code)
{
	switch (code) {
#define H2_ERR_NAME(n, v) case v: return #n;
	L7_H2_ERRORS(H2_ERR_NAME)
#undef H2_ERR_NAME
	default: return "?";
	}
}

/* --eval: the decision the policy makes for one request, as the data plane would make it.
 * The request comes from `source` (network byte order) to `service` (NULL: the first); JWTs are
 * verified as the data plane does (its code, the policy's key files) at time `now`; rate
 * limits count as not reached (one request). */
static int eval(const struct ir_program *ir, const char *path, unsigned source, const char *service, long long now,
		bool audit_all, const struct eval_eps *eps)
{
	int svc = 0;
	while (service && svc < ir->nservices && strcmp(ir->services[svc].name, service))
		svc++;
	if (service && svc == ir->nservices) {
		fprintf(stderr, "l7c: error: --eval-service: the policy declares no service '%s'\n", service);
		return 2;
	}
	FILE *f = fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "l7c: error: cannot open '%s'\n", path);
		return 2;
	}
	static unsigned char bytes[L7_MAX_HEAD * 4];
	size_t n = fread(bytes, 1, sizeof(bytes), f);
	fclose(f);
	static struct l7_req req;
	/* a request line ending in HTTP/2: the stream an HTTP/2 client sends for it, decided as
	 * mesh mode decides it (its header block through the kernel's HPACK decoder) */
	static unsigned char blk[L7_H2_BLOCK_MAX + 1];
	unsigned h2_head = 0, h2_flags = 0;
	int h2_len = ir_h2_block(bytes, (unsigned)n, blk, sizeof(blk), &h2_head);
	if (h2_len == -2) {
		printf("verdict: incomplete (an HTTP/2 request line, and no end of the head in %zu bytes)\n", n);
		return 0;
	}
	if (h2_len < 0) {
		printf("verdict: refuse (no HTTP/2 header block of at most %d bytes: a line is no field, or too long)\n",
		       L7_H2_BLOCK_MAX);
		return 0;
	}
	int head = h2_len ? ir_parse_request_h2(ir, &req, blk, (unsigned)h2_len, &h2_flags)
			  : ir_parse_request(ir, &req, bytes, (unsigned)n);
	req.src_ip4 = source;
	req.service = (unsigned)svc;
	req.dst_port = ir->nservices ? ir->services[svc].endpoints[0].port : 80;
	if (h2_len && head) {
		unsigned code = (unsigned)-head & 0xff;
		if ((unsigned)-head & L7_H2_R_SLOW)
			printf("verdict: refuse stream REFUSED_STREAM (the kernel cannot decide this block: slow path %u)\n", code);
		else
			printf("verdict: refuse %s %s (%s)\n", (unsigned)-head & L7_H2_R_CONN ? "connection" : "stream",
			       h2_error_name(code), (unsigned)-head & L7_H2_R_CONN ? "GOAWAY" : "RST_STREAM: malformed");
		return 0;
	}
	if (h2_len)
		head = (int)h2_head;
	if (head <= 0) {
		static const int status[] = { [L7_E_BAD] = 400, [L7_E_TOO_LARGE] = 431, [L7_E_UNSUPPORTED] = 501,
					      [L7_E_URI_TOO_LONG] = 414 };
		if (head == 0)
			printf("verdict: incomplete (no end of the request head in %zu bytes)\n", n);
		else
			printf("verdict: refuse %d (the kernel parser rejects the request)\n", status[-head]);
		return 0;
	}
	char err[1024];
	struct ir_eval_env env = { .jwt_valid = ir_jwt_valid, .ctx = ir_jwt_env_new(ir, now, err, sizeof(err)),
				   .audit_all = audit_all, .lb_tab = eval_eps_tab, .lb_ctx = (void *)eps };
	if (!env.ctx)
		return fprintf(stderr, "l7c: error: %s\n", err), 2;
	struct ir_decision d;
	ir_eval_with(ir, &req, &env, &d);
	if (h2_len)
		printf("request: %.*s %.*s (HTTP/2, header block %d bytes%s)\n", req.method_s.len,
		       (char *)req.buf + req.method_s.off, req.target.len, (char *)req.buf + req.target.off, h2_len,
		       h2_flags & L7_H2_M_GRPC ? ", a gRPC call" : "");
	else
		printf("request: %.*s %.*s (head %d bytes)\n", req.method_s.len, (char *)req.buf + req.method_s.off,
		       req.target.len, (char *)req.buf + req.target.off, head);
	for (int i = 0; i < ir->njwts; i++)   /* the tokens the rules looked at */
		if (req.jwt_done >> i & 1)
			printf("jwt %s: %s (at %lld)\n", ir->jwts[i].name, ir_jwt_why(env.ctx, i, &req), now);
	ir_jwt_env_free(env.ctx);
	switch (d.term) {
	case IR_FORWARD: printf("verdict: forward %s\n", ir->upstreams[d.upstream].name); break;
	case IR_DENY:   /* and what a gRPC client gets instead (an HTTP/1.1 client: the status) */
		if (d.no_endpoint)
			printf("verdict: deny 503 (upstream %s has no endpoint)\n", ir->upstreams[d.upstream].name);
		else
			printf("verdict: deny %d\n", d.status);
		printf("grpc-status: %d %s (%s)\n", d.grpc, l7_grpc_status_name((unsigned)d.grpc),
		       d.grpc_named ? "named by the rule" : "of the HTTP status");
		break;
	case IR_FALLBACK: printf("verdict: fallback %s\n", ir->upstreams[d.upstream].name); break;
	default: printf("verdict: ?\n"); break;
	}
	/* what mesh mode does with such a stream, where it differs from the verdict (issue 14) */
	if (h2_len && d.term == IR_FALLBACK)
		printf("http2: answered 502: the fallback path speaks HTTP/1.1\n");
	if ((d.term != IR_DENY || d.no_endpoint) && ir->upstreams[d.upstream].nendpoints > 1) {
		const struct ir_target *t = &ir->upstreams[d.upstream];
		if (t->rt_kind != IR_RT_NONE) {
			eval_eps_print(eps, ir, &d, stdout);
		} else if (d.slot < 0) {
			printf("endpoint: round robin over %s#0..%s#%d (slots %d-%d): it rotates per request\n", t->name,
			       t->name, t->nendpoints - 1, t->slot, t->slot + t->nendpoints - 1);
		} else {
			const struct ir_endpoint *e = &t->endpoints[d.slot - t->slot];
			printf("endpoint: %s#%d %u.%u.%u.%u:%u (slot %d, ketama)\n", t->name, d.slot - t->slot, e->ip >> 24,
			       e->ip >> 16 & 255, e->ip >> 8 & 255, e->ip & 255, e->port, d.slot);
		}
	}
	if (d.rule == &ir->rbac_rule)
		printf("rule: rbac (an ALLOW policy applied and none of its rules allowed)\n");
	else if (d.rule->id)
		printf("rule: %d (line %u)\n", d.rule->id, d.line);
	else
		printf("rule: default (no policy decided)\n");
	for (int i = 0; i < d.naudit; i++)   /* rule 0: an ALLOW policy's 403 */
		printf("audit: would deny (line %u, rule %d)\n", d.audit_line[i], d.audit_rule[i]);
	for (int i = 0; i < d.ncounted; i++)
		printf("count: %s\n", ir->counters[d.counted[i]]);
	if (d.nolog)
		printf("access-log: no (NoLog)\n");
	/* what the upstream gets and what the client gets back: the sender's lines of the removed
	 * names go, the added lines come after the last field line, in this order (an HTTP/2
	 * stream's with their names in lower case: l7run adds them so, RFC 9113 8.2.1) */
	for (int i = 0; i < ir->nheaders; i++)
		if (d.del >> i & 1)
			printf("request-remove: %s\n", ir->headers[i]);
	for (int i = 0; i < d.nset; i++)
		print_add("request", ir->mutations[d.set[i]].name, ir->mutations[d.set[i]].value, h2_len);
	for (int i = 0; i < ir->nrheaders; i++)
		if (d.rdel >> i & 1)
			printf("response-remove: %s\n", ir->rheaders[i]);
	for (int i = 0; i < d.nrset; i++)
		print_add("response", ir->mutations[d.rset[i]].name, ir->mutations[d.rset[i]].value, h2_len);
	return 0;
}

static int write_file(const char *path, const char *data, size_t n)
{
	FILE *f = strcmp(path, "-") ? fopen(path, "wb") : stdout;
	if (!f) {
		fprintf(stderr, "l7c: error: cannot write '%s'\n", path);
		return 2;
	}
	size_t w = fwrite(data, 1, n, f);
	if ((f == stdout ? fflush(f) : fclose(f)) || w != n) {
		fprintf(stderr, "l7c: error: writing '%s' failed\n", path);
		return 2;
	}
	return 0;
}

/* The object (or assembly, or LLVM IR), with the programs the budget model finds too big for
 * the verifier split into tail-call chains (split.c). */
static int compile(const struct ir_program *ir, int opt_level, long budget, enum split_mode mode, enum codegen_mode progs,
		   int full, enum emit emit, const char *path, struct l7_diags *d, struct l7_timers *timers)
{
	struct split_build sb;
	int rc = split_build(ir, opt_level, budget, mode, progs, full, &sb, timers);
	for (int i = 0; !rc && i < sb.nwarnings; i++)
		fprintf(stderr, "l7c: warning: %s: %s (l7c --explain --verify shows the kernel's numbers)\n",
			ir->source_path, sb.warnings[i]);
	if (!rc && emit != EMIT_OBJ) {   /* the text of the same plan */
		struct codegen_opts o = { .opt_level = opt_level, .output = emit == EMIT_LLVM ? CG_EMIT_LLVM : CG_EMIT_ASM,
					  .out_path = path, .split = &sb.plan, .diags = d, .timers = timers };
		rc = codegen_emit(ir, &o) ? 2 : 0;
	} else if (!rc) {
		rc = write_file(path, sb.obj, sb.obj_len);
	}
	struct stat st;   /* no object the kernel would refuse, nor an older one in its place */
	if (rc && emit == EMIT_OBJ && strcmp(path, "-") && !stat(path, &st) && S_ISREG(st.st_mode))
		unlink(path);
	split_build_free(&sb);
	return rc;
}

int main(int argc, char **argv)
{
	/* `l7c import FILE.yaml... -o policy.l7`: a subcommand of its own (import/) */
	if (argc > 1 && !strcmp(argv[1], "import"))
		return l7_import_main(argc - 1, argv + 1);
	enum emit emit = EMIT_OBJ;
	int opt_level = 2, color = -1;
	const char *out = NULL, *eval_request = NULL, *eval_service = NULL, *passes = NULL, *eval_endpoints = NULL;
	unsigned eval_source = htonl(0x7f000001);
	long long eval_now = time(NULL);
	struct explain_opts ex = { .budget = 1000000 };
	bool do_explain = false, eval_audit = false, eval_resolve = false;
	enum codegen_mode progs = CG_MODE_BOTH;
	struct l7_timers timers = { .start = l7_tick() }, *tm = NULL;
	const char **incs = calloc((size_t)argc + 1, sizeof(char *));
	int ninc = 0;
	const char *env_verify = getenv("L7C_VERIFY_IR");
	bool verify_ir = L7C_VERIFY_IR_DEFAULT || (env_verify && *env_verify && strcmp(env_verify, "0"));

	struct option longopts[NOPTS + 1];
	char shortopts[2 * NOPTS + 1];
	int nlong = 0, nshort = 0;
	for (size_t i = 0; i < NOPTS; i++) {
		if (opts[i].name)
			longopts[nlong++] = (struct option){ opts[i].name, opts[i].has_arg, NULL, opts[i].val };
		if (opts[i].shown[0] == '-' && opts[i].shown[1] == opts[i].val) {   /* "-o FILE", "-h, --help" */
			shortopts[nshort++] = (char)opts[i].val;
			if (opts[i].has_arg)
				shortopts[nshort++] = ':';
		}
	}
	longopts[nlong] = (struct option){ NULL, 0, NULL, 0 };
	shortopts[nshort] = 0;
	int c;
	while ((c = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
		switch (c) {
		case 'o': out = optarg; break;
		case 'I': incs[ninc++] = optarg; break;
		case 'O':
			if (strcmp(optarg, "1") && strcmp(optarg, "2")) {
				fprintf(stderr, "l7c: error: -O%s: use -O1 or -O2 (-O0 cannot fit the BPF stack)\n", optarg);
				return 2;
			}
			opt_level = optarg[0] - '0';
			break;
		case 'e': {
			static const char *kinds[] = { "ast", "ir", "llvm", "asm", "obj" };
			int k = -1;
			for (int i = 0; i < 5; i++)
				if (!strcmp(optarg, kinds[i]))
					k = i;
			if (k < 0) {
				fprintf(stderr, "l7c: error: --emit=%s: expected ast, ir, llvm, asm or obj\n", optarg);
				return 2;
			}
			emit = (enum emit)k;
			break;
		}
		case 'E': eval_request = optarg; break;
		case 'S':
			if (inet_pton(AF_INET, optarg, &eval_source) != 1) {
				fprintf(stderr, "l7c: error: --eval-source: '%s' is not an IPv4 address\n", optarg);
				return 2;
			}
			break;
		case 'N': {
			char *end;
			eval_now = strtoll(optarg, &end, 10);
			if (*end || !*optarg || eval_now < 0) {
				fprintf(stderr, "l7c: error: --now=%s: expected a Unix time in seconds\n", optarg);
				return 2;
			}
			break;
		}
		case 'Z': eval_service = optarg; break;
		case 'A': eval_audit = true; break;
		case 'D': eval_endpoints = optarg; break;
		case 'U': eval_resolve = true; break;
		case 'P': passes = optarg; break;
		case 'R': verify_ir = true; break;
		case 'X': do_explain = true; break;
		case 'T': tm = &timers; break;
		case 'Y': ex.verify = 1; break;
		case 'G': ex.cgroup_root = optarg; break;
		case 'F':
			if (!strcmp(optarg, "text") || !strcmp(optarg, "json") || !strcmp(optarg, "html")) {
				ex.format = optarg[0] == 't' ? EXPLAIN_TEXT : optarg[0] == 'j' ? EXPLAIN_JSON : EXPLAIN_HTML;
				break;
			}
			fprintf(stderr, "l7c: error: --format=%s: expected text, json or html\n", optarg);
			return 2;
		case 'B': {
			char *end;
			ex.budget = strtol(optarg, &end, 10);
			if (*end || ex.budget <= 0) {
				fprintf(stderr, "l7c: error: --budget=%s: expected a positive number\n", optarg);
				return 2;
			}
			break;
		}
		case 'L':
			if (!strcmp(optarg, "auto") || !strcmp(optarg, "none") || !strcmp(optarg, "parse") || !strcmp(optarg, "rules")) {
				ex.split = optarg[0] == 'a' ? SPLIT_AUTO : optarg[0] == 'n' ? SPLIT_NONE : optarg[0] == 'p' ? SPLIT_PARSE : SPLIT_RULES;
				break;
			}
			fprintf(stderr, "l7c: error: --split=%s: expected auto, none, parse or rules\n", optarg);
			return 2;
		case 'M':
			if (!strcmp(optarg, "both") || !strcmp(optarg, "gateway") || !strcmp(optarg, "mesh")) {
				progs = optarg[0] == 'b' ? CG_MODE_BOTH : optarg[0] == 'g' ? CG_MODE_GATEWAY : CG_MODE_MESH;
				break;
			}
			fprintf(stderr, "l7c: error: --mode=%s: expected both, gateway or mesh\n", optarg);
			return 2;
		case 'm':
			if (!strcmp(optarg, "prebuilt") || !strcmp(optarg, "full")) {
				ex.full_machinery = optarg[0] == 'f';
				break;
			}
			fprintf(stderr, "l7c: error: --machinery=%s: expected prebuilt or full\n", optarg);
			return 2;
		case 'c': color = !strcmp(optarg, "always") ? 1 : !strcmp(optarg, "never") ? 0 : -1; break;
		case 'V': printf("l7c %s (LLVM 19, BPF CPU v3)\n", L7C_VERSION); return 0;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, "l7c: error: %s\n", optind >= argc ? "no policy file given" : "more than one policy file given");
		usage(stderr);
		return 2;
	}
	const char *input = argv[optind];
	if (progs != CG_MODE_BOTH && do_explain) {   /* --verify loads and attaches both modes' programs */
		fprintf(stderr, "l7c: error: --mode: not with --explain, which reports both modes' programs\n");
		return 2;
	}
	if ((eval_endpoints || eval_resolve) && !eval_request) {
		fprintf(stderr, "l7c: error: %s: only with --eval (l7run --endpoints reads the file at run time)\n",
			eval_endpoints ? "--endpoints" : "--resolve");
		return 2;
	}

	struct l7_diags d = { .out = stderr, .color = color < 0 ? isatty(2) : color };
	struct l7_pipeline po = { .include_dirs = incs, .ninclude = ninc, .ast_only = emit == EMIT_AST, .passes = passes,
				  .verify_ir = verify_ir, .dump_each = emit == EMIT_IR ? stdout : NULL, .timers = tm };
	struct l7_unit u;
	int rc = (int)l7_unit_load(&u, input, &po, &d);
	if (rc == L7_UNIT_INTERNAL)
		rc = 2;
	if (rc)
		goto done;
	const struct ir_program *ir = u.ir;
	if (emit == EMIT_AST) {
		l7_ast_dump(&u.ast, stdout);
	} else if (do_explain) {
		ex.opt_level = opt_level;
		ex.out_path = out;
		ex.timers = tm;
		rc = explain(ir, &ex);
	} else if (eval_request) {
		struct eval_eps *eps = eval_eps_new(ir, eval_endpoints, eval_resolve, &d, &rc);
		if (!rc)
			rc = eval(ir, eval_request, eval_source, eval_service, eval_now, eval_audit, eps);
		eval_eps_free(eps);
	} else if (emit == EMIT_IR) {
		/* printed by the pipeline, after lowering and after each pass */
	} else {
		char *def = NULL;
		rc = compile(ir, opt_level, ex.budget, (enum split_mode)ex.split, progs, ex.full_machinery, emit, out ? out : emit == EMIT_OBJ ? (def = default_output(input)) : "-",
			     &d, tm);
		free(def);
	}
done:
	if (tm)
		l7_timers_print(tm, stderr);
	if (d.errors && u.src)   /* not for a file that could not be read: that was all */
		fprintf(stderr, "%d error%s generated.\n", d.errors, d.errors == 1 ? "" : "s");
	l7_unit_free(&u);
	free(incs);
	return rc;
}
