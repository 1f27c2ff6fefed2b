/* Whether l7run can reach each upstream, as its connects find it (both modes): a failed connect
 * marks the address down, the first one that succeeds after marks it up again, and each change
 * is logged once, not on every retry or request. Run loop only. */
#include <arpa/inet.h>
#include <string.h>
#include "l7run.h"

/* Its row; a new one if it has none (-1: the table is full). */
static int find(struct health *h, const struct sockaddr_in *a)
{
	for (int i = 0; i < h->n; i++)
		if (h->seen[i].addr.sin_addr.s_addr == a->sin_addr.s_addr && h->seen[i].addr.sin_port == a->sin_port)
			return i;
	if (h->n == HEALTH_MAX)
		return -1;
	memset(&h->seen[h->n], 0, sizeof h->seen[h->n]);
	h->seen[h->n].addr = *a;
	return h->n++;
}

/* Run-time sets: passive health (endpoints.c). */
static void seen_rt(struct l7run *L, const struct cfg_endpoint *e, int ok)
{
	pthread_mutex_lock(&L->lock);   /* the metrics thread reads the ejection counts */
	int ejected = ep_seen(&L->env.ep, e, ok, now_ms());
	pthread_mutex_unlock(&L->lock);
	if (ejected && L->cur)
		stat_bump(L->cur->stats, L7_STAT_EJECTIONS);
}

void upstream_reset(struct l7run *L, const struct cfg_endpoint *e)
{
	seen_rt(L, e, 0);
}

void upstream_seen(struct l7run *L, const struct cfg_endpoint *e, int ok, const char *why)
{
	struct health *h = &L->health;
	char a[INET_ADDRSTRLEN] = "?";

	seen_rt(L, e, ok);
	int i = find(h, &e->addr);
	if (i < 0 || h->seen[i].down == !ok)
		return;
	h->seen[i].down = !ok;
	inet_ntop(AF_INET, &e->addr.sin_addr, a, sizeof a);
	if (!ok) {
		h->seen[i].since = now_ms();
		fprintf(stderr, "l7run: upstream %s (%s:%d) is down: %s; its requests are answered 502\n", e->name, a,
			ntohs(e->addr.sin_port), why);
	} else {
		fprintf(stderr, "l7run: upstream %s (%s:%d) is up again after %.1f s\n", e->name, a, ntohs(e->addr.sin_port),
			(now_ms() - h->seen[i].since) / 1000.0);
	}
}
