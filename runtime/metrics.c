/* The policy's telemetry in Prometheus text format, from `l7run --metrics PIN_DIR POLICY.o`
 * (for a textfile collector, or to read by eye) or over HTTP (--metrics-listen, metrics_http.c): the Counter instances, the hits of every rule (with
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

static const char *const stat_names[L7_STAT_MAX] = {
	[L7_STAT_REQUESTS] = "requests", [L7_STAT_FORWARDED] = "forwarded", [L7_STAT_DENIED] = "denied",
	[L7_STAT_FALLBACK] = "fallback", [L7_STAT_POOL_MISS] = "pool_miss", [L7_STAT_BAD_REQUEST] = "bad_request",
	[L7_STAT_PASSED] = "passed_to_l7run", [L7_STAT_ORDER_WAIT] = "order_wait", [L7_STAT_RESPONSES] = "responses",
	[L7_STAT_HDR_INSERT] = "header_inserts", [L7_STAT_JWT_HIT] = "jwt_cache_hits",
	[L7_STAT_JWT_VERIFY] = "jwt_verifications", [L7_STAT_JWT_REJECT] = "jwt_rejects",
	[L7_STAT_CHAIN_FAIL] = "tail_call_failures", [L7_STAT_STALL_CLOSED] = "stalled_clients_closed",
};

/* The reload state (l7_reload, reload.c): which version serves, reloads done and refused. */
static void write_reload(FILE *out, int reload_fd)
{
	struct reload_state rs;
	uint32_t k = 0;

	if (reload_fd < 0 || bpf_map_lookup_elem(reload_fd, &k, &rs))
		return;
	fprintf(out, "# HELP l7_policy_version Policy version serving new connections (1 = as started).\n"
		"# TYPE l7_policy_version gauge\nl7_policy_version %llu\n"
		"# HELP l7_reloads_total Reloads published.\n# TYPE l7_reloads_total counter\nl7_reloads_total %llu\n"
		"# HELP l7_reload_failures_total Reloads refused (the serving version stayed).\n"
		"# TYPE l7_reload_failures_total counter\nl7_reload_failures_total %llu\n"
		"# HELP l7_versions_draining Older versions still judging connections.\n"
		"# TYPE l7_versions_draining gauge\nl7_versions_draining %llu\n"
		"# HELP l7_reload_last_seconds From the signal to the new version taking connections, last reload.\n"
		"# TYPE l7_reload_last_seconds gauge\nl7_reload_last_seconds %.6f\n",
		(unsigned long long)rs.version, (unsigned long long)rs.reloads, (unsigned long long)rs.failed,
		(unsigned long long)rs.draining, rs.last_us / 1e6);
}

/* The metrics of one loaded policy: its l7_counters and l7_stats maps and its l7.config text;
 * the counters are the serving version's (a reload starts them from zero, which Prometheus
 * reads as a counter reset). */
int write_metrics(FILE *out, int counters_fd, int stats_fd, int reload_fd, const char *config)
{
	int ncpu = libbpf_num_possible_cpus();
	char *text = config ? strdup(config) : NULL;
	if (counters_fd < 0 || !text || ncpu <= 0) {
		free(text);
		return -1;
	}
	uint64_t *buf = calloc((size_t)ncpu, sizeof *buf);
	fprintf(out, "# HELP l7_counter_total Counter instances of the policy (Increment).\n# TYPE l7_counter_total counter\n");
	for (char *save = NULL, *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char name[64], policy[64], term[16], target[64] = "";
		int idx, id;
		unsigned lineno;
		if (sscanf(line, "counter %d %63s", &idx, name) == 2) {
			fprintf(out, "l7_counter_total{name=\"%s\"} %llu\n", name, percpu_sum(counters_fd, (uint32_t)idx, ncpu, buf));
		} else if (sscanf(line, "rule %d counter %d line %u policy %63s %15s %63s", &id, &idx, &lineno, policy, term,
				  target) >= 5) {
			fprintf(out, "l7_rule_hits_total{rule=\"%d\",line=\"%u\",policy=\"%s\",decision=\"%s\",target=\"%s\"} %llu\n",
				id, lineno, policy, term, target, percpu_sum(counters_fd, (uint32_t)idx, ncpu, buf));
		}
	}
	fprintf(out, "# HELP l7_dataplane_total What the kernel data plane did, by event.\n# TYPE l7_dataplane_total counter\n");
	for (uint32_t i = 0; stats_fd >= 0 && i < L7_STAT_MAX; i++)
		if (stat_names[i])
			fprintf(out, "l7_dataplane_total{event=\"%s\"} %llu\n", stat_names[i], percpu_sum(stats_fd, i, ncpu, buf));
	write_reload(out, reload_fd);
	free(buf);
	free(text);
	return 0;
}

int print_metrics(const char *dir, const char *object)
{
	char p[512];
	snprintf(p, sizeof p, "%s/map_l7_counters", dir);
	int fd = bpf_obj_get(p);
	snprintf(p, sizeof p, "%s/map_l7_stats", dir);
	int sfd = bpf_obj_get(p);
	snprintf(p, sizeof p, "%s/map_l7_reload", dir);
	int rfd = bpf_obj_get(p);
	char *text = config_text(object);
	int rc = fd < 0 || !text ? -1 : write_metrics(stdout, fd, sfd, rfd, text);
	if (rc)
		fprintf(stderr, "l7run: --metrics: %s\n", fd < 0 ? "no pinned l7_counters (is l7run running with --pin?)"
							    : "the object has no l7.config section");
	if (fd >= 0)
		close(fd);
	if (sfd >= 0)
		close(sfd);
	if (rfd >= 0)
		close(rfd);
	free(text);
	return rc ? 1 : 0;
}
