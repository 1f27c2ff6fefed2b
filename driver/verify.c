/* l7c --explain --verify: what the running kernel says about the object, as l7run would meet it.
 *
 * Each program is loaded on its own (so one rejection does not hide the others' numbers, and
 * the time is per program), but every load reuses one set of maps, created once: that is both
 * cheaper (the maps of both modes are 137 MiB) and what lets the programs be put together as
 * l7run does: the decide programs go into their PROG_ARRAY slots first, then every program of
 * l7/progs.def is attached to its SOCKHASH, sock_ops to a child cgroup made for it. Whatever
 * the kernel refuses is recorded with its errno; then everything is detached and closed. */
#define _GNU_SOURCE
#include "report.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "l7/abi.h"
#include "l7/attach.h"
#include "l7/mesh.h"
#include "ir.h"

static const struct {
	const char *name, *section, *map;
} progs[] = {
#define L7_PROG(name, section, entry, map, whole) { #name, section, #map },
#include "l7/progs.def"
#undef L7_PROG
};

static const struct {
	const char *name, *prog_array;
} chains[] = {
#define L7_PROG(name, section, entry, map, whole)
#define L7_TAIL(name, section, entry, prog_array, host) { #name, #prog_array },
#include "l7/progs.def"
#undef L7_TAIL
#undef L7_PROG
};

static double now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int silent(enum libbpf_print_level l, const char *f, va_list ap)
{
	(void)l, (void)f, (void)ap;
	return 0;
}

static struct rp_prog *prog_named(struct report *r, const char *name)
{
	for (int i = 0; i < r->nprogs; i++)
		if (!strcmp(r->progs[i].f->name, name))
			return &r->progs[i];
	return NULL;
}

/* A new instance of the object with only `name` to load, over the maps of `maps`. */
static struct bpf_object *open_one(const struct report *r, struct bpf_object *maps, const char *name, char *log,
				   size_t log_size, int level)
{
	LIBBPF_OPTS(bpf_object_open_opts, oo, .object_name = "l7c-verify");
	struct bpf_object *one = bpf_object__open_mem(r->sb.obj, r->sb.obj_len, &oo);
	if (!one)
		return NULL;
	struct bpf_map *m;
	bpf_object__for_each_map(m, one) {
		struct bpf_map *shared = bpf_object__find_map_by_name(maps, bpf_map__name(m));
		if (shared && bpf_map__reuse_fd(m, bpf_map__fd(shared))) {
			bpf_object__close(one);
			return NULL;
		}
	}
	struct bpf_program *bp;
	bpf_object__for_each_program(bp, one) {
		bool me = !strcmp(bpf_program__name(bp), name);
		bpf_program__set_autoload(bp, me);
		if (me) {
			bpf_program__set_log_buf(bp, log, log_size);
			bpf_program__set_log_level(bp, (__u32)level);
		}
	}
	return one;
}

/* Loads program g on its own: its count at log level 4 (statistics only: a small log); when
 * rejected, once more at level 1 (the failing path) for the reason, explained (vlog.c) and
 * written to a file in log_dir. Returns its instance (kept open: the program stays loaded for
 * the attach step), or NULL. */
static struct bpf_object *load(struct report *r, struct bpf_object *maps, struct rp_prog *g, const char *log_dir,
			       const char *stem)
{
	size_t size = 1 << 16;
	char *log = calloc(1, size);
	struct bpf_object *one = open_one(r, maps, g->f->name, log, size, 4);
	if (!one) {
		snprintf(g->reason, sizeof(g->reason), "libbpf cannot open the object");
		g->verdict = RP_REJECTED;
		free(log);
		return NULL;
	}
	double t0 = now_ms();
	int err = bpf_object__load(one);
	g->verify_ms = now_ms() - t0;
	const char *st = strstr(log, "processed ");
	g->processed = st ? strtol(st + 10, NULL, 10) : -1;
	if (!err) {
		g->verdict = RP_ACCEPTED;
		free(log);
		return one;
	}
	bpf_object__close(one);
	free(log);
	g->verdict = RP_REJECTED;
	size = 64u << 20;
	log = calloc(1, size);
	one = open_one(r, maps, g->f->name, log, size, 1);
	if (one && bpf_object__load(one) && log[0] && (g->why = calloc(1, sizeof(*g->why)))) {
		vlog_explain(log, r->sb.obj, r->sb.obj_len, g->f->name, g->why);
		vlog_write(log, log_dir, stem, g->f->name, g->why);
		const struct vlog_where *w = g->why->policy.file[0] ? &g->why->policy : &g->why->at;
		const char *base = strrchr(w->file, '/') ? strrchr(w->file, '/') + 1 : w->file;
		char at[96] = "";
		if (w->line)
			snprintf(at, sizeof(at), " (%.80s:%u)", base, w->line);
		snprintf(g->reason, sizeof(g->reason), "%.*s%s", (int)(sizeof(g->reason) - 1 - strlen(at)), g->why->error, at);
	} else {
		snprintf(g->reason, sizeof(g->reason), "%s", strerror(-err));
	}
	if (one)
		bpf_object__close(one);
	free(log);
	return NULL;
}

