/* The pools of every mode (pool.h): connecting, enrolling, lending, taking back, refilling and
 * losing sockets to the upstreams, with each connect's outcome as the upstream's health. What
 * a socket means to the data plane, and to whoever it is lent to, is the mode's (pool_ops). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include "pool.h"

#define REFILL_AFTER_LOSS_MS  50    /* eager: a lost socket's place is refilled no sooner */
#define REFILL_AFTER_FAIL_MS  200   /* eager: after a failed connect to an upstream */

void pool_init(struct pool *p, struct l7run *L, const struct pool_ops *ops, void *ctx, struct cfg_endpoint *upstream,
	       int want)
{
	*p = (struct pool){ .L = L, .ops = ops, .ctx = ctx, .upstream = upstream,
			    .want = ops->eager && want > POOL_MAX_PLACES ? POOL_MAX_PLACES : want };
}

static void idle_unlink(struct pool_sock *ps)
{
	for (struct pool_sock **pp = &ps->pool->idle[ps->up]; *pp; pp = &(*pp)->next_idle)
		if (*pp == ps) {
			*pp = ps->next_idle;
			break;
		}
	ps->next_idle = NULL;
}

/* One more or one less socket of upstream up that the data plane can use. An eager pool's
 * endpoint of a set is in force only while it has one (endpoints.c): its first and its last
 * change the set's table. */
static void pooled(struct pool_sock *ps, int on)
{
	struct cfg_endpoint *e = &ps->pool->upstream[ps->up];

	if (ps->pooled == on)
		return;
	ps->pooled = on;
	e->pooled += on ? 1 : -1;
	if (ps->pool->ops->eager && e->pooled == on)
		ps->pool->L->env.ep.changed = 1;
}

/* Out of the pool's accounting: no longer counted, idle, placed or lent. */
static void detach(struct pool_sock *ps)
{
	struct pool *p = ps->pool;

	if (ps->dead)
		return;   /* already */
	pooled(ps, 0);
	ps->dead = 1;
	ps->owner = NULL;
	idle_unlink(ps);
	p->count[ps->up]--;
	if (ps->place >= 0)
		p->places[ps->up][ps->place] = NULL;
}

/* Gone: out of the data plane's maps, its fd closed (which takes it out of its SOCKHASH). */
static void sock_free(struct pool_sock *ps)
{
	struct pool *p = ps->pool;

	detach(ps);
	if (p->ops->leave)
		p->ops->leave(ps);
	if (ps->prev)
		ps->prev->next = ps->next;
	else
		p->all = ps->next;
	if (ps->next)
		ps->next->prev = ps->prev;
	loop_close(p->L, ps->fd);
	vlog(p->L, "pool: closed upstream %d socket", ps->up);
	free(ps);
}

/* Lost while in use: the mode hears it (and through it the owner), then it goes. */
static void lose(struct pool_sock *ps, enum pool_loss why)
{
	struct pool *p = ps->pool;
	uint64_t owed = why != POOL_CONNECT_FAILED && p->ops->owed ? p->ops->owed(ps) : 0;
	void *owner = ps->owner;

	if (why == POOL_HUNG_UP)
		vlog(p->L, "pool: upstream %d closed the connection%s", ps->up, owed ? " with a response owed" : "");
	if (why == POOL_HUNG_UP && owed)
		upstream_reset(p->L, &p->upstream[ps->up]);
	detach(ps);
	if (p->ops->lost)
		p->ops->lost(p, owner, ps, why, owed);
	uint64_t again = now_ms() + REFILL_AFTER_LOSS_MS;
	if (p->ops->eager && p->retry_at[ps->up] < again)
		p->retry_at[ps->up] = again;
	sock_free(ps);
}

