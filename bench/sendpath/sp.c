/* Send-path prototype for gateway mode (bench/sendpath.py, issue #17 item 1). Not l7run: a
 * one-thread epoll proxy that pairs each client with its own upstream connection(s) and moves the
 * bytes one of several ways, so that the kernel's send paths can be compared on this machine:
 *
 *   copy       recv(client) -> send(upstream) and back: a plain user-space proxy, no BPF
 *   splice     the same through a pipe per direction (splice(2), no copy to user space)
 *   passcopy   copy, with the client in a SOCKHASH whose verdict passes each message (SK_PASS:
 *              where the kernel would decide before user space moves the bytes; they reach
 *              recv() through the psock's ingress queue)
 *   msgcopy    requests: recv(client) -> send(P0), whose SK_MSG redirects them out of P1 (the
 *              upstream a decision would pick), inline in that sendmsg (tcp_bpf_sendmsg_redir);
 *              responses: recv(P1) -> send(client), the client without programs
 *   msgsplice  msgcopy with splice(2) both ways (splice's MSG_SPLICE_PAGES send still runs SK_MSG:
 *              the redirect counter says so)
 *   msgskb     requests as msgcopy; responses redirected by an sk_skb verdict on P1 into the
 *              client (today's response path: sk_psock_skb_redirect, the psock backlog kworker)
 *   msgpass    msgskb written into the upstream's own socket, whose SK_MSG passes it (SK_PASS: the
 *              decision kept the upstream the client is bound to, the common case)
 *   skb        both directions by sk_skb verdict redirects, nothing through user space: today's
 *              mechanism without strparser and without a policy
 *
 * usage: sp MODE LISTEN_PORT BACKEND_PORT [sp.bpf.o]   (prints "ready PROG_ID..." when listening)
 *        sp dropprobe sp.bpf.o [N] [drop|discard]: what a sender sees when its SK_MSG passes the
 *        first N (10; 0: none) bytes of a 30-byte write and drops the rest (a deny in a write that
 *        held earlier requests), then a write of 4 it drops, then one of 4 it passes; discard:
 *        the program redirects into a discard socket's receive queue instead of dropping; prints
 *        "dropprobe HOW send=N errno=E then=N2 errno=E2 after=N3 errno=E3 received=M intact=0|1
 *        discarded=D msg_runs=R" (intact: the peer got exactly the N bytes and the last 4)
 *        sp spanprobe sp.bpf.o [pass|redirect]: where an SK_MSG verdict's apply_bytes ends across
 *        writes (see spanprobe)
 *        sp fullprobe sp.bpf.o [nonblock|block|pass] [SIZE]: writes of SIZE (1000) bytes into a
 *        socket whose SK_MSG redirects out of one whose peer does not read (or passes, its own
 *        peer not reading), until send fails or comes short; prints "fullprobe HOW size=S
 *        writes=W sent=N received=M intact=0|1 astray=A errno=E msg_runs=R msg_bytes=B"
 * Bounded by its caller (bench/sendpath.py ends it by pid). No policy runs: the policy's cost is
 * the same on each path. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>
#include "sp.h"

enum mode { COPY, SPLICE, PASSCOPY, MSGCOPY, MSGSPLICE, MSGSKB, MSGPASS, SKB };
static const char *const names[] = { "copy", "splice", "passcopy", "msgcopy", "msgsplice", "msgskb", "msgpass", "skb" };

struct conn {
	int c, p0, p1;          /* client; the socket written into (P0, = P1 without BPF); upstream */
	int req[2], resp[2];    /* pipes (splice modes) */
};

struct end {                    /* epoll's data: which direction of which connection */
	struct conn *k;
	int resp;
};

struct sp {
	enum mode mode;
	struct sockaddr_in be;
	int socks, rsocks, targets, redir, rredir;   /* map fds */
	struct bpf_object *obj;
	char buf[65536];
};

static int is_bpf(enum mode m) { return m >= PASSCOPY; }
static int is_splice(enum mode m) { return m == SPLICE || m == MSGSPLICE; }

static uint32_t ports(int fd)
{
	struct sockaddr_in l, r;
	socklen_t n = sizeof(l), m = sizeof(r);

	if (getsockname(fd, (struct sockaddr *)&l, &n) || getpeername(fd, (struct sockaddr *)&r, &m))
		return 0;
	return (uint32_t)ntohs(l.sin_port) << 16 | ntohs(r.sin_port);
}

