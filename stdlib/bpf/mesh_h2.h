/* mesh_h2.h: HTTP/2 (h2c, prior knowledge) clients in mesh mode: every stream decided in the
 * kernel at its HEADERS (issue 14).
 *
 * The client's SK_MSG (mesh.h) tail-calls l7_mesh_h2_prog for a connection that began with
 * the preface (L7_MC_H2). Each run copies up to L7_H2_BUF bytes of the message, walks their
 * frames with h2.h (the RFC's framing rules, the client's HPACK state: our SETTINGS_HEADER_
 * TABLE_SIZE 0 pending, then acknowledged), and stops at a complete header block: hpack.h
 * decodes it into struct l7_req and the policy decides the stream as it decides an HTTP/1.1
 * request. The bytes up to there go to l7run's end with one record (L7_MP_H2, l7/mesh.h):
 * the decision about the last block in them, or the error about the last frame. l7run
 * (runtime/mesh_h2.c) terminates the connection-level frames per hop, writes an allowed
 * stream's frames on the client's own connection to the upstream the kernel chose (not a pool
 * connection: l7run opens it for the client's first stream there), answers a denied one, and
 * relays responses.
 * l7run forwards a header block only with the kernel's decision for it; a block the kernel
 * cannot decide (a dynamic table reference, a block split over writes, too many
 * CONTINUATIONs) is refused with the RFC's code, never passed on undecided.
 *
 * A frame the scan must see whole (HEADERS, CONTINUATION, SETTINGS...) that one write does not
 * complete is held as an HTTP/1.1 head start is (l7_mesh_hold: a copy here, the bytes dropped
 * by l7run, pushed back in front of the next write by l7g_mesh_unhold). */
#ifndef L7_BPF_MESH_H2_H
#define L7_BPF_MESH_H2_H

#include "mesh.h"
#include "h2.h"

/* The record of this run: bytes [0, len) go to l7run. */
static __always_inline int l7_mesh_h2_pass(struct sk_msg_md *msg, struct l7_mesh_conn *c,
					   const struct l7_mesh_key *k, __u32 len, __u32 status,
					   __u32 slot, __u32 stream, int err)
{
	if (err && ((-err) & L7_H2_R_CONN))
		c->flags |= L7_MC_BROKEN;   /* GOAWAY: l7run has the rest and discards it */
	return l7_mesh_to_l7run(msg, c, k, L7_MP_H2, len, status, slot, L7_MP_H2_REQ(stream, err));
}

/* The policy on a decoded stream: a global function, verified once on its own, so that its
 * stack and hpack.h's decoder's are two call chains of the program, not one (inlined, the
 * larger policies needed 560-592 bytes of the 512). */
__attribute__((noinline)) int l7g_mesh_h2_policy(struct l7_req *req, struct l7_decision *d)
{
	if (!req || !d)
		return 0;
	l7_policy_decide(req, d);
	return 0;
}

/* The client's dynamic table (RFC 7541 2.3.2) is kept in l7_mesh_h2tab while it may hold
 * entries: from the connection's first block until a size update to 0 empties it (our
 * SETTINGS_HEADER_TABLE_SIZE 0 acknowledged makes one due: RFC 7541 4.2), so the blocks that
 * nghttp and h2load send before our SETTINGS reach them, which refer to what the first one
 * inserted, are decided like any other. The decoder works on its copy in d (per CPU): in
 * before the block, back after it when the block changed it. No entry and none lost: the
 * initial table. */
static __always_inline void l7_mesh_h2_tab_in(const struct l7_mesh_key *k, struct l7_mesh_h2 *st,
					      struct l7_hpack *d)
{
	struct l7_hpack_table *t;

	if (st->c.flags & (L7_H2_C_HP_ZERO | L7_H2_C_HP_UNKNOWN))
		return;   /* empty (the decoder resets its copy), or not kept */
	t = bpf_map_lookup_elem(&l7_mesh_h2tab, k);
	if (!t || bpf_probe_read_kernel(&d->tab, sizeof(d->tab), t))
		d->tab.init = 0;
}

