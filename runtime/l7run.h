/* l7run: runs a compiled policy in the kernel, in gateway mode (l7run owns the client and pool
 * sockets; request bytes pass through it only on the slow path) or mesh mode (clients and
 * backends in one cgroup, requests moved between their sockets by the kernel). One core serves
 * both: the event loop, the policy versions (load off the loop, publish, drain, unload), hot
 * reload, signals and -- CMD; a mode provides a table of operations (struct mode_ops) for what
 * the two really do differently. All state is in one context, struct l7run, passed down as L.
 *
 * Layers, lowest first. A file includes only headers of its own layer or a lower one, and the
 * files of one mode never include another mode's header (tests/runtime/layers.py checks this
 * list against the #include lines):
 *   base:      base.h h2_refuse.h h2_frames.h h2_reenc.h
 *                                         base.c answer.c h2_refuse.c h2_frames.c h2_reenc.c
 *   policy:    policy.h manifest.h probe.h
 *                                         manifest.c load.c jwt.c identities.c endpoints.c tables.c
 *                                         tails.c probe.c
 *   telemetry: telemetry.h                stats.c metrics.c metrics_http.c
 *   core:      l7run.h                    core.c version.c reload.c child.c upstream.c health.c alog.c watch.c
 *   pool:      pool.h                     pool.c
 *   modes:     gateway.h mesh.h modes.h   gateway.c gateway_conn.c gateway_pool.c
 *                                         mesh.c mesh_client.c mesh_pool.c mesh_outside.c mesh_h2.c
 *   main:                                 main.c
 * mode gateway: gateway.h gateway.c gateway_conn.c gateway_pool.c
 * mode mesh: mesh.h mesh.c mesh_client.c mesh_pool.c mesh_outside.c mesh_h2.c
 * The core calls a mode only through its mode_ops; the pool calls its owner only through its
 * pool_ops (pool.h); main.c picks the mode's table (modes.h). */
#ifndef L7RUN_H
#define L7RUN_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <time.h>
#include "policy.h"
#include "telemetry.h"

#define MAX_FDS 65536            /* RLIMIT_NOFILE, and the loop's table of fds */

struct l7run;

/* The command line (main.c, options.def). */
struct l7run_args {
	const char *obj;          /* POLICY.o */
	const char *pidfile, *metrics_addr, *access_log;
	const char *stats_dir, *metrics_dir, *reload, *manifest;   /* commands */
	int help, probe, mesh, bpf_stats;
	const char *cgroup;       /* mesh mode */
	int create_cgroup, pool_n;
	const char *h2c;          /* mesh mode: --h2c, the upstreams that speak h2c */
	int pool_max;             /* gateway mode: pool sockets per upstream and version */
	int pool_idle;            /* gateway mode: idle ones kept for the kernel to take (l7_idle) */
	uint64_t drain_ms;        /* gateway mode: --drain-timeout */
	const char *watch;        /* --watch DIR: build the policy from it (watch.c), no POLICY.o */
	const char *l7c, *status_file;
	uint64_t grace_ms;        /* --grace-period: SIGTERM drains this long at most (0: stop at once) */
	char **cmd;               /* `-- CMD [ARGS]`, NULL-terminated; NULL if none */
};

/* ---- the event loop (core.c) ------------------------------------------------------------ */

/* Something with an fd in the loop: its events go to ready(). Embedded in what owns the fd
 * (a client, a pool socket, a listener...), which container_of finds again. */
struct io {
	void (*ready)(struct l7run *L, struct io *io, uint32_t events);
};

/* Which io an fd's events go to; gen tells an event of a closed fd from one of its successor
 * (several events come in one epoll_wait, and handling one may close another's fd). */
struct loop_slot {
	struct io *io;
	uint32_t gen;
};

int loop_watch(struct l7run *L, int fd, struct io *io, uint32_t events);   /* add or change */
void loop_unwatch(struct l7run *L, int fd);   /* no more events; the fd stays open */
void loop_close(struct l7run *L, int fd);     /* unwatch and close */

struct listener {
	struct io io;
	int fd;
	int service;
};

