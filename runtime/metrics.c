/* The policy's telemetry in Prometheus text format, from `l7run --metrics PIN_DIR POLICY.o`
 * (for a textfile collector, or to read by eye) or over HTTP (--metrics-listen, metrics_http.c):
 * the Counter instances, the hits of every rule (with its line, policy and decision), the
 * data plane's own counters, and per upstream the responses by status class and the bytes
 * each way (l7_upstat, l7/dataplane.h), with l7run's own answers beside them. Names come from
 * the object's l7.config section (and the command line's --upstream). */
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

/* The sums over CPUs of row `key` of l7_upstat. 0 if found. */
static int upstat_sum(int fd, uint32_t key, int ncpu, struct l7_upstat *sum)
{
	struct l7_upstat *rows = calloc((size_t)ncpu, sizeof *rows);
	int rc = rows ? bpf_map_lookup_elem(fd, &key, rows) : -1;

	memset(sum, 0, sizeof *sum);
	for (int c = 0; rc == 0 && c < ncpu; c++) {
		for (int i = 0; i < 6; i++)
			sum->status[i] += rows[c].status[i];
		sum->req_bytes += rows[c].req_bytes;
		sum->resp_bytes += rows[c].resp_bytes;
	}
	free(rows);
	return rc;
}

static void write_classes(FILE *out, const char *metric, const char *label, const struct l7_upstat *u)
{
	for (int c = 1; c <= 5; c++)
		fprintf(out, "%s{%sclass=\"%dxx\"} %llu\n", metric, label, c, (unsigned long long)u->status[c]);
	if (u->status[0])   /* a status outside 100-599: only when one was seen */
		fprintf(out, "%s{%sclass=\"other\"} %llu\n", metric, label, (unsigned long long)u->status[0]);
}

/* One byte counter per upstream slot: resp 0 the request bytes, 1 the response bytes. */
static void write_bytes(FILE *out, const char *metric, const char *help, const struct config *cfg,
			const struct l7_upstat *u, int resp)
{
	fprintf(out, "# HELP %s %s\n# TYPE %s counter\n", metric, help, metric);
	for (int i = 0; i < L7_MAX_UPSTREAMS; i++)
		if (cfg->upstream[i].set)
			fprintf(out, "%s{upstream=\"%s\"} %llu\n", metric, cfg->upstream[i].name,
				(unsigned long long)(resp ? u[i].resp_bytes : u[i].req_bytes));
}

/* Per upstream slot (named as l7.config and --upstream name it: `upstream="api"`, an endpoint
 * of a set `upstream="users#0"`), then l7run's own answers. */
static void write_upstat(FILE *out, int fd, int ncpu, const struct config *cfg)
{
	struct l7_upstat u[L7_UPSTAT_ROWS];
	char label[96];

	if (fd < 0 || !cfg)
		return;
	for (uint32_t i = 0; i < L7_UPSTAT_ROWS; i++)
		upstat_sum(fd, i, ncpu, &u[i]);
	fprintf(out, "# HELP l7_upstream_responses_total Response heads received from each upstream, by status class "
		     "(interim 1xx counted in 1xx).\n# TYPE l7_upstream_responses_total counter\n");
	for (int i = 0; i < L7_MAX_UPSTREAMS; i++)
		if (cfg->upstream[i].set) {
			snprintf(label, sizeof label, "upstream=\"%s\",", cfg->upstream[i].name);
			write_classes(out, "l7_upstream_responses_total", label, &u[i]);
		}
	write_bytes(out, "l7_upstream_request_bytes_total",
		    "Request bytes sent to each upstream (heads after header mutations, and bodies).", cfg, u, 0);
	write_bytes(out, "l7_upstream_response_bytes_total",
		    "Response bytes received from each upstream (heads before response mutations, and bodies).", cfg, u, 1);
	fprintf(out, "# HELP l7_local_responses_total Answers l7run wrote itself (denies, malformed requests, "
		     "unreachable upstreams), by status class.\n# TYPE l7_local_responses_total counter\n");
	write_classes(out, "l7_local_responses_total", "", &u[L7_UPSTAT_LOCAL]);
	fprintf(out, "# HELP l7_local_response_bytes_total Bytes of the answers l7run wrote itself.\n"
		     "# TYPE l7_local_response_bytes_total counter\nl7_local_response_bytes_total %llu\n",
		(unsigned long long)u[L7_UPSTAT_LOCAL].resp_bytes);
}

