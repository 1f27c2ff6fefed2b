/* mesh.h: the mesh-mode data plane (types and who writes what: l7/mesh.h).
 *
 * Client and backend run in one cgroup. sock_ops enrolls the sockets that matter (an endpoint
 * is a service or an upstream address) in l7_mesh_socks, keyed by 4-tuple. SK_MSG runs on every
 * sendmsg of those sockets:
 *   client   -> frame one request (a head that one sendmsg does not complete waits in
 *               l7_mesh_hold and is pushed back in front of the next; apply_bytes = head +
 *               inserted lines + body so that pipelined requests are routed one by one), run the
 *               policy, insert header lines, redirect it with BPF_F_INGRESS into the backend's
 *               socket of the client's pool connection for that upstream. Whatever the kernel
 *               path cannot do in order (another upstream still owes a response, a deny behind
 *               in-flight responses, no pool connection) goes over TCP to l7run with a record.
 *   backend  -> frame responses (Content-Length, chunked), count final ones, redirect them with
 *               BPF_F_INGRESS into the bound client's socket.
 *   l7run    -> its writes on its end of a client or pool connection go into the peer's socket
 *               the same way, so a client only ever receives through its ingress queue (order).
 *   remote   -> an endpoint on another node has no socket here: its slot's `backend` is l7run's
 *               own connection to it (L7_MR_RT_REMOTE, L7_MSF_REMOTE), requests are redirected
 *               into it without BPF_F_INGRESS (sent out inline), and l7run copies what comes back
 *               into the slot's relay socket, whose SK_MSG is the backend path above.
 * Requests are never forwarded unchecked: an unparseable head goes to l7run, which answers and
 * closes. */
#ifndef L7_BPF_MESH_H
#define L7_BPF_MESH_H

#include <linux/bpf.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_core_read.h>
#include "compat.h"
#include "l7/mesh.h"
#include "mesh_resp.h"
#include "mutate.h"
#include "upstat.h"
#include "alog.h"
#if !defined(L7_BPF_HTTP_H) && !defined(L7_GW_REQ_TMP_H)
#include "http.h"
#endif

#define L7_MESH_PULL1 2048     /* first look at a message: most heads fit */

extern const __u32 l7_split_mesh;   /* generated (l7/abi.h): the SK_MSG program is split */
#define L7_AF_INET    2
#define L7_AF_INET6   10
#define L7_TCP_CLOSE  7
#define L7_TCP_FIN_WAIT1 4

/* Kernel structures read for the client queue bound, relocated against the running kernel's
 * BTF (CO-RE): a client socket's sk_psock and the bytes queued in its ingress list. */
struct sock_common___l7 {
	__u64 skc_addrpair;   /* skc_daddr, then skc_rcv_saddr */
	__u32 skc_portpair;   /* skc_dport (network order), then skc_num */
} __attribute__((preserve_access_index));
struct sock___l7 {
	struct sock_common___l7 __sk_common;
	void *sk_user_data;
} __attribute__((preserve_access_index));
struct sk_psock___l7 {
	__u32 msg_tot_len;
} __attribute__((preserve_access_index));
#define L7_SK_USER_DATA_PTRMASK (~7ull)   /* SK_USER_DATA_NOCOPY | _BPF | _PSOCK */

/* Have the n responses before this request reached the client's queue, not only been decided?
 * resp_done first, then redir_dec, then redir_done (l7/mesh.h): a program counts redir_dec
 * before resp_done, and redir_done only grows after redir_dec, so a redirect on its way
 * always shows as redir_done < redir_dec here. */
static __always_inline int l7_mesh_delivered(const struct l7_mesh_conn *c, __u64 n)
{
	if (*(volatile const __u64 *)&c->resp_done != n)
		return 0;
	__u64 dec = *(volatile const __u64 *)&c->redir_dec;
	return *(volatile const __u64 *)&c->redir_done == dec;
}

/* A redirect into a client's socket was decided: count it before anything that lets the client
 * move on (resp_done), l7_mesh_redir_prog counts it again once it is queued. */
static __always_inline int l7_mesh_redirect_client(struct sk_msg_md *msg, struct l7_mesh_conn *to,
						   struct l7_mesh_key *key)
{
	if (bpf_msg_redirect_hash(msg, &l7_mesh_socks, key, BPF_F_INGRESS) != SK_PASS)
		return SK_DROP;
	if (to)
		__sync_fetch_and_add(&to->redir_dec, 1);
	return SK_PASS;
}

/* Would `len` more bytes put the client over L7_MESH_CLIENT_QMAX unread bytes? */
static __always_inline int l7_mesh_client_full(const struct l7_mesh_conn *c, __u32 len)
{
	struct sk_psock___l7 *p = (void *)c->psock;
	__u32 queued = 0;

	if (!p || !bpf_core_field_exists(p->msg_tot_len))
		return 0;
	if (bpf_core_read(&queued, sizeof(queued), &p->msg_tot_len))
		return 0;
	return (__u64)queued + len > L7_MESH_CLIENT_QMAX;
}

static __always_inline void l7_mesh_stat(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&l7_stats, &idx);
	if (v)
		*v += 1;
}

static __always_inline struct l7_mesh_key l7_mesh_rev(const struct l7_mesh_key *k)
{
	struct l7_mesh_key r = { .lip = k->rip, .rip = k->lip, .lport = k->rport, .rport = k->lport };
	return r;
}

static __always_inline int l7_mesh_same(const struct l7_mesh_key *a, const struct l7_mesh_key *b)
{
	return a->lip == b->lip && a->rip == b->rip && a->lport == b->lport && a->rport == b->rport;
}

static __always_inline struct l7_mesh_slot *l7_mesh_slot_at(__u32 idx)
{
	__u32 i = idx & (L7_MESH_POOL_SIZE - 1);
	return bpf_map_lookup_elem(&l7_mesh_pool, &i);
}

/* ---- sock_ops ------------------------------------------------------------------------- */

/* Frees the pool slots client k holds. At close every one goes (a slot still owing responses
 * as ORPHAN: they would reach whoever takes it next, so they are dropped first). At the client's
 * FIN (owed_too 0) only those that owe it nothing: no request can follow, and freeing them then
 * rather than once l7run's end closes too keeps the pool from running out under connection
 * churn (new clients got 503); the client may still read what the others owe. */
