/* Mesh-mode versions: load (in the loader thread, reload.c), publish, retire, unload.
 *
 * Each version is an object with its own sock_ops (a bpf_link of its own on the cgroup), its
 * own SK_MSG on its own l7_mesh_socks and its own pool. Several sock_ops run on the cgroup,
 * oldest first, and a socket goes into exactly one version (l7/mesh.h, enum
 * l7_mesh_addr_kind): the one in L7_MESH_ENROLL mode takes new sockets, l7run's end of a
 * service connection joins the client's end, pool connections are claimed by address.
 * Publishing version n:
 *   1. attach its sock_ops, mode RETIRED: it takes only what is claimed for it;
 *   2. open its pool, each connection claimed for it (the ENROLL version leaves them);
 *   3. n's mode ENROLL, then the previous version's RETIRED. In between both would take a
 *      new socket: the older runs first and wins, the newer's insert fails (EBUSY: a socket
 *      has one SK_MSG program) and it keeps no state. No moment where nobody takes it.
 * A socket keeps the SK_MSG program it got for its whole life, so each connection is judged
 * by one version from its first request to its last. Application sockets cannot be closed by
 * l7run, and taking one out of its map would let its requests pass unjudged: a retired
 * version stays loaded until no application socket is left in it (its CLIENT entries: its own
 * sock_ops deletes them when they close), then its pool is closed and it is unloaded. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <bpf/bpf.h>
#include "mesh.h"

static int map(struct mesh_ver *v, const char *name, char *err, size_t errlen)
{
	int fd = bpf_object__find_map_fd_by_name(v->obj, name);
	if (fd < 0)
		snprintf(err, errlen, "object has no map %s", name);
	return fd;
}

void mesh_set_mode(struct mesh_ver *v, uint32_t mode)
{
	struct l7_mesh_addr_key k = { 0, L7_MESH_MODE_PORT };
	struct l7_mesh_addr val = { L7_MA_MODE, mode };

	bpf_map_update_elem(v->addrs, &k, &val, BPF_ANY);
}

static void unload(struct mesh_ver *v)
{
	if (v->sockops_link)
		bpf_link__destroy(v->sockops_link);
	if (v->msg_attached)
		bpf_prog_detach2(v->msg_prog, v->socks, BPF_SK_MSG_VERDICT);
	version_close(&v->cfg, v->clock_fd, v->obj);
	free(v);
}

void mesh_discard(void *v)
{
	unload(v);
}

/* Load a version (the loader thread: nothing here touches what the run loop uses). It is
 * complete when this returns: keys, rule tables, endpoints, mode RETIRED, SK_MSG attached to
 * its own (empty) sockhash. Its sock_ops is attached by mesh_publish. */
int mesh_load(const char *path, char *err, size_t errlen, void **out)
{
	struct mesh_ver *v = calloc(1, sizeof *v);
	struct policy_file pf;

	*out = NULL;
	v->clock_fd = -1;
	for (int i = 0; i < L7_MESH_POOL_SIZE; i++)
		v->slot[i].fd = -1;
	snprintf(v->path, sizeof v->path, "%s", path);
	if (version_config(path, M.cur ? &M.cur->cfg : NULL, NULL, &pf, &v->cfg, err, errlen)) {
		free(v);
		return -1;
	}
	if (version_open(&pf, path, LOAD_MESH, &v->cfg, &v->obj, &v->clock_fd, &v->load_us, err, errlen))
		goto fail;
	if ((v->socks = map(v, "l7_mesh_socks", err, errlen)) < 0 || (v->conns = map(v, "l7_mesh_conns", err, errlen)) < 0 ||
	    (v->addrs = map(v, "l7_mesh_addrs", err, errlen)) < 0 || (v->pool = map(v, "l7_mesh_pool", err, errlen)) < 0 ||
	    (v->pass = map(v, "l7_mesh_pass", err, errlen)) < 0 || (v->ctl = map(v, "l7_mesh_ctl", err, errlen)) < 0)
		goto fail;
	v->stats = bpf_object__find_map_fd_by_name(v->obj, "l7_stats");
	v->upstat = bpf_object__find_map_fd_by_name(v->obj, "l7_upstat");

	/* which endpoints matter, before anything can be enrolled */
	mesh_set_mode(v, L7_MESH_RETIRED);
	for (int i = 0; i < v->cfg.n_services; i++) {
		struct l7_mesh_addr_key k = { v->cfg.service[i].addr.sin_addr.s_addr, ntohs(v->cfg.service[i].addr.sin_port) };
		struct l7_mesh_addr a = { L7_MA_SERVICE, (uint32_t)i };
		bpf_map_update_elem(v->addrs, &k, &a, BPF_ANY);
	}
	for (int i = 0; i < L7_MESH_UPSTREAMS; i++) {
		if (!v->cfg.upstream[i].set)
			continue;
		struct l7_mesh_addr_key k = { v->cfg.upstream[i].addr.sin_addr.s_addr, ntohs(v->cfg.upstream[i].addr.sin_port) };
		struct l7_mesh_addr a = { L7_MA_UPSTREAM, (uint32_t)i };
		bpf_map_update_elem(v->addrs, &k, &a, BPF_ANY);
	}
	if (v->cfg.fallback >= 0) {
		struct l7_mesh_addr_key k = { 0, 0 };   /* the fallback proxy's upstream index */
		struct l7_mesh_addr a = { L7_MA_UPSTREAM, (uint32_t)v->cfg.fallback };
		bpf_map_update_elem(v->addrs, &k, &a, BPF_ANY);
	}

	struct bpf_program *msg = bpf_object__find_program_by_name(v->obj, L7_MESH_PROG_MSG);
	struct bpf_program *ops = bpf_object__find_program_by_name(v->obj, L7_MESH_PROG_SOCKOPS);
	if (!msg || !ops) {
		snprintf(err, errlen, "%s has no mesh programs (built by an older l7c?)", path);
		goto fail;
	}
	v->msg_prog = bpf_program__fd(msg);
	if (bpf_prog_attach(v->msg_prog, v->socks, BPF_SK_MSG_VERDICT, 0)) {
		snprintf(err, errlen, "attach sk_msg: %s", strerror(errno));
		goto fail;
	}
	v->msg_attached = 1;
	v->mem = object_mem(v->obj);
	policy_free(&pf);
	*out = v;
	return 0;
fail:
	policy_free(&pf);
	unload(v);
	return -1;
}