/* What an attach errno means here. */
static const char *attach_meaning(int err, int type)
{
	bool cgroup = type == BPF_CGROUP_SOCK_OPS;
	switch (err) {
	case EINVAL:
		return cgroup ? "the kernel does not take this program on a cgroup"
			      : "the kernel does not take this program at this attach point of its map (its type, its "
				"expected attach type, or what it calls: one 6.18 build refused stream parsers that tail-call)";
	case EBUSY: return "another program or link holds this attach point";
	case EPERM:
	case EACCES: return "not permitted: --verify needs root (CAP_BPF and CAP_NET_ADMIN)";
	case EOPNOTSUPP: return "this kernel's map does not take programs of this attach type";
	case EBADF: return cgroup ? "not a cgroup v2 directory (--verify-cgroup=DIR)" : "not a map of this kernel";
	case E2BIG: return "the attach point holds too many programs";
	default: return "refused by the kernel";
	}
}

static void refused(struct report *r, struct rp_prog *g, int err, int type, const char *what)
{
	g->attach_errno = err;
	snprintf(g->attach_why, sizeof(g->attach_why), "%s%s%s (%s): %s", what ? what : "", what ? ": " : "",
		 strerrorname_np(err) ? strerrorname_np(err) : "?", strerror(err), attach_meaning(err, type));
	r->attach_refused++;
}

/* The cgroup v2 directory to make the child cgroup in: the caller's, or the cgroup2 mount. */
static const char *cgroup_root_of(const char *given)
{
	static const char *mounts[] = { "/sys/fs/cgroup/unified", "/sys/fs/cgroup" };
	if (given)
		return given;
	for (int i = 0; i < 2; i++) {
		struct statfs s;
		if (!statfs(mounts[i], &s) && s.f_type == CGROUP2_SUPER_MAGIC)
			return mounts[i];
	}
	return mounts[0];
}

