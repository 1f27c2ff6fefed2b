/* HTTP/2 (RFC 9113) and HPACK (RFC 7541) as the kernel path sees them: the contract between
 * the BPF machinery (stdlib/bpf/h2.h frame parser, hpack.h decoder, huffman.h), the runtime
 * (which owns the connection-level frames and the slow path) and the tests.
 * Plain C, fixed-width types only: it compiles for the host and for BPF. */
#ifndef L7_H2_H
#define L7_H2_H

#include <linux/types.h>
#include <l7/abi.h>

/* ---- limits of the kernel path: past them a stream is slow-pathed, never forwarded undecided */
#define L7_H2_MAX_FRAME   16384  /* SETTINGS_MAX_FRAME_SIZE the kernel path accepts: the
                                  * default, which l7run never raises (RFC 9113 4.2) */
#define L7_H2_BUF         32768  /* bytes of one direction's stream one scan looks at (a whole
                                  * maximal frame fits with room to spare); power of two */
#define L7_H2_BLOCK_MAX   16384  /* bytes of one header block (HEADERS + CONTINUATION) decoded
                                  * in the kernel; power of two */
#define L7_H2_MAX_CONT    8      /* CONTINUATION frames of one header block (a flood of them is
                                  * the slow path's to refuse, CVE-2024-27316) */
#define L7_H2_SCAN_FRAMES 32     /* frames one l7_h2_scan call walks */
#define L7_H2_PREFACE_LEN 24     /* "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" */
#define L7_HPACK_INT_BYTES 4     /* continuation bytes of a prefix integer (RFC 7541 5.1 allows
                                  * an implementation limit): up to 2^28 + 2^N - 2 */
#define L7_HPACK_MAX_STEPS 2048  /* decoder steps of one block: a field representation, or up to
                                  * L7_HPACK_CHUNK input bytes of one string each */
#define L7_HPACK_CHUNK    16     /* input bytes of a string one decoder step handles */
#define L7_HPACK_STATIC   61     /* entries of the static table (RFC 7541 Appendix A) */
#define L7_HPACK_TABLE_DEFAULT 4096 /* SETTINGS_HEADER_TABLE_SIZE until ours is acknowledged */
#define L7_HPACK_ENTRY_OVERHEAD 32 /* an entry's size is its name and value bytes + 32 (4.1) */
#define L7_HPACK_TABLE_RING 4096 /* bytes of the tracked table's names and values: its entries'
                                  * sizes are at most L7_HPACK_TABLE_DEFAULT, so fewer; power of 2 */
#define L7_HPACK_TABLE_ENTRIES 128 /* entries of the tracked table (each 32 bytes at least) */
#define L7_H2_MAX_AUTH    255    /* bytes of :authority / Host compared with each other */

/* ---- frame types (RFC 9113 6): X(NAME, value) -------------------------------------------- */
#define L7_H2_FRAME_TYPES(X)                                                                  \
	X(DATA, 0x0) X(HEADERS, 0x1) X(PRIORITY, 0x2) X(RST_STREAM, 0x3) X(SETTINGS, 0x4)      \
	X(PUSH_PROMISE, 0x5) X(PING, 0x6) X(GOAWAY, 0x7) X(WINDOW_UPDATE, 0x8)                 \
	X(CONTINUATION, 0x9)
enum l7_h2_type {
#define L7__X(n, v) L7_H2_##n = v,
	L7_H2_FRAME_TYPES(L7__X)
#undef L7__X
};

/* Frame flags (RFC 9113 6.x). ACK shares bit 0 with END_STREAM (SETTINGS, PING). */
#define L7_H2_F_END_STREAM  0x01
#define L7_H2_F_ACK         0x01
#define L7_H2_F_END_HEADERS 0x04
#define L7_H2_F_PADDED      0x08
#define L7_H2_F_PRIORITY    0x20

