/* Mesh mode: the types shared by the mesh data plane (stdlib/bpf/mesh.h) and l7run --mesh
 * (runtime/mesh*.c). Clients and backends sit in one cgroup; sock_ops enrolls their sockets
 * in l7_mesh_socks (keyed by 4-tuple) and SK_MSG moves each request from the client's send
 * path straight into the receive queue of a backend socket of a pre-opened pool connection
 * (BPF_F_INGRESS), and the backend's response straight into the client's socket.
 *
 * Writers (a map value has one writer at a time; userspace has no atomics on map values):
 *   l7_mesh_addrs  l7run (endpoints before attaching; claims and the mode while attached)
 *   l7_mesh_conns  CLIENT/RT_CLIENT entries: BPF (sock_ops creates, SK_MSG keeps, sock_ops
 *                  deletes); RT_POOL/BACKEND entries: l7run creates before the slot is
 *                  published, BPF keeps the response framing in them afterwards
 *   l7_mesh_pool   l7run fills a slot while it is EMPTY/DEAD; BPF moves IDLE<->BUSY<->ORPHAN
 *                  with compare-and-swap and keeps the counters
 *   l7_mesh_pass   BPF writes, l7run reads and deletes
 *   l7_mesh_ctl    l7run only
 *   l7_mesh_rmut   BPF: the request path writes entry n of a pool connection before request n
 *                  is counted, the response path reads it when response n is framed
 *   l7_mesh_hold   BPF only (the client's SK_MSG; sock_ops deletes it at close)
 *   l7_mesh_h2c    BPF only (the h2 program; sock_ops deletes it at close)
 *   l7_mesh_h2tab  BPF only (the h2 program; deleted when the table empties, and at close)
 *
 * The map rows in l7/maps.def carry these sizes as numbers (that file is also read where
 * this header is not included); the asserts below keep them in step. */
#ifndef L7_MESH_TYPES_H
#define L7_MESH_TYPES_H

#include <linux/types.h>
#include <l7/h2.h>

#define L7_MESH_SLOTS      64   /* pool connections per upstream (power of two) */
#define L7_MESH_UPSTREAMS  16   /* = L7_MAX_UPSTREAMS */
#define L7_MESH_RING       16   /* requests in flight on one pool connection (power of two) */
#define L7_MESH_HOLD_BYTES 16384   /* = L7_MAX_HEAD: a held head start is shorter */

/* A socket's 4-tuple as sk_msg_md / bpf_sock_ops show it: addresses in network order,
 * local port in host order, remote port converted to host order too. */
struct l7_mesh_key {
	__u32 lip, rip, lport, rport;
};

/* l7_mesh_addrs: which endpoints matter. Key: {ip (network order), port (host order)}. */
struct l7_mesh_addr_key {
	__u32 ip, port;
};
enum l7_mesh_addr_kind {
	L7_MA_SERVICE = 1,
	L7_MA_UPSTREAM = 2,
	/* Policy versions (hot reload: several objects' sock_ops run on one cgroup, oldest first).
	 * A socket goes into exactly one version's l7_mesh_socks: the first whose sock_ops takes
	 * it; the others' inserts fail (EBUSY: a socket has one SK_MSG program) and they keep no
	 * state for it. Each version takes:
	 *   - l7run's end of a service connection only when the client's end is its own (so both
	 *     ends of a connection are always in one version);
	 *   - a socket with a local or remote address CLAIMed for it (l7run's pool connections,
	 *     claimed by their local address before connecting; OTHER: claimed for another
	 *     version, never taken);
	 *   - any other socket while its mode (key {0, 1}) is L7_MESH_ENROLL (the newest). */
	L7_MA_CLAIM = 3,
	L7_MA_CLAIM_OTHER = 4,
	L7_MA_MODE = 5,
};
struct l7_mesh_addr {
	__u32 kind;     /* enum l7_mesh_addr_kind */
	__u32 index;    /* service or upstream index; L7_MA_MODE: enum l7_mesh_mode */
};
enum l7_mesh_mode { L7_MESH_RETIRED = 0, L7_MESH_ENROLL = 1 };
#define L7_MESH_MODE_PORT 1    /* key {0, 1}: the mode ({0, 0} is the fallback upstream) */

