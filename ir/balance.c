/* Load balancing at compile time: backend slots, Ketama rings, round-robin turns.
 *
 * Every endpoint of every upstream (and the fallback proxy) becomes a backend slot of its own,
 * in declaration order: the data plane and l7run already keep one pool per slot, so a set of
 * endpoints costs them nothing new. A decision names a slot; which slot of a set is what the
 * tables built here decide (stdlib/bpf/balance.h describes the ring). */
#include "ir.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "balance.h"   /* stdlib/bpf, built natively: the kernel's own hash and search */
#include "ring.h"
#include "arena.h"
#include "diag.h"
#include "l7/abi.h"
#include "l7/dataplane.h"

/* Points per endpoint: stdlib/bpf/balance.h says how many and why; ring.h builds them. */
static void build_ring(struct ir_program *p, struct ir_target *t)
{
	struct l7_ring_ep *e = calloc((size_t)t->nendpoints, sizeof(*e));
	for (int i = 0; i < t->nendpoints; i++)
		e[i] = (struct l7_ring_ep){ t->endpoints[i].ip, t->endpoints[i].port, t->endpoints[i].weight,
					    (__u32)(t->slot + i) };
	int npts;
	struct l7_ring_point *pts = l7_ring_points(e, t->nendpoints, L7_LB_RING_LOG2, &npts);
	assert(pts);
	int log2 = 0;
	while ((1 << log2) <= npts)   /* strictly more: at least one padding point */
		log2++;
	int size = 1 << log2;
	t->ring_log2 = log2;
	t->ring_points = npts;
	t->ring = l7_alloc(&p->arena, sizeof(*t->ring) * (size_t)size);
	t->ring_slot = l7_alloc(&p->arena, (size_t)size);
	l7_ring_fill(e, pts, npts, size, t->ring, t->ring_slot);
	free(pts);
	free(e);
}

/* Smooth weighted round robin (nginx): each turn every endpoint gains its weight, the one
 * with the most (the first on ties) takes the turn and pays the total. Over sum(weights)
 * turns each endpoint gets exactly its weight, spread out (2:1 is A B A, not A A B). */
static void build_turns(struct ir_program *p, struct ir_target *t)
{
	assert(t->nendpoints <= L7_MAX_UPSTREAMS);   /* cur[] (ir_balance_build makes sets past it IR_LB_ONE) */
	int total = 0, cur[L7_MAX_UPSTREAMS] = { 0 };
	for (int i = 0; i < t->nendpoints; i++)
		total += (int)t->endpoints[i].weight;
	t->nturns = total;
	t->turns = l7_alloc(&p->arena, (size_t)total);
	for (int k = 0; k < total; k++) {
		int best = 0;
		for (int i = 0; i < t->nendpoints; i++) {
			cur[i] += (int)t->endpoints[i].weight;
			if (cur[i] > cur[best])
				best = i;
		}
		cur[best] -= total;
		t->turns[k] = (unsigned char)(t->slot + best);
	}
}

void ir_balance_build(struct ir_program *p)
{
	int slot = 0;
	for (int i = 0; i < p->nupstreams; i++) {
		struct ir_target *t = &p->upstreams[i];
		t->slot = slot;
		slot += t->nendpoints;
		if (t->nendpoints <= 1 || slot > L7_MAX_UPSTREAMS) {
			t->balance = IR_LB_ONE;
			continue;
		}
		if (t->rt_kind != IR_RT_NONE)
			continue;   /* l7run builds its tables (runtime/endpoints.c) */
		if (t->balance == IR_LB_HASH)
			build_ring(p, t);
		else
			build_turns(p, t);
	}
	p->nslots = slot;
}

int ir_balance_pick(const struct ir_program *p, const struct ir_target *t, const struct l7_req *req)
{
	(void)p;
	if (t->balance == IR_LB_ROUND_ROBIN || t->rt_kind != IR_RT_NONE)
		return -1;   /* per request, or known only at run time */
	if (t->balance != IR_LB_HASH)
		return t->slot;
	__u32 h;
	const struct l7_span *s = t->key_field == IR_F_PATH ? &req->path
				: t->key_field == IR_F_HOST ? &req->host
				: t->key_field == IR_F_HEADER ? &req->hdr[t->key_header] : NULL;
	if (s)
		h = (size_t)s->off + s->len <= sizeof(req->buf) ? l7_lb_hash(req->buf, s->off, s->len) : l7_lb_hash(req->buf, 0, 0);
	else
		h = l7_lb_hash_addr(req->src_ip4);
	return t->ring_slot[l7_ketama_find(t->ring, (__u32)t->ring_log2, h)];
}

void ir_balance_shares(const struct ir_target *t, double *out)
{
	for (int i = 0; i < t->nendpoints; i++)
		out[i] = 0;
	if (t->rt_kind != IR_RT_NONE)
		return;   /* known at run time */
	if (t->balance != IR_LB_HASH) {
		for (int i = 0; i < t->nendpoints; i++)
			out[i] = t->balance == IR_LB_ONE ? (i == 0) : 0;
		for (int k = 0; k < t->nturns; k++)
			out[t->turns[k] - t->slot] += 1.0 / t->nturns;
		return;
	}
	/* point i owns the arc (point i-1, point i]; the first also owns the wrap past the last */
	int n = t->ring_points;
	for (int i = 0; i < n; i++) {
		double lo = i ? (double)t->ring[i - 1] : (double)t->ring[n - 1] - 4294967296.0;
		out[t->ring_slot[i] - t->slot] += ((double)t->ring[i] - lo) / 4294967296.0;
	}
}
