/* The policy's telemetry in Prometheus text format, from `l7run --metrics PIN_DIR POLICY.o`
 * (for a textfile collector, or to read by eye) or over HTTP (--metrics-listen, metrics_http.c):
 * the Counter instances, the hits of every rule (with its line, policy and decision), the
 * data plane's own counters, and per upstream the responses by status class and the bytes
 * each way (l7_upstat, l7/dataplane.h), with l7run's own answers beside them. Names come from
 * the object's manifest (and the command line's --upstream). */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "telemetry.h"

/* Sum of a per-CPU u64 slot. */
static unsigned long long percpu_sum(int fd, uint32_t key, int ncpu, uint64_t *buf)
{
	unsigned long long sum = 0;
	if (bpf_map_lookup_elem(fd, &key, buf) == 0)
		for (int c = 0; c < ncpu; c++)
			sum += buf[c];
	return sum;
}

/* The metric families, from l7/counters.def: each is introduced by its HELP and TYPE. */
enum {
#define L7_METRIC(id, name, kind, help) FAM_##id,
#include "l7/counters.def"
#undef L7_METRIC
};
static const struct {
	const char *name, *kind, *help;
} families[] = {
#define L7_METRIC(id, name, kind, help) { #name, #kind, help },
#include "l7/counters.def"
#undef L7_METRIC
};

static const char *family(FILE *out, int id)
{
	fprintf(out, "# HELP %s %s\n# TYPE %s %s\n", families[id].name, families[id].help, families[id].name,
		families[id].kind);
	return families[id].name;
}

/* A label value as the text format wants it: backslash, double quote and newline escaped. */
static void label_value(FILE *out, const char *v)
{
	for (; *v; v++) {
		if (*v == '\\' || *v == '"')
			fputc('\\', out);
		if (*v == '\n')
			fputs("\\n", out);
		else
			fputc(*v, out);
	}
}

/* The reload state (l7_reload, reload.c): which version serves, reloads done and refused. */
static void write_reload(FILE *out, int reload_fd)
{
	struct reload_state rs;
	uint32_t k = 0;

	if (reload_fd < 0 || bpf_map_lookup_elem(reload_fd, &k, &rs))
		return;
	fprintf(out, "%s %llu\n", family(out, FAM_VERSION), (unsigned long long)rs.version);
	fprintf(out, "%s %llu\n", family(out, FAM_RELOADS), (unsigned long long)rs.reloads);
	fprintf(out, "%s %llu\n", family(out, FAM_RELOAD_FAILS), (unsigned long long)rs.failed);
	const char *pf = family(out, FAM_POLICY_FAILS);
	fprintf(out, "%s{stage=\"compile\"} %llu\n%s{stage=\"load\"} %llu\n", pf, (unsigned long long)rs.build_failed, pf,
		(unsigned long long)rs.failed);
	fprintf(out, "%s %llu\n", family(out, FAM_DRAINING), (unsigned long long)rs.draining);
	fprintf(out, "%s %.6f\n", family(out, FAM_RELOAD_LAST), rs.last_us / 1e6);
}

/* The sums over CPUs of row `key` of l7_upstat, added to *sum. 0 if found. */
static int upstat_sum(int fd, uint32_t key, int ncpu, struct l7_upstat *sum)
{
	struct l7_upstat *rows = calloc((size_t)ncpu, sizeof *rows);
	int rc = rows ? bpf_map_lookup_elem(fd, &key, rows) : -1;

	for (int c = 0; rc == 0 && c < ncpu; c++) {
		for (int i = 0; i < 6; i++)
			sum->status[i] += rows[c].status[i];
		sum->req_bytes += rows[c].req_bytes;
		sum->resp_bytes += rows[c].resp_bytes;
	}
	free(rows);
	return rc;
}

static void write_classes(FILE *out, const char *metric, const char *upstream, const struct l7_upstat *u)
{
	for (int i = 1; i <= 6; i++) {
		int c = i % 6;   /* 1xx .. 5xx, then [0]: a status outside 100-599, only once one was seen */
		if (!c && !u->status[0])
			continue;
		fprintf(out, "%s{", metric);
		if (upstream) {
			fputs("upstream=\"", out);
			label_value(out, upstream);
			fputs("\",", out);
		}
		if (c)
			fprintf(out, "class=\"%dxx\"} %llu\n", c, (unsigned long long)u->status[c]);
		else
			fprintf(out, "class=\"other\"} %llu\n", (unsigned long long)u->status[0]);
	}
}

