/* Clients outside the cgroup. Their sockets are not enrolled, so no program sees what they
 * send, and l7run's end of their connection is not enrolled either (sock_ops takes it only
 * when the client's end is the mesh's): their requests used to be read here and never
 * answered. Each such connection is relayed through one of l7run's own, opened from inside the
 * cgroup to the same service address and bound to the client's own address, so that
 * `request.source`, identities and per-address limits see the client: the data plane judges
 * the relayed requests as it judges any mesh client's (the same programs, the same decisions:
 * a Deny still denies). A client whose address is not one of this host's cannot be relayed so:
 * it gets a 503 that says why, and the log says it once. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <bpf/bpf.h>
#include "mesh.h"

#define RELAY_BUF   (256u << 10)   /* bytes held per direction before l7run stops reading */
#define RELAY_LINGER_MS 2000       /* after our FIN, wait this long for the other side's */

struct buf {
	char *p;
	size_t len, cap;
};

struct relay {
	struct io io[2];          /* io[s]: events of fd[s] */
	int idx;                  /* in the mode's table of relays */
	int fd[2];                /* RELAY_OUT: the client's connection (l7run's end); RELAY_IN: l7run's own */
	struct buf q[2];          /* q[s]: bytes read from fd[s], to be written to fd[!s] */
	int eof[2];               /* fd[s] sent its FIN */
	int shut[2];              /* our FIN on fd[s] is sent */
	int connecting;           /* fd[RELAY_IN]'s connect is in progress */
	const char *refuse;       /* not relayed: answer 503 with this reason */
	uint64_t close_at;        /* ms: close even if the other side never sends its FIN */
	struct l7_mesh_key in_key;   /* fd[RELAY_IN] as sock_ops sees it */
};
enum { RELAY_OUT, RELAY_IN };

static void relay_close(struct l7run *L, struct relay *r)
{
	for (int s = 0; s < 2; s++) {
		loop_close(L, r->fd[s]);
		free(r->q[s].p);
	}
	mesh_of(L)->relay[r->idx] = NULL;
	free(r);
}

/* Say once (and then at most every 10 s) that clients outside the cgroup come, and what that
 * costs them. */
static void said(struct l7run *L, const struct sockaddr_in *peer, const char *how)
{
	struct mesh *M = mesh_of(L);
	unsigned long long n = rate_note(&M->outside);
	char a[INET_ADDRSTRLEN];

	if (!n)
		return;
	inet_ntop(AF_INET, &peer->sin_addr, a, sizeof a);
	say(L, "%llu connection(s) from outside the cgroup %s (last from %s:%d): %s", n, M->cgroup, a, ntohs(peer->sin_port),
	    how);
}

/* The socket of fd is in some version's l7_mesh_socks (key: its own 4-tuple). */
int mesh_enrolled(struct l7run *L, int fd)
{
	struct l7_mesh_key k = mesh_key_of(fd);
	uint64_t cookie;

	for (struct version *v = L->cur; v; v = v->older)
		if (!bpf_map_lookup_elem(mv(v)->socks, &k, &cookie))
			return 1;
	return 0;
}

static void watch(struct l7run *L, struct relay *r, int s)
{
	struct buf *toward = &r->q[!s];   /* what waits to be written to fd[s] */
	uint32_t ev = 0;

	if (!r->eof[s] && r->q[s].len < RELAY_BUF)
		ev |= EPOLLIN | EPOLLRDHUP;
	if ((s == RELAY_IN && r->connecting) || toward->len)
		ev |= EPOLLOUT;
	loop_watch(L, r->fd[s], &r->io[s], ev);
}

static int buf_put(struct buf *b, const char *p, size_t n)
{
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 65536;
		while (cap < b->len + n)
			cap *= 2;
		char *np = realloc(b->p, cap);
		if (!np)
			return -1;
		b->p = np;
		b->cap = cap;
	}
	memcpy(b->p + b->len, p, n);
	b->len += n;
	return 0;
}