/* The pins name the serving version's maps and programs (on), or are removed (off, v unused):
 * the mesh maps for tests and bpftool, l7_stats, l7_counters and the programs for l7run
 * --stats and --metrics, l7_tail_mesh for the chain of a split SK_MSG program (tests empty a
 * slot), l7_mesh_hold for the heads clients left unfinished (tests check none stays). */
void mesh_pin(struct mesh_ver *v, int on)
{
	static const char *names[] = { "l7_mesh_socks", "l7_mesh_conns", "l7_mesh_pool", "map_l7_stats",
				       "map_l7_counters", "l7_tail_mesh", "map_l7_upstat", "map_l7_entry_hits",
				       "l7_mesh_hold" };
	enum { N = sizeof names / sizeof names[0] };
	char p[512];

	if (on) {
		int fds[N] = { v->socks, v->conns, v->pool, v->stats,
			       bpf_object__find_map_fd_by_name(v->obj, "l7_counters"),
			       bpf_object__find_map_fd_by_name(v->obj, "l7_tail_mesh"), v->upstat,
			       bpf_object__find_map_fd_by_name(v->obj, "l7_entry_hits"),
			       bpf_object__find_map_fd_by_name(v->obj, "l7_mesh_hold") };
		mkdir(M.pin_dir, 0700);
		for (int i = 0; i < N; i++)
			pin_replace(M.pin_dir, fds[i], names[i]);
		pin_programs(M.pin_dir, v->obj, 1);
		return;
	}
	for (int i = 0; i < N; i++) {
		snprintf(p, sizeof p, "%s/%s", M.pin_dir, names[i]);
		unlink(p);
	}
	unpin_programs(M.pin_dir);
	snprintf(p, sizeof p, "%s/map_l7_reload", M.pin_dir);
	unlink(p);
	rmdir(M.pin_dir);
}

/* Application sockets in v: its CLIENT entries (its sock_ops deletes them when they close). */
static int app_sockets(struct mesh_ver *v)
{
	struct l7_mesh_key k, next;
	struct l7_mesh_conn c;
	void *prev = NULL;
	int n = 0;

	while (bpf_map_get_next_key(v->conns, prev, &next) == 0) {
		k = next;
		prev = &k;
		if (!bpf_map_lookup_elem(v->conns, &k, &c) && c.role == L7_MR_CLIENT)
			n++;
	}
	return n;
}

static void state_update(void)
{
	struct reload_version rows[MAX_VERSIONS];
	uint64_t now = mesh_now_ms();
	int n = 0;

	memset(rows, 0, sizeof rows);
	for (struct mesh_ver *v = M.cur; v && n < MAX_VERSIONS; v = v->older, n++) {
		rows[n].id = (uint64_t)v->id;
		rows[n].clients = (uint64_t)v->n_app;
		rows[n].mem = v->mem;
		rows[n].draining = (uint64_t)v->retired;
		rows[n].age_ms = now - v->published_at;
	}
	state_write(rows, n);
}

