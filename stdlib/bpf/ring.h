/* ring.h: builds a Ketama ring (balance.h says what the points are) and the weighted turns
 * natively, for every builder of them: l7c for endpoints compiled in (ir/balance.c), l7run for
 * the sets it fills at run time (runtime/endpoints.c), and l7c --eval, which builds the table
 * l7run would from the same --endpoints file (driver/l7c.c). Not for BPF. */
#ifndef L7_BPF_RING_H
#define L7_BPF_RING_H

#include <stdio.h>
#include <stdlib.h>
#include "balance.h"
#include "l7/dataplane.h"

struct l7_ring_ep {
	__u32 ip;          /* host byte order */
	__u32 port;
	__u32 weight;      /* 1-255 */
	__u32 slot;        /* what the ring's points of this endpoint say */
};

struct l7_ring_point { __u32 h; int ep; };

static inline int l7_ring_point_cmp(const void *a, const void *b)
{
	const struct l7_ring_point *x = a, *y = b;
	if (x->h != y->h)
		return x->h < y->h ? -1 : 1;
	return x->ep - y->ep;   /* equal hashes: the earlier endpoint first, deterministically */
}

static inline unsigned l7_ring_gcd(unsigned a, unsigned b)
{
	while (b) {
		unsigned r = a % b;
		a = b;
		b = r;
	}
	return a;
}

/* The points of n endpoints (n >= 1), sorted, in a ring of at most 1 << max_log2 entries (one
 * kept for padding). Returns the points (malloc'd, *npts of them), NULL if out of memory. */
static inline struct l7_ring_point *l7_ring_points(const struct l7_ring_ep *e, int n, unsigned max_log2, int *npts)
{
	unsigned total = 0, g = 0, max = 1u << max_log2;
	for (int i = 0; i < n; i++) {
		total += e[i].weight;
		g = l7_ring_gcd(g, e[i].weight);
	}
	int scale = L7_LB_POINTS * (total / g) > max - 1;   /* keep one padding point */
	struct l7_ring_point *pts = malloc(sizeof(*pts) * max);
	int k = 0;
	for (int i = 0; pts && i < n; i++) {
		unsigned m = scale ? (max - 1) * e[i].weight / total : L7_LB_POINTS * (e[i].weight / g);
		m = m ? m : 1;
		for (unsigned j = 0; j < m && k < (int)max - 1; j++) {
			char key[48];
			int len = snprintf(key, sizeof(key), "%u.%u.%u.%u:%u-%u", e[i].ip >> 24, e[i].ip >> 16 & 255,
					   e[i].ip >> 8 & 255, e[i].ip & 255, e[i].port, j);
			pts[k++] = (struct l7_ring_point){ l7_lb_hash((const __u8 *)key, 0, (__u32)len), i };
		}
	}
	if (pts)
		qsort(pts, (size_t)k, sizeof(*pts), l7_ring_point_cmp);
	*npts = k;
	return pts;
}

/* Fills ring and slot, size entries (a power of two above npts): the points, then padding
 * points 0xffffffff of the first point's endpoint. */
static inline void l7_ring_fill(const struct l7_ring_ep *e, const struct l7_ring_point *pts, int npts, int size, __u32 *ring,
				__u8 *slot)
{
	for (int i = 0; i < size; i++) {
		const struct l7_ring_point *pt = &pts[i < npts ? i : 0];
		ring[i] = i < npts ? pt->h : 0xffffffffu;
		slot[i] = (__u8)e[pt->ep].slot;
	}
}

/* Smooth weighted round robin (nginx): each turn every endpoint gains its weight, the one
 * with the most (the first on ties) takes the turn and pays the total. Over sum(weights)
 * turns each endpoint gets exactly its weight, spread out (2:1 is A B A, not A A B). Writes
 * sum(weights) slots to turns (room for n * 255); returns how many. */
static inline int l7_ring_turns(const struct l7_ring_ep *e, int n, __u8 *turns)
{
	int total = 0, cur[L7_MAX_UPSTREAMS] = { 0 };
	for (int i = 0; i < n && i < L7_MAX_UPSTREAMS; i++)
		total += (int)e[i].weight;
	for (int k = 0; k < total; k++) {
		int best = 0;
		for (int i = 0; i < n && i < L7_MAX_UPSTREAMS; i++) {
			cur[i] += (int)e[i].weight;
			if (cur[i] > cur[best])
				best = i;
		}
		cur[best] -= total;
		turns[k] = (__u8)e[best].slot;
	}
	return total;
}

/* The table of a run-time set (l7/dataplane.h) over its n <= L7_RT_SLOTS endpoints in force:
 * the ring (hash) or the turns; no endpoint leaves npoints and nturns 0 (the 503). -1: out of
 * memory (t says no endpoint). */
static inline int l7_ring_tab(struct l7_lb_tab *t, const struct l7_ring_ep *e, int n, int hash)
{
	t->nturns = t->npoints = 0;
	if (n <= 0)
		return 0;
	if (!hash) {
		t->nturns = (__u32)l7_ring_turns(e, n, t->turns);
		return 0;
	}
	int npts;
	struct l7_ring_point *pts = l7_ring_points(e, n, L7_LB_DRING_LOG2, &npts);
	if (!pts)
		return -1;
	l7_ring_fill(e, pts, npts, L7_LB_DRING, t->ring, t->ring_slot);
	t->npoints = (__u32)npts;
	free(pts);
	return 0;
}

#endif /* L7_BPF_RING_H */