/* Write what waits for fd[s]; -1 on an error other than a full socket. */
static int flush(struct relay *r, int s)
{
	struct buf *b = &r->q[!s];

	while (b->len) {
		ssize_t w = send(r->fd[s], b->p, b->len, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN)
			return 0;
		if (w <= 0)
			return -1;
		memmove(b->p, b->p + w, b->len - (size_t)w);
		b->len -= (size_t)w;
	}
	return 0;
}

/* The refused client's first bytes are in: its answer (HEAD: the head only), then FIN. */
static void refuse(struct l7run *L, struct relay *r)
{
	char msg[768];
	int head = r->q[RELAY_OUT].len >= 5 && !memcmp(r->q[RELAY_OUT].p, "HEAD ", 5);
	int n = http_answer_why(msg, sizeof msg, 503, 1, head, r->refuse);

	upstat_answer(L->cur ? L->cur->upstat : -1, -1, 503, (size_t)n);
	buf_put(&r->q[RELAY_IN], msg, (size_t)n);
	r->refuse = NULL;
	r->eof[RELAY_IN] = 1;   /* nothing else comes for the client: FIN once the answer is out */
}

/* Move what can be moved, in both directions; close when both sides are done. */
static void pump(struct l7run *L, struct relay *r)
{
	char buf[65536];

	for (int s = 0; s < 2; s++) {
		if (s == RELAY_IN && (r->connecting || r->fd[RELAY_IN] < 0))
			continue;
		while (!r->eof[s] && r->q[s].len < RELAY_BUF) {
			ssize_t n = recv(r->fd[s], buf, sizeof buf, MSG_DONTWAIT);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0 && errno == EAGAIN)
				break;
			if (n <= 0) {
				r->eof[s] = 1;
				break;
			}
			if (!r->shut[!s] && buf_put(&r->q[s], buf, (size_t)n))
				goto fail;
		}
	}
	if (r->refuse && (r->q[RELAY_OUT].len || r->eof[RELAY_OUT]))
		refuse(L, r);
	if (r->fd[RELAY_IN] < 0)
		r->q[RELAY_OUT].len = 0;   /* refused: what the client sends goes nowhere */
	for (int s = 0; s < 2; s++) {
		if (r->fd[s] < 0 || (s == RELAY_IN && r->connecting))
			continue;
		if (flush(r, s))
			goto fail;
		if (r->eof[!s] && !r->q[!s].len && !r->shut[s]) {
			shutdown(r->fd[s], SHUT_WR);   /* the other side's FIN, passed on */
			r->shut[s] = 1;
			if (s == RELAY_OUT)   /* the client has everything: its FIN is awaited this long */
				r->close_at = now_ms() + RELAY_LINGER_MS;
		}
	}
	/* done when each side has sent its FIN and had ours (closing before the client's FIN
	 * would answer bytes it still sends with a reset, which can cost it our last bytes) */
	if (r->eof[RELAY_OUT] && r->shut[RELAY_OUT] && (r->fd[RELAY_IN] < 0 || (r->eof[RELAY_IN] && r->shut[RELAY_IN]))) {
		relay_close(L, r);
		return;
	}
	for (int s = 0; s < 2; s++)
		if (r->fd[s] >= 0)
			watch(L, r, s);
	return;
fail:
	relay_close(L, r);
}

/* fd[RELAY_IN]'s connect finished: relay only through a socket the data plane judges. */
static void connected(struct l7run *L, struct relay *r)
{
	int err = 0;
	socklen_t l = sizeof err;

	r->connecting = 0;
	if (getsockopt(r->fd[RELAY_IN], SOL_SOCKET, SO_ERROR, &err, &l) || err || !mesh_enrolled(L, r->fd[RELAY_IN])) {
		loop_close(L, r->fd[RELAY_IN]);
		r->fd[RELAY_IN] = -1;
		r->refuse = err ? "l7run cannot connect to the service inside the cgroup"
				: "l7run's connection for it is not enrolled (no policy version takes new sockets)";
		return;
	}
}

static void relay_event(struct l7run *L, struct relay *r, int s, uint32_t ev)
{
	if (s == RELAY_IN && r->connecting)
		connected(L, r);
	if (ev & EPOLLERR) {
		relay_close(L, r);
		return;
	}
	pump(L, r);
}