static __always_inline void l7_mesh_release(struct l7_mesh_conn *c, const struct l7_mesh_key *k, int owed_too)
{
	for (int u = 0; u < L7_MESH_UPSTREAMS; u++) {
		__u32 b = c->bind[u];
		if (!b)
			continue;
		struct l7_mesh_slot *s = l7_mesh_slot_at(b - 1);
		if (!s || s->gen != c->bind_gen[u] || !l7_mesh_same(&s->owner, k) ||
		    (!owed_too && s->req_cnt != s->resp_cnt))
			continue;
		__u32 to = s->req_cnt == s->resp_cnt ? L7_MS_IDLE : L7_MS_ORPHAN;
		if (__sync_val_compare_and_swap(&s->state, L7_MS_BUSY, to) == L7_MS_BUSY)
			c->bind[u] = 0;
	}
}

static __always_inline void l7_mesh_closed(const struct l7_mesh_key *k)
{
	struct l7_mesh_conn *c = bpf_map_lookup_elem(&l7_mesh_conns, k);

	if (!c)
		return;
	if (c->role == L7_MR_CLIENT) {
		l7_mesh_release(c, k, 1);
		bpf_map_delete_elem(&l7_mesh_hold, k);   /* a head it never finished */
		if (c->flags & L7_MC_H2) {
			bpf_map_delete_elem(&l7_mesh_h2c, k);
			bpf_map_delete_elem(&l7_mesh_h2tab, k);
		}
	} else if (c->role == L7_MR_BACKEND || c->role == L7_MR_RT_POOL || c->role == L7_MR_RT_REMOTE) {
		/* the pool connection is gone: l7run refills the slot (it also sees the EOF) */
		struct l7_mesh_slot *s = l7_mesh_slot_at(c->index);
		if (s && s->gen == c->gen)
			s->state = L7_MS_DEAD;
	}
	bpf_map_delete_elem(&l7_mesh_conns, k);
}

__attribute__((always_inline)) int l7_mesh_sockops(struct bpf_sock_ops *s)
{
	__u32 lip = s->local_ip4, rip = s->remote_ip4;

	if (s->family == L7_AF_INET6) {
		/* an IPv4 connection on an IPv6 socket (::ffff:a.b.c.d): grpcio listens and
		 * connects so even for 127.0.0.1; its IPv4 fields are set (tcp_v6_connect and
		 * tcp_v6_syn_recv_sock hand mapped addresses to the IPv4 code), so SK_MSG and the
		 * tracepoint find it under the same key */
		/* each field read once, at its own offset (the verifier refuses a ctx pointer
		 * clang moved) */
		__u32 l0 = *(volatile __u32 *)&s->local_ip6[0], l1 = *(volatile __u32 *)&s->local_ip6[1];
		__u32 l2 = *(volatile __u32 *)&s->local_ip6[2], l3 = *(volatile __u32 *)&s->local_ip6[3];
		__u32 r0 = *(volatile __u32 *)&s->remote_ip6[0], r1 = *(volatile __u32 *)&s->remote_ip6[1];
		__u32 r2 = *(volatile __u32 *)&s->remote_ip6[2], r3 = *(volatile __u32 *)&s->remote_ip6[3];
		if (l0 | l1 | r0 | r1 || l2 != bpf_htonl(0xffff) || r2 != bpf_htonl(0xffff))
			return 1;
		lip = l3;
		rip = r3;
	} else if (s->family != L7_AF_INET) {
		return 1;
	}
	struct l7_mesh_key k = {
		.lip = lip, .rip = rip,
		.lport = s->local_port, .rport = bpf_ntohl(s->remote_port),
	};

	if (s->op == BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB || s->op == BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB) {
		struct l7_mesh_addr_key lk = { k.lip, k.lport }, rk = { k.rip, k.rport };
		/* kinds, not pointers: clang would OR the two pointers, which the verifier refuses */
		__u32 lkind = 0, rkind = 0, rindex = 0;
		struct l7_mesh_addr *a = bpf_map_lookup_elem(&l7_mesh_addrs, &lk);
		if (a)
			lkind = a->kind;
		a = bpf_map_lookup_elem(&l7_mesh_addrs, &rk);
		if (a) {
			rkind = a->kind;
			rindex = a->index;
		}
		l7_barrier_var(lkind);
		if (!lkind && !rkind)
			return 1;   /* traffic the policy does not cover: leave it alone */
		/* which version takes the socket: l7/mesh.h, enum l7_mesh_addr_kind */
		if (lkind == L7_MA_CLAIM_OTHER || rkind == L7_MA_CLAIM_OTHER)
			return 1;
		struct l7_mesh_conn c;
		__builtin_memset(&c, 0, sizeof(c));
		if (rkind == L7_MA_SERVICE) {
			c.role = L7_MR_CLIENT;
			c.index = rindex;
		} else if (lkind == L7_MA_SERVICE) {
			c.role = L7_MR_RT_CLIENT;
		}
		if (lkind != L7_MA_CLAIM && rkind != L7_MA_CLAIM) {
			if (c.role == L7_MR_RT_CLIENT) {
				struct l7_mesh_key pk = l7_mesh_rev(&k);
				struct l7_mesh_conn *peer = bpf_map_lookup_elem(&l7_mesh_conns, &pk);
				if (!peer || peer->role != L7_MR_CLIENT)
					return 1;   /* the client's end is another version's (or none's) */
			} else {
				struct l7_mesh_addr_key mk = { 0, L7_MESH_MODE_PORT };
				struct l7_mesh_addr *m = bpf_map_lookup_elem(&l7_mesh_addrs, &mk);
				if (m && m->kind == L7_MA_MODE && m->index != L7_MESH_ENROLL)
					return 1;   /* retired: a newer version takes new sockets */
			}
		}
		/* The socket first (it fails when an older version took it), then its state entry: no
		 * write can come between, sock_ops runs with the socket locked. */
		if (bpf_sock_hash_update(s, &l7_mesh_socks, &k, BPF_ANY))
			return 1;
		if (c.role)
			bpf_map_update_elem(&l7_mesh_conns, &k, &c, BPF_ANY);
		bpf_sock_ops_cb_flags_set(s, BPF_SOCK_OPS_STATE_CB_FLAG);
		if (c.role == L7_MR_CLIENT && s->sk) {
			/* enrolled: the socket has its psock now (freed only after it leaves the map,
			 * which its close does, after the conns entry is gone) */
			struct sock___l7 *ks = (void *)bpf_skc_to_tcp_sock(s->sk);
			struct l7_mesh_conn *cp = bpf_map_lookup_elem(&l7_mesh_conns, &k);
			__u64 ud = 0;
			if (ks && cp && !bpf_core_read(&ud, sizeof(ud), &ks->sk_user_data))
				cp->psock = ud & L7_SK_USER_DATA_PTRMASK;
		}
	} else if (s->op == BPF_SOCK_OPS_STATE_CB && s->args[1] == L7_TCP_CLOSE) {
		l7_mesh_closed(&k);
	} else if (s->op == BPF_SOCK_OPS_STATE_CB && s->args[1] == L7_TCP_FIN_WAIT1) {
		struct l7_mesh_conn *c = bpf_map_lookup_elem(&l7_mesh_conns, &k);
		if (c && c->role == L7_MR_CLIENT)
			l7_mesh_release(c, &k, 0);
	}
	return 1;
}

