/* The connection pool: upstream sockets in l7_upstreams, filled lazily on a pool miss,
 * bounded per upstream, bound to one client at a time and reused when it leaves. Each policy
 * version has its own pool (its programs redirect only within its own maps). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include "l7run.h"

uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

uint64_t sock_cookie(int fd)
{
	uint64_t c = 0;
	socklen_t l = sizeof c;
	if (getsockopt(fd, SOL_SOCKET, SO_COOKIE, &c, &l))
		return 0;
	return c;
}

/* Requests on this socket whose final response the kernel has not framed yet. */
uint64_t pool_inflight(struct pool_sock *ps)
{
	struct l7_txq q;
	struct l7_conn u;

	if (ps->connecting || ps->dead)
		return 0;
	if (bpf_map_lookup_elem(ps->v->map_txq, &ps->cookie, &q) || bpf_map_lookup_elem(ps->v->map_conns, &ps->cookie, &u))
		return 0;
	return q.sent - u.done;
}

/* Publish this client's bindings and progress to the data plane. */
void ctl_publish(struct client *c)
{
	struct l7_ctl ctl;

	memset(&ctl, 0, sizeof ctl);
	/* frozen (draining, drain.c; a stalled client, conn.c): never equal to the data plane's
	 * pass_seq, so every new head is handed to l7run instead of being forwarded */
	ctl.done_seq = c->drain != DRAIN_NONE || c->stalled ? UINT64_MAX : c->next_seq - 1;
	ctl.own_bytes = c->own_bytes;
	for (int i = 0; i < L7_MAX_UPSTREAMS; i++)
		if (c->bind[i] && !c->bind[i]->connecting && !c->bind[i]->dead)
			ctl.bind[i] = c->bind[i]->cookie;
	bpf_map_update_elem(c->v->map_ctl, &c->cookie, &ctl, BPF_ANY);
}

static void set_peer(struct pool_sock *ps, uint64_t peer)
{
	struct l7_conn u;

	/* only while the socket is quiet: the data plane writes this value otherwise */
	if (bpf_map_lookup_elem(ps->v->map_conns, &ps->cookie, &u))
		return;
	u.peer = peer;
	bpf_map_update_elem(ps->v->map_conns, &ps->cookie, &u, BPF_EXIST);
}