int verify_object(struct report *r, const char *cgroup_root, const char *log_dir)
{
	if (!r->sb.obj) {
		snprintf(r->verify_error, sizeof(r->verify_error), "no object");
		return -1;
	}
	libbpf_set_print(silent);
	LIBBPF_OPTS(bpf_object_open_opts, oo, .object_name = "l7c-verify");
	struct bpf_object *maps = bpf_object__open_mem(r->sb.obj, r->sb.obj_len, &oo);
	if (!maps) {
		snprintf(r->verify_error, sizeof(r->verify_error), "libbpf cannot open the object");
		return -1;
	}
	struct bpf_program *bp;
	bpf_object__for_each_program(bp, maps)
		bpf_program__set_autoload(bp, false);
	int err = bpf_object__load(maps);   /* the maps only */
	if (err) {
		snprintf(r->verify_error, sizeof(r->verify_error), "cannot create the object's maps: %s%s", strerror(-err),
			 err == -EPERM || err == -EACCES ? " (--verify needs root: CAP_BPF and CAP_NET_ADMIN)" : "");
		bpf_object__close(maps);
		return -1;
	}
	char stem[128];   /* the .l7 file's name without .l7: its logs' names */
	const char *src = strrchr(r->p->source_path, '/') ? strrchr(r->p->source_path, '/') + 1 : r->p->source_path;
	snprintf(stem, sizeof(stem), "%s", src);
	if (strlen(stem) > 3 && !strcmp(stem + strlen(stem) - 3, ".l7"))
		stem[strlen(stem) - 3] = 0;
	static struct bpf_object *one[BUDGET_MAX_FUNCS];
	memset(one, 0, sizeof(one));
	for (int i = 0; i < r->nprogs; i++) {
		struct rp_prog *g = &r->progs[i];
		if (g->kind != RP_PROGRAM)
			continue;
		one[i] = load(r, maps, g, log_dir, stem);
		if (one[i])
			r->loaded++;
		else
			r->rejected++;
	}

	/* as l7run: the chains' slots first (runtime/tails.c), then the attach points */
	for (size_t c = 0; c < sizeof chains / sizeof chains[0]; c++)
		for (int k = 0; k < L7_MAX_TAILS; k++) {
			char name[64];
			snprintf(name, sizeof(name), "%s_%d", chains[c].name, k);
			struct rp_prog *g = prog_named(r, name);
			if (!g)
				break;
			g->attach_as = "tail call";
			snprintf(g->attach_to, sizeof(g->attach_to), "slot %d of %s", k, chains[c].prog_array);
			struct bpf_object *o = one[g - r->progs];
			if (!o)
				continue;   /* not loaded: attach_errno stays -1 */
			int fd = bpf_program__fd(bpf_object__find_program_by_name(o, name));
			int map = bpf_object__find_map_fd_by_name(maps, chains[c].prog_array);
			__u32 key = (__u32)k;
			if (map < 0 || bpf_map_update_elem(map, &key, &fd, BPF_ANY))
				refused(r, g, map < 0 ? ENOENT : errno, -1, NULL);
			else
				g->attach_errno = 0, r->attached++;
		}

	struct { int fd, map, type; } undo[sizeof progs / sizeof progs[0]];
	int nundo = 0, cgfd = -1, cgerr = 0, link[sizeof progs / sizeof progs[0]], nlinks = 0;
	char cg[512] = "";
	for (size_t i = 0; i < sizeof progs / sizeof progs[0]; i++) {
		struct rp_prog *g = prog_named(r, progs[i].name);
		int type = l7_attach_type(progs[i].section);
		if (!g || type < 0)
			continue;
		g->attach_as = type == BPF_CGROUP_SOCK_OPS ? "sock_ops" : l7_attach_name(progs[i].section);
		struct bpf_object *o = one[g - r->progs];
		if (!o)
			continue;
		int fd = bpf_program__fd(bpf_object__find_program_by_name(o, progs[i].name));
		if (type == BPF_CGROUP_SOCK_OPS) {   /* l7run --mesh: a bpf_link on the cgroup */
			if (!cg[0]) {
				snprintf(cg, sizeof(cg), "%s/l7c-verify-%d", cgroup_root_of(cgroup_root), (int)getpid());
				if (mkdir(cg, 0755) && errno != EEXIST) {
					snprintf(g->attach_to, sizeof(g->attach_to), "%.95s", cg);
					cg[0] = 0;
					refused(r, g, errno, type, "cannot make the cgroup");
					continue;
				}
				cgfd = open(cg, O_RDONLY | O_DIRECTORY);
				cgerr = errno;
			}
			snprintf(g->attach_to, sizeof(g->attach_to), "cgroup %.88s", cg);
			int l = cgfd < 0 ? -cgerr : bpf_link_create(fd, cgfd, BPF_CGROUP_SOCK_OPS, NULL);
			if (l < 0)
				refused(r, g, -l, type, cgfd < 0 ? "cannot open the cgroup" : NULL);
			else
				link[nlinks++] = l, g->attach_errno = 0, r->attached++;
			continue;
		}
		if (type == BPF_TRACE_RAW_TP) {   /* as l7run --mesh: a raw tracepoint fd */
			snprintf(g->attach_to, sizeof(g->attach_to), "tracepoint %.84s", strchr(progs[i].section, '/') + 1);
			int l = bpf_raw_tracepoint_open(l7_raw_tp_name(progs[i].section), fd);
			if (l < 0)
				refused(r, g, errno, type, NULL);
			else
				link[nlinks++] = l, g->attach_errno = 0, r->attached++;
			continue;
		}
		int map = bpf_object__find_map_fd_by_name(maps, progs[i].map);
		snprintf(g->attach_to, sizeof(g->attach_to), "%s", progs[i].map);
		struct bpf_map *pa = bpf_object__find_map_by_name(maps, progs[i].map);
		__u32 slot = L7_MESH_H2_TAIL;
		if (map < 0) {
			refused(r, g, ENOENT, type, "the object has no such map");
		} else if (pa && bpf_map__type(pa) == BPF_MAP_TYPE_PROG_ARRAY) {   /* tail-called, as l7run does */
			if (bpf_map_update_elem(map, &slot, &fd, BPF_ANY))
				refused(r, g, errno, -1, NULL);
			else
				g->attach_errno = 0, r->attached++;
		} else if (bpf_prog_attach(fd, map, (enum bpf_attach_type)type, 0)) {
			refused(r, g, errno, type, NULL);
		} else {
			g->attach_errno = 0;
			r->attached++;
			undo[nundo].fd = fd, undo[nundo].map = map, undo[nundo++].type = type;
		}
	}

	while (nundo--)
		bpf_prog_detach2(undo[nundo].fd, undo[nundo].map, (enum bpf_attach_type)undo[nundo].type);
	while (nlinks--)
		close(link[nlinks]);
	if (cgfd >= 0)
		close(cgfd);
	if (cg[0])
		rmdir(cg);
	for (int i = 0; i < r->nprogs; i++)
		if (one[i])
			bpf_object__close(one[i]);
	bpf_object__close(maps);
	r->verified = true;
	return 0;
}