enum l7_mesh_role {
	L7_MR_CLIENT = 1,     /* an application's socket connected to a service address */
	L7_MR_RT_CLIENT,      /* l7run's accepted end of it (slow-path bytes, l7run's answers) */
	L7_MR_RT_POOL,        /* l7run's end of a pool connection */
	L7_MR_BACKEND,        /* the backend's accepted end of a pool connection; for a remote
			       * slot, the end of l7run's relay pair that l7run writes the remote
			       * endpoint's responses into (its SK_MSG frames them as a local
			       * backend's: into the client's ingress) */
	L7_MR_RT_REMOTE,      /* l7run's connection to an endpoint that is not a local enrolled
			       * socket (another node): requests are redirected into it without
			       * BPF_F_INGRESS (sent out inline in the client's sendmsg) */
};

enum l7_mesh_body { L7_MB_HEAD = 0, L7_MB_LEN, L7_MB_CHUNK, L7_MB_CHUNK_DATA, L7_MB_RAW };

/* l7_mesh_conns value, keyed by the socket's own 4-tuple. */
struct l7_mesh_conn {
	__u32 role;           /* enum l7_mesh_role */
	__u32 index;          /* CLIENT: service index; RT_POOL/BACKEND: pool slot */
	__u32 gen;            /* RT_POOL/BACKEND: generation of the slot when it was filled */
	__u32 body;           /* BACKEND: enum l7_mesh_body of the response stream */
	__u64 body_left;      /* BACKEND: bytes left of the current response body / chunk */
	/* CLIENT: ordering. Every request gets seq = req_seq++; responses delivered by the
	 * kernel count in resp_done, answers written by l7run in l7_mesh_ctl.local_done. */
	__u64 req_seq;
	__u64 resp_done;      /* atomically incremented by the backend side */
	__u64 pass_seq;       /* records handed to l7run (l7_mesh_pass seq 1..pass_seq) */
	__u32 last_up;        /* 1 + upstream of the requests in flight; 0 = none known */
	__u32 flags;          /* L7_MC_* */
	__u16 bind[L7_MESH_UPSTREAMS];      /* 1 + pool slot bound per upstream */
	__u32 bind_gen[L7_MESH_UPSTREAMS];
	/* CLIENT: the kernel's sk_psock of the client's socket (sock_ops reads it after enrolling
	 * the socket): its msg_tot_len is what redirects queued and the client has not read yet */
	__u64 psock;
	/* CLIENT: redirects into the client's socket that a program decided (redir_dec: the
	 * backend's responses, l7run's answers) and that the kernel has queued (redir_done,
	 * counted by l7_mesh_redir_prog on the socket's data_ready). A response counts
	 * in resp_done when its program decides it; the kernel queues it only after the program
	 * returns, taking the client's socket lock (net/ipv4/tcp_bpf.c), so a backend thread
	 * preempted in between let the next upstream's answer overtake it when the client
	 * switched upstream on resp_done alone (balance.mesh, pipelined requests under load).
	 * Equal: everything decided is in the client's queue, in order. */
	__u64 redir_dec;
	__u64 redir_done;
};
#define L7_MC_BROKEN 1u   /* a bad request was seen: everything further goes to l7run */
#define L7_MC_OVER   2u   /* the client stopped reading: l7run resets the connection */
#define L7_MC_LAST   8u   /* a request asked to close: nothing after it is processed
			   * (= L7_REQ_CLOSE << 2: set from the request flags without a branch) */
#define L7_MC_H2     16u  /* the connection began with the HTTP/2 preface: every write goes to
			   * the h2 program (stdlib/bpf/mesh_h2.h), for the connection's life */