/* (nothing of the block is kept on the stack across the decode: this program's frame is part
 * of the deepest call chain, which is at the kernel's 512 bytes) */
static __always_inline void l7_mesh_h2_tab_out(const struct l7_mesh_key *k, struct l7_mesh_h2 *st,
					       struct l7_hpack *d)
{
	if (st->c.flags & (L7_H2_C_HP_ZERO | L7_H2_C_HP_UNKNOWN)) {
		/* emptied by a size update, or lost by a decode that stopped: nothing to keep */
		if ((d->msg.flags & (L7_H2_M_UPDATE | L7_H2_M_TABLE)) || !d->st.done)
			bpf_map_delete_elem(&l7_mesh_h2tab, k);
	} else if ((d->msg.flags & L7_H2_M_TABLE) &&
		   bpf_map_update_elem(&l7_mesh_h2tab, k, &d->tab, BPF_ANY)) {
		st->c.flags |= L7_H2_C_HP_UNKNOWN;   /* no room: references are refused, as before */
	}
}

/* Decide the stream whose header block the scan completed: the record's status and slot. */
static __always_inline int l7_mesh_h2_decide(struct l7_mesh_conn *c, const struct l7_mesh_key *k,
					     struct l7_mesh_h2 *st, struct l7_hpack *d,
					     struct l7_req *req, __u32 *status, __u32 *slot)
{
	__u32 zero = 0;
	/* the decision in map memory (the split path's, unused by an unsplit policy): on the
	 * stack it put the larger policies past 512 bytes */
	struct l7_chain *ch = bpf_map_lookup_elem(&l7_chain, &zero);
	l7_mesh_h2_tab_in(k, st, d);
	int rc = l7_h2_decode(&st->c, d, req, L7_HPACK_REQUEST);
	l7_mesh_h2_tab_out(k, st, d);

