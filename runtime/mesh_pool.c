#define _GNU_SOURCE   /* accept4 */
/* Mesh mode's pool connections (the machinery is pool.c): pre-opened from l7run, inside the
 * cgroup, to each upstream, --pool of them per upstream and version, refilled from the loop. A
 * connection is handed to the data plane by writing the backend's socket key into its slot of
 * l7_mesh_pool once both ends are in the version's l7_mesh_socks. Both ends enroll into the
 * right version because l7run claims the connection's local address for it in every loaded
 * version before connecting (l7/mesh.h, L7_MA_CLAIM): a retired version refills its pool the
 * same way. */
#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <bpf/bpf.h>
#include "mesh.h"

#define ORPHAN_GRACE_MS 200
#define DRAIN_AFTER_MS  20    /* a retired slot's table flip is this long over before its close */
_Static_assert(POOL_MAX_PLACES >= L7_MESH_SLOTS, "a place for every slot of an upstream");

static struct mesh_ver *ver_of(struct pool_sock *ps)
{
	return ps->pool->ctx;
}

static uint32_t slot_of(struct pool_sock *ps)
{
	return (uint32_t)(ps->up * L7_MESH_SLOTS + ps->place);
}

/* The key the data plane uses for this socket: its own 4-tuple (ports in host order). */
struct l7_mesh_key mesh_key_of(int fd)
{
	struct sockaddr_in l = { 0 }, r = { 0 };
	socklen_t ll = sizeof l, rl = sizeof r;
	struct l7_mesh_key k = { 0 };

	if (getsockname(fd, (struct sockaddr *)&l, &ll) || getpeername(fd, (struct sockaddr *)&r, &rl))
		return k;
	k.lip = l.sin_addr.s_addr;
	k.rip = r.sin_addr.s_addr;
	k.lport = ntohs(l.sin_port);
	k.rport = ntohs(r.sin_port);
	return k;
}

static struct l7_mesh_key rev(struct l7_mesh_key k)
{
	struct l7_mesh_key r = { k.rip, k.lip, k.rport, k.lport };
	return r;
}

static int in_sockhash(struct mesh_ver *v, const struct l7_mesh_key *k)
{
	uint64_t cookie;

	return bpf_map_lookup_elem(v->socks, k, &cookie) == 0;
}

void mesh_set_mode(struct mesh_ver *v, uint32_t mode)
{
	struct l7_mesh_addr_key k = { 0, L7_MESH_MODE_PORT };
	struct l7_mesh_addr val = { L7_MA_MODE, mode };

	bpf_map_update_elem(v->addrs, &k, &val, BPF_ANY);
}

static void mark(struct mesh_ver *w, const struct l7_mesh_addr_key *k, uint32_t kind, int on)
{
	struct l7_mesh_addr val = { kind, 0 };

	if (on)
		bpf_map_update_elem(w->addrs, k, &val, BPF_ANY);
	else
		bpf_map_delete_elem(w->addrs, k);
}

/* Claim (or release) the local address a of a pool connection for version v in every loaded
 * version (v itself may not be published yet): v's sock_ops takes both of its ends, every
 * other version's leaves them. v NULL: for none, every version leaves them. */
static void claim(struct l7run *L, struct mesh_ver *v, const struct sockaddr_in *a, int on)
{
	struct l7_mesh_addr_key k = { a->sin_addr.s_addr, ntohs(a->sin_port) };

	if (v)
		mark(v, &k, L7_MA_CLAIM, on);
	for (struct version *w = L->cur; w; w = w->older)
		if (mv(w) != v)
			mark(mv(w), &k, L7_MA_CLAIM_OTHER, on);
}

/* Is a an address of this host (of l7run's network namespace)? Then the endpoint's socket is
 * one sock_ops enrolls (a local backend, in the cgroup); any other is a remote endpoint. */
static int addr_is_local(struct in_addr a)
{
	if ((ntohl(a.s_addr) >> 24) == 127 || a.s_addr == htonl(INADDR_ANY))
		return 1;
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr = a };
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int local = fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0;

	if (fd >= 0)
		close(fd);
	return local;
}