static int pool_ready(struct pool_sock *ps)
{
	struct version *v = ps->v;
	int one = 1, err = 0;
	socklen_t l = sizeof err;

	if (getsockopt(ps->fd, SOL_SOCKET, SO_ERROR, &err, &l) || err) {
		upstream_seen(&v->cfg.upstream[ps->up], 0, strerror(err ? err : errno));
		return -1;
	}
	upstream_seen(&v->cfg.upstream[ps->up], 1, NULL);
	setsockopt(ps->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	/* blocking sends from here on, bounded by a timeout: l7run writes only slow-path requests */
	fcntl(ps->fd, F_SETFL, fcntl(ps->fd, F_GETFL) & ~O_NONBLOCK);
	struct timeval tv = { .tv_sec = 2 };
	setsockopt(ps->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	ps->cookie = sock_cookie(ps->fd);
	struct sockaddr_in la;
	socklen_t ll = sizeof la;
	if (getsockname(ps->fd, (struct sockaddr *)&la, &ll))
		return -1;
	ps->port = ntohs(la.sin_port);
	/* the SK_MSG program finds the socket by local port: it must be unique among pool sockets */
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
	u.peer = ps->owner ? ps->owner->cookie : 0;
	bpf_map_update_elem(v->map_conns, &ps->cookie, &u, BPF_ANY);
	bpf_map_update_elem(v->map_txq, &ps->cookie, &q, BPF_ANY);
	uint64_t val = ps->fd;
	if (bpf_map_update_elem(v->map_upstreams, &ps->cookie, &val, BPF_ANY)) {
		fprintf(stderr, "l7run: pool insert: %s\n", strerror(errno));
		return -1;
	}
	ps->connecting = 0;
	vlog("pool: connected upstream %d (%s) fd %d, version %d", ps->up, v->cfg.upstream[ps->up].name, ps->fd, v->id);
	return 0;
}

static void pool_forget(struct pool_sock *ps)
{
	struct version *v = ps->v;

	for (struct pool_sock **pp = &v->idle[ps->up]; *pp; pp = &(*pp)->next_idle)
		if (*pp == ps) {
			*pp = ps->next_idle;
			break;
		}
	if (ps->owner && ps->owner->bind[ps->up] == ps) {
		ps->owner->bind[ps->up] = NULL;
		ctl_publish(ps->owner);
	}
	if (ps->port)
		bpf_map_delete_elem(v->map_txport, &ps->port);
	if (ps->cookie) {
		bpf_map_delete_elem(v->map_conns, &ps->cookie);
		bpf_map_delete_elem(v->map_txq, &ps->cookie);
	}
	v->pool_count[ps->up]--;
	if (ps->fd >= 0) {
		fds[ps->fd].kind = FD_NONE;
		close(ps->fd);   /* closing the fd is what removes it from the SOCKHASH */
	}
	vlog("pool: closed upstream %d socket", ps->up);
	free(ps);
}

/* Start a non-blocking connect for ps (a new socket). Returns 0 or an errno. */
static int pool_connect(struct pool_sock *ps)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	ps->fd = fd;
	ps->connecting = 1;
	if (fd < 0 || fd >= MAX_FDS) {
		if (fd >= 0)
			close(fd);
		ps->fd = -1;
		return EMFILE;
	}
	fds[fd].kind = FD_POOL;
	fds[fd].p = ps;
	int r = connect(fd, (struct sockaddr *)&ps->v->cfg.upstream[ps->up].addr, sizeof ps->v->cfg.upstream[ps->up].addr);
	if (r && errno != EINPROGRESS) {
		int e = errno;
		upstream_seen(&ps->v->cfg.upstream[ps->up], 0, strerror(e));
		return e;
	}
	struct epoll_event ev = { .events = EPOLLOUT | EPOLLRDHUP, .data.fd = fd };
	epoll_ctl(rt.epfd, EPOLL_CTL_ADD, fd, &ev);
	return 0;
}

/* A pool socket for upstream `up` for client c: an idle one, or a new connection (returned
 * while still connecting). NULL with *err = EAGAIN when the pool is at its bound. */
struct pool_sock *pool_get(struct client *c, int up, int *err)
{
	struct version *v = c->v;

	*err = 0;
	while (v->idle[up]) {
		struct pool_sock *ps = v->idle[up];
		v->idle[up] = ps->next_idle;
		ps->next_idle = NULL;
		if (ps->dead)
			continue;
		ps->owner = c;
		vlog("pool: reuse upstream %d socket fd %d", up, ps->fd);
		return ps;
	}
	if (v->pool_count[up] >= rt.pool_max) {
		*err = EAGAIN;
		return NULL;
	}
	if (!v->cfg.upstream[up].set) {
		*err = EINVAL;
		return NULL;
	}
	struct pool_sock *ps = calloc(1, sizeof *ps);
	ps->up = up;
	ps->v = v;
	ps->owner = c;
	v->pool_count[up]++;
	*err = pool_connect(ps);
	if (*err) {
		ps->owner = NULL;
		pool_forget(ps);
		return NULL;
	}
	vlog("pool: miss on upstream %d, connecting", up);
	return ps;
}

void pool_bind(struct client *c, struct pool_sock *ps)
{
	c->bind[ps->up] = ps;
	ps->owner = c;
	if (!ps->connecting)
		set_peer(ps, c->cookie);   /* before the binding is published */
}

/* The owner is gone: back to the idle list if the socket is clean, else close it. */
void pool_release(struct pool_sock *ps)
{
	struct l7_conn u;

	ps->owner = NULL;
	int unusable = ps->dead || ps->connecting || pool_inflight(ps) ||
		       bpf_map_lookup_elem(ps->v->map_conns, &ps->cookie, &u) ||
		       (u.flags & (L7_CONN_NOREUSE | L7_CONN_CLOSE | L7_CONN_BROKEN)) || u.body != L7_BODY_NONE;
	if (unusable) {
		pool_forget(ps);
		return;
	}
	set_peer(ps, 0);
	ps->next_idle = ps->v->idle[ps->up];
	ps->v->idle[ps->up] = ps;
	vlog("pool: upstream %d socket fd %d idle", ps->up, ps->fd);
}

void pool_event(struct pool_sock *ps, uint32_t ev)
{
	if (ps->connecting && (ev & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
		struct client *c = ps->owner;
		int r = pool_ready(ps);
		if (r == -2) {
			epoll_ctl(rt.epfd, EPOLL_CTL_DEL, ps->fd, NULL);
			fds[ps->fd].kind = FD_NONE;
			close(ps->fd);
			ps->cookie = 0;
			if (!pool_connect(ps))
				return;
			r = -1;
		}
		if (r) {
			vlog("pool: connect to upstream %d failed", ps->up);
			if (c) {
				c->conn_err[ps->up] = 1;   /* the waiting request gets 502 */
				c->bind[ps->up] = NULL;
				ps->owner = NULL;
			}
			pool_forget(ps);
		} else {
			struct epoll_event e = { .events = EPOLLRDHUP, .data.fd = ps->fd };
			epoll_ctl(rt.epfd, EPOLL_CTL_MOD, ps->fd, &e);
			if (c)
				pool_bind(c, ps);
		}
		if (c)
			client_pump(c);
		return;
	}
	if (ev & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
		/* backend closed: a client still owed a response cannot get it any more */
		struct client *c = ps->owner;
		int owed = pool_inflight(ps) > 0;
		ps->dead = 1;
		vlog("pool: upstream %d closed the connection%s", ps->up, owed ? " with a response owed" : "");
		if (c && owed && !c->closing) {
			c->closing = 1;
			c->deadline = now_ms();
		}
		pool_forget(ps);
		if (c)
			client_pump(c);
	}
}

/* Send one slow-path piece. The l7_txq record (written while the socket is quiet) lets the
 * SK_MSG program apply the request's header mutations and the response parser know HEAD and
 * the response's mutations. */
int pool_send(struct pool_sock *ps, const char *buf, size_t len, const struct l7_pass *rec)
{
	if (rec && rec->kind == L7_PASS_HEAD) {
		struct l7_txq q;
		if (bpf_map_lookup_elem(ps->v->map_txq, &ps->cookie, &q))
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
		q.sent++;
		if (bpf_map_update_elem(ps->v->map_txq, &ps->cookie, &q, BPF_EXIST))
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

void pool_close_all(void)
{
	for (int i = 0; i < MAX_FDS; i++)
		if (fds[i].kind == FD_POOL)
			pool_forget(fds[i].p);
}

/* A version is unloaded: its pool sockets (all idle by then) go with it. */
void pool_close_version(struct version *v)
{
	for (int i = 0; i < MAX_FDS; i++)
		if (fds[i].kind == FD_POOL && ((struct pool_sock *)fds[i].p)->v == v)
			pool_forget(fds[i].p);
}