/* ---- error codes (RFC 9113 7): X(NAME, value) --------------------------------------------- */
#define L7_H2_ERRORS(X)                                                                       \
	X(NO_ERROR, 0x0) X(PROTOCOL_ERROR, 0x1) X(INTERNAL_ERROR, 0x2)                         \
	X(FLOW_CONTROL_ERROR, 0x3) X(SETTINGS_TIMEOUT, 0x4) X(STREAM_CLOSED, 0x5)              \
	X(FRAME_SIZE_ERROR, 0x6) X(REFUSED_STREAM, 0x7) X(CANCEL, 0x8)                         \
	X(COMPRESSION_ERROR, 0x9) X(CONNECT_ERROR, 0xa) X(ENHANCE_YOUR_CALM, 0xb)              \
	X(INADEQUATE_SECURITY, 0xc) X(HTTP_1_1_REQUIRED, 0xd)
enum l7_h2_error {
#define L7__X(n, v) L7_H2_##n = v,
	L7_H2_ERRORS(L7__X)
#undef L7__X
};

/* ---- settings (RFC 9113 6.5.2, RFC 8441, RFC 9218): X(NAME, id) ------------------------- */
#define L7_H2_SETTINGS(X)                                                                     \
	X(HEADER_TABLE_SIZE, 0x1) X(ENABLE_PUSH, 0x2) X(MAX_CONCURRENT_STREAMS, 0x3)           \
	X(INITIAL_WINDOW_SIZE, 0x4) X(MAX_FRAME_SIZE, 0x5) X(MAX_HEADER_LIST_SIZE, 0x6)        \
	X(ENABLE_CONNECT_PROTOCOL, 0x8) X(NO_RFC7540_PRIORITIES, 0x9)
enum l7_h2_setting {
#define L7__X(n, v) L7_H2_S_##n = v,
	L7_H2_SETTINGS(L7__X)
#undef L7__X
};

/* ---- results ---------------------------------------------------------------------------------
 * Every entry point returns an int: >= 0 is success (what it means is per function), a negative
 * value is -(scope | code):
 *   L7_H2_R_CONN   | error code  connection error: GOAWAY with the code, then close (5.4.1)
 *   L7_H2_R_STREAM | error code  stream error: RST_STREAM with the code on that stream (5.4.2);
 *                                a malformed message (8.1.1) is PROTOCOL_ERROR on its stream
 *   L7_H2_R_SLOW   | reason      the kernel cannot decide this: hand the connection to the slow
 *                                path (which has the full decoder), never forward it undecided */
#define L7_H2_R_CONN   0x100
#define L7_H2_R_STREAM 0x200
#define L7_H2_R_SLOW   0x400
#define L7_H2_CONN_ERR(code)   (-(int)(L7_H2_R_CONN | (code)))
#define L7_H2_STREAM_ERR(code) (-(int)(L7_H2_R_STREAM | (code)))
#define L7_H2_SLOW(reason)     (-(int)(L7_H2_R_SLOW | (reason)))
#define L7_H2_MALFORMED        L7_H2_STREAM_ERR(L7_H2_PROTOCOL_ERROR)

/* Why a block or frame went to the slow path: X(NAME, value) */
#define L7_H2_SLOW_REASONS(X)                                                                 \
	X(DYNAMIC, 1)      /* a reference to the dynamic table while its contents are unknown */ \
	X(BLOCK_SIZE, 3)   /* header block larger than L7_H2_BLOCK_MAX */                       \
	X(CONT_FLOOD, 4)   /* more than L7_H2_MAX_CONT CONTINUATION frames */                   \
	X(OUT_SIZE, 5)     /* decoded fields the policy keeps overflow the request buffer */   \
	X(STEPS, 6)        /* more than L7_HPACK_MAX_STEPS decoder steps */                     \
	X(FIELDS, 7)       /* more than L7_MAX_HEADERS fields */                                \
	X(DUP_WANTED, 8)   /* a header the policy reads came twice (which would it see?) */     \
	X(METHOD, 9)       /* a method outside the ones the kernel path classifies */          \
	X(VALUE_SIZE, 10)  /* a value the kernel checks (authority, content-length) too long */
