/* Gateway mode's pool sockets (the machinery is pool.c): each in its version's l7_upstreams,
 * opened on a pool miss or to keep --pool-idle of them idle, bounded per upstream
 * (--pool-max), lent to one client while it is connected (so pairing is by construction), idle
 * again when it leaves. The data plane finds a socket by its cookie (l7_conns, l7_txq) and by
 * its local port (l7_txport); a client's l7_ctl names the sockets it is bound to.
 *
 * Idle sockets are the kernel's to give (l7_idle): l7run parks one in an empty slot, and a new
 * client's first request takes it there (gateway.h l7g_claim) and is forwarded at once,
 * instead of being a pool miss that l7run forwards. l7run learns who took it from the client's
 * l7_conn.kbind or the slot's claimer, and adopts it as if it had lent it (client_adopt,
 * idle_tick): from then on it is that client's binding, given back when the client leaves. */
#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <bpf/bpf.h>
#include "gateway.h"

#define PARK_RETRY_MS 200   /* no connect to fill an upstream's slots sooner after a failed one */
#define IDLE_SHRINK_MS 1000 /* one slot fewer to keep filled after this long without a miss */

static struct gw_version *ver_of(struct pool_sock *ps)
{
	return ps->pool->ctx;
}

/* l7_idle, mapped (BPF_F_MMAPABLE, load.c): l7run's side of the slots is atomics, as the
 * kernel's is; a map update would overwrite a slot the kernel has just taken. */
void idle_map(struct gw_version *v, int fd)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	size_t len = (sizeof(struct l7_idle) * L7_MAX_UPSTREAMS + pg - 1) / pg * pg;
	void *m = fd < 0 ? MAP_FAILED : mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

	v->idle = m == MAP_FAILED ? NULL : m;
	v->idle_len = len;
}

void idle_unmap(struct gw_version *v)
{
	if (v->idle)
		munmap(v->idle, v->idle_len);
	v->idle = NULL;
}

/* Into an empty slot for the kernel to take (only the serving version's: a retired one takes
 * no new clients). 0 parked. */
static int park(struct pool_sock *ps)
{
	struct gw_version *v = ver_of(ps);

	if (!v->idle || v->v.retired || ps->pool->L->args.pool_idle <= 0)
		return -1;
	struct l7_idle *id = &v->idle[ps->up];
	for (int i = 0; i < L7_IDLE_SLOTS; i++) {
		if (v->parked[ps->up][i] || __atomic_load_n(&id->slot[i], __ATOMIC_ACQUIRE))
			continue;
		__atomic_store_n(&id->claimer[i], 0, __ATOMIC_RELAXED);
		v->parked[ps->up][i] = ps;
		__atomic_store_n(&id->slot[i], ps->cookie, __ATOMIC_RELEASE);   /* the kernel may take it now */
		return 0;
	}
	return -1;
}

/* Out of its slot: 0 if it was still there (or never parked), else the cookie of the client
 * that took it without l7run knowing yet (0 too while the kernel is still writing it). */
static uint64_t unpark(struct pool_sock *ps)
{
	struct gw_version *v = ver_of(ps);

	if (!v->idle || ps->up < 0 || ps->up >= L7_MAX_UPSTREAMS)
		return 0;
	for (int i = 0; i < L7_IDLE_SLOTS; i++) {
		if (v->parked[ps->up][i] != ps)
			continue;
		v->parked[ps->up][i] = NULL;
		uint64_t was = __atomic_exchange_n(&v->idle[ps->up].slot[i], 0, __ATOMIC_ACQ_REL);
		return was == ps->cookie ? 0 : __atomic_load_n(&v->idle[ps->up].claimer[i], __ATOMIC_ACQUIRE);
	}
	return 0;
}

static struct client *client_by_cookie(struct l7run *L, struct gw_version *v, uint64_t cookie)
{
	struct gateway *g = gw_of(L);

	for (int i = 0; i < g->n_clients; i++)
		if (g->clients[i]->cookie == cookie && g->clients[i]->v == v)
			return g->clients[i];
	return NULL;
}

/* The kernel gave slot i's socket to c: c's binding now, as if l7run had lent it (the data
 * plane already made c its peer). Only where c has none for that upstream: the kernel takes
 * one only then, and l7run binds one only while it handles a record of c, when the kernel
 * takes none. */