/* ---- requests ------------------------------------------------------------------------- */

struct l7_mesh_claim {
	__u32 up;
	__u32 found;            /* 1 + pool index */
	struct l7_mesh_key key;
};

L7_LOOP_CB(l7_mesh_claim_cb)
{
	struct l7_mesh_claim *cl = l7_ctx;
	__u32 idx = cl->up * L7_MESH_SLOTS + (__u32)(l7_idx & (L7_MESH_SLOTS - 1));
	struct l7_mesh_slot *s = l7_mesh_slot_at(idx);

	if (!s || s->state != L7_MS_IDLE)
		return 0;
	if (__sync_val_compare_and_swap(&s->state, L7_MS_IDLE, L7_MS_BUSY) != L7_MS_IDLE)
		return 0;
	s->owner = cl->key;
	cl->found = idx + 1;
	return 1;
}

/* The client's pool connection to upstream u: the bound one while it lives, else a free one.
 * Returns 1 + pool index, 0 when the pool of u is exhausted or empty. */
static __always_inline __u32 l7_mesh_bind(struct l7_mesh_conn *c, const struct l7_mesh_key *k, __u32 u)
{
	u &= L7_MESH_UPSTREAMS - 1;
	__u32 b = c->bind[u];
	if (b) {
		struct l7_mesh_slot *s = l7_mesh_slot_at(b - 1);
		if (s && s->gen == c->bind_gen[u] && s->state == L7_MS_BUSY && l7_mesh_same(&s->owner, k))
			return b;
		c->bind[u] = 0;
	}
	struct l7_mesh_claim cl = { .up = u, .key = *k };
	l7_loop(L7_MESH_SLOTS, l7_mesh_claim_cb, &cl);
	if (!cl.found)
		return 0;
	struct l7_mesh_slot *s = l7_mesh_slot_at(cl.found - 1);
	if (!s)
		return 0;
	c->bind[u] = (__u16)cl.found;
	c->bind_gen[u] = s->gen;
	return cl.found;
}

/* The policy's header mutations of the request whose head (`head` bytes as parsed, of which
 * the first `lead`, empty lines before the request line, are no longer in the message) starts
 * this message: lines before its final CRLF, the client's lines of removed names cut. Returns
 * the bytes added (negative: cut) or L7_EDIT_FAILED. Staged in the scratch buffer: the parsed
 * head is done with (the spans of its lines live outside buf). */
static __always_inline int l7_mesh_mutate(struct sk_msg_md *msg, struct l7_req *scratch,
					  const struct l7_decision *d, __u32 head, __u32 lead)
{
	struct l7_edit *e = l7_edit_of(scratch);

	e->cut_mask = d->del;
	e->n_del = 0;
	e->n_set = d->n_set;
	__builtin_memcpy(e->set, d->set, sizeof(e->set));
	e->ins = head - 2;
	e->shift = (__s32)lead;
	e->size = msg->size;
	int delta = l7g_msg_edit(msg, scratch);
	if (delta != L7_EDIT_FAILED)
		l7_mesh_stat(L7_STAT_HDR_INSERT);
	return delta;
}

/* Into the receive queue of l7run's end of this connection. Always an explicit redirect, never
 * a bare SK_PASS: when one sendmsg carries several requests, the kernel re-runs the program on
 * the rest with msg->sk_redir still set from the previous request, so SK_PASS without a new
 * redirect would follow the old target. */
static __always_inline int l7_mesh_to_own_end(struct sk_msg_md *msg, const struct l7_mesh_key *k)
{
	struct l7_mesh_key own = l7_mesh_rev(k);

	return bpf_msg_redirect_hash(msg, &l7_mesh_socks, &own, BPF_F_INGRESS);
}

/* The next record for l7run. -1 when there is no room: then l7run cannot frame this stream,
 * which stops the connection. */
static __always_inline int l7_mesh_pass_put(struct l7_mesh_conn *c, const struct l7_mesh_key *k,
					    __u32 kind, __u32 len, __u32 status, __u32 slot, __u64 seq)
{
	struct l7_mesh_pass_key pk = { .client = *k, .seq = c->pass_seq + 1 };
	struct l7_mesh_pass p = { .kind = kind, .len = len, .status = status, .slot = slot, .req = seq };

	if (bpf_map_update_elem(&l7_mesh_pass, &pk, &p, BPF_ANY)) {
		c->flags |= L7_MC_BROKEN;
		return -1;
	}
	c->pass_seq = pk.seq;
	return 0;
}

/* Hand `len` bytes (0 = the rest of the message) to l7run with a record saying what to do.
 * apply_bytes is always set: on the rest of a message cut by apply_bytes the kernel re-runs
 * the program with the last run's value still in the sk_msg, which would otherwise carry this
 * verdict over into the client's next write unseen. */
static __always_inline int l7_mesh_to_l7run(struct sk_msg_md *msg, struct l7_mesh_conn *c,
					    const struct l7_mesh_key *k, __u32 kind, __u32 len,
					    __u32 status, __u32 slot, __u64 seq)
{
	if (l7_mesh_pass_put(c, k, kind, len, status, slot, seq))
		return SK_DROP;
	if (kind != L7_MP_DISCARD)
		c->last_up = 0;   /* what is in flight is no longer known here */
	if (kind == L7_MP_CLOSE || kind == L7_MP_CHUNKED)
		c->flags |= L7_MC_BROKEN;   /* l7run has the rest of the stream */
	bpf_msg_apply_bytes(msg, len ? len : msg->size);
	if (kind != L7_MP_DISCARD)
		l7_mesh_stat(L7_STAT_PASSED);
	return l7_mesh_to_own_end(msg, k);
}

/* A head this message starts but does not complete (its `size` bytes, all in req->buf): the
 * kernel's cork cannot wait for the rest (l7/mesh.h, struct l7_mesh_hold), so a copy waits in
 * l7_mesh_hold and l7run drops the bytes; the client's next write gets them back in front
 * (l7_mesh_unhold). */