	l7_mesh_stat(L7_STAT_REQUESTS);
	if (rc < 0) {
		l7_mesh_stat(L7_STAT_BAD_REQUEST);
		/* the slow path (a reference to a table not kept, too many fields) has no
		 * decoder here: the stream is refused, unprocessed, and the client may retry it */
		return (-rc) & L7_H2_R_SLOW ? L7_H2_STREAM_ERR(L7_H2_REFUSED_STREAM) : rc;
	}
	if (!ch)
		return L7_H2_CONN_ERR(L7_H2_INTERNAL_ERROR);
	struct l7_decision *dp = &ch->d;
	__builtin_memset(dp, 0, sizeof(*dp));
	req->service = c->index;
	req->src_ip4 = k->lip;
	req->dst_port = k->rport;
	req->jwt_done = req->jwt_ok = req->jwt_err = 0;
	l7g_mesh_h2_policy(req, dp);
	req->decided_up = dp->upstream;
	__u32 up = *(volatile __u32 *)&req->decided_up;
	if (dp->audit)
		l7_mesh_stat(L7_STAT_AUDITED);
	/* the access log, as for HTTP/1.1 (mesh.h l7_mesh_act), numbered by the stream: l7run
	 * writes a forward's response record when the stream's response ends (runtime/mesh_h2.c) */
	if (!dp->nolog)
		l7g_log((__u64)k->lport << 32 | k->lip, L7_LOG_VW(dp->verdict, 0, L7_LOG_MESH, dp->verdict == L7_DENY ? dp->status & 1023 : 0),
			(k->lport & 0xffff) | (dp->upstream & 0xffff) << 16, L7_LOG_RA(dp->rule, dp->audit), st->ev.f.stream);
	if (dp->verdict == L7_DENY) {
		l7_mesh_stat(L7_STAT_DENIED);
		*status = (dp->status & 0xffff) | (__u32)(dp->grpc & 0xff) << 16 |
			  (d->msg.flags & L7_H2_M_GRPC ? L7_MP_H2_IS_GRPC : 0);
		return 0;
	}
	/* the fallback proxy speaks HTTP/1.1 */
	if (dp->verdict != L7_FORWARD || up >= L7_MESH_UPSTREAMS) {
		*status = 502 | (d->msg.flags & L7_H2_M_GRPC ? L7_MP_H2_IS_GRPC : 0);
		return 0;
	}
	/* header mutations: l7run applies them as it re-encodes the block (runtime/mesh_h2.c),
	 * from the decision itself, under the key of the chain's own owner and seq (the pass
	 * key's layout, in map memory: the stack is full). Not written: the stream is refused,
	 * never sent on without them. */
	if (dp->n_set | dp->del | dp->n_rset | dp->rdel) {
		_Static_assert(sizeof(ch->owner) == sizeof(struct l7_mesh_key) &&
			       __builtin_offsetof(struct l7_chain, seq) == __builtin_offsetof(struct l7_mesh_pass_key, seq),
			       "the chain's head is a pass key");
		struct l7_mesh_pass_key *pk = (struct l7_mesh_pass_key *)ch;
		pk->client = *k;
		pk->seq = st->ev.f.stream;
		if (bpf_map_update_elem(&l7_mesh_h2mut, pk, dp, BPF_ANY))
			return L7_H2_STREAM_ERR(L7_H2_REFUSED_STREAM);
		*status = L7_MP_H2_MUT;
	}
	/* the upstream, not a pool connection: the stream goes on the client's own connection to
	 * it, which l7run opens when its first stream comes (runtime/mesh_h2.c), so the pool
	 * bounds HTTP/1.1 clients only */
	*slot = L7_MP_FOR(up);
	l7_mesh_stat(L7_STAT_FORWARDED);
	return 0;
}