/* The local address the route to `to` uses (a connected UDP socket sends nothing). */
static int source_for(const struct sockaddr_in *to, struct in_addr *src)
{
	struct sockaddr_in la;
	socklen_t ll = sizeof la;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int r = fd < 0 || connect(fd, (const struct sockaddr *)to, sizeof *to) ||
		getsockname(fd, (struct sockaddr *)&la, &ll) ? -1 : 0;

	if (fd >= 0)
		close(fd);
	if (!r)
		*src = la.sin_addr;
	return r;
}

/* Connect fd from local address la (port 0: any) to `to`, la claimed for v meanwhile, and wait
 * until sock_ops has enrolled fd's end and, when `both`, the peer's (on loopback almost always
 * before connect returns, but wait for it rather than assume). 0, or -1 with errno (0: the
 * connection was made but not enrolled). */
static int claimed_connect(struct l7run *L, struct mesh_ver *v, int fd, struct sockaddr_in *la,
			   const struct sockaddr_in *to, int both)
{
	socklen_t ll = sizeof *la;

	if (bind(fd, (struct sockaddr *)la, sizeof *la) || getsockname(fd, (struct sockaddr *)la, &ll))
		return -1;
	claim(L, v, la, 1);
	int r = connect(fd, (const struct sockaddr *)to, sizeof *to), e = errno;
	struct l7_mesh_key mine = mesh_key_of(fd), peer = rev(mine);
	for (int i = 0; !r && i < 200 && !(in_sockhash(v, &mine) && (!both || in_sockhash(v, &peer))); i++)
		usleep(1000);
	claim(L, v, la, 0);
	if (r) {
		errno = e;
		return -1;
	}
	if (!in_sockhash(v, &mine) || (both && !in_sockhash(v, &peer))) {
		errno = 0;
		return -1;
	}
	return 0;
}

/* The loopback listener relay pairs are made on (in the cgroup, like l7run itself). */
static int relay_listener(struct l7run *L)
{
	struct mesh *M = mesh_of(L);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };

	if (M->relay_lfd)
		return M->relay_lfd - 1;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -1;
	if (bind(fd, (struct sockaddr *)&a, sizeof a) || listen(fd, 64)) {
		close(fd);
		return -1;
	}
	M->relay_lfd = fd + 1;
	return fd;
}

void mesh_pool_fini(struct l7run *L)
{
	struct mesh *M = mesh_of(L);

	if (M && M->relay_lfd) {
		close(M->relay_lfd - 1);
		M->relay_lfd = 0;
	}
}

/* A remote slot's relay pair, both ends enrolled into v: out[1] connects from a claimed
 * loopback address, out[0] is its accepted end (checked to be that connection). */