static __always_inline int l7_mesh_hold_head(struct sk_msg_md *msg, struct l7_mesh_conn *c,
					     const struct l7_mesh_key *k, struct l7_req *req, __u32 size)
{
	_Static_assert(L7_MESH_HOLD_BYTES == L7_MAX_HEAD, "l7/mesh.h: a held head is shorter than L7_MAX_HEAD");
	_Static_assert(__builtin_offsetof(struct l7_mesh_hold, buf) == 0 &&
		       sizeof(struct l7_mesh_hold) <= sizeof(req->buf), "inserted from the scratch buffer");
	struct l7_mesh_hold *hd = 0;

	if (!bpf_map_update_elem(&l7_mesh_hold, k, req->buf, BPF_ANY))
		hd = bpf_map_lookup_elem(&l7_mesh_hold, k);
	if (!hd)   /* no room (l7_mesh_hold is full): fail closed */
		return l7_mesh_to_l7run(msg, c, k, L7_MP_CLOSE, 0, 503, 0, c->req_seq++);
	hd->len = size;
	c->flags |= L7_MC_HELD;
	return l7_mesh_to_l7run(msg, c, k, L7_MP_DISCARD, size, 0, 0, c->req_seq);
}

/* Push the held start of this client's head (if any: L7_MC_HELD) back in front of the message:
 * the message is then what one write of the whole would have been. -1 if it does not fit.
 * A global function, verified once on its own: inlined, its paths (none held, pushed back)
 * reached the parser and the policy in states the verifier could not merge, and it walked
 * them twice (mesh SK_MSG of examples/route.l7: 264K -> 423K processed instructions). */
__attribute__((noinline)) int l7g_mesh_unhold(struct sk_msg_md *msg, const struct l7_mesh_key *k,
					   struct l7_mesh_conn *c)
{
	if (!msg || !k || !c)
		return -1;
	/* only when the last write left a head there: a hash lookup every request otherwise (the
	 * test here, not in the caller, which it cost 8 bytes of stack, media_service.l7's mesh
	 * program then 512 of 512 in its deepest chain) */
	if (!(c->flags & L7_MC_HELD))
		return 0;
	c->flags &= ~L7_MC_HELD;
	struct l7_mesh_hold *hd = bpf_map_lookup_elem(&l7_mesh_hold, k);
	int rc = -1;

	if (!hd)
		return 0;
	__u32 n = hd->len;
	if (n && n < L7_MAX_HEAD && !bpf_msg_push_data(msg, 0, n, 0) && !bpf_msg_pull_data(msg, 0, n, 0)) {
		struct l7_fill_ctx fc = { .msg = msg, .src = hd->buf, .len = n };
		l7_loop(L7_MAX_HEAD / 8, l7_fill_cb, &fc);
		rc = 0;
	}
	bpf_map_delete_elem(&l7_mesh_hold, k);
	return rc;
}

/* Copy the first n bytes of the message into req->buf and parse them. */
static __always_inline int l7_mesh_parse(struct sk_msg_md *msg, struct l7_req *req, __u32 n)
{
	l7_barrier_var(n);
	if (n == 0 || n > L7_MAX_HEAD)
		return -L7_E_BAD;
	if (bpf_msg_pull_data(msg, 0, n, 0))
		return -L7_E_TOO_LARGE;
	void *d = msg->data;
	if (bpf_probe_read_kernel(req->buf, n, d))
		return -L7_E_BAD;
	return l7_http_parse_head(req, n);
}

static __always_inline int l7_mesh_act(struct sk_msg_md *msg, struct l7_mesh_conn *c,
				       const struct l7_mesh_key *k, struct l7_req *req,
				       const struct l7_decision *dp, __u32 h, __u64 seq);

/* Split SK_MSG (l7_split_mesh): hand the parsed request to decide program 0 of l7_tail_mesh. A
 * tail call that returns found no program there: l7run answers 503 and closes the connection;
 * the request is never forwarded unchecked. */
static __always_inline int l7_mesh_chain_start(struct sk_msg_md *msg, struct l7_mesh_conn *c,
					       const struct l7_mesh_key *k, __u32 head, __u64 seq)
{
	__u32 zero = 0;
	struct l7_chain *st = bpf_map_lookup_elem(&l7_chain, &zero);

	if (st) {
		__builtin_memcpy(st->owner, k, sizeof(*k));
		st->seq = seq;
		st->head = head;
		st->avail = 0;
		st->next_policy = 0;
		st->flags = 0;
		__builtin_memset(&st->d, 0, sizeof(st->d));
		bpf_tail_call(msg, &l7_tail_mesh, 0);
	}
	l7_mesh_stat(L7_STAT_CHAIN_FAIL);
	return l7_mesh_to_l7run(msg, c, k, L7_MP_CLOSE, 0, 503, 0, seq);
}

