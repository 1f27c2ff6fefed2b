/* `l7run --metrics PIN_DIR POLICY.o`: the policy's telemetry in Prometheus text format (for a
 * textfile collector, or to read by eye): the Counter instances, the hits of every rule (with
 * its line, policy and decision, so requests per route and per status class follow), and the
 * data plane's own counters. Names come from the object's l7.config section. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "l7run.h"

/* Sum of a per-CPU u64 slot. */
static unsigned long long percpu_sum(int fd, uint32_t key, int ncpu, uint64_t *buf)
{
	unsigned long long sum = 0;
	if (bpf_map_lookup_elem(fd, &key, buf) == 0)
		for (int c = 0; c < ncpu; c++)
			sum += buf[c];
	return sum;
}

int print_metrics(const char *dir, const char *object)
{
	char p[512];
	snprintf(p, sizeof p, "%s/map_l7_counters", dir);
	int fd = bpf_obj_get(p);
	char *text = config_text(object);
	int ncpu = libbpf_num_possible_cpus();
	if (fd < 0 || !text || ncpu <= 0) {
		fprintf(stderr, "l7run: --metrics: %s\n", fd < 0 ? "no pinned l7_counters (is l7run running with --pin?)"
							      : "the object has no l7.config section");
		free(text);
		return 1;
	}
	uint64_t *buf = calloc((size_t)ncpu, sizeof *buf);
	printf("# HELP l7_counter_total Counter instances of the policy (Increment).\n# TYPE l7_counter_total counter\n");
	for (char *save = NULL, *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char name[64], policy[64], term[16], target[64] = "";
		int idx, id;
		unsigned lineno;
		if (sscanf(line, "counter %d %63s", &idx, name) == 2) {
			printf("l7_counter_total{name=\"%s\"} %llu\n", name, percpu_sum(fd, (uint32_t)idx, ncpu, buf));
		} else if (sscanf(line, "rule %d counter %d line %u policy %63s %15s %63s", &id, &idx, &lineno, policy, term,
				  target) >= 5) {
			printf("l7_rule_hits_total{rule=\"%d\",line=\"%u\",policy=\"%s\",decision=\"%s\",target=\"%s\"} %llu\n", id,
			       lineno, policy, term, target, percpu_sum(fd, (uint32_t)idx, ncpu, buf));
		}
	}
	close(fd);
	snprintf(p, sizeof p, "%s/map_l7_stats", dir);
	int sfd = bpf_obj_get(p);
	static const char *const names[] = { "requests", "forwarded", "denied", "fallback", "pool_miss", "bad_request" };
	for (uint32_t i = 0; sfd >= 0 && i < sizeof names / sizeof names[0]; i++)
		printf("l7_dataplane_%s_total %llu\n", names[i], percpu_sum(sfd, i, ncpu, buf));
	if (sfd >= 0)
		close(sfd);
	free(buf);
	free(text);
	return 0;
}
