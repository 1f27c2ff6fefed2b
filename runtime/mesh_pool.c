/* The mesh pool: pre-opened connections from l7run (inside the cgroup) to each upstream. A
 * slot is handed to the data plane by writing the backend's socket key into l7_mesh_pool once
 * both ends are in l7_mesh_socks; dead slots are refilled (rate-limited) from the loop. */
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

static int in_sockhash(const struct l7_mesh_key *k)
{
	uint64_t cookie;

	return bpf_map_lookup_elem(M.socks, k, &cookie) == 0;
}

/* Connect slot idx and publish it. Returns 0 on success. */
static int pool_open(int idx)
{
	int up = idx / L7_MESH_SLOTS;
	struct mesh_pool_conn *pc = &M.slot[idx];
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;

	if (fd < 0)
		return -1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	struct timeval tv = { 0, 200000 };
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	if (connect(fd, (struct sockaddr *)&M.cfg.upstream[up].addr, sizeof(struct sockaddr_in))) {
		close(fd);
		return -1;
	}
	struct l7_mesh_key mine = mesh_key_of(fd), be = rev(mine);
	/* sock_ops enrolls the backend's end when its handshake completes; on loopback that is
	 * almost always before connect returns, but wait for it rather than assume */
	for (int i = 0; i < 200 && !(in_sockhash(&mine) && in_sockhash(&be)); i++)
		usleep(1000);
	if (!in_sockhash(&mine) || !in_sockhash(&be)) {
		fprintf(stderr, "l7run[mesh]: pool connection to %s not enrolled (is the backend in the cgroup?)\n",
			M.cfg.upstream[up].name);
		close(fd);
		return -1;
	}
	uint32_t gen = pc->gen + 1;
	struct l7_mesh_conn c = { .role = L7_MR_RT_POOL, .index = (uint32_t)idx, .gen = gen };
	bpf_map_update_elem(M.conns, &mine, &c, BPF_ANY);
	c.role = L7_MR_BACKEND;
	bpf_map_update_elem(M.conns, &be, &c, BPF_ANY);
	struct l7_mesh_slot s = { .state = L7_MS_IDLE, .gen = gen, .backend = be };
	uint32_t k = (uint32_t)idx;
	bpf_map_update_elem(M.pool, &k, &s, BPF_ANY);   /* the slot is usable from here on */
	pc->fd = fd;
	pc->gen = gen;
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP, .data.u64 = MESH_EV_POOL | (uint64_t)idx };
	epoll_ctl(M.epfd, EPOLL_CTL_ADD, fd, &ev);
	return 0;
}

/* Open missing connections; after a failure to an upstream, retry it 200 ms later. */
void mesh_pool_fill(int force)
{
	uint64_t now = mesh_now_ms();

	for (int up = 0; up < L7_MESH_UPSTREAMS; up++) {
		if (!M.cfg.upstream[up].set)
			continue;
		for (int i = 0; i < M.pool_n && i < L7_MESH_SLOTS; i++) {
			int idx = up * L7_MESH_SLOTS + i;
			struct mesh_pool_conn *pc = &M.slot[idx];
			if (pc->fd >= 0 || (!force && pc->retry_at > now))
				continue;
			if (pool_open(idx)) {
				for (int j = i; j < M.pool_n && j < L7_MESH_SLOTS; j++)
					M.slot[up * L7_MESH_SLOTS + j].retry_at = now + 200;
				mlog("upstream %s: cannot connect (%s), retrying", M.cfg.upstream[up].name, strerror(errno));
				break;
			}
		}
	}
}

/* A pool connection ended: the client bound to it with responses owed gets a 502. */
static void pool_dead(int idx)
{
	struct mesh_pool_conn *pc = &M.slot[idx];
	struct l7_mesh_slot s;
	uint32_t k = (uint32_t)idx;

	if (pc->fd < 0)
		return;
	epoll_ctl(M.epfd, EPOLL_CTL_DEL, pc->fd, NULL);
	close(pc->fd);
	pc->fd = -1;
	pc->retry_at = mesh_now_ms() + 50;
	if (bpf_map_lookup_elem(M.pool, &k, &s) || s.gen != pc->gen)
		return;
	uint32_t was = s.state;
	s.state = L7_MS_DEAD;
	bpf_map_update_elem(M.pool, &k, &s, BPF_ANY);
	mlog("pool slot %d (%s) closed, state %u, owed %llu", idx, M.cfg.upstream[idx / L7_MESH_SLOTS].name, was,
	     (unsigned long long)(s.req_cnt - s.resp_cnt));
	if (was == L7_MS_BUSY && s.req_cnt != s.resp_cnt) {
		struct mesh_client *c = mesh_client_by_key(&s.owner);
		if (c)
			mesh_client_answer(c, 502, 1);
	}
}

void mesh_pool_event(int idx, uint32_t ev)
{
	char buf[65536];

	/* data here is a response nobody waits for any more (orphaned): discard it */
	for (;;) {
		ssize_t n = recv(M.slot[idx].fd, buf, sizeof buf, MSG_DONTWAIT);
		if (n > 0)
			continue;
		if (n == 0 || (errno != EAGAIN && errno != EINTR))
			ev |= EPOLLHUP;
		break;
	}
	if (ev & (EPOLLHUP | EPOLLRDHUP | EPOLLERR))
		pool_dead(idx);
}

/* A slot whose client left with responses owed (ORPHAN) frees itself when they arrive; when
 * they do not (the client sent part of a request, or the backend is slow), the connection
 * carries a half request or a late answer: close it after a grace time and refill, rather
 * than lose the slot for good (the pool ran dry after a few such clients). */
#define ORPHAN_GRACE_MS 200

void mesh_pool_reap(void)
{
	uint64_t now = mesh_now_ms();

	for (int up = 0; up < L7_MESH_UPSTREAMS; up++) {
		if (!M.cfg.upstream[up].set)
			continue;
		for (int i = 0; i < M.pool_n && i < L7_MESH_SLOTS; i++) {
			uint32_t k = (uint32_t)(up * L7_MESH_SLOTS + i);
			struct mesh_pool_conn *pc = &M.slot[k];
			struct l7_mesh_slot s;
			if (pc->fd < 0 || bpf_map_lookup_elem(M.pool, &k, &s) || s.gen != pc->gen ||
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
				pool_dead((int)k);
			}
		}
	}
}

void mesh_pool_close_all(void)
{
	for (int i = 0; i < L7_MESH_POOL_SIZE; i++)
		if (M.slot[i].fd >= 0) {
			close(M.slot[i].fd);
			M.slot[i].fd = -1;
		}
}