/* ---- policy versions (version.c) ------------------------------------------------------- */

/* One loaded policy object. A mode's version starts with this (its first member), so that the
 * core can free it; the mode adds its maps and attachments. Every connection is judged by one
 * version for its whole life, so a retired version stays loaded until its last one is gone. */
struct version {
	int id;                  /* 1, 2, ... in order of publication */
	char path[512];
	struct config cfg;
	struct bpf_object *obj;
	int clock_fd;            /* l7_jwt_clock, -1 if none */
	int counters, entry_hits, stats, upstat;   /* the maps telemetry reads (-1 if absent) */
	uint64_t mem;            /* kernel memory of its maps after loading (memlock bytes) */
	uint64_t load_us;        /* open + verify */
	uint64_t publish_us;     /* what the mode's part of publishing took (mode_ops.publish_step) */
	int retired;             /* a newer version takes the new connections */
	uint64_t retired_at, published_at;   /* ms */
	int n_conns;             /* connections it judges */
	struct version *older;
	/* the access log (alog.c): l7_log's reader, its fd in the loop; NULL without --access-log */
	struct ring_buffer *log_rb;
	struct io log_io;
	FILE *log_out;
	struct alog_join *log_join;   /* requests waiting for their response's record */
	uint16_t *rule_line;     /* .l7 line of each rule id (the manifest's RULE records) */
	uint32_t n_rule_line;
};

struct version *version_load(struct l7run *L, const char *path, const struct config *serving, char *err, size_t errlen);
void version_drop(struct l7run *L, struct version *v);   /* unload: the mode's part, then the object */
void version_publish(struct l7run *L, struct version *v, uint64_t t_signal);
void versions_tick(struct l7run *L, uint64_t now);
int versions_draining(struct l7run *L);
void versions_unload_all(struct l7run *L);
void versions_unpin(struct l7run *L);
void state_update(struct l7run *L);   /* the l7_reload rows, now (else every second) */
int serving_metrics(void *arg, FILE *out);   /* --metrics-listen's writer: the serving version */
int serving_health(void *arg, int ready, char *why, size_t n);   /* its /healthz and /readyz */

/* A map a mode pins for the serving version (besides the telemetry maps): DIR/pin. */
struct pin_name {
	const char *map, *pin;
};

/* ---- what a mode provides --------------------------------------------------------------- */

struct mode_ops {
	const char *name;          /* "gateway", "mesh" */
	const char *tag;           /* what its log lines start with */
	const char *pin_prefix;    /* default pin directory /sys/fs/bpf/PREFIX-PID */
	enum load_mode load_mode;  /* which programs of the object it loads */
	size_t version_size;       /* of its version struct, which starts with struct version */
	const struct pin_name *pins;   /* ends with { NULL } */
	const char *publish_step;  /* what publish() spends its time on, in the reload line; NULL: nothing */
	unsigned look_ms;          /* how often retired versions are looked at (0: every turn of the loop) */

	/* before the first load (its state in L->m); 0, or the exit code */
	int (*init)(struct l7run *L);
	/* a version: load (the mode's part, after the core's: its maps, pool, attachments; the
	 * loader thread: touches nothing the loop uses), publish (the mode's part, before the core
	 * makes it the newest; -1 refuses it), unload (let go of the mode's part: connections,
	 * pool, attachments; the core closes the rest); -1 with err saying why */
	int (*load)(struct l7run *L, struct version *v, char *err, size_t errlen);
	int (*publish)(struct l7run *L, struct version *v, struct version *old, char *err, size_t errlen);
	void (*unload)(struct l7run *L, struct version *v);
	/* retired versions: one step of closing their connections at request boundaries (NULL:
	 * the mode cannot close them); how many connections v still judges (NULL: v->n_conns is
	 * kept current by the mode; -1: not known yet); close every one of them now (NULL: cannot,
	 * so the version stays until they end) */
	void (*drain)(struct l7run *L, uint64_t now);
	int (*count)(struct l7run *L, struct version *v);
	void (*evict)(struct l7run *L, struct version *v);
	/* traffic: a listener is readable; every turn of the loop; how soon it wants the next turn */
	void (*accept)(struct l7run *L, int lfd, int service);
	void (*tick)(struct l7run *L, uint64_t now);
	int (*poll_ms)(struct l7run *L);
	/* stopping: the loop ended (let what is in flight finish), close every connection, and
	 * after every version is unloaded */
	void (*stop)(struct l7run *L);
	void (*close)(struct l7run *L);
	void (*fini)(struct l7run *L);
};

