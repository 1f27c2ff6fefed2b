/* probe.c: l7run asks the running kernel for each thing it needs (probe.def) before loading a
 * policy, so that a kernel that lacks one is named with what to do instead of surfacing later
 * as a bare errno from an attach (this happened: on one build of 6.18.44 the split gateway
 * parser's attach was refused with EINVAL, docs/architecture.md).
 *
 * Where loading a program says enough, the probe loads one (libbpf's own probes); where only
 * running it says enough (a tail call that is accepted but never reaches its target, a redirect
 * that does not land), it builds a few instructions by hand, attaches them to a SOCKHASH of its
 * own and sends a few bytes over a loopback TCP connection of its own. */
#define _GNU_SOURCE   /* accept4 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/statfs.h>
#include <linux/magic.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include "probe.h"

static const struct {
	const char *name, *what, *advice;
	int modes, need;
} probes[] = {
#define L7_PROBE(id, modes, need, what, advice) { #id, what, advice, modes, need },
#include "probe.def"
#undef L7_PROBE
};

/* ---- a few instructions, by hand (the probes are too small for an object file) ---- */
#define I(code, dst, src, off, imm) ((struct bpf_insn){ code, dst, src, off, imm })
#define MOV_IMM(d, i)     I(BPF_ALU64 | BPF_MOV | BPF_K, d, 0, 0, i)
#define MOV_REG(d, s)     I(BPF_ALU64 | BPF_MOV | BPF_X, d, s, 0, 0)
#define ADD_IMM(d, i)     I(BPF_ALU64 | BPF_ADD | BPF_K, d, 0, 0, i)
#define ST_DW(d, off, i)  I(BPF_ST | BPF_MEM | BPF_DW, d, 0, off, i)
#define LDX_W(d, s, off)  I(BPF_LDX | BPF_MEM | BPF_W, d, s, off, 0)
#define LD_MAP(d, fd)     I(BPF_LD | BPF_DW | BPF_IMM, d, BPF_PSEUDO_MAP_FD, 0, fd), I(0, 0, 0, 0, 0)
#define CALL(f)           I(BPF_JMP | BPF_CALL, 0, 0, 0, f)
#define EXIT()            I(BPF_JMP | BPF_EXIT, 0, 0, 0, 0)

static int load(enum bpf_prog_type type, enum bpf_attach_type at, const struct bpf_insn *insn, size_t n)
{
	LIBBPF_OPTS(bpf_prog_load_opts, o, .expected_attach_type = at);
	return bpf_prog_load(type, NULL, "GPL", insn, n, &o);
}

/* parser/callee: the whole skb is one message */
static int prog_parser(void)
{
	struct bpf_insn p[] = { LDX_W(BPF_REG_0, BPF_REG_1, offsetof(struct __sk_buff, len)), EXIT() };
	return load(BPF_PROG_TYPE_SK_SKB, BPF_SK_SKB_STREAM_PARSER, p, 2);
}

static int prog_verdict_pass(void)
{
	struct bpf_insn p[] = { MOV_IMM(BPF_REG_0, SK_PASS), EXIT() };
	return load(BPF_PROG_TYPE_SK_SKB, BPF_SK_SKB_STREAM_VERDICT, p, 2);
}

/* tail call into slot 0 of `array`; falling through returns `fallthrough`, chosen so that a
 * tail call that does not arrive leaves the bytes undelivered where the probe looks */
static int prog_tail(enum bpf_prog_type type, enum bpf_attach_type at, int array, int fallthrough)
{
	struct bpf_insn p[] = { LD_MAP(BPF_REG_2, array), MOV_IMM(BPF_REG_3, 0), CALL(BPF_FUNC_tail_call),
				MOV_IMM(BPF_REG_0, fallthrough), EXIT() };
	return load(type, at, p, sizeof p / sizeof p[0]);
}

/* SK_MSG: redirect the message into the ingress of the socket at key 0 of `hash` */
static int prog_msg_ingress(int hash)
{
	struct bpf_insn p[] = { ST_DW(BPF_REG_10, -8, 0), MOV_REG(BPF_REG_3, BPF_REG_10), ADD_IMM(BPF_REG_3, -8),
				LD_MAP(BPF_REG_2, hash), MOV_IMM(BPF_REG_4, BPF_F_INGRESS),
				CALL(BPF_FUNC_msg_redirect_hash), EXIT() };
	return load(BPF_PROG_TYPE_SK_MSG, BPF_SK_MSG_VERDICT, p, sizeof p / sizeof p[0]);
}

/* ---- a loopback TCP connection of the probe's own ---- */
struct pair { int l, c, s; };

