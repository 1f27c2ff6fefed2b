/* Types of the data-plane machinery (stdlib/bpf/) that the runtime also reads.
 * Owned by the data-plane/runtime work; l7/abi.h holds the compiler-facing contract.
 *
 * Writers: every map value has one writer at a time, because userspace cannot do atomic
 * read-modify-write on a map value concurrently with BPF.
 *   l7_conns  BPF only (l7run initialises it before the socket enters a SOCKHASH)
 *   l7_ctl    l7run only (BPF reads bindings and how far l7run has caught up)
 *   l7_pass   BPF writes, l7run reads and deletes
 *   l7_txq    the current sender of requests on a pool socket: the client verdict while its
 *             client is on the kernel path, l7run while it is not (then the socket is quiet)
 *   l7_txport l7run only: pool socket local port -> cookie, because SK_MSG programs cannot
 *             call bpf_get_socket_cookie (l7run keeps local ports of pool sockets unique)
 *   l7_rxq    response mutations for a client: records written by the pool socket serving it
 *             (its parser stages one, its verdict publishes it), applied and counted by the
 *             client socket's SK_MSG; l7run creates and deletes the entry
 *   l7_rxport l7run only: client 4-tuple -> cookie (for the client's SK_MSG, as l7_txport)
 *   l7_idle   both, by atomic operations only (l7run through an mmap of the array): l7run
 *             puts an idle pool socket's cookie into an empty slot, a client parser takes it
 *             with a compare-and-swap to 0 (struct l7_idle) */
#ifndef L7_DATAPLANE_H
#define L7_DATAPLANE_H

#include "abi.h"

#define L7_MAX_UPSTREAMS 16    /* upstream indices a policy may use */
/* Upstreams whose endpoints l7run finds at run time (a DNS name, an --endpoints set): each
 * reserves L7_RT_SLOTS backend slots, which l7run gives to the endpoints it finds, and its
 * choice is made over tables l7run fills (struct l7_lb_tab), not over constants. */
#define L7_RT_SLOTS      6      /* endpoints of one run-time upstream at a time */
#define L7_MAX_RT_SETS   (L7_MAX_UPSTREAMS / L7_RT_SLOTS)
#define L7_LB_DRING_LOG2 12     /* the ring of a run-time set: 4096 entries (256 points per unit
                                 * of weight up to 15 units, scaled past it) */