enum l7_h2_slow {
#define L7__X(n, v) L7_H2_SLOW_##n = v,
	L7_H2_SLOW_REASONS(L7__X)
#undef L7__X
};

/* ---- the connection, one direction of it: what the frame parser tracks -------------------- */
#define L7_H2_C_CLIENT     (1u << 0)  /* this direction is the client's: preface, odd streams */
#define L7_H2_C_PREFACE    (1u << 1)  /* the client preface is still expected */
#define L7_H2_C_SETTINGS   (1u << 2)  /* the first frame must be SETTINGS (3.4) */
#define L7_H2_C_BLOCK      (1u << 3)  /* in a header block: only CONTINUATION on hb_stream */
/* HPACK state of this direction's encoder, as its decoder (the kernel) knows it */
#define L7_H2_C_HP_PENDING (1u << 8)  /* l7run sent SETTINGS_HEADER_TABLE_SIZE 0, no ACK yet */
#define L7_H2_C_HP_ACKED   (1u << 9)  /* ... acknowledged: table size updates above 0 are errors */
#define L7_H2_C_HP_ZERO    (1u << 10) /* the encoder's table has size 0 now: it is empty */
#define L7_H2_C_HP_UPDATE  (1u << 11) /* the next block must start with a size update (4.2) */
#define L7_H2_C_HP_UNKNOWN (1u << 12) /* the decoder does not hold the encoder's table (it keeps
                                       * none, or lost track: a block not decoded to its end):
                                       * a dynamic reference is the slow path, until a size
                                       * update to 0 empties the table */
#define L7_H2_C_HPACK      (L7_H2_C_HP_PENDING | L7_H2_C_HP_ACKED | L7_H2_C_HP_ZERO | L7_H2_C_HP_UPDATE | \
			    L7_H2_C_HP_UNKNOWN)

struct l7_h2_conn {
	__u32 flags;           /* L7_H2_C_* */
	__u32 skip;            /* bytes of the current frame's payload still to come (DATA, unknown
	                        * types, GOAWAY debug data): passed through unread */
	__u32 hb_stream;       /* stream of the header block in progress */
	__u32 hb_flags;        /* flags of the HEADERS frame that started it */
	__u32 hb_len;          /* bytes of the block gathered (in struct l7_hpack.blk) */
	__u32 hb_cont;         /* CONTINUATION frames of the block so far */
	__u32 last_stream;     /* highest stream a HEADERS frame of this direction opened */
	__u32 stop;            /* bit t: l7_h2_scan stops after a frame of type t (a header block
	                        * completing and errors always stop it) */
	__u64 frames;          /* frames seen */
};

/* One frame as l7_h2_frame() read it. */
struct l7_h2_frame {
	__u32 len;             /* payload length */
	__u32 type, flags;
	__u32 stream;          /* reserved bit cleared */
	__u32 data_off;        /* from the frame's first byte: the field block fragment (HEADERS,
	                        * CONTINUATION) or data (DATA), after pad length and priority */
	__u32 data_len;        /* ... its length, without padding */
	__u32 value;           /* WINDOW_UPDATE increment, RST_STREAM / GOAWAY error code,
	                        * HEADERS / PRIORITY stream dependency (exclusive bit cleared) */
	__u32 value2;          /* GOAWAY last stream id, HEADERS / PRIORITY weight - 1 */
	__u64 opaque;          /* PING data */
};

/* l7_h2_scan() events (>= 0 returns) */
enum l7_h2_event {
	L7_H2_EV_MORE = 0,     /* every byte was consumed (or a frame must be seen whole: `next`
	                        * is where it starts); call again with more */
	L7_H2_EV_FRAME = 1,    /* stopped after a frame of a type in conn.stop: see ev.f */
	L7_H2_EV_HEADERS = 2,  /* a header block is complete in struct l7_hpack: decode it */
	L7_H2_EV_LIMIT = 3,    /* L7_H2_SCAN_FRAMES frames walked: call again from `next` */
};

