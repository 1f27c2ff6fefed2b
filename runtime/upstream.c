/* Whether l7run can reach each upstream, as its connects find it (both modes): a failed connect
 * marks the address down, the first one that succeeds after marks it up again, and each change
 * is logged once, not on every retry or request. Run loop only. */
#include <arpa/inet.h>
#include <string.h>
#include "l7run.h"

#define MAX_SEEN 256   /* addresses: upstreams of every loaded version */

static struct {
	struct sockaddr_in addr;
	int down;
	uint64_t since;   /* ms: when it went down */
} seen[MAX_SEEN];
static int n_seen;

/* Its row; with add, a new one if it has none (-1: none, or the table is full). */
static int find(const struct sockaddr_in *a, int add)
{
	for (int i = 0; i < n_seen; i++)
		if (seen[i].addr.sin_addr.s_addr == a->sin_addr.s_addr && seen[i].addr.sin_port == a->sin_port)
			return i;
	if (!add || n_seen == MAX_SEEN)
		return -1;
	seen[n_seen].addr = *a;
	return n_seen++;
}

void upstream_seen(const struct cfg_endpoint *e, int ok, const char *why)
{
	int i = find(&e->addr, 1);
	char a[INET_ADDRSTRLEN] = "?";

	if (i < 0 || seen[i].down == !ok)
		return;
	seen[i].down = !ok;
	inet_ntop(AF_INET, &e->addr.sin_addr, a, sizeof a);
	if (!ok) {
		seen[i].since = now_ms();
		fprintf(stderr, "l7run: upstream %s (%s:%d) is down: %s; its requests are answered 502\n", e->name, a,
			ntohs(e->addr.sin_port), why);
	} else {
		fprintf(stderr, "l7run: upstream %s (%s:%d) is up again after %.1f s\n", e->name, a, ntohs(e->addr.sin_port),
			(now_ms() - seen[i].since) / 1000.0);
	}
}

int upstream_down(const struct cfg_endpoint *e)
{
	int i = find(&e->addr, 0);

	return i >= 0 && seen[i].down;
}
