/* Mesh mode's operations (struct mode_ops): l7run --mesh --cgroup PATH [--create-cgroup]
 * [--pool N] [options] prog.o [-- CMD [ARGS]].
 *
 * l7run loads only the mesh programs of the object and moves itself into the cgroup (its
 * listener and pool sockets must be enrolled like the applications'). Each version is an
 * object with its own sock_ops (a bpf_link of its own on the cgroup), its own SK_MSG on its own
 * l7_mesh_socks and its own pool. Several sock_ops run on the cgroup, oldest first, and a
 * socket goes into exactly one version (l7/mesh.h, enum l7_mesh_addr_kind): the one in
 * L7_MESH_ENROLL mode takes new sockets, l7run's end of a service connection joins the
 * client's end, pool connections are claimed by address (mesh_pool.c). Publishing version n:
 *   1. attach its sock_ops, mode RETIRED: it takes only what is claimed for it;
 *   2. open its pool, each connection claimed for it (the ENROLL version leaves them);
 *   3. n's mode ENROLL, then the previous version's RETIRED. In between both would take a
 *      new socket: the older runs first and wins, the newer's insert fails (EBUSY: a socket
 *      has one SK_MSG program) and it keeps no state. No moment where nobody takes it.
 * A socket keeps the SK_MSG program it got for its whole life, so each connection is judged
 * by one version from its first request to its last. Application sockets cannot be closed by
 * l7run, and taking one out of its map would let its requests pass unjudged: a retired
 * version stays loaded until no application socket is left in it (its CLIENT entries: its own
 * sock_ops deletes them when they close; count), then its pool is closed and it is unloaded.
 * Stopping: stop enrolling, let in-flight responses finish on the kernel path, detach SK_MSG,
 * relay what is left on pool connections to their clients, close, unpin, leave the cgroup. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/stat.h>
#include <bpf/bpf.h>
#include "l7/attach.h"
#include "mesh.h"

#define CGROUP2_ROOT "/sys/fs/cgroup/unified"
#define LOOK_MS 50               /* clients over their bound, pools, retired versions */
/* A sock_ops run that read the previous mode may still be enrolling a socket into a version
 * just retired: it is not counted before this long. */
#define RETIRE_GRACE_MS 100

static int write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = write(fd, text, strlen(text));
	close(fd);
	return n == (ssize_t)strlen(text) ? 0 : -1;
}