static __always_inline int l7_mesh_request(struct sk_msg_md *msg, struct l7_mesh_conn *c,
					   const struct l7_mesh_key *k)
{
	__u32 zero = 0, size = msg->size;
	struct l7_req *req = bpf_map_lookup_elem(&l7_scratch, &zero);

	/* l7run answered and is closing, or (LAST, RFC 9112 9.6) the client asked to close and
	 * nothing after that request is processed: l7run discards it and closes once the
	 * responses before are delivered */
	if (c->flags & (L7_MC_BROKEN | L7_MC_LAST))
		return l7_mesh_to_own_end(msg, k);
	if (!req || size == 0)
		return l7_mesh_to_own_end(msg, k);
	if (l7g_mesh_unhold(msg, k, c))
		return l7_mesh_to_l7run(msg, c, k, L7_MP_CLOSE, 0, 503, 0, c->req_seq++);
	/* HTTP/2 (mesh_h2.h); if the tail call returns, the parser below refuses the bytes */
	if (c->flags & L7_MC_H2)
		bpf_tail_call(msg, &l7_mesh_h2_tail, L7_MESH_H2_TAIL);
	size = msg->size;
	__u32 n = size < L7_MESH_PULL1 ? size : L7_MESH_PULL1;
	int h = l7_mesh_parse(msg, req, n);
	if (h == 0 && size > n) {
		n = size < L7_MAX_HEAD ? size : L7_MAX_HEAD;
		h = l7_mesh_parse(msg, req, n);
	}
	/* no HTTP/1.1 request: the HTTP/2 preface (or its start) goes to the h2 program; a
	 * split policy has none (the tail call returns), and l7run refuses it (h2_refuse.c) */
	if (h <= 0 && !l7_split_mesh && n >= 4 && req->buf[0] == 'P' && req->buf[1] == 'R' &&
	    req->buf[2] == 'I' && req->buf[3] == ' ')   /* the h2 program checks the rest */
		bpf_tail_call(msg, &l7_mesh_h2_tail, L7_MESH_H2_TAIL);
	if (h == 0 && size < L7_MAX_HEAD)
		return l7_mesh_hold_head(msg, c, k, req, size);
	__u64 seq = c->req_seq++;
	l7_mesh_stat(L7_STAT_REQUESTS);
	if (h <= 0) {
		/* never forwarded unchecked: l7run answers and closes (the stream cannot be framed) */
		__u32 st = h == 0 ? 431 : l7_http_error_status(h);
		l7_mesh_stat(L7_STAT_BAD_REQUEST);
		req->src_ip4 = k->lip;
		req->dst_port = k->rport;
		req->service = c->index;
		l7g_log((__u64)k->lport << 32 | k->lip, L7_LOG_VW(L7_DENY, L7_WHY_BAD, L7_LOG_MESH, st & 1023),
			k->lport & 0xffff, 0, 0);   /* a refusal's line */
		return l7_mesh_to_l7run(msg, c, k, L7_MP_CLOSE, 0, st, 0, seq);
	}
	/* Empty lines before the request line (RFC 9112 2.2: ignored) are not sent on: a backend
	 * that does not skip them would take the request for a bad one. The head keeps its parsed
	 * coordinates; the act half knows them by where the request line starts. */
	if (req->method_s.off && bpf_msg_pop_data(msg, 0, req->method_s.off, 0))
		return l7_mesh_to_l7run(msg, c, k, L7_MP_CLOSE, 0, 503, 0, seq);
	/* Upgrade and CONNECT go as the request they are (as in gateway mode): what the client
	 * sends after is framed as requests again. A chunked body goes through l7run. */
	_Static_assert(L7_MC_LAST == L7_REQ_CLOSE << 2, "flag bits");
	c->flags |= (req->flags & L7_REQ_CLOSE) << 2;

	struct l7_decision d;
	__builtin_memset(&d, 0, sizeof(d));
	req->service = c->index;
	req->src_ip4 = k->lip;      /* the client's own socket: its address, the service's port */
	req->dst_port = k->rport;
	req->jwt_done = req->jwt_ok = req->jwt_err = 0;
	if (l7_split_mesh)
		return l7_mesh_chain_start(msg, c, k, (__u32)h, seq);
	l7_policy_decide(req, &d);
	return l7_mesh_act(msg, c, k, req, &d, (__u32)h, seq);
}

/* The action half: apply decision dp to the request whose head (h bytes) is in req. */
static __always_inline int l7_mesh_act(struct sk_msg_md *msg, struct l7_mesh_conn *c,
				       const struct l7_mesh_key *k, struct l7_req *req,
				       const struct l7_decision *dp, __u32 h, __u64 seq)
{
	__u32 head_req = (req->method & 0xffffu) == L7_M_HEAD;   /* high bits: the parser's mark */
	__u32 lead = req->method_s.off;   /* empty lines before it, taken out of the message */
	__u32 head = h - lead, body = req->body_len;
	/* Through a map value, which the verifier does not track: with the constant that each
	 * Route left in d, it walked everything below once per upstream of the policy. */
	req->decided_up = dp->upstream;
	__u32 up = *(volatile __u32 *)&req->decided_up;
	if (dp->audit)
		l7_mesh_stat(L7_STAT_AUDITED);
	/* a forward's response record finds it by seq + 1 (l7_mesh_slot.log_seq); always passed,
	 * l7run waits only for a forward's: a branch on the verdict here cost the verifier 40% */
	if (!dp->nolog)
		l7g_log((__u64)k->lport << 32 | k->lip, L7_LOG_VW(dp->verdict, 0, L7_LOG_MESH, dp->verdict == L7_DENY ? dp->status & 1023 : 0),
			(k->lport & 0xffff) | (dp->upstream & 0xffff) << 16, L7_LOG_RA(dp->rule, dp->audit), (__u32)seq + 1);
	if (dp->verdict == L7_FALLBACK) {
		struct l7_mesh_addr_key fk = { 0, 0 };
		struct l7_mesh_addr *fb = bpf_map_lookup_elem(&l7_mesh_addrs, &fk);
		l7_mesh_stat(L7_STAT_FALLBACK);
		if (!fb)
			return l7_mesh_to_l7run(msg, c, k, L7_MP_ANSWER, head + body, 502, 0, seq);
		up = fb->index;
	} else if (dp->verdict == L7_DENY) {
		l7_mesh_stat(L7_STAT_DENIED);
		/* a run-time set with no endpoint names itself (L7_NO_SLOT): l7run says which */
		return l7_mesh_to_l7run(msg, c, k, L7_MP_ANSWER, head + body, dp->status,
					up >= L7_MAX_UPSTREAMS ? L7_MP_FOR(up) : 0, seq);
	} else if (dp->verdict != L7_FORWARD) {
		return l7_mesh_to_l7run(msg, c, k, L7_MP_ANSWER, head + body, 502, 0, seq);
	}
	if (up >= L7_MESH_UPSTREAMS)
		return l7_mesh_to_l7run(msg, c, k, L7_MP_ANSWER, head + body, 502, 0, seq);

	__u32 b = l7_mesh_bind(c, k, up);
	if (!b) {   /* l7run tells an exhausted pool (503) from an upstream it cannot reach (502) */
		l7_mesh_stat(L7_STAT_POOL_MISS);
		return l7_mesh_to_l7run(msg, c, k, L7_MP_ANSWER, head + body, 503, L7_MP_FOR(up), seq);
	}
	struct l7_mesh_slot *s = l7_mesh_slot_at(b - 1);
	if (!s)
		return l7_mesh_to_l7run(msg, c, k, L7_MP_ANSWER, head + body, 503, 0, seq);
	/* the no-body bits are a ring of L7_MESH_NOBODY_DEPTH: never wrap while one is set (nor,
	 * when rules mutate responses, the ring of their mutations, l7_mesh_rmut) */
	__u64 nb = s->no_body, ri = s->req_cnt;
	if ((nb | head_req | l7_resp_mut) && ri - s->resp_cnt >= L7_MESH_NOBODY_DEPTH - 1)
		return l7_mesh_to_l7run(msg, c, k, L7_MP_ANSWER, head + body, 503, 0, seq);
	__u32 total = head + body;
	if (dp->n_set || dp->del) {
		int delta = l7_mesh_mutate(msg, req, dp, h, lead);
		if (delta == L7_EDIT_FAILED)   /* never sent half-edited: l7run answers and closes */
			return l7_mesh_to_l7run(msg, c, k, L7_MP_CLOSE, 0, 500, 0, seq);
		total += delta;
	}

	/* In order when nothing is with l7run and either nothing is in flight or what is in flight
	 * goes to the same connection (a connection answers in order). */
	struct l7_mesh_ctl *ctl = bpf_map_lookup_elem(&l7_mesh_ctl, k);
	__u64 done = ctl ? ctl->done_seq : 0, local = ctl ? ctl->local_done : 0;
	int in_order = c->pass_seq == done && (c->last_up == up + 1 || l7_mesh_delivered(c, seq - local));

	/* only this client's requests write the bits while it owns the slot (its sendmsg runs
	 * under its socket lock); the response side only reads them */
	__u64 bit = 1ull << (ri & (L7_MESH_NOBODY_DEPTH - 1));
	s->no_body = (nb & ~bit) | (bit & -(__u64)head_req);
	if (l7_resp_mut) {   /* what its response gets, by its number on the connection */
		__u32 si = b - 1;
		struct l7_mesh_rring *rr = bpf_map_lookup_elem(&l7_mesh_rmut, &si);
		if (rr) {
			struct l7_mesh_rmut *m = &rr->r[ri & (L7_MESH_NOBODY_DEPTH - 1)];
			m->n_set = (__u8)dp->n_rset;
			m->del = (__u8)dp->rdel;
			__builtin_memcpy(m->set, dp->rset, sizeof(m->set));
		}
	}
	s->log_seq[ri & (L7_MESH_NOBODY_DEPTH - 1)] = (__u32)seq + 1;
	__sync_fetch_and_add(&s->req_cnt, 1);
	if (req->flags & L7_REQ_CHUNKED)
		return l7_mesh_to_l7run(msg, c, k, L7_MP_CHUNKED, 0, total, b - 1, seq);
	if (!in_order) {
		l7_mesh_stat(L7_STAT_ORDER_WAIT);
		return l7_mesh_to_l7run(msg, c, k, L7_MP_FORWARD, total, 0, b - 1, seq);
	}
	if ((s->flags & L7_MSF_REMOTE) && total > L7_MESH_REMOTE_INLINE)   /* l7/mesh.h: l7run sends it */
		return l7_mesh_to_l7run(msg, c, k, L7_MP_FORWARD, total, 0, b - 1, seq);
	struct l7_mesh_key be = s->backend;
	/* a local backend's receive queue, or out of l7run's connection to a remote endpoint
	 * (an egress redirect: tcp_bpf_sendmsg_redir sends it inline, in this sendmsg) */
	__u64 rflags = s->flags & L7_MSF_REMOTE ? 0 : BPF_F_INGRESS;
	bpf_msg_apply_bytes(msg, total);
	if (bpf_msg_redirect_hash(msg, &l7_mesh_socks, &be, rflags) != SK_PASS) {
		/* the backend's socket is gone (closed under us): 502, the slot gets refilled */
		__sync_fetch_and_add(&s->resp_cnt, 1);
		c->bind[up & (L7_MESH_UPSTREAMS - 1)] = 0;
		return l7_mesh_to_l7run(msg, c, k, L7_MP_ANSWER, total, 502, L7_MP_FOR(up), seq);
	}
	c->last_up = up + 1;
	l7_mesh_stat(L7_STAT_FORWARDED);
	l7g_upstat(up, 0, total, 0);   /* head and body: apply_bytes covers them all */
	return SK_PASS;
}