static int pair_open(struct pair *p)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof a;
	int one = 1;

	p->l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	p->c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	p->s = -1;
	if (p->l < 0 || p->c < 0 || bind(p->l, (void *)&a, sizeof a) || listen(p->l, 1) ||
	    getsockname(p->l, (void *)&a, &al) || connect(p->c, (void *)&a, sizeof a))
		return -1;
	setsockopt(p->c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	p->s = accept4(p->l, NULL, NULL, SOCK_CLOEXEC);
	return p->s < 0 ? -1 : 0;
}

static void pair_close(struct pair *p)
{
	if (p->c >= 0)
		close(p->c);
	if (p->s >= 0)
		close(p->s);
	if (p->l >= 0)
		close(p->l);
}

static int sockhash(void)
{
	return bpf_map_create(BPF_MAP_TYPE_SOCKHASH, NULL, 8, 8, 2, NULL);
}

static int put_sock(int map, __u64 key, int fd)
{
	__u64 v = (__u64)fd;
	return bpf_map_update_elem(map, &key, &v, BPF_ANY);
}

/* Write `l7probe` on from and read it on to within 300 ms: 0, or -1 with what was seen. */
static int ping(int from, int to, char *why, size_t n)
{
	static const char msg[] = "l7probe";
	char got[16] = "";
	struct pollfd pf = { .fd = to, .events = POLLIN };

	if (send(from, msg, 7, MSG_NOSIGNAL) != 7) {
		snprintf(why, n, "send: %s", strerror(errno));
		return -1;
	}
	if (poll(&pf, 1, 300) != 1) {
		snprintf(why, n, "the bytes never arrived where the program sent them");
		return -1;
	}
	ssize_t r = recv(to, got, sizeof got - 1, MSG_DONTWAIT);
	if (r != 7 || memcmp(got, msg, 7)) {
		snprintf(why, n, "%zd bytes arrived, not the 7 sent", r);
		return -1;
	}
	return 0;
}

static int attach(int prog, int map, enum bpf_attach_type at, const char *what, char *why, size_t n)
{
	if (bpf_prog_attach(prog, map, at, 0) == 0)
		return 0;
	snprintf(why, n, "attaching the %s to a SOCKHASH was refused: %s", what, strerror(errno));
	return -1;
}

static void close_all(const int *fd, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (fd[i] >= 0)
			close(fd[i]);
}

/* Stream parser and verdict (tail-calling into a verdict when tail is set, as a split gateway
 * policy's is) on a SOCKHASH holding the server end: the client's bytes must come out of the
 * server end's recv. A tail call that falls through drops them. Some kernel builds refuse to
 * attach a stream parser that tail-calls (EINVAL), which is why the chain is the verdict's. */
static int check_strp(int tail, char *why, size_t n)
{
	struct pair p = { -1, -1, -1 };
	int hash = sockhash(), array = -1, callee = -1, parser = prog_parser(), verdict = -1, rc = -1;

	if (tail) {
		__u32 k = 0;
		array = bpf_map_create(BPF_MAP_TYPE_PROG_ARRAY, NULL, 4, 4, 1, NULL);
		callee = prog_verdict_pass();
		if (array >= 0 && callee >= 0 && bpf_map_update_elem(array, &k, &callee, BPF_ANY) == 0)
			verdict = prog_tail(BPF_PROG_TYPE_SK_SKB, BPF_SK_SKB_STREAM_VERDICT, array, SK_DROP);
	} else {
		verdict = prog_verdict_pass();
	}
	if (hash < 0 || parser < 0 || verdict < 0) {
		snprintf(why, n, "loading the probe programs failed: %s", strerror(errno));
		goto out;
	}
	if (attach(parser, hash, BPF_SK_SKB_STREAM_PARSER, "stream parser", why, n) ||
	    attach(verdict, hash, BPF_SK_SKB_STREAM_VERDICT, tail ? "tail-calling stream verdict" : "stream verdict",
		   why, n))
		goto out;
	if (pair_open(&p) || put_sock(hash, 1, (int)p.s)) {
		snprintf(why, n, "a loopback connection in a SOCKHASH: %s", strerror(errno));
		goto out;
	}
	rc = ping(p.c, p.s, why, n);
	if (rc && tail)
		snprintf(why, n, "the verdict's tail call never reached its target (the bytes were dropped)");
out:
	pair_close(&p);   /* the sockets leave the map as they close; then the map and programs go */
	close_all((int[]){ hash, array, callee, parser, verdict }, 5);
	return rc;
}

/* SK_MSG on a SOCKHASH holding the client end at key 0, redirecting what it sends into its own
 * ingress (mesh mode answers a deny so): the bytes must come out of the client's own recv, not
 * the server's. With tail, the redirect is the tail call's target (falling through passes the
 * bytes to TCP, where they would reach the server instead). */