static int put(int map, int fd)
{
	uint64_t k = ports(fd), v = (uint64_t)fd;

	return bpf_map_update_elem(map, &k, &v, BPF_ANY);
}

static int redirect(int map, int from, int to)
{
	uint32_t k = ports(from);
	uint64_t v = ports(to);

	return bpf_map_update_elem(map, &k, &v, BPF_ANY);
}

static void unredirect(struct sp *s, int from)
{
	uint32_t k = ports(from);

	bpf_map_delete_elem(s->redir, &k);
	bpf_map_delete_elem(s->rredir, &k);
}

static int dial(struct sp *s)
{
	int one = 1, fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0)
		return -1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, (struct sockaddr *)&s->be, sizeof(s->be))) {
		close(fd);
		return -1;
	}
	fcntl(fd, F_SETFL, O_NONBLOCK);
	return fd;
}

static void wait_out(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLOUT };

	poll(&p, 1, 1000);
}

static int send_all(int fd, const char *b, ssize_t n)
{
	while (n > 0) {
		ssize_t w = send(fd, b, (size_t)n, MSG_NOSIGNAL);
		if (w < 0 && errno == EAGAIN) {
			wait_out(fd);
			continue;
		}
		if (w <= 0)
			return -1;
		b += w;
		n -= w;
	}
	return 0;
}

