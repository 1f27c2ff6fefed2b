/* l7run's end of a client connection in mesh mode. Requests normally never arrive here (the
 * kernel moves them to the backend); what does arrive is covered by l7_mesh_pass records, one
 * per request, in the client's order: send it on a pool connection or answer it, each only once
 * every earlier request of this client has been answered (responses stay in order). */
#define _GNU_SOURCE   /* accept4 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <bpf/bpf.h>
#include "mesh.h"
#include "h2_refuse.h"
#include "../stdlib/bpf/http.h"   /* the trailer section, framed as the gateway frames it */

#define MESH_HOLD_MAX (1u << 20)   /* a chunked request larger than this gets 413 (as gateway mode) */

/* All of p[0..n) on fd (l7run's blocking pool ends, or a client's end, whose SK_MSG moves it
 * into the client); stops at an error. */
void mesh_send_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		p += w;
		n -= (size_t)w;
	}
}

/* Written on l7run's end; SK_MSG moves it into the client's receive queue, behind whatever
 * the kernel delivered before. up: the upstream it answers for, which could not be reached
 * (-1: l7run's own answer). */
/* why: the answer's reason (NULL: the status's own text) */
static void answer_why(struct mesh_client *c, int up, int status, int close_after, const char *why)
{
	/* the request being answered is at the front of c->in: a HEAD gets no body (RFC 9110 9.3.2) */
	int head_only = c->in_len >= 5 && !memcmp(c->in, "HEAD ", 5);
	char msg[320 + L7M_NAME_MAX];
	int n = http_answer_why(msg, sizeof msg, status, close_after, head_only, why);
	upstat_answer(c->v->v.upstat, up, status, (size_t)n);   /* before the client can read it */
	mesh_send_all(c->fd, msg, (size_t)n);
	c->local_done++;
	if (close_after && !c->closing) {
		c->closing = 1;
		c->close_at = now_ms() + 100;   /* let the answer drain before the FIN */
	}
}

void mesh_client_answer(struct mesh_client *c, int up, int status, int close_after)
{
	answer_why(c, up, status, close_after, NULL);
}

static void publish(struct mesh_client *c)
{
	struct l7_mesh_ctl v = { .done_seq = c->next_seq - 1, .local_done = c->local_done };

	bpf_map_update_elem(c->v->ctl, &c->key, &v, BPF_ANY);
}

struct mesh_client *mesh_client_by_key(struct l7run *L, struct mesh_ver *v, const struct l7_mesh_key *k)
{
	struct mesh *M = mesh_of(L);

	for (int i = 0; i < M->n_clients; i++)
		if (M->client[i]->v == v && !memcmp(&M->client[i]->key, k, sizeof *k))
			return M->client[i];
	return NULL;
}

/* The version the application's end of this connection is in (l7run's end joined it, see
 * l7/mesh.h); the newest when it is in none (not in the cgroup, or already gone). */
static struct mesh_ver *version_of(struct l7run *L, const struct l7_mesh_key *k)
{
	for (struct version *v = L->cur; v; v = v->older) {
		struct l7_mesh_conn cc;
		if (!bpf_map_lookup_elem(mv(v)->conns, k, &cc) && cc.role == L7_MR_CLIENT)
			return mv(v);
	}
	return mv(L->cur);
}

static void client_event(struct l7run *L, struct io *io, uint32_t ev);

void mesh_accept(struct l7run *L, int lfd, int service)
{
	struct mesh *M = mesh_of(L);

	(void)service;   /* the data plane knows it by address */
	for (;;) {
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		if (M->n_clients >= MESH_MAX_CLIENTS) {
			close(fd);
			continue;
		}
		if (!mesh_enrolled(L, fd)) {   /* the client is outside the cgroup */
			mesh_outside_accept(L, fd);
			continue;
		}
		struct mesh_client *c = calloc(1, sizeof *c);
		if (!c) {
			close(fd);
			continue;
		}
		struct l7_mesh_key mine = mesh_key_of(fd);
		c->io.ready = client_event;
		c->fd = fd;
		c->key = (struct l7_mesh_key){ mine.rip, mine.lip, mine.rport, mine.lport };
		c->v = version_of(L, &c->key);
		c->next_seq = 1;
		M->client[M->n_clients++] = c;
		loop_watch(L, fd, &c->io, EPOLLIN | EPOLLRDHUP);
	}
}