static void on_out(struct l7run *L, struct io *io, uint32_t ev)
{
	relay_event(L, (struct relay *)io, RELAY_OUT, ev);
}

static void on_in(struct l7run *L, struct io *io, uint32_t ev)
{
	relay_event(L, (struct relay *)(io - RELAY_IN), RELAY_IN, ev);
}

void mesh_outside_accept(struct l7run *L, int fd)
{
	struct mesh *M = mesh_of(L);
	struct relay **R = M->relay;
	struct sockaddr_in peer, svc;
	socklen_t pl = sizeof peer, sl = sizeof svc;
	int i = 0;

	while (i < MESH_MAX_RELAYS && R[i])
		i++;
	if (i == MESH_MAX_RELAYS || getpeername(fd, (struct sockaddr *)&peer, &pl) ||
	    getsockname(fd, (struct sockaddr *)&svc, &sl)) {
		close(fd);
		return;
	}
	struct relay *r = calloc(1, sizeof *r);
	if (!r) {
		close(fd);
		return;
	}
	R[i] = r;
	r->idx = i;
	r->io[RELAY_OUT].ready = on_out;
	r->io[RELAY_IN].ready = on_in;
	r->fd[RELAY_OUT] = fd;
	r->fd[RELAY_IN] = -1;
	stat_bump(L->cur ? L->cur->stats : -1, L7_STAT_OUTSIDE);
	/* one of our own relay connections that no version enrolled: never relayed again */
	struct l7_mesh_key pk = { peer.sin_addr.s_addr, svc.sin_addr.s_addr, ntohs(peer.sin_port), ntohs(svc.sin_port) };
	for (int j = 0; j < MESH_MAX_RELAYS; j++)
		if (R[j] && j != i && !memcmp(&R[j]->in_key, &pk, sizeof pk))
			r->refuse = "l7run's connection for a client outside the cgroup is not enrolled";
	int in = -1;
	if (!r->refuse) {
		/* the client's own address, so that the policy sees the client (not l7run) */
		struct sockaddr_in self = { .sin_family = AF_INET, .sin_addr = peer.sin_addr };
		in = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (in < 0 || bind(in, (struct sockaddr *)&self, sizeof self)) {
			r->refuse = "the client is outside the mesh cgroup and its address is not this host's, so "
				    "l7run cannot relay it as itself; run it inside the cgroup (l7run --mesh ... -- CMD)";
			if (in >= 0)
				close(in);
			in = -1;
		} else if (connect(in, (struct sockaddr *)&svc, sizeof svc) && errno != EINPROGRESS) {
			close(in);
			in = -1;
			r->refuse = "l7run cannot connect to the service inside the cgroup";
		} else {
			/* known before the connection can reach the listener (not yet connected: no
			 * getpeername) */
			socklen_t ml = sizeof self;
			getsockname(in, (struct sockaddr *)&self, &ml);
			r->in_key = (struct l7_mesh_key){ self.sin_addr.s_addr, svc.sin_addr.s_addr, ntohs(self.sin_port),
							  ntohs(svc.sin_port) };
		}
	}
	r->fd[RELAY_IN] = in;
	r->connecting = in >= 0;
	said(L, &peer, in >= 0 ? "relayed through l7run inside the cgroup, judged by the policy like the mesh's own "
			      "(slower: run clients inside the cgroup for the kernel path)"
			    : r->refuse);
	watch(L, r, RELAY_OUT);
	if (in >= 0)
		watch(L, r, RELAY_IN);
}

/* From the run loop: relays whose other side never sent its FIN. */
void mesh_relays_tick(struct l7run *L, uint64_t now)
{
	struct mesh *M = mesh_of(L);

	for (int i = 0; i < MESH_MAX_RELAYS; i++)
		if (M->relay[i] && M->relay[i]->close_at && now >= M->relay[i]->close_at)
			relay_close(L, M->relay[i]);
}

void mesh_relays_close_all(struct l7run *L)
{
	struct mesh *M = mesh_of(L);

	for (int i = 0; i < MESH_MAX_RELAYS; i++)
		if (M->relay[i])
			relay_close(L, M->relay[i]);
}