/* Move what `from` has into `to`: 1 moved, 0 nothing yet, -1 closed or failed. */
static int move(struct sp *s, int from, int to, int pipe[2])
{
	ssize_t n;

	if (!is_splice(s->mode)) {
		n = recv(from, s->buf, sizeof(s->buf), MSG_DONTWAIT);
		if (n < 0)
			return errno == EAGAIN ? 0 : -1;
		return n && !send_all(to, s->buf, n) ? 1 : -1;
	}
	n = splice(from, NULL, pipe[1], NULL, 65536, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
	if (n < 0)
		return errno == EAGAIN ? 0 : -1;
	if (!n)
		return -1;
	while (n > 0) {
		ssize_t w = splice(pipe[0], NULL, to, NULL, (size_t)n, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
		if (w < 0 && errno == EAGAIN) {
			wait_out(to);
			continue;
		}
		if (w <= 0)
			return -1;
		n -= w;
	}
	return 1;
}

static void drop(struct sp *s, struct conn *k, struct end *e)
{
	if (is_bpf(s->mode)) {
		unredirect(s, k->c);
		unredirect(s, k->p0);
		unredirect(s, k->p1);
	}
	close(k->c);
	if (k->p0 != k->p1)
		close(k->p0);
	close(k->p1);
	if (is_splice(s->mode)) {
		close(k->req[0]), close(k->req[1]);
		close(k->resp[0]), close(k->resp[1]);
	}
	free(e);
	free(k);
}

static int setup(struct sp *s, struct conn *k)
{
	k->p1 = dial(s);
	if (k->p1 < 0)
		return -1;
	k->p0 = k->p1;
	if (is_splice(s->mode) && (pipe2(k->req, O_NONBLOCK) || pipe2(k->resp, O_NONBLOCK)))
		return -1;
	if (!is_bpf(s->mode))
		return 0;
	if (s->mode == PASSCOPY) {
		int one = 1;
		/* what came before the insert is seen by no program: SO_RCVLOWAT re-fires data-ready */
		return put(s->rsocks, k->c) || setsockopt(k->c, SOL_SOCKET, SO_RCVLOWAT, &one, sizeof(one));
	}
	if (s->mode == SKB) {
		int one = 1;
		return put(s->targets, k->c) || put(s->targets, k->p1) || redirect(s->rredir, k->c, k->p1) ||
		       redirect(s->rredir, k->p1, k->c) || put(s->rsocks, k->p1) || put(s->rsocks, k->c) ||
		       setsockopt(k->c, SOL_SOCKET, SO_RCVLOWAT, &one, sizeof(one));
	}
	if (s->mode != MSGPASS && ((k->p0 = dial(s)) < 0 || put(s->socks, k->p0) || redirect(s->redir, k->p0, k->p1)))
		return -1;
	if (put(s->socks, k->p1))
		return -1;
	return s->mode == MSGSKB || s->mode == MSGPASS ?
		put(s->targets, k->c) || put(s->rsocks, k->p1) || redirect(s->rredir, k->p1, k->c) : 0;
}

static unsigned prog_id(int fd)
{
	struct bpf_prog_info info = { 0 };
	__u32 len = sizeof(info);

	return bpf_obj_get_info_by_fd(fd, &info, &len) ? 0 : info.id;
}

static int load(struct sp *s, const char *obj)
{
	struct bpf_object *o = bpf_object__open_file(obj, NULL);
	struct bpf_program *msg, *verdict;

	if (!o || bpf_object__load(o))
		return -1;
	s->obj = o;
	s->socks = bpf_object__find_map_fd_by_name(o, "sp_socks");
	s->rsocks = bpf_object__find_map_fd_by_name(o, "sp_rsocks");
	s->targets = bpf_object__find_map_fd_by_name(o, "sp_targets");
	s->redir = bpf_object__find_map_fd_by_name(o, "sp_redir");
	s->rredir = bpf_object__find_map_fd_by_name(o, "sp_rredir");
	msg = bpf_object__find_program_by_name(o, "sp_msg");
	verdict = bpf_object__find_program_by_name(o, "sp_verdict");
	if (!msg || !verdict || bpf_prog_attach(bpf_program__fd(msg), s->socks, BPF_SK_MSG_VERDICT, 0) ||
	    bpf_prog_attach(bpf_program__fd(verdict), s->rsocks, BPF_SK_SKB_STREAM_VERDICT, 0))
		return -1;
	printf("ready %u %u\n", prog_id(bpf_program__fd(msg)),
	       prog_id(bpf_program__fd(verdict)));
	return 0;
}

/* sp_count[idx] summed over the CPUs (0 on failure). */
static uint64_t count_of(struct sp *s, uint32_t idx)
{
	uint64_t v[256], sum = 0;
	int map = bpf_object__find_map_fd_by_name(s->obj, "sp_count"), ncpu = libbpf_num_possible_cpus();

	if (map < 0 || ncpu <= 0 || ncpu > 256 || bpf_map_lookup_elem(map, &idx, v))
		return 0;
	for (int i = 0; i < ncpu; i++)
		sum += v[i];
	return sum;
}

/* Everything fd receives until it is quiet for 300 ms, NUL-terminated (cap - 1 at most). */
static ssize_t drain(int fd, char *buf, size_t cap)
{
	struct pollfd pf = { .fd = fd, .events = POLLIN };
	ssize_t r = 0, g;

	while (poll(&pf, 1, 300) > 0 && (g = recv(fd, buf + r, cap - 1 - (size_t)r, MSG_DONTWAIT)) > 0)
		r += g;
	buf[r] = 0;
	return r;
}

/* A loopback pair whose sending end is in sp_socks; the SK_MSG program passes `pass` bytes of
 * the first write (0: none) and drops the rest, and the next write; then user space tells it to
 * pass again and writes once more. discard: the program redirects what it would drop into the
 * receive queue of a socket of its own (BPF_F_INGRESS) instead of returning SK_DROP. */
static int dropprobe(const char *obj, uint32_t pass, int discard)
{
	static struct sp s;
	static const char first[] = "AAAAAAAAAABBBBBBBBBBBBBBBBBBBB";
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t n = sizeof(a);
	uint32_t zero = 0;
	char buf[64], want[64], dbuf[64];
	int l = socket(AF_INET, SOCK_STREAM, 0), c = socket(AF_INET, SOCK_STREAM, 0), d = socket(AF_INET, SOCK_STREAM, 0);
	int p, e1, e2, e3;
	ssize_t w1, w2, w3, r, dr;

	if (load(&s, obj) || bind(l, (struct sockaddr *)&a, sizeof(a)) || listen(l, 2) ||
	    getsockname(l, (struct sockaddr *)&a, &n) || connect(c, (struct sockaddr *)&a, sizeof(a)) ||
	    (p = accept(l, NULL, NULL)) < 0 || connect(d, (struct sockaddr *)&a, sizeof(a)) ||
	    accept(l, NULL, NULL) < 0 || put(s.socks, c) || put(s.socks, d))
		return fprintf(stderr, "sp: dropprobe set-up failed: %s\n", strerror(errno)), 1;
	int map = bpf_object__find_map_fd_by_name(s.obj, "sp_drop");
	struct sp_drop v = { .pass = pass ? pass : ~0U, .discard = discard ? ports(d) : 0 };
	if (map < 0 || pass >= 30 || bpf_map_update_elem(map, &zero, &v, BPF_ANY))
		return fprintf(stderr, "sp: no sp_drop map, or N not below 30\n"), 1;
	errno = 0;
	w1 = send(c, first, 30, MSG_NOSIGNAL);
	e1 = errno;
	errno = 0;
	w2 = send(c, "CCCC", 4, MSG_NOSIGNAL);
	e2 = errno;
	/* the program passes again (as after a deny, the next request): is the socket still whole? */
	v.pass = 0;
	bpf_map_update_elem(map, &zero, &v, BPF_ANY);
	errno = 0;
	w3 = send(c, "DDDD", 4, MSG_NOSIGNAL);
	e3 = errno;
	r = drain(p, buf, sizeof(buf));     /* both sides were sent to in the sendmsg calls */
	dr = drain(d, dbuf, sizeof(dbuf));
	memcpy(want, first, pass);
	memcpy(want + pass, "DDDD", 4);
	printf("dropprobe %s send=%zd errno=%s then=%zd errno=%s after=%zd errno=%s received=%zd intact=%d "
	       "discarded=%zd msg_runs=%llu\n", discard ? "discard" : "drop",
	       w1, e1 ? strerror(e1) : "0", w2, e2 ? strerror(e2) : "0", w3, e3 ? strerror(e3) : "0", r,
	       r == (ssize_t)pass + 4 && !memcmp(buf, want, pass + 4), dr, (unsigned long long)count_of(&s, 0));
	return 0;
}

/* mode spanprobe: how far an SK_MSG verdict reaches, the framing the gateway's request side
 * would use (docs/architecture.md, the send path's item 2). Three writes into P0,
 * "AAAAAAbbbb", "bbbbbbCCCCdd", "ddEE": a head of 6 (A) with a body of 10 (b), a head of 4 (C)
 * with a body of 4 (d), a head of 2 (E). Each run passes with apply_bytes = its request's length
 * and records the first byte and size of what it saw; redirect: requests 1 and 3 are redirected
 * egress out of P1 instead. Prints "spanprobe HOW runs=R run0=FIRST:SIZE... sent=S p0=BYTES
 * p1=BYTES" (what each peer received). */

static int spanprobe(const char *obj, int redir)
{
	static struct sp s;
	static const char *const w[] = { "AAAAAAbbbb", "bbbbbbCCCCdd", "ddEE" };
	static const uint32_t len[] = { 16, 8, 2 };
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t n = sizeof(a);
	uint32_t zero = 0;
	char b0[64], b1[64];
	int l = socket(AF_INET, SOCK_STREAM, 0), p0 = socket(AF_INET, SOCK_STREAM, 0);
	int p1 = socket(AF_INET, SOCK_STREAM, 0), a0, a1;
	ssize_t sent = 0;

	if (load(&s, obj) || bind(l, (struct sockaddr *)&a, sizeof(a)) || listen(l, 2) ||
	    getsockname(l, (struct sockaddr *)&a, &n) || connect(p0, (struct sockaddr *)&a, sizeof(a)) ||
	    (a0 = accept(l, NULL, NULL)) < 0 || connect(p1, (struct sockaddr *)&a, sizeof(a)) ||
	    (a1 = accept(l, NULL, NULL)) < 0 || put(s.socks, p0) || put(s.socks, p1))
		return fprintf(stderr, "sp: spanprobe set-up failed: %s\n", strerror(errno)), 1;
	int map = bpf_object__find_map_fd_by_name(s.obj, "sp_drop");
	struct sp_drop v = { .span_n = 3, .span_redir = redir ? 5 : 0, .span_to = ports(p1) };
	memcpy(v.span_len, len, sizeof(len));
	if (map < 0 || bpf_map_update_elem(map, &zero, &v, BPF_ANY))
		return fprintf(stderr, "sp: no sp_drop map\n"), 1;
	for (size_t i = 0; i < sizeof(w) / sizeof(*w); i++) {
		ssize_t k = send(p0, w[i], strlen(w[i]), MSG_NOSIGNAL);
		sent += k > 0 ? k : 0;
	}
	drain(a0, b0, sizeof(b0));
	drain(a1, b1, sizeof(b1));
	if (bpf_map_lookup_elem(map, &zero, &v))
		return fprintf(stderr, "sp: sp_drop unreadable\n"), 1;
	printf("spanprobe %s runs=%u", redir ? "redirect" : "pass", v.span_i);
	for (uint32_t i = 0; i < v.span_i && i < SP_SPAN; i++)
		printf(" run%u=%c:%u", i, v.span_first[i] ? v.span_first[i] : '?', v.span_size[i]);
	printf(" sent=%zd p0=%s p1=%s\n", sent, *b0 ? b0 : "-", *b1 ? b1 : "-");
	return 0;
}

/* mode fullprobe: l7run writes a client's bytes into pool socket P0, whose SK_MSG redirects them
 * egress out of pool socket P1 (sp-msgskb's request path), while P1's peer does not read, so P1's
 * send buffer fills. What the writer learns from send's count and what P1's peer gets decide how
 * l7run may write (issue 17 item 2): the sum of send's counts against the bytes received, and
 * the bytes the SK_MSG program saw. how: "nonblock" (P0 non-blocking), "block" (P0 blocking with
 * SO_SNDTIMEO 200 ms, P1's too), "pass" (no redirect: the program passes on P0, sp-msgpass, and
 * P0's own peer does not read). Writes of `size` bytes (up to 1 MiB). */
static int fullprobe(const char *obj, const char *how, size_t size)
{
	static struct sp s;
	static char buf[1 << 20], in[65536];
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t n = sizeof(a);
	struct timeval tv = { .tv_usec = 200000 };
	int small = 4096, l = socket(AF_INET, SOCK_STREAM, 0), p0 = socket(AF_INET, SOCK_STREAM, 0);
	int p1 = socket(AF_INET, SOCK_STREAM, 0), a0, a1, err = 0, writes = 0;
	ssize_t sent = 0, got = 0, astray = 0, g;
	unsigned char next = 0, order_ok = 1;
	int block = !strcmp(how, "block"), pass = !strcmp(how, "pass");

	alarm(20);   /* bounded whatever the kernel does */
	setsockopt(l, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));   /* inherited by A0, A1 */
	setsockopt(pass ? p0 : p1, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
	setsockopt(p1, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (load(&s, obj) || bind(l, (struct sockaddr *)&a, sizeof(a)) || listen(l, 2) ||
	    getsockname(l, (struct sockaddr *)&a, &n) || connect(p1, (struct sockaddr *)&a, sizeof(a)) ||
	    (a1 = accept(l, NULL, NULL)) < 0 || connect(p0, (struct sockaddr *)&a, sizeof(a)) ||
	    (a0 = accept(l, NULL, NULL)) < 0 || put(s.socks, p1) || put(s.socks, p0) ||
	    (!pass && redirect(s.redir, p0, p1)))
		return fprintf(stderr, "sp: fullprobe set-up failed: %s\n", strerror(errno)), 1;
	if (pass) {   /* the stream is P0's own: read it from A0, and count anything on A1 as astray */
		int t = a0;
		a0 = a1;
		a1 = t;
	}
	if (block)
		setsockopt(p0, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	else
		fcntl(p0, F_SETFL, O_NONBLOCK);
	size = size && size <= sizeof(buf) ? size : 1000;
	for (unsigned char c = 0; writes < 400; writes++) {   /* each byte: its place in the stream, mod 251 */
		for (size_t i = 0; i < size; i++, c = (unsigned char)((c + 1) % 251))
			buf[i] = (char)c;
		ssize_t w = send(p0, buf, size, MSG_NOSIGNAL);
		if (w < 0) {
			err = errno;
			break;
		}
		sent += w;
		if (w < (ssize_t)size) {   /* short: the stream goes on from sent, so stop here */
			err = -1;
			break;
		}
	}
	struct pollfd pf[2] = { { .fd = a1, .events = POLLIN }, { .fd = a0, .events = POLLIN } };
	while (poll(pf, 2, 300) > 0) {
		if (pf[1].revents && (g = recv(a0, in, sizeof(in), MSG_DONTWAIT)) > 0)
			astray += g;
		if (!pf[0].revents || (g = recv(a1, in, sizeof(in), MSG_DONTWAIT)) <= 0)
			continue;
		for (ssize_t i = 0; i < g; i++, next = (unsigned char)((next + 1) % 251))
			order_ok &= (unsigned char)in[i] == next;
		got += g;
	}
	uint64_t runs = count_of(&s, 0), bytes = count_of(&s, 2);   /* what the SK_MSG program saw */
	printf("fullprobe %s size=%zu writes=%d sent=%zd received=%zd intact=%d astray=%zd errno=%s msg_runs=%llu msg_bytes=%llu\n",
	       how, size, writes, sent, got, order_ok, astray,
	       err > 0 ? strerror(err) : err < 0 ? "short" : "0", (unsigned long long)runs, (unsigned long long)bytes);
	return 0;
}

int main(int argc, char **argv)
{
	static struct sp s;
	struct sockaddr_in la = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct epoll_event ev[64];
	int one = 1, lfd, ep, m;

	if (argc >= 3 && !strcmp(argv[1], "dropprobe"))
		return dropprobe(argv[2], argc > 3 ? (uint32_t)atoi(argv[3]) : 10, argc > 4 && !strcmp(argv[4], "discard"));
	if (argc >= 3 && !strcmp(argv[1], "spanprobe"))
		return spanprobe(argv[2], argc > 3 && !strcmp(argv[3], "redirect"));
	if (argc >= 3 && !strcmp(argv[1], "fullprobe"))
		return fullprobe(argv[2], argc > 3 ? argv[3] : "nonblock", argc > 4 ? (size_t)atol(argv[4]) : 1000);
	if (argc < 4)
		return fprintf(stderr, "usage: sp MODE LISTEN_PORT BACKEND_PORT [sp.bpf.o]\n"), 2;
	for (m = 0; m <= SKB && strcmp(argv[1], names[m]); m++)
		;
	if (m > SKB || (is_bpf((enum mode)m) && argc < 5))
		return fprintf(stderr, "sp: mode %s unknown or without its object\n", argv[1]), 2;
	s.mode = (enum mode)m;
	s.be = la;
	s.be.sin_port = htons((uint16_t)atoi(argv[3]));
	la.sin_port = htons((uint16_t)atoi(argv[2]));
	signal(SIGPIPE, SIG_IGN);
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&la, sizeof(la)) || listen(lfd, 1024))
		return perror("sp: listen"), 1;
	if (is_bpf(s.mode)) {
		if (bpf_enable_stats(BPF_STATS_RUN_TIME) < 0 || load(&s, argv[4]))
			return fprintf(stderr, "sp: cannot load %s\n", argv[4]), 1;
	} else {
		printf("ready\n");
	}
	fflush(stdout);
	ep = epoll_create1(0);
	epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &(struct epoll_event){ .events = EPOLLIN, .data.ptr = NULL });
	for (;;) {
		int n = epoll_wait(ep, ev, 64, -1);
		for (int i = 0; i < n; i++) {
			struct end *e = ev[i].data.ptr;
			if (!e) {
				struct conn *k;
				int c;
				while ((c = accept4(lfd, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
					k = calloc(1, sizeof(*k));
					e = calloc(2, sizeof(*e));
					setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
					k->c = c;
					e[0].k = e[1].k = k;
					e[1].resp = 1;
					if (setup(&s, k)) {
						perror("sp: setup");
						drop(&s, k, e);
						continue;
					}
					/* the client is watched for requests (in mode skb only for its
					 * close), the upstream for responses unless the kernel sends them */
					epoll_ctl(ep, EPOLL_CTL_ADD, c, &(struct epoll_event){
						.events = EPOLLIN | EPOLLRDHUP, .data.ptr = &e[0] });
					epoll_ctl(ep, EPOLL_CTL_ADD, k->p1, &(struct epoll_event){
						.events = s.mode >= MSGSKB ? EPOLLRDHUP : EPOLLIN,
						.data.ptr = &e[1] });
				}
				continue;
			}
			struct conn *k = e->k;
			int r;
			if (s.mode == SKB || (s.mode >= MSGSKB && e->resp))
				r = ev[i].events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR) ? -1 : 0;
			else if (e->resp)
				r = move(&s, k->p1, k->c, k->resp);
			else
				r = move(&s, k->c, k->p0, k->req);
			if (r < 0) {
				epoll_ctl(ep, EPOLL_CTL_DEL, k->c, NULL);
				epoll_ctl(ep, EPOLL_CTL_DEL, k->p1, NULL);
				drop(&s, k, e - e->resp);
				/* a later event of this batch may name it: the batch ends here */
				break;
			}
		}
	}
}
