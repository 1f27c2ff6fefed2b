#define _GNU_SOURCE   /* accept4 */
/* Client connections: accept and insert into l7_clients, handle what the data plane passes
 * up (pool misses, denies, fallback, bad requests, requests held back to keep responses in
 * order), and reclaim: close after the queued responses have drained, never leave CLOSE_WAIT. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/sockios.h>
#include <linux/tcp.h>   /* struct tcp_info with tcpi_bytes_acked */
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "gateway.h"
#include "h2_refuse.h"

#define DRAIN_GRACE_MS  20    /* quiet this long before close: redirects still in the psock queue */
#define DRAIN_LIMIT_MS  3000  /* give up draining a closing client */
#define CLOSE_AFTER_LIMIT_MS 60000  /* ... one whose close request the kernel forwarded */
#define STALL_MS        1000  /* received, not parsed, nothing moving: stuck (client_check_stall) */
#define STALL_LOOK_MS   500   /* one TCP_INFO and one map lookup per client per look */
#define POOL_WAIT_MS    5000  /* a request waiting for a pool socket gets 503 after this */
#define HOLD_MAX        (1u << 20)  /* a held chunked request larger than this gets 413 */
#define CONNECT_TIMEOUT_MS 2000  /* a pool connect a request waits for fails after this */

static int client_add(struct gateway *g, struct client *c)
{
	if (g->n_clients == g->cap_clients) {
		int cap = g->cap_clients ? g->cap_clients * 2 : 256;
		struct client **cl = realloc(g->clients, sizeof *cl * (size_t)cap);
		if (!cl)
			return -1;
		g->clients = cl;
		g->cap_clients = cap;
	}
	c->idx = g->n_clients;
	g->clients[g->n_clients++] = c;
	return 0;
}

static void client_event(struct l7run *L, struct io *io, uint32_t ev);

/* What the client's SK_MSG needs to edit responses (a rule's, "Connection: close"): its l7_rxq, and its
 * 4-tuple -> cookie (SK_MSG programs cannot read a socket's cookie). Before the socket enters
 * l7_clients, so no byte is sent to it unseen. */
static int rx_setup(struct client *c)
{
	struct sockaddr_in peer, me;
	socklen_t pl = sizeof peer, ml = sizeof me;
	if (getpeername(c->fd, (struct sockaddr *)&peer, &pl) || getsockname(c->fd, (struct sockaddr *)&me, &ml))
		return -1;
	c->rx_key = (struct l7_rx_key){ peer.sin_addr.s_addr, ntohs(peer.sin_port), ntohs(me.sin_port) };
	struct l7_rxq q;
	memset(&q, 0, sizeof q);
	if (bpf_map_update_elem(c->v->map_rxq, &c->cookie, &q, BPF_ANY))
		return -1;
	c->rx_set = 1;
	return bpf_map_update_elem(c->v->map_rxport, &c->rx_key, &c->cookie, BPF_ANY);
}

static void client_forget_maps(struct client *c)
{
	bpf_map_delete_elem(c->v->map_conns, &c->cookie);
	bpf_map_delete_elem(c->v->map_ctl, &c->cookie);
	if (c->rx_set) {
		bpf_map_delete_elem(c->v->map_rxq, &c->cookie);
		bpf_map_delete_elem(c->v->map_rxport, &c->rx_key);
	}
}

/* New clients go into the newest version and stay with it. */
void gw_accept(struct l7run *L, int lfd, int service)
{
	struct gw_version *ver = gwv(L->cur);
	struct gateway *g = gw_of(L);

	for (;;) {
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC), one = 1;
		if (fd < 0)
			return;
		if (fd >= MAX_FDS) {
			close(fd);
			continue;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		struct timeval tv = { .tv_sec = 2 };
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
		struct client *c = calloc(1, sizeof *c);
		if (!c) {
			close(fd);
			continue;
		}
		c->io.ready = client_event;
		c->fd = fd;
		c->cookie = sock_cookie(fd);
		c->service = service;
		c->v = ver;
		c->next_seq = 1;
		struct l7_conn st;
		memset(&st, 0, sizeof st);
		st.role = L7_ROLE_CLIENT;
		st.service = (uint32_t)service;
		bpf_map_update_elem(ver->map_conns, &c->cookie, &st, BPF_ANY);
		ctl_publish(c);
		if (rx_setup(c)) {
			vlog(L, "client response-edit state: %s", strerror(errno));
			client_forget_maps(c);
			close(fd);
			free(c);
			continue;
		}
		uint64_t v = (uint64_t)fd;
		if (bpf_map_update_elem(ver->map_clients, &c->cookie, &v, BPF_NOEXIST)) {
			/* e.g. EOPNOTSUPP: the client already closed (CLOSE_WAIT) */
			vlog(L, "client insert failed: %s", strerror(errno));
			client_forget_maps(c);
			close(fd);
			free(c);
			continue;
		}
		/* data that arrived before the insert was never seen by the parser: re-fire */
		setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &one, sizeof one);
		if (client_add(g, c)) {
			client_forget_maps(c);
			close(fd);   /* out of l7_clients with it */
			free(c);
			continue;
		}
		ver->v.n_conns++;
		loop_watch(L, fd, &c->io, EPOLLIN | EPOLLRDHUP);
	}
}