static int adopt(struct client *c, int up, int i)
{
	struct pool_sock *ps = c->v->parked[up][i];
	struct l7_conn st;

	if (c->bind[up])
		return -1;
	c->v->parked[up][i] = NULL;
	c->bind[up] = ps;
	ps->owner = c;
	ctl_publish(c);
	if (!bpf_map_lookup_elem(c->v->map_conns, &c->cookie, &st) && (st.flags & L7_CONN_LAST))
		client_close_after(c);   /* its request said close: after its response */
	return 0;
}

/* Adopt the socket the kernel took for c, if it did: before l7run decides on c's order (an
 * answer must wait for the response owed on it) and before c leaves (it goes back then). */
void client_adopt(struct client *c)
{
	struct gw_version *v = c->v;
	struct l7_conn st;

	if (!v->idle || bpf_map_lookup_elem(v->map_conns, &c->cookie, &st) || !st.kbind ||
	    st.kbind_up >= L7_MAX_UPSTREAMS || c->bind[st.kbind_up])
		return;
	for (int i = 0; i < L7_IDLE_SLOTS; i++) {
		struct pool_sock *ps = v->parked[st.kbind_up][i];
		if (ps && ps->cookie == st.kbind &&
		    __atomic_load_n(&v->idle[st.kbind_up].slot[i], __ATOMIC_ACQUIRE) != ps->cookie) {
			adopt(c, (int)st.kbind_up, i);
			return;
		}
	}
}

static int idle_floor(const struct l7run *L)
{
	return L->args.pool_idle < L7_IDLE_SLOTS ? L->args.pool_idle : L7_IDLE_SLOTS;
}

/* A new client's request to upstream up found no socket in the slots (the data plane's pool
 * miss, l7run forwards it): keep twice as many there, up to all of them. Short connections
 * take a socket each and, when their request says Connection: close, the backend closes it
 * after the response: at 16 such clients --pool-idle 8 left half the requests pool misses. */
void idle_missed(struct gw_version *v, int up)
{
	int floor = idle_floor(v->pool.L);

	if (!v->idle || v->v.retired || floor <= 0 || up < 0 || up >= L7_MAX_UPSTREAMS)
		return;
	int w = v->idle_want[up] > floor ? v->idle_want[up] : floor;
	v->idle_want[up] = 2 * w < L7_IDLE_SLOTS ? 2 * w : L7_IDLE_SLOTS;
	v->idle_miss_at[up] = now_ms();
}

/* Keep --pool-idle sockets of upstream up in slots, more while pool misses say it is too few
 * (idle_missed), back down one a second once they stop: idle ones first, else new connects
 * (parked when they are up, ready()). */
static void refill(struct l7run *L, struct gw_version *v, int up, int in_slots, uint64_t now)
{
	int floor = idle_floor(L);

	if (v->idle_want[up] > floor && now - v->idle_miss_at[up] >= IDLE_SHRINK_MS) {
		v->idle_want[up]--;
		v->idle_miss_at[up] = now;
	}
	int want = v->idle_want[up] > floor ? v->idle_want[up] : floor;
	for (int n = want - in_slots - v->parking[up]; n > 0 && now >= v->park_retry[up]; n--) {
		int err;
		struct pool_sock *ps = pool_take(&v->pool, up, NULL, &err);
		if (!ps)
			v->park_retry[up] = now + PARK_RETRY_MS;   /* at the bound, or the upstream is down */
		else if (ps->connecting)
			v->parking[up]++;
		else
			pool_give_back(ps);   /* an idle one: into a slot */
	}
}

/* From the loop: adopt what the kernel gave away (a socket whose client is gone is closed:
 * a request may be on it), and fill the serving version's slots. */
void idle_tick(struct l7run *L, uint64_t now)
{
	for (struct version *ver = L->cur; ver; ver = ver->older) {
		struct gw_version *v = gwv(ver);
		if (!v->idle)
			continue;
		for (int up = 0; up < L7_MAX_UPSTREAMS; up++) {
			if (!ver->cfg.upstream[up].set)
				continue;
			int in_slots = 0;
			for (int i = 0; i < L7_IDLE_SLOTS; i++) {
				struct pool_sock *ps = v->parked[up][i];
				if (!ps)
					continue;
				if (__atomic_load_n(&v->idle[up].slot[i], __ATOMIC_ACQUIRE) == ps->cookie) {
					in_slots++;
					continue;
				}
				uint64_t who = __atomic_load_n(&v->idle[up].claimer[i], __ATOMIC_ACQUIRE);
				if (!who)
					continue;   /* being taken: the claimer follows */
				struct client *c = client_by_cookie(L, v, who);
				if (!c) {
					v->parked[up][i] = NULL;
					pool_drop(ps);
				} else {
					adopt(c, up, i);
				}
			}
			/* not a run-time slot without its endpoint, or whose endpoint left */
			if (ver == L->cur && ver->cfg.upstream[up].addr.sin_port && !ep_retired(&ver->cfg, up))
				refill(L, v, up, in_slots, now);
		}
	}
}