/* l7run answered `status` itself with `bytes` bytes: count it in the local row of l7_upstat
 * (its only writer; the data plane never touches that row). On CPU 0's value: the sum is
 * what is read. */
void upstat_local(int fd, int status, size_t bytes)
{
	static struct l7_upstat *rows;
	static int ncpu;
	uint32_t key = L7_UPSTAT_LOCAL;

	if (fd < 0)
		return;
	if (!rows) {
		ncpu = libbpf_num_possible_cpus();
		rows = ncpu > 0 ? calloc((size_t)ncpu, sizeof *rows) : NULL;
		if (!rows)
			return;
	}
	if (bpf_map_lookup_elem(fd, &key, rows))
		return;
	rows[0].status[status >= 100 && status < 600 ? status / 100 : 0]++;
	rows[0].resp_bytes += bytes;
	bpf_map_update_elem(fd, &key, rows, BPF_ANY);
}

/* The metrics of one loaded policy: its l7_counters, l7_stats and l7_upstat maps, its
 * l7.config text and its configuration as run (cfg: names of the upstreams); the counters are
 * the serving version's (a reload starts them from zero, which Prometheus reads as a counter
 * reset). */
int write_metrics(FILE *out, int counters_fd, int entry_fd, int stats_fd, int upstat_fd, int reload_fd, const char *config,
		  const struct config *cfg)
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
		} else if (sscanf(line, "rule %d entry %d line %u policy %63s %15s %63s", &id, &idx, &lineno, policy, term,
				  target) >= 5) {   /* a rule a table holds: its own count, at its own line */
			uint64_t n = 0;
			uint32_t key = (uint32_t)idx;
			if (entry_fd >= 0)
				bpf_map_lookup_elem(entry_fd, &key, &n);
			fprintf(out, "l7_rule_hits_total{rule=\"%d\",line=\"%u\",policy=\"%s\",decision=\"%s\",target=\"%s\"} %llu\n",
				id, lineno, policy, term, target, (unsigned long long)n);
		}
	}
	fprintf(out, "# HELP l7_dataplane_total What the kernel data plane did, by event.\n# TYPE l7_dataplane_total counter\n");
	for (uint32_t i = 0; stats_fd >= 0 && i < L7_STAT_MAX; i++)
		if (stat_names[i])
			fprintf(out, "l7_dataplane_total{event=\"%s\"} %llu\n", stat_names[i], percpu_sum(stats_fd, i, ncpu, buf));
	write_upstat(out, upstat_fd, ncpu, cfg);
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
	snprintf(p, sizeof p, "%s/map_l7_upstat", dir);
	int ufd = bpf_obj_get(p);
	snprintf(p, sizeof p, "%s/map_l7_entry_hits", dir);
	int efd = bpf_obj_get(p);
	char *text = config_text(object);
	struct config cfg;
	memset(&cfg, 0, sizeof cfg);
	if (text)
		parse_config(text, &cfg);   /* upstream names as the object has them (no --upstream here) */
	int rc = fd < 0 || !text ? -1 : write_metrics(stdout, fd, efd, sfd, ufd, rfd, text, &cfg);
	if (rc)
		fprintf(stderr, "l7run: --metrics: %s\n", fd < 0 ? "no pinned l7_counters (is l7run running with --pin?)"
							    : "the object has no l7.config section");
	if (fd >= 0)
		close(fd);
	if (sfd >= 0)
		close(sfd);
	if (rfd >= 0)
		close(rfd);
	if (ufd >= 0)
		close(ufd);
	if (efd >= 0)
		close(efd);
	ident_free(&cfg);
	free(text);
	return rc ? 1 : 0;
}