/* l7run's answer, for upstream `up` when it could not reach it (-1: its own, a deny, a bad
 * request...); head_only: the request was HEAD, whose response has no body (RFC 9110 9.3.2) */
static void respond_why(struct client *c, int up, int status, int close_conn, int head_only, const char *why)
{
	char msg[800];
	int n = http_answer_why(msg, sizeof msg, status, close_conn, head_only, why);
	upstat_answer(c->v->v.upstat, up, status, (size_t)n);   /* before the client can read it */
	if (send(c->fd, msg, (size_t)n, MSG_NOSIGNAL) != n)
		c->closing = 1;
	else
		c->own_bytes += (uint64_t)n;
	if (close_conn)
		c->closing = 1;
}

static void respond_for(struct client *c, int up, int status, int close_conn, int head_only)
{
	respond_why(c, up, status, close_conn, head_only, NULL);
}

static void respond(struct client *c, int status, int close_conn, int head_only)
{
	respond_for(c, -1, status, close_conn, head_only);
}

/* Every response redirected to this client has reached its socket (see l7_conn.resp_bytes). */
static int client_delivered(struct client *c)
{
	struct l7_conn st;
	struct tcp_info ti;
	socklen_t tl = sizeof ti;
	int outq = 0;

	if (bpf_map_lookup_elem(c->v->map_conns, &c->cookie, &st))
		return 1;
	if (getsockopt(c->fd, IPPROTO_TCP, TCP_INFO, &ti, &tl) || ioctl(c->fd, SIOCOUTQ, &outq))
		return 1;
	int64_t edits = 0;   /* bytes the response edits added (negative: cut) */
	struct l7_rxq q;
	if (c->rx_set && !bpf_map_lookup_elem(c->v->map_rxq, &c->cookie, &q))
		edits = q.delta;
	return (int64_t)(ti.tcpi_bytes_acked + (uint64_t)outq) >= (int64_t)(st.resp_bytes + c->own_bytes) + edits;
}

/* No pool socket of this client owes a response and all responses are on the client's socket:
 * answering or sending now keeps the order. */
static int client_quiet(struct client *c)
{
	client_adopt(c);   /* a socket the kernel bound it to owes responses too */
	for (int i = 0; i < L7_MAX_UPSTREAMS; i++)
		if (c->bind[i] && pool_inflight(c->bind[i]))
			return 0;
	return client_delivered(c);
}