#define L7_MC_HELD   32u  /* the start of a head waits in l7_mesh_hold: only then does the next
			   * write look there (a hash lookup every request otherwise) */

/* Bytes the data plane may queue in a client's socket that it has not read (responses are
 * redirected into its receive queue, which has no backpressure of its own). Past this the
 * rest goes to l7run, which discards it and resets the connection: the kernel memory held
 * for one client stays under this bound. */
#define L7_MESH_CLIENT_QMAX (4u << 20)

enum l7_mesh_slot_state {
	L7_MS_EMPTY = 0,      /* never filled */
	L7_MS_IDLE,           /* connected, free */
	L7_MS_BUSY,           /* bound to client `owner` */
	L7_MS_ORPHAN,         /* owner closed with responses owed: drop them, then IDLE */
	L7_MS_DEAD,           /* connection closed: l7run refills */
};

/* l7_mesh_pool value, index = upstream * L7_MESH_SLOTS + slot. */
struct l7_mesh_slot {
	__u32 state;          /* enum l7_mesh_slot_state (BPF: compare-and-swap) */
	__u32 gen;            /* l7run bumps it on every refill */
	struct l7_mesh_key backend;   /* the backend's accepted socket: requests go here */
	struct l7_mesh_key owner;     /* BUSY: the client socket responses go to */
	__u64 req_cnt;        /* requests sent (or handed to l7run to send) on this connection */
	__u64 resp_cnt;       /* final responses framed */
	/* bit (n & 63): request n on this connection expects a response without a body (HEAD);
	 * set by the request path, read when response n's head is framed. At most
	 * L7_MESH_NOBODY_DEPTH requests in flight while any of these bits is set. */
	__u64 no_body;
	/* ORPHAN: response bytes discarded at l7run's end so far (bounded: see l7_mesh_response) */
	__u64 orphan_bytes;
	/* the access log: the seq (l7_log_rec.seq) of request n on this connection at entry
	 * n & 63, and the current response's final status and bytes so far */
	__u32 log_seq[64];    /* = L7_MESH_NOBODY_DEPTH */
	__u32 log_status;
	__u32 log_bytes;
	__u32 flags;          /* L7_MSF_*: l7run sets them when it fills the slot */
	__u32 pad;
};
#define L7_MESH_NOBODY_DEPTH 64
/* A remote slot: `backend` is l7run's own L7_MR_RT_REMOTE socket (egress redirect); the
 * responses come back through l7run into the slot's relay socket (L7_MR_BACKEND). */
#define L7_MSF_REMOTE 1u
/* A request (head and body) of at most this many bytes goes to a remote slot by the kernel's
 * egress redirect; a longer one goes through l7run (L7_MP_FORWARD). The egress redirect sends
 * with the client's flags (tcp_bpf_sendmsg_redir -> tcp_bpf_push_locked), so for a non-blocking
 * client a full send buffer on l7run's connection is -EAGAIN, and tcp_bpf_send_verdict then
 * drops the bytes and shortens the client's send: the client sends the rest again, framed as a
 * new request. l7run gives its remote connections a 4 MiB send buffer (SO_SNDBUFFORCE), which
 * requests this short fill only when the remote endpoint stops reading. */
#define L7_MESH_REMOTE_INLINE 16384

/* l7_mesh_rmut value, index = pool slot: per request n on the connection (entry n & 63, the
 * depth of the no-body bits) the header mutations its rules chose for its response. Written
 * for every request when a rule mutates responses. */
struct l7_mesh_rmut {
	__u8 n_set;           /* lines to add (l7_mut_* indices) */
	__u8 del;             /* bit i: cut the lines of l7_rhdr_name[i] */
	__u8 pad[6];
	__u8 set[8];          /* = L7_MAX_SET */
};
struct l7_mesh_rring {
	struct l7_mesh_rmut r[L7_MESH_NOBODY_DEPTH];
};