/* ---- reload (reload.c) ------------------------------------------------------------------- */

/* The loader thread and what it hands back; the reload counters. */
struct reloader {
	int efd;                 /* the loader's eventfd, -1 before reload_init */
	struct io io;
	pthread_t th;
	int busy, pending;
	uint64_t pending_at;     /* us: the first unserved SIGHUP */
	uint64_t t_signal;       /* us: the SIGHUP the running load serves */
	const struct config *serving;   /* the serving version's config, for the load to compare */
	struct version *result;
	char err[1024];
	int state_fd;            /* the l7_reload map, -1 if none */
	uint64_t reloads;        /* published */
	uint64_t failed;         /* refused */
	uint64_t last_us;        /* SIGHUP to serving, last reload */
};

void reload_init(struct l7run *L);
void reload_request(struct l7run *L, int force);   /* SIGHUP (force: --watch builds even if unchanged) */
void reload_poll(struct l7run *L);      /* start a load when asked and none runs */
void reload_refused(struct l7run *L, const char *err);   /* counted, said, in the status */
void reload_fini(struct l7run *L);
int reload_command(const char *target, const char *pin_dir);
int state_map_create(struct l7run *L);
void state_write(struct l7run *L, const struct reload_version *rows, int n);
int pidfile_write(const char *path);

/* ---- the node agent: --watch DIR (watch.c) --------------------------------------------- */

/* The directory, as a kubelet updates a ConfigMap volume (the files are symlinks through
 * `..data`, which is swapped by a rename to a new timestamped directory); the builds, each in a
 * directory of its own under work; the outcomes, for --status-file. The loader thread runs a
 * build (watch_build) while the loop serves; the loop reads what it wrote once it is done. */
struct watch {
	int fd;                  /* inotify on DIR, -1 if not watching */
	struct io io;
	uint64_t dirty_at;       /* ms: a change seen and not yet acted on (0: none) */
	char work[256];          /* private: one directory per build */
	int n;                   /* builds started */
	int force;               /* SIGHUP: build even if the sources did not change (the loop's) */
	int forced;              /* the build running was asked so (handed to the loader) */
	int unchanged;           /* the last build found the sources it built last time */
	uint64_t digest;         /* of the sources being built */
	uint64_t serving;        /* of the sources the serving version was built from */
	uint64_t tried;          /* of the last sources built, served or not */
	int serving_build;       /* its build directory (work/N) */
	char l7c[512];           /* the compiler */
	char obj[512];           /* the object the build made (the load reads it); "" if none */
	char sources[512];       /* their names, for the status */
	uint64_t build_failed;   /* builds l7c refused */
	/* the last outcomes (status file) */
	time_t ok_at, err_at;
	int ok_version;
	uint64_t ok_digest, err_digest;
	char err_stage[16], err[1024];
};

int watch_init(struct l7run *L);
int watch_build(struct l7run *L, char *err, size_t errlen);   /* the loader: 0 built, 1 unchanged, -1 refused */
void watch_outcome(struct l7run *L, int published, const char *stage, const char *err);
void watch_tick(struct l7run *L, uint64_t now);   /* a change settled: ask for a reload */
void watch_fini(struct l7run *L);
void status_write(struct l7run *L);   /* --status-file, with or without --watch */

/* ---- upstream health (upstream.c) -------------------------------------------------------- */

#define HEALTH_MAX 256           /* addresses: upstreams of every loaded version */
struct health {
	struct {
		struct sockaddr_in addr;
		int down;
		uint64_t since;          /* ms: when it went down */
	} seen[HEALTH_MAX];
	int n;
};
/* What l7run's connects find (both modes); each change is logged once. */
void upstream_seen(struct l7run *L, const struct cfg_endpoint *e, int ok, const char *why);
/* a connection to it ended with a response owed: a failure for passive health (endpoints.c) */
void upstream_reset(struct l7run *L, const struct cfg_endpoint *e);