static int check_msg(int tail, char *why, size_t n)
{
	struct pair p = { -1, -1, -1 };
	int hash = sockhash(), array = -1, callee = -1, prog = -1, rc = -1;

	if (hash >= 0 && tail) {
		__u32 k = 0;
		array = bpf_map_create(BPF_MAP_TYPE_PROG_ARRAY, NULL, 4, 4, 1, NULL);
		callee = prog_msg_ingress(hash);
		if (array >= 0 && callee >= 0 && bpf_map_update_elem(array, &k, &callee, BPF_ANY) == 0)
			prog = prog_tail(BPF_PROG_TYPE_SK_MSG, BPF_SK_MSG_VERDICT, array, SK_PASS);
	} else if (hash >= 0) {
		prog = prog_msg_ingress(hash);
	}
	if (hash < 0 || prog < 0) {
		snprintf(why, n, "loading the probe programs failed: %s", strerror(errno));
		goto out;
	}
	if (attach(prog, hash, BPF_SK_MSG_VERDICT, tail ? "tail-calling SK_MSG program" : "SK_MSG program", why, n))
		goto out;
	if (pair_open(&p) || put_sock(hash, 0, p.c)) {
		snprintf(why, n, "a loopback connection in a SOCKHASH: %s", strerror(errno));
		goto out;
	}
	rc = ping(p.c, p.c, why, n);
	if (rc && tail)
		snprintf(why, n, "the SK_MSG program's tail call never reached its target");
	else if (rc)
		snprintf(why, n, "the redirected bytes did not land in the target socket's receive queue");
out:
	pair_close(&p);
	close_all((int[]){ hash, array, callee, prog }, 4);
	return rc;
}

static int has_member(const struct btf *btf, const char *type, const char *member)
{
	int id = btf__find_by_name_kind(btf, type, BTF_KIND_STRUCT);
	const struct btf_type *t = id > 0 ? btf__type_by_id(btf, id) : NULL;
	const struct btf_member *m = t ? btf_members(t) : NULL;

	for (int i = 0; t && i < btf_vlen(t); i++)
		if (!strcmp(btf__name_by_offset(btf, m[i].name_off), member))
			return 1;
	return 0;
}

static int check_btf(char *why, size_t n)
{
	struct btf *btf = btf__load_vmlinux_btf();
	int ok;

	if (!btf) {
		snprintf(why, n, "no kernel BTF (/sys/kernel/btf/vmlinux): %s", strerror(errno));
		return -1;
	}
	ok = has_member(btf, "sk_psock", "msg_tot_len") && has_member(btf, "sock", "sk_user_data");
	if (!ok)
		snprintf(why, n, "the kernel's BTF lacks sk_psock.msg_tot_len or sock.sk_user_data");
	btf__free(btf);
	return ok ? 0 : -1;
}

/* The mesh's l7_mesh_redir_prog, reduced to `return 0`, on the tracepoint it uses: a BTF-typed
 * one (tp_btf, l7/progs.def), loaded against the kernel's btf_trace_sk_data_ready. */
static int check_tp(char *why, size_t n)
{
	struct bpf_insn p[] = { MOV_IMM(BPF_REG_0, 0), EXIT() };
	struct btf *btf = btf__load_vmlinux_btf();
	int id = btf ? btf__find_by_name_kind(btf, "btf_trace_sk_data_ready", BTF_KIND_TYPEDEF) : -1;
	btf__free(btf);
	if (id < 0) {
		snprintf(why, n, "the kernel's BTF has no sk_data_ready tracepoint");
		return -1;
	}
	LIBBPF_OPTS(bpf_prog_load_opts, o, .expected_attach_type = BPF_TRACE_RAW_TP, .attach_btf_id = (__u32)id);
	int prog = bpf_prog_load(BPF_PROG_TYPE_TRACING, NULL, "GPL", p, 2, &o);
	int tp = prog < 0 ? -1 : bpf_raw_tracepoint_open(NULL, prog);
	if (tp < 0)
		snprintf(why, n, "%s: %s", prog < 0 ? "load" : "attach to sk_data_ready", strerror(errno));
	close_all((int[]){ tp, prog }, 2);
	return tp < 0 ? -1 : 0;
}

static int check_helper(enum bpf_prog_type type, enum bpf_func_id f, char *why, size_t n)
{
	int r = libbpf_probe_bpf_helper(type, f, NULL);
	if (r == 1)
		return 0;
	snprintf(why, n, r < 0 ? "the probe failed: %s" : "the verifier does not know it", strerror(-r));
	return -1;
}

static int check_type(enum bpf_prog_type type, char *why, size_t n)
{
	int r = libbpf_probe_bpf_prog_type(type, NULL);
	if (r == 1)
		return 0;
	snprintf(why, n, r < 0 ? "the probe failed: %s" : "the kernel does not load them", strerror(-r));
	return -1;
}

