/* HTTP/2 clients in mesh mode (issue 14): l7run's half. The kernel (stdlib/bpf/mesh_h2.h)
 * decides every stream at its header block and hands the client's frames here with one
 * L7_MP_H2 record per decision (l7/mesh.h); this file is each hop's HTTP/2 endpoint:
 *   client side   our SETTINGS (HEADER_TABLE_SIZE 0: the kernel decodes blocks without a
 *                 dynamic table), ACKs of its SETTINGS and PINGs; a stream's frames go to the
 *                 backend connection of the upstream the kernel chose, a denied one our answer
 *                 (h2_frames.c), a refused one RST_STREAM with the kernel's code; a header
 *                 block without a decision is never forwarded (GOAWAY INTERNAL_ERROR).
 *   backend side  a connection of this client's own to each upstream its streams go to,
 *                 opened by l7run when the first such stream comes (mesh_connect_own: outside
 *                 the data plane, which has nothing to do on it; not a pool connection, so
 *                 --pool bounds HTTP/1.1 clients only, and any number of HTTP/2 clients is
 *                 served), closed with the client. It speaks HTTP/2 with us: our preface and
 *                 SETTINGS (table size 0, no push, the client's initial window) before the
 *                 first stream; its SETTINGS and PINGs acknowledged; its stream frames relayed
 *                 to the client as they are (the connection is this client's alone, so stream
 *                 ids and HPACK state stay end to end) and its response's :status counted for
 *                 the upstream. A stream l7run cannot open one for (its own limits) is
 *                 refused, REFUSED_STREAM (retryable), and counted (h2_streams_refused).
 *   windows       stream WINDOW_UPDATEs go with their stream; stream-0 ones are relayed to
 *                 the other hop (less the DATA of our own answers, which no backend saw).
 *   HPACK         every request block goes through a copy of the client's dynamic table
 *                 (h2_reenc.c: the kernel's decoder, built natively), so a block that
 *                 refers to it (or came before it was known empty) reaches the backend
 *                 re-encoded without it: each backend's table is one the client never
 *                 wrote, and some of the client's blocks went elsewhere or nowhere.
 *   mutations     a stream the kernel forwarded with header mutations (L7_MP_H2_MUT) has its
 *                 decision in l7_mesh_h2mut: its block is re-encoded without the fields the
 *                 decision removes and with the ones it adds (the manifest's names and lines),
 *                 and its response's final head the same way with the response's; a stream
 *                 whose mutations cannot be applied is never relayed without them (refused).
 *                 Each backend's response blocks go through a decoder of their own, so that a
 *                 block its encoder sent before it took our table size 0 decodes too.
 * One thread writes both ways, whole frames at a time, so frames never interleave. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <bpf/bpf.h>
#include "mesh.h"
#include "h2_frames.h"
#include "h2_reenc.h"
#include "telemetry.h"
#include "../stdlib/bpf/hpack.h"
#include "l7/grpc.h"

#define H2M_STREAMS 1024       /* streams remembered (newest first): older ones are closed */
#define H2M_BACKENDS L7_MESH_UPSTREAMS   /* backend connections one client's streams use */
#define H2M_IN_MAX (1u << 20)  /* bytes of a peer's unfinished frames kept */
/* Floods (RFC 9113 10.5): frames that cost us work and the client nothing. Past these on one
 * connection, GOAWAY ENHANCE_YOUR_CALM: SETTINGS and PINGs each make an ACK (CVE-2019-9515,
 * -9512), a stream reset before its response started made a backend start work for nothing
 * ("rapid reset", CVE-2023-44487). */
#define H2M_MAX_SETTINGS 256
#define H2M_MAX_PINGS    4096
#define H2M_MAX_RESETS   256

enum { S_FREE, S_FWD, S_DENIED };

struct h2m_stream {
	uint32_t id;
	uint8_t state;
	uint8_t resp;              /* its response's final :status was counted */
	uint16_t be;               /* backend index (S_FWD) */
	int64_t body_left;         /* content-length less the DATA so far; -1: none said */
	uint8_t n_rset, rdel;      /* its response's mutations (l7_decision rset/rdel), for its */
	uint8_t rset[L7_MAX_SET];  /* final head */
	uint16_t status;           /* the access log: its response's final :status, */
	uint16_t grpc;             /* 1 + its grpc-status (0: none), */
	uint64_t bytes;            /* the bytes of it relayed to the client */
	uint8_t logged;            /* and its record written */
};