/* ---- responses ------------------------------------------------------------------------ */

/* The mutations rm of a response whose head (h bytes, scanned into hs) starts this message. */
static __always_inline int l7_mesh_edit_response(struct sk_msg_md *msg, struct l7_req *r,
						 const struct l7_mesh_rmut *rm, const struct l7_mesh_rscan *hs, __u32 h)
{
	struct l7_edit *e = l7_edit_of(r);

	if (hs->cut_over)
		return L7_EDIT_FAILED;   /* more separate lines to cut than an edit holds */
	e->ins = h - 2;
	e->n_set = rm->n_set;
	__builtin_memcpy(e->set, rm->set, sizeof(e->set));
	e->n_del = hs->n_cut < L7_MAX_SET ? hs->n_cut : L7_MAX_SET;
	__builtin_memcpy(e->del, hs->cut, sizeof(e->del));
	e->cut_mask = 0;
	e->shift = 0;
	e->size = msg->size;
	int delta = l7g_msg_edit(msg, r);
	if (delta != L7_EDIT_FAILED)
		l7_mesh_stat(L7_STAT_HDR_INSERT);
	return delta;
}

/* Frame the response bytes at the start of this message. Returns how many of them belong to
 * the current piece (the rest is framed by the next run, via apply_bytes), 0 to wait for more;
 * *final says whether the piece ends a response, *status is the status of a head that starts
 * it (0: the piece is no head). rm: the mutations of a response head that
 * starts here (NULL: none); *delta gets the bytes they added (negative: cut), to be added to
 * the length returned, or L7_EDIT_FAILED (the head must not reach the client). */
