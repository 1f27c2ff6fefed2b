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
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include "mesh.h"

#define ORPHAN_GRACE_MS 200
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
 * other version's leaves them. */
static void claim(struct l7run *L, struct mesh_ver *v, const struct sockaddr_in *a, int on)
{
	struct l7_mesh_addr_key k = { a->sin_addr.s_addr, ntohs(a->sin_port) };

	mark(v, &k, L7_MA_CLAIM, on);
	for (struct version *w = L->cur; w; w = w->older)
		if (mv(w) != v)
			mark(mv(w), &k, L7_MA_CLAIM_OTHER, on);
}

/* Bind the local address first, to claim it before the handshake enrolls the ends; sock_ops
 * enrolls the backend's end when its handshake completes: on loopback almost always before
 * connect returns, but wait for it rather than assume. */
static int mesh_connect(struct pool_sock *ps, const struct sockaddr_in *to, const char **why)
{
	struct mesh_ver *v = ver_of(ps);
	struct sockaddr_in la = { .sin_family = AF_INET, .sin_addr = to->sin_addr };
	socklen_t ll = sizeof la;

	if (la.sin_addr.s_addr == htonl(INADDR_ANY))
		la.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(ps->fd, (struct sockaddr *)&la, sizeof la) || getsockname(ps->fd, (struct sockaddr *)&la, &ll))
		return -1;
	claim(ps->pool->L, v, &la, 1);
	int r = connect(ps->fd, (const struct sockaddr *)to, sizeof *to);
	int e = errno;
	struct l7_mesh_key mine = mesh_key_of(ps->fd), be = rev(mine);
	for (int i = 0; !r && i < 200 && !(in_sockhash(v, &mine) && in_sockhash(v, &be)); i++)
		usleep(1000);
	claim(ps->pool->L, v, &la, 0);
	if (r) {
		*why = strerror(e);
		errno = e;
		return -1;
	}
	if (!in_sockhash(v, &mine) || !in_sockhash(v, &be)) {
		*why = "its connections are not enrolled (is the backend in the cgroup?)";
		return -1;
	}
	return 0;
}

/* Both ends known to the data plane, then the slot usable. */
static int enroll(struct pool_sock *ps)
{
	struct mesh_ver *v = ver_of(ps);
	uint32_t k = slot_of(ps), gen = ++v->gen[k];
	struct l7_mesh_key mine = mesh_key_of(ps->fd), be = rev(mine);
	struct l7_mesh_conn c = { .role = L7_MR_RT_POOL, .index = k, .gen = gen };

	bpf_map_update_elem(v->conns, &mine, &c, BPF_ANY);
	c.role = L7_MR_BACKEND;
	bpf_map_update_elem(v->conns, &be, &c, BPF_ANY);
	struct l7_mesh_slot s = { .state = L7_MS_IDLE, .gen = gen, .backend = be };
	bpf_map_update_elem(v->pool_map, &k, &s, BPF_ANY);   /* the slot is usable from here on */
	return 0;
}

/* Data here is a response nobody waits for any more (orphaned): discard it. */
static int readable(struct pool_sock *ps)
{
	char buf[65536];

	for (;;) {
		ssize_t n = recv(ps->fd, buf, sizeof buf, MSG_DONTWAIT);
		if (n > 0)
			continue;
		return n == 0 || (errno != EAGAIN && errno != EINTR) ? -1 : 0;
	}
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
	if (was == L7_MS_BUSY && s.req_cnt != s.resp_cnt) {
		struct mesh_client *c = mesh_client_by_key(p->L, v, &s.owner);
		if (c && !c->closing)
			mesh_client_answer(c, ps->up, 502, 1);
	}
}

const struct pool_ops mesh_pool_ops = {
	.eager = 1, .blocking = 1, .watch_input = 1, .send_timeout_ms = 200,
	.connect = mesh_connect,
	.enroll = enroll,
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