static void drop(struct mesh_ver *v)
{
	struct mesh_ver **pp = &M.cur;

	pthread_mutex_lock(&rt.lock);
	while (*pp && *pp != v)
		pp = &(*pp)->older;
	if (*pp)
		*pp = v->older;
	pthread_mutex_unlock(&rt.lock);
	for (int i = M.n_clients - 1; i >= 0; i--)
		if (M.client[i]->v == v)
			mesh_client_close(M.client[i]);
	mesh_pool_close_all(v);
	M.vtab[v->tix] = NULL;
	M.n_versions--;
	int id = v->id;
	unload(v);
	fprintf(stderr, "l7run[mesh]: version %d unloaded (%d loaded)\n", id, M.n_versions);
}

void mesh_publish(void *p, uint64_t t_signal)
{
	struct mesh_ver *v = p, *old = M.cur;
	int tix = -1;

	for (int i = 0; i < MAX_VERSIONS && tix < 0; i++)
		if (!M.vtab[i])
			tix = i;
	if (tix < 0) {
		/* every loaded version still judges application sockets: nothing can be let go */
		if (t_signal) {
			RC.reloads--;
			RC.failed++;
		}
		fprintf(stderr, "l7run[mesh]: reload refused: %d versions are loaded and each still judges "
			"connections (they are unloaded when their sockets close)\n", M.n_versions);
		unload(v);
		state_update();
		return;
	}
	v->sockops_link = bpf_program__attach_cgroup(bpf_object__find_program_by_name(v->obj, L7_MESH_PROG_SOCKOPS),
						     M.cgfd);
	if (!v->sockops_link) {
		if (t_signal) {
			RC.reloads--;
			RC.failed++;
		}
		fprintf(stderr, "l7run[mesh]: reload refused: attach sock_ops to %s: %s\n", M.cgroup, strerror(errno));
		unload(v);
		state_update();
		return;
	}
	v->tix = tix;
	M.vtab[tix] = v;
	M.n_versions++;
	v->id = ++M.next_id;
	if (v->clock_fd >= 0)
		jwt_clock_watch(v->clock_fd, 1);
	uint64_t t0 = now_us();
	mesh_pool_fill(v, 1);   /* claimed for v: enrolled into v whatever the modes are */
	uint64_t fill_us = now_us() - t0;
	mesh_set_mode(v, L7_MESH_ENROLL);
	if (old)
		mesh_set_mode(old, L7_MESH_RETIRED);
	pthread_mutex_lock(&rt.lock);
	v->older = old;
	M.cur = v;
	pthread_mutex_unlock(&rt.lock);
	v->published_at = mesh_now_ms();
	if (t_signal)
		RC.last_us = now_us() - t_signal;
	if (old) {
		old->retired = 1;
		old->retired_at = mesh_now_ms();
	}
	mesh_pin(v, 1);
	state_update();
	if (old)
		fprintf(stderr, "l7run[mesh]: reload: version %d (policy %s, %llu KiB of maps) enrolls new sockets "
			"%.1f ms after the signal (verifier %.1f ms, pool %.1f ms); %d version(s) loaded\n", v->id,
			v->cfg.policy, (unsigned long long)(v->mem >> 10), RC.last_us / 1000.0, v->load_us / 1000.0,
			fill_us / 1000.0, M.n_versions);
	else
		fprintf(stderr, "l7run[mesh]: version %d: policy %s, %llu KiB of maps\n", v->id, v->cfg.policy,
			(unsigned long long)(v->mem >> 10));
}

/* A sock_ops run that read the previous mode may still be enrolling a socket into a version
 * just retired: it is not looked at before this long. */
#define RETIRE_GRACE_MS 100

/* From the run loop (every 50 ms): unload retired versions no application socket is in. */
void mesh_retire_tick(void)
{
	static uint64_t last_state;
	uint64_t now = mesh_now_ms();
	int changed = 0, full = now - last_state >= 1000;

	for (struct mesh_ver *v = M.cur, *next; v; v = next) {
		next = v->older;
		if (!v->retired && !full)
			continue;   /* the serving version is counted once a second, for --stats */
		if (v->retired && now - v->retired_at < RETIRE_GRACE_MS)
			continue;
		int n = app_sockets(v);
		changed |= n != v->n_app;
		v->n_app = n;
		if (!v->retired || n)
			continue;
		/* l7run's own ends of its connections go with it (the application's are gone) */
		drop(v);
		changed = 1;
	}
	if (changed || full) {
		state_update();
		last_state = now;
	}
}

void mesh_unload_all(void)
{
	while (M.cur)
		drop(M.cur);
}
