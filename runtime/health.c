/* Active health checks (the manifest's HEALTH records), as HAProxy's `check` and Envoy's
 * health_checks do: every `every_ms` l7run sends `GET PATH HTTP/1.1` to each endpoint of a
 * run-time set of the serving version, on a connection of its own (non-blocking, in the loop,
 * never blocking it: a connect or an answer that takes longer than `timeout_ms` is a failure).
 * A status in status_lo..status_hi passes; anything else fails (the status, a refused
 * connect, the timeout, an answer without a status line). What the checks find goes to
 * endpoints.c (ep_checked), which takes an endpoint out of its set after `unhealthy` failures
 * in a row and puts it back after `healthy` passes: the same rebuild of l7_lb_tab as passive
 * health's ejections. Run loop only; the metrics thread reads the counts under L->lock. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include "l7run.h"

enum { PROBE_IDLE, PROBE_CONNECTING, PROBE_SENT };

static const struct l7m_health *health_of_set(const struct config *cfg, int first)
{
	for (__u32 i = 0; i < cfg->mf->n_health; i++)
		if (cfg->mf->health[i].slot == (__u32)first)
			return &cfg->mf->health[i];
	return NULL;
}

static void probe_close(struct l7run *L, struct probe *p)
{
	if (p->fd >= 0)
		loop_close(L, p->fd);
	p->fd = -1;
	p->phase = PROBE_IDLE;
	p->got = 0;
}

/* One check is over: the next starts a period after this one started. */
static void probe_done(struct l7run *L, struct probe *p, enum ep_check r, const char *why)
{
	probe_close(L, p);
	p->next_at = p->started + p->every_ms;
	pthread_mutex_lock(&L->lock);   /* the metrics thread reads the rows */
	int changed = ep_checked(&L->env.ep, p->set, &p->addr, r, why, p->unhealthy, p->healthy);
	pthread_mutex_unlock(&L->lock);
	if (L->cur) {
		stat_bump(L->cur->stats, r == EP_CHECK_PASSED ? L7_STAT_HEALTH_PASSED : L7_STAT_HEALTH_FAILED);
		if (changed && r != EP_CHECK_PASSED)
			stat_bump(L->cur->stats, L7_STAT_HEALTH_DOWN);
	}
}

/* The status line: "HTTP/1.x NNN ..." */
static void probe_answer(struct l7run *L, struct probe *p)
{
	char *eol = memchr(p->buf, '\n', p->got);
	if (!eol && p->got < sizeof p->buf - 1)
		return;   /* more to come */
	p->buf[p->got < sizeof p->buf ? p->got : sizeof p->buf - 1] = 0;
	unsigned st = 0;
	char why[64];
	if (p->got < 12 || strncmp(p->buf, "HTTP/1.", 7) || sscanf(p->buf + 8, " %3u", &st) != 1 || st < 100 || st > 599) {
		probe_done(L, p, EP_CHECK_BAD_RESPONSE, "no HTTP status line");
		return;
	}
	snprintf(why, sizeof why, "status %u", st);
	probe_done(L, p, st >= p->status_lo && st <= p->status_hi ? EP_CHECK_PASSED : EP_CHECK_STATUS, why);
}

static void probe_event(struct l7run *L, struct io *io, uint32_t ev)
{
	struct probe *p = (struct probe *)io;

	if (p->phase == PROBE_CONNECTING) {
		int err = 0;
		socklen_t l = sizeof err;
		if (getsockopt(p->fd, SOL_SOCKET, SO_ERROR, &err, &l) || err) {
			probe_done(L, p, EP_CHECK_CONNECT, strerror(err ? err : errno));
			return;
		}
		if (!(ev & EPOLLOUT))
			return;
		char req[1400];
		int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: l7run-health\r\nConnection: close\r\n\r\n",
				 p->path, p->host);
		if (n >= (int)sizeof req || send(p->fd, req, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) != n) {
			probe_done(L, p, EP_CHECK_CONNECT, "the request could not be sent");
			return;
		}
		p->phase = PROBE_SENT;
		loop_watch(L, p->fd, &p->io, EPOLLIN | EPOLLRDHUP);
		return;
	}
	if (p->phase != PROBE_SENT)
		return;
	for (;;) {
		ssize_t n = recv(p->fd, p->buf + p->got, sizeof p->buf - 1 - p->got, MSG_DONTWAIT);
		if (n > 0) {
			p->got += (size_t)n;
			probe_answer(L, p);
			if (p->phase != PROBE_SENT || p->got >= sizeof p->buf - 1)
				return;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		/* closed or reset before a whole status line */
		probe_done(L, p, n == 0 ? EP_CHECK_BAD_RESPONSE : EP_CHECK_CONNECT,
			   n == 0 ? "closed before a status line" : strerror(errno));
		return;
	}
}

static void probe_start(struct l7run *L, struct probe *p, uint64_t now)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), one = 1;

	p->started = now;
	p->deadline = now + p->timeout_ms;
	if (fd < 0 || fd >= MAX_FDS) {
		if (fd >= 0)
			close(fd);
		p->next_at = now + p->every_ms;   /* l7run is out of fds: not the endpoint's fault */
		return;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	p->fd = fd;
	p->got = 0;
	p->phase = PROBE_CONNECTING;
	if (connect(fd, (const struct sockaddr *)&p->addr, sizeof p->addr) && errno != EINPROGRESS) {
		probe_done(L, p, EP_CHECK_CONNECT, strerror(errno));
		return;
	}
	loop_watch(L, fd, &p->io, EPOLLOUT | EPOLLRDHUP);
}

