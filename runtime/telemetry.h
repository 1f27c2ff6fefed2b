/* telemetry.h: what l7run tells about itself: the data plane's counters (stats.c, named by
 * l7/counters.def), the Prometheus text (metrics.c) and its HTTP endpoint (metrics_http.c),
 * and the layout of the l7_reload map that the runtime writes and these read. Either mode's
 * pins, read the same way. */
#ifndef L7RUN_TELEMETRY_H
#define L7RUN_TELEMETRY_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include "policy.h"

#define MAX_VERSIONS 16          /* policy versions loaded at once (serving + draining) */

/* The l7_reload map (created and pinned by l7run, read by --stats/--metrics/--reload):
 * key 0 the summary, keys 1..MAX_VERSIONS one loaded version each (id 0: unused row). */
struct reload_state {
	uint64_t version;        /* serving */
	uint64_t reloads;        /* published */
	uint64_t failed;         /* refused: the previous version kept serving */
	uint64_t live;           /* versions loaded: serving + draining */
	uint64_t last_us;        /* SIGHUP to the new version taking connections, last reload */
	uint64_t draining;       /* versions draining */
	uint64_t build_failed;   /* --watch: sources l7c refused (the serving version stayed) */
};
struct reload_version {
	uint64_t id;
	uint64_t clients;        /* connections it judges */
	uint64_t mem;            /* kernel memory of its maps (bytes) */
	uint64_t draining;       /* 1: retired, waiting for its connections to end */
	uint64_t age_ms;         /* since it was published */
	uint64_t pad[2];
};
_Static_assert(sizeof(struct reload_state) == sizeof(struct reload_version), "one value size");

/* stats.c: the data plane's counters as l7/counters.def names them (index: enum l7_stat) */
struct stat_desc {
	const char *name, *kind, *help;
};
extern const struct stat_desc l7_stat_desc[L7_STAT_MAX];
int bpf_stats_on(void);   /* --bpf-stats: the BPF_ENABLE_STATS handle, -1 (and said) */
void stat_bump(int stats_fd, uint32_t key);   /* a counter of kind RT */
int print_stats(const char *pin_dir);
int print_metrics(const char *pin_dir, const char *object);

/* metrics.c */
int write_metrics(FILE *out, int counters_fd, int entry_fd, int stats_fd, int upstat_fd, int reload_fd,
		  const struct config *cfg);
/* l7run answered `status` itself (bytes long): for upstream `up`, which it could not reach,
 * or (up -1) on its own account */
void upstat_answer(int upstat_fd, int up, int status, size_t bytes);
void upstat_upstream(int upstat_fd, int up, int status, size_t req_bytes, size_t resp_bytes);

/* metrics_http.c: GET /metrics on ADDR:PORT, from a thread that calls `write(arg, out)` per
 * scrape (0, or -1 for a 503); GET /healthz and /readyz (Kubernetes' probes) call
 * `health(arg, ready, why, n)`: 0 answers 200, -1 503 with why as the body */
typedef int (*metrics_writer)(void *arg, FILE *out);
typedef int (*health_check)(void *arg, int ready, char *why, size_t n);
struct metrics_http {
	int fd;                  /* the listener, -1 when not serving */
	pthread_t thread;
	metrics_writer write;
	health_check health;
	void *arg;
};
int metrics_http_start(struct metrics_http *h, const char *addr, metrics_writer write, health_check health, void *arg);
void metrics_http_stop(struct metrics_http *h);

#endif