__attribute__((always_inline)) int l7_mesh_h2(struct sk_msg_md *msg)
{
	struct l7_mesh_key k = {
		.lip = msg->local_ip4, .rip = msg->remote_ip4,
		.lport = msg->local_port, .rport = bpf_ntohl(msg->remote_port),
	};
	struct l7_mesh_conn *c = bpf_map_lookup_elem(&l7_mesh_conns, &k);
	__u32 zero = 0, size = msg->size;

	if (!c || c->role != L7_MR_CLIENT)
		return SK_DROP;
	if (c->flags & L7_MC_BROKEN || size == 0)
		return l7_mesh_to_own_end(msg, &k);
	__u32 cpu = bpf_get_smp_processor_id();   /* past the maps' size: refused (NULL) */
	__u8 *buf = bpf_map_lookup_elem(&l7_mesh_h2buf, &cpu);
	struct l7_hpack *d = bpf_map_lookup_elem(&l7_mesh_h2dec, &cpu);
	struct l7_req *req = bpf_map_lookup_elem(&l7_scratch, &zero);
	if (!buf || !d || !req)
		return l7_mesh_h2_pass(msg, c, &k, 0, 0, 0, 0, L7_H2_CONN_ERR(L7_H2_INTERNAL_ERROR));
	struct l7_mesh_h2 *st = bpf_map_lookup_elem(&l7_mesh_h2c, &k);
	if (!st) {   /* the first write: the state starts in the scan buffer (the stack is full) */
		_Static_assert(sizeof(*st) <= L7_H2_BUF, "staged in l7_h2_buf");
		struct l7_mesh_h2 *init = (struct l7_mesh_h2 *)buf;
		__builtin_memset(init, 0, sizeof(*init));
		l7_h2_conn_init(&init->c, L7_H2_C_CLIENT | L7_H2_C_HP_PENDING);
		init->c.stop = 0;   /* the scan stops at header blocks and errors only */
		bpf_map_update_elem(&l7_mesh_h2c, &k, init, BPF_ANY);
		st = bpf_map_lookup_elem(&l7_mesh_h2c, &k);
		if (!st)   /* no room: refused as a whole (GOAWAY) */
			return l7_mesh_h2_pass(msg, c, &k, 0, 0, 0, 0, L7_H2_CONN_ERR(L7_H2_REFUSED_STREAM));
		c->flags |= L7_MC_H2;
	}
	__u32 n = size < L7_H2_BUF ? size : L7_H2_BUF;
	l7_barrier_var(n);
	if (n == 0 || n > L7_H2_BUF || bpf_msg_pull_data(msg, 0, n, 0) ||
	    bpf_probe_read_kernel(buf, n, msg->data))
		return l7_mesh_h2_pass(msg, c, &k, 0, 0, 0, 0, L7_H2_CONN_ERR(L7_H2_INTERNAL_ERROR));

	struct l7_h2_ev *ev = &st->ev;   /* map memory: the stack is the policy's */
	__builtin_memset(ev, 0, sizeof(*ev));
	int rc = l7_h2_scan(&st->c, d, buf, n, ev);
	__u32 next = ev->next;
	if (rc == L7_H2_EV_HEADERS) {
		__u32 status = 0, slot = 0, stream = ev->f.stream;
		int err = l7_mesh_h2_decide(c, &k, st, d, req, &status, &slot);
		if (err && ((-err) & L7_H2_R_CONN))
			return l7_mesh_h2_pass(msg, c, &k, 0, 0, 0, stream, err);
		return l7_mesh_h2_pass(msg, c, &k, next, status, slot, stream, err);
	}
	if (rc < 0) {
		/* a stream error is about the frame at ev->off (the record ends with it); a
		 * connection error, or a block the kernel cannot take (SLOW), ends the connection */
		if ((-rc) & L7_H2_R_STREAM)
			return l7_mesh_h2_pass(msg, c, &k, ev->off + 9 + ev->f.len, 0, 0, ev->f.stream, rc);
		if ((-rc) & L7_H2_R_SLOW)
			rc = L7_H2_CONN_ERR(L7_H2_ENHANCE_YOUR_CALM);
		return l7_mesh_h2_pass(msg, c, &k, 0, 0, 0, ev->f.stream, rc);
	}
	/* EV_MORE or EV_LIMIT: a header block must be seen in one run (its fragments gather in
	 * per-CPU memory another run may reuse) */
	if (st->c.flags & L7_H2_C_BLOCK)
		return l7_mesh_h2_pass(msg, c, &k, 0, 0, 0, st->c.hb_stream, L7_H2_CONN_ERR(L7_H2_ENHANCE_YOUR_CALM));
	if (next)
		return l7_mesh_h2_pass(msg, c, &k, next, 0, 0, 0, 0);
	/* nothing whole yet: the start of a frame (or of the preface) ends this write */
	if (n != size || n >= L7_MESH_HOLD_BYTES)
		return l7_mesh_h2_pass(msg, c, &k, 0, 0, 0, 0, L7_H2_CONN_ERR(L7_H2_FRAME_SIZE_ERROR));
	if (bpf_map_update_elem(&l7_mesh_hold, &k, buf, BPF_ANY))
		return l7_mesh_h2_pass(msg, c, &k, 0, 0, 0, 0, L7_H2_CONN_ERR(L7_H2_INTERNAL_ERROR));
	struct l7_mesh_hold *hd = bpf_map_lookup_elem(&l7_mesh_hold, &k);
	if (!hd)
		return l7_mesh_h2_pass(msg, c, &k, 0, 0, 0, 0, L7_H2_CONN_ERR(L7_H2_INTERNAL_ERROR));
	hd->len = n;
	return l7_mesh_to_l7run(msg, c, &k, L7_MP_DISCARD, n, 0, 0, 0);
}

#endif