/* One byte counter per upstream slot: resp 0 the request bytes, 1 the response bytes. */
static void write_bytes(FILE *out, int id, const struct config *cfg, const struct l7_upstat *u, int resp)
{
	const char *metric = family(out, id);

	for (int i = 0; i < L7_MAX_UPSTREAMS; i++)
		if (cfg->upstream[i].set) {
			fprintf(out, "%s{upstream=\"", metric);
			label_value(out, cfg->upstream[i].name);
			fprintf(out, "\"} %llu\n", (unsigned long long)(resp ? u[i].resp_bytes : u[i].req_bytes));
		}
}

/* Per upstream slot (named as the manifest and --upstream name it: `upstream="api"`, an endpoint
 * of a set `upstream="users#0"`): what it answered, and the 502s l7run answered because it
 * could not reach it; then l7run's own answers, whose bytes include those 502s. */
static void write_upstat(FILE *out, int fd, int ncpu, const struct config *cfg)
{
	struct l7_upstat u[L7_MAX_UPSTREAMS], local;

	if (fd < 0 || !cfg)
		return;
	memset(u, 0, sizeof u);
	memset(&local, 0, sizeof local);
	for (uint32_t i = 0; i < L7_MAX_UPSTREAMS; i++) {
		struct l7_upstat fail;
		memset(&fail, 0, sizeof fail);
		upstat_sum(fd, i, ncpu, &u[i]);
		upstat_sum(fd, L7_UPSTAT_FAIL + i, ncpu, &fail);
		for (int c = 0; c < 6; c++)
			u[i].status[c] += fail.status[c];
		local.resp_bytes += fail.resp_bytes;
	}
	upstat_sum(fd, L7_UPSTAT_LOCAL, ncpu, &local);
	const char *metric = family(out, FAM_UP_RESPONSES);
	for (int i = 0; i < L7_MAX_UPSTREAMS; i++)
		if (cfg->upstream[i].set)
			write_classes(out, metric, cfg->upstream[i].name, &u[i]);
	write_bytes(out, FAM_UP_REQ_BYTES, cfg, u, 0);
	write_bytes(out, FAM_UP_RESP_BYTES, cfg, u, 1);
	write_classes(out, family(out, FAM_LOCAL), NULL, &local);
	fprintf(out, "%s %llu\n", family(out, FAM_LOCAL_BYTES), (unsigned long long)local.resp_bytes);
}

/* l7run answered `status` itself with `bytes` bytes, for upstream `up` when it could not reach
 * it (-1: its own answer): count it in l7run's rows of l7_upstat (their only writer; the data
 * plane never touches them). On CPU 0's value: the sum is what is read. */
static void upstat_add(int fd, uint32_t key, int status, size_t req_bytes, size_t resp_bytes);

void upstat_answer(int fd, int up, int status, size_t bytes)
{
	upstat_add(fd, up >= 0 && up < L7_MAX_UPSTREAMS ? L7_UPSTAT_FAIL + (uint32_t)up : L7_UPSTAT_LOCAL, status, 0, bytes);
}

/* Traffic with upstream up that l7run relayed itself (an HTTP/2 client's connection to it,
 * runtime/mesh_h2.c): in the upstream's own row, as the data plane counts what it sends
 * (upstat.h); status: a response's final one (0: bytes only). */
void upstat_upstream(int fd, int up, int status, size_t req_bytes, size_t resp_bytes)
{
	if (up >= 0 && up < L7_MAX_UPSTREAMS)
		upstat_add(fd, (uint32_t)up, status, req_bytes, resp_bytes);
}

static void upstat_add(int fd, uint32_t key, int status, size_t req_bytes, size_t resp_bytes)
{
	int ncpu = libbpf_num_possible_cpus();
	struct l7_upstat *rows = fd >= 0 && ncpu > 0 ? calloc((size_t)ncpu, sizeof *rows) : NULL;

	if (rows && !bpf_map_lookup_elem(fd, &key, rows)) {
		if (status)
			rows[0].status[status >= 100 && status < 600 ? status / 100 : 0]++;
		rows[0].req_bytes += req_bytes;
		rows[0].resp_bytes += resp_bytes;
		bpf_map_update_elem(fd, &key, rows, BPF_ANY);
	}
	free(rows);
}

