/* l7run: the gateway runtime. Loads a compiled policy, attaches it, owns the sockets and the
 * connection pool; request bytes only pass through it on the slow path (pool miss, deny,
 * fallback, bad requests, keeping responses in order). */
#ifndef L7RUN_H
#define L7RUN_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <bpf/libbpf.h>
#include "l7/dataplane.h"
#include "manifest.h"
#include "probe.h"

#define MAX_SERVICES 16
#define MAX_FDS      65536

struct cfg_endpoint {
	char name[L7M_NAME_MAX + 8];   /* an endpoint of a set: NAME#i */
	struct sockaddr_in addr;
	int set;
};

/* A version's configuration as run: its manifest with the command line's overrides. */
struct config {
	struct manifest *mf;     /* the object's manifest (owned): JWTs, tables, names, ... */
	char policy[L7M_NAME_MAX + 1];   /* the last policy's name, for the log */
	struct cfg_endpoint service[MAX_SERVICES];
	int n_services;
	struct cfg_endpoint upstream[L7_MAX_UPSTREAMS];
	int fallback;            /* upstream index, -1 = none */
	struct idents *idents;   /* its caller identities (identities.c), NULL if none */
	int resp_mut;            /* rules mutate responses: client sockets get the SK_MSG that edits them */
};

/* An object file read into memory once: its manifest and its programs are the same bytes. */
struct policy_file {
	char *buf;
	size_t len;
	struct manifest *mf;     /* its manifest, read and checked */
};

/* Command-line settings applied to every version's config (reload.c). */
struct overrides {
	const char *listen[MAX_SERVICES];
	int n_listen;
	const char *up[L7_MAX_UPSTREAMS];
	int n_up;
	int fallback;            /* -2: not given */
};

#define MAX_VERSIONS 16          /* policy versions loaded at once (serving + draining) */

/* One loaded policy object: its programs are attached to its own SOCKHASHes, it has its own
 * pool, and every client it accepted stays with it until the client closes (reload.c). */
struct version {
	int id;                  /* 1, 2, ... in order of publication */
	struct bpf_object *obj;
	char path[512];
	struct config cfg;
	int map_clients, map_upstreams, map_conns, map_ctl, map_pass, map_txq, map_txport, map_stats;
	int map_counters;
	int map_upstat;          /* l7_upstat: per-upstream telemetry, and l7run's own answers */
	int map_rxq, map_rxport; /* response edits (resp_mut); -1 otherwise */
	int n_progs;
	int prog_fd[8], prog_map[8], prog_type[8];
	int clock_fd;            /* l7_jwt_clock, -1 if none */
	uint64_t mem;            /* kernel memory of its maps after loading (memlock bytes) */
	uint64_t load_us;        /* open + verify */
	/* pool.c: its pool */
	struct pool_sock *idle[L7_MAX_UPSTREAMS];
	int pool_count[L7_MAX_UPSTREAMS];
	int n_clients;           /* clients accepted into it, not yet finished */
	int retired;             /* a newer version takes the new clients */
	uint64_t retired_at;     /* ms */
	uint64_t published_at;   /* ms */
	struct version *older;
};

/* The l7_reload map (created and pinned by l7run, read by --stats/--metrics/--reload):
 * key 0 the summary, keys 1..MAX_VERSIONS one loaded version each (id 0: unused row). */
struct reload_state {
	uint64_t version;        /* serving */
	uint64_t reloads;        /* published */
	uint64_t failed;         /* refused: the previous version kept serving */
	uint64_t live;           /* versions loaded: serving + draining */
	uint64_t last_us;        /* SIGHUP to the new version taking connections, last reload */
	uint64_t draining;       /* versions draining */
};
struct reload_version {
	uint64_t id;
	uint64_t clients;        /* connections it judges */
	uint64_t mem;            /* kernel memory of its maps (bytes) */
	uint64_t draining;       /* 1: retired, waiting for its connections to end */
	uint64_t age_ms;         /* since it was published */
	uint64_t pad;
};
_Static_assert(sizeof(struct reload_state) == sizeof(struct reload_version), "one value size");