/* Only a child of the cgroup2 mount: attaching to the root would cover the whole machine. */
static int enter_cgroup(struct l7run *L, struct mesh *M)
{
	char real[PATH_MAX], procs[PATH_MAX + 16], pid[32];

	if (M->created_cgroup && mkdir(M->cgroup, 0755) && errno != EEXIST) {
		say(L, "mkdir %s: %s", M->cgroup, strerror(errno));
		return -1;
	}
	if (!realpath(M->cgroup, real) || strncmp(real, CGROUP2_ROOT "/", strlen(CGROUP2_ROOT) + 1) ||
	    !real[strlen(CGROUP2_ROOT) + 1]) {
		say(L, "%s is not a child cgroup under %s", M->cgroup, CGROUP2_ROOT);
		return -1;
	}
	snprintf(M->cgroup, sizeof M->cgroup, "%s", real);
	M->cgfd = open(real, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	snprintf(procs, sizeof procs, "%s/cgroup.procs", real);
	snprintf(pid, sizeof pid, "%d\n", (int)getpid());
	if (M->cgfd < 0 || write_file(procs, pid)) {
		say(L, "cannot enter %s: %s", real, strerror(errno));
		return -1;
	}
	say(L, "in cgroup %s", real);
	return 0;
}

static void leave_cgroup(struct l7run *L, struct mesh *M)
{
	char pid[32];

	if (M->cgfd >= 0)
		close(M->cgfd);
	if (!M->created_cgroup)
		return;
	/* leave it so that it can be removed (moving ourselves back attaches nothing) */
	snprintf(pid, sizeof pid, "%d\n", (int)getpid());
	write_file(CGROUP2_ROOT "/cgroup.procs", pid);
	if (rmdir(M->cgroup))
		say(L, "rmdir %s: %s (processes still in it?)", M->cgroup, strerror(errno));
}

static int mesh_init(struct l7run *L)
{
	struct mesh *M = calloc(1, sizeof *M);

	if (!M)
		return 1;
	L->m = M;
	M->cgfd = -1;
	if (!L->args.pool_n)
		L->args.pool_n = 32;
	if (L->args.pool_n < 1 || L->args.pool_n > L7_MESH_SLOTS) {
		say(L, "--pool %d: 1 to %d connections per upstream", L->args.pool_n, L7_MESH_SLOTS);
		return 2;
	}
	M->created_cgroup = L->args.create_cgroup;
	L->env.ep.eager = 1;   /* the kernel redirects only into pool connections opened ahead */
	snprintf(M->cgroup, sizeof M->cgroup, "%s", L->args.cgroup);
	return enter_cgroup(L, M) ? 1 : 0;
}

static void mesh_fini(struct l7run *L)
{
	struct mesh *M = mesh_of(L);

	if (!M)
		return;
	mesh_pool_fini(L);
	leave_cgroup(L, M);
	free(M);
	L->m = NULL;
}

/* ---- versions -------------------------------------------------------------------------------- */

/* l7run's ends of v's connections (the applications' are gone), its pool, its attachments. */
static void mesh_unload(struct l7run *L, struct version *ver)
{
	struct mesh_ver *v = mv(ver);
	struct mesh *M = mesh_of(L);

	/* (a version never published has none, and may be dropped by the loader thread, which must
	 * not look at the loop's clients) */
	for (int i = v->v.published_at && M ? M->n_clients - 1 : -1; i >= 0; i--)
		if (M->client[i]->v == v)
			mesh_client_close(L, M->client[i]);
	pool_fini(&v->pool);
	if (v->sockops_link)
		bpf_link__destroy(v->sockops_link);
	if (v->redir_tp > 0)
		close(v->redir_tp);
	if (v->msg_attached)
		bpf_prog_detach2(v->msg_prog, v->socks, BPF_SK_MSG_VERDICT);
}

static void addr_kind(struct mesh_ver *v, const struct sockaddr_in *a, uint32_t kind, uint32_t index)
{
	struct l7_mesh_addr_key k = { a ? a->sin_addr.s_addr : 0, a ? ntohs(a->sin_port) : 0 };
	struct l7_mesh_addr val = { kind, index };

	bpf_map_update_elem(v->addrs, &k, &val, BPF_ANY);
}

/* --h2c NAME,...: the upstream slots (every endpoint NAME#i of a set too) that speak h2c. */
static int h2c_upstreams(struct mesh_ver *v, const char *names, char *err, size_t errlen)
{
	const struct config *cfg = &v->v.cfg;

	v->h2c = 0;
	for (const char *p = names; p && *p;) {
		size_t n = strcspn(p, ",");
		uint32_t got = 0;
		for (int i = 0; i < L7_MESH_UPSTREAMS; i++) {
			const char *u = cfg->upstream[i].name;
			if (cfg->upstream[i].set && !strncmp(u, p, n) && (u[n] == 0 || u[n] == '#'))
				got |= 1u << i;
		}
		if (!got) {
			snprintf(err, errlen, "--h2c: the policy has no upstream %.*s", (int)n, p);
			return -1;
		}
		v->h2c |= got;
		p += n + (p[n] == ',');
	}
	return 0;
}

/* The mesh's part of loading (the loader thread): its maps, its pool (opened when it is
 * published), the endpoints that matter, mode RETIRED, SK_MSG attached to its own (empty)
 * sockhash. Its sock_ops is attached when it is published. */
static int mesh_load(struct l7run *L, struct version *ver, char *err, size_t errlen)
{
	struct mesh_ver *v = mv(ver);
	struct bpf_object *o = ver->obj;
	struct config *cfg = &ver->cfg;

	pool_init(&v->pool, L, &mesh_pool_ops, v, cfg->upstream, L->args.pool_n);
	if ((v->socks = find_map(o, "l7_mesh_socks", err, errlen)) < 0 ||
	    (v->conns = find_map(o, "l7_mesh_conns", err, errlen)) < 0 ||
	    (v->addrs = find_map(o, "l7_mesh_addrs", err, errlen)) < 0 ||
	    (v->pool_map = find_map(o, "l7_mesh_pool", err, errlen)) < 0 ||
	    (v->pass = find_map(o, "l7_mesh_pass", err, errlen)) < 0 || (v->ctl = find_map(o, "l7_mesh_ctl", err, errlen)) < 0 ||
	    (v->h2mut = find_map(o, "l7_mesh_h2mut", err, errlen)) < 0)
		return -1;
	/* which endpoints matter, before anything can be enrolled */
	mesh_set_mode(v, L7_MESH_RETIRED);
	for (int i = 0; i < cfg->n_services; i++)
		addr_kind(v, &cfg->service[i].addr, L7_MA_SERVICE, (uint32_t)i);
	for (int i = 0; i < L7_MESH_UPSTREAMS; i++)
		if (cfg->upstream[i].set && cfg->upstream[i].addr.sin_port)   /* not a free run-time slot: key {0, 0} is the fallback's */
			addr_kind(v, &cfg->upstream[i].addr, L7_MA_UPSTREAM, (uint32_t)i);
	if (cfg->fallback >= 0)
		addr_kind(v, NULL, L7_MA_UPSTREAM, (uint32_t)cfg->fallback);   /* key 0: the fallback proxy's */

	struct bpf_program *msg = bpf_object__find_program_by_name(o, L7_MESH_PROG_MSG);
	struct bpf_program *redir = bpf_object__find_program_by_name(o, L7_MESH_PROG_REDIR);
	if (!msg || !redir || !bpf_object__find_program_by_name(o, L7_MESH_PROG_SOCKOPS)) {
		snprintf(err, errlen, "%s has no mesh programs (built with l7c --mode=gateway, or by an older l7c?)", ver->path);
		return -1;
	}
	/* before any socket is enrolled: a client's order needs every redirect into it counted */
	v->redir_tp = bpf_raw_tracepoint_open(l7_raw_tp_name(bpf_program__section_name(redir)), bpf_program__fd(redir));
	if (v->redir_tp < 0) {
		snprintf(err, errlen, "attach %s to %s: %s", L7_MESH_PROG_REDIR, bpf_program__section_name(redir), strerror(errno));
		return -1;
	}
	/* the HTTP/2 clients' program, when an upstream speaks h2c (none for a split policy:
	 * HTTP/2 clients are refused, h2_refuse.c) */
	if (h2c_upstreams(v, L->args.h2c, err, errlen))
		return -1;
	struct bpf_program *h2 = v->h2c ? bpf_object__find_program_by_name(o, L7_MESH_PROG_H2) : NULL;
	int h2map = bpf_object__find_map_fd_by_name(o, L7_MESH_H2_TAIL_MAP), h2fd = h2 ? bpf_program__fd(h2) : -1;
	__u32 h2slot = L7_MESH_H2_TAIL;
	if (h2fd >= 0 && (h2map < 0 || bpf_map_update_elem(h2map, &h2slot, &h2fd, BPF_ANY))) {
		snprintf(err, errlen, "put %s in %s: %s", L7_MESH_PROG_H2, L7_MESH_H2_TAIL_MAP, h2map < 0 ? "no such map" : strerror(errno));
		return -1;
	}
	v->msg_prog = bpf_program__fd(msg);
	if (bpf_prog_attach(v->msg_prog, v->socks, BPF_SK_MSG_VERDICT, 0)) {
		snprintf(err, errlen, "attach sk_msg: %s", strerror(errno));
		return -1;
	}
	v->msg_attached = 1;
	return 0;
}

/* Steps 1-3 of the top of this file. */
static int mesh_publish(struct l7run *L, struct version *ver, struct version *old, char *err, size_t errlen)
{
	struct mesh_ver *v = mv(ver);
	struct mesh *M = mesh_of(L);

	v->sockops_link = bpf_program__attach_cgroup(bpf_object__find_program_by_name(v->v.obj, L7_MESH_PROG_SOCKOPS),
						     M->cgfd);
	if (!v->sockops_link) {
		snprintf(err, errlen, "attach sock_ops to %s: %s", M->cgroup, strerror(errno));
		return -1;
	}
	uint64_t t0 = now_us();
	pool_fill(&v->pool, 1);   /* claimed for v: enrolled into v whatever the modes are */
	ep_rebuild(&v->v.cfg);    /* run-time sets: only the endpoints whose pool filled */
	v->v.publish_us = now_us() - t0;
	mesh_set_mode(v, L7_MESH_ENROLL);
	if (old)
		mesh_set_mode(mv(old), L7_MESH_RETIRED);
	return 0;
}

/* Application sockets in v: its CLIENT entries (its sock_ops deletes them when they close). */
static int mesh_count(struct l7run *L, struct version *ver)
{
	struct mesh_ver *v = mv(ver);
	struct l7_mesh_key k, next;
	struct l7_mesh_conn c;
	void *prev = NULL;
	int n = 0;

	(void)L;
	if (v->v.retired && now_ms() - v->v.retired_at < RETIRE_GRACE_MS)
		return -1;
	while (bpf_map_get_next_key(v->conns, prev, &next) == 0) {
		k = next;
		prev = &k;
		if (!bpf_map_lookup_elem(v->conns, &k, &c) && c.role == L7_MR_CLIENT)
			n++;
	}
	return n;
}

/* ---- traffic ------------------------------------------------------------------------------------ */

static void mesh_tick(struct l7run *L, uint64_t now)
{
	struct mesh *M = mesh_of(L);

	mesh_clients_tick(L, now);
	mesh_relays_tick(L, now);
	if (now - M->looked_at < LOOK_MS)
		return;
	M->looked_at = now;
	mesh_clients_check_over(L);
	for (struct version *v = L->cur; v; v = v->older) {
		mesh_pool_drain(mv(v), now);
		pool_tick(&mv(v)->pool, now);
	}
}

/* Records wait for earlier responses, which the kernel delivers without telling l7run. */
static int mesh_poll_ms(struct l7run *L)
{
	(void)L;
	return 5;
}

/* In-flight responses finish on the kernel path while sock_ops no longer enrolls anything;
 * what still arrives on pool connections after SK_MSG is detached goes to the bound client. */
static void mesh_stop(struct l7run *L)
{
	uint64_t until = now_ms() + 1000;

	for (struct version *v = L->cur; v; v = v->older) {
		bpf_link__destroy(mv(v)->sockops_link);
		mv(v)->sockops_link = NULL;
	}
	for (;;) {
		uint64_t owed = 0;
		for (struct version *v = L->cur; v; v = v->older)
			owed += mesh_pool_owed(mv(v));
		if (!owed || now_ms() >= until)
			break;
		usleep(5000);
	}
	for (struct version *v = L->cur; v; v = v->older) {
		bpf_prog_detach2(mv(v)->msg_prog, mv(v)->socks, BPF_SK_MSG_VERDICT);
		mv(v)->msg_attached = 0;
		mesh_pool_flush(L, mv(v));
	}
}

static void mesh_close(struct l7run *L)
{
	if (!L->m)
		return;   /* init failed */
	mesh_relays_close_all(L);
	while (mesh_of(L)->n_clients)
		mesh_client_close(L, mesh_of(L)->client[0]);
}

/* The mesh maps for tests and bpftool and --stats, the chain of a split SK_MSG program (tests
 * empty a slot), the heads clients left unfinished (tests check none stays). */
static const struct pin_name mesh_pins[] = {
	{ "l7_mesh_socks", "l7_mesh_socks" }, { "l7_mesh_conns", "l7_mesh_conns" }, { "l7_mesh_pool", "l7_mesh_pool" },
	{ "l7_tail_mesh", "l7_tail_mesh" }, { "l7_mesh_hold", "l7_mesh_hold" }, { NULL, NULL },
};

const struct mode_ops mesh_mode = {
	.name = "mesh", .tag = "l7run[mesh]", .pin_prefix = "l7mesh", .pins = mesh_pins,
	.load_mode = LOAD_MESH, .version_size = sizeof(struct mesh_ver),
	.init = mesh_init, .stop = mesh_stop, .close = mesh_close, .fini = mesh_fini,
	/* versions: sock_ops attached and pool filled at publication; retired ones stay until no
	 * application socket is left in them (count), looked at every LOOK_MS */
	.load = mesh_load, .publish = mesh_publish, .publish_step = "pool", .unload = mesh_unload,
	.count = mesh_count, .look_ms = LOOK_MS,
	.accept = mesh_accept, .tick = mesh_tick, .poll_ms = mesh_poll_ms,
};