/* The rule hits (the manifest's RULE records): a rule of its own has a slot of l7_counters,
 * a rule a table holds its own entry of l7_entry_hits, at its own line. */
static void write_rule_hits(FILE *out, const struct manifest *mf, int counters_fd, int entry_fd, int ncpu, uint64_t *buf)
{
	const char *metric = family(out, FAM_RULE_HITS);

	for (__u32 i = 0; i < mf->n_rule; i++) {
		const struct l7m_rule *r = &mf->rule[i];
		unsigned long long n = 0;
		if (r->entry == L7M_NONE) {
			n = percpu_sum(counters_fd, r->counter, ncpu, buf);
		} else if (entry_fd >= 0) {
			uint64_t v = 0;
			bpf_map_lookup_elem(entry_fd, &r->entry, &v);
			n = v;
		}
		char target[L7M_NAME_MAX + 8] = "";
		if (r->decision == L7M_D_DENY)
			snprintf(target, sizeof target, "%u", r->status);
		else if (r->target != L7M_NONE)   /* the upstream (a set: its name) */
			snprintf(target, sizeof target, "%s", mf->upstream[r->target].name.s);
		fprintf(out, "%s{rule=\"%u\",line=\"%u\",policy=\"", metric, r->id, r->line);
		label_value(out, mf->policy[r->policy].name.s);
		fprintf(out, "\",decision=\"%s\",target=\"", manifest_decision(r->decision));
		label_value(out, target);
		fprintf(out, "\"} %llu\n", n);
	}
}

/* The audited denies, per rule id (the audit counters after the rule hits in l7_counters): a
 * series for every rule that audited at least one, at the line of its first RULE record (a
 * table's group rule: its first entry's); rule="0" line="0" is an ALLOW policy's 403 (the
 * manifest does not say which policies are ALLOW policies). */
static void write_audits(FILE *out, const struct manifest *mf, int counters_fd, int ncpu, uint64_t *buf)
{
	const char *metric = family(out, FAM_AUDIT_DENIES);
	unsigned long long rbac = percpu_sum(counters_fd, L7_AUDIT_COUNTER(0), ncpu, buf);
	__u32 last = 0;

	if (rbac)
		fprintf(out, "%s{rule=\"0\",line=\"0\"} %llu\n", metric, rbac);
	for (__u32 i = 0; i < mf->n_rule; i++) {
		const struct l7m_rule *r = &mf->rule[i];
		if (r->id == last || r->id >= L7_MAX_COUNTERS)
			continue;
		last = r->id;
		unsigned long long n = percpu_sum(counters_fd, L7_AUDIT_COUNTER(r->id), ncpu, buf);
		if (n)
			fprintf(out, "%s{rule=\"%u\",line=\"%u\"} %llu\n", metric, r->id, r->line, n);
	}
}

static void endpoint_labels(FILE *out, const char *metric, const struct ep_health *h)
{
	char ip[INET_ADDRSTRLEN];
	inet_ntop(AF_INET, &h->addr.sin_addr, ip, sizeof ip);
	fprintf(out, "%s{upstream=\"", metric);
	label_value(out, h->upstream);
	fprintf(out, "\",endpoint=\"%s:%d\"", ip, ntohs(h->addr.sin_port));
}

/* The health of the run-time endpoints l7run has connected to or checked (their rows,
 * endpoints.c), and the retries per upstream (the counts of its slots, summed). */
