/* Loading: read the object once (its manifest and its programs come from the same bytes, even
 * if the operator replaces the file meanwhile), size its maps for the mode, load it (a refused
 * program is named at its source line with the verifier's reason in one sentence,
 * support/bpfobj/vlog.c, its full log in $TMPDIR), fill the maps the policy needs, attach the
 * programs to the object's own SOCKHASHes as l7/progs.def says. Every step before attaching is
 * done on maps no socket is in yet, so a version is complete before any connection can use it
 * (version.c publishes it). */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <linux/magic.h>
#include "l7/attach.h"
#include "l7/mesh.h"
#include "bpfobj/vlog.h"
#include "policy.h"

_Static_assert(MAX_SERVICES == L7M_MAX_SERVICES, "l7run listens on every service a manifest may hold");

const struct prog_desc l7_progs[] = {
#define L7_PROG(name, section, entry, map, whole) { #name, section, #map },
#include "l7/progs.def"
#undef L7_PROG
};
const int l7_n_progs = (int)(sizeof l7_progs / sizeof l7_progs[0]);

int prog_is_mesh(const struct prog_desc *p)
{
	return l7_map_is_mesh(p->map);
}

/* libbpf's warnings only, unless --verbose (the verifier log of a refused program is not one:
 * open_policy asks for it in a buffer of its own). */
static int print_warnings(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	/* a refused program is l7run's one line (open_policy), not libbpf's three */
	if (strstr(fmt, "BPF program load failed") || strstr(fmt, "failed to load"))
		return 0;
	return level == LIBBPF_WARN ? vfprintf(stderr, fmt, ap) : 0;
}

static int print_all(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	(void)level;
	return vfprintf(stderr, fmt, ap);
}

void policy_env_init(struct policy_env *env)
{
	memset(env, 0, sizeof *env);
	env->ov.fallback = -2;
	env->jwt.off = -1;
}

void policy_env_ready(struct policy_env *env)
{
	libbpf_set_print(env->verbose ? print_all : print_warnings);
	env->jwt.test_shift = jwt_test_shift();
}

