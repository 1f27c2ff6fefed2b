/* Types of the data-plane machinery (stdlib/bpf/) that the runtime also reads.
 * Owned by the data-plane/runtime work; l7/abi.h holds the compiler-facing contract. */
#ifndef L7_DATAPLANE_H
#define L7_DATAPLANE_H

#include "abi.h"

/* Per-socket state, keyed by socket cookie. Filled by l7run on insert, kept by the programs. */
struct l7_conn {
	__u32 role;          /* L7_ROLE_* */
	__u32 upstream;      /* for pool sockets: upstream index */
	__u64 peer;          /* cookie of the socket responses/requests go to (0 = none) */
	__u32 next_off;      /* stream-parser offset of the next message in the current skb */
	__u32 pad;
};

enum l7_role { L7_ROLE_CLIENT = 1, L7_ROLE_UPSTREAM = 2 };

enum l7_stat {
	L7_STAT_REQUESTS = 0,
	L7_STAT_FORWARDED,
	L7_STAT_DENIED,
	L7_STAT_FALLBACK,
	L7_STAT_POOL_MISS,
	L7_STAT_BAD_REQUEST,
	L7_STAT_MAX,
};

#endif