static __always_inline __u32 l7_mesh_frame_response(struct sk_msg_md *msg, struct l7_mesh_conn *c,
						     struct l7_req *r, __u32 size, int *final, __u32 no_body,
						     const struct l7_mesh_rmut *rm, int *delta, __u32 *status)
{
	*final = 0;
	*delta = 0;
	*status = 0;
	if (c->body == L7_MB_RAW)
		return size;
	if (c->body == L7_MB_LEN || c->body == L7_MB_CHUNK_DATA) {
		if (c->body_left > size) {
			c->body_left -= size;
			return size;
		}
		__u32 n = (__u32)c->body_left;
		c->body_left = 0;
		if (c->body == L7_MB_LEN) {
			c->body = L7_MB_HEAD;
			*final = 1;
		} else {
			c->body = L7_MB_CHUNK;
		}
		return n;
	}
	if (c->body == L7_MB_CHUNK) {
		__u32 n = size < 64 ? size : 64;
		__u64 csize = 0;
		if (bpf_msg_pull_data(msg, 0, n, 0) || bpf_probe_read_kernel(r->buf, n & 127, msg->data))
			goto raw;
		int ln = l7_mesh_scan_chunk(r, n, &csize);
		if (ln == 0)
			return size < 64 ? 0 : size;
		if (ln < 0)
			goto raw;
		if (csize == 0) {
			/* last chunk: CRLF must follow (trailers are not framed here) */
			if (size < (__u32)ln + 2)
				return 0;
			c->body = L7_MB_HEAD;
			*final = 1;
			return (__u32)ln + 2;
		}
		c->body = L7_MB_CHUNK_DATA;
		c->body_left = csize + 2;
		return (__u32)ln;
	}
	/* a head */
	__u32 n = size < L7_RS_MAXHEAD ? size : L7_RS_MAXHEAD;
	struct l7_mesh_rscan *hs;
	l7_barrier_var(n);
	if (n == 0 || n > L7_RS_MAXHEAD)
		goto raw;
	if (bpf_msg_pull_data(msg, 0, n, 0) || bpf_probe_read_kernel(r->buf, n, msg->data))
		goto raw;
	int h = l7_mesh_scan_response(r, n, &hs, rm ? rm->del : 0);
	if (h == 0)
		return 0;
	if (h < 0)
		goto raw;
	__u32 st = hs->status;
	*status = st ? st : 1;   /* 1: counted as outside 100-599 */
	if (st >= 100 && st < 200)
		return (__u32)h;                           /* interim: the exchange goes on */
	if (rm)   /* the final response: its request's rules' mutations */
		*delta = l7_mesh_edit_response(msg, r, rm, hs, (__u32)h);
	/* a response to HEAD ends with its head, whatever its Content-Length says */
	if (no_body || st == 204 || st == 304 || (hs->has_clen && hs->clen == 0)) {
		*final = 1;
		return (__u32)h;
	}
	if (hs->chunked) {
		c->body = L7_MB_CHUNK;
		return (__u32)h;
	}
	if (hs->has_clen) {
		__u64 total = (__u64)h + hs->clen;
		if (total <= size) {
			*final = 1;
			return (__u32)total;
		}
		c->body = L7_MB_LEN;
		c->body_left = total - size;
		return size;
	}
raw:
	if (rm)
		*delta = L7_EDIT_FAILED;   /* a head to edit that cannot be framed */
	c->body = L7_MB_RAW;   /* close-delimited or unframeable: the connection ends with it */
	return size;
}

static __always_inline int l7_mesh_response(struct sk_msg_md *msg, struct l7_mesh_conn *c,
					    const struct l7_mesh_key *k)
{
	__u32 zero = 0, size = msg->size;
	struct l7_req *r = bpf_map_lookup_elem(&l7_scratch, &zero);
	struct l7_mesh_slot *s = l7_mesh_slot_at(c->index);
	int final = 0;

	if (!r || !s || s->gen != c->gen || size == 0)
		return l7_mesh_to_own_end(msg, k);   /* l7run's end of the pool connection discards it */
	__u32 no_body = (__u32)(s->no_body >> (s->resp_cnt & (L7_MESH_NOBODY_DEPTH - 1))) & 1;
	const struct l7_mesh_rmut *rm = 0;
	if (l7_resp_mut && c->body == L7_MB_HEAD) {
		/* a head: the mutations its request's rules chose, if any */
		__u32 si = c->index;
		struct l7_mesh_rring *rr = bpf_map_lookup_elem(&l7_mesh_rmut, &si);
		if (rr) {
			rm = &rr->r[s->resp_cnt & (L7_MESH_NOBODY_DEPTH - 1)];
			if (!rm->n_set && !rm->del)
				rm = 0;
		}
	}
	int delta = 0, edit_failed = 0;
	__u32 status = 0;
	__u32 len = l7_mesh_frame_response(msg, c, r, size, &final, no_body, rm, &delta, &status);
	if (len == 0) {
		bpf_msg_cork_bytes(msg, size + 1);
		return SK_PASS;
	}
	/* as received from the backend, before the edit; a piece once (the rest of the message
	 * is a new run, via apply_bytes) */
	l7g_upstat(c->index / L7_MESH_SLOTS, status, 0, len);
	if (delta == L7_EDIT_FAILED)
		edit_failed = 1;
	else {
		len += delta;
		size += delta;
	}
	/* Always, also when the piece is the whole message: the kernel re-runs this program on the
	 * rest of a message cut by apply_bytes with the same sk_msg, whose apply_bytes is still
	 * the last run's. Set only when cutting, a chunk's data after its 5-byte size line went
	 * 5 bytes at a time and was framed again each time as a size line (chunked responses went
	 * raw: never counted final, and the client's next switch of upstream waited forever). */
	bpf_msg_apply_bytes(msg, len);
	struct l7_mesh_key owner = s->owner;
	if (status >= 200 || (status && status < 100))
		s->log_status = status;   /* the final one (1: outside 100-599) */
	s->log_bytes += len;
	if (final) {
		/* the access log: the response to request resp_cnt of this connection */
		l7g_log_resp((__u64)owner.lport << 32 | owner.lip, s->log_seq[s->resp_cnt & (L7_MESH_NOBODY_DEPTH - 1)],
			     s->log_status, s->log_bytes);
		s->log_bytes = 0;
		__sync_fetch_and_add(&s->resp_cnt, 1);
	}
	struct l7_mesh_conn *oc = NULL;
	if (s->state == L7_MS_BUSY)
		oc = bpf_map_lookup_elem(&l7_mesh_conns, &owner);
	if (oc && (edit_failed || (oc->flags & L7_MC_OVER) || l7_mesh_client_full(oc, len))) {
		/* the client stopped reading: no more into its queue; the rest of what this
		 * connection owes it is dropped (l7run's end discards it) and l7run resets it.
		 * So for a response whose head could not be edited: never sent as it is. */
		oc->flags |= L7_MC_OVER | L7_MC_BROKEN;
		__sync_val_compare_and_swap(&s->state, L7_MS_BUSY, L7_MS_ORPHAN);
		oc = NULL;
	}
	if (oc) {
		/* redirected (and counted in redir_dec) before it counts as done */
		int rc = l7_mesh_redirect_client(msg, oc, &owner);
		if (final) {
			l7_mesh_stat(L7_STAT_RESPONSES);
			__sync_fetch_and_add(&oc->resp_done, 1);
		}
		/* a failed redirect (client gone) must not become SK_DROP: the backend would get
		 * EACCES and drop the connection */
		if (rc != SK_PASS)
			l7_mesh_to_own_end(msg, k);
		return SK_PASS;
	}
	if (s->state == L7_MS_ORPHAN) {
		/* l7run's end discards what is owed to a client that is gone or stopped reading,
		 * but an ingress redirect ignores the receive buffer: a backend still writing a
		 * large response would queue there as fast as l7run falls behind (10-20 MiB seen
		 * under load). Past the client bound: refuse, the backend's send fails and it
		 * drops the connection (l7run refills the slot), as a proxy aborts the server side
		 * of an exchange its client aborted. */
		if (__sync_fetch_and_add(&s->orphan_bytes, len) + len > L7_MESH_CLIENT_QMAX)
			return SK_DROP;
		if (final && s->resp_cnt == s->req_cnt) {
			s->orphan_bytes = 0;
			__sync_val_compare_and_swap(&s->state, L7_MS_ORPHAN, L7_MS_IDLE);
		}
	}
	l7_mesh_to_own_end(msg, k);
	return SK_PASS;
}