/* A message handed to l7run (SK_PASS on the client's socket). Key: {client key, seq}. */
struct l7_mesh_pass_key {
	struct l7_mesh_key client;
	__u64 seq;
};
enum l7_mesh_pass_kind {
	L7_MP_FORWARD = 1,    /* send on pool slot `slot` once responses up to `req` are done */
	L7_MP_ANSWER,         /* answer `status` (after earlier responses), discard the bytes */
	L7_MP_CLOSE,          /* answer `status` (0: none) and close (framing lost, or data after
			       * a request that asked to close), after earlier responses */
	L7_MP_DISCARD,        /* `len` bytes the data plane keeps a copy of (the start of a head
			       * one sendmsg did not complete, l7_mesh_hold): drop them, nothing
			       * to answer (so no wait for earlier responses either) */
	L7_MP_CHUNKED,        /* a request with a chunked body for pool slot `slot`: the first
			       * `status` bytes are its head (header lines inserted), the body
			       * follows; l7run frames and holds it, sends it whole once earlier
			       * responses are done, and closes after its response (nothing after
			       * it is forwarded: the data plane no longer frames this stream) */
	L7_MP_H2,             /* HTTP/2 (mesh_h2.h): `len` bytes of whole frames (0: the rest,
			       * after a connection error); the decision is about the last header
			       * block in them (stream L7_MP_H2_STREAM(req)): forward it to
			       * upstream `slot` - 1 (L7_MP_FOR: on the client's own connection
			       * to it, runtime/mesh_h2.c, never a pool slot), or answer L7_MP_H2_STATUS(status) with gRPC status
			       * L7_MP_H2_GRPC(status) (0: the HTTP status's) when the stream is a
			       * gRPC call (L7_MP_H2_IS_GRPC); or, with an error
			       * L7_MP_H2_ERR(req) (-(L7_H2_R_* | code), l7/h2.h), refuse the last
			       * frame's stream (RST_STREAM) or the connection (GOAWAY) */
};
struct l7_mesh_pass {
	__u32 kind;           /* enum l7_mesh_pass_kind */
	__u32 len;            /* bytes of the client's stream this record covers; 0 = the rest */
	__u32 status;
	__u32 slot;           /* FORWARD, CHUNKED: pool index (upstream * L7_MESH_SLOTS + slot);
			       * ANSWER: L7_MP_FOR(upstream) when the answer is for an upstream the
			       * kernel found no live connection to (l7run tells an exhausted pool
			       * from an unreachable upstream and counts it so), or for a run-time
			       * set with no endpoint (upstream L7_MAX_UPSTREAMS + set: a 503 naming
			       * it), 0 otherwise */
	__u64 req;            /* the request's seq: earlier responses must be done first */
};
#define L7_MP_FOR(up) (1u + (up))
#define L7_MP_H2_REQ(stream, err)  ((__u64)(stream) | (__u64)(__u32)(-(err)) << 32)
#define L7_MP_H2_STREAM(req)       ((__u32)(req) & 0x7fffffffu)
#define L7_MP_H2_ERR(req)          (-(int)((req) >> 32))
#define L7_MP_H2_STATUS(st)        ((st) & 0xffffu)
#define L7_MP_H2_GRPC(st)          (((st) >> 16) & 0xffu)
#define L7_MP_H2_IS_GRPC           (1u << 31)   /* in status: the stream is a gRPC call */
/* in a forwarded stream's status: its decision has header mutations, in l7_mesh_h2mut under
 * {client, stream id}; a stream with the bit and no entry there is never forwarded */
#define L7_MP_H2_MUT               (1u << 30)

/* l7_mesh_h2c value, keyed by the client key: the kernel's view of an HTTP/2 client's frames
 * (stdlib/bpf/mesh_h2.h; BPF only, deleted at the close). */
struct l7_mesh_h2 {
	struct l7_h2_conn c;
	struct l7_h2_ev ev;   /* the last run's walk (map memory: the program's stack is full) */
};
/* The h2 program's slot in its PROG_ARRAY l7_mesh_h2_tail (progs.def; l7run fills it). */
#define L7_MESH_H2_TAIL 0

