/* mutate.h: header mutations on an SK_MSG send path (gateway pool and client sockets, mesh
 * client and backend sockets). A head's mutations are decided in full before it is sent (a
 * l7_decision, or a record made from one): lines to add before its final CRLF, and whole
 * field lines to cut out, ascending. One sendmsg may carry only part of a head (the gateway's
 * redirects are sent skb piece by skb piece), or a head may start inside it, so an edit is
 * given in the coordinates of the head's own bytes and `shift`/`size` say which of them this
 * message holds; each call does the part that lies in its message.
 *
 * Order: the lines are pushed first (they go after every field line), then the cut lines are
 * popped from the last to the first, so no edit moves an offset a later one uses. A failed
 * push or pop returns -1 and the caller drops the message (SK_DROP): nothing half-edited is
 * sent (in gateway mode the error closes the connection, in mesh mode the client's socket gets
 * EACCES). */
#ifndef L7_BPF_MUTATE_H
#define L7_BPF_MUTATE_H

#include <linux/bpf.h>
#include "compat.h"
#include "l7/dataplane.h"

extern const __u32 l7_resp_mut;   /* 1 if any rule mutates a response (l7/abi.h) */
extern const __u16 l7_mut_off[];
extern const __u16 l7_mut_len[];
extern const char l7_mut_bytes[];

#define L7_EDIT_FAILED (-(1 << 30))

/* The lines set[0..n) (l7_mut_* indices) into buf, one after the other, one line per bpf_loop
 * step (a loop with a bpf_probe_read per line does not unroll). Returns their bytes. */
struct l7_stage_ctx {
	__u8 *buf;
	const __u8 *set;
	__u32 n, total;
};

L7_LOOP_CB(l7_stage_cb)
{
	struct l7_stage_ctx *x = l7_ctx;
	__u32 i = (__u32)l7_idx, total = x->total;
	__u16 off, len;

	if (i >= x->n || i >= L7_MAX_SET)
		return 1;
	__u32 m = x->set[i & (L7_MAX_SET - 1)] & (L7_MAX_MUT - 1);
	/* plain loads from the object's constants (the index is masked); only the line's bytes,
	 * of a length the verifier cannot bound, need the helper */
	off = l7_mut_off[m];
	len = l7_mut_len[m];
	/* ir_lower bounds the lines of one message by L7_MAX_INSERT: never stops early */
	if (len == 0 || total + len > L7_MAX_INSERT || off >= L7_MUT_BYTES) {
		x->total = L7_MAX_INSERT + 1;   /* refused below: no partial set of lines */
		return 1;
	}
	bpf_probe_read_kernel(&x->buf[total & (L7_MAX_INSERT - 1)], len & (L7_MAX_INSERT - 1), &l7_mut_bytes[off]);
	x->total = total + len;
	return 0;
}

static __always_inline __u32 l7_mut_stage(__u8 *buf, const __u8 *set, __u32 n)
{
	struct l7_stage_ctx x = { .buf = buf, .set = set, .n = n };

	l7_loop(L7_MAX_SET, l7_stage_cb, &x);
	return x.total > L7_MAX_INSERT ? 0 : x.total;
}

/* Copying bytes into the message (the staged lines, or a mesh client's held head start), 8 a
 * step in a bpf_loop callback: a plain loop of L7_MAX_INSERT single-byte stores is walked by
 * the verifier byte by byte, once per path that reaches it (it was over half of the mesh
 * program's 1M-instruction budget). */
struct l7_fill_ctx {
	struct sk_msg_md *msg;
	const __u8 *src;
	__u32 len;
};

L7_LOOP_CB(l7_fill_cb)
{
	struct l7_fill_ctx *x = l7_ctx;
	__u32 i = ((__u32)l7_idx * 8) & (L7_MAX_HEAD - 1);   /* src: L7_MAX_HEAD + slack */
	__u8 *d = (__u8 *)(long)x->msg->data, *e = (__u8 *)(long)x->msg->data_end;

	if ((__u32)l7_idx * 8 >= x->len)
		return 1;
	__u8 *p = d + i;
	if (i + 8 <= x->len && p + 8 <= e) {
		l7_st64(p, l7_ld64(x->src + i));
		return 0;
	}
	L7_UNROLL
	for (__u32 k = 0; k < 8; k++) {   /* the last few bytes */
		if (i + k >= x->len || p + k + 1 > e)
			break;
		p[k] = x->src[i + k];
	}
	return 1;
}

/* The field lines a decision cuts from a parsed request (bit i of `del`: wanted header i), in
 * the order they came, into out[]. Returns how many. Branch-free (the parser leaves unused
 * wline_hdr entries at 31, a bit no decision sets): a data-dependent branch per entry made the
 * verifier walk every combination. Every entry is stored at out[k], the one taken and the
 * others writing back what is there: once out[] is full (k = L7_MAX_SET, masked to 0) the
 * entries not taken must not overwrite the first (found by the Mutate[c=1] benchmark, eight
 * lines cut). Spans are stored as one 32-bit word each. */
static __always_inline __u32 l7_cut_lines(const struct l7_req *req, __u32 del, struct l7_span *out)
{
	_Static_assert(sizeof(struct l7_span) == sizeof(__u32), "a span is one word");
	__u32 k = 0, *o = (__u32 *)out;

	L7_UNROLL
	for (int i = 0; i < L7_MAX_WANTED; i++) {
		__u32 take = (del >> (req->wline_hdr[i] & 31)) & 1, at = l7_mask(k, L7_MAX_SET - 1);
		__u32 keep = take - 1;   /* all ones when not taken */
		l7_barrier_var(keep);    /* arithmetic, not a select: no branch per entry */
		o[at] = (*(const __u32 *)&req->wline[i] & ~keep) | (o[at] & keep);
		k += take;
	}
	return k < L7_MAX_SET ? k : L7_MAX_SET;   /* ir_lower: never more than L7_MAX_SET */
}