static void send_timeout(int fd, int ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

/* Start connecting ps on a new socket: 0 (connected, or in progress), else an errno (the fd is
 * closed then) and *why when the upstream is to blame. */
static int sock_connect(struct pool_sock *ps, const char **why)
{
	const struct pool_ops *o = ps->pool->ops;
	const struct sockaddr_in *to = &ps->pool->upstream[ps->up].addr;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | (o->blocking ? 0 : SOCK_NONBLOCK), 0), one = 1;

	*why = NULL;
	ps->fd = fd;
	ps->connecting = 1;
	ps->cookie = 0;
	ps->port = 0;
	if (fd < 0 || fd >= MAX_FDS) {
		if (fd >= 0)
			close(fd);
		ps->fd = -1;
		return EMFILE;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	if (o->blocking)
		send_timeout(fd, o->send_timeout_ms);   /* bounds the connect too */
	errno = 0;
	int r = o->connect ? o->connect(ps, to, why) : connect(fd, (const struct sockaddr *)to, sizeof *to);
	if (r && (o->connect || errno != EINPROGRESS)) {
		int e = errno ? errno : EIO;
		if (!o->connect)
			*why = strerror(e);
		close(fd);
		ps->fd = -1;
		return e;
	}
	if (!o->blocking)
		loop_watch(ps->pool->L, fd, &ps->io, EPOLLOUT | EPOLLRDHUP);
	return 0;
}

/* Its connect finished: 0 enrolled and watched, -1 failed, -2 the mode wants a new socket. */
static int sock_connected(struct pool_sock *ps)
{
	struct pool *p = ps->pool;
	const struct cfg_endpoint *e = &p->upstream[ps->up];
	int err = 0;
	socklen_t l = sizeof err;

	if (!p->ops->blocking && (getsockopt(ps->fd, SOL_SOCKET, SO_ERROR, &err, &l) || err)) {
		upstream_seen(p->L, e, 0, strerror(err ? err : errno));
		return -1;
	}
	upstream_seen(p->L, e, 1, NULL);
	if (!p->ops->blocking) {
		/* blocking sends from here on, bounded by a timeout: l7run writes only the slow path */
		fcntl(ps->fd, F_SETFL, fcntl(ps->fd, F_GETFL) & ~O_NONBLOCK);
		send_timeout(ps->fd, p->ops->send_timeout_ms);
	}
	ps->cookie = sock_cookie(ps->fd);
	struct sockaddr_in la;
	socklen_t ll = sizeof la;
	if (getsockname(ps->fd, (struct sockaddr *)&la, &ll))
		return -1;
	ps->port = ntohs(la.sin_port);
	int r = p->ops->enroll ? p->ops->enroll(ps) : 0;
	if (r)
		return r;
	ps->connecting = 0;
	pooled(ps, 1);
	loop_watch(p->L, ps->fd, &ps->io, p->ops->watch_input ? EPOLLIN | EPOLLRDHUP : EPOLLRDHUP);
	vlog(p->L, "pool: connected upstream %d (%s) fd %d", ps->up, e->name, ps->fd);
	return 0;
}

/* Finish a connect, again on a new socket where the mode asks: 0 enrolled, 1 connecting again,
 * -1 failed (and the health said). */
static int sock_finish(struct pool_sock *ps)
{
	for (;;) {
		int r = sock_connected(ps);
		if (r != -2)
			return r;
		loop_close(ps->pool->L, ps->fd);
		const char *why;
		if (sock_connect(ps, &why)) {
			if (why)
				upstream_seen(ps->pool->L, &ps->pool->upstream[ps->up], 0, why);
			return -1;
		}
		if (!ps->pool->ops->blocking)
			return 1;
	}
}

static void on_sock(struct l7run *L, struct io *io, uint32_t ev)
{
	struct pool_sock *ps = (struct pool_sock *)io;
	struct pool *p = ps->pool;

	if (ps->connecting && (ev & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
		int r = sock_finish(ps);
		if (r == 1)
			return;
		if (r) {
			vlog(L, "pool: connect to upstream %d failed", ps->up);
			lose(ps, POOL_CONNECT_FAILED);
		} else if (p->ops->ready) {
			p->ops->ready(p, ps->owner, ps);
		}
		return;
	}
	if (p->ops->watch_input && p->ops->readable && p->ops->readable(ps) < 0)
		ev |= EPOLLHUP;
	if (ev & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))
		lose(ps, POOL_HUNG_UP);
}

/* A new socket (lent to owner; at `place` of an eager pool, else -1), connecting or, for a
 * blocking pool, connected and enrolled. NULL and *err on failure. */
static struct pool_sock *sock_open(struct pool *p, int up, void *owner, int place, int *err)
{
	struct pool_sock *ps = calloc(1, sizeof *ps);
	const char *why;

	if (!ps) {
		*err = ENOMEM;
		return NULL;
	}
	ps->io.ready = on_sock;
	ps->pool = p;
	ps->up = up;
	ps->place = place;
	ps->owner = owner;
	ps->fd = -1;
	ps->next = p->all;
	if (p->all)
		p->all->prev = ps;
	p->all = ps;
	p->count[up]++;
	if (place >= 0)
		p->places[up][place] = ps;
	*err = sock_connect(ps, &why);
	if (*err && why)
		upstream_seen(p->L, &p->upstream[up], 0, why);
	if (!*err && p->ops->blocking && sock_finish(ps))
		*err = errno ? errno : EIO;
	if (*err) {
		sock_free(ps);
		return NULL;
	}
	return ps;
}

struct pool_sock *pool_take(struct pool *p, int up, void *owner, int *err)
{
	*err = 0;
	if (p->idle[up]) {
		struct pool_sock *ps = p->idle[up];
		p->idle[up] = ps->next_idle;
		ps->next_idle = NULL;
		ps->owner = owner;
		vlog(p->L, "pool: reuse upstream %d socket fd %d", up, ps->fd);
		return ps;
	}
	if (p->count[up] >= p->want) {
		*err = EAGAIN;
		return NULL;
	}
	if (!p->upstream[up].set) {
		*err = EINVAL;
		return NULL;
	}
	struct pool_sock *ps = sock_open(p, up, owner, -1, err);
	if (ps)
		vlog(p->L, "pool: miss on upstream %d, connecting", up);
	return ps;
}

/* The owner is gone: back to the idle list if the mode can reuse it (or to the mode itself,
 * which hands it to its data plane), else closed. */
void pool_give_back(struct pool_sock *ps)
{
	struct pool *p = ps->pool;

	ps->owner = NULL;
	int r = ps->dead || ps->connecting || !p->ops->recycle ? -1 : p->ops->recycle(ps);
	if (r > 0)
		return;   /* the mode's now (gateway: an idle socket the kernel may take) */
	if (r) {
		sock_free(ps);
		return;
	}
	ps->next_idle = p->idle[ps->up];
	p->idle[ps->up] = ps;
	vlog(p->L, "pool: upstream %d socket fd %d idle", ps->up, ps->fd);
}

void pool_fill(struct pool *p, int force)
{
	uint64_t now = now_ms();

	if (!p->ops->eager)
		return;
	for (int up = 0; up < L7_MAX_UPSTREAMS; up++) {
		const struct cfg_endpoint *e = &p->upstream[up];
		/* a run-time slot without an endpoint, or whose endpoint left (its sockets drain) */
		if (!e->set || !e->addr.sin_port || e->draining || (!force && p->retry_at[up] > now))
			continue;
		for (int i = 0; i < p->want; i++) {
			int err;
			if (p->places[up][i] || sock_open(p, up, NULL, i, &err))
				continue;
			p->retry_at[up] = now + REFILL_AFTER_FAIL_MS;
			vlog(p->L, "upstream %s: cannot connect (%s), retrying", p->upstream[up].name, strerror(err));
			break;
		}
	}
}

void pool_tick(struct pool *p, uint64_t now)
{
	for (struct pool_sock *ps = p->all, *next; ps && p->ops->stale; ps = next) {
		next = ps->next;
		if (!ps->connecting && p->ops->stale(ps, now))
			lose(ps, POOL_DROPPED);
	}
	pool_fill(p, 0);
}

void pool_close_idle(struct pool *p, int up)
{
	while (p->idle[up])
		sock_free(p->idle[up]);
}

void pool_drop(struct pool_sock *ps)
{
	lose(ps, POOL_DROPPED);
}

struct pool_sock *pool_at(struct pool *p, int up, int place)
{
	if (!p->ops->eager || up < 0 || up >= L7_MAX_UPSTREAMS || place < 0 || place >= p->want)
		return NULL;
	return p->places[up][place];
}

void pool_fini(struct pool *p)
{
	while (p->all)
		sock_free(p->all);
}