/* l7_mesh_hold value, keyed by the client key: the start of a request head that one sendmsg
 * did not complete. The kernel's cork (bpf_msg_cork_bytes) cannot hold it: a corked message is
 * redirected whole or loses what follows the bytes applied (tcp_bpf_send_verdict frees a
 * corked sk_msg after its first redirect), so a write that ends one head and starts the next
 * request lost that request. Instead the bytes go to l7run, which drops them (L7_MP_DISCARD),
 * a copy waits here, and the next sendmsg gets them pushed back in front of its own: the
 * request is then framed, decided and sent as if it had come in one write. buf first: the
 * value is inserted from the scratch buffer the parser read the bytes into. */
struct l7_mesh_hold {
	__u8 buf[L7_MESH_HOLD_BYTES + 64];   /* + slack for 8-byte copies at a masked offset */
	__u32 len;
	__u32 pad;
};

/* l7_mesh_ctl value, keyed by the client key: how far l7run has caught up. */
struct l7_mesh_ctl {
	__u64 done_seq;       /* pass records fully handled */
	__u64 local_done;     /* answers l7run wrote to the client */
};

#define L7_MESH_KEY_SIZE   16
#define L7_MESH_CONN_SIZE  176
#define L7_MESH_SLOT_SIZE  344
#define L7_MESH_PKEY_SIZE  24
#define L7_MESH_PASS_SIZE  24
#define L7_MESH_CTL_SIZE   16
#define L7_MESH_RRING_SIZE 1024
#define L7_MESH_HOLD_SIZE  16456
#define L7_MESH_POOL_SIZE  (L7_MESH_UPSTREAMS * L7_MESH_SLOTS)
_Static_assert(sizeof(struct l7_mesh_key) == L7_MESH_KEY_SIZE, "maps.def: l7_mesh_* key size");
_Static_assert(sizeof(struct l7_mesh_conn) == L7_MESH_CONN_SIZE, "maps.def: l7_mesh_conns value size");
_Static_assert(sizeof(struct l7_mesh_slot) == L7_MESH_SLOT_SIZE, "maps.def: l7_mesh_pool value size");
_Static_assert(sizeof(struct l7_mesh_pass_key) == L7_MESH_PKEY_SIZE, "maps.def: l7_mesh_pass key size");
_Static_assert(sizeof(struct l7_mesh_pass) == L7_MESH_PASS_SIZE, "maps.def: l7_mesh_pass value size");
_Static_assert(sizeof(struct l7_mesh_ctl) == L7_MESH_CTL_SIZE, "maps.def: l7_mesh_ctl value size");
_Static_assert(sizeof(struct l7_mesh_rring) == L7_MESH_RRING_SIZE, "maps.def: l7_mesh_rmut value size");
_Static_assert(sizeof(struct l7_mesh_hold) == L7_MESH_HOLD_SIZE, "maps.def: l7_mesh_hold value size");
_Static_assert(sizeof(struct l7_mesh_h2) == 96, "maps.def: l7_mesh_h2c value size");
_Static_assert(L7_H2_BUF + 64 == 32832 && sizeof(struct l7_hpack) == 38776, "maps.def: l7_h2_buf, l7_h2_dec value sizes");
_Static_assert(sizeof(struct l7_decision) == 56, "maps.def: l7_mesh_h2mut value size");
_Static_assert(sizeof(struct l7_hpack_table) == 5216, "maps.def: l7_mesh_h2tab value size");

/* Program and map names l7run looks up. */
#define L7_MESH_PROG_SOCKOPS "l7_mesh_sockops_prog"
#define L7_MESH_PROG_MSG     "l7_mesh_msg_prog"
#define L7_MESH_PROG_REDIR   "l7_mesh_redir_prog"
#define L7_MESH_PROG_H2      "l7_mesh_h2_prog"
#define L7_MESH_H2_TAIL_MAP  "l7_mesh_h2_tail"

#endif