static void write_health(FILE *out, const struct config *cfg)
{
	static const char *const results[] = EP_CHECK_NAMES;
	const struct ep_health *h;
	int in_set;
	const char *metric = family(out, FAM_EJECTIONS);
	for (int i = 0; (h = ep_health_row(cfg, i, &in_set)); i++) {
		endpoint_labels(out, metric, h);
		fprintf(out, "} %llu\n", (unsigned long long)h->ejections);
	}
	metric = family(out, FAM_EP_HEALTHY);
	for (int i = 0; (h = ep_health_row(cfg, i, &in_set)); i++)
		if (in_set) {   /* an endpoint that left its set has no state to report */
			endpoint_labels(out, metric, h);
			fprintf(out, "} %d\n", !h->ejected && !h->down);
		}
	metric = family(out, FAM_HEALTH_CHECKS);
	for (int i = 0; (h = ep_health_row(cfg, i, &in_set)); i++) {
		uint64_t any = 0;
		for (int r = 0; r < EP_CHECK_KINDS; r++)
			any |= h->checks[r];
		for (int r = 0; any && r < EP_CHECK_KINDS; r++)
			if (h->checks[r] || r == EP_CHECK_PASSED) {   /* passed=0 too: a rate of zero to alert on */
				endpoint_labels(out, metric, h);
				fprintf(out, ",result=\"%s\"} %llu\n", results[r], (unsigned long long)h->checks[r]);
			}
	}
	metric = family(out, FAM_RETRIES);
	const struct manifest *mf = cfg->mf;
	for (__u32 s = 0; s < mf->n_upstream; s++) {
		if (mf->upstream[s].endpoint != 0 || !ep_retries(cfg, (int)s))
			continue;
		uint64_t n = 0;
		for (__u32 k = s; k < s + mf->upstream[s].endpoints && k < L7_MAX_UPSTREAMS; k++)
			n += __atomic_load_n(&cfg->upstream[k].retries, __ATOMIC_RELAXED);
		fprintf(out, "%s{upstream=\"", metric);
		label_value(out, mf->upstream[s].name.s);
		fprintf(out, "\"} %llu\n", (unsigned long long)n);
	}
}

/* The metrics of one loaded policy: its l7_counters, l7_stats and l7_upstat maps, its
 * manifest and its configuration as run (cfg: names of the upstreams); the counters are
 * the serving version's (a reload starts them from zero, which Prometheus reads as a counter
 * reset). Every family is grouped, after its HELP and TYPE (text format 0.0.4). */
int write_metrics(FILE *out, int counters_fd, int entry_fd, int stats_fd, int upstat_fd, int reload_fd,
		  const struct config *cfg)
{
	int ncpu = libbpf_num_possible_cpus();
	if (counters_fd < 0 || !cfg || !cfg->mf || ncpu <= 0)
		return -1;
	const struct manifest *mf = cfg->mf;
	uint64_t *buf = calloc((size_t)ncpu, sizeof *buf);
	const char *metric = family(out, FAM_INCREMENTS);
	for (__u32 i = 0; i < mf->n_counter; i++) {
		fprintf(out, "%s{name=\"", metric);
		label_value(out, mf->counter[i].name.s);
		fprintf(out, "\"} %llu\n", percpu_sum(counters_fd, i, ncpu, buf));
	}
	write_rule_hits(out, mf, counters_fd, entry_fd, ncpu, buf);
	write_audits(out, mf, counters_fd, ncpu, buf);
	if (stats_fd >= 0)   /* also an event of l7_dataplane_total; a family of its own to alert on */
		fprintf(out, "%s %llu\n", family(out, FAM_LOG_DROPPED), percpu_sum(stats_fd, L7_STAT_LOG_DROPPED, ncpu, buf));
	metric = family(out, FAM_DATAPLANE);
	for (uint32_t i = 0; stats_fd >= 0 && i < L7_STAT_MAX; i++)
		fprintf(out, "%s{event=\"%s\"} %llu\n", metric, l7_stat_desc[i].name, percpu_sum(stats_fd, i, ncpu, buf));
	write_upstat(out, upstat_fd, ncpu, cfg);
	write_health(out, cfg);
	write_reload(out, reload_fd);
	free(buf);
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
	struct policy_file pf;
	struct config cfg;
	char err[1024];
	memset(&cfg, 0, sizeof cfg);
	int read = policy_read(object, &pf, err, sizeof err) == 0;
	if (read) {
		config_from_manifest(pf.mf, &cfg);   /* upstream names as the object has them (no --upstream here) */
		pf.mf = NULL;
		policy_free(&pf);
	}
	int rc = fd < 0 || !read ? -1 : write_metrics(stdout, fd, efd, sfd, ufd, rfd, &cfg);
	if (rc)
		fprintf(stderr, "l7run: --metrics: %s\n", fd < 0 ? "no pinned l7_counters (is l7run running with --pin?)" : err);
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
	config_free(&cfg);
	return rc ? 1 : 0;
}
