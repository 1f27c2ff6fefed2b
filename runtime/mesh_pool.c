/* The mesh pool: pre-opened connections from l7run (inside the cgroup) to each upstream, one
 * pool per policy version. A slot is handed to the data plane by writing the backend's socket
 * key into l7_mesh_pool once both ends are in the version's l7_mesh_socks; dead slots are
 * refilled (rate-limited) from the loop. Both ends enroll into the right version because
 * l7run claims the connection's local address for it in every loaded version before
 * connecting (l7/mesh.h, L7_MA_CLAIM): a retired version refills its pool the same way. */
#include <errno.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include "mesh.h"

uint64_t mesh_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
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

/* Claim (or release) the local address a of a pool connection for version v in every loaded
 * version: v's sock_ops takes both of its ends, every other version's leaves them. */
static void claim(struct mesh_ver *v, const struct sockaddr_in *a, int on)
{
	struct l7_mesh_addr_key k = { a->sin_addr.s_addr, ntohs(a->sin_port) };

	for (int i = 0; i < MAX_VERSIONS; i++) {
		struct mesh_ver *w = M.vtab[i];
		if (!w)
			continue;
		struct l7_mesh_addr val = { w == v ? L7_MA_CLAIM : L7_MA_CLAIM_OTHER, 0 };
		if (on)
			bpf_map_update_elem(w->addrs, &k, &val, BPF_ANY);
		else
			bpf_map_delete_elem(w->addrs, &k);
	}
}

/* Connect slot idx of version v and publish it. Returns 0 on success. */
static int pool_open(struct mesh_ver *v, int idx)
{
	int up = idx / L7_MESH_SLOTS;
	struct mesh_pool_conn *pc = &v->slot[idx];
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;

	if (fd < 0)
		return -1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	struct timeval tv = { 0, 200000 };
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	/* the local address first, to claim it before the handshake enrolls the ends */
	struct sockaddr_in la = { .sin_family = AF_INET, .sin_addr = v->cfg.upstream[up].addr.sin_addr };
	socklen_t ll = sizeof la;
	if (la.sin_addr.s_addr == htonl(INADDR_ANY))
		la.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)&la, sizeof la) || getsockname(fd, (struct sockaddr *)&la, &ll)) {
		close(fd);
		return -1;
	}
	claim(v, &la, 1);
	int r = connect(fd, (struct sockaddr *)&v->cfg.upstream[up].addr, sizeof(struct sockaddr_in));
	int e = errno;
	struct l7_mesh_key mine = mesh_key_of(fd), be = rev(mine);
	/* sock_ops enrolls the backend's end when its handshake completes; on loopback that is
	 * almost always before connect returns, but wait for it rather than assume */
	for (int i = 0; !r && i < 200 && !(in_sockhash(v, &mine) && in_sockhash(v, &be)); i++)
		usleep(1000);
	claim(v, &la, 0);
	if (r) {
		upstream_seen(&v->cfg.upstream[up], 0, strerror(e));
		close(fd);
		errno = e;
		return -1;
	}
	if (!in_sockhash(v, &mine) || !in_sockhash(v, &be)) {
		upstream_seen(&v->cfg.upstream[up], 0, "its connections are not enrolled (is the backend in the cgroup?)");
		close(fd);
		return -1;
	}
	upstream_seen(&v->cfg.upstream[up], 1, NULL);
	uint32_t gen = pc->gen + 1;
	struct l7_mesh_conn c = { .role = L7_MR_RT_POOL, .index = (uint32_t)idx, .gen = gen };
	bpf_map_update_elem(v->conns, &mine, &c, BPF_ANY);
	c.role = L7_MR_BACKEND;
	bpf_map_update_elem(v->conns, &be, &c, BPF_ANY);
	struct l7_mesh_slot s = { .state = L7_MS_IDLE, .gen = gen, .backend = be };
	uint32_t k = (uint32_t)idx;
	bpf_map_update_elem(v->pool, &k, &s, BPF_ANY);   /* the slot is usable from here on */
	pc->fd = fd;
	pc->gen = gen;
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP,
				  .data.u64 = MESH_EV_POOL | (uint64_t)v->tix << 16 | (uint64_t)idx };
	epoll_ctl(M.epfd, EPOLL_CTL_ADD, fd, &ev);
	return 0;
}

/* Open missing connections; after a failure to an upstream, retry it 200 ms later. */
void mesh_pool_fill(struct mesh_ver *v, int force)
{
	uint64_t now = mesh_now_ms();

	for (int up = 0; up < L7_MESH_UPSTREAMS; up++) {
		if (!v->cfg.upstream[up].set)
			continue;
		for (int i = 0; i < M.pool_n && i < L7_MESH_SLOTS; i++) {
			int idx = up * L7_MESH_SLOTS + i;
			struct mesh_pool_conn *pc = &v->slot[idx];
			if (pc->fd >= 0 || (!force && pc->retry_at > now))
				continue;
			if (pool_open(v, idx)) {
				for (int j = i; j < M.pool_n && j < L7_MESH_SLOTS; j++)
					v->slot[up * L7_MESH_SLOTS + j].retry_at = now + 200;
				mlog("upstream %s: cannot connect (%s), retrying", v->cfg.upstream[up].name, strerror(errno));
				break;
			}
		}
	}
}