/* Take back the sockets parked for upstream slot up (its endpoint left): each still in its
 * slot is closed; one the kernel has just taken is left to idle_tick, which adopts it. */
void idle_unpark(struct gw_version *v, int up)
{
	if (!v->idle)
		return;
	for (int i = 0; i < L7_IDLE_SLOTS; i++) {
		struct pool_sock *ps = v->parked[up][i];
		__u64 want = ps ? ps->cookie : 0;
		if (ps && __atomic_compare_exchange_n(&v->idle[up].slot[i], &want, 0, false, __ATOMIC_ACQ_REL,
						      __ATOMIC_ACQUIRE)) {
			v->parked[up][i] = NULL;
			pool_drop(ps);
		}
	}
}

/* Requests on this socket whose final response the kernel has not framed yet. */
uint64_t pool_inflight(struct pool_sock *ps)
{
	struct gw_version *v = ver_of(ps);
	struct l7_txq q;
	struct l7_conn u;

	if (ps->connecting || ps->dead)
		return 0;
	if (bpf_map_lookup_elem(v->map_txq, &ps->cookie, &q) || bpf_map_lookup_elem(v->map_conns, &ps->cookie, &u))
		return 0;
	return q.sent - u.done;
}

/* Publish this client's bindings and progress to the data plane. */
void ctl_publish(struct client *c)
{
	struct l7_ctl ctl;

	memset(&ctl, 0, sizeof ctl);
	/* frozen (draining, gateway.c; a stalled client, gateway_conn.c): never equal to the data
	 * plane's pass_seq, so every new head is handed to l7run instead of being forwarded */
	ctl.done_seq = c->drain != DRAIN_NONE || c->stalled ? UINT64_MAX : c->next_seq - 1;
	ctl.own_bytes = c->own_bytes;
	for (int i = 0; i < L7_MAX_UPSTREAMS; i++)
		if (c->bind[i] && !c->bind[i]->connecting && !c->bind[i]->dead)
			ctl.bind[i] = c->bind[i]->cookie;
	bpf_map_update_elem(c->v->map_ctl, &c->cookie, &ctl, BPF_ANY);
}

static void set_peer(struct pool_sock *ps, uint64_t peer)
{
	struct gw_version *v = ver_of(ps);
	struct l7_conn u;

	/* only while the socket is quiet: the data plane writes this value otherwise */
	if (bpf_map_lookup_elem(v->map_conns, &ps->cookie, &u))
		return;
	u.peer = peer;
	bpf_map_update_elem(v->map_conns, &ps->cookie, &u, BPF_EXIST);
}

void pool_bind(struct client *c, struct pool_sock *ps)
{
	c->bind[ps->up] = ps;
	ps->owner = c;
	if (!ps->connecting)
		set_peer(ps, c->cookie);   /* before the binding is published */
}

/* Connected: the SK_MSG program finds it by local port, the parsers by cookie. */
static int enroll(struct pool_sock *ps)
{
	struct gw_version *v = ver_of(ps);
	struct client *owner = ps->owner;

	/* the local port must be unique among pool sockets */
	if (bpf_map_update_elem(v->map_txport, &ps->port, &ps->cookie, BPF_NOEXIST)) {
		ps->port = 0;
		return -2;   /* another pool socket (to another backend) has this port: reconnect */
	}
	struct l7_conn u;
	struct l7_txq q;
	memset(&u, 0, sizeof u);
	memset(&q, 0, sizeof q);
	u.role = L7_ROLE_UPSTREAM;
	u.upstream = ps->up;
	u.peer = owner ? owner->cookie : 0;
	bpf_map_update_elem(v->map_conns, &ps->cookie, &u, BPF_ANY);
	bpf_map_update_elem(v->map_txq, &ps->cookie, &q, BPF_ANY);
	uint64_t val = (uint64_t)ps->fd;
	if (bpf_map_update_elem(v->map_upstreams, &ps->cookie, &val, BPF_ANY)) {
		say(ps->pool->L, "pool insert: %s", strerror(errno));
		return -1;
	}
	return 0;
}