/* What slot k of set i should be checked as now (0: nothing to check there). */
static int probe_want(const struct config *cfg, int i, int k, const struct l7m_health *h, struct probe *want)
{
	if (!h || !ep_set_endpoint(cfg, i, k, &want->addr))
		return 0;
	snprintf(want->set, sizeof want->set, "%s", ep_set_name(cfg, i));
	snprintf(want->path, sizeof want->path, "%s", h->path.s);
	const struct l7m_runtime *r = i < (int)cfg->mf->n_runtime ? &cfg->mf->runtime[i] : NULL;
	char ip[INET_ADDRSTRLEN];
	inet_ntop(AF_INET, &want->addr.sin_addr, ip, sizeof ip);
	if (h->host.len)   /* as the policy says; else the name it gives, or a set's endpoint's address */
		snprintf(want->host, sizeof want->host, "%s", h->host.s);
	else if (r && r->source == L7M_RT_DNS)
		snprintf(want->host, sizeof want->host, "%.*s:%u", 200, r->name.s, r->port);
	else
		snprintf(want->host, sizeof want->host, "%s:%d", ip, ntohs(want->addr.sin_port));
	want->every_ms = h->every_ms;
	want->timeout_ms = h->timeout_ms;
	want->unhealthy = h->unhealthy;
	want->healthy = h->healthy;
	want->status_lo = h->status_lo;
	want->status_hi = h->status_hi;
	return 1;
}

static int same_probe(const struct probe *a, const struct probe *b)
{
	return a->addr.sin_addr.s_addr == b->addr.sin_addr.s_addr && a->addr.sin_port == b->addr.sin_port &&
	       !strcmp(a->set, b->set) && !strcmp(a->path, b->path) && !strcmp(a->host, b->host) && a->every_ms == b->every_ms &&
	       a->timeout_ms == b->timeout_ms && a->unhealthy == b->unhealthy && a->healthy == b->healthy &&
	       a->status_lo == b->status_lo && a->status_hi == b->status_hi;
}

void checks_init(struct l7run *L)
{
	for (int s = 0; s < L7_MAX_UPSTREAMS; s++)
		L->checks.p[s] = (struct probe){ .fd = -1 };
}

/* From the loop: follow the serving version's sets (an endpoint that came gets checked at
 * once, one that left is no longer), start the checks that are due, fail those overdue. */
void checks_tick(struct l7run *L, uint64_t now)
{
	const struct config *cfg = L->cur && !L->stopping ? &L->cur->cfg : NULL;
	int set[L7_MAX_UPSTREAMS], first[L7_MAX_UPSTREAMS];   /* of each slot: its set, the set's first slot */

	for (int s = 0; s < L7_MAX_UPSTREAMS; s++)
		set[s] = -1;
	for (int i = 0; cfg && i < ep_sets(cfg); i++) {
		int f, n = ep_set_slots(cfg, i, &f);
		for (int k = 0; k < n && f + k < L7_MAX_UPSTREAMS; k++)
			set[f + k] = i, first[f + k] = f;
	}
	for (int s = 0; s < L7_MAX_UPSTREAMS; s++) {
		struct probe *p = &L->checks.p[s], want = { .fd = -1 };
		int k = set[s] >= 0 ? s - first[s] : 0;
		if (set[s] < 0 || !probe_want(cfg, set[s], k, health_of_set(cfg, first[s]), &want)) {
			probe_close(L, p);
			p->on = 0;
			continue;
		}
		if (!p->on || !same_probe(p, &want)) {
			probe_close(L, p);
			want.io.ready = probe_event;
			want.on = 1;
			want.next_at = now + (uint64_t)k * 7;   /* not all in one turn */
			*p = want;
		}
		if (p->phase == PROBE_IDLE && now >= p->next_at)
			probe_start(L, p, now);
		else if (p->phase != PROBE_IDLE && now >= p->deadline)
			probe_done(L, p, EP_CHECK_TIMEOUT, p->phase == PROBE_CONNECTING ? "connect timed out" : "no answer in time");
	}
}

/* How long the loop may sleep before a check is due or overdue (-1: none). */
int checks_due_ms(struct l7run *L, uint64_t now)
{
	uint64_t next = UINT64_MAX;
	for (int s = 0; s < L7_MAX_UPSTREAMS; s++) {
		const struct probe *p = &L->checks.p[s];
		uint64_t at = p->phase == PROBE_IDLE ? p->next_at : p->deadline;
		if (p->on && at < next)
			next = at;
	}
	if (next == UINT64_MAX)
		return -1;
	return next <= now ? 0 : next - now > 1000 ? 1000 : (int)(next - now);
}

void checks_fini(struct l7run *L)
{
	for (int s = 0; s < L7_MAX_UPSTREAMS; s++) {
		probe_close(L, &L->checks.p[s]);
		L->checks.p[s].on = 0;
	}
}
