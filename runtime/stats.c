/* `l7run --stats DIR`: per-program run time from the kernel (needs the running l7run to have
 * been started with --bpf-stats, or kernel.bpf_stats_enabled=1), the policy's counters, how
 * many sockets the SOCKHASHes hold (all of the serving version), and the policy versions
 * loaded (hot reload). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include "l7run.h"

static const char *const prog_names[] = {
#define L7_PROG(name, section, entry, map) #name,
#include "l7/progs.def"
#undef L7_PROG
};

static const char *const stat_names[L7_STAT_MAX] = {
	"requests", "forwarded", "denied", "fallback", "pool_miss", "bad_request",
	"passed", "order_wait", "responses", "hdr_insert", "jwt_hit", "jwt_verify", "jwt_reject",
	"chain_fail",
};

static long sockhash_count(int fd)
{
	uint64_t k, next;
	long n = 0;
	void *prev = NULL;

	while (bpf_map_get_next_key(fd, prev, &next) == 0) {
		k = next;
		prev = &k;
		n++;
	}
	return n;
}

/* The l7_reload map: which version serves, reloads, what is draining. 1 if found. */
static int print_reload(const char *dir)
{
	char p[512];
	struct reload_state s;
	struct reload_version r;
	uint32_t k = 0;

	snprintf(p, sizeof p, "%s/map_l7_reload", dir);
	int fd = bpf_obj_get(p);
	if (fd < 0)
		return 0;
	if (bpf_map_lookup_elem(fd, &k, &s) == 0)
		printf("reload version %llu reloads %llu failed %llu live %llu draining %llu last_reload_ms %.1f\n",
		       (unsigned long long)s.version, (unsigned long long)s.reloads, (unsigned long long)s.failed,
		       (unsigned long long)s.live, (unsigned long long)s.draining, s.last_us / 1000.0);
	for (k = 1; k <= MAX_VERSIONS; k++)
		if (bpf_map_lookup_elem(fd, &k, &r) == 0 && r.id)
			printf("version %llu %s connections %llu map_kib %llu age_s %.1f\n", (unsigned long long)r.id,
			       r.draining ? "draining" : "serving", (unsigned long long)r.clients,
			       (unsigned long long)(r.mem >> 10), r.age_ms / 1000.0);
	close(fd);
	return 1;
}

int print_stats(const char *dir)
{
	char p[512];
	int ncpu = libbpf_num_possible_cpus(), found = 0;

	/* the programs of progs.def, then the decide programs of split ones (name_0, name_1, ...) */
	size_t nfixed = sizeof prog_names / sizeof prog_names[0];
	for (size_t i = 0, k = 0; i < nfixed + (size_t)tail_chain_count();) {
		char name[64];
		if (i < nfixed)
			snprintf(name, sizeof name, "%s", prog_names[i]);
		else
			snprintf(name, sizeof name, "%s_%zu", tail_chain_name((int)(i - nfixed), NULL), k);
		snprintf(p, sizeof p, "%s/prog_%s", dir, name);
		int fd = bpf_obj_get(p);
		if (i >= nfixed && (fd < 0 || ++k == L7_MAX_TAILS)) {   /* the end of this chain */
			i++;
			k = 0;
		} else if (i < nfixed) {
			i++;
		}
		if (fd < 0 && errno == ENOENT)
			continue;   /* a program of the other mode (gateway/mesh), or of no chain */
		if (fd < 0) {
			fprintf(stderr, "l7run: %s: %s\n", p, strerror(errno));
			return 1;
		}
		found++;
		struct bpf_prog_info info;
		uint32_t len = sizeof info;
		memset(&info, 0, sizeof info);
		if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0)
			printf("prog %-20s run_cnt %llu run_time_ns %llu ns_per_run %.1f\n", name,
			       (unsigned long long)info.run_cnt, (unsigned long long)info.run_time_ns,
			       info.run_cnt ? (double)info.run_time_ns / info.run_cnt : 0.0);
		close(fd);
	}
	if (!found) {
		/* mesh mode pins its maps and the reload state, not its programs */
		if (print_reload(dir))
			return 0;
		fprintf(stderr, "l7run: no programs pinned in %s\n", dir);
		return 1;
	}
	snprintf(p, sizeof p, "%s/map_l7_stats", dir);
	int sfd = bpf_obj_get(p);
	if (sfd >= 0 && ncpu > 0) {
		uint64_t *v = calloc((size_t)ncpu, sizeof *v);
		for (uint32_t i = 0; i < L7_STAT_MAX; i++) {
			uint64_t sum = 0;
			if (bpf_map_lookup_elem(sfd, &i, v) == 0)
				for (int c = 0; c < ncpu; c++)
					sum += v[c];
			printf("stat %-12s %llu\n", stat_names[i], (unsigned long long)sum);
		}
		free(v);
		close(sfd);
	}
	const char *maps[] = { "l7_clients", "l7_upstreams" };
	for (int i = 0; i < 2; i++) {
		snprintf(p, sizeof p, "%s/map_%s", dir, maps[i]);
		int fd = bpf_obj_get(p);
		if (fd >= 0) {
			printf("sockets %-12s %ld\n", maps[i], sockhash_count(fd));
			close(fd);
		}
	}
	print_reload(dir);
	return 0;
}
