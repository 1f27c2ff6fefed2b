/* Gateway mode's pool sockets (the machinery is pool.c): each in its version's l7_upstreams,
 * opened lazily on a pool miss, bounded per upstream (--pool-max), lent to one client while it
 * is connected (so pairing is by construction), idle again when it leaves. The data plane finds
 * a socket by its cookie (l7_conns, l7_txq) and by its local port (l7_txport); a client's
 * l7_ctl names the sockets it is bound to. */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <bpf/bpf.h>
#include "gateway.h"

static struct gw_version *ver_of(struct pool_sock *ps)
{
	return ps->pool->ctx;
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
	return 0;
}

/* The connect a client waits for finished: bind it, and let the client send. */
static void ready(struct pool *p, void *owner, struct pool_sock *ps)
{
	(void)p;
	if (owner) {
		pool_bind(owner, ps);
		client_pump(owner);
	}
}

/* A socket lent to a client is gone: the waiting request gets a 502 (a failed connect), or a
 * client still owed a response on it cannot get it any more. */
static void lost(struct pool *p, void *owner, struct pool_sock *ps, enum pool_loss why, uint64_t owed)
{
	struct client *c = owner;

	(void)p;
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
