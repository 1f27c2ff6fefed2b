/* Gateway mode's operations (struct mode_ops): its versions and how a retired one drains.
 *
 * A version's programs are attached to its own l7_clients and l7_upstreams when it is loaded,
 * its pool is its own, and a client stays in the version that accepted it for its whole life;
 * publishing is the core's pointer (version.c): the next accepted client goes into the new
 * version, every earlier one stays in the old.
 *
 * A retired version's clients are closed as soon as each is idle, the way HAProxy closes idle
 * keep-alive connections on a soft stop, but without racing the client's next request:
 *   1. idle: l7run handled every record, no response is owed or on its way, the data plane
 *      stands at a request boundary, every byte received went through the verdict, and the
 *      client has sent at least one request (client_idle, gateway_conn.c); remember the
 *      counters a new request would move (requests queued on its pool sockets, records
 *      passed, bytes);
 *   2. freeze: l7_ctl.done_seq gets a value the data plane never reaches, so a head parsed from
 *      now on is handed to l7run (L7_WHY_BEHIND) instead of being forwarded;
 *   3. DRAIN_FREEZE_MS later (a parser run that read the old l7_ctl has finished by then) look
 *      again: if a request slipped in, unfreeze and serve it, else send FIN (shutdown) and
 *      discard whatever still arrives (it was sent before the client saw the FIN and never
 *      reaches a backend, so the client may retry it: RFC 9112 9.3.1), close at its FIN.
 * Clients still busy after --drain-timeout are closed (evict). A version with no clients left
 * is unloaded: its pool closed, programs detached, object closed. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include "l7/attach.h"
#include "gateway.h"

#define DRAIN_FREEZE_MS  2      /* wait after freezing before the second look */
#define DRAIN_LINGER_MS  2000   /* after the FIN: wait this long for the client's */

static int gw_init(struct l7run *L)
{
	L->m = calloc(1, sizeof(struct gateway));
	return L->m ? 0 : 1;
}

/* Detach its programs and close its pool (the core closes the object). */
static void gw_unload(struct l7run *L, struct version *ver)
{
	struct gw_version *v = gwv(ver);

	(void)L;
	pool_fini(&v->pool);
	idle_unmap(v);
	for (int i = 0; i < v->n_progs; i++)
		bpf_prog_detach2(v->prog_fd[i], v->prog_map[i], v->prog_type[i]);
}

/* Attach the programs of l7/progs.def to the version's own SOCKHASHes, empty until it is
 * published. */
static int attach_programs(struct gw_version *v, char *err, size_t errlen)
{
	for (int i = 0; i < l7_n_progs; i++) {
		const struct prog_desc *d = &l7_progs[i];
		if (prog_is_mesh(d))
			continue;   /* mesh-mode programs: not loaded in gateway mode */
		struct bpf_program *p = bpf_object__find_program_by_name(v->v.obj, d->name);
		int type = l7_attach_type(d->section);
		int mfd = bpf_object__find_map_fd_by_name(v->v.obj, d->map);
		if (!p || type < 0 || mfd < 0) {
			snprintf(err, errlen, "object lacks program %s or its map %s (built with l7c --mode=mesh?)", d->name, d->map);
			return -1;
		}
		int fd = bpf_program__fd(p);
		if (bpf_prog_attach(fd, mfd, type, 0)) {
			snprintf(err, errlen, "attach %s to %s: %s (the kernel refused it although its probes passed: "
				 "`l7run --probe` lists what this kernel supports)", d->name, d->map, strerror(errno));
			return -1;
		}
		v->prog_fd[v->n_progs] = fd;
		v->prog_map[v->n_progs] = mfd;
		v->prog_type[v->n_progs] = type;
		v->n_progs++;
	}
	return 0;
}