struct l7_h2_ev {
	__u32 off;             /* where the last frame walked starts */
	__u32 next;            /* where the scan stopped: the next byte to look at */
	__u32 frames;          /* frames walked by this call */
	__u32 pad_;
	struct l7_h2_frame f;  /* the last frame walked */
};

/* ---- HPACK decoding results ------------------------------------------------------------ */
/* What a header block is decoded as (RFC 9113 8.1 / 8.3): the pseudo-header rules differ. */
enum l7_hpack_mode {
	L7_HPACK_FIELDS = 0,   /* RFC 7541 only: no HTTP semantics (conformance tests) */
	L7_HPACK_REQUEST = 1,
	L7_HPACK_RESPONSE = 2,
	L7_HPACK_TRAILERS = 3,
};

/* Representation of a field (RFC 7541 6): what a re-encoder must keep (never-indexed stays so). */
enum l7_hpack_rep {
	L7_HPACK_R_INDEXED = 0,      /* indexed field (static table) */
	L7_HPACK_R_INCREMENTAL = 1,  /* literal with incremental indexing (a table of size 0) */
	L7_HPACK_R_WITHOUT = 2,      /* literal without indexing */
	L7_HPACK_R_NEVER = 3,        /* literal never indexed (7.1.3): never re-encode as indexed */
};

/* Pseudo-header fields: bit (1 << L7_H2_P_*) of l7_h2_msg.pseudo */
#define L7_H2_PSEUDO(X)                                                                       \
	X(METHOD, 0, ":method") X(SCHEME, 1, ":scheme") X(AUTHORITY, 2, ":authority")          \
	X(PATH, 3, ":path") X(STATUS, 4, ":status") X(PROTOCOL, 5, ":protocol")
enum l7_h2_pseudo {
#define L7__X(n, v, s) L7_H2_P_##n = v,
	L7_H2_PSEUDO(L7__X)
#undef L7__X
	L7_H2_P_N
};

/* l7_h2_msg.flags */
#define L7_H2_M_TE_TRAILERS (1u << 0)  /* te: trailers */
#define L7_H2_M_CL          (1u << 1)  /* content-length present (req->body_len) */
#define L7_H2_M_GRPC        (1u << 2)  /* content-type application/grpc[+proto|;...] */
#define L7_H2_M_HOST        (1u << 3)  /* a host field (req->host when :authority is absent) */
#define L7_H2_M_GRPC_STATUS (1u << 4)  /* grpc-status present (grpc_status) */
#define L7_H2_M_REGULAR     (1u << 5)  /* a regular field was seen (pseudo-headers must precede) */
#define L7_H2_M_CONNECT     (1u << 6)  /* :method CONNECT */
#define L7_H2_M_UPDATE      (1u << 7)  /* the block began with a dynamic table size update */
#define L7_H2_M_DYNAMIC     (1u << 8)  /* a field came from the dynamic table (by index, or its
                                        * name): the block means this only to a decoder with
                                        * the same table (an intermediary re-encodes it) */
#define L7_H2_M_TABLE       (1u << 9)  /* the block changed the dynamic table (insert, evict,
                                        * size): a copy of it kept elsewhere must be updated */

/* What a decoded block says beyond struct l7_req (which holds the values the policy reads:
 * method, target/path/query, host = :authority, hdr[] of the wanted names, in req->buf). */
