/* l7run: the gateway runtime. Loads a compiled policy, attaches it, owns the sockets and the
 * connection pool; request bytes only pass through it on the slow path (pool miss, deny,
 * fallback, bad requests, keeping responses in order). */
#ifndef L7RUN_H
#define L7RUN_H

#include <netinet/in.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <bpf/libbpf.h>
#include "l7/dataplane.h"

#define MAX_SERVICES 16
#define MAX_FDS      65536

struct cfg_endpoint {
	char name[64];
	struct sockaddr_in addr;
	int set;
};

struct config {
	char policy[64];
	struct cfg_endpoint service[MAX_SERVICES];
	int n_services;
	struct cfg_endpoint upstream[L7_MAX_UPSTREAMS];
	int fallback;            /* upstream index, -1 = none */
};

struct runtime {
	struct bpf_object *obj;
	int map_clients, map_upstreams, map_conns, map_ctl, map_pass, map_txq, map_txport, map_stats;
	int n_progs;
	int prog_fd[8], prog_map[8], prog_type[8];
	char pin_dir[256];
	int stats_fd;            /* BPF_ENABLE_STATS handle, -1 if off */
	struct config cfg;
	int verbose;
	int pool_max;            /* pool sockets per upstream */
	int epfd;
};

extern struct runtime rt;

#define vlog(...) do { if (rt.verbose) { fprintf(stderr, "l7run: " __VA_ARGS__); fputc('\n', stderr); } } while (0)

/* load.c */
int load_object(const char *path);
int read_config(const char *path, struct config *cfg);
int parse_addr(const char *s, struct sockaddr_in *a);
void unload_object(void);

/* identities.c: l7_idents from l7.config / --identities FILE, re-read when it changes */
int ident_config_line(const char *line);
int ident_file_arg(const char *path);
int ident_setup(struct bpf_object *obj);
void ident_tick(void);

/* jwt.c: l7_jwt_keys from l7.config / --jwt-key, l7_jwt_clock */
int jwt_config_line(const char *line);
int jwt_key_arg(const char *arg);
int jwt_setup(struct bpf_object *obj);
void jwt_tick(void);

/* stats.c */
int print_stats(const char *pin_dir);
int print_metrics(const char *pin_dir, const char *object);
int write_metrics(FILE *out, int counters_fd, int stats_fd, const char *config);   /* metrics.c */
/* metrics_http.c: GET /metrics on ADDR:PORT, from a thread that calls `write` per scrape */
typedef int (*metrics_writer)(FILE *out);
int metrics_http_start(const char *addr, metrics_writer write);
void metrics_http_stop(void);
int fill_rule_tables(struct bpf_object *obj, const char *object_path);   /* tables.c */
char *config_text(const char *object_path);   /* the l7.config section, malloc'd (load.c) */

/* What an epoll event's fd is. */
enum fd_kind { FD_NONE, FD_LISTENER, FD_CLIENT, FD_POOL };

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
	struct client *owner;
	struct pool_sock *next_idle;
};

/* Where the body pieces of the request l7run is handling go. */
enum body_dest { BODY_NONE, BODY_TO_POOL, BODY_DISCARD,
	BODY_HOLD };   /* chunked: kept until the kernel has framed the whole body, then sent */

struct client {
	int fd;
	uint64_t cookie;
	int service;
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
	/* A chunked request l7run forwards is held whole first: forwarding its head before the
	 * body framed cleanly gave the backend a request the data plane then refused (400). */
	char *held;
	size_t held_len, held_cap;
	struct l7_pass held_rec; /* its head record */
	int held_done;           /* the last piece is in `held` */
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
void ctl_publish(struct client *c);

/* mesh.c: l7run --mesh (mesh mode, its own runtime) */
int mesh_main(int argc, char **argv);

/* main.c */
int gateway_run_loop(volatile sig_atomic_t *stopping);

/* conn.c */
int listen_services(void);
void accept_clients(int lfd, int service);
void client_event(struct client *c, uint32_t ev);
void client_pump(struct client *c);
void client_tick(void);
void client_close_all(void);
void client_wake_owner(struct pool_sock *ps);
int clients_waiting(void);

#endif
