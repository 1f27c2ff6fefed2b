/* `l7run --stats DIR`, for either mode's pin directory: per-program run time from the kernel
 * (needs the running l7run to have been started with --bpf-stats, or
 * kernel.bpf_stats_enabled=1), the data plane's counters (named by l7/counters.def; `stat NAME
 * VALUE`, three fields, as scripts read them), how many
 * sockets the SOCKHASHes hold and, in mesh mode, the state of the pool (all of the serving
 * version), and the policy versions loaded (hot reload). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include "l7/mesh.h"
#include "telemetry.h"

const struct stat_desc l7_stat_desc[L7_STAT_MAX] = {
#define L7_STAT(id, name, kind, help) [L7_STAT_##id] = { #name, #kind, help },
#include "l7/counters.def"
#undef L7_STAT
};

static const char *const prog_names[] = {
#define L7_PROG(name, section, entry, map, whole) #name,
#include "l7/progs.def"
#undef L7_PROG
};

/* A counter l7run keeps itself (kind RT in l7/counters.def): in CPU 0's value of its key,
 * which no program writes. */
void stat_bump(int stats_fd, uint32_t key)
{
	int ncpu = libbpf_num_possible_cpus();
	uint64_t *vals = ncpu > 0 && stats_fd >= 0 ? calloc((size_t)ncpu, sizeof *vals) : NULL;

	if (vals && !bpf_map_lookup_elem(stats_fd, &key, vals)) {
		vals[0]++;
		bpf_map_update_elem(stats_fd, &key, vals, BPF_ANY);
	}
	free(vals);
}

int bpf_stats_on(void)
{
	int fd = bpf_enable_stats(BPF_STATS_RUN_TIME);

	if (fd < 0)
		fprintf(stderr, "l7run: cannot enable BPF run-time stats: %s\n", strerror(errno));
	return fd;
}

static int pinned(const char *dir, const char *name)
{
	char p[512];

	snprintf(p, sizeof p, "%s/%s", dir, name);
	return bpf_obj_get(p);
}

static long sockhash_count(int fd)
{
	uint64_t k[2], next[2];   /* the largest key: a mesh 4-tuple */
	long n = 0;
	void *prev = NULL;

	while (bpf_map_get_next_key(fd, prev, next) == 0) {
		memcpy(k, next, sizeof k);
		prev = k;
		n++;
	}
	return n;
}

/* The l7_reload map: which version serves, reloads, what is draining, updates refused (failed:
 * by l7run, compile_failed: by l7c under --watch). 1 if found. */
static int print_reload(const char *dir)
{
	struct reload_state s;
	struct reload_version r;
	uint32_t k = 0;
	int fd = pinned(dir, "map_l7_reload");

	if (fd < 0)
		return 0;
	if (bpf_map_lookup_elem(fd, &k, &s) == 0)
		printf("reload version %llu reloads %llu failed %llu live %llu draining %llu last_reload_ms %.1f "
		       "compile_failed %llu\n",
		       (unsigned long long)s.version, (unsigned long long)s.reloads, (unsigned long long)s.failed,
		       (unsigned long long)s.live, (unsigned long long)s.draining, s.last_us / 1000.0,
		       (unsigned long long)s.build_failed);
	for (k = 1; k <= MAX_VERSIONS; k++)
		if (bpf_map_lookup_elem(fd, &k, &r) == 0 && r.id)
			printf("version %llu %s connections %llu map_kib %llu age_s %.1f\n", (unsigned long long)r.id,
			       r.draining ? "draining" : "serving", (unsigned long long)r.clients,
			       (unsigned long long)(r.mem >> 10), r.age_ms / 1000.0);
	close(fd);
	return 1;
}

static void print_prog(const char *name, int fd)
{
	struct bpf_prog_info info;
	uint32_t len = sizeof info;

	memset(&info, 0, sizeof info);
	if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0)
		printf("prog %-20s run_cnt %llu run_time_ns %llu ns_per_run %.1f\n", name, (unsigned long long)info.run_cnt,
		       (unsigned long long)info.run_time_ns, info.run_cnt ? (double)info.run_time_ns / info.run_cnt : 0.0);
}

/* The programs of progs.def, then the decide programs of split ones (name_0, name_1, ...):
 * those of the mode that pinned DIR. Returns how many, -1 on an error other than absence. */
