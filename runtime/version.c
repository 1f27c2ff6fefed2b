/* Policy versions, for every mode: load (the shared steps), publish, retire, drain, unload.
 *
 * A version is an object with its own maps; its programs judge only the connections that
 * entered its own SOCKHASHes, and a connection stays in the version that took it for its whole
 * life. Publishing makes it the newest (L->cur): new connections go into it, every earlier one
 * stays where it is. So every connection, and every request on it, is judged by exactly one
 * fully installed version. The mode says what publishing takes besides (mesh: attaching its
 * sock_ops, filling its pool, switching enrollment), how a retired version's connections are
 * closed at request boundaries (gateway: drain), and how many it still judges (mesh: counted
 * in its maps). A retired version with none left is unloaded; one still busy after
 * --drain-timeout has its connections closed, where the mode can (evict).
 * The l7_reload map holds one row per loaded version, the serving one first. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include "l7run.h"

/* Load a version: the steps both modes share (read the object and its manifest, load and fill
 * it: policy.h; find the telemetry maps), then the mode's (its maps, its pool, attaching what it
 * attaches at load). The loader thread: touches nothing the loop uses. NULL with err set on
 * failure, and then nothing of it is left loaded. */
struct version *version_load(struct l7run *L, const char *path, const struct config *serving, char *err, size_t errlen)
{
	const struct mode_ops *m = L->mode;
	struct version *v = calloc(1, m->version_size);
	struct policy_file pf;

	if (!v) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	v->clock_fd = -1;
	snprintf(v->path, sizeof v->path, "%s", path);
	if (version_config(path, serving, &L->env.ov, &pf, &v->cfg, err, errlen)) {
		free(v);
		return NULL;
	}
	if (version_open(&L->env, &pf, path, m->load_mode, &v->cfg, &v->obj, &v->clock_fd, &v->load_us, err, errlen) ||
	    m->load(L, v, err, errlen)) {
		policy_free(&pf);
		version_drop(L, v);
		return NULL;
	}
	v->counters = bpf_object__find_map_fd_by_name(v->obj, "l7_counters");
	v->entry_hits = bpf_object__find_map_fd_by_name(v->obj, "l7_entry_hits");
	v->stats = bpf_object__find_map_fd_by_name(v->obj, "l7_stats");
	v->upstat = bpf_object__find_map_fd_by_name(v->obj, "l7_upstat");
	v->mem = object_mem(v->obj);
	if (alog_version_open(L, v, err, errlen)) {
		policy_free(&pf);
		version_drop(L, v);
		return NULL;
	}
	policy_free(&pf);
	return v;
}

void version_drop(struct l7run *L, struct version *v)
{
	alog_version_close(L, v);   /* what its programs logged until now */
	L->mode->unload(L, v);
	version_close(&L->env, &v->cfg, v->clock_fd, v->obj);
	free(v);
}

/* ---- the l7_reload map and the pins -------------------------------------------------------- */

void state_update(struct l7run *L)
{
	struct reload_version rows[MAX_VERSIONS];
	uint64_t now = now_ms();
	int n = 0;

	memset(rows, 0, sizeof rows);
	for (struct version *v = L->cur; v && n < MAX_VERSIONS; v = v->older, n++) {
		rows[n].id = (uint64_t)v->id;
		rows[n].clients = (uint64_t)(v->n_conns > 0 ? v->n_conns : 0);
		rows[n].mem = v->mem;
		rows[n].draining = (uint64_t)v->retired;
		rows[n].age_ms = now - v->published_at;
	}
	state_write(L, rows, n);
}

/* Besides the mode's own, the maps --stats and --metrics read. */
static const struct pin_name telemetry_pins[] = {
	{ "l7_stats", "map_l7_stats" }, { "l7_counters", "map_l7_counters" }, { "l7_upstat", "map_l7_upstat" },
	{ "l7_entry_hits", "map_l7_entry_hits" }, { NULL, NULL },
};

/* The pins name the serving version's maps and programs, each replaced in one step (never
 * missing for `l7run --stats`). */