struct h2m_backend {
	struct io io;              /* first: its events (backend_ready) */
	struct mesh_client *c;
	int fd;                    /* -1: unused */
	int up;                    /* upstream (endpoint slot) it serves */
	struct sockaddr_in to;     /* the endpoint's address then (a run-time slot may move on) */
	char *in;                  /* its bytes not yet a whole frame */
	size_t len, cap;
	uint32_t cont;             /* stream a response header block goes on in */
	struct h2_reenc *re;       /* its response blocks: its encoder's table, re-encoding */
	uint64_t req_bytes, resp_bytes;   /* sent and relayed, not yet in the upstream's telemetry */
};

struct h2m_dec {              /* a decision the kernel made, by where its bytes end */
	uint64_t end;
	struct l7_mesh_pass r;
};

struct mesh_h2 {
	int preface;               /* the client's preface was read */
	char *in;                  /* the client's bytes from records, not yet a whole frame */
	size_t len, cap;
	uint64_t at;               /* client bytes taken so far (the records' coordinates) */
	struct h2m_dec dec[64];    /* decisions whose frames have not been handled */
	int ndec;
	struct h2m_stream st[H2M_STREAMS];
	uint32_t st_next;
	struct h2m_backend be[H2M_BACKENDS];
	uint32_t last;             /* highest client stream handled (GOAWAY's last stream) */
	uint32_t iws;              /* the client's SETTINGS_INITIAL_WINDOW_SIZE, 0: default */
	uint64_t conn_credit;      /* stream-0 WINDOW_UPDATE increments the client gave */
	uint64_t own_data;         /* DATA bytes of our answers, not yet taken off a relayed update */
	uint32_t settings, pings, resets;   /* the client's, for the flood bounds */
	int gone;                  /* the client is being closed (its backends dropped) */
	struct h2_reenc *re;       /* the client's request blocks: its table, re-encoding */
};

struct mesh_h2 *mesh_h2_new(void)
{
	struct mesh_h2 *h = calloc(1, sizeof(struct mesh_h2));

	if (h && !(h->re = h2_reenc_new())) {
		free(h);
		h = NULL;
	}
	for (int i = 0; h && i < H2M_BACKENDS; i++)
		h->be[i].fd = -1;
	return h;
}

void mesh_h2_free(struct mesh_h2 *h)
{
	if (!h)
		return;
	for (int i = 0; i < H2M_BACKENDS; i++) {
		free(h->be[i].in);
		h2_reenc_free(h->be[i].re);
	}
	free(h->in);
	h2_reenc_free(h->re);
	free(h);
}

static void backend_close(struct mesh_client *c, struct h2m_backend *b);

/* The client is gone: so are its backend connections (only ever its own). */
void mesh_h2_close(struct mesh_client *c)
{
	if (!c->h2m)
		return;
	c->h2m->gone = 1;
	for (int i = 0; i < H2M_BACKENDS; i++)
		if (c->h2m->be[i].fd >= 0)
			backend_close(c, &c->h2m->be[i]);
}

