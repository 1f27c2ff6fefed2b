/* mesh.h: mesh mode (data plane: stdlib/bpf/mesh.h, types: l7/mesh.h). l7run moves itself
 * into the cgroup, attaches each version's sock_ops to it and SK_MSG to the version's
 * l7_mesh_socks, keeps a pool of pre-opened connections to each upstream, listens on the
 * service addresses so that clients' connections establish, and handles the slow path:
 * requests the kernel could not send in order, answers (deny, 502/503), bad requests, clients
 * outside the cgroup. Files: mesh.c (the mode's operations: cgroup, versions, stopping),
 * mesh_client.c (l7run's end of a client connection), mesh_pool.c (what a pool connection is
 * to the data plane), mesh_outside.c (clients outside the cgroup, relayed). */
#ifndef L7RUN_MESH_H
#define L7RUN_MESH_H

#include <stdint.h>
#include "l7/mesh.h"
#include "pool.h"

#define MESH_MAX_CLIENTS 8192
#define MESH_MAX_RELAYS  1024   /* connections from outside the cgroup relayed at once */

/* One loaded object: its sock_ops on the cgroup (a bpf_link of its own), its SK_MSG on its own
 * l7_mesh_socks, its own pool. A socket is judged by the version that enrolled it for its
 * whole life, so a retired version stays loaded until the last application socket in it is
 * gone (l7run cannot close them; taking one out of the map would let its requests pass
 * unjudged). */
struct mesh_ver {
	struct version v;        /* first: the core's */
	struct bpf_link *sockops_link;
	int redir_tp;            /* l7_mesh_redir_prog on sock:sk_data_ready: from load to unload */
	int msg_prog, socks, conns, addrs, pool_map, pass, ctl;
	int h2mut;               /* l7_mesh_h2mut: the HTTP/2 streams' header mutations */
	int msg_attached;
	uint32_t h2c;            /* bit u: upstream slot u speaks h2c (--h2c); 0: HTTP/2 refused */
	uint32_t gen[L7_MESH_POOL_SIZE];   /* each slot's generation, as the data plane sees it */
	/* A remote slot's relay pair (mesh_pool.c), fd + 1 (0: a local slot): [0] the end l7run
	 * writes the remote endpoint's responses into (L7_MR_BACKEND: its SK_MSG frames them into
	 * the client), [1] its peer, which gets what that SK_MSG discards. */
	int relay[L7_MESH_POOL_SIZE][2];
	struct pool pool;        /* place p of upstream u: slot u * L7_MESH_SLOTS + p of l7_mesh_pool */
	uint64_t retired_seen[L7_MAX_UPSTREAMS];   /* ms: when the tick first saw a run-time slot
						    * retired (0: it is not), mesh_pool_drain */
};

static inline struct mesh_ver *mv(struct version *v)
{
	return (struct mesh_ver *)v;
}

struct mesh_client {
	struct io io;
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
	/* redirects into the client decided but not yet queued (l7/mesh.h redir_dec), as last
	 * seen, and since when (ms): see answered() */
	uint64_t redir_seen, redir_since;
	struct h2_refuser *h2;   /* an HTTP/2 client of a split policy: every stream answered 505
	                          * (h2_refuse.h) */
	struct mesh_h2 *h2m;     /* an HTTP/2 client the kernel decides for (mesh_h2.c) */
};

struct relay;

/* The mode's state (L->m). */
struct mesh {
	int cgfd;
	char cgroup[4096];
	int created_cgroup;
	struct mesh_client *client[MESH_MAX_CLIENTS];
	int n_clients;
	struct relay *relay[MESH_MAX_RELAYS];
	uint64_t looked_at;      /* ms: the last look at clients over their bound and at the pools */
	int relay_lfd;           /* fd + 1 of the loopback listener remote slots' relay pairs are made on */
	struct rate_note exhausted, outside;
};

static inline struct mesh *mesh_of(struct l7run *L)
{
	return L->m;
}

/* mesh_pool.c */
extern const struct pool_ops mesh_pool_ops;
struct l7_mesh_key mesh_key_of(int fd);
void mesh_set_mode(struct mesh_ver *v, uint32_t mode);
int mesh_upstream_live(struct mesh_ver *v, int up);
void mesh_pool_exhausted(struct l7run *L, struct mesh_ver *v, int up);
int mesh_slot_fd(struct mesh_ver *v, uint32_t idx, const struct l7_mesh_key *owner);
void mesh_pool_drop(struct mesh_ver *v, uint32_t idx);
uint64_t mesh_pool_owed(struct mesh_ver *v);
void mesh_pool_drain(struct mesh_ver *v, uint64_t now);   /* run-time slots whose endpoint left */
void mesh_pool_flush(struct l7run *L, struct mesh_ver *v);
void mesh_pool_fini(struct l7run *L);
/* A connection of l7run's own to upstream up, outside the data plane (an HTTP/2 client's, mesh_h2.c):
 * its fd, or -1 and *why when the upstream is to blame (NULL: l7run's own limits). */
int mesh_connect_own(struct mesh_ver *v, int up, const char **why);

/* mesh_client.c */
void mesh_accept(struct l7run *L, int lfd, int service);
void mesh_accept_pending(struct l7run *L);   /* every listener's queued connections, now */
void mesh_clients_tick(struct l7run *L, uint64_t now);
void mesh_client_close(struct l7run *L, struct mesh_client *c);
struct mesh_client *mesh_client_by_key(struct l7run *L, struct mesh_ver *v, const struct l7_mesh_key *k);
void mesh_client_answer(struct mesh_client *c, int up, int status, int close_after);
void mesh_send_all(int fd, const char *p, size_t n);
void mesh_clients_check_over(struct l7run *L);

/* mesh_h2.c: HTTP/2 clients, each hop's endpoint (the kernel decides every stream) */
struct mesh_h2 *mesh_h2_new(void);
void mesh_h2_free(struct mesh_h2 *h);
void mesh_h2_close(struct mesh_client *c);
/* The client's bytes p[0..n) of record r (L7_MP_H2, or DISCARD's nothing): -1 once the
 * connection is to end (a GOAWAY was sent). */
int mesh_h2_take(struct mesh_client *c, const char *p, size_t n, const struct l7_mesh_pass *r);

/* mesh_outside.c: clients outside the cgroup, relayed through a connection of l7run's own */
int mesh_enrolled(struct l7run *L, int fd);
void mesh_outside_accept(struct l7run *L, int fd);
void mesh_relays_tick(struct l7run *L, uint64_t now);
void mesh_relays_close_all(struct l7run *L);

#endif
