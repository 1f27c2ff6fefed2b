/* l7run --mesh: the runtime of mesh mode (data plane: stdlib/bpf/mesh.h, types: l7/mesh.h).
 * It attaches the programs, keeps the pool of pre-opened connections to each upstream, listens
 * on the service addresses so that clients' connections establish, and handles the slow path:
 * requests the kernel could not send in order, answers (deny, 502/503), bad requests. */
#ifndef L7RUN_MESH_H
#define L7RUN_MESH_H

#include <signal.h>
#include <stdint.h>
#include <bpf/libbpf.h>
#include "l7/mesh.h"
#include "l7run.h"

#define MESH_MAX_CLIENTS 8192
#define MESH_MAX_RELAYS  1024   /* connections from outside the cgroup relayed at once */

struct mesh_pool_conn {
	int fd;                  /* l7run's end; -1 = none */
	uint32_t gen;
	uint64_t retry_at;       /* ms: next connect attempt while empty */
	uint64_t orphan_since;   /* ms: first seen ORPHAN (0: not) */
};

struct mesh_ver;

struct mesh_client {
	int fd;
	struct mesh_ver *v;      /* the version its application end (and so this end) is in */
	struct l7_mesh_key key;  /* the application's socket (responses and answers go there) */
	uint64_t next_seq;       /* next l7_mesh_pass record */
	uint64_t local_done;     /* answers written */
	char *in;                /* bytes received, not yet consumed by a record */
	size_t in_len, in_cap;
	int closing;             /* answered with connection: close */
	int eof;                 /* the client sent FIN */
	uint64_t close_at;       /* ms: close after the answer drained */
	uint64_t close_when;     /* close once this many responses are delivered (0: no) */
	/* a request with a chunked body (L7_MP_CHUNKED): held in `in` until its last chunk */
	int chunk;               /* 1: framing it */
	uint32_t chunk_slot;     /* pool index it goes to */
	uint64_t chunk_req;      /* its request seq */
	size_t chunk_pos;        /* framed up to here */
	uint64_t chunk_left;     /* data bytes left of the current chunk, then its CRLF */
	int chunk_state;         /* 0 size line, 1 data, 2 CRLF after data */
};

/* One loaded policy object (mesh_reload.c): its sock_ops on the cgroup (a bpf_link of its
 * own), its SK_MSG on its own l7_mesh_socks, its own pool. A socket is judged by the version
 * that enrolled it for its whole life, so a retired version stays loaded until the last
 * application socket in it is gone (l7run cannot close them; taking one out of the map would
 * let its requests pass unjudged). */
struct mesh_ver {
	int id;
	int tix;                 /* index in M.vtab: epoll data of its pool connections */
	char path[512];
	struct config cfg;
	struct bpf_object *obj;
	struct bpf_link *sockops_link;
	int msg_prog, socks, conns, addrs, pool, pass, ctl, stats;
	int upstat;              /* l7_upstat: per-upstream telemetry, and l7run's own answers */
	int msg_attached;
	int clock_fd;
	uint64_t mem;            /* kernel memory of its maps (bytes) */
	uint64_t load_us;        /* open + verify */
	int retired;
	uint64_t retired_at, published_at;   /* ms */
	int n_app;               /* application sockets it judges (CLIENT entries), last count */
	struct mesh_pool_conn slot[L7_MESH_POOL_SIZE];
	struct mesh_ver *older;
};

struct mesh {
	struct mesh_ver *cur;    /* the newest: new sockets enroll into it */
	struct mesh_ver *vtab[MAX_VERSIONS];
	int n_versions, next_id;
	char obj_path[512];
	int cgfd;
	char cgroup[4096];
	int created_cgroup;
	char pin_dir[256];
	int pool_n;              /* connections per upstream */
	int verbose;
	int epfd;
	int listen_fd[MAX_SERVICES];
	struct mesh_client *client[MESH_MAX_CLIENTS];
	int n_clients;
};

extern struct mesh M;

#define mlog(...) do { if (M.verbose) { fprintf(stderr, "l7run[mesh]: " __VA_ARGS__); fputc('\n', stderr); } } while (0)


/* mesh_reload.c: versions */
int mesh_load(const char *path, char *err, size_t errlen, void **out);
void mesh_discard(void *v);
void mesh_publish(void *v, uint64_t t_signal);
void mesh_retire_tick(void);
void mesh_unload_all(void);
void mesh_pin(struct mesh_ver *v, int on);
void mesh_set_mode(struct mesh_ver *v, uint32_t mode);

/* mesh_pool.c */
uint64_t mesh_now_ms(void);
struct l7_mesh_key mesh_key_of(int fd);
void mesh_pool_fill(struct mesh_ver *v, int force);
void mesh_pool_event(struct mesh_ver *v, int idx, uint32_t ev);
void mesh_pool_drop(struct mesh_ver *v, int idx);
void mesh_pool_close_all(struct mesh_ver *v);
void mesh_pool_reap(struct mesh_ver *v);
int mesh_upstream_live(struct mesh_ver *v, int up);
void mesh_pool_exhausted(struct mesh_ver *v, int up);

/* mesh_client.c */
void mesh_accept(int lfd);
void mesh_client_event(struct mesh_client *c, uint32_t ev);
void mesh_clients_tick(void);
void mesh_client_close(struct mesh_client *c);
struct mesh_client *mesh_client_by_key(struct mesh_ver *v, const struct l7_mesh_key *k);
void mesh_client_answer(struct mesh_client *c, int up, int status, int close_after);
void mesh_clients_check_over(void);

/* mesh_outside.c: clients outside the cgroup, relayed through a connection of l7run's own */
int mesh_enrolled(int fd);
void mesh_outside_accept(int fd);
void mesh_relay_event(uint64_t data, uint32_t ev);
void mesh_relays_tick(void);
void mesh_relays_close_all(void);

/* epoll data: what an event's fd is */
#define MESH_EV_LISTEN  (1ull << 62)
#define MESH_EV_POOL    (1ull << 61)   /* | version tix << 16 | slot index */
#define MESH_EV_RELOAD  (1ull << 60)
#define MESH_EV_RELAY   (1ull << 59)   /* | side << 32 | relay index */

#endif
