/* gateway.h: gateway mode. l7run accepts the clients on the service addresses and puts each
 * into its version's l7_clients; the kernel parses, judges and redirects requests into pool
 * sockets (l7_upstreams) and responses back; what the data plane passes up (pool misses,
 * denies, fallback, bad requests, requests held back to keep responses in order) l7run handles
 * here. Files: gateway.c (the mode's operations, its versions, drain), gateway_conn.c (clients),
 * gateway_pool.c (what a pool socket is to the data plane). */
#ifndef L7RUN_GATEWAY_H
#define L7RUN_GATEWAY_H

#include "pool.h"

/* A loaded object: its programs attached to its own SOCKHASHes, its own pool; a client stays
 * in the version that accepted it for its whole life (version.c). */
struct gw_version {
	struct version v;        /* first: the core's */
	int map_clients, map_upstreams, map_conns, map_ctl, map_pass, map_txq, map_txport;
	int map_rxq, map_rxport; /* response edits: a rule's, and "Connection: close" */
	int n_progs;
	int prog_fd[8], prog_map[8], prog_type[8];
	struct pool pool;        /* pool sockets: owner a struct client */
	/* Idle pool sockets the kernel may take for a new client (gateway_pool.c): l7_idle mapped
	 * (NULL: the kernel takes none), what l7run put in each slot until it knows who took it,
	 * connects opened to fill slots, and no such connect before park_retry (ms); how many to
	 * keep in slots (--pool-idle, more while new clients find none: idle_missed) and the last
	 * such miss (ms). */
	struct l7_idle *idle;
	size_t idle_len;
	struct pool_sock *parked[L7_MAX_UPSTREAMS][L7_IDLE_SLOTS];
	int parking[L7_MAX_UPSTREAMS];
	uint64_t park_retry[L7_MAX_UPSTREAMS];
	int idle_want[L7_MAX_UPSTREAMS];
	uint64_t idle_miss_at[L7_MAX_UPSTREAMS];
};

static inline struct gw_version *gwv(struct version *v)
{
	return (struct gw_version *)v;
}

/* Where the body pieces of the request l7run is handling go. */
enum body_dest { BODY_NONE, BODY_TO_POOL, BODY_DISCARD,
	BODY_HOLD };   /* chunked: kept until the kernel has framed the whole body, then sent */

/* Closing a client of a retired version at a request boundary (gateway.c client_drain). */
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
	struct io io;
	int fd;
	uint64_t cookie;
	int service;
	struct gw_version *v;    /* the version whose l7_clients holds it, for its whole life */
	struct pool_sock *bind[L7_MAX_UPSTREAMS];   /* lent to it by v's pool */
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
	/* the request being sent went to another slot after its connect failed (gateway_conn.c
	 * retry_to): that slot + 1 (0: the one the data plane chose), the slots tried, how many */
	int retry_up;
	uint32_t tried;
	int ntried;
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
	/* stall watch (gateway_conn.c client_check_stall): bytes received and disposed of at the last look */
	uint64_t seen_rx, seen_done, stuck_since;
	int stalled;             /* judged stuck once: l7_ctl frozen, FIN at the next look */
};

/* The mode's state (L->m). */
struct gateway {
	struct client **clients;
	int n_clients, cap_clients;
	uint64_t watched_at;     /* ms: the last stall look */
	uint64_t retired_at;     /* ms: the last look at retired run-time slots (gateway.c) */
};

static inline struct gateway *gw_of(struct l7run *L)
{
	return L->m;
}

/* gateway_conn.c */
void gw_accept(struct l7run *L, int lfd, int service);
void client_pump(struct client *c);
void client_finish(struct l7run *L, struct client *c);
void client_fin(struct l7run *L, struct client *c, uint64_t linger_ms);
int client_idle(struct client *c, struct drain_snap *snap);
void clients_tick(struct l7run *L, uint64_t now);
int clients_waiting(struct l7run *L);
int clients_unbound(struct l7run *L);
void client_close_after(struct client *c);
void clients_close_all(struct l7run *L);

/* gateway_pool.c */
extern const struct pool_ops gw_pool_ops;
uint64_t pool_inflight(struct pool_sock *ps);
void pool_bind(struct client *c, struct pool_sock *ps);
int pool_send(struct pool_sock *ps, const char *buf, size_t len, const struct l7_pass *rec);
void ctl_publish(struct client *c);
void client_adopt(struct client *c);
void idle_map(struct gw_version *v, int fd);
void idle_unmap(struct gw_version *v);
void idle_tick(struct l7run *L, uint64_t now);
void idle_missed(struct gw_version *v, int up);
void idle_unpark(struct gw_version *v, int up);

#endif