static int read_more(struct client *c, size_t want)
{
	if (c->in_len + want > c->in_cap) {
		c->in_cap = c->in_len + want + 4096;
		c->in = realloc(c->in, c->in_cap);
	}
	while (want) {
		ssize_t n = recv(c->fd, c->in + c->in_len, want, MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n == 0 ? -1 : 0;
		c->in_len += (size_t)n;
		want -= (size_t)n;
	}
	return 0;
}

static int send_request(struct client *c, const struct l7_pass *rec, const char *head, size_t hlen,
			const char *body, size_t blen);

static int hold_append(struct client *c, const char *buf, size_t len)
{
	if (c->held_len + len > HOLD_MAX) {
		respond(c, 413, 1, 0);
		return -1;
	}
	if (c->held_len + len > c->held_cap) {
		c->held_cap = (c->held_len + len) * 2;
		c->held = realloc(c->held, c->held_cap);
	}
	memcpy(c->held + c->held_len, buf, len);
	c->held_len += len;
	return 0;
}

/* A request head passed up: forward it (pool miss, order, fallback) or answer it. Returns 0
 * done, 1 wait and retry, -1 close the client. */
static int handle_head(struct client *c, const struct l7_pass *rec)
{
	if (!c->waiting && rec->why == L7_WHY_POOL_MISS)
		idle_missed(c->v, (int)rec->upstream);   /* once: not again while it waits */
	if (!client_quiet(c))
		return 1;   /* an earlier response is still on its way: keep the order */
	c->body = (rec->flags & L7_PASSF_LAST) ? BODY_NONE : BODY_DISCARD;
	if (rec->flags & L7_PASSF_CLOSE)
		c->close_after = 1;
	if (rec->verdict == L7_DENY) {
		const char *none = ep_empty_set(&c->v->v.cfg, rec->upstream);   /* a run-time set without endpoints */
		char why[L7M_NAME_MAX + 64];
		snprintf(why, sizeof why, "upstream %s has no endpoint", none ? none : "");
		respond_why(c, -1, rec->status ? (int)rec->status : 403, c->close_after, !!(rec->flags & L7_PASSF_HEADM),
			    none ? why : NULL);
		return 0;
	}
	int up = rec->verdict == L7_FALLBACK ? c->v->v.cfg.fallback : (int)rec->upstream;
	if (rec->verdict != L7_FORWARD && rec->verdict != L7_FALLBACK)
		up = -1;
	if (up < 0 || up >= L7_MAX_UPSTREAMS || !c->v->v.cfg.upstream[up].set) {
		respond(c, 502, c->close_after, !!(rec->flags & L7_PASSF_HEADM));
		return 0;
	}
	if ((rec->flags & L7_PASSF_CHUNK) && !(rec->flags & L7_PASSF_LAST)) {
		c->held_rec = *rec;
		c->held_len = c->held_done = 0;
		if (hold_append(c, c->in, rec->len))
			return -1;
		c->body = BODY_HOLD;
		return 0;
	}
	return send_request(c, rec, c->in, rec->len, NULL, 0);
}

/* RFC 9110 9.2.2: the methods whose request sent twice has the effect of one (POST, PATCH,
 * CONNECT and unknown methods are not) */
static int idempotent(const char *head, size_t len)
{
	static const char *const m[] = { "GET ", "HEAD ", "OPTIONS ", "PUT ", "DELETE ", "TRACE " };
	for (size_t i = 0; i < sizeof m / sizeof *m; i++)
		if (len >= strlen(m[i]) && !memcmp(head, m[i], strlen(m[i])))
			return 1;
	return 0;
}

/* The connect l7run made for this request to slot up failed (refused, unreachable, timed
 * out): no byte of it went. Another endpoint of its upstream, if the upstream retries, the
 * method is idempotent and one is left that health does not keep out; -1: answer 502. */
static int retry_to(struct client *c, const char *head, size_t hlen, int up)
{
	struct config *cfg = &c->v->v.cfg;
	int allowed = ep_retries(cfg, up);

	c->tried |= up < 32 ? 1u << up : 0;
	if (!allowed || c->ntried >= allowed)
		return -1;
	if (!idempotent(head, hlen)) {
		stat_bump(c->v->v.stats, L7_STAT_NO_RETRY);
		return -1;
	}
	int alt = ep_retry_slot(cfg, up, c->tried);
	if (alt < 0)
		return -1;
	c->ntried++;
	c->retry_up = alt + 1;
	__atomic_fetch_add(&cfg->upstream[up].retries, 1, __ATOMIC_RELAXED);   /* the metrics thread reads it */
	stat_bump(c->v->v.stats, L7_STAT_RETRIES);
	vlog(c->v->pool.L, "retry: %s failed, the request goes to %s", cfg->upstream[up].name, cfg->upstream[alt].name);
	return alt;
}

static int send_once(struct client *c, const struct l7_pass *rec, const char *head, size_t hlen, const char *body,
		     size_t blen);

/* Send a request (head, and a held body if any) on the client's pool socket for its
 * upstream. Returns 0 done, 1 wait and retry, -1 close the client. */
static int send_request(struct client *c, const struct l7_pass *rec, const char *head, size_t hlen,
			const char *body, size_t blen)
{
	int r = send_once(c, rec, head, hlen, body, blen);
	if (r != 1) {   /* sent or answered: the next request starts from the data plane's choice */
		c->retry_up = 0;
		c->tried = 0;
		c->ntried = 0;
	}
	return r;
}

static int send_once(struct client *c, const struct l7_pass *rec, const char *head, size_t hlen, const char *body,
		     size_t blen)
{
	int up = c->retry_up ? c->retry_up - 1 : rec->verdict == L7_FALLBACK ? c->v->v.cfg.fallback : (int)rec->upstream;
	if (c->conn_err[up]) {
		c->conn_err[up] = 0;
		if (retry_to(c, head, hlen, up) >= 0)
			return send_once(c, rec, head, hlen, body, blen);
		respond_for(c, up, 502, c->close_after, !!(rec->flags & L7_PASSF_HEADM));   /* the backend is down: fail fast */
		return 0;
	}
	struct pool_sock *ps = c->bind[up];
	if (!ps) {
		int err;
		ps = pool_take(&c->v->pool, up, c, &err);
		if (!ps) {
			if (err == EAGAIN && now_ms() - c->wait_since < POOL_WAIT_MS)
				return 1;   /* pool at its bound: wait for a socket to come back */
			if (err != EAGAIN && err != EMFILE && retry_to(c, head, hlen, up) >= 0)
				return send_once(c, rec, head, hlen, body, blen);
			/* at its bound: l7run's limit (503); out of fds: l7run's; else the connect
			 * failed at once: the upstream's */
			respond_for(c, err == EAGAIN || err == EMFILE ? -1 : up, err == EAGAIN ? 503 : 502, c->close_after,
				    !!(rec->flags & L7_PASSF_HEADM));
			return 0;
		}
		ps->since = now_ms();
		pool_bind(c, ps);
	}
	if (ps->connecting && now_ms() - ps->since >= CONNECT_TIMEOUT_MS) {
		/* the backend does not answer the SYN: a failed connect, for health and retries */
		c->bind[up] = NULL;
		ps->owner = NULL;
		pool_drop(ps);
		upstream_seen(c->v->pool.L, &c->v->v.cfg.upstream[up], 0, "connect timed out");
		c->conn_err[up] = 1;
		return send_once(c, rec, head, hlen, body, blen);
	}
	if (ps->connecting)
		return 1;
	if (pool_send(ps, head, hlen, rec) || (blen && pool_send(ps, body, blen, NULL))) {
		respond_for(c, up, 502, 1, 0);
		return -1;
	}
	ctl_publish(c);   /* the binding now serves the kernel path */
	if (!(rec->flags & L7_PASSF_LAST) && !blen) {
		c->body = BODY_TO_POOL;
		c->body_to = ps;
	}
	if (c->close_after)
		c->closing = 1;   /* drain the response, then close */
	return 0;
}

static void h2_send(void *ctx, const void *p, size_t n, int status)
{
	struct client *c = ctx;

	if (status)   /* l7run's own answer, counted before the client can read it */
		upstat_answer(c->v->v.upstat, -1, status, n);
	if (send(c->fd, p, n, MSG_NOSIGNAL) == (ssize_t)n)
		c->own_bytes += (uint64_t)n;
	else
		c->closing = 1;
}

static int handle(struct client *c, const struct l7_pass *rec)
{
	switch (rec->kind) {
	case L7_PASS_HEAD:
		return handle_head(c, rec);
	case L7_PASS_BODY:
		if (c->body == BODY_HOLD) {
			if (!c->held_done) {
				if (c->held_len + rec->len > HOLD_MAX && !client_quiet(c))
					return 1;   /* the 413 waits for earlier responses */
				if (hold_append(c, c->in, rec->len))
					return -1;
				c->held_done = !!(rec->flags & L7_PASSF_LAST);
				if (!c->held_done)
					return 0;
			}
			size_t hl = c->held_rec.head_len;
			int r = send_request(c, &c->held_rec, c->held, hl, c->held + hl, c->held_len - hl);
			if (r != 1) {
				c->held_len = c->held_done = 0;
				c->body = BODY_NONE;
			}
			return r;
		}
		if (c->body == BODY_TO_POOL && c->body_to && c->bind[c->body_to->up] == c->body_to &&
		    pool_send(c->body_to, c->in, rec->len, rec))
			return -1;
		if (rec->flags & L7_PASSF_LAST)
			c->body = BODY_NONE;
		return 0;
	case L7_PASS_BAD:
		if (!client_quiet(c))
			return 1;
		/* The parser refuses "PRI" as soon as it sees it, maybe before the line is whole, and
		 * the rest of a client's line did not reach l7run afterwards (a preface in two
		 * writes hung until the client gave up): what is here decides, from "PRI " on. */
		int h2 = h2_preface_at(c->in, c->in_len);
		if (h2 < 0 && read_more(c, 18 - c->in_len) == 0)
			h2 = h2_preface_at(c->in, c->in_len);
		if (h2 < 0)
			h2 = c->in_len >= 4;
		if (h2 > 0) {
			/* The streams whose requests came with the preface get their answers, then
			 * GOAWAY(HTTP_1_1_REQUIRED) and the close: what the client sent later did not
			 * reliably reach l7run (a large write, or grpcio's request after our SETTINGS,
			 * waited until the client gave up), so the connection is not kept. */
			struct h2_refuser *r = h2_refuser_new();
			stat_bump(c->v->v.stats, L7_STAT_H2_REFUSED);
			if (r && rec->len >= 24 && !h2_refuser_take(r, c->in, rec->len, h2_send, c)) {
				h2_refuser_goaway(r, h2_send, c);
			} else if (!r || rec->len < 24) {
				char msg[64];
				h2_send(c, msg, (size_t)h2_refusal(msg, sizeof msg), 0);
			}
			h2_refuser_free(r);
			c->closing = 1;
		} else {
			respond(c, rec->status ? (int)rec->status : 400, 1, 0);
		}
		return -1;
	}
	return -1;
}

void client_pump(struct client *c)
{
	struct l7_pass rec;

	for (;;) {
		struct l7_pass_key k = { .cookie = c->cookie, .seq = c->next_seq };
		if (bpf_map_lookup_elem(c->v->map_pass, &k, &rec))
			break;
		if (c->in_len < rec.len && read_more(c, rec.len - c->in_len) < 0) {
			c->closing = 1;
			break;
		}
		if (c->in_len < rec.len)
			break;
		if (!c->waiting)
			c->wait_since = now_ms();
		/* after the drain FIN: what the client sent before it saw the FIN is never
		 * forwarded (it sees the close before any response byte and retries it) */
		int r = c->drain == DRAIN_FIN ? 0 : handle(c, &rec);
		if (r == 1) {
			c->waiting = 1;
			break;
		}
		c->waiting = 0;
		memmove(c->in, c->in + rec.len, c->in_len - rec.len);
		c->in_len -= rec.len;
		bpf_map_delete_elem(c->v->map_pass, &k);
		c->next_seq++;
		ctl_publish(c);
		if (r < 0) {
			c->closing = 1;
			c->deadline = 0;
			break;
		}
	}
	if (c->closing && !c->deadline)
		c->deadline = now_ms() + DRAIN_LIMIT_MS;
}

void client_finish(struct l7run *L, struct client *c)
{
	struct gateway *g = gw_of(L);
	struct gw_version *v = c->v;
	struct l7_conn st;

	loop_close(L, c->fd);   /* leaves l7_clients with the fd */
	client_adopt(c);        /* what the kernel bound it to goes back with the rest */
	for (int i = 0; i < L7_MAX_UPSTREAMS; i++)
		if (c->bind[i])
			pool_give_back(c->bind[i]);
	if (!bpf_map_lookup_elem(v->map_conns, &c->cookie, &st))
		for (uint64_t s = c->next_seq; s <= st.pass_seq; s++) {
			struct l7_pass_key k = { .cookie = c->cookie, .seq = s };
			bpf_map_delete_elem(v->map_pass, &k);
		}
	client_forget_maps(c);
	v->v.n_conns--;
	g->clients[c->idx] = g->clients[--g->n_clients];
	g->clients[c->idx]->idx = c->idx;
	free(c->in);
	free(c->held);
	free(c);
}

/* The client sent its FIN (after ours, when draining: the socket is then in CLOSE). */
static int peer_closed(struct client *c)
{
	struct tcp_info ti;
	socklen_t tl = sizeof ti;

	if (getsockopt(c->fd, IPPROTO_TCP, TCP_INFO, &ti, &tl))
		return 1;
	/* TIME_WAIT 6, CLOSE 7, CLOSE_WAIT 8, LAST_ACK 9, CLOSING 11 (include/net/tcp_states.h;
	 * <netinet/tcp.h> has them but clashes with <linux/tcp.h>) */
	return ti.tcpi_state >= 6 && ti.tcpi_state != 10;
}

/* Close a closing client once nothing is owed and its queue has drained. */
static void client_try_close(struct l7run *L, struct client *c)
{
	uint64_t now = now_ms();
	int outq = 0;
	struct l7_pass rec;
	struct l7_pass_key k = { .cookie = c->cookie, .seq = c->next_seq };

	if (now >= c->deadline) {
		client_finish(L, c);
		return;
	}
	if (c->drain == DRAIN_FIN && !peer_closed(c))
		return;   /* closing before the client's own FIN would answer its late bytes with RST */
	ioctl(c->fd, SIOCOUTQ, &outq);
	if (!client_quiet(c) || outq > 0 || !bpf_map_lookup_elem(c->v->map_pass, &k, &rec)) {
		c->quiet_since = 0;
		return;
	}
	if (!c->quiet_since)
		c->quiet_since = now;
	else if (now - c->quiet_since >= DRAIN_GRACE_MS)
		client_finish(L, c);
}

static void client_event(struct l7run *L, struct io *io, uint32_t ev)
{
	struct client *c = (struct client *)io;

	if (ev & EPOLLERR) {
		client_finish(L, c);
		return;
	}
	if (ev & EPOLLIN)
		client_pump(c);
	if ((ev & (EPOLLRDHUP | EPOLLHUP)) && !c->closing) {
		c->closing = 1;
		c->deadline = now_ms() + DRAIN_LIMIT_MS;
	}
	if (c->closing)
		loop_watch(L, c->fd, &c->io, 0);   /* level-triggered EOF would fire forever: the tick finishes the drain */
}

/* Clients that may have just taken a pool socket in the kernel (none bound yet): l7run
 * should adopt it soon (gateway_pool.c idle_tick), and close the client after it if the
 * request said so. */
int clients_unbound(struct l7run *L)
{
	struct gateway *g = gw_of(L);

	for (int i = 0; i < g->n_clients; i++) {
		struct client *c = g->clients[i];
		int bound = 0;
		for (int u = 0; u < L7_MAX_UPSTREAMS && !bound; u++)
			bound = c->bind[u] != NULL;
		if (!bound && !c->closing)
			return 1;
	}
	return 0;
}

int clients_waiting(struct l7run *L)
{
	struct gateway *g = gw_of(L);

	for (int i = 0; i < g->n_clients; i++)
		if (g->clients[i]->waiting || g->clients[i]->closing)
			return 1;
	return 0;
}

/* Close c where the client may send its request again: the kernel already hands every new
 * head to l7run (frozen l7_ctl), FIN; what still arrives is discarded (client_pump: it was sent
 * before the client saw the FIN and never reached a backend, RFC 9112 9.3.1), the socket is
 * closed at the client's FIN or after linger_ms. */
void client_fin(struct l7run *L, struct client *c, uint64_t linger_ms)
{
	shutdown(c->fd, SHUT_WR);
	loop_unwatch(L, c->fd);   /* the tick finishes it */
	c->drain = DRAIN_FIN;
	c->closing = 1;
	c->deadline = now_ms() + linger_ms;
}

/* A kernel defect (docs/architecture.md, *Known kernel defect*) can leave a request in the
 * socket with the stream parser never woken, and the client waiting until it gives up.
 * Stuck: bytes received that the verdict has not disposed of, the parser not waiting for more
 * (parse_pending), nothing moved for STALL_MS. First freeze l7_ctl (a head the parser reads
 * from then on comes to l7run, which serves it and unfreezes), then, still stuck one look
 * later, close as client_fin does: the request never reached a backend, and HTTP clients send
 * it again on a fresh connection. */
static void client_check_stall(struct l7run *L, struct client *c, uint64_t now)
{
	struct l7_conn st;
	struct tcp_info ti;
	socklen_t tl = sizeof ti;

	if (c->closing || bpf_map_lookup_elem(c->v->map_conns, &c->cookie, &st) ||
	    getsockopt(c->fd, IPPROTO_TCP, TCP_INFO, &ti, &tl))
		return;
	if (st.flags & L7_CONN_LAST) {
		client_close_after(c);   /* a close request the kernel forwarded on its binding */
		return;
	}
	/* at a request boundary only: a body cut short would leave a pool socket mid-request */
	int stuck = !st.parse_pending && st.body == L7_BODY_NONE && ti.tcpi_bytes_received > st.rx_done &&
		    ti.tcpi_bytes_received == c->seen_rx && st.rx_done == c->seen_done;
	c->seen_rx = ti.tcpi_bytes_received;
	c->seen_done = st.rx_done;
	if (!stuck) {
		c->stuck_since = 0;
		if (c->stalled) {
			c->stalled = 0;   /* it moved after all */
			ctl_publish(c);
		}
		return;
	}
	if (!c->stuck_since)
		c->stuck_since = now;
	if (c->stalled) {
		fprintf(stderr, "l7run: client %llu: %llu received bytes not parsed for %llu ms (kernel defect), "
			"closed so that it sends the request again\n", (unsigned long long)c->cookie,
			(unsigned long long)(ti.tcpi_bytes_received - st.rx_done),
			(unsigned long long)(now - c->stuck_since));
		stat_bump(c->v->v.stats, L7_STAT_STALL_CLOSED);
		client_fin(L, c, DRAIN_LIMIT_MS);
	} else if (now - c->stuck_since >= STALL_MS) {
		c->stalled = 1;
		ctl_publish(c);
	}
}

/* A request said the connection closes after it (L7_CONN_LAST) and went by the kernel: l7run
 * closes the client once its responses are delivered, as after one it forwards itself, but
 * not as soon as a drain gives up: its body may still be on its way to the backend. */
void client_close_after(struct client *c)
{
	if (c->closing)
		return;
	c->close_after = 1;
	c->closing = 1;
	c->deadline = now_ms() + CLOSE_AFTER_LIMIT_MS;
}

/* From the run loop: requests waiting (for quiet, a connect or a pool socket), closing
 * clients, and every STALL_LOOK_MS a look for stuck ones. */
void clients_tick(struct l7run *L, uint64_t now)
{
	struct gateway *g = gw_of(L);

	for (int i = g->n_clients - 1; i >= 0; i--) {
		struct client *c = g->clients[i];
		if (c->waiting)
			client_pump(c);
		if (c->closing) {
			client_pump(c);
			client_try_close(L, c);
		}
	}
	if (now - g->watched_at < STALL_LOOK_MS)
		return;
	g->watched_at = now;
	for (int i = g->n_clients - 1; i >= 0; i--)
		client_check_stall(L, g->clients[i], now);
}

void clients_close_all(struct l7run *L)
{
	struct gateway *g = gw_of(L);

	while (g->n_clients)
		client_finish(L, g->clients[g->n_clients - 1]);
}

/* No request of this client is anywhere between its socket and its response: l7run has
 * handled every record, no pool socket owes it a response, every response reached its
 * socket, and the data plane stands at a request boundary. *snap gets what a request arriving
 * later would change (gateway.c client_drain compares two looks). */
int client_idle(struct client *c, struct drain_snap *snap)
{
	struct l7_conn st;

	if (c->closing || c->waiting || c->in_len || c->held_len || c->body != BODY_NONE || c->close_after)
		return 0;
	if (bpf_map_lookup_elem(c->v->map_conns, &c->cookie, &st))
		return 0;
	if (st.pass_seq != c->next_seq - 1 || st.body != L7_BODY_NONE || st.parse_pending ||
	    (st.flags & (L7_CONN_BROKEN | L7_CONN_LAST)))
		return 0;
	if (!client_quiet(c))
		return 0;
	/* Every byte the client sent has been through the verdict: none waits for the stream
	 * parser, which the kernel defers to a worker while the socket is locked (a timed second
	 * look alone missed it). And it has sent something: a client accepted just before the
	 * reload writes its first request a moment later, and a FIN before that first answer is a
	 * failed request to it, not an idle keep-alive close that it retries. */
	struct tcp_info ti;
	socklen_t tl = sizeof ti;
	if (getsockopt(c->fd, IPPROTO_TCP, TCP_INFO, &ti, &tl) || !st.rx_done || ti.tcpi_bytes_received != st.rx_done)
		return 0;
	memset(snap, 0, sizeof *snap);
	snap->pass_seq = st.pass_seq;
	snap->rx_done = st.rx_done;
	for (int i = 0; i < L7_MAX_UPSTREAMS; i++) {
		struct l7_txq q;
		if (c->bind[i] && !bpf_map_lookup_elem(c->v->map_txq, &c->bind[i]->cookie, &q))
			snap->sent[i] = q.sent;
	}
	return 1;
}
