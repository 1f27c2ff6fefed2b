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

/* Weighted turns (ring.h, the same code as l7run's for the sets it fills at run time). */
static void build_turns(struct ir_program *p, struct ir_target *t)
{
	assert(t->nendpoints <= L7_MAX_UPSTREAMS);   /* ir_balance_build makes sets past it IR_LB_ONE */
	struct l7_ring_ep e[L7_MAX_UPSTREAMS];
	int total = 0;
	for (int i = 0; i < t->nendpoints; i++) {
		e[i] = (struct l7_ring_ep){ t->endpoints[i].ip, t->endpoints[i].port, t->endpoints[i].weight, (__u32)(t->slot + i) };
		total += (int)t->endpoints[i].weight;
	}
	t->turns = l7_alloc(&p->arena, (size_t)total);
	t->nturns = l7_ring_turns(e, t->nendpoints, t->turns);
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

/* The hash of the request's key for t's ring, as the kernel computes it (stdlib/bpf/policy.c). */
static __u32 key_hash(const struct ir_target *t, const struct l7_req *req)
{
	const struct l7_span *s = t->key_field == IR_F_PATH ? &req->path
				: t->key_field == IR_F_HOST ? &req->host
				: t->key_field == IR_F_HEADER ? &req->hdr[t->key_header] : NULL;
	if (s)
		return (size_t)s->off + s->len <= sizeof(req->buf) ? l7_lb_hash(req->buf, s->off, s->len) : l7_lb_hash(req->buf, 0, 0);
	return l7_lb_hash_addr(req->src_ip4);
}

int ir_balance_pick(const struct ir_program *p, const struct ir_target *t, const struct l7_req *req)
{
	(void)p;
	if (t->balance == IR_LB_ROUND_ROBIN || t->rt_kind != IR_RT_NONE)
		return -1;   /* per request, or known only at run time */
	if (t->balance != IR_LB_HASH)
		return t->slot;
	return t->ring_slot[l7_ketama_find(t->ring, (__u32)t->ring_log2, key_hash(t, req))];
}

int ir_balance_pick_tab(const struct ir_target *t, const struct l7_lb_tab *tab, const struct l7_req *req)
{
	if (t->balance == IR_LB_HASH)   /* l7_lb_pick_rt's choices, over the table l7run would write */
		return tab->npoints ? tab->ring_slot[l7_ketama_find(tab->ring, L7_LB_DRING_LOG2, key_hash(t, req))] : (int)L7_NO_SLOT;
	return tab->nturns ? -1 : (int)L7_NO_SLOT;
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
