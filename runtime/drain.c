/* Gateway versions: publish a loaded version, retire the one before it, drain and unload.
 *
 * A version is an object with its own maps: its programs are attached to its own l7_clients
 * and l7_upstreams, its pool is its own, and a client stays in the version that accepted it
 * for its whole life. Publishing is one pointer (rt.cur): the next accepted client goes into
 * the new version, every earlier one stays in the old. So every connection, and every request
 * on it, is judged by exactly one fully installed version.
 *
 * A retired version's clients are closed as soon as each is idle, the way HAProxy closes idle
 * keep-alive connections on a soft stop, but without racing the client's next request:
 *   1. idle: l7run handled every record, no response is owed or on its way, the data plane
 *      stands at a request boundary, every byte received went through the verdict, and the
 *      client has sent at least one request (client_idle, conn.c); remember the counters a new
 *      request would move (requests queued on its pool sockets, records passed, bytes);
 *   2. freeze: l7_ctl.done_seq gets a value the data plane never reaches, so a head parsed from
 *      now on is handed to l7run (L7_WHY_BEHIND) instead of being forwarded;
 *   3. DRAIN_FREEZE_MS later (a parser run that read the old l7_ctl has finished by then) look
 *      again: if a request slipped in, unfreeze and serve it, else send FIN (shutdown) and
 *      discard whatever still arrives (it was sent before the client saw the FIN and never
 *      reaches a backend, so the client may retry it: RFC 9112 9.3.1), close at its FIN.
 * Clients still busy after --drain-timeout are closed. A version with no clients left is
 * unloaded: its pool closed, programs detached, object closed. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include "l7run.h"

#define DRAIN_FREEZE_MS  2      /* wait after freezing before the second look */
#define DRAIN_LINGER_MS  2000   /* after the FIN: wait this long for the client's */

int gateway_load(const char *path, char *err, size_t errlen, void **out)
{
	*out = version_load(path, err, errlen);
	return *out ? 0 : -1;
}

void gateway_discard(void *v)
{
	version_unload(v);
}

static void state_update(void)
{
	struct reload_version rows[MAX_VERSIONS];
	uint64_t now = now_ms();
	int n = 0;

	memset(rows, 0, sizeof rows);
	for (struct version *v = rt.cur; v && n < MAX_VERSIONS; v = v->older, n++) {
		rows[n].id = (uint64_t)v->id;
		rows[n].clients = (uint64_t)v->n_clients;
		rows[n].mem = v->mem;
		rows[n].draining = (uint64_t)v->retired;
		rows[n].age_ms = now - v->published_at;
	}
	state_write(rows, n);
}

static void unload(struct version *v)
{
	struct version **pp = &rt.cur;

	pthread_mutex_lock(&rt.lock);
	while (*pp && *pp != v)
		pp = &(*pp)->older;
	if (*pp)
		*pp = v->older;
	rt.n_versions--;
	pthread_mutex_unlock(&rt.lock);
	int id = v->id;
	pool_close_version(v);
	version_unload(v);
	fprintf(stderr, "l7run: version %d unloaded (%d loaded)\n", id, rt.n_versions);
}

/* Close every client of v now (drain timeout, or too many versions loaded). */
static void drop_clients(struct version *v)
{
	int n;
	struct client **cl = client_list(&n);

	for (int i = n - 1; i >= 0; i--)
		if (cl[i]->v == v)
			client_finish(cl[i]);
}

void gateway_publish(void *p, uint64_t t_signal)
{
	struct version *v = p, *old = rt.cur;

	if (rt.n_versions >= MAX_VERSIONS) {
		/* the oldest draining version makes room: its remaining clients are closed */
		struct version *o = rt.cur;
		while (o->older)
			o = o->older;
		fprintf(stderr, "l7run: %d versions loaded: closing the %d connection(s) of version %d early\n",
			rt.n_versions, o->n_clients, o->id);
		drop_clients(o);
		unload(o);
	}
	v->id = ++rt.next_id;
	v->published_at = now_ms();
	if (v->clock_fd >= 0)
		jwt_clock_watch(v->clock_fd, 1);
	ident_watch(&v->cfg, 1);
	pthread_mutex_lock(&rt.lock);
	v->older = rt.cur;
	rt.cur = v;   /* from here on accept_clients puts new clients into v */
	rt.n_versions++;
	pthread_mutex_unlock(&rt.lock);
	if (t_signal)
		RC.last_us = now_us() - t_signal;
	if (old) {
		old->retired = 1;
		old->retired_at = now_ms();
	}
	version_pin(v);
	state_update();
	if (old)
		fprintf(stderr, "l7run: reload: version %d (policy %s, %llu KiB of maps) serving %.1f ms after the "
			"signal (verifier %.1f ms); version %d draining %d connection(s)\n", v->id, v->cfg.policy,
			(unsigned long long)(v->mem >> 10), RC.last_us / 1000.0, v->load_us / 1000.0, old->id,
			old->n_clients);
	else
		fprintf(stderr, "l7run: version %d: policy %s, %llu KiB of maps\n", v->id, v->cfg.policy,
			(unsigned long long)(v->mem >> 10));
}

/* One step of closing c at a request boundary (see the top of this file). */
static void client_drain(struct client *c, uint64_t now)
{
	struct drain_snap s;

	if (c->closing || c->stalled)
		return;   /* closing anyway, or about to: conn.c finishes it */
	if (c->drain == DRAIN_NONE) {
		if (!client_idle(c, &c->snap))
			return;
		c->drain = DRAIN_FROZEN;
		c->drain_at = now;
		ctl_publish(c);
		return;
	}
	if (c->drain != DRAIN_FROZEN || now - c->drain_at < DRAIN_FREEZE_MS)
		return;
	if (!client_idle(c, &s) || memcmp(&s, &c->snap, sizeof s)) {
		c->drain = DRAIN_NONE;   /* a request came: serve it, try again once it is answered */
		ctl_publish(c);
		return;
	}
	client_fin(c, DRAIN_LINGER_MS);
}

/* From the run loop: drain retired versions, unload the empty ones. */
void gateway_retire_tick(void)
{
	static uint64_t last_state;
	uint64_t now = now_ms();
	int n, any = 0;

	for (struct version *v = rt.cur ? rt.cur->older : NULL; v; v = v->older) {
		any = 1;
		if (now - v->retired_at >= rt.drain_ms && v->n_clients) {
			fprintf(stderr, "l7run: version %d: drain timeout, closing %d busy connection(s)\n", v->id,
				v->n_clients);
			drop_clients(v);
		}
	}
	if (any) {
		struct client **cl = client_list(&n);
		for (int i = n - 1; i >= 0; i--)
			if (cl[i]->v->retired)
				client_drain(cl[i], now);
		for (struct version *v = rt.cur->older, *next; v; v = next) {
			next = v->older;
			if (!v->n_clients)
				unload(v);
		}
	}
	if (any || now - last_state >= 1000) {
		state_update();
		last_state = now;
	}
}

int gateway_draining(void)
{
	return rt.cur && rt.cur->older;
}

void gateway_unload_all(void)
{
	while (rt.cur)
		unload(rt.cur);
}