struct l7_h2_msg {
	__u32 mode;            /* enum l7_hpack_mode */
	__s32 rc;              /* the decode's result (as returned) */
	__u32 at;              /* block offset of the representation a non-zero rc is about */
	__u32 fields;          /* field representations (not counting size updates) */
	__u32 pseudo;          /* bit L7_H2_P_*: present */
	__u32 flags;           /* L7_H2_M_* */
	__u32 never;           /* bit i: wanted header i came as a never-indexed literal */
	__u32 n_never;         /* never-indexed fields in the block */
	__u32 n_huff;          /* Huffman-coded strings */
	__u32 status;          /* :status (responses) */
	__u32 grpc_status;     /* grpc-status (responses, trailers) */
	__u32 table_size;      /* the last dynamic table size update's value (if UPDATE) */
	__u32 reps;            /* 2 bits per wanted header i (bits 2i, 2i+1): enum l7_hpack_rep */
	__u32 preps;           /* 2 bits per pseudo-header (bits 2p, 2p+1) */
	struct l7_span scheme; /* :scheme, :status, :protocol values in req->buf */
	struct l7_span status_s;
	struct l7_span protocol;
	struct l7_span host_hdr; /* a host field's value (compared with :authority) */
	/* Where each wanted header's representation lies in the block: a block edited by cutting
	 * whole representations keeps every other one as it was (with a table of size 0 nothing
	 * else refers to it). */
	struct l7_span rep[L7_MAX_WANTED];
};

/* The static table (RFC 7541 Appendix A): X(index, name, value) */
#define L7_HPACK_STATIC_TABLE(X)                                                              \
	X(1, ":authority", "") X(2, ":method", "GET") X(3, ":method", "POST")                 \
	X(4, ":path", "/") X(5, ":path", "/index.html") X(6, ":scheme", "http")                \
	X(7, ":scheme", "https") X(8, ":status", "200") X(9, ":status", "204")                 \
	X(10, ":status", "206") X(11, ":status", "304") X(12, ":status", "400")                \
	X(13, ":status", "404") X(14, ":status", "500") X(15, "accept-charset", "")            \
	X(16, "accept-encoding", "gzip, deflate") X(17, "accept-language", "")                \
	X(18, "accept-ranges", "") X(19, "accept", "") X(20, "access-control-allow-origin", "") \
	X(21, "age", "") X(22, "allow", "") X(23, "authorization", "")                         \
	X(24, "cache-control", "") X(25, "content-disposition", "")                            \
	X(26, "content-encoding", "") X(27, "content-language", "") X(28, "content-length", "") \
	X(29, "content-location", "") X(30, "content-range", "") X(31, "content-type", "")     \
	X(32, "cookie", "") X(33, "date", "") X(34, "etag", "") X(35, "expect", "")            \
	X(36, "expires", "") X(37, "from", "") X(38, "host", "") X(39, "if-match", "")         \
	X(40, "if-modified-since", "") X(41, "if-none-match", "") X(42, "if-range", "")        \
	X(43, "if-unmodified-since", "") X(44, "last-modified", "") X(45, "link", "")          \
	X(46, "location", "") X(47, "max-forwards", "") X(48, "proxy-authenticate", "")        \
	X(49, "proxy-authorization", "") X(50, "range", "") X(51, "referer", "")               \
	X(52, "refresh", "") X(53, "retry-after", "") X(54, "server", "")                      \
	X(55, "set-cookie", "") X(56, "strict-transport-security", "")                         \
	X(57, "transfer-encoding", "") X(58, "user-agent", "") X(59, "vary", "")               \
	X(60, "via", "") X(61, "www-authenticate", "")

/* Decoding one Huffman-coded string (stdlib/bpf/huffman.h). */
struct l7_huff {
	__u32 state;           /* node of the code tree (0: the root) */
	__u32 flags;           /* L7_HUFF_FAIL once EOS was decoded */
	__u32 n;               /* symbols written */
	/* hpack.h's bookkeeping of the string (raw or Huffman) */
	__u32 cls;             /* OR of the byte classes of its bytes */
	__u32 q;               /* index of its first '?', ~0u: none */
	__u32 last;            /* its last byte */
};