static void leave(struct pool_sock *ps)
{
	struct gw_version *v = ver_of(ps);

	unpark(ps);   /* before its maps go: the kernel must not take it any more */
	if (ps->port)
		bpf_map_delete_elem(v->map_txport, &ps->port);
	if (ps->cookie) {
		bpf_map_delete_elem(v->map_conns, &ps->cookie);
		bpf_map_delete_elem(v->map_txq, &ps->cookie);
	}
}

/* Back from a client: reusable if nothing is owed on it and the data plane stands at a
 * response boundary without having marked it spent. */
static int recycle(struct pool_sock *ps)
{
	struct l7_conn u;

	if (pool_inflight(ps) || bpf_map_lookup_elem(ver_of(ps)->map_conns, &ps->cookie, &u) ||
	    (u.flags & (L7_CONN_NOREUSE | L7_CONN_CLOSE | L7_CONN_BROKEN)) || u.body != L7_BODY_NONE)
		return -1;
	set_peer(ps, 0);
	return park(ps) ? 0 : 1;   /* the kernel's to give, or l7run's idle list */
}

/* The connect a client waits for finished: bind it, and let the client send. */
static void ready(struct pool *p, void *owner, struct pool_sock *ps)
{
	struct gw_version *v = p->ctx;

	if (owner) {
		pool_bind(owner, ps);
		client_pump(owner);
		return;
	}
	if (v->parking[ps->up] > 0)
		v->parking[ps->up]--;
	pool_give_back(ps);   /* opened to fill a slot (refill) */
}

/* A socket lent to a client is gone: the waiting request gets a 502 (a failed connect), or a
 * client still owed a response on it cannot get it any more. */
static void lost(struct pool *p, void *owner, struct pool_sock *ps, enum pool_loss why, uint64_t owed)
{
	struct client *c = owner;
	struct gw_version *v = p->ctx;

	if (!c && why == POOL_CONNECT_FAILED) {   /* opened to fill a slot */
		if (v->parking[ps->up] > 0)
			v->parking[ps->up]--;
		v->park_retry[ps->up] = now_ms() + PARK_RETRY_MS;
		return;
	}
	if (!c) {
		uint64_t who = unpark(ps);   /* the kernel may have given it to a client */
		c = who ? client_by_cookie(p->L, v, who) : NULL;
	}
	if (!c)
		return;
	if (c->bind[ps->up] == ps)
		c->bind[ps->up] = NULL;
	if (why == POOL_CONNECT_FAILED) {
		c->conn_err[ps->up] = 1;
	} else {
		if (owed && !c->closing) {
			c->closing = 1;
			c->deadline = now_ms();
		}
		ctl_publish(c);
	}
	client_pump(c);
}

const struct pool_ops gw_pool_ops = {
	.send_timeout_ms = 2000,
	.enroll = enroll,
	.leave = leave,
	.owed = pool_inflight,
	.recycle = recycle,
	.ready = ready,
	.lost = lost,
};

/* Send one slow-path piece. The l7_txq record (written while the socket is quiet) lets the
 * SK_MSG program apply the request's header mutations and the response parser know HEAD and
 * the response's mutations. */
int pool_send(struct pool_sock *ps, const char *buf, size_t len, const struct l7_pass *rec)
{
	struct gw_version *v = ver_of(ps);

	if (rec && rec->kind == L7_PASS_HEAD) {
		struct l7_txq q;
		if (bpf_map_lookup_elem(v->map_txq, &ps->cookie, &q))
			return -1;
		struct l7_tx_rec *r = &q.rec[q.sent & (L7_TXQ_DEPTH - 1)];
		memset(r, 0, sizeof *r);
		r->len = rec->head_len;   /* body pieces pass SK_MSG without a record */
		r->ins_off = rec->head_len - 2;
		r->n_set = rec->n_set;
		memcpy(r->set, rec->set, sizeof r->set);
		r->n_del = rec->n_del;
		memcpy(r->del, rec->del, sizeof r->del);
		r->n_rset = rec->n_rset;
		r->rdel = rec->rdel;
		memcpy(r->rset, rec->rset, sizeof r->rset);
		r->no_body = !!(rec->flags & L7_PASSF_HEADM);
		r->close = !!(rec->flags & L7_PASSF_RCLOSE);
		q.sent++;
		if (bpf_map_update_elem(v->map_txq, &ps->cookie, &q, BPF_EXIST))
			return -1;
	}
	while (len) {
		ssize_t n = send(ps->fd, buf, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}