static int print_progs(const char *dir)
{
	char name[64];
	int found = 0;

	for (size_t i = 0; i < sizeof prog_names / sizeof prog_names[0] + (size_t)tail_chain_count(); i++)
		for (int k = 0; k < L7_MAX_TAILS; k++) {
			size_t nfixed = sizeof prog_names / sizeof prog_names[0];
			if (i < nfixed)
				snprintf(name, sizeof name, "%s", prog_names[i]);
			else
				snprintf(name, sizeof name, "%s_%d", tail_chain_name((int)(i - nfixed), NULL), k);
			char pin[80];
			snprintf(pin, sizeof pin, "prog_%s", name);
			int fd = pinned(dir, pin);
			if (fd < 0 && errno != ENOENT) {
				fprintf(stderr, "l7run: %s/%s: %s\n", dir, pin, strerror(errno));
				return -1;
			}
			if (fd >= 0) {
				found++;
				print_prog(name, fd);
				close(fd);
			}
			if (i < nfixed || fd < 0)
				break;   /* one program, or the end of this chain */
		}
	return found;
}

/* Mesh mode: the pool slots by state, per upstream index (l7/mesh.h), and the sockets its
 * programs see by role. */
static void print_mesh(const char *dir)
{
	static const char *const state[] = { "empty", "idle", "busy", "orphan", "dead" };
	static const char *const role[] = { "other", "clients", "l7run_ends", "pool", "backends" };
	int fd = pinned(dir, "l7_mesh_pool");

	if (fd >= 0) {
		for (int up = 0; up < L7_MESH_UPSTREAMS; up++) {
			unsigned n[5] = { 0 };
			for (uint32_t i = 0; i < L7_MESH_SLOTS; i++) {
				uint32_t k = (uint32_t)up * L7_MESH_SLOTS + i;
				struct l7_mesh_slot s;
				if (!bpf_map_lookup_elem(fd, &k, &s) && s.state < 5)
					n[s.state]++;
			}
			if (n[0] == L7_MESH_SLOTS)
				continue;   /* an upstream index the policy does not use */
			printf("pool upstream %d", up);
			for (int st = 1; st < 5; st++)
				printf(" %s %u", state[st], n[st]);
			printf("\n");
		}
		close(fd);
	}
	fd = pinned(dir, "l7_mesh_conns");
	if (fd >= 0) {
		unsigned n[5] = { 0 };
		struct l7_mesh_key k, next;
		struct l7_mesh_conn c;
		void *prev = NULL;
		while (bpf_map_get_next_key(fd, prev, &next) == 0) {
			k = next;
			prev = &k;
			if (!bpf_map_lookup_elem(fd, &k, &c))
				n[c.role < 5 ? c.role : 0]++;
		}
		printf("mesh");
		for (int r = 1; r < 5; r++)
			printf(" %s %u", role[r], n[r]);
		printf("\n");
		close(fd);
	}
}

int print_stats(const char *dir)
{
	int ncpu = libbpf_num_possible_cpus();
	int found = print_progs(dir);

	if (found < 0)
		return 1;
	int sfd = pinned(dir, "map_l7_stats");
	if (!found && sfd < 0) {
		if (print_reload(dir))
			return 0;
		fprintf(stderr, "l7run: nothing of l7run's pinned in %s\n", dir);
		return 1;
	}
	if (sfd >= 0 && ncpu > 0) {
		uint64_t *v = calloc((size_t)ncpu, sizeof *v);
		for (uint32_t i = 0; v && i < L7_STAT_MAX; i++) {
			uint64_t sum = 0;
			if (bpf_map_lookup_elem(sfd, &i, v) == 0)
				for (int c = 0; c < ncpu; c++)
					sum += v[c];
			printf("stat %-24s %llu\n", l7_stat_desc[i].name, (unsigned long long)sum);   /* help: l7run --help */
		}
		free(v);
	}
	if (sfd >= 0)
		close(sfd);
	/* gateway: clients and pool sockets; mesh: every socket of the cgroup its programs see */
	static const char *const maps[][2] = { { "map_l7_clients", "l7_clients" }, { "map_l7_upstreams", "l7_upstreams" },
					       { "l7_mesh_socks", "l7_mesh_socks" } };
	for (int i = 0; i < 3; i++) {
		int fd = pinned(dir, maps[i][0]);
		if (fd >= 0) {
			printf("sockets %-12s %ld\n", maps[i][1], sockhash_count(fd));
			close(fd);
		}
	}
	print_mesh(dir);
	print_reload(dir);
	return 0;
}