void mesh_accept_pending(struct l7run *L)
{
	for (int i = 0; i < L->n_listeners; i++)
		mesh_accept(L, L->listener[i].fd, L->listener[i].service);
}

void mesh_client_close(struct l7run *L, struct mesh_client *c)
{
	struct mesh *M = mesh_of(L);

	/* records and the catch-up entry of this connection go with it */
	for (uint64_t s = c->next_seq;; s++) {
		struct l7_mesh_pass_key pk = { c->key, s };
		if (bpf_map_delete_elem(c->v->pass, &pk))
			break;
	}
	bpf_map_delete_elem(c->v->ctl, &c->key);
	mesh_h2_close(c);
	loop_close(L, c->fd);
	for (int i = 0; i < M->n_clients; i++)
		if (M->client[i] == c) {
			M->client[i] = M->client[--M->n_clients];
			break;
		}
	h2_refuser_free(c->h2);
	mesh_h2_free(c->h2m);
	free(c->in);
	free(c);
}

/* A redirect the kernel has not counted as queued within this long never will be (it failed
 * before queueing anything): ordering stops waiting for it. */
#define REDIR_SETTLE_MS 200

/* Responses the client has had so far (kernel-delivered + ours). One the data plane counted
 * whose redirect is still on its way into the client's queue (l7/mesh.h redir_dec: e.g. its
 * backend waits for the client's socket lock while the client is still sending) is not had
 * yet: what l7run forwards now to another upstream could be answered first. */
static uint64_t answered(struct mesh_client *c)
{
	struct l7_mesh_conn cc;

	if (bpf_map_lookup_elem(c->v->conns, &c->key, &cc))
		return UINT64_MAX;   /* the client is gone: nothing to wait for */
	uint64_t got = cc.resp_done + c->local_done;
	if (cc.redir_done == cc.redir_dec || !got)
		return got;
	if (c->redir_seen != cc.redir_dec) {
		c->redir_seen = cc.redir_dec;
		c->redir_since = now_ms();
	} else if (now_ms() - c->redir_since >= REDIR_SETTLE_MS) {
		return got;
	}
	return got - 1;
}

static void consume(struct mesh_client *c, size_t n)
{
	memmove(c->in, c->in + n, c->in_len - n);
	c->in_len -= n;
}

static void h2_send(void *ctx, const void *p, size_t n, int status)
{
	struct mesh_client *c = ctx;

	if (status)   /* l7run's own answer, counted before the client can read it */
		upstat_answer(c->v->v.upstat, -1, status, n);
	mesh_send_all(c->fd, p, n);
}

/* An HTTP/2 client (its preface was the first "request"): from here on every byte it sends
 * comes to l7run (the data plane marked the connection broken), and each of its streams is
 * answered 505 (h2_refuse.c); only the refusal's GOAWAY if l7run has no memory for that. */
static void mesh_client_refuse_h2(struct mesh_client *c)
{
	stat_bump(c->v->v.stats, L7_STAT_H2_REFUSED);
	c->h2 = h2_refuser_new();
	if (!c->h2) {
		char msg[64];
		mesh_send_all(c->fd, msg, (size_t)h2_refusal(msg, sizeof msg));
		c->in_len = 0;
		c->closing = 1;
		c->close_at = now_ms() + 100;   /* let it drain before the FIN */
	}
}