/* The gateway's part of loading: its maps, its pool, its programs attached. */
static int gw_load(struct l7run *L, struct version *ver, char *err, size_t errlen)
{
	struct gw_version *v = gwv(ver);
	struct bpf_object *o = ver->obj;

	pool_init(&v->pool, L, &gw_pool_ops, v, ver->cfg.upstream, L->args.pool_max);
	v->map_rxq = v->map_rxport = -1;
	if ((v->map_clients = find_map(o, "l7_clients", err, errlen)) < 0 ||
	    (v->map_upstreams = find_map(o, "l7_upstreams", err, errlen)) < 0 ||
	    (v->map_conns = find_map(o, "l7_conns", err, errlen)) < 0 ||
	    (v->map_ctl = find_map(o, "l7_ctl", err, errlen)) < 0 ||
	    (v->map_pass = find_map(o, "l7_pass", err, errlen)) < 0 ||
	    (v->map_txq = find_map(o, "l7_txq", err, errlen)) < 0 ||
	    (v->map_txport = find_map(o, "l7_txport", err, errlen)) < 0 || find_map(o, "l7_stats", err, errlen) < 0)
		return -1;
	/* response edits: a rule's, and "Connection: close" for a request that closes */
	if ((v->map_rxq = find_map(o, "l7_rxq", err, errlen)) < 0 ||
	    (v->map_rxport = find_map(o, "l7_rxport", err, errlen)) < 0)
		return -1;
	idle_map(v, bpf_object__find_map_fd_by_name(o, "l7_idle"));
	return attach_programs(v, err, errlen);
}

/* Close every client of v now (drain timeout, or too many versions loaded). */
static void gw_evict(struct l7run *L, struct version *v)
{
	struct gateway *g = gw_of(L);

	for (int i = g->n_clients - 1; i >= 0; i--)
		if (&g->clients[i]->v->v == v)
			client_finish(L, g->clients[i]);
}

/* One step of closing c at a request boundary (see the top of this file). */
static void client_drain(struct l7run *L, struct client *c, uint64_t now)
{
	struct drain_snap s;

	if (c->closing || c->stalled)
		return;   /* closing anyway, or about to: gateway_conn.c finishes it */
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
	client_fin(L, c, DRAIN_LINGER_MS);
}

static void gw_drain(struct l7run *L, uint64_t now)
{
	struct gateway *g = gw_of(L);

	for (int i = g->n_clients - 1; i >= 0; i--)
		if (g->clients[i]->v->v.retired)
			client_drain(L, g->clients[i], now);
}

/* Slots whose run-time endpoint left its set (endpoints.c): no new request goes there, so
 * their idle pool sockets close now (parked ones too, unless the kernel has just taken one)
 * and the lent ones when their clients are done with them; once none is left the slot may
 * take another endpoint. */
static void gw_tick(struct l7run *L, uint64_t now)
{
	struct gateway *g = gw_of(L);

	clients_tick(L, now);
	idle_tick(L, now);
	if (now - g->retired_at < 100)
		return;
	g->retired_at = now;
	for (struct version *ver = L->cur; ver; ver = ver->older) {
		struct gw_version *v = gwv(ver);
		if (!ver->cfg.rt)
			continue;
		for (int s = 0; s < L7_MAX_UPSTREAMS; s++)
			if (ep_retired(&ver->cfg, s)) {
				idle_unpark(v, s);
				pool_close_idle(&v->pool, s);
				if (!v->pool.count[s])
					ep_drained(&ver->cfg, s);
			}
	}
}

/* The 1 ms tick runs only while something waits or drains, 5 ms while a new client may take a
 * pool socket in the kernel (l7run adopts it). */
static int gw_poll_ms(struct l7run *L)
{
	if (clients_waiting(L) || versions_draining(L))
		return 1;
	return clients_unbound(L) ? 5 : 200;
}

static void gw_close(struct l7run *L)
{
	if (L->m)
		clients_close_all(L);
}

static void gw_fini(struct l7run *L)
{
	struct gateway *g = gw_of(L);

	if (g)
		free(g->clients);
	free(g);
	L->m = NULL;
}

/* The serving version's maps --stats reads, and the decide chain's PROG_ARRAY (tests empty a
 * slot of it). */
static const struct pin_name gw_pins[] = {
	{ "l7_clients", "map_l7_clients" }, { "l7_upstreams", "map_l7_upstreams" }, { "l7_tail_gw", "map_l7_tail_gw" },
	{ NULL, NULL },
};

const struct mode_ops gateway_mode = {
	.name = "gateway", .tag = "l7run", .pin_prefix = "l7run", .pins = gw_pins,
	.load_mode = LOAD_GATEWAY, .version_size = sizeof(struct gw_version),
	.init = gw_init, .close = gw_close, .fini = gw_fini,
	/* versions: programs attached at load; retired ones drained, or evicted at the timeout */
	.load = gw_load, .unload = gw_unload, .drain = gw_drain, .evict = gw_evict,
	.accept = gw_accept, .tick = gw_tick, .poll_ms = gw_poll_ms,
};