static uint32_t be24(const uint8_t *p)
{
	return (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
}

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int append(char **buf, size_t *len, size_t *cap, const char *p, size_t n)
{
	if (*len + n > H2M_IN_MAX)
		return -1;
	if (*len + n > *cap) {
		size_t c = (*len + n) * 2;
		char *b = realloc(*buf, c);
		if (!b)
			return -1;
		*buf = b;
		*cap = c;
	}
	memcpy(*buf + *len, p, n);
	*len += n;
	return 0;
}

static struct h2m_stream *stream_of(struct mesh_h2 *h, uint32_t id)
{
	for (uint32_t i = 0; i < H2M_STREAMS; i++) {
		struct h2m_stream *s = &h->st[(h->st_next - 1 - i) % H2M_STREAMS];
		if (s->state == S_FREE)
			return NULL;
		if (s->id == id)
			return s;
	}
	return NULL;
}

static struct h2m_stream *stream_new(struct mesh_h2 *h, uint32_t id, int state)
{
	struct h2m_stream *s = &h->st[h->st_next++ % H2M_STREAMS];

	*s = (struct h2m_stream){ .id = id, .state = (uint8_t)state, .body_left = -1 };
	return s;
}

static void to_client(struct mesh_client *c, const void *p, size_t n)
{
	mesh_send_all(c->fd, p, n);
}

/* To backend b (none: nothing), counted for its upstream's request bytes. */
static void to_backend(struct h2m_backend *b, const void *p, size_t n)
{
	if (!b || b->fd < 0)
		return;
	b->req_bytes += n;
	mesh_send_all(b->fd, p, n);
}

/* Backend b's bytes so far, and a response's final status (0: none), into its upstream's
 * telemetry (l7_upstream_*): a map update, so once a response rather than once a frame. */
static void backend_count(struct mesh_client *c, struct h2m_backend *b, int status)
{
	upstat_upstream(c->v->v.upstat, b->up, status, b->req_bytes, b->resp_bytes);
	b->req_bytes = b->resp_bytes = 0;
}

/* Its connection closed: what it has not counted yet, counted. */
static void backend_close(struct mesh_client *c, struct h2m_backend *b)
{
	if (b->req_bytes || b->resp_bytes)
		backend_count(c, b, 0);
	loop_close(c->v->pool.L, b->fd);
	b->fd = -1;
}

/* A forwarded stream's body broke its content-length: refused on both hops. */
static void body_mismatch(struct mesh_client *c, struct h2m_stream *s, struct h2m_backend *b)
{
	char o[32];

	to_backend(b, o, h2_rst(o, s->id, L7_H2_CANCEL));
	to_client(c, o, h2_rst(o, s->id, L7_H2_PROTOCOL_ERROR));
	s->state = S_DENIED;
}

static void backend_ready(struct l7run *L, struct io *io, uint32_t events);

enum { BE_H1 = 1, BE_DOWN, BE_FULL };   /* why a stream has no backend connection */

/* The client's connection to upstream up, opened (our preface and SETTINGS sent) when the
 * first stream goes there; NULL and *why when there is none: BE_H1 the upstream speaks
 * HTTP/1.1 only (not --h2c), BE_DOWN it cannot be reached, BE_FULL l7run's own limits. */
static struct h2m_backend *backend(struct mesh_client *c, int up, int *why)
{
	struct mesh_h2 *h = c->h2m;
	struct h2m_backend *b = NULL;

	if (up < 0 || up >= L7_MESH_UPSTREAMS || !(c->v->h2c & (1u << up))) {
		*why = up >= 0 && up < L7_MESH_UPSTREAMS ? BE_H1 : BE_DOWN;
		return NULL;
	}
	const struct sockaddr_in *to = &c->v->pool.upstream[up].addr;
	for (int i = 0; i < H2M_BACKENDS; i++)
		if (h->be[i].fd >= 0 && h->be[i].up == up && h->be[i].to.sin_addr.s_addr == to->sin_addr.s_addr &&
		    h->be[i].to.sin_port == to->sin_port)
			return &h->be[i];
	for (int i = 0; i < H2M_BACKENDS && !b; i++)
		if (h->be[i].fd < 0)
			b = &h->be[i];
	const char *err = NULL;
	struct h2_reenc *re = b ? h2_reenc_new() : NULL;   /* a new connection: a new table */
	int fd = re ? mesh_connect_own(c->v, up, &err) : -1;
	if (fd < 0 || loop_watch(c->v->pool.L, fd, &b->io, EPOLLIN | EPOLLRDHUP)) {
		if (fd >= 0)
			close(fd);
		h2_reenc_free(re);
		*why = err ? BE_DOWN : BE_FULL;
		return NULL;
	}
	h2_reenc_free(b->re);
	*b = (struct h2m_backend){ .io.ready = backend_ready, .c = c, .fd = fd, .up = up, .to = *to, .in = b->in,
				   .cap = b->cap, .re = re };
	static const char pre[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
	uint16_t ids[3] = { L7_H2_S_HEADER_TABLE_SIZE, L7_H2_S_ENABLE_PUSH, L7_H2_S_INITIAL_WINDOW_SIZE };
	uint32_t vals[3] = { 0, 0, h->iws };
	char o[128];
	size_t n = sizeof pre - 1;
	memcpy(o, pre, n);
	n += h2_settings(o + n, ids, vals, h->iws ? 3 : 2);
	if (h->conn_credit)   /* the window the client opened before this backend was in use */
		n += h2_window_update(o + n, 0, (uint32_t)(h->conn_credit > 0x7fffffff ? 0x7fffffff : h->conn_credit));
	to_backend(b, o, n);
	return b;
}

/* The access log's response record of stream `sid`, as the kernel writes HTTP/1.1's (alog.c
 * joins it with the kernel's record of the decision, whose seq is the stream's id; a denied
 * stream's record waits for none and this one is dropped). */
static void log_end(struct mesh_client *c, uint32_t sid, uint32_t status, uint64_t bytes, uint32_t grpc)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);   /* bpf_ktime_get_ns's clock */
	struct l7_log_resp rs = { .ts_ns = (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec,
				  .conn = (uint64_t)c->key.lport << 32 | c->key.lip, .seq = sid, .status = status,
				  .bytes = bytes, .grpc_status = grpc };
	alog_response(&c->v->v, &rs);
}

/* Our answer to a stream the kernel denied (or found no connection for). */
static void answer(struct mesh_client *c, uint32_t s, const struct l7_mesh_pass *r, int end_stream)
{
	int status = (int)L7_MP_H2_STATUS(r->status), grpc = !!(r->status & L7_MP_H2_IS_GRPC);
	unsigned named = L7_MP_H2_GRPC(r->status);
	char o[H2_ANSWER_MAX];
	size_t data;
	const char *why = status == 403 ? "denied by policy" : status == 503 ? "no connection to the upstream" :
			  status == 505 ? "the upstream speaks HTTP/1.1 only" :
			  status == 502 ? "the upstream cannot be reached" : "refused by policy";
	size_t n = h2_answer(o, s, status, grpc, l7_grpc_status_of(named, (unsigned)status), why, end_stream, &data);

	upstat_answer(c->v->v.upstat, -1, grpc ? 200 : status, n);   /* before the client can read it */
	c->h2m->own_data += data;
	to_client(c, o, n);
	log_end(c, s, grpc ? 200 : (uint32_t)status, n, grpc ? 1 + l7_grpc_status_of(named, (unsigned)status) : 0);
	c->local_done++;
}

static void goaway(struct mesh_client *c, uint32_t code)
{
	char o[32];

	to_client(c, o, h2_goaway(o, c->h2m->last, code));
	c->closing = 1;
	c->close_at = now_ms() + 100;   /* let it drain before the FIN */
}

/* The decision about the block or frame that ends at client offset `end`, if the kernel made
 * one there (decisions come in order). */
static const struct l7_mesh_pass *decision_at(struct mesh_h2 *h, uint64_t end)
{
	while (h->ndec && h->dec[0].end < end) {   /* a record whose block was refused whole */
		memmove(h->dec, h->dec + 1, (size_t)--h->ndec * sizeof h->dec[0]);
	}
	return h->ndec && h->dec[0].end == end ? &h->dec[0].r : NULL;
}

static void decision_done(struct mesh_h2 *h)
{
	if (h->ndec)
		memmove(h->dec, h->dec + 1, (size_t)--h->ndec * sizeof h->dec[0]);
}

static void client_settings(struct mesh_client *c, const uint8_t *pl, uint32_t len)
{
	struct mesh_h2 *h = c->h2m;
	char o[64];

	for (uint32_t i = 0; i + 6 <= len; i += 6)
		if (((uint32_t)pl[i] << 8 | pl[i + 1]) == L7_H2_S_INITIAL_WINDOW_SIZE) {
			h->iws = be32(pl + i + 2);
			/* the backends send the client's streams what it can take */
			uint16_t id = L7_H2_S_INITIAL_WINDOW_SIZE;
			size_t n = h2_settings(o, &id, &h->iws, 1);
			for (int b = 0; b < H2M_BACKENDS; b++)
				to_backend(&h->be[b], o, n);
		}
	to_client(c, o, h2_frame(o, 0, L7_H2_SETTINGS, L7_H2_F_ACK, 0));
}

/* The client's stream-0 WINDOW_UPDATE: every backend in use may send that much more (our own
 * answers' DATA came out of the same window, which no backend knows of). */
static void client_window(struct mesh_client *c, uint32_t inc)
{
	struct mesh_h2 *h = c->h2m;
	uint64_t own = h->own_data < inc ? h->own_data : inc;
	char o[16];

	h->own_data -= own;
	inc -= (uint32_t)own;
	h->conn_credit += inc;
	if (!inc)
		return;
	size_t n = h2_window_update(o, 0, inc);
	for (int b = 0; b < H2M_BACKENDS; b++)
		to_backend(&h->be[b], o, n);
}

/* The names the decoder classifies as wanted (h2_reenc_want): the policy's request field
 * names (the manifest's REQ_NAME records: bit i of a decision's del), or its response ones
 * (RESP_NAME: of rdel); none when mf is NULL. */
static void want_names(const struct manifest *mf, int resp)
{
	const char *n[L7_MAX_WANTED] = { 0 };
	uint32_t k = !mf ? 0 : resp ? mf->n_resp_name : mf->n_req_name;

	for (uint32_t i = 0; i < k && i < L7_MAX_WANTED; i++)
		n[i] = resp ? mf->resp_name[i].name.s : mf->req_name[i].name.s;
	h2_reenc_want(k, n);
}

/* The lines set[0, n) (the manifest's MUTATION records) after re's block; -1: not all. */
static int add_lines(const struct manifest *mf, struct h2_reenc *re, const uint8_t *set, uint32_t n)
{
	if (n > L7_MAX_SET)
		return -1;
	for (uint32_t i = 0; i < n; i++) {
		if (set[i] >= mf->n_mutation)
			return -1;
		const struct l7m_mutation *m = &mf->mutation[set[i]];
		h2_reenc_add(re, m->name.s, m->name.len, m->value.s, m->value.len);
	}
	return re->bad ? -1 : 0;
}

/* One whole client frame at client offset `off` (its first byte), of 9 + len bytes; a header
 * block (HEADERS + CONTINUATION) is handled once whole: *blk says how many bytes it spans.
 * -1: the connection ends. */
static int client_frame(struct mesh_client *c, const uint8_t *f, size_t avail, uint64_t off, size_t *used)
{
	struct mesh_h2 *h = c->h2m;
	uint32_t len = be24(f), type = f[3], flags = f[4], sid = be32(f + 5) & 0x7fffffff;
	size_t total = 9 + (size_t)len;
	char o[64];

	*used = 0;
	if (avail < total)
		return 0;
	if (type == L7_H2_HEADERS) {
		/* the whole block: this frame and its CONTINUATIONs (the kernel saw them in one run) */
		size_t end = total;
		uint32_t fl = flags;
		while (!(fl & L7_H2_F_END_HEADERS)) {
			if (avail < end + 9 || avail < end + 9 + be24(f + end))
				return 0;
			fl = f[end + 4];
			end += 9 + be24(f + end);
		}
		const struct l7_mesh_pass *r = decision_at(h, off + end);
		/* a forwarded stream's mutations: taken (deleted) whatever becomes of it; with the
		 * bit and none there, it is refused below */
		struct l7_decision mut;
		int mutd = 0;
		if (r && L7_MP_H2_STREAM(r->req) == sid && !L7_MP_H2_ERR(r->req) && r->slot && (r->status & L7_MP_H2_MUT)) {
			struct l7_mesh_pass_key k = { .client = c->key, .seq = sid };
			mutd = bpf_map_lookup_and_delete_elem(c->v->h2mut, &k, &mut) ? -1 : 1;
		}
		const struct manifest *mf = c->v->v.cfg.mf;
		want_names(mutd > 0 ? mf : NULL, 0);
		h->re->del = mutd > 0 ? mut.del : 0;
		/* every block, whatever its fate, through the client's table as the kernel's went */
		int need, drc = h2_reenc_frames_in(h->re, f, end, &need);
		if (!r || L7_MP_H2_STREAM(r->req) != sid) {
			goaway(c, L7_H2_INTERNAL_ERROR);   /* never forwarded without the kernel's decision */
			return -1;
		}
		int err = L7_MP_H2_ERR(r->req);
		h->last = sid;
		*used = end;
		if (err) {   /* refused (REFUSED_STREAM: the kernel could not decode it; malformed) */
			stream_new(h, sid, S_DENIED);
			to_client(c, o, h2_rst(o, sid, (uint32_t)(-err) & 0xff));
		} else if (r->slot) {
			int why = 0;
			struct h2m_backend *b = backend(c, (int)r->slot - 1, &why);
			if (!b && why == BE_FULL) {   /* not processed: the client may retry it */
				stream_new(h, sid, S_DENIED);
				to_client(c, o, h2_rst(o, sid, L7_H2_REFUSED_STREAM));
				stat_bump(c->v->v.stats, L7_STAT_H2_STREAMS_REFUSED);
			} else if (!b) {
				struct l7_mesh_pass a = *r;
				a.status = (why == BE_H1 ? 505 : 502) | (r->status & L7_MP_H2_IS_GRPC);
				stream_new(h, sid, S_DENIED);
				answer(c, sid, &a, flags & L7_H2_F_END_STREAM);
			} else if (drc < 0) {
				/* the kernel decoded and forwarded what the same decoder here cannot:
				 * never sent on undecided */
				goaway(c, L7_H2_INTERNAL_ERROR);
				return -1;
			} else if ((need && h->re->bad) ||   /* too large re-encoded */
				   mutd < 0 || (mutd > 0 && add_lines(mf, h->re, mut.set, mut.n_set))) {
				/* (or its mutations lost, or not applicable: never sent without them) */
				stream_new(h, sid, S_DENIED);
				to_client(c, o, h2_rst(o, sid, L7_H2_REFUSED_STREAM));
			} else {
				struct h2m_stream *s = stream_new(h, sid, S_FWD);
				s->be = (uint16_t)(b - h->be);
				if (mutd > 0) {
					s->n_rset = (uint8_t)mut.n_rset;
					s->rdel = (uint8_t)mut.rdel;
					memcpy(s->rset, mut.rset, sizeof s->rset);
				}
				/* a body that does not match it makes the request malformed (RFC 9113
				 * 8.1.1), which the kernel, reading heads only, cannot see */
				s->body_left = h->re->d.msg.flags & L7_H2_M_CL ? (int64_t)h->re->req.body_len : -1;
				if (s->body_left > 0 && (flags & L7_H2_F_END_STREAM)) {
					stream_new(h, sid, S_DENIED);   /* a length and no body */
					to_client(c, o, h2_rst(o, sid, L7_H2_PROTOCOL_ERROR));
				} else if (need || mutd > 0) {
					char *fr;
					size_t fn = h2_reenc_frames(h->re, sid, flags & L7_H2_F_END_STREAM, &fr);
					if (fn) {
						to_backend(b, fr, fn);
						stat_bump(c->v->v.stats, L7_STAT_H2_REENCODED);
					} else {   /* no memory: refused, unprocessed, rather than left hanging */
						stream_new(h, sid, S_DENIED);
						to_client(c, o, h2_rst(o, sid, L7_H2_REFUSED_STREAM));
					}
					free(fr);
				} else {
					to_backend(b, f, end);
				}
			}
		} else {
			stream_new(h, sid, S_DENIED);
			answer(c, sid, r, flags & L7_H2_F_END_STREAM);
		}
		decision_done(h);
		return 0;
	}
	*used = total;
	const struct l7_mesh_pass *r = decision_at(h, off + total);
	if (r && L7_MP_H2_ERR(r->req)) {   /* the kernel refused this frame's stream */
		struct h2m_stream *s = stream_of(h, sid);
		if (s && s->state == S_FWD)
			to_backend(&h->be[s->be], o, h2_rst(o, sid, L7_H2_CANCEL));
		if (s)
			s->state = S_DENIED;
		to_client(c, o, h2_rst(o, sid, (uint32_t)(-L7_MP_H2_ERR(r->req)) & 0xff));
		decision_done(h);
		return 0;
	}
	const uint8_t *pl = f + 9;
	if ((type == L7_H2_SETTINGS && ++h->settings > H2M_MAX_SETTINGS) ||
	    (type == L7_H2_PING && ++h->pings > H2M_MAX_PINGS)) {
		goaway(c, L7_H2_ENHANCE_YOUR_CALM);
		return -1;
	}
	switch (type) {
	case L7_H2_SETTINGS:
		if (!(flags & L7_H2_F_ACK))
			client_settings(c, pl, len);
		else
			h2_reenc_acked(h->re);   /* where the kernel's scan applies it too */
		return 0;
	case L7_H2_PING:
		if (!(flags & L7_H2_F_ACK)) {
			size_t n = h2_frame(o, 8, L7_H2_PING, L7_H2_F_ACK, 0);
			memcpy(o + n, pl, 8);
			to_client(c, o, n + 8);
		}
		return 0;
	case L7_H2_GOAWAY:
		return 0;   /* no new streams: the client closes when its streams are done */
	case L7_H2_WINDOW_UPDATE:
		if (!sid) {
			client_window(c, be32(pl) & 0x7fffffff);
			return 0;
		}
		break;
	default:
		break;
	}
	/* a stream's frame: with its stream */
	struct h2m_stream *s = sid ? stream_of(h, sid) : NULL;
	if (s && s->state == S_FWD && type == L7_H2_RST_STREAM && !s->resp && ++h->resets > H2M_MAX_RESETS) {
		goaway(c, L7_H2_ENHANCE_YOUR_CALM);
		return -1;
	}
	if (s && s->state == S_FWD) {
		struct h2m_backend *b = &h->be[s->be];
		if (type == L7_H2_DATA && s->body_left >= 0) {
			uint32_t pad = flags & L7_H2_F_PADDED && len ? pl[0] + 1u : 0;
			s->body_left -= pad <= len ? len - pad : len;
			if (s->body_left < 0 || ((flags & L7_H2_F_END_STREAM) && s->body_left)) {
				body_mismatch(c, s, b);
				return 0;
			}
		}
		to_backend(b, f, total);
	} else if (type == L7_H2_DATA && len) {
		/* a denied stream's body: dropped, and its share of the window given back */
		to_client(c, o, h2_window_update(o, 0, len));
	}
	return 0;
}

/* Our SETTINGS, the server preface (3.4): a dynamic table of size 0 for the client's encoder,
 * which the kernel's decoder assumes once the client acknowledges it (h2.h, hpack.h). */
static void server_preface(struct mesh_client *c)
{
	uint16_t id = L7_H2_S_HEADER_TABLE_SIZE;
	uint32_t zero = 0;
	char o[32];

	c->h2m->preface = 1;
	to_client(c, o, h2_settings(o, &id, &zero, 1));
}

int mesh_h2_take(struct mesh_client *c, const char *p, size_t n, const struct l7_mesh_pass *r)
{
	struct mesh_h2 *h = c->h2m;
	static const char pre[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

	if (r->kind == L7_MP_H2 && r->len == 0 && L7_MP_H2_ERR(r->req)) {   /* a connection error */
		if (!h->preface)
			server_preface(c);   /* the server's first frame is its SETTINGS (3.4) */
		goaway(c, (uint32_t)(-L7_MP_H2_ERR(r->req)) & 0xff);
		return -1;
	}
	if (r->kind == L7_MP_H2 && (r->req || r->status || r->slot)) {
		if (h->ndec == (int)(sizeof h->dec / sizeof h->dec[0])) {
			goaway(c, L7_H2_ENHANCE_YOUR_CALM);
			return -1;
		}
		h->dec[h->ndec++] = (struct h2m_dec){ .end = h->at + n, .r = *r };
	}
	h->at += n;
	if (append(&h->in, &h->len, &h->cap, p, n)) {
		goaway(c, L7_H2_ENHANCE_YOUR_CALM);
		return -1;
	}
	size_t at = 0;
	uint64_t base = h->at - h->len;   /* client offset of h->in[0] */
	if (!h->preface) {
		if (h->len < sizeof pre - 1)
			return 0;
		at = sizeof pre - 1;   /* the kernel checked it */
		server_preface(c);
	}
	while (h->len - at >= 9 && !c->closing) {
		size_t used;
		if (client_frame(c, (const uint8_t *)h->in + at, h->len - at, base + at, &used) < 0)
			return -1;
		if (!used)
			break;
		at += used;
	}
	memmove(h->in, h->in + at, h->len - at);
	h->len -= at;
	return 0;
}

/* The stream refused on both hops (a response it cannot be given without its mutations). */
static void refuse_both(struct mesh_client *c, struct h2m_stream *s, struct h2m_backend *b)
{
	char o[32];

	to_backend(b, o, h2_rst(o, s->id, L7_H2_CANCEL));
	to_client(c, o, h2_rst(o, s->id, L7_H2_INTERNAL_ERROR));
	s->state = S_DENIED;
}

/* A response header block of backend b: through the backend's table (every block, so that it
 * stays the backend encoder's); its final :status, once per stream, for the upstream's
 * telemetry with the bytes so far (a block the decoder cannot read counts as outside
 * 100-599); and the stream's
 * response mutations on that final head. 1: sent here (re-encoded) or refused, 0: relay it. */
static int response_block(struct mesh_client *c, struct h2m_backend *b, const uint8_t *f, uint32_t len)
{
	struct mesh_h2 *h = c->h2m;
	uint32_t flags = f[4], sid = be32(f + 5) & 0x7fffffff, skip = 0, pad = 0;
	struct h2m_stream *s = stream_of(h, sid);
	int mut = s && s->state == S_FWD && !s->resp && (s->n_rset || s->rdel), rc = -1, need;

	if (flags & L7_H2_F_PADDED && len) {
		pad = f[9];
		skip = 1;
	}
	if (flags & L7_H2_F_PRIORITY)
		skip += 5;
	if (skip + pad <= len && (flags & L7_H2_F_END_HEADERS)) {
		want_names(mut ? c->v->v.cfg.mf : NULL, 1);
		b->re->del = mut ? s->rdel : 0;
		rc = h2_reenc_block(b->re, f + 9 + skip, len - skip - pad, s && s->resp ? L7_HPACK_TRAILERS : L7_HPACK_RESPONSE,
				    &need);
	} else if (!(b->re->conn & L7_H2_C_HP_ZERO)) {
		b->re->conn |= L7_H2_C_HP_UNKNOWN;   /* not decoded here: what it inserts is missed */
	}
	int status = rc >= 0 ? (int)b->re->d.msg.status : 0;
	if (s && rc >= 0 && (b->re->d.msg.flags & L7_H2_M_GRPC_STATUS))   /* trailers (or trailers-only) */
		s->grpc = (uint16_t)(1 + (b->re->d.msg.grpc_status & 0xff));
	if (!s || s->resp || (status >= 100 && status < 200))
		return 0;   /* trailers, or an interim head: the final one follows */
	s->resp = 1;
	s->status = (uint16_t)status;
	backend_count(c, b, status ? status : 1);
	if (!mut)
		return 0;
	char *fr = NULL;
	size_t fn = rc < 0 || add_lines(c->v->v.cfg.mf, b->re, s->rset, s->n_rset) ? 0 :
		    h2_reenc_frames(b->re, sid, flags & L7_H2_F_END_STREAM, &fr);
	if (fn) {
		to_client(c, fr, fn);
		s->bytes += fn;
	} else {
		refuse_both(c, s, b);
	}
	free(fr);
	return 1;
}

/* One whole frame from backend b. */
static void backend_frame(struct mesh_client *c, struct h2m_backend *b, const uint8_t *f, size_t total)
{
	uint32_t len = be24(f), type = f[3], flags = f[4], sid = be32(f + 5) & 0x7fffffff;
	char o[64];

	if (!sid) {   /* the connection's own: this hop's */
		if (type == L7_H2_SETTINGS && !(flags & L7_H2_F_ACK)) {
			to_backend(b, o, h2_frame(o, 0, L7_H2_SETTINGS, L7_H2_F_ACK, 0));
		} else if (type == L7_H2_SETTINGS) {
			h2_reenc_acked(b->re);   /* our table size 0 holds from here */
		} else if (type == L7_H2_PING && !(flags & L7_H2_F_ACK) && len == 8) {
			size_t n = h2_frame(o, 8, L7_H2_PING, L7_H2_F_ACK, 0);
			memcpy(o + n, f + 9, 8);
			to_backend(b, o, n + 8);
		} else if (type == L7_H2_WINDOW_UPDATE && len == 4) {
			to_client(c, o, h2_window_update(o, 0, be32(f + 9) & 0x7fffffff));
		}
		return;   /* GOAWAY: the connection's end tells (backend_ready) */
	}
	if (type == L7_H2_PUSH_PROMISE)
		return;   /* we said ENABLE_PUSH 0 */
	b->resp_bytes += total;
	struct h2m_stream *s = stream_of(c->h2m, sid);
	if (!(type == L7_H2_HEADERS && response_block(c, b, f, len))) {
		if (s && s->state == S_DENIED)
			return;   /* refused on both hops: what the backend sent before it saw that goes */
		to_client(c, f, total);
		if (s)
			s->bytes += total;
	}
	/* its response's end: the access log's record (END_STREAM, or the backend's reset) */
	if (s && s->state == S_FWD && !s->logged &&
	    (((type == L7_H2_HEADERS || type == L7_H2_DATA) && (flags & L7_H2_F_END_STREAM)) || type == L7_H2_RST_STREAM)) {
		s->logged = 1;
		log_end(c, sid, s->status, s->bytes, s->grpc);
	}
}

/* Bytes backend b sent: its whole frames handled; -1 past the bound of an unfinished one. */
static int backend_in(struct mesh_client *c, struct h2m_backend *b, const char *p, size_t n)
{
	if (append(&b->in, &b->len, &b->cap, p, n))
		return -1;
	size_t at = 0;
	while (b->len - at >= 9 && b->fd >= 0) {
		size_t total = 9 + (size_t)be24((const uint8_t *)b->in + at);
		if (b->len - at < total)
			break;
		backend_frame(c, b, (const uint8_t *)b->in + at, total);
		at += total;
	}
	memmove(b->in, b->in + at, b->len - at);
	b->len -= at;
	return 0;
}

/* Backend b is readable. At its end (the backend went) the streams on it cannot finish, and
 * their ids are spent on it: the client's connection ends with GOAWAY INTERNAL_ERROR (it may
 * retry streams past the last one handled elsewhere). */
static void backend_ready(struct l7run *L, struct io *io, uint32_t events)
{
	struct h2m_backend *b = (struct h2m_backend *)io;
	struct mesh_client *c = b->c;
	char buf[65536];

	(void)events;
	for (;;) {
		ssize_t n = recv(b->fd, buf, sizeof buf, MSG_DONTWAIT);
		if (n > 0 && !backend_in(c, b, buf, (size_t)n))
			continue;
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		break;
	}
	vlog(L, "HTTP/2 backend connection to upstream %d closed", b->up);
	backend_close(c, b);
	if (!c->h2m->gone && !c->closing)
		goaway(c, L7_H2_INTERNAL_ERROR);
}