static int ensure_bpffs(char *err, size_t errlen)
{
	struct statfs st;

	if (statfs("/sys/fs/bpf", &st) == 0 && st.f_type == BPF_FS_MAGIC)
		return 0;
	mkdir("/sys/fs/bpf", 0700);
	if (mount("bpf", "/sys/fs/bpf", "bpf", 0, NULL)) {
		snprintf(err, errlen, "cannot mount bpffs: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/* Read the object file into memory (one read: manifest and programs agree), and its manifest:
 * an object it refuses is not opened any further. */
int policy_read(const char *path, struct policy_file *pf, char *err, size_t errlen)
{
	memset(pf, 0, sizeof *pf);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) || st.st_size <= 0 || st.st_size > (1 << 30)) {
		snprintf(err, errlen, "cannot read %s: %s", path, fd < 0 ? strerror(errno) : "empty or not a file");
		if (fd >= 0)
			close(fd);
		return -1;
	}
	pf->buf = malloc((size_t)st.st_size);
	size_t got = 0;
	while (pf->buf && got < (size_t)st.st_size) {
		ssize_t n = read(fd, pf->buf + got, (size_t)st.st_size - got);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	pf->len = got;
	char why[512];
	pf->mf = calloc(1, sizeof *pf->mf);
	if (!pf->buf || !pf->mf || got != (size_t)st.st_size ||
	    manifest_of_object(pf->buf, pf->len, pf->mf, why, sizeof why)) {
		snprintf(err, errlen, "%s: %s", path, pf->buf && pf->mf && got == (size_t)st.st_size ? why : "cannot read it");
		policy_free(pf);
		return -1;
	}
	return 0;
}

void policy_free(struct policy_file *pf)
{
	free(pf->buf);
	if (pf->mf)
		manifest_free(pf->mf);
	free(pf->mf);
	memset(pf, 0, sizeof *pf);
}

/* Maps sized for what this object runs as. Every object defines the maps of both modes and of
 * every feature (l7/maps.def), all preallocated: 137 MiB of kernel memory per loaded object
 * (measured, examples/route.l7). One entry for the other mode's maps and for features the
 * policy does not use (its manifest says which), and hash maps that allocate per entry:
 * a few MiB per version, which is what lets several versions be loaded while old ones drain. */
static void size_maps(struct bpf_object *obj, enum load_mode mode, const struct config *cfg)
{
	struct bpf_map *m;
	int jwt = cfg->mf->n_jwt > 0, buckets = cfg->mf->n_bucket > 0, tables = cfg->mf->n_table > 0;

	bpf_object__for_each_map(m, obj) {
		const char *n = bpf_map__name(m);
		int gw_only = !strcmp(n, "l7_clients") || !strcmp(n, "l7_upstreams") || !strcmp(n, "l7_conns") ||
			      !strcmp(n, "l7_ctl") || !strcmp(n, "l7_pass") || !strcmp(n, "l7_txq") ||
			      !strcmp(n, "l7_txport") || !strcmp(n, "l7_rxq") || !strcmp(n, "l7_rxport") ||
			      !strcmp(n, "l7_idle");
		int other_mode = mode == LOAD_MESH ? gw_only : l7_map_is_mesh(n);
		int resp = !strcmp(n, "l7_mesh_rmut");   /* gateway mode's l7_rxq: every object (Connection: close) */
		int unused = other_mode || (!jwt && !strcmp(n, "l7_jwt_cache")) || (!cfg->resp_mut && resp) ||
			     (!buckets && !strcmp(n, "l7_buckets")) ||
			     (!tables && (!strcmp(n, "l7_exact") || !strcmp(n, "l7_prefix") || !strcmp(n, "l7_entry_hits")));
		if (unused)
			bpf_map__set_max_entries(m, bpf_map__type(m) == BPF_MAP_TYPE_LRU_HASH ? 64 : 1);
		if (bpf_map__type(m) == BPF_MAP_TYPE_HASH)
			bpf_map__set_map_flags(m, bpf_map__map_flags(m) | BPF_F_NO_PREALLOC);
		if (!other_mode && (!strcmp(n, "l7_mesh_h2buf") || !strcmp(n, "l7_mesh_h2dec")))
			bpf_map__set_max_entries(m, (__u32)libbpf_num_possible_cpus());   /* one per CPU (maps.def) */
		if (!strcmp(n, "l7_idle"))   /* l7run fills and reads its slots with atomics (gateway_pool.c) */
			bpf_map__set_map_flags(m, bpf_map__map_flags(m) | BPF_F_MMAPABLE);
	}
}

/* Open and load the programs of `mode` (the other mode's are not verified: they would only
 * add to the load time). NULL with err set if the file or the kernel refuses. */
struct bpf_object *open_policy(struct policy_env *env, const struct policy_file *pf, const char *path,
			       enum load_mode mode, const struct config *cfg, char *err, size_t errlen)
{
	char name[64];
	const char *base = strrchr(path, '/');

	if (ensure_bpffs(err, errlen))
		return NULL;
	snprintf(name, sizeof name, "%s", base ? base + 1 : path);
	char *dot = strrchr(name, '.');
	if (dot && dot != name)
		*dot = 0;
	LIBBPF_OPTS(bpf_object_open_opts, opts, .object_name = name);
	struct bpf_object *obj = bpf_object__open_mem(pf->buf, pf->len, &opts);
	if (!obj) {
		snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
		return NULL;
	}
	struct bpf_program *p;
	bpf_object__for_each_program(p, obj) {
		const char *n = bpf_program__name(p);
		int mesh = !strncmp(n, "l7_mesh_decide_", 15);   /* a split SK_MSG's chain */
		for (int i = 0; i < l7_n_progs; i++)
			if (!strcmp(n, l7_progs[i].name))
				mesh = prog_is_mesh(&l7_progs[i]);
		bpf_program__set_autoload(p, mode == LOAD_MESH ? mesh : !mesh);
	}
	/* what this kernel lacks for such an object, named before the verifier or an attach fails */
	int split = bpf_object__find_program_by_name(obj, mode == LOAD_MESH ? "l7_mesh_decide_0" : "l7_gw_decide_0") != NULL;
	char why[1024];
	if (probe_require(&env->probe, mode == LOAD_MESH ? PM_MESH : PM_GW, split, why, sizeof why)) {
		snprintf(err, errlen, "cannot run %s here: %s", path, why);
		bpf_object__close(obj);
		return NULL;
	}
	size_maps(obj, mode, cfg);
	struct bpf_map *lm = bpf_object__find_map_by_name(obj, "l7_log");
	if (lm)   /* a page when nothing reads it */
		bpf_map__set_max_entries(lm, !(env->dp_flags & L7_CFG_LOG) ? 4096 : env->log_ring ? env->log_ring : L7_LOG_RING);
	/* A refused program's verifier log (libbpf asks for it, at level 1, only after a refusal),
	 * explained in one line (support/bpfobj/vlog.c) and kept in a file. Program k logs at
	 * log + k: only the refused one writes, so the first byte written names it. */
	enum { LOG_SIZE = 16 << 20 };
	int k = 0;
	char *log = calloc(1, LOG_SIZE + 256);
	bpf_object__for_each_program(p, obj)
		if (log && bpf_program__autoload(p) && k < 256)
			bpf_program__set_log_buf(p, log + k++, LOG_SIZE);
	int e = bpf_object__load(obj);
	if (e) {
		const char *refused = NULL;
		k = 0;
		bpf_object__for_each_program(p, obj)
			if (log && bpf_program__autoload(p) && k < 256 && !refused && log[k++])
				refused = bpf_program__name(p);
		struct vlog_explained x;
		if (refused) {
			vlog_explain(log + k - 1, pf->buf, pf->len, refused, &x);
			vlog_write(log + k - 1, NULL, name, refused, &x);
			vlog_line(err, errlen, &x, refused);
		} else {
			snprintf(err, errlen, "the kernel refused %s (%s)", path, strerror(-e));
		}
		free(log);
		bpf_object__close(obj);
		return NULL;
	}
	free(log);
	return obj;
}

/* Kernel memory of the object's maps: the memlock the kernel accounts for each (fdinfo). */
uint64_t object_mem(struct bpf_object *obj)
{
	struct bpf_map *m;
	uint64_t total = 0;

	bpf_object__for_each_map(m, obj) {
		char p[64], line[128];
		snprintf(p, sizeof p, "/proc/self/fdinfo/%d", bpf_map__fd(m));
		FILE *f = fopen(p, "r");
		unsigned long long v;
		while (f && fgets(line, sizeof line, f))
			if (sscanf(line, "memlock: %llu", &v) == 1)
				total += v;
		if (f)
			fclose(f);
	}
	return total;
}

int find_map(struct bpf_object *obj, const char *name, char *err, size_t errlen)
{
	int fd = bpf_object__find_map_fd_by_name(obj, name);
	if (fd < 0)
		snprintf(err, errlen, "object has no map %s", name);
	return fd;
}

/* The first step of loading a version, in both modes: read the object and its manifest (ov:
 * the command line's overrides, gateway mode), refuse a changed listen address (the listening
 * sockets outlive versions). On failure nothing is held; on success pf is the caller's. */
int version_config(const char *path, const struct config *serving, const struct overrides *ov,
		   struct policy_file *pf, struct config *cfg, char *err, size_t errlen)
{
	if (policy_read(path, pf, err, errlen))
		return -1;
	config_from_manifest(pf->mf, cfg);   /* cfg owns it now */
	pf->mf = NULL;
	if (ov && apply_overrides(cfg, ov, err, errlen))
		goto fail;
	const char *why = serving ? services_differ(serving, cfg) : NULL;
	if (why) {
		snprintf(err, errlen, "%s: %s; l7run keeps its listening sockets across reloads, restart it to "
			 "change them", path, why);
		goto fail;
	}
	return 0;
fail:
	config_free(cfg);
	policy_free(pf);
	return -1;
}

/* The second step, in both modes: load the object into the kernel (timed: the verifier is most
 * of a reload), then fill what its programs read before the first request: JWT keys and clock,
 * caller identities, rule tables, the tail-call chain of a split program. On failure *obj may
 * be set: the caller's unload closes it. */
/* The run-time switches (l7_config: --audit), before anything is attached. */
static int config_setup(const struct policy_env *env, struct bpf_object *obj, char *err, size_t errlen)
{
	struct l7_config c = { .flags = env->dp_flags, .log_sample = env->log_sample };
	__u32 k = 0;
	int fd = bpf_object__find_map_fd_by_name(obj, "l7_config");

	if (fd < 0 || bpf_map_update_elem(fd, &k, &c, BPF_ANY)) {
		snprintf(err, errlen, "cannot set l7_config: %s", fd < 0 ? "no such map (an older l7c's object?)" : strerror(errno));
		return -1;
	}
	return 0;
}

int version_open(struct policy_env *env, const struct policy_file *pf, const char *path, enum load_mode mode,
		 struct config *cfg, struct bpf_object **obj, int *clock_fd, uint64_t *load_us, char *err, size_t errlen)
{
	uint64_t t0 = now_us();

	*obj = open_policy(env, pf, path, mode, cfg, err, errlen);
	if (!*obj)
		return -1;
	*load_us = now_us() - t0;
	if (config_setup(env, *obj, err, errlen) ||
	    jwt_setup(env, *obj, cfg, clock_fd, err, errlen) ||   /* keys and callers before any request */
	    ident_setup(&env->ident, *obj, cfg, err, errlen) ||
	    ep_setup(&env->ep, *obj, cfg, err, errlen) ||
	    fill_rule_tables(*obj, cfg->mf, err, errlen) ||   /* before anything is attached */
	    fill_tail_calls(*obj, mode == LOAD_MESH, err, errlen) < 0)
		return -1;
	return 0;
}

/* Undo what version_config and version_open set up (both modes; the programs are detached). */
void version_close(struct policy_env *env, struct config *cfg, int clock_fd, struct bpf_object *obj)
{
	if (clock_fd >= 0)
		jwt_clock_watch(&env->jwt, clock_fd, 0);
	config_free(cfg);
	if (obj)
		bpf_object__close(obj);
}

/* Pin fd as DIR/NAME, replacing an older version's pin in one step (rename), so that
 * `l7run --stats` never finds the directory without it. */
void pin_replace(const char *dir, int fd, const char *name)
{
	char p[512], tmp[512];

	if (!dir[0] || fd < 0)
		return;
	snprintf(p, sizeof p, "%s/%s", dir, name);
	snprintf(tmp, sizeof tmp, "%s/tmp_%s", dir, name);   /* bpffs refuses dots */
	unlink(tmp);
	if (bpf_obj_pin(fd, tmp) || rename(tmp, p))
		fprintf(stderr, "l7run: pin %s: %s\n", p, strerror(errno));
}

/* The programs of one mode as DIR/prog_NAME (l7run --stats): those of progs.def, and the
 * decide programs NAME_k of its split host; a version with fewer has the rest of an older
 * one's unpinned. */
void pin_programs(const char *dir, struct bpf_object *obj, int mesh)
{
	char n[64], p[512];

	for (int i = 0; i < l7_n_progs; i++) {
		const struct prog_desc *d = &l7_progs[i];
		struct bpf_program *bp = prog_is_mesh(d) != mesh ? NULL : bpf_object__find_program_by_name(obj, d->name);
		snprintf(n, sizeof n, "prog_%s", d->name);
		if (bp)
			pin_replace(dir, bpf_program__fd(bp), n);
	}
	for (int i = 0; i < tail_chain_count(); i++) {
		const char *name = tail_chain_name(i, NULL);
		if ((strncmp(name, "l7_mesh_", 8) == 0) != mesh)
			continue;
		for (int k = 0; k < L7_MAX_TAILS; k++) {
			snprintf(n, sizeof n, "prog_%s_%d", name, k);
			struct bpf_program *bp = bpf_object__find_program_by_name(obj, n + 5);
			if (bp) {
				pin_replace(dir, bpf_program__fd(bp), n);
			} else {
				snprintf(p, sizeof p, "%s/%s", dir, n);
				unlink(p);
			}
		}
	}
}

/* Every program pin either mode makes. */
void unpin_programs(const char *dir)
{
	char p[512];

	for (int i = 0; i < l7_n_progs; i++) {
		snprintf(p, sizeof p, "%s/prog_%s", dir, l7_progs[i].name);
		unlink(p);
	}
	for (int i = 0; i < tail_chain_count(); i++)
		for (int k = 0; k < L7_MAX_TAILS; k++) {
			snprintf(p, sizeof p, "%s/prog_%s_%d", dir, tail_chain_name(i, NULL), k);
			unlink(p);
		}
}

int parse_addr(const char *s, struct sockaddr_in *a)
{
	char host[64];
	const char *colon = strrchr(s, ':');

	if (!colon || (size_t)(colon - s) >= sizeof host)
		return -1;
	memcpy(host, s, colon - s);
	host[colon - s] = 0;
	memset(a, 0, sizeof *a);
	a->sin_family = AF_INET;
	a->sin_port = htons((uint16_t)atoi(colon + 1));
	if (!strcmp(host, "localhost"))
		strcpy(host, "127.0.0.1");
	return inet_pton(AF_INET, host, &a->sin_addr) == 1 ? 0 : -1;
}

/* The configuration of a manifest (cfg takes it over; config_free frees both). */
void config_from_manifest(struct manifest *mf, struct config *cfg)
{
	memset(cfg, 0, sizeof *cfg);
	cfg->mf = mf;
	cfg->fallback = mf->n_fallback ? (int)mf->fallback[0].slot : -1;
	cfg->resp_mut = mf->n_flags && mf->flags[0].response_mutations;
	if (mf->n_policy)
		snprintf(cfg->policy, sizeof cfg->policy, "%s", mf->policy[mf->n_policy - 1].name.s);
	for (__u32 i = 0; i < mf->n_service; i++) {   /* the reader bounds them by MAX_SERVICES */
		struct cfg_endpoint *s = &cfg->service[cfg->n_services++];
		snprintf(s->name, sizeof s->name, "%s", mf->service[i].name.s);
		s->addr = (struct sockaddr_in){ .sin_family = AF_INET, .sin_port = htons((uint16_t)mf->service[i].port),
						.sin_addr.s_addr = htonl(mf->service[i].ip) };
		s->set = 1;
	}
	for (__u32 i = 0; i < mf->n_upstream; i++) {   /* record i is slot i, below L7_MAX_UPSTREAMS */
		struct cfg_endpoint *u = &cfg->upstream[i];
		manifest_slot_name(mf, i, u->name, sizeof u->name);
		u->addr = (struct sockaddr_in){ .sin_family = AF_INET, .sin_port = htons((uint16_t)mf->upstream[i].port),
						.sin_addr.s_addr = htonl(mf->upstream[i].ip) };
		u->set = 1;
	}
}

void config_free(struct config *cfg)
{
	ident_free(cfg);
	ep_free(cfg);
	if (cfg->mf)
		manifest_free(cfg->mf);
	free(cfg->mf);
	cfg->mf = NULL;
}

/* l7run --manifest POLICY.o: what the object tells l7run, as text. */
int print_manifest(const char *object)
{
	struct policy_file pf;
	char err[1024];

	if (policy_read(object, &pf, err, sizeof err)) {
		fprintf(stderr, "l7run: %s\n", err);
		return 1;
	}
	manifest_print(stdout, pf.mf);
	policy_free(&pf);
	return fflush(stdout) ? 1 : 0;
}

static int override(const char *arg, struct cfg_endpoint *tab, int n, int *count)
{
	int idx = 0;
	const char *eq = strchr(arg, '=');
	if (eq) {
		idx = atoi(arg);
		arg = eq + 1;
	}
	if (idx < 0 || idx >= n || parse_addr(arg, &tab[idx].addr))
		return -1;
	tab[idx].set = 1;
	if (!tab[idx].name[0])
		snprintf(tab[idx].name, sizeof tab[idx].name, "#%d", idx);
	if (count && *count <= idx)
		*count = idx + 1;
	return 0;
}

/* --listen, --upstream, --fallback: the command line wins over every version's manifest. */
int apply_overrides(struct config *cfg, const struct overrides *ov, char *err, size_t errlen)
{
	for (int i = 0; i < ov->n_listen; i++)
		if (override(ov->listen[i], cfg->service, MAX_SERVICES, &cfg->n_services)) {
			snprintf(err, errlen, "bad --listen %s", ov->listen[i]);
			return -1;
		}
	for (int i = 0; i < ov->n_up; i++)
		if (override(ov->up[i], cfg->upstream, L7_MAX_UPSTREAMS, NULL)) {
			snprintf(err, errlen, "bad --upstream %s", ov->up[i]);
			return -1;
		}
	if (ov->fallback != -2)
		cfg->fallback = ov->fallback;
	return 0;
}

/* Why the listening addresses of b differ from a's, or NULL. */
const char *services_differ(const struct config *a, const struct config *b)
{
	if (a->n_services != b->n_services)
		return "the number of services changed";
	for (int i = 0; i < a->n_services; i++)
		if (a->service[i].set != b->service[i].set ||
		    a->service[i].addr.sin_addr.s_addr != b->service[i].addr.sin_addr.s_addr ||
		    a->service[i].addr.sin_port != b->service[i].addr.sin_port)
			return "a service's listen address changed";
	return NULL;
}