static void h2_pump(struct mesh_client *c)
{
	int rc = h2_refuser_take(c->h2, c->in, c->in_len, h2_send, c);

	c->in_len = 0;
	if (rc < 0) {
		c->closing = 1;
		c->close_at = now_ms() + 100;
	}
}

static int tchar(unsigned char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* A chunk-size line at p[0, n) (n <= 64), by the rules of the kernel's l7_scan_chunk_line
 * (stdlib/bpf/gw_head.h): 1-15 hex digits, extensions ;name[=token|"quoted"] without blanks,
 * CRLF. Returns its length, 0 if incomplete, -1 if bad; *size gets the chunk size. */
static int scan_chunk_line(const unsigned char *p, size_t n, uint64_t *size)
{
	enum { SIZE0, SIZE, NAME0, NAME, VAL0, TOK, Q, QESC, QEND, LF } st = SIZE0;
	unsigned nd = 0;

	*size = 0;
	for (size_t i = 0; i < n && i < 64; i++) {
		unsigned char c = p[i], lc = c | 0x20;
		if (st == LF)
			return c == '\n' ? (int)i + 1 : -1;
		if (st == Q) {
			if (c == '"')
				st = QEND;
			else if (c == '\\')
				st = QESC;
			else if ((c < 0x20 && c != '\t') || c == 0x7f)
				return -1;
			continue;
		}
		if (st == QESC) {
			if ((c < 0x20 && c != '\t') || c == 0x7f)
				return -1;
			st = Q;
			continue;
		}
		if (st == SIZE0 || st == SIZE) {
			int d = c >= '0' && c <= '9' ? c - '0' : lc >= 'a' && lc <= 'f' ? lc - 'a' + 10 : -1;
			if (d >= 0) {
				if (nd >= 15)
					return -1;
				*size = *size * 16 + (uint64_t)d;
				nd++;
				st = SIZE;
				continue;
			}
			if (st == SIZE0)
				return -1;
		} else if (st == NAME0 || st == NAME) {
			if (tchar(c)) {
				st = NAME;
				continue;
			}
			if (st == NAME0)
				return -1;
			if (c == '=') {
				st = VAL0;
				continue;
			}
		} else if (st == VAL0) {
			if (c == '"')
				st = Q;
			else if (tchar(c))
				st = TOK;
			else
				return -1;
			continue;
		} else if (st == TOK && tchar(c)) {
			continue;
		}
		/* after the size, a name, a value: ";" starts an extension, CR ends the line */
		if (c == ';')
			st = NAME0;
		else if (c == '\r')
			st = LF;
		else
			return -1;
	}
	return 0;
}

/* The trailer section at p[0, n) after a last chunk: its length, 0 while it does not end, -1 if
 * it is bad (l7_http_trailers: as the gateway's kernel path frames it). */
static int trailers(const char *p, size_t n)
{
	__u8 buf[L7_MAX_HEAD + L7_BUF_SLACK];   /* with the slack the framer reads past len */
	struct l7_chunked st;

	if (n > L7_MAX_HEAD)
		n = L7_MAX_HEAD;
	memcpy(buf, p, n);
	int t = l7_http_trailers(&st, buf, 0, (__u32)n);
	return t < 0 || (t == 0 && n >= L7_MAX_HEAD) ? -1 : t;
}

/* Refuse the chunked request l7run holds with `status` and close. Its pool connection was
 * counted as owing a response it will never get (the data plane counts a request when it
 * decides it): close that too, it is refilled at once, rather than have the slot wait as an
 * orphan (a few refused bodies in a row ran a small pool dry: 503s). */
static void chunk_refuse(struct mesh_client *c, int status)
{
	mesh_client_answer(c, -1, status, 1);   /* l7run's own answer */
	if (mesh_slot_fd(c->v, c->chunk_slot, &c->key) >= 0)
		mesh_pool_drop(c->v, c->chunk_slot % L7_MESH_POOL_SIZE);
	c->chunk = 0;
	c->in_len = 0;
}

/* Frame the chunked body after the head in c->in (the rules of the kernel's chunk framing:
 * CRLF after each chunk's data checked, a size line of at most 64 bytes, trailer fields as
 * l7_http_trailers checks them); once the last chunk is in, send head and body on the pool
 * connection. Nothing after it is forwarded: the connection closes once its response is
 * delivered. */
static void chunk_pump(struct mesh_client *c)
{
	while (c->chunk && !c->closing && c->in_len >= c->chunk_pos) {
		size_t avail = c->in_len - c->chunk_pos;
		if (c->chunk_pos > MESH_HOLD_MAX) {
			chunk_refuse(c, 413);
			break;
		}
		if (c->chunk_state == 1) {
			uint64_t n = c->chunk_left < avail ? c->chunk_left : avail;
			c->chunk_pos += n;
			c->chunk_left -= n;
			if (c->chunk_left)
				return;
			c->chunk_state = 2;
			continue;
		}
		if (c->chunk_state == 2) {
			if (avail < 2)
				return;
			if (c->in[c->chunk_pos] != '\r' || c->in[c->chunk_pos + 1] != '\n')
				goto bad;
			c->chunk_pos += 2;
			c->chunk_state = 0;
			continue;
		}
		size_t n = avail < 64 ? avail : 64;
		uint64_t size = 0;
		if (!n)
			return;
		int ln = scan_chunk_line((const unsigned char *)c->in + c->chunk_pos, n, &size);
		if (ln < 0 || (ln == 0 && n >= 64))
			goto bad;
		if (ln == 0)
			return;
		if (size == 0) {
			/* the last chunk: its trailer section (often only the final CRLF) follows */
			int t = trailers(c->in + c->chunk_pos + ln, avail - (size_t)ln);
			if (t < 0)
				goto bad;
			if (t == 0)
				return;
			c->chunk_pos += (size_t)ln + (size_t)t;
			int fd = mesh_slot_fd(c->v, c->chunk_slot, &c->key);
			if (fd >= 0) {
				mesh_send_all(fd, c->in, c->chunk_pos);   /* SK_MSG moves it into the backend */
				c->close_when = c->chunk_req + 1;
			} else {
				mesh_client_answer(c, (int)(c->chunk_slot / L7_MESH_SLOTS), 502, 1);
			}
			c->chunk = 0;
			c->in_len = 0;   /* nothing after it is forwarded */
			return;
		}
		if (size > 0x7fffffff)
			goto bad;
		c->chunk_pos += (size_t)ln;
		c->chunk_left = size;
		c->chunk_state = 1;
	}
	return;
bad:
	chunk_refuse(c, 400);
}

/* The kernel found no live pool connection to upstream `up`: with none connected at all it
 * cannot be reached (502, its failure); with some, every one is another client's (503, the
 * pool's bound: l7run's answer, and said). Or its backend's socket was gone (502). */
static void answer_for(struct l7run *L, struct mesh_client *c, int up, int status)
{
	const char *none = ep_empty_set(&c->v->v.cfg, (uint32_t)up);   /* a run-time set without endpoints */
	char why[L7M_NAME_MAX + 64];

	if (none) {
		snprintf(why, sizeof why, "upstream %s has no endpoint", none);
		answer_why(c, -1, status, 0, why);
	} else if (status == 503 && up < L7_MESH_UPSTREAMS && mesh_upstream_live(c->v, up)) {
		mesh_pool_exhausted(L, c->v, up);
		mesh_client_answer(c, -1, 503, 0);
	} else {
		mesh_client_answer(c, up, 502, 0);
	}
}

/* Handle the records whose bytes have arrived, in order; stop at one that must wait. */
static void pump(struct l7run *L, struct mesh_client *c)
{
	while (!c->closing) {
		if (c->h2) {
			h2_pump(c);
			return;
		}
		if (c->chunk) {
			chunk_pump(c);
			return;
		}
		if (c->close_when)
			return;   /* after a chunked request: only its response is still to come */
		struct l7_mesh_pass_key pk = { c->key, c->next_seq };
		struct l7_mesh_pass r;
		if (bpf_map_lookup_elem(c->v->pass, &pk, &r))
			return;
		if (c->in_len < r.len || (r.kind == L7_MP_CHUNKED && c->in_len < r.status))
			return;   /* the rest of the request (or head) is on its way */
		if (r.kind == L7_MP_DISCARD) {
			/* the start of a head the data plane holds a copy of (l7/mesh.h): it comes
			 * again, whole, with the client's next write */
			consume(c, r.len);
			bpf_map_delete_elem(c->v->pass, &pk);
			c->next_seq++;
			publish(c);
			continue;
		}
		if (r.kind == L7_MP_H2) {
			/* HTTP/2: streams answer in any order, nothing to wait for (mesh_h2.c) */
			size_t n = r.len ? r.len : c->in_len;
			if (!c->h2m && !(c->h2m = mesh_h2_new())) {
				c->in_len = 0;
				c->closing = 1;
				c->close_at = now_ms();
				return;
			}
			int rc = mesh_h2_take(c, c->in, n, &r);
			consume(c, n);
			bpf_map_delete_elem(c->v->pass, &pk);
			c->next_seq++;
			if (rc < 0) {
				c->in_len = 0;
				return;
			}
			continue;
		}
		uint64_t got = answered(c);
		if (got != UINT64_MAX && got < r.req)
			return;   /* earlier responses still owed: the tick retries */
		if (r.kind == L7_MP_CLOSE) {
			/* framing is lost, or the client asked to close: answer (if there is an
			 * answer) and close; whatever else arrives is discarded */
			int h2 = r.status ? h2_preface_at(c->in, c->in_len) : 0;
			if (h2 < 0)
				return;   /* the parser refused "PRI": the rest of the line says whether HTTP/2 */
			if (h2) {
				mesh_client_refuse_h2(c);
			} else if (r.status) {
				c->in_len = 0;
				mesh_client_answer(c, -1, (int)r.status, 1);
			} else {
				c->in_len = 0;
				c->closing = 1;
				c->close_at = now_ms() + 20;
			}
			bpf_map_delete_elem(c->v->pass, &pk);
			c->next_seq++;
			publish(c);
			if (c->h2)
				h2_pump(c);
			return;
		}
		if (r.kind == L7_MP_CHUNKED) {
			c->chunk = 1;
			c->chunk_slot = r.slot;
			c->chunk_req = r.req;
			c->chunk_pos = r.status;   /* the head, header lines inserted */
			c->chunk_state = 0;
			bpf_map_delete_elem(c->v->pass, &pk);
			c->next_seq++;
			publish(c);
			continue;
		}
		if (r.kind == L7_MP_FORWARD) {
			int fd = mesh_slot_fd(c->v, r.slot, &c->key);
			if (fd >= 0)
				mesh_send_all(fd, c->in, r.len);   /* SK_MSG moves it into the backend */
			else
				mesh_client_answer(c, (int)(r.slot / L7_MESH_SLOTS), 502, 0);
		} else if (r.slot) {
			answer_for(L, c, (int)r.slot - 1, (int)r.status);
		} else {
			mesh_client_answer(c, -1, (int)r.status, 0);
		}
		consume(c, r.len);
		bpf_map_delete_elem(c->v->pass, &pk);
		c->next_seq++;
		publish(c);   /* after the send: the kernel path may go on from here */
	}
}

/* Nothing more will come from the client: close when it has all its answers. */
static int finished(struct mesh_client *c)
{
	struct l7_mesh_pass_key pk = { c->key, c->next_seq };
	struct l7_mesh_pass r;
	struct l7_mesh_conn cc;

	if (!bpf_map_lookup_elem(c->v->pass, &pk, &r))
		return 0;
	if (bpf_map_lookup_elem(c->v->conns, &c->key, &cc))
		return 1;
	return cc.resp_done + c->local_done >= cc.req_seq;
}

static void client_event(struct l7run *L, struct io *io, uint32_t ev)
{
	struct mesh_client *c = (struct mesh_client *)io;
	int eof = 0;

	for (;;) {
		if (c->in_cap - c->in_len < 65536) {
			c->in_cap = c->in_cap ? c->in_cap * 2 : 131072;
			c->in = realloc(c->in, c->in_cap);
		}
		ssize_t n = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, MSG_DONTWAIT);
		if (n > 0) {
			if (!c->closing && !c->close_when)   /* after a chunked request: discarded */
				c->in_len += (size_t)n;
			continue;
		}
		if (n == 0 || (errno != EAGAIN && errno != EINTR))
			eof = 1;
		break;
	}
	pump(L, c);
	if (ev & EPOLLERR) {
		mesh_client_close(L, c);
	} else if (eof) {
		if (c->h2 || c->h2m || finished(c)) {
			mesh_client_close(L, c);
			return;
		}
		/* half-closed with answers owed: the tick finishes it */
		loop_unwatch(L, c->fd);
		c->eof = 1;
		c->close_at = now_ms() + 2000;
	}
}

