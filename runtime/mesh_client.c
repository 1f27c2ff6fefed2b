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

static const char *reason(int st)
{
	switch (st) {
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 414: return "URI Too Long";
	case 429: return "Too Many Requests";
	case 431: return "Request Header Fields Too Large";
	case 501: return "Not Implemented";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	default: return "Error";
	}
}

static void send_all(int fd, const char *p, size_t n)
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
 * the kernel delivered before. */
void mesh_client_answer(struct mesh_client *c, int status, int close_after)
{
	char body[64], msg[256];
	int bl = snprintf(body, sizeof body, "%d %s\n", status, reason(status));
	int n = snprintf(msg, sizeof msg, "HTTP/1.1 %d %s\r\ncontent-type: text/plain\r\ncontent-length: %d\r\n%s\r\n%s",
			 status, reason(status), bl, close_after ? "connection: close\r\n" : "", body);
	send_all(c->fd, msg, (size_t)n);
	c->local_done++;
	if (close_after && !c->closing) {
		c->closing = 1;
		c->close_at = mesh_now_ms() + 100;   /* let the answer drain before the FIN */
	}
}

static void publish(struct mesh_client *c)
{
	struct l7_mesh_ctl v = { .done_seq = c->next_seq - 1, .local_done = c->local_done };

	bpf_map_update_elem(M.ctl, &c->key, &v, BPF_ANY);
}

struct mesh_client *mesh_client_by_key(const struct l7_mesh_key *k)
{
	for (int i = 0; i < M.n_clients; i++)
		if (!memcmp(&M.client[i]->key, k, sizeof *k))
			return M.client[i];
	return NULL;
}

void mesh_accept(int lfd)
{
	for (;;) {
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		if (M.n_clients >= MESH_MAX_CLIENTS) {
			close(fd);
			continue;
		}
		struct mesh_client *c = calloc(1, sizeof *c);
		struct l7_mesh_key mine = mesh_key_of(fd);
		c->fd = fd;
		c->key = (struct l7_mesh_key){ mine.rip, mine.lip, mine.rport, mine.lport };
		c->next_seq = 1;
		M.client[M.n_clients++] = c;
		struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP, .data.ptr = c };
		epoll_ctl(M.epfd, EPOLL_CTL_ADD, fd, &ev);
	}
}