struct runtime {
	struct version *cur;     /* the newest version: new clients go into it */
	int n_versions;
	int next_id;
	char obj_path[512];      /* what a reload loads */
	struct overrides ov;
	char pin_dir[256];
	int stats_fd;            /* BPF_ENABLE_STATS handle, -1 if off */
	int verbose;
	int pool_max;            /* pool sockets per upstream and version */
	uint64_t drain_ms;       /* --drain-timeout */
	int epfd;
	struct kernel_probe probe;   /* what this kernel can do (probe.c), asked at the first load */
	/* Held by the run loop while it changes rt.cur or unloads a version, and by the
	 * --metrics-listen thread while it reads the serving version's maps. */
	pthread_mutex_t lock;
};

extern struct runtime rt;

#define vlog(...) do { if (rt.verbose) { fprintf(stderr, "l7run: " __VA_ARGS__); fputc('\n', stderr); } } while (0)

/* load.c */
enum load_mode { LOAD_GATEWAY, LOAD_MESH };
int policy_read(const char *path, struct policy_file *pf, char *err, size_t errlen);
void policy_free(struct policy_file *pf);
void config_from_manifest(struct manifest *mf, struct config *cfg);
void config_free(struct config *cfg);
struct bpf_object *open_policy(const struct policy_file *pf, const char *path, enum load_mode mode,
			       const struct config *cfg, char *err, size_t errlen);
int version_config(const char *path, const struct config *serving, const struct overrides *ov,
		   struct policy_file *pf, struct config *cfg, char *err, size_t errlen);
int version_open(const struct policy_file *pf, const char *path, enum load_mode mode, struct config *cfg,
		 struct bpf_object **obj, int *clock_fd, uint64_t *load_us, char *err, size_t errlen);
void version_close(struct config *cfg, int clock_fd, struct bpf_object *obj);
struct version *version_load(const char *path, char *err, size_t errlen);
void version_unload(struct version *v);
void version_pin(struct version *v);
void version_unpin(void);
void pin_replace(const char *dir, int fd, const char *name);
void pin_programs(const char *dir, struct bpf_object *obj, int mesh);   /* DIR/prog_NAME */
void unpin_programs(const char *dir);
uint64_t object_mem(struct bpf_object *obj);
int parse_addr(const char *s, struct sockaddr_in *a);
int apply_overrides(struct config *cfg, const struct overrides *ov, char *err, size_t errlen);
const char *services_differ(const struct config *a, const struct config *b);

/* answer.c: l7run's own HTTP answers; why: a reason for the body (NULL: the status alone) */
int http_answer(char *buf, size_t cap, int status, int close_conn, int head_only);
int http_answer_why(char *buf, size_t cap, int status, int close_conn, int head_only, const char *why);

/* identities.c: l7_idents from the manifest / --identities FILE, re-read when it changes */
struct idents;
int ident_file_arg(const char *path);
int ident_setup(struct bpf_object *obj, struct config *cfg, char *err, size_t errlen);
void ident_watch(struct config *cfg, int on);
void ident_free(struct config *cfg);
void ident_tick(void);

/* jwt.c: l7_jwt_keys from the manifest / --jwt-key, l7_jwt_clock */
int jwt_key_arg(const char *arg);
int jwt_setup(struct bpf_object *obj, const struct config *cfg, int *clock_fd, char *err, size_t errlen);
void jwt_clock_watch(int fd, int on);
void jwt_tick(void);

/* reload.c: SIGHUP, the loader thread, the l7_reload state map, --reload, --pidfile */
struct reload_counters {
	uint64_t reloads;        /* published */
	uint64_t failed;         /* refused */
	uint64_t last_us;        /* SIGHUP to serving, last reload */
};
extern struct reload_counters RC;
int reload_init(const char *path, int (*load)(const char *path, char *err, size_t errlen, void **out));
void reload_poll(void);                                        /* start a load when signalled */
void reload_done(void (*publish)(void *v, uint64_t t_signal));  /* its eventfd fired */
int reload_busy(void);
void reload_fini(void (*discard)(void *v));
int reload_command(const char *target, const char *pin_dir);
uint64_t now_us(void);
int state_map_create(const char *pin_dir);
int state_map_fd(void);
void state_write(const struct reload_version *rows, int n);
int pidfile_write(const char *path);