static void version_pin(struct l7run *L, struct version *v)
{
	const struct pin_name *tabs[] = { telemetry_pins, L->mode->pins };

	if (!L->pin_dir[0])
		return;
	mkdir(L->pin_dir, 0700);
	pin_programs(L->pin_dir, v->obj, L->mode->load_mode == LOAD_MESH);
	for (int t = 0; t < 2; t++)
		for (const struct pin_name *p = tabs[t]; p->map; p++)
			pin_replace(L->pin_dir, bpf_object__find_map_fd_by_name(v->obj, p->map), p->pin);
}

/* Every pin l7run made: a missed one keeps the directory (rmdir fails). */
void versions_unpin(struct l7run *L)
{
	const struct pin_name *tabs[] = { telemetry_pins, L->mode->pins };
	char p[512];

	if (!L->pin_dir[0])
		return;
	unpin_programs(L->pin_dir);
	for (int t = 0; t < 2; t++)
		for (const struct pin_name *n = tabs[t]; n->map; n++) {
			snprintf(p, sizeof p, "%s/%s", L->pin_dir, n->pin);
			unlink(p);
		}
	snprintf(p, sizeof p, "%s/map_l7_reload", L->pin_dir);
	unlink(p);
	rmdir(L->pin_dir);
}

/* ---- the lifecycle ---------------------------------------------------------------------------- */

static void unload(struct l7run *L, struct version *v)
{
	struct version **pp = &L->cur;

	pthread_mutex_lock(&L->lock);
	while (*pp && *pp != v)
		pp = &(*pp)->older;
	if (*pp)
		*pp = v->older;
	L->n_versions--;
	pthread_mutex_unlock(&L->lock);
	int id = v->id;
	version_drop(L, v);
	say(L, "version %d unloaded (%d loaded)", id, L->n_versions);
}

static void refuse(struct l7run *L, struct version *v, uint64_t t_signal, const char *why)
{
	if (t_signal) {
		L->reload.reloads--;
		L->reload.failed++;
	}
	say(L, "reload refused: %s", why);
	version_drop(L, v);
	state_update(L);
}

/* Make v the newest version (t_signal: the SIGHUP it answers, 0 for the first). */
void version_publish(struct l7run *L, struct version *v, uint64_t t_signal)
{
	struct version *old = L->cur;
	char err[512];
	int old_conns = 0;

	if (L->n_versions >= MAX_VERSIONS) {
		struct version *o = L->cur;
		while (o->older)
			o = o->older;
		if (!L->mode->evict) {
			snprintf(err, sizeof err, "%d versions are loaded and each still judges connections (they are "
				 "unloaded when their connections close)", L->n_versions);
			refuse(L, v, t_signal, err);
			return;
		}
		/* the oldest draining version makes room: its remaining connections are closed */
		say(L, "%d versions loaded: closing the %d connection(s) of version %d early", L->n_versions, o->n_conns,
		    o->id);
		L->mode->evict(L, o);
		unload(L, o);
	}
	v->id = L->next_id + 1;
	if (L->mode->publish && L->mode->publish(L, v, old, err, sizeof err)) {
		refuse(L, v, t_signal, err);
		return;
	}
	L->next_id = v->id;
	if (v->clock_fd >= 0)
		jwt_clock_watch(&L->env.jwt, v->clock_fd, 1);
	ident_watch(&L->env.ident, &v->cfg, 1);
	alog_version_watch(L, v);
	ep_watch(&L->env.ep, &v->cfg, 1);
	pthread_mutex_lock(&L->lock);
	v->older = old;
	L->cur = v;   /* from here on the mode puts new connections into v */
	L->n_versions++;
	pthread_mutex_unlock(&L->lock);
	v->published_at = now_ms();
	if (t_signal)
		L->reload.last_us = now_us() - t_signal;
	if (old) {
		old_conns = old->n_conns > 0 ? old->n_conns : 0;
		old->retired = 1;
		old->retired_at = now_ms();
		if (L->mode->count)
			old->n_conns = -1;   /* not known until counted after its retirement */
	}
	version_pin(L, v);
	state_update(L);
	if (!old) {
		say(L, "version %d: policy %s, %llu KiB of maps", v->id, v->cfg.policy, (unsigned long long)(v->mem >> 10));
		return;
	}
	char step[64] = "";
	if (L->mode->publish_step)
		snprintf(step, sizeof step, ", %s %.1f ms", L->mode->publish_step, v->publish_us / 1000.0);
	say(L, "reload: version %d (policy %s, %llu KiB of maps) serving %.1f ms after the %s (verifier %.1f ms%s); "
	    "version %d draining %d connection(s), %d version(s) loaded", v->id, v->cfg.policy,
	    (unsigned long long)(v->mem >> 10), L->reload.last_us / 1000.0,
	    L->args.watch ? "change (l7c's build included)" : "signal", v->load_us / 1000.0, step, old->id,
	    old_conns, L->n_versions);
}