/* Clients the data plane marked L7_MC_OVER (more than L7_MESH_CLIENT_QMAX unread bytes
 * queued: it stopped reading): reset them. The RST moves the client's socket to CLOSE, which
 * takes it out of the sockhash and frees what is queued in it; a FIN would leave the queue
 * held until the application closes. */
void mesh_clients_check_over(struct l7run *L)
{
	struct mesh *M = mesh_of(L);

	for (int i = M->n_clients - 1; i >= 0; i--) {
		struct mesh_client *c = M->client[i];
		struct l7_mesh_conn cc;
		if (bpf_map_lookup_elem(c->v->conns, &c->key, &cc))
			continue;
		if ((cc.flags & L7_MC_LAST) && !c->closing && !c->chunk) {
			/* the client asked to close: once every response is delivered (and no record
			 * is pending), close; what it sent after that request is discarded */
			struct l7_mesh_pass_key pk = { c->key, c->next_seq };
			struct l7_mesh_pass r;
			if (bpf_map_lookup_elem(c->v->pass, &pk, &r) && cc.resp_done + c->local_done >= cc.req_seq) {
				c->in_len = 0;
				c->closing = 1;
				c->close_at = now_ms() + 20;
			}
		}
		if (!(cc.flags & L7_MC_OVER))
			continue;
		struct linger lg = { .l_onoff = 1, .l_linger = 0 };
		setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
		vlog(L, "client port %u stopped reading (over %u bytes queued): reset", c->key.lport, L7_MESH_CLIENT_QMAX);
		mesh_client_close(L, c);
	}
}

/* Records waiting for earlier responses, and connections waiting to close. */
void mesh_clients_tick(struct l7run *L, uint64_t now)
{
	struct mesh *M = mesh_of(L);

	for (int i = M->n_clients - 1; i >= 0; i--) {
		struct mesh_client *c = M->client[i];
		/* a record is written before its bytes are sent to l7run, and one that waits keeps
		 * them: with none here, nothing waits (and the map lookup, a syscall per client per
		 * turn, was most of l7run's calls under load: 61K of 158K in 3 s of
		 * bench/mesh_remote.sh) */
		if (c->in_len || c->chunk || c->h2)
			pump(L, c);
		if (c->close_when && !c->closing) {
			uint64_t got = answered(c);
			if (got == UINT64_MAX || got >= c->close_when) {
				c->closing = 1;
				c->close_at = now + 20;   /* the response is queued: the FIN comes after it */
			}
		}
		if ((c->closing || c->eof) && (now >= c->close_at || (c->eof && !c->closing && finished(c))))
			mesh_client_close(L, c);
	}
}