static int check(enum probe_id id, char *why, size_t n)
{
	struct statfs st;

	switch (id) {
	case PROBE_bpffs:
		if (statfs("/sys/fs/bpf", &st) == 0 && st.f_type == BPF_FS_MAGIC)
			return 0;
		snprintf(why, n, "/sys/fs/bpf is not a bpf filesystem");
		return -1;
	case PROBE_prog_sk_skb:   return check_type(BPF_PROG_TYPE_SK_SKB, why, n);
	case PROBE_prog_sk_msg:   return check_type(BPF_PROG_TYPE_SK_MSG, why, n);
	case PROBE_prog_sockops:  return check_type(BPF_PROG_TYPE_SOCK_OPS, why, n);
	case PROBE_bpf_loop:      return check_helper(BPF_PROG_TYPE_SK_MSG, BPF_FUNC_loop, why, n);
	case PROBE_bpf_strncmp:   return check_helper(BPF_PROG_TYPE_SK_MSG, BPF_FUNC_strncmp, why, n);
	case PROBE_skc_to_tcp_sock: return check_helper(BPF_PROG_TYPE_SOCK_OPS, BPF_FUNC_skc_to_tcp_sock, why, n);
	case PROBE_strp_attach:   return check_strp(0, why, n);
	case PROBE_verdict_tail_call: return check_strp(1, why, n);
	case PROBE_msg_ingress:   return check_msg(0, why, n);
	case PROBE_msg_tail_call: return check_msg(1, why, n);
	case PROBE_btf_psock:     return check_btf(why, n);
	case PROBE_tp_data_ready: return check_tp(why, n);
	case PROBE_N:             break;
	}
	return -1;
}

void probe_kernel(struct kernel_probe *kp, int modes)
{
	if (!kp->modes_done)
		for (int i = 0; i < PROBE_N; i++)
			kp->ok[i] = -1;
	/* L7RUN_PROBE_FAIL=id[,id...]: report those as missing (tests of what l7run says then) */
	const char *fail = getenv("L7RUN_PROBE_FAIL");
	for (int i = 0; i < PROBE_N; i++) {
		if (!(probes[i].modes & modes) || kp->ok[i] >= 0)
			continue;
		kp->detail[i][0] = 0;
		kp->ok[i] = check((enum probe_id)i, kp->detail[i], sizeof kp->detail[i]) == 0;
		size_t len = strlen(probes[i].name);
		for (const char *f = fail; f && *f; f += strcspn(f, ",") + (f[strcspn(f, ",")] == ',')) {
			if (strncmp(f, probes[i].name, len) == 0 && (f[len] == ',' || f[len] == 0)) {
				kp->ok[i] = 0;
				snprintf(kp->detail[i], sizeof kp->detail[i], "reported missing by L7RUN_PROBE_FAIL");
			}
		}
	}
	kp->modes_done |= modes;
}

int probe_require(struct kernel_probe *kp, int mode, int split, char *err, size_t errlen)
{
	size_t used = 0;

	probe_kernel(kp, mode);
	err[0] = 0;
	for (int i = 0; i < PROBE_N; i++) {
		if (!(probes[i].modes & mode) || kp->ok[i])
			continue;
		if (probes[i].need == PN_WARN || (probes[i].need == PN_SPLIT && !split)) {
			if (probes[i].need == PN_WARN && !(kp->warned & mode))
				fprintf(stderr, "l7run: warning: this kernel lacks %s (%s); %s\n", probes[i].what,
					kp->detail[i], probes[i].advice);
			continue;
		}
		used += (size_t)snprintf(err + used, used < errlen ? errlen - used : 0,
					 "%sthis kernel lacks %s (probe %s: %s); %s", used ? "\n  " : "",
					 probes[i].what, probes[i].name, kp->detail[i], probes[i].advice);
		if (used >= errlen)
			break;
	}
	kp->warned |= mode;
	return err[0] ? -1 : 0;
}

int probe_print(FILE *out, struct kernel_probe *kp, int modes)
{
	static const char *need[] = { "required", "split objects", "optional" };
	int missing = 0;

	probe_kernel(kp, modes);
	for (int i = 0; i < PROBE_N; i++) {
		if (!(probes[i].modes & modes))
			continue;
		fprintf(out, "%-16s %-8s %-13s %s%s%s%s%s\n", probes[i].name, kp->ok[i] ? "ok" : "MISSING",
			need[probes[i].need], probes[i].what, kp->ok[i] ? "" : ": ", kp->ok[i] ? "" : kp->detail[i],
			kp->ok[i] ? "" : "; ", kp->ok[i] ? "" : probes[i].advice);
		missing += !kp->ok[i] && probes[i].need == PN_ALWAYS;
	}
	return missing ? 1 : 0;
}