/* drain.c: gateway versions: publish, drain and unload retired ones */
int gateway_load(const char *path, char *err, size_t errlen, void **out);
void gateway_discard(void *v);
void gateway_publish(void *v, uint64_t t_signal);
void gateway_retire_tick(void);
int gateway_draining(void);
void gateway_unload_all(void);

/* stats.c: the data plane's counters as l7/counters.def names them (index: enum l7_stat) */
struct stat_desc {
	const char *name, *kind, *help;
};
extern const struct stat_desc l7_stat_desc[L7_STAT_MAX];
int bpf_stats_on(void);   /* --bpf-stats: the BPF_ENABLE_STATS handle, -1 (and said) */
void stat_bump(int stats_fd, uint32_t key);   /* a counter of kind RT */
int print_stats(const char *pin_dir);
int print_metrics(const char *pin_dir, const char *object);
int print_manifest(const char *object);   /* l7run --manifest (load.c) */
/* metrics.c */
int write_metrics(FILE *out, int counters_fd, int entry_fd, int stats_fd, int upstat_fd, int reload_fd,
		  const struct config *cfg);
/* l7run answered `status` itself (bytes long): for upstream `up`, which it could not reach,
 * or (up -1) on its own account */
void upstat_answer(int upstat_fd, int up, int status, size_t bytes);
/* metrics_http.c: GET /metrics on ADDR:PORT, from a thread that calls `write` per scrape */
typedef int (*metrics_writer)(FILE *out);
int metrics_http_start(const char *addr, metrics_writer write);
void metrics_http_stop(void);
int fill_rule_tables(struct bpf_object *obj, const struct manifest *mf, char *err, size_t errlen);   /* tables.c */
/* tails.c: fill the PROG_ARRAY of each split host of this mode (0 gateway, 1 mesh) before
 * anything is attached; returns the decide programs put in, -1 with err set. The chains, for
 * pins and --stats: */
int fill_tail_calls(struct bpf_object *obj, int mesh, char *err, size_t errlen);
int tail_chain_count(void);
const char *tail_chain_name(int i, const char **prog_array);

/* upstream.c: whether l7run's connects reach each upstream; each change is logged once */
void upstream_seen(const struct cfg_endpoint *e, int ok, const char *why);
int upstream_down(const struct cfg_endpoint *e);

/* What an epoll event's fd is. */
enum fd_kind { FD_NONE, FD_LISTENER, FD_CLIENT, FD_POOL, FD_RELOAD };

struct client;

/* A pooled upstream connection, in l7_upstreams. Bound to one client while that client is
 * connected (so pairing is by construction), back in the idle list afterwards. */
struct pool_sock {
	int fd;
	uint64_t cookie;
	int up;                  /* upstream index */
	uint32_t port;           /* local port (key of l7_txport) */
	int connecting;          /* non-blocking connect in progress */
	int dead;                /* backend closed or error: never reuse */
	struct version *v;       /* the version whose l7_upstreams holds it */
	struct client *owner;
	struct pool_sock *next_idle;
};

/* Where the body pieces of the request l7run is handling go. */
enum body_dest { BODY_NONE, BODY_TO_POOL, BODY_DISCARD,
	BODY_HOLD };   /* chunked: kept until the kernel has framed the whole body, then sent */

/* Closing a client of a retired version at a request boundary (reload.c client_drain). */
enum drain_state {
	DRAIN_NONE,
	DRAIN_FROZEN,            /* l7_ctl frozen: every new head goes to l7run; wait, then re-check */
	DRAIN_FIN,               /* FIN sent: what still arrives is discarded, close at its EOF */
};