/* ---- entry ----------------------------------------------------------------------------- */

/* Decide program `chunk` of a split SK_MSG: finds the client connection again from the message,
 * the request in l7_scratch and what the programs before it decided in l7_chain; runs its chunk
 * of the rules; then either tail-calls the next chunk or, decided, runs the action half. */
__attribute__((always_inline)) int l7_mesh_decide_prog(struct sk_msg_md *msg, __u32 chunk)
{
	struct l7_mesh_key k = {
		.lip = msg->local_ip4, .rip = msg->remote_ip4,
		.lport = msg->local_port, .rport = bpf_ntohl(msg->remote_port),
	};
	struct l7_mesh_conn *c = bpf_map_lookup_elem(&l7_mesh_conns, &k);
	__u32 zero = 0;
	struct l7_req *req = bpf_map_lookup_elem(&l7_scratch, &zero);
	struct l7_chain *st = bpf_map_lookup_elem(&l7_chain, &zero);

	if (!c)
		return SK_DROP;   /* its state vanished since the parse half: the client gets an error */
	__u64 own[2];
	_Static_assert(sizeof(own) == sizeof(k), "l7_chain.owner holds a mesh key");
	__builtin_memcpy(own, &k, sizeof(k));
	if (!req || !st || st->owner[0] != own[0] || st->owner[1] != own[1]) {
		l7_mesh_stat(L7_STAT_CHAIN_FAIL);
		return l7_mesh_to_l7run(msg, c, &k, L7_MP_CLOSE, 0, 503, 0, c->req_seq - 1);
	}
	if (!l7_policy_step(req, st, chunk)) {
		bpf_tail_call(msg, &l7_tail_mesh, chunk + 1);
		l7_mesh_stat(L7_STAT_CHAIN_FAIL);
		return l7_mesh_to_l7run(msg, c, &k, L7_MP_CLOSE, 0, 503, 0, st->seq);
	}
	return l7_mesh_act(msg, c, &k, req, &st->d, st->head, st->seq);
}


__attribute__((always_inline)) int l7_mesh_msg(struct sk_msg_md *msg)
{
	struct l7_mesh_key k = {
		.lip = msg->local_ip4, .rip = msg->remote_ip4,
		.lport = msg->local_port, .rport = bpf_ntohl(msg->remote_port),
	};
	struct l7_mesh_conn *c = bpf_map_lookup_elem(&l7_mesh_conns, &k);

	if (!c)
		return SK_PASS;
	if (c->role == L7_MR_CLIENT)
		return l7_mesh_request(msg, c, &k);
	if (c->role == L7_MR_BACKEND)
		return l7_mesh_response(msg, c, &k);
	/* l7run's ends: into the peer's receive queue, like everything else it gets (its answers
	 * to a client count against the client's bound too) */
	struct l7_mesh_key peer = l7_mesh_rev(&k);
	if (c->role == L7_MR_RT_POOL || c->role == L7_MR_RT_REMOTE)   /* a request l7run forwards */
		l7g_upstat(c->index / L7_MESH_SLOTS, 0, msg->size, 0);
	if (c->role == L7_MR_RT_REMOTE)
		return SK_PASS;   /* out over TCP to the remote endpoint */
	if (c->role == L7_MR_RT_CLIENT) {
		struct l7_mesh_conn *pc = bpf_map_lookup_elem(&l7_mesh_conns, &peer);
		if (pc && ((pc->flags & L7_MC_OVER) || l7_mesh_client_full(pc, msg->size))) {
			pc->flags |= L7_MC_OVER | L7_MC_BROKEN;
			return SK_DROP;
		}
		if (pc && pc->role == L7_MR_CLIENT) {   /* l7run's answer: in the client's order */
			l7_mesh_redirect_client(msg, pc, &peer);
			return SK_PASS;
		}
	}
	bpf_msg_redirect_hash(msg, &l7_mesh_socks, &peer, BPF_F_INGRESS);
	return SK_PASS;
}

/* The sock:sk_data_ready tracepoint (BTF-typed, args[0]: the socket), which sock_def_readable
 * hits after the kernel has queued a redirect into a socket (bpf_tcp_ingress: queue,
 * data_ready, then the socket lock is released). For a client socket of this version (the same
 * 4-tuple and psock, so not a socket of another namespace or object) with a redirect on its
 * way, count it in redir_done. Every socket of the machine that gets data comes here; most
 * find no entry. A client socket gets no data but redirects (l7run's end sends through its
 * SK_MSG too), and the redir_done < redir_dec test keeps a stray wake-up from counting ahead.
 * tp_btf, not raw_tp: the verifier knows args[0] is a struct sock, so its fields are plain
 * loads, where a raw tracepoint needed a bpf_probe_read_kernel call for each (three a run). */
__attribute__((always_inline)) int l7_mesh_redir(void *ctx)
{
	struct sock___l7 *sk = (void *)((__u64 *)ctx)[0];
	struct l7_mesh_key k;

	if (!sk)
		return 0;
	__u64 addrs = sk->__sk_common.skc_addrpair;
	__u32 ports = sk->__sk_common.skc_portpair;
	k.lip = (__u32)(addrs >> 32);
	k.rip = (__u32)addrs;
	k.lport = ports >> 16;
	k.rport = bpf_ntohs((__u16)ports);
	struct l7_mesh_conn *c = bpf_map_lookup_elem(&l7_mesh_conns, &k);
	if (!c || c->role != L7_MR_CLIENT || c->psock != ((__u64)sk->sk_user_data & L7_SK_USER_DATA_PTRMASK))
		return 0;
	/* queued under the client's socket lock, so one at a time per client */
	__u64 done = *(volatile __u64 *)&c->redir_done;
	if (done < *(volatile __u64 *)&c->redir_dec)
		__sync_val_compare_and_swap(&c->redir_done, done, done + 1);
	return 0;
}

#endif