void mesh_client_close(struct mesh_client *c)
{
	/* records and the catch-up entry of this connection go with it */
	for (uint64_t s = c->next_seq;; s++) {
		struct l7_mesh_pass_key pk = { c->key, s };
		if (bpf_map_delete_elem(M.pass, &pk))
			break;
	}
	bpf_map_delete_elem(M.ctl, &c->key);
	if (!c->eof)
		epoll_ctl(M.epfd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	for (int i = 0; i < M.n_clients; i++)
		if (M.client[i] == c) {
			M.client[i] = M.client[--M.n_clients];
			break;
		}
	free(c->in);
	free(c);
}

/* Responses the client has had so far (kernel-delivered + ours). */
static uint64_t answered(struct mesh_client *c)
{
	struct l7_mesh_conn cc;

	if (bpf_map_lookup_elem(M.conns, &c->key, &cc))
		return UINT64_MAX;   /* the client is gone: nothing to wait for */
	return cc.resp_done + c->local_done;
}

static void consume(struct mesh_client *c, size_t n)
{
	memmove(c->in, c->in + n, c->in_len - n);
	c->in_len -= n;
}

/* Handle the records whose bytes have arrived, in order; stop at one that must wait. */
static void pump(struct mesh_client *c)
{
	while (!c->closing) {
		struct l7_mesh_pass_key pk = { c->key, c->next_seq };
		struct l7_mesh_pass r;
		if (bpf_map_lookup_elem(M.pass, &pk, &r))
			return;
		if (r.kind == L7_MP_CLOSE) {
			/* framing is lost: answer and close; whatever else arrives is discarded */
			c->in_len = 0;
			mesh_client_answer(c, (int)r.status, 1);
			bpf_map_delete_elem(M.pass, &pk);
			c->next_seq++;
			publish(c);
			return;
		}
		if (c->in_len < r.len)
			return;   /* the rest of the request is on its way */
		uint64_t got = answered(c);
		if (got != UINT64_MAX && got < r.req)
			return;   /* earlier responses still owed: the tick retries */
		if (r.kind == L7_MP_FORWARD) {
			struct mesh_pool_conn *pc = &M.slot[r.slot % L7_MESH_POOL_SIZE];
			struct l7_mesh_slot s;
			uint32_t k = r.slot % L7_MESH_POOL_SIZE;
			if (pc->fd >= 0 && !bpf_map_lookup_elem(M.pool, &k, &s) && s.state == L7_MS_BUSY &&
			    !memcmp(&s.owner, &c->key, sizeof c->key))
				send_all(pc->fd, c->in, r.len);   /* SK_MSG moves it into the backend */
			else
				mesh_client_answer(c, 502, 0);
		} else {
			mesh_client_answer(c, (int)r.status, 0);
		}
		consume(c, r.len);
		bpf_map_delete_elem(M.pass, &pk);
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

	if (!bpf_map_lookup_elem(M.pass, &pk, &r))
		return 0;
	if (bpf_map_lookup_elem(M.conns, &c->key, &cc))
		return 1;
	return cc.resp_done + c->local_done >= cc.req_seq;
}

void mesh_client_event(struct mesh_client *c, uint32_t ev)
{
	int eof = 0;

	for (;;) {
		if (c->in_cap - c->in_len < 65536) {
			c->in_cap = c->in_cap ? c->in_cap * 2 : 131072;
			c->in = realloc(c->in, c->in_cap);
		}
		ssize_t n = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, MSG_DONTWAIT);
		if (n > 0) {
			if (!c->closing)
				c->in_len += (size_t)n;
			continue;
		}
		if (n == 0 || (errno != EAGAIN && errno != EINTR))
			eof = 1;
		break;
	}
	pump(c);
	if (ev & EPOLLERR) {
		mesh_client_close(c);
	} else if (eof) {
		if (finished(c)) {
			mesh_client_close(c);
			return;
		}
		/* half-closed with answers owed: the tick finishes it */
		epoll_ctl(M.epfd, EPOLL_CTL_DEL, c->fd, NULL);
		c->eof = 1;
		c->close_at = mesh_now_ms() + 2000;
	}
}

/* Clients the data plane marked L7_MC_OVER (more than L7_MESH_CLIENT_QMAX unread bytes
 * queued: it stopped reading): reset them. The RST moves the client's socket to CLOSE, which
 * takes it out of the sockhash and frees what is queued in it; a FIN would leave the queue
 * held until the application closes. */
void mesh_clients_check_over(void)
{
	for (int i = M.n_clients - 1; i >= 0; i--) {
		struct mesh_client *c = M.client[i];
		struct l7_mesh_conn cc;
		if (bpf_map_lookup_elem(M.conns, &c->key, &cc) || !(cc.flags & L7_MC_OVER))
			continue;
		struct linger lg = { .l_onoff = 1, .l_linger = 0 };
		setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
		mlog("client port %u stopped reading (over %u bytes queued): reset", c->key.lport,
		     L7_MESH_CLIENT_QMAX);
		mesh_client_close(c);
	}
}

/* Records waiting for earlier responses, and connections waiting to close. */
void mesh_clients_tick(void)
{
	uint64_t now = mesh_now_ms();

	for (int i = M.n_clients - 1; i >= 0; i--) {
		struct mesh_client *c = M.client[i];
		pump(c);
		if ((c->closing || c->eof) && (now >= c->close_at || (c->eof && !c->closing && finished(c))))
			mesh_client_close(c);
	}
}