#define L7_LB_DRING      (1u << L7_LB_DRING_LOG2)
#define L7_LB_TURNS      (L7_RT_SLOTS * 256)   /* round-robin turns: sum of weights (1-255) */
#define L7_NO_SLOT       0xffu  /* a run-time set with no endpoint: the request is answered 503,
                                 * a DENY whose upstream is L7_MAX_UPSTREAMS + the set's index
                                 * (l7run's answer names the upstream) */

/* One table of a run-time upstream set (l7_lb_tab[2 * set + half]). l7run writes the half
 * l7_lb_gen[set] does not name, then flips l7_lb_gen[set]: a lookup reads the gen, then one
 * whole table, never a half-written one (a writer waits a second between flips, a lookup
 * takes microseconds). nturns 0: no endpoint. */
struct l7_lb_tab {
	__u32 nturns;                  /* round robin: turns[0..nturns-1] are slots */
	__u32 npoints;                 /* ketama: points before padding (0: no endpoint) */
	__u8 turns[L7_LB_TURNS];
	__u8 ring_slot[L7_LB_DRING];
	__u32 ring[L7_LB_DRING];       /* ascending, padded with 0xffffffff (stdlib/bpf/balance.h) */
};
#define L7_TXQ_DEPTH     8     /* requests in flight on one pool socket (power of two) */
#define L7_MAX_MUT       64    /* entries of l7_mut_off/l7_mut_len (codegen pads to this) */
#define L7_MUT_BYTES     4096  /* size of l7_mut_bytes (codegen pads to this) */
/* The last entry of the mutation tables is not a policy's: the line gateway mode adds to the
 * response of a request that asked to close the connection (its Connection line was cut on the
 * way to the backend, which keeps the pool connection open), at the end of l7_mut_bytes. */
#define L7_MUT_CLOSE      (L7_MAX_MUT - 1)
#define L7_CLOSE_LINE     "Connection: close\r\n"
#define L7_CLOSE_LINE_LEN (sizeof(L7_CLOSE_LINE) - 1)
#define L7_MAX_INSERT    1024  /* bytes of header lines inserted into one request (or response) */
#define L7_IDLE_SLOTS    32    /* idle pool sockets per upstream the kernel can take (l7_idle) */
#define L7_RXQ_DEPTH     16    /* responses with mutations framed but not yet sent to a client */
/* The access log: one record per request at its decision, into the l7_log ring buffer
 * (stdlib/bpf/alog.h), which l7run reads (--access-log). The fields the kernel knows then;
 * a request the kernel expects an upstream's response for carries a seq (1.., per client
 * connection), and the response's end writes a struct l7_log_resp with the same conn and seq,
 * which l7run joins to it (runtime/alog.c). */
#define L7_LOG_RING      (1u << 20) /* bytes of l7_log (l7run --access-log-buffer changes it) */
#define L7_LOG_METHOD    16
#define L7_LOG_PATH      128        /* the first bytes of the request-target */
#define L7_LOG_HOST      64
enum l7_log_mode { L7_LOG_GATEWAY = 1, L7_LOG_MESH = 2 };
struct l7_log_rec {
	__u64 ts_ns;           /* bpf_ktime_get_ns() at the decision */
	__u64 conn;            /* gateway: the client socket's cookie; mesh: client port << 32 | ip */
	__u32 src_ip4;         /* network byte order */
	__u32 src_port;        /* host order; 0 when the program does not know it (gateway) */
	__u32 dst_port;
	__u32 service;
	__u32 caller;          /* identity index (l7_idents), or L7_LOG_NO_CALLER */
	__u32 mode;            /* enum l7_log_mode */
	__u32 verdict;         /* enum l7_verdict */
	__u32 why;             /* gateway: L7_WHY_* when l7run takes the request, 0 the kernel sent it */
	__u32 status;          /* a deny's status */
	__u32 upstream;        /* backend slot of a forward or fallback */
	__u32 rule;            /* the deciding rule's id (0: none, the default) */
	__u32 audit;           /* 1 + the last auditing rule's id, 0 none */
	__u32 head_len, body_len, flags;   /* flags: L7_REQ_* */
	__u32 seq;             /* 0: no response record follows; else the one l7_log_resp to join */
	__u16 method_len, target_len, host_len;   /* the whole lengths (the copies are cut) */
	__u16 jwt_err;         /* l7_req.jwt_err: why the last JWT check failed (0: none failed) */
	char method[L7_LOG_METHOD];
	char target[L7_LOG_PATH];
	char host[L7_LOG_HOST];
};
#define L7_LOG_NO_CALLER 0xffffffffu
/* At the end of a response (its last byte framed): what the request's record could not know */
struct l7_log_resp {
	__u64 ts_ns;           /* bpf_ktime_get_ns() at the response's end */
	__u64 conn;            /* as the request's record */
	__u32 seq;             /* as the request's record */
	__u32 status;          /* the final status (a 1xx before it is not it) */
	__u64 bytes;           /* the response's bytes as sent to the client, interim 1xx included */
	__u32 grpc_status;     /* 1 + a gRPC call's grpc-status (HTTP/2 streams: l7run), 0: none */
	__u32 pad;
};
_Static_assert(sizeof(struct l7_log_resp) != sizeof(struct l7_log_rec), "l7run tells them by size");

#define L7_SCAN_STATE    256   /* bytes of scanner state per CPU (l7_scan): kept out of the stack,
                                * where the verifier would enumerate its values per bpf_loop step */

enum l7_role { L7_ROLE_CLIENT = 1, L7_ROLE_UPSTREAM = 2 };

/* What the next message of a socket's stream is. */
enum l7_body {
	L7_BODY_NONE = 0,   /* a head (request or response) */
	L7_BODY_LEN,        /* body_left bytes of Content-Length body */
	L7_BODY_CHUNK,      /* a chunk-size line (chunked body) */
	L7_BODY_CHUNK_DATA, /* body_left bytes of chunk data (its CRLF is checked with the next size line) */
	L7_BODY_RAW,        /* everything until close (upgrade, close-delimited, after an error) */
};

/* What the verdict does with the current message. */
enum l7_act {
	L7_ACT_REDIRECT = 1, /* to socket `target` (pool socket for clients, client for upstreams) */
	L7_ACT_PASS,         /* to l7run, with a record in l7_pass */
	L7_ACT_DROP,
	L7_ACT_CHAIN,        /* a split client parser's head: the verdict tail-calls the decide chain */
};

/* Per-socket state, keyed by socket cookie. */
struct l7_conn {
	__u32 role;          /* L7_ROLE_* */
	__u32 upstream;      /* pool sockets: upstream index */
	__u64 peer;          /* pool sockets: cookie of the bound client (written by l7run while quiet) */
	/* Stream-parser framing. The parser cannot see where strparser's message starts in the skb
	 * (strp_msg.offset is not exposed), so it is tracked: see l7_msg_start() in gateway.h. */
	__u32 parse_pending; /* the last parser call returned 0: the next call sees the same start */
	__u32 msg_start;     /* offset of the current message in the skb the parser sees */
	__u32 msg_len;       /* length returned for the current message */
	__u32 leftover;      /* bytes after the last completed message in its last skb */
	__u32 body;          /* enum l7_body: what the next message is */
	__u32 body_left;
	/* Decision for the current message, made by the parser, applied by the verdict. */
	__u32 act;           /* enum l7_act */
	__u32 act_body;      /* enum l7_act for the body pieces that follow the head */
	__u64 target;        /* redirect target cookie */
	__u32 rec_kind;      /* for PASS: record to write (see l7_pass.kind) */
	__u32 last_up;       /* clients: 1 + upstream index of the last forwarded request (by the
	                      * kernel or, sent on by l7run, passed with its upstream) */
	/* Clients: records handed to l7run so far (l7_pass keys 1..pass_seq). */
	__u64 pass_seq;
	/* Pool sockets: final responses completed (in flight = l7_txq.sent - done). */
	__u64 done;
	__u32 resp_final;    /* the current response message ends an exchange */
	__u32 flags;         /* L7_CONN_* */
	__u32 service;       /* clients: index of the service (listener) they connected to */
	__u32 rx_staged;     /* pool sockets: the parser staged a response-mutation record for
	                      * the current message in the client's l7_rxq; the verdict publishes it */
	/* Clients: response bytes redirected to this client by pool sockets. A redirect is queued
	 * on the client's psock and sent later by a worker, so l7run waits until the socket has
	 * taken these bytes (TCP_INFO bytes_acked + SIOCOUTQ) before it writes an answer itself:
	 * otherwise its 403 overtakes an earlier response (measured). */
	__u64 resp_bytes;
	/* Clients: bytes of the request stream the verdict has disposed of (forwarded, handed to
	 * l7run or dropped). Equal to TCP_INFO bytes_received only when no byte is waiting in the
	 * stream parser: what tells l7run that a draining client has no request on its way. */
	__u64 rx_done;
	/* Clients: the idle pool socket the kernel took for this client itself (l7_idle), for
	 * upstream kbind_up, until l7run adopts it into l7_ctl.bind (it reads this field). */
	__u64 kbind;
	__u32 kbind_up;
	__u32 pad;
	/* the access log: clients: requests given a seq, responses ended (l7_log_resp.seq);
	 * pool sockets: the current response's final status and bytes so far */
	__u32 log_req, log_resp;
	__u32 log_status, log_bytes;
};

/* Idle pool sockets of one upstream the data plane may take for a new client (l7_idle, one
 * value per upstream index): a new connection's first request is forwarded in the kernel, not
 * by l7run. slot[i] is a pool socket's cookie (0: empty), written by l7run only into an empty
 * slot; a client parser takes it with a compare-and-swap to 0 and writes its own cookie in
 * claimer[i] (which tells l7run who has it, should the socket be lost before l7run learns of
 * it from the client's l7_conn.kbind). */
struct l7_idle {
	__u64 slot[L7_IDLE_SLOTS];
	__u64 claimer[L7_IDLE_SLOTS];
};

#define L7_CONN_BROKEN  (1u << 0)  /* framing lost (malformed): drop everything further */
#define L7_CONN_CLOSE   (1u << 1)  /* pool socket: the backend said Connection: close */
#define L7_CONN_NOREUSE (1u << 2)  /* pool socket: close-delimited or upgraded: not reusable */
#define L7_CONN_CRLF    (1u << 3)  /* chunked body: the CRLF after chunk data is due before the next size line */
#define L7_CONN_LAST    (1u << 4)  /* client: a request said Connection: close (or HTTP/1.0): what follows it is dropped */

/* l7run's side of a client: bindings to pool sockets and how far it has caught up. */
struct l7_ctl {
	__u64 done_seq;                   /* l7_pass records fully handled (sent on or answered) */
	__u64 bind[L7_MAX_UPSTREAMS];     /* pool socket cookie per upstream index (0 = none) */
	__u64 own_bytes;                  /* bytes l7run wrote to the client itself (its answers):
	                                   * with l7_conn.resp_bytes, where a response starts in
	                                   * what the client is sent (l7_rx_rec.at) */
};

/* A message handed to l7run (SK_PASS). Key: {client cookie, seq}, seq = 1, 2, ... */
struct l7_pass_key {
	__u64 cookie;
	__u64 seq;
};

enum l7_pass_kind { L7_PASS_HEAD = 1, L7_PASS_BODY = 2, L7_PASS_BAD = 3 };

enum l7_why {                /* why a request left the kernel path */
	L7_WHY_POOL_MISS = 1,    /* no pool socket bound for the chosen upstream */
	L7_WHY_ORDER,            /* another upstream still owes this client a response */
	L7_WHY_DENY,             /* policy denied: l7run answers the status */
	L7_WHY_BEHIND,           /* earlier messages of this client are still with l7run */
	L7_WHY_BAD,              /* malformed / too large: status answered, connection closed */
	L7_WHY_UNSUPPORTED,      /* valid HTTP the kernel path does not frame (chunked body...) */
	L7_WHY_NO_FALLBACK,      /* policy asked for the fallback proxy, none is configured */
};

#define L7_PASSF_LAST   (1u << 0)  /* last piece of this request */
#define L7_PASSF_CLOSE  (1u << 1)  /* request asked to close the connection */
#define L7_PASSF_HEADM  (1u << 2)  /* method HEAD: the response has no body */
#define L7_CUT_REFUSED  0xff       /* l7_tx_rec.n_del, l7_pass.n_del: lines to cut that one edit
                                    * cannot (l7g_hop_cut): SK_MSG drops the request */
#define L7_PASSF_RCLOSE (1u << 4)  /* its response gets "Connection: close" (l7_tx_rec.close) */
#define L7_PASSF_CHUNK  (1u << 3)  /* chunked body: l7run holds the request until the kernel framed it whole */

struct l7_pass {
	__u32 kind;        /* enum l7_pass_kind */
	__u32 len;         /* bytes of this message in the client's stream */
	__u32 verdict;     /* enum l7_verdict (heads) */
	__u32 upstream;
	__u32 status;      /* DENY / BAD: status to answer */
	__u32 why;         /* enum l7_why */
	__u32 flags;       /* L7_PASSF_* */
	__u32 head_len;
	__u32 n_set;       /* header mutations for l7run to queue for SK_MSG (as l7_tx_rec) */
	__u8  set[L7_MAX_SET];
	__u8  n_del;
	__u8  n_rset;
	__u8  rdel;
	__u8  pad;
	__u8  rset[L7_MAX_SET];
	struct l7_span del[L7_MAX_SET];
};

/* One request queued on a pool socket, for the SK_MSG program (header mutations) and the
 * response parser (HEAD responses have no body; the response's own mutations). */
struct l7_tx_rec {
	__u32 len;         /* bytes of the request as the client sent it */
	__u32 ins_off;     /* where to insert header lines (head_len - 2); ignored if n_set = 0 */
	__u8  n_set;       /* lines to insert: set[] (l7_mut_* indices) */
	__u8  no_body;     /* response carries no body (HEAD) */
	__u8  n_del;       /* the client's field lines to cut out: del[] */
	__u8  n_rset;      /* the response's: lines to add (rset[]) ... */
	__u8  rdel;        /* ... and names whose lines go (bit i: l7_rhdr_name[i]) */
	__u8  close;       /* the request asked to close and its Connection line was cut: the
	                    * response gets L7_CLOSE_LINE unless it says close itself */
	__u8  pad[2];
	__u8  set[L7_MAX_SET];
	__u8  rset[L7_MAX_SET];
	struct l7_span del[L7_MAX_SET];   /* ascending, from the request's first byte */
};

struct l7_txq {
	__u64 sent;        /* requests queued (records written) */
	__u64 ms_idx;      /* records the SK_MSG program has passed completely */
	__u32 ms_pos;      /* bytes of record ms_idx passed so far */
	__u32 pad;
	struct l7_tx_rec rec[L7_TXQ_DEPTH];
};

/* A response whose head gets mutations, in what its client is sent (l7_rxq). */
struct l7_rx_rec {
	__u64 at;          /* bytes the client was sent before this head (redirected + l7run's) */
	__u32 head_len;
	__u8  n_set;       /* lines to add before the head's final CRLF */
	__u8  n_del;       /* field lines to cut out */
	__u8  bad;         /* the head could not be edited (too many lines to cut): fail closed */
	__u8  pad;
	__u8  set[L7_MAX_SET];
	struct l7_span del[L7_MAX_SET];   /* ascending, from the head's first byte */
};

struct l7_rxq {
	__u64 wr;          /* records published (the verdict of the pool socket serving the client) */
	__u64 rd;          /* records applied in full (the client's SK_MSG) */
	__u64 pos;         /* bytes the client's SK_MSG has passed, as they were before its edits */
	__s64 delta;       /* bytes its edits added (negative: cut): l7run's delivered check */
	struct l7_rx_rec rec[L7_RXQ_DEPTH];
};

/* l7_rxport key: a client socket as its SK_MSG program sees it. */
struct l7_rx_key {
	__u32 rip;         /* the client's address (network order) */
	__u32 rport;       /* the client's port (host order) */
	__u32 lport;       /* the service port (host order) */
};

/* The data plane's counters (l7_stats): one table, l7/counters.def, names them for the
 * enum here, l7run --stats and --metrics. */
enum l7_stat {
#define L7_STAT(id, name, kind, help) L7_STAT_##id,
#include "counters.def"
#undef L7_STAT
	L7_STAT_MAX,
};

/* Telemetry per upstream (l7_upstat, PERCPU_ARRAY, key = backend slot = upstream index of
 * the manifest; stdlib/bpf/upstat.h counts, runtime/metrics.c exports). Bytes are those on the
 * upstream connection: requests as sent to it (after header mutations, bodies included, chunk
 * framing included), responses as received from it (before response mutations). Every
 * response head counts in its class, interim 1xx ones included. The rows after the data
 * plane's are written by l7run only (BPF never touches them: one writer per value, the rule
 * above): L7_UPSTAT_LOCAL its own answers (denies, 400/431, 503 for an exhausted pool...),
 * L7_UPSTAT_FAIL + i the 502s it answered for upstream i when it could not reach it (connect
 * refused, connection lost with a response owed), which --metrics charges to upstream i. */
#define L7_UPSTAT_LOCAL L7_MAX_UPSTREAMS
#define L7_UPSTAT_FAIL  (L7_MAX_UPSTREAMS + 1)
#define L7_UPSTAT_ROWS  (2 * L7_MAX_UPSTREAMS + 1)
struct l7_upstat {
	__u64 status[6];   /* [c]: responses of class cxx, c = 1..5; [0]: status outside 100-599 */
	__u64 req_bytes;
	__u64 resp_bytes;
};

/* JWT (stdlib/bpf/jwt.h). l7run writes l7_jwt_keys and l7_jwt_clock; BPF owns l7_jwt_cache. */
#define L7_JWT_CACHE_ENTRIES 2048  /* verified tokens kept (LRU) */
#define L7_JWT_CLAIM_BYTES   512   /* claim bytes a cache entry keeps; more: not cached */
#define L7_JWT_WORK          24576 /* bytes of per-CPU JWT scratch (l7_jwt_work); jwt.h asserts */

/* HMAC key of one configuration. Keys longer than the 64-byte SHA-256 block are hashed by
 * l7run first (RFC 2104), so len <= 64; len 0 = no key: every token is refused. */
struct l7_jwt_key {
	__u32 len;
	__u32 gen;             /* bumped by l7run on every write: older cache entries stop matching */
	__u8 key[64];
};

/* l7_jwt_cache key: xxh64 of the token, and which configuration verified it. */
struct l7_jwt_cache_key {
	__u64 hash;
	__u32 cfg;
	__u32 len;             /* token length */
};

/* A verified token: the full token (a hash match alone is never trusted), the times that are
 * re-checked on every hit, and the claim values of its configuration. */
struct l7_jwt_cached {
	__s64 exp;
	__s64 nbf;             /* INT64_MIN when the token has none */
	__u32 tok_len;
	__u32 gen;             /* l7_jwt_key.gen at verification */
	__u32 claims_len;      /* bytes of claims[] used */
	__u32 pad;
	struct l7_span claim[L7_MAX_CLAIMS];   /* offsets into claims[] */
	__u8 claims[L7_JWT_CLAIM_BYTES + 64];  /* + slack for whole-word copies */
	__u8 tok[L7_JWT_MAX_TOKEN + 64];
};

/* l7_jwt_clock[0]: CLOCK_TAI - CLOCK_REALTIME in ns, written by l7run at start and refreshed
 * (it changes only with the kernel's TAI offset, i.e. leap seconds). BPF has no wall clock
 * but has bpf_ktime_get_tai_ns(), which follows settimeofday/NTP like CLOCK_REALTIME;
 * subtracting this offset gives Unix time for exp/nbf. */

#endif