static int relay_open(struct pool_sock *ps, int out[2])
{
	struct l7run *L = ps->pool->L;
	struct mesh_ver *v = ver_of(ps);
	struct sockaddr_in to, la = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t tl = sizeof to;
	int lfd = relay_listener(L), a = -1, b;

	if (lfd < 0 || getsockname(lfd, (struct sockaddr *)&to, &tl))
		return -1;
	if ((b = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return -1;
	/* queued once connect returns; anything else some process queued there is not ours: closed */
	int r = claimed_connect(L, v, b, &la, &to, 0);
	struct l7_mesh_key kb = mesh_key_of(b), ka = rev(kb), got;
	for (int i = 0; !r && a < 0 && i < 200; i++) {
		a = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);   /* blocking: not inherited */
		got = a >= 0 ? mesh_key_of(a) : (struct l7_mesh_key){ 0 };
		if (a >= 0 && memcmp(&got, &ka, sizeof ka)) {
			close(a);
			a = -1;
		} else if (a < 0) {
			usleep(1000);
		}
	}
	for (int i = 0; a >= 0 && i < 200 && !in_sockhash(v, &ka); i++)
		usleep(1000);
	if (r || a < 0 || !in_sockhash(v, &ka)) {
		if (a >= 0)
			close(a);
		close(b);
		return -1;
	}
	struct timeval tv = { 0, 200 * 1000 };   /* l7run's writes into it never block the loop long */
	setsockopt(a, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	out[0] = a;
	out[1] = b;
	return 0;
}

/* The local address (port 0) a connection to `to` is made from, to be claimed before its
 * handshake: *local says whether `to` is an address of this host. 0, or -1 with errno. */
static int local_for(const struct sockaddr_in *to, struct sockaddr_in *la, int *local)
{
	*la = (struct sockaddr_in){ .sin_family = AF_INET, .sin_addr = to->sin_addr };
	*local = addr_is_local(to->sin_addr);
	if (la->sin_addr.s_addr == htonl(INADDR_ANY))
		la->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return *local ? 0 : source_for(to, &la->sin_addr);
}

/* Bind the local address first, to claim it before the handshake enrolls the ends. A local
 * endpoint (an address of this host): sock_ops enrolls both ends, and requests go into the
 * backend's own socket. Any other is remote: only l7run's end is enrolled (its requests are
 * redirected into it, out over TCP), and its responses come back through a relay pair. */
static int mesh_connect(struct pool_sock *ps, const struct sockaddr_in *to, const char **why)
{
	struct mesh_ver *v = ver_of(ps);
	struct sockaddr_in la;
	int local;

	if (local_for(to, &la, &local)) {
		*why = strerror(errno);
		return -1;
	}
	if (claimed_connect(ps->pool->L, v, ps->fd, &la, to, local)) {
		int e = errno;
		*why = e ? strerror(e) : local ? "its connections are not enrolled (is the backend in the cgroup?)"
					      : "l7run's connection to it is not enrolled";
		errno = e ? e : EIO;
		return -1;
	}
	int pair[2], sndbuf = 4 << 20;
	uint32_t k = slot_of(ps);
	if (!local) {
		/* what the kernel redirects into it must fit (l7/mesh.h, L7_MESH_REMOTE_INLINE) */
		setsockopt(ps->fd, SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof sndbuf);
		if (relay_open(ps, pair)) {
			say(ps->pool->L, "upstream %s: cannot make a relay pair for a remote pool connection: %s",
			    ps->pool->upstream[ps->up].name, strerror(errno));
			errno = EIO;
			return -1;   /* *why NULL: l7run's fault, not the upstream's */
		}
		v->relay[k][0] = pair[0] + 1;
		v->relay[k][1] = pair[1] + 1;
	}
	return 0;
}

/* An HTTP/2 client's connection to upstream up (mesh_h2.c): l7run relays every frame on it, so
 * the data plane has nothing to do there, and its local address is claimed for no version
 * while it connects (neither end enrolled: no sockhash entries, no SK_MSG run per write).
 * Connect and sends bounded as a pool connection's (send_timeout_ms). */
int mesh_connect_own(struct mesh_ver *v, int up, const char **why)
{
	struct l7run *L = v->pool.L;
	const struct cfg_endpoint *e = &v->pool.upstream[up];
	struct sockaddr_in la;
	socklen_t ll = sizeof la;
	struct timeval tv = { 0, mesh_pool_ops.send_timeout_ms * 1000 };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1, local;

	*why = NULL;
	if (fd < 0)
		return -1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	if (local_for(&e->addr, &la, &local)) {
		if (errno != EMFILE && errno != ENFILE)   /* its look at the route: l7run's limit */
			*why = strerror(errno);
	} else if (!bind(fd, (struct sockaddr *)&la, sizeof la) && !getsockname(fd, (struct sockaddr *)&la, &ll)) {
		claim(L, NULL, &la, 1);
		int r = connect(fd, (const struct sockaddr *)&e->addr, sizeof e->addr), err = errno;
		claim(L, NULL, &la, 0);
		if (!r) {
			upstream_seen(L, e, 1, NULL);
			return fd;
		}
		*why = strerror(err);
	}
	if (*why)
		upstream_seen(L, e, 0, *why);
	vlog(L, "upstream %s: no HTTP/2 connection to it: %s", e->name, *why ? *why : strerror(errno));
	close(fd);
	return -1;
}

/* Both ends known to the data plane, then the slot usable. A remote slot: l7run's connection
 * to the endpoint is where requests go (egress), its relay pair's write end frames responses. */
static int enroll(struct pool_sock *ps)
{
	struct mesh_ver *v = ver_of(ps);
	uint32_t k = slot_of(ps), gen = ++v->gen[k];
	struct l7_mesh_key mine = mesh_key_of(ps->fd), be = rev(mine);
	struct l7_mesh_conn c = { .role = L7_MR_RT_POOL, .index = k, .gen = gen };
	struct l7_mesh_slot s = { .state = L7_MS_IDLE, .gen = gen, .backend = be };

	if (v->relay[k][0]) {
		struct l7_mesh_key w = mesh_key_of(v->relay[k][0] - 1), d = rev(w);
		c.role = L7_MR_RT_REMOTE;
		bpf_map_update_elem(v->conns, &mine, &c, BPF_ANY);
		c.role = L7_MR_BACKEND;
		bpf_map_update_elem(v->conns, &w, &c, BPF_ANY);
		c.role = L7_MR_RT_POOL;
		bpf_map_update_elem(v->conns, &d, &c, BPF_ANY);
		s.backend = mine;
		s.flags = L7_MSF_REMOTE;
	} else {
		bpf_map_update_elem(v->conns, &mine, &c, BPF_ANY);
		c.role = L7_MR_BACKEND;
		bpf_map_update_elem(v->conns, &be, &c, BPF_ANY);
	}
	bpf_map_update_elem(v->pool_map, &k, &s, BPF_ANY);   /* the slot is usable from here on */
	return 0;
}

/* A remote slot's relay pair goes with its connection. */
static void leave(struct pool_sock *ps)
{
	struct mesh_ver *v = ver_of(ps);
	uint32_t k = slot_of(ps);

	for (int i = 0; i < 2; i++)
		if (v->relay[k][i]) {
			close(v->relay[k][i] - 1);
			v->relay[k][i] = 0;
		}
}

/* Read and drop what is queued on fd: 0 once it is empty, -1 at its end or an error. */
static int discard(int fd)
{
	char buf[65536];

	for (;;) {
		ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
		if (n > 0)
			continue;
		return n == 0 || (errno != EAGAIN && errno != EINTR) ? -1 : 0;
	}
}

/* A remote endpoint's responses, into the relay pair's write end: its SK_MSG frames them and
 * redirects them into the bound client (counted as a local backend's are, so the client's order
 * holds); what it discards (an orphaned slot's, at most L7_MESH_CLIENT_QMAX) lands in the other
 * end, which stale() empties every LOOK_MS (here it was one more recv per response). A write it
 * refuses (past the orphan bound) ends the connection. */
static int relay_in(struct pool_sock *ps, int w)
{
	char buf[65536];
	int one = 1;

	for (;;) {
		ssize_t n = recv(ps->fd, buf, sizeof buf, MSG_DONTWAIT);
		/* ACK at once: a backend that writes a response's head and body apart, without
		 * TCP_NODELAY (Python's http.server), holds the body back until the head is ACKed,
		 * and a delayed ACK made that 40 ms a response */
		setsockopt(ps->fd, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof one);
		for (ssize_t off = 0; n > 0 && off < n;) {
			ssize_t m = send(w, buf + off, (size_t)(n - off), MSG_NOSIGNAL);
			if (m <= 0)
				return -1;
			off += m;
		}
		if (n == (ssize_t)sizeof buf)
			continue;
		int e = errno;
		if (n > 0)
			return 0;   /* a short read took what was queued: no EAGAIN call to learn it */
		return n == 0 || (e != EAGAIN && e != EINTR) ? -1 : 0;
	}
}

/* Data here is a response nobody waits for any more (orphaned): discard it. A remote slot's
 * is the response itself: relayed. */
static int readable(struct pool_sock *ps)
{
	struct mesh_ver *v = ver_of(ps);
	uint32_t k = slot_of(ps);

	if (v->relay[k][0])
		return relay_in(ps, v->relay[k][0] - 1);
	return discard(ps->fd);
}

/* A slot whose client left with responses owed (ORPHAN) frees itself when they arrive; when
 * they do not (the client sent part of a request, or the backend is slow), the connection
 * carries a half request or a late answer: close it after a grace time and refill, rather
 * than lose the slot for good (the pool ran dry after a few such clients). */
static int stale(struct pool_sock *ps, uint64_t now)
{
	struct mesh_ver *v = ver_of(ps);
	uint32_t k = slot_of(ps);
	struct l7_mesh_slot s;

	if (v->relay[k][1])
		discard(v->relay[k][1] - 1);   /* what the relay's SK_MSG dropped (relay_in) */
	if (bpf_map_lookup_elem(v->pool_map, &k, &s) || s.gen != v->gen[k] || s.state != L7_MS_ORPHAN) {
		ps->since = 0;
		return 0;
	}
	if (!ps->since) {
		ps->since = now;
		return 0;
	}
	if (now - ps->since < ORPHAN_GRACE_MS)
		return 0;
	vlog(ps->pool->L, "pool slot %u orphaned with %llu response(s) owed: closing it", k,
	     (unsigned long long)(s.req_cnt - s.resp_cnt));
	return 1;
}

/* A pool connection ended (or l7run ends it, mesh_pool_drop): its slot is dead for the data
 * plane, and the client bound to it with responses owed gets a 502, unless it already has its
 * last answer (it is closing). */
static void lost(struct pool *p, void *owner, struct pool_sock *ps, enum pool_loss why, uint64_t owed)
{
	struct mesh_ver *v = p->ctx;
	uint32_t k = slot_of(ps);
	struct l7_mesh_slot s;

	(void)owner;
	(void)why;
	(void)owed;
	if (bpf_map_lookup_elem(v->pool_map, &k, &s) || s.gen != v->gen[k])
		return;
	uint32_t was = s.state;
	s.state = L7_MS_DEAD;
	bpf_map_update_elem(v->pool_map, &k, &s, BPF_ANY);
	vlog(p->L, "pool slot %u (%s) of version %d closed, state %u, owed %llu", k, v->v.cfg.upstream[ps->up].name,
	     v->v.id, was, (unsigned long long)(s.req_cnt - s.resp_cnt));
	if ((was == L7_MS_BUSY || was == L7_MS_DEAD) && s.req_cnt != s.resp_cnt) {
		/* DEAD: its sock_ops saw the connection close first (a reset), the owner still waits */
		struct mesh_client *c = mesh_client_by_key(p->L, v, &s.owner);
		if (!c) {
			/* the kernel forwarded a new connection's first request before l7run accepted
			 * its end: accept it now, or nobody answers and the client waits for ever */
			mesh_accept_pending(p->L);
			c = mesh_client_by_key(p->L, v, &s.owner);
		}
		if (c && !c->closing)
			mesh_client_answer(c, ps->up, 502, 1);
	}
}

const struct pool_ops mesh_pool_ops = {
	.eager = 1, .blocking = 1, .watch_input = 1, .send_timeout_ms = 200,
	.connect = mesh_connect,
	.enroll = enroll,
	.leave = leave,
	.readable = readable,
	.stale = stale,
	.lost = lost,
};

/* The slot's state as the data plane has it, for the connection now at slot idx; -1 if none. */
static int slot_state(struct mesh_ver *v, uint32_t idx, struct l7_mesh_slot *s)
{
	struct pool_sock *ps = pool_at(&v->pool, (int)(idx / L7_MESH_SLOTS), (int)(idx % L7_MESH_SLOTS));

	if (!ps || bpf_map_lookup_elem(v->pool_map, &idx, s) || s->gen != v->gen[idx])
		return -1;
	return ps->fd;
}

/* Upstream up has a pool connection the data plane can use or is using. */
int mesh_upstream_live(struct mesh_ver *v, int up)
{
	for (int i = 0; i < v->pool.want; i++) {
		struct l7_mesh_slot s;
		if (slot_state(v, (uint32_t)(up * L7_MESH_SLOTS + i), &s) >= 0 &&
		    (s.state == L7_MS_IDLE || s.state == L7_MS_BUSY || s.state == L7_MS_ORPHAN))
			return 1;
	}
	return 0;
}

/* Close the pool connection of slot idx now (refilled at once). */
void mesh_pool_drop(struct mesh_ver *v, uint32_t idx)
{
	struct pool_sock *ps = pool_at(&v->pool, (int)(idx / L7_MESH_SLOTS), (int)(idx % L7_MESH_SLOTS));

	if (ps)
		pool_drop(ps);
}

/* The pool connection of slot idx when the client `owner` still holds it, else -1. */
int mesh_slot_fd(struct mesh_ver *v, uint32_t idx, const struct l7_mesh_key *owner)
{
	struct l7_mesh_slot s;
	int fd = slot_state(v, idx % L7_MESH_POOL_SIZE, &s);

	return fd >= 0 && s.state == L7_MS_BUSY && !memcmp(&s.owner, owner, sizeof *owner) ? fd : -1;
}

/* A request to upstream up was answered 503 because every pool connection of it was held by
 * another client: say so, at most every 10 s, with what to change. */
void mesh_pool_exhausted(struct l7run *L, struct mesh_ver *v, int up)
{
	unsigned long long n = rate_note(&mesh_of(L)->exhausted);

	if (n)
		say(L, "pool exhausted: %llu request(s) answered 503 because every pool connection of their upstream "
		    "(%s) was held by another client; --pool is %d (at most %d)", n, v->v.cfg.upstream[up].name,
		    v->pool.want, L7_MESH_SLOTS);
}

/* A run-time slot whose endpoint left its set (endpoints.c: retired) is out of its set's
 * table, so no request picks it once every lookup of the table before the flip is over
 * (microseconds; DRAIN_AFTER_MS is far longer). Its connections close as soon as none owes a
 * response: idle, or bound to a client that has all its answers (that client's next request
 * picks another endpoint); one that owes finishes first (an orphaned one: stale). With none
 * left the slot is free for another endpoint (ep_drained); the pool opens none meanwhile. */
void mesh_pool_drain(struct mesh_ver *v, uint64_t now)
{
	struct config *cfg = &v->v.cfg;

	for (int up = 0; up < L7_MESH_UPSTREAMS; up++) {
		if (!ep_retired(cfg, up)) {
			v->retired_seen[up] = 0;
			continue;
		}
		if (!v->retired_seen[up])
			v->retired_seen[up] = now;
		if (now - v->retired_seen[up] < DRAIN_AFTER_MS)
			continue;
		for (int i = 0; i < v->pool.want; i++) {
			uint32_t k = (uint32_t)(up * L7_MESH_SLOTS + i);
			struct pool_sock *ps = pool_at(&v->pool, up, i);
			struct l7_mesh_slot s;
			if (!ps || ps->connecting)
				continue;
			if (bpf_map_lookup_elem(v->pool_map, &k, &s) || s.gen != v->gen[k] || s.state == L7_MS_IDLE ||
			    s.state == L7_MS_DEAD || (s.state == L7_MS_BUSY && s.req_cnt == s.resp_cnt))
				pool_drop(ps);
		}
		if (!v->pool.count[up]) {
			vlog(v->pool.L, "upstream %s: drained, its slot is free", cfg->upstream[up].name);
			ep_drained(cfg, up);
			v->retired_seen[up] = 0;
		}
	}
}

/* Responses owed on v's busy pool connections. */
uint64_t mesh_pool_owed(struct mesh_ver *v)
{
	uint64_t owed = 0;

	pool_for_each(&v->pool, ps) {
		struct l7_mesh_slot s;
		if (slot_state(v, slot_of(ps), &s) >= 0 && s.state == L7_MS_BUSY)
			owed += s.req_cnt - s.resp_cnt;
	}
	return owed;
}

/* Stopping, SK_MSG detached: what still arrives on a busy pool connection goes to the client
 * it is bound to. */
void mesh_pool_flush(struct l7run *L, struct mesh_ver *v)
{
	char buf[65536];

	pool_for_each(&v->pool, ps) {
		struct l7_mesh_slot s;
		if (slot_state(v, slot_of(ps), &s) < 0 || s.state != L7_MS_BUSY)
			continue;
		struct mesh_client *c = mesh_client_by_key(L, v, &s.owner);
		ssize_t r;
		while ((r = recv(ps->fd, buf, sizeof buf, MSG_DONTWAIT)) > 0)
			if (c)
				(void)!send(c->fd, buf, (size_t)r, MSG_NOSIGNAL);
	}
}