/* The decoder's state between two steps (bpf_loop callbacks); map memory, not the stack. */
struct l7_hpack_st {
	__u32 pos;             /* next block byte */
	__u32 step;            /* what the next step does (hpack.h L7_HS_*) */
	__u32 send;            /* block offset where the current string ends */
	__u32 huff;            /* the current string is Huffman coded */
	__u32 o;               /* output cursor in req->buf */
	__u32 sstart;          /* req->buf offset of the current string's first byte */
	__u32 keep;            /* the current string is kept (else its output is rewound) */
	__u32 first;           /* the current string's first byte (0x100: none yet) */
	__u32 rep_off;         /* block offset of the current field representation */
	__u32 rep;             /* its enum l7_hpack_rep */
	__u32 kind;            /* what its name is (hpack.h L7_HK_*) */
	__u32 want;            /* wanted header index + 1, or 0 */
	__u32 done;            /* the block was decoded to its end */
	__s32 rc;              /* first result of the block (a malformed field lets decoding go on
	                        * to find a compression error: a connection error comes first) */
	struct l7_huff h;      /* the current string (raw strings use n, cls, q, last too) */
	/* the dynamic table (struct l7_hpack_table) */
	__u32 src;             /* the current string comes from the table's ring, not the block */
	__u32 tpos;            /* ... its next ring byte (not wrapped: masked when read) */
	__u32 tsend;           /* ... where it ends */
	__u32 dyn;             /* L7_HPACK_DYN_*: what of the field comes from the table */
	__u32 vt_off, vt_len;  /* the referenced entry's value in the ring (an indexed field) */
	__u32 nt_off;          /* ring offset of the field's name when it came from the table
	                        * (the new entry's copy of it when the field is inserted) */
	__u32 ins;             /* the field is inserted (a literal with incremental indexing) */
	__u32 ins_start;       /* ring offset of the new entry's first byte */
	__u32 ins_n;           /* ... its bytes written so far (name, then value) */
	__u32 ins_nlen;        /* ... of which its name */
	__u32 vstart;          /* block offset of the field's value string (a literal) */
};
#define L7_HPACK_DYN_NAME  1   /* the name is the table entry's */
#define L7_HPACK_DYN_VALUE 2   /* the value too (an indexed field) */

/* The encoder's dynamic table as its decoder must keep it (RFC 7541 2.3.2, 4): entries
 * newest first from index 62, evicted oldest first to stay within `max`. Names and values
 * lie in a ring in insertion order, each entry's name then value, wrapping at its end. The
 * all-zero value is the initial state (empty, max L7_HPACK_TABLE_DEFAULT). */
struct l7_hpack_entry {
	__u16 off;             /* ring offset of the name; the value follows it */
	__u16 nlen, vlen;
	__u16 pad_;
};
struct l7_hpack_table {
	__u32 init;            /* max is set (0: the initial state) */
	__u32 max;             /* the size in force (SETTINGS, then the last size update) */
	__u32 size;            /* the entries' sizes (4.1) */
	__u32 count;           /* entries */
	__u32 head;            /* entries ever inserted: e[head % ENTRIES] is the next */
	__u32 wpos;            /* ring offset where the next entry starts */
	__u32 pad_[2];
	struct l7_hpack_entry e[L7_HPACK_TABLE_ENTRIES];
	__u8 ring[L7_HPACK_TABLE_RING + 64];   /* + slack for whole-word reads at a masked offset */
};

/* One direction's decoder: the block, the state, the results (a per-CPU map value). */
struct l7_hpack {
	__u32 len;             /* in: bytes of the block in blk */
	__u32 conn;            /* in/out: the connection's L7_H2_C_HP_* bits */
	__u32 mode;            /* in: enum l7_hpack_mode */
	__u32 pad_;
	struct l7_h2_msg msg;  /* out */
	struct l7_hpack_st st;
	/* Twice the block: a fragment of up to L7_H2_BLOCK_MAX bytes copied in at a masked
	 * offset is then in bounds for the verifier (l7_h2_scan checks the real limit). */
	__u8 blk[2 * L7_H2_BLOCK_MAX + L7_BUF_SLACK];
	/* in/out: the encoder's dynamic table, unless conn has L7_H2_C_HP_UNKNOWN (the kernel
	 * keeps it per connection while it may hold entries: mesh_h2.h) */
	struct l7_hpack_table tab;
};

#endif /* L7_H2_H */
