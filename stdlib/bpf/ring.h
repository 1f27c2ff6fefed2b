/* ring.h: builds a Ketama ring (balance.h says what the points are) natively, for the two
 * builders of the one ring: l7c for endpoints compiled in (ir/balance.c), l7run for the sets it
 * fills at run time (runtime/endpoints.c). Not for BPF. */
#ifndef L7_BPF_RING_H
#define L7_BPF_RING_H

#include <stdio.h>
#include <stdlib.h>
#include "balance.h"

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

#endif /* L7_BPF_RING_H */
