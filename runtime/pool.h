/* pool.h: a policy version's connections from l7run to its upstreams, one machinery for every
 * mode (pool.c). Per upstream index, a pool holds the sockets l7run opened: connecting, idle,
 * lent to an owner, or handed to the data plane. An eager pool (mesh) keeps `want` of them open
 * per upstream and refills, after a failed connect not before a back-off; a lazy one (gateway)
 * opens one when an owner asks and none is idle, at most `want`. What their connects find is
 * each upstream's health (upstream.c). The mode says, through its pool_ops, how a socket enters
 * and leaves the data plane's maps, and the pool tells the mode (and through it the owner) when
 * a socket is ready or lost: it never touches what the owner is. */
#ifndef L7RUN_POOL_H
#define L7RUN_POOL_H

#include "l7run.h"

struct pool;

struct pool_sock {
	struct io io;
	struct pool *pool;
	int fd;
	int up;                  /* upstream index */
	int place;               /* eager pools: its place among the upstream's, 0..want-1 (else -1) */
	int connecting;          /* non-blocking connect in progress */
	int dead;                /* lost: never lent again */
	int pooled;              /* counted in its upstream's cfg_endpoint.pooled */
	uint64_t cookie;
	uint32_t port;           /* local port, once connected */
	uint64_t since;          /* the mode's own timer (mesh: orphaned since) */
	void *owner;             /* lent to (NULL: idle, or the data plane's to hand out) */
	struct pool_sock *next_idle;
	struct pool_sock *next, *prev;   /* every socket of the pool */
};

enum pool_loss { POOL_CONNECT_FAILED, POOL_HUNG_UP, POOL_DROPPED };

struct pool_ops {
	int eager;               /* keep `want` open per upstream (else open on demand, at most `want`) */
	int blocking;            /* connect in the loop, blocking (mesh: claimed before the handshake) */
	int send_timeout_ms;     /* l7run's own sends on it block at most this long */
	int watch_input;         /* its input is watched (readable is called), not only hang-ups */
	/* Connect ps->fd to `to`: NULL is connect(2). 0 connected (or in progress on a
	 * non-blocking socket), -1 failed: *why says why when the upstream is to blame (its
	 * health), NULL when l7run is. */
	int (*connect)(struct pool_sock *ps, const struct sockaddr_in *to, const char **why);
	/* connected: enter the data plane's maps; 0, -1 (closed), -2 (its port is taken: a new socket) */
	int (*enroll)(struct pool_sock *ps);
	/* leave them, before its fd is closed (it may never have entered) */
	void (*leave)(struct pool_sock *ps);
	int (*readable)(struct pool_sock *ps);       /* input arrived; -1: it ended */
	uint64_t (*owed)(struct pool_sock *ps);      /* responses still owed on it (NULL: 0) */
	int (*recycle)(struct pool_sock *ps);        /* back from its owner: 0 idle, 1 kept by the mode, -1 closed */
	int (*stale)(struct pool_sock *ps, uint64_t now);   /* 1: close it (pool_tick), and refill */
	/* The pool's news for its mode: ps connected and enrolled; ps lost (why), with `owed`
	 * responses owed, while it was lent to owner (NULL: to nobody). ps goes after lost(). */
	void (*ready)(struct pool *p, void *owner, struct pool_sock *ps);
	void (*lost)(struct pool *p, void *owner, struct pool_sock *ps, enum pool_loss why, uint64_t owed);
};

#define POOL_MAX_PLACES 64   /* eager pools: sockets per upstream at most */

struct pool {
	struct l7run *L;
	const struct pool_ops *ops;
	void *ctx;                                   /* its version */
	struct cfg_endpoint *upstream;               /* its version's upstreams: addresses, names, and
						      * the sockets the data plane can use (pooled) */
	int want;
	int count[L7_MAX_UPSTREAMS];                 /* sockets open or connecting, per upstream */
	uint64_t retry_at[L7_MAX_UPSTREAMS];         /* eager: no connect before (ms) */
	struct pool_sock *idle[L7_MAX_UPSTREAMS];
	struct pool_sock *places[L7_MAX_UPSTREAMS][POOL_MAX_PLACES];   /* eager: where each is */
	struct pool_sock *all;
};

void pool_init(struct pool *p, struct l7run *L, const struct pool_ops *ops, void *ctx, struct cfg_endpoint *upstream,
	       int want);
void pool_fini(struct pool *p);              /* closes every socket (leave, no news) */
/* A socket for upstream `up` lent to owner: an idle one, or a new connection (lazy pools;
 * returned while still connecting: ready() follows). NULL and *err: EAGAIN at the bound,
 * EINVAL no such upstream, EMFILE out of fds, else the connect's errno. */
struct pool_sock *pool_take(struct pool *p, int up, void *owner, int *err);
void pool_give_back(struct pool_sock *ps);  /* the owner is done with it */
void pool_fill(struct pool *p, int force);  /* eager: open what is missing (force: ignore back-offs) */
void pool_tick(struct pool *p, uint64_t now);   /* close the stale, refill */
void pool_drop(struct pool_sock *ps);       /* close it now, as lost (and refill) */
void pool_close_idle(struct pool *p, int up);   /* close the idle sockets of upstream up (no news) */
struct pool_sock *pool_at(struct pool *p, int up, int place);   /* eager: the socket at a place, or NULL */

#define pool_for_each(p, ps) for (struct pool_sock *ps = (p)->all; ps; ps = ps->next)

#endif