/* What must not change between the two looks at an idle client before its FIN. */
struct drain_snap {
	uint64_t pass_seq;
	uint64_t rx_done;
	uint64_t sent[L7_MAX_UPSTREAMS];
};

struct client {
	int fd;
	uint64_t cookie;
	int service;
	struct version *v;       /* the version whose l7_clients holds it, for its whole life */
	struct pool_sock *bind[L7_MAX_UPSTREAMS];
	uint64_t next_seq;       /* next l7_pass record to handle */
	char *in;                /* passed bytes read but not yet consumed */
	size_t in_len, in_cap;
	enum body_dest body;
	struct pool_sock *body_to;
	int close_after;         /* close once the current exchange is answered */
	int closing;             /* peer closed or we decided to: drain, then close */
	uint64_t quiet_since;    /* closing: when it was first seen quiet */
	uint64_t deadline;       /* closing: give up draining */
	int waiting;             /* a record waits for quiet, a connect or a pool socket */
	uint64_t wait_since;
	unsigned char conn_err[L7_MAX_UPSTREAMS];  /* a connect to this upstream failed */
	int idx;                 /* position in the client list */
	uint64_t own_bytes;      /* bytes l7run wrote to this client itself */
	int rx_set;              /* its l7_rxq / l7_rxport entries exist (rules edit responses) */
	struct l7_rx_key rx_key;
	/* A chunked request l7run forwards is held whole first: forwarding its head before the
	 * body framed cleanly gave the backend a request the data plane then refused (400). */
	char *held;
	size_t held_len, held_cap;
	struct l7_pass held_rec; /* its head record */
	int held_done;           /* the last piece is in `held` */
	enum drain_state drain;
	uint64_t drain_at;
	struct drain_snap snap;
	/* stall watch (conn.c client_watch): bytes received and disposed of at the last look */
	uint64_t seen_rx, seen_done, stuck_since;
	int stalled;             /* judged stuck once: l7_ctl frozen, FIN at the next look */
};

struct fd_ent {
	enum fd_kind kind;
	int service;
	void *p;
};

extern struct fd_ent *fds;

/* pool.c */
uint64_t sock_cookie(int fd);
uint64_t now_ms(void);
uint64_t pool_inflight(struct pool_sock *ps);
struct pool_sock *pool_get(struct client *c, int up, int *err);
void pool_bind(struct client *c, struct pool_sock *ps);
void pool_release(struct pool_sock *ps);
void pool_event(struct pool_sock *ps, uint32_t ev);
int pool_send(struct pool_sock *ps, const char *buf, size_t len, const struct l7_pass *rec);
void pool_close_all(void);
void pool_close_version(struct version *v);
void ctl_publish(struct client *c);

/* main.c: the command line (options.def); gateway mode */
struct l7run_args {
	const char *obj;          /* POLICY.o */
	const char *pidfile, *metrics_addr;
	const char *stats_dir, *metrics_dir, *reload, *manifest;   /* commands */
	int help, probe, mesh, bpf_stats;
	const char *cgroup;       /* mesh mode */
	int create_cgroup, pool_n;
	char **cmd;               /* `-- CMD [ARGS]`, NULL-terminated; NULL if none */
};
int gateway_run_loop(volatile sig_atomic_t *stopping);

/* mesh.c: l7run --mesh (mesh mode, its own runtime) */
int mesh_main(const struct l7run_args *a);

/* child.c: SIGTERM/SIGINT (to CMD while it runs), SIGCHLD; -- CMD */
void signals_init(volatile sig_atomic_t *stop);
int child_start(char **argv);
int child_finish(int rc);

/* conn.c */
int listen_services(void);
void accept_clients(int lfd, int service);
void client_event(struct client *c, uint32_t ev);
void client_pump(struct client *c);
void client_tick(void);
void client_close_all(void);
void client_finish(struct client *c);
int clients_waiting(void);
int client_idle(struct client *c, struct drain_snap *snap);
void client_fin(struct client *c, uint64_t linger_ms);
void client_watch(void);
struct client **client_list(int *n);

#endif