/* Cutting lines, one per bpf_loop step (from the last to the first), for the same reason. */
struct l7_cut_ctx {
	struct sk_msg_md *msg;
	const struct l7_span *del;
	__u32 n, size;
	__s32 shift;
	int delta;
};

L7_LOOP_CB(l7_cut_cb)
{
	struct l7_cut_ctx *x = l7_ctx;
	__u32 i = (__u32)l7_idx;

	if (i >= x->n)
		return 1;
	const struct l7_span *sp = &x->del[l7_mask(x->n - 1 - i, L7_MAX_SET - 1)];
	__s64 s = sp->off, e = s + sp->len, from = x->shift, to = from + x->size;
	__s64 lo = s > from ? s : from, hi = e < to ? e : to;
	if (lo >= hi)
		return 0;   /* not in this message */
	if (bpf_msg_pop_data(x->msg, (__u32)(lo - from), (__u32)(hi - lo), 0)) {
		x->delta = L7_EDIT_FAILED;
		return 1;
	}
	x->delta -= (int)(hi - lo);
	return 0;
}

/* What one message's edit is, in the scratch map value after the staged lines (a global
 * function takes it from there: its arguments are the context and one pointer). */
struct l7_edit {
	__u32 ins;                        /* head offset of the lines to add */
	__u32 n_set, n_del;
	__u32 cut_mask;                   /* not 0: del[] is the request's lines of these wanted
	                                   * headers (scratch is the parsed request; l7_cut_lines) */
	__s32 shift;                      /* head offset h is at offset h - shift of this message, */
	__u32 size;                       /* which holds head offsets [shift, shift + size) */
	__u8 set[L7_MAX_SET];             /* l7_mut_* indices */
	struct l7_span del[L7_MAX_SET];   /* head offsets, ascending */
};

static __always_inline struct l7_edit *l7_edit_of(struct l7_req *scratch)
{
	_Static_assert(L7_MAX_INSERT + sizeof(struct l7_edit) <= L7_MAX_HEAD, "the edit follows the staged lines");
	return (struct l7_edit *)&scratch->buf[L7_MAX_INSERT];
}

/* Edit one message as l7_edit_of(scratch) says: add its lines at `ins` if that lies in this
 * message, cut the parts of its lines that lie here. Returns the bytes added (negative: cut),
 * or L7_EDIT_FAILED.
 *
 * A global function: the kernel verifies it once, on its own. Inlined, it was walked again for
 * every path through the policy that reaches it (with a JWT policy, ~860 of them: a third of
 * the mesh program's 1M budget for a RemoveHeader). */
__attribute__((noinline)) int l7g_msg_edit(struct sk_msg_md *msg, struct l7_req *scratch)
{
	if (!msg || !scratch)
		return L7_EDIT_FAILED;
	struct l7_edit *e = l7_edit_of(scratch);
	if (e->cut_mask)
		e->n_del = l7_cut_lines(scratch, e->cut_mask, e->del);
	struct l7_cut_ctx cx = { .msg = msg, .del = e->del, .n = e->n_del, .shift = e->shift, .size = e->size };
	__s64 ins = e->ins, from = e->shift;

	/* A message that was corked keeps the cork size asked for last time (msg->cork_bytes is not
	 * reset between runs); if cutting makes it shorter than that, the kernel corks it again
	 * and it waits for bytes that never come. Measured with a head written 5 bytes at a time. */
	bpf_msg_cork_bytes(msg, 0);

	if (e->n_set && ins >= from && ins < from + e->size) {
		__u32 total = l7_mut_stage(scratch->buf, e->set, e->n_set), at = (__u32)(ins - from);
		if (total) {
			if (bpf_msg_push_data(msg, at, total, 0) || bpf_msg_pull_data(msg, at, at + total, 0))
				return L7_EDIT_FAILED;
			struct l7_fill_ctx fc = { .msg = msg, .src = scratch->buf, .len = total };
			l7_loop(L7_MAX_INSERT / 8, l7_fill_cb, &fc);
			cx.delta = (int)total;
		}
	}
	if (e->n_del)
		l7_loop(L7_MAX_SET, l7_cut_cb, &cx);
	if (e->n_del || cx.delta) {
		/* Every cut and every push splits a scatterlist element: with a few heads of eight
		 * cuts, or nine heads with a line added, in one message the ring wraps, and an
		 * ingress redirect of it delivered only its first elements (measured, mesh mode: the
		 * third pipelined request lost its tail; the ninth of 16 requests with a line added
		 * lost). One element again for the edited head's part in this message; after a push
		 * only when bytes follow the head in it (the next requests), so a write of one
		 * request pays no copy. */
		__s64 lo = from < 0 ? -from : 0, hi = ins + 2 - from + cx.delta;
		__s64 end = (__s64)e->size + cx.delta;
		if (hi > end)
			hi = end;
		if (cx.delta != L7_EDIT_FAILED && lo < hi && (e->n_del || (__s64)msg->size > hi))
			bpf_msg_pull_data(msg, (__u32)lo, (__u32)hi, 0);
	}
	return cx.delta;
}

#endif