/* Upstream up has a pool connection the data plane can use or is using. */
int mesh_upstream_live(struct mesh_ver *v, int up)
{
	for (int i = 0; i < M.pool_n && i < L7_MESH_SLOTS; i++) {
		uint32_t k = (uint32_t)(up * L7_MESH_SLOTS + i);
		struct l7_mesh_slot s;
		if (v->slot[k].fd >= 0 && !bpf_map_lookup_elem(v->pool, &k, &s) && s.gen == v->slot[k].gen &&
		    (s.state == L7_MS_IDLE || s.state == L7_MS_BUSY || s.state == L7_MS_ORPHAN))
			return 1;
	}
	return 0;
}

/* A request to upstream up was answered 503 because every pool connection of it was held by
 * another client: say so, at most every 10 s, with what to change. */
void mesh_pool_exhausted(struct mesh_ver *v, int up)
{
	static unsigned long long n;
	static uint64_t said_at;

	n++;
	if (said_at && mesh_now_ms() - said_at < 10000)
		return;
	fprintf(stderr, "l7run[mesh]: pool exhausted: %llu request(s) answered 503 because every pool connection "
		"of their upstream (%s) was held by another client; --pool is %d (at most %d)\n", n, v->cfg.upstream[up].name,
		M.pool_n, L7_MESH_SLOTS);
	n = 0;
	said_at = mesh_now_ms();
}

/* A pool connection ended (or l7run ends it, mesh_pool_drop): the client bound to it with
 * responses owed gets a 502, unless it already has its last answer (it is closing). */
void mesh_pool_drop(struct mesh_ver *v, int idx)
{
	struct mesh_pool_conn *pc = &v->slot[idx];
	struct l7_mesh_slot s;
	uint32_t k = (uint32_t)idx;

	if (pc->fd < 0)
		return;
	epoll_ctl(M.epfd, EPOLL_CTL_DEL, pc->fd, NULL);
	close(pc->fd);
	pc->fd = -1;
	pc->retry_at = mesh_now_ms() + 50;
	if (bpf_map_lookup_elem(v->pool, &k, &s) || s.gen != pc->gen)
		return;
	uint32_t was = s.state;
	s.state = L7_MS_DEAD;
	bpf_map_update_elem(v->pool, &k, &s, BPF_ANY);
	mlog("pool slot %d (%s) of version %d closed, state %u, owed %llu", idx,
	     v->cfg.upstream[idx / L7_MESH_SLOTS].name, v->id, was, (unsigned long long)(s.req_cnt - s.resp_cnt));
	if (was == L7_MS_BUSY && s.req_cnt != s.resp_cnt) {
		struct mesh_client *c = mesh_client_by_key(v, &s.owner);
		if (c && !c->closing)
			mesh_client_answer(c, idx / L7_MESH_SLOTS, 502, 1);
	}
}

void mesh_pool_event(struct mesh_ver *v, int idx, uint32_t ev)
{
	char buf[65536];

	/* data here is a response nobody waits for any more (orphaned): discard it */
	for (;;) {
		ssize_t n = recv(v->slot[idx].fd, buf, sizeof buf, MSG_DONTWAIT);
		if (n > 0)
			continue;
		if (n == 0 || (errno != EAGAIN && errno != EINTR))
			ev |= EPOLLHUP;
		break;
	}
	if (ev & (EPOLLHUP | EPOLLRDHUP | EPOLLERR))
		mesh_pool_drop(v, idx);
}

/* A slot whose client left with responses owed (ORPHAN) frees itself when they arrive; when
 * they do not (the client sent part of a request, or the backend is slow), the connection
 * carries a half request or a late answer: close it after a grace time and refill, rather
 * than lose the slot for good (the pool ran dry after a few such clients). */
#define ORPHAN_GRACE_MS 200

void mesh_pool_reap(struct mesh_ver *v)
{
	uint64_t now = mesh_now_ms();

	for (int up = 0; up < L7_MESH_UPSTREAMS; up++) {
		if (!v->cfg.upstream[up].set)
			continue;
		for (int i = 0; i < M.pool_n && i < L7_MESH_SLOTS; i++) {
			uint32_t k = (uint32_t)(up * L7_MESH_SLOTS + i);
			struct mesh_pool_conn *pc = &v->slot[k];
			struct l7_mesh_slot s;
			if (pc->fd < 0 || bpf_map_lookup_elem(v->pool, &k, &s) || s.gen != pc->gen ||
			    s.state != L7_MS_ORPHAN) {
				pc->orphan_since = 0;
				continue;
			}
			if (!pc->orphan_since)
				pc->orphan_since = now;
			else if (now - pc->orphan_since >= ORPHAN_GRACE_MS) {
				mlog("pool slot %u orphaned with %llu response(s) owed: closing it", k,
				     (unsigned long long)(s.req_cnt - s.resp_cnt));
				pc->orphan_since = 0;
				mesh_pool_drop(v, (int)k);
			}
		}
	}
}

void mesh_pool_close_all(struct mesh_ver *v)
{
	for (int i = 0; i < L7_MESH_POOL_SIZE; i++)
		if (v->slot[i].fd >= 0) {
			epoll_ctl(M.epfd, EPOLL_CTL_DEL, v->slot[i].fd, NULL);
			close(v->slot[i].fd);
			v->slot[i].fd = -1;
		}
}