/* From the loop: close what retired versions still serve, unload those with nothing left;
 * every second the rows of l7_reload, for --stats. */
void versions_tick(struct l7run *L, uint64_t now)
{
	const struct mode_ops *m = L->mode;
	int full = now - L->stated_at >= 1000, changed = 0, draining = versions_draining(L);

	if (m->look_ms && now - L->looked_at < m->look_ms)
		return;
	L->looked_at = now;
	for (struct version *v = draining ? L->cur->older : NULL; v && m->evict; v = v->older)
		if (now - v->retired_at >= L->args.drain_ms && v->n_conns > 0) {
			say(L, "version %d: drain timeout, closing %d busy connection(s)", v->id, v->n_conns);
			m->evict(L, v);
		}
	if (draining && m->drain)
		m->drain(L, now);
	for (struct version *v = L->cur, *next; v; v = next) {
		next = v->older;
		if (m->count && (v->retired || full)) {
			int n = m->count(L, v);
			if (n >= 0) {
				changed |= n != v->n_conns;
				v->n_conns = n;
			}
		}
		if (v->retired && !v->n_conns) {
			unload(L, v);
			changed = 1;
		}
	}
	if (changed || draining || full) {
		state_update(L);
		L->stated_at = now;
	}
}

/* A version is retired: replaced by a newer one, or all of them when stopping (--grace-period). */
int versions_draining(struct l7run *L)
{
	return L->cur && (L->cur->older || L->cur->retired);
}

void versions_unload_all(struct l7run *L)
{
	while (L->cur)
		unload(L, L->cur);
}

/* --metrics-listen: the serving version's counters (its maps stay open while the lock is held);
 * -1 (503) before the first is published. */
int serving_metrics(void *arg, FILE *out)
{
	struct l7run *L = arg;

	pthread_mutex_lock(&L->lock);
	struct version *v = L->cur;
	int rc = v ? write_metrics(out, v->counters, v->entry_hits, v->stats, v->upstat, L->reload.state_fd, &v->cfg) : -1;
	pthread_mutex_unlock(&L->lock);
	return rc;
}

/* /healthz: the loop turns (once it runs: a first build and load before take their time);
 * /readyz: a version serves (published, its services listened on, the loop running) and
 * l7run is not stopping. The metrics thread. */
int serving_health(void *arg, int ready, char *why, size_t n)
{
	struct l7run *L = arg;
	uint64_t beat = __atomic_load_n(&L->beat, __ATOMIC_RELAXED), now = now_ms();

	if (!ready) {
		if (!__atomic_load_n(&L->looping, __ATOMIC_RELAXED) || now - beat < 30000)
			return 0;
		snprintf(why, n, "the event loop has not turned for %.1f s", (now - beat) / 1000.0);
		return -1;
	}
	pthread_mutex_lock(&L->lock);
	int serving = L->cur != NULL, id = L->cur ? L->cur->id : 0;
	pthread_mutex_unlock(&L->lock);
	serving &= __atomic_load_n(&L->looping, __ATOMIC_RELAXED);   /* listening, and in the loop */
	if (__atomic_load_n(&L->stopping, __ATOMIC_RELAXED))
		snprintf(why, n, "stopping");
	else if (!serving)
		snprintf(why, n, "no policy serves yet");
	else
		snprintf(why, n, "ok: version %d serves", id);
	return serving && !L->stopping ? 0 : -1;
}