/* ---- active health checks (health.c) ------------------------------------------------------ */

/* One endpoint's checks: what the HEALTH record and the set say (compared every tick: a
 * change starts it anew), and the check under way on fd. */
struct probe {
	struct io io;
	int on;
	char set[L7M_NAME_MAX + 1];
	struct sockaddr_in addr;
	char path[1025], host[272];
	unsigned every_ms, timeout_ms, unhealthy, healthy, status_lo, status_hi;
	int fd, phase;
	uint64_t next_at, started, deadline;   /* ms */
	char buf[128];           /* the answer's first bytes: its status line */
	size_t got;
};
struct checks {
	struct probe p[L7_MAX_UPSTREAMS];   /* by backend slot of the serving version */
};
void checks_init(struct l7run *L);
void checks_tick(struct l7run *L, uint64_t now);
int checks_due_ms(struct l7run *L, uint64_t now);   /* -1: none due */
void checks_fini(struct l7run *L);

/* ---- the context ------------------------------------------------------------------------- */

struct l7run {
	const struct mode_ops *mode;
	void *m;                     /* the mode's own state */
	struct l7run_args args;
	struct policy_env env;       /* what every load reads: probe, overrides, JWT keys, identities */
	char pin_dir[256];
	int stats_fd;                /* BPF_ENABLE_STATS handle, -1 if off */
	/* the loop (core.c) */
	int epfd, sigfd;
	struct io sig_io;
	struct loop_slot *slot;      /* MAX_FDS */
	int stop;                    /* SIGTERM, SIGINT, or the -- CMD ended */
	uint64_t stopping;           /* ms: SIGTERM with --grace-period: draining since then (0: not) */
	int looping;                 /* the loop runs (the services listened on): ready; beat says when it last turned */
	uint64_t beat;               /* ms, read by the metrics thread (/healthz) */
	struct listener listener[MAX_SERVICES];
	int n_listeners;
	/* versions (version.c): newest first; changed by the loop under lock, which the
	 * --metrics-listen thread holds while it reads the serving version's maps */
	struct version *cur;
	int n_versions, next_id;
	uint64_t looked_at, stated_at;   /* ms */
	pthread_mutex_t lock;
	struct reloader reload;
	struct watch watch;
	struct health health;
	struct checks checks;        /* active health checks (health.c) */
	pid_t child;                 /* -- CMD while it runs (child.c), else 0 */
	struct metrics_http http;
	FILE *alog;                  /* --access-log FILE|-, NULL if none (alog.c) */
};

/* alog.c: the access log, one JSON line per request from each version's l7_log */
int alog_open(struct l7run *L, const char *path);
int alog_version_open(struct l7run *L, struct version *v, char *err, size_t errlen);   /* loader thread */
void alog_version_watch(struct l7run *L, struct version *v);   /* the loop: at publish */
void alog_version_close(struct l7run *L, struct version *v);   /* drains what is left */
/* l7run's own response record (an HTTP/2 stream's end, mesh_h2.c): joined as the kernel's */
void alog_response(struct version *v, const struct l7_log_resp *rs);
void alog_tick(struct l7run *L);   /* the loop: requests whose response is overdue go without */

void l7run_init(struct l7run *L, const struct mode_ops *mode);   /* defaults */
int l7run_serve(struct l7run *L);   /* run the mode until stopped; the exit code */

void say(const struct l7run *L, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define vlog(L, ...) do { if ((L)->env.verbose) say(L, __VA_ARGS__); } while (0)

/* child.c: -- CMD */
int child_start(struct l7run *L, char **argv);
int child_signal(struct l7run *L, int sig);   /* pass it on to CMD; 0 if none runs */
int child_ended(struct l7run *L);             /* SIGCHLD: CMD has ended */
int child_finish(struct l7run *L, int rc);

#endif
