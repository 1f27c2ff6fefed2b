/* Upstreams whose endpoints l7run finds at run time: `upstream api = "NAME:PORT";` (a DNS name,
 * resolved at load and again every --resolve-every seconds) and `upstream api = endpoints("api");`
 * (the lines `api ADDR:PORT [weight W]` of --endpoints FILE, re-read when it changes, checked
 * every second, like --identities).
 *
 * Each such upstream has L7_RT_SLOTS backend slots (the manifest's RUNTIME record says which)
 * and two tables in l7_lb_tab (l7/dataplane.h): the data plane picks over the half l7_lb_gen
 * names. A change fills the other half and flips the gen: no lookup sees a half-written table
 * and no recompilation, no gap in enforcement. Slots:
 *   free     no address; never in a table
 *   live     an endpoint of the set, in the table unless ejected (passive health, below)
 *   retired  its endpoint left the set: out of the table, so it takes no new request, but the
 *            connections to it finish what they carry; the mode (gateway.c, mesh_pool.c)
 *            closes its pool sockets once idle and says when none is left (ep_drained): free
 *            again.
 * A mode whose pools are eager (mesh: the kernel redirects only into connections l7run opened
 * ahead, env->eager) also keeps an endpoint out while its pool holds no usable connection
 * (cfg_endpoint.pooled, counted by pool.c): a new endpoint enters once its pool has filled, one
 * whose connections all ended leaves at once, before any connect has failed.
 * An endpoint keeps its slot while it stays in the set, so its pool connections stay too, and
 * a Ketama ring point belongs to the endpoint (its address), not to its slot: a change moves
 * only the keys of the endpoints that changed (stdlib/bpf/balance.h).
 *
 * Passive health (Envoy's outlier detection, for connects): the pools report what their
 * connects find (upstream.c, ep_seen); an endpoint whose connect is refused, or whose
 * connection ends with a response owed, is ejected from every version's table of its set for
 * EJECT_BASE_MS, doubled on each ejection in a row up to EJECT_MAX_MS, then put back; a connect
 * that succeeds ends the row. Counted per endpoint (l7_endpoint_ejections_total).
 *
 * The loader thread fills a new version's tables from the file and the resolver without the
 * health (touches only that version); the loop applies the health when it is published.
 *
 * Sets written in the policy (`[A:P, B:P] balance ...`, gateway mode) have the same health,
 * by the same rows: their rings and turns are constants of the object, so an endpoint out of
 * its set is a bit of l7_lb_down instead (bit s: backend slot s), which the kernel's pick
 * skips (stdlib/bpf/policy.c: on to the next point or turn of an endpoint that is up). */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "policy.h"
#include "epfile.h"
#include "ring.h"

#define EJECT_BASE_MS 1000
#define EJECT_MAX_MS  30000
#define FLIP_GAP_US   2000   /* at least this long between two writes of one set's tables */

enum { SLOT_FREE, SLOT_LIVE, SLOT_RETIRED };

struct rtset {
	const struct l7m_runtime *r;
	char name[L7M_NAME_MAX + 1];
	int state[L7_RT_SLOTS];
	unsigned weight[L7_RT_SLOTS];
	uint32_t in_table;       /* bit i: slot i is in the table in force */
	uint32_t half;           /* the half l7_lb_gen names */
	uint64_t written_us;     /* when a half was last written */
	int full_said;
};

struct litset {             /* a set written in the policy: slots first .. first + n - 1 */
	const char *name;
	unsigned first, n;
};

struct rtsets {
	struct config *cfg;
	struct rtset set[L7_MAX_RT_SETS];
	int n;
	struct litset lit[L7_MAX_UPSTREAMS / 2];
	int nlit;
	int tab_fd, gen_fd, down_fd;
	uint32_t down;           /* l7_lb_down as last written */
	struct stat seen;        /* the file as this version last read it */
	struct ep_env *env;
	struct rtsets *next;     /* the env's watched list */
	struct l7_lb_tab tab;    /* scratch: the table being built */
};

int ep_file_arg(struct ep_env *env, const char *path)
{
	if (!path[0] || strlen(path) >= sizeof env->file)
		return -1;
	snprintf(env->file, sizeof env->file, "%s", path);
	return 0;
}

int ep_resolve_arg(struct ep_env *env, const char *s)
{
	char *end;
	long v = strtol(s, &end, 10);
	if (!*s || *end || v < 1 || v > 86400)
		return -1;
	env->resolve_every = (unsigned)v;
	return 0;
}

static int same_addr(const struct sockaddr_in *a, const struct sockaddr_in *b)
{
	return a->sin_addr.s_addr == b->sin_addr.s_addr && a->sin_port == b->sin_port;
}

/* The --endpoints file's endpoints of set `name` (none without a file); -1 if the file does
 * not parse (why on stderr, once per read). The parser is l7c --eval's too (support/epfile.c). */
static int read_file(const char *path, const char *name, struct l7_eps *out, int quiet)
{
	char why[512];
	size_t len;
	char *text = l7_epfile_load(path, &len, why, sizeof why);
	struct l7_epfile_err err;
	int rc = text ? l7_epfile_parse(text, len, name, out, &err) : -1;

	if (rc && !quiet && text)
		fprintf(stderr, "l7run: %s:%u:%u: %s\n", path, err.line, err.col, err.msg);
	else if (rc && !quiet)
		fprintf(stderr, "l7run: --endpoints %s\n", why);
	free(text);
	return rc;
}

/* What the set's source gives now; -1 (the set keeps what it has) if it cannot say. */
static int source_of(const struct ep_env *env, const struct rtset *s, struct l7_eps *out, int quiet)
{
	char err[512];

	out->n = out->truncated = 0;
	if (s->r->source == L7M_RT_DNS) {
		if (l7_ep_resolve(s->r->name.s, s->r->port, out, err, sizeof err)) {
			if (!quiet)
				fprintf(stderr, "l7run: upstream %s: %s (the endpoints in force stay)\n", s->name, err);
			return -1;
		}
		return 0;
	}
	return env->file[0] ? read_file(env->file, s->r->name.s, out, quiet) : 0;
}

static const struct ep_health *health_of(const struct ep_env *env, const char *set, const struct sockaddr_in *a)
{
	for (int i = 0; i < env->n_health; i++)
		if (same_addr(&env->health[i].addr, a) && !strcmp(env->health[i].upstream, set))
			return &env->health[i];
	return NULL;
}

/* Out of its set: ejected by passive health, or down by the active checks. */
static int ejected(const struct ep_env *env, const char *set, const struct sockaddr_in *a, int use_health)
{
	const struct ep_health *h = use_health ? health_of(env, set, a) : NULL;
	return h && (h->ejected || h->down);
}

/* Out of the table: its health, or (eager pools) no connection of its pool to redirect into. */
static int out_of_set(const struct ep_env *env, const char *set, const struct cfg_endpoint *e, int use_health)
{
	return ejected(env, set, &e->addr, use_health) || (use_health && env->eager && !e->pooled);
}

/* A row some published version's set still holds the endpoint of (live or draining). */
static int row_in_use(const struct ep_env *env, const struct ep_health *h)
{
	for (const struct rtsets *d = env->watched; d; d = d->next)
		for (int i = 0; i < d->nlit; i++)
			for (unsigned k = 0; k < d->lit[i].n && !strcmp(d->lit[i].name, h->upstream); k++)
				if (same_addr(&d->cfg->upstream[d->lit[i].first + k].addr, &h->addr))
					return 1;
	for (const struct rtsets *d = env->watched; d; d = d->next)
		for (int i = 0; i < d->n; i++)
			for (int k = 0; k < L7_RT_SLOTS && !strcmp(d->set[i].name, h->upstream); k++)
				if (d->set[i].state[k] != SLOT_FREE && same_addr(&d->cfg->upstream[d->set[i].r->slot + (unsigned)k].addr, &h->addr))
					return 1;
	return 0;
}

/* The row of an endpoint of a set; a new one if it has none, in place of the row of an
 * endpoint no set holds any more when the table is full (endpoints come and go: pods),
 * NULL if every row is in use. */
static struct ep_health *health_row(struct ep_env *env, const char *set, const struct sockaddr_in *a)
{
	struct ep_health *h = (struct ep_health *)health_of(env, set, a);
	if (h)
		return h;
	for (int i = 0; env->n_health == EP_HEALTH_MAX && !h && i < env->n_health; i++)
		h = row_in_use(env, &env->health[i]) ? NULL : &env->health[i];
	if (!h && env->n_health == EP_HEALTH_MAX)
		return NULL;
	if (!h)
		h = &env->health[env->n_health++];
	memset(h, 0, sizeof *h);
	snprintf(h->upstream, sizeof h->upstream, "%s", set);
	h->addr = *a;
	return h;
}

/* The ring or the turns (ring.h, as l7c --eval builds them) of the live slots. */
static void build(struct rtsets *d, struct rtset *s, int use_health)
{
	struct l7_ring_ep e[L7_RT_SLOTS];
	int n = 0;
	const struct cfg_endpoint *up = &d->cfg->upstream[s->r->slot];

	/* eager pools: while no endpoint of the set is in force (the new ones' pools still filling),
	 * those that left and still have connections stay (make before break): a set whose only
	 * endpoint moved is never empty for a moment */
	for (int pass = 0; pass < 2 && !n; pass++) {
		int want = pass ? SLOT_RETIRED : SLOT_LIVE;
		if (pass && !(use_health && d->env->eager))
			break;
		s->in_table = 0;
		for (int i = 0; i < L7_RT_SLOTS; i++)
			if (s->state[i] == want && !out_of_set(d->env, s->name, &up[i], use_health)) {
				e[n++] = (struct l7_ring_ep){ ntohl(up[i].addr.sin_addr.s_addr), ntohs(up[i].addr.sin_port),
							      s->weight[i], s->r->slot + (unsigned)i };
				s->in_table |= 1u << i;
			}
	}
	l7_ring_tab(&d->tab, e, n, s->r->balance == L7M_RT_HASH);
}

/* Write the half not in force, then name it. */
static int publish_table(struct rtsets *d, struct rtset *s, int idx)
{
	uint64_t now = now_us();
	if (s->written_us && now - s->written_us < FLIP_GAP_US)
		usleep((useconds_t)(FLIP_GAP_US - (now - s->written_us)));   /* a lookup of the old half is long over */
	uint32_t half = s->half ^ 1, key = 2 * (uint32_t)idx + half;
	if (bpf_map_update_elem(d->tab_fd, &key, &d->tab, BPF_ANY) ||
	    bpf_map_update_elem(d->gen_fd, &(uint32_t){ (uint32_t)idx }, &half, BPF_ANY))
		return -1;
	s->half = half;
	s->written_us = now_us();
	return 0;
}

/* Give the set exactly the endpoints of `want`, keeping the slots of those it has. */
static int apply(struct rtsets *d, int idx, const struct l7_eps *want, int use_health, int force)
{
	struct rtset *s = &d->set[idx];
	struct cfg_endpoint *up = &d->cfg->upstream[s->r->slot];
	int changed = 0;

	for (int i = 0; i < L7_RT_SLOTS; i++) {
		if (s->state[i] == SLOT_FREE)
			continue;
		int k = -1;
		for (int j = 0; j < want->n && k < 0; j++)
			k = same_addr(&want->e[j].addr, &up[i].addr) ? j : -1;
		int st = k >= 0 ? SLOT_LIVE : SLOT_RETIRED;
		unsigned w = k >= 0 ? want->e[k].weight : s->weight[i];
		changed |= st != s->state[i] || w != s->weight[i];
		s->state[i] = st;
		s->weight[i] = w;
		up[i].draining = st == SLOT_RETIRED;
	}
	for (int j = 0; j < want->n; j++) {
		int have = 0, free_slot = -1;
		for (int i = 0; i < L7_RT_SLOTS; i++) {
			have |= s->state[i] == SLOT_LIVE && same_addr(&want->e[j].addr, &up[i].addr);
			if (s->state[i] == SLOT_FREE && free_slot < 0)
				free_slot = i;
		}
		if (have)
			continue;
		if (free_slot < 0) {
			if (!s->full_said++)
				fprintf(stderr, "l7run: upstream %s: more than %d endpoints (with those still draining): the rest wait for a slot\n",
					s->name, L7_RT_SLOTS);
			continue;
		}
		up[free_slot].addr = want->e[j].addr;
		up[free_slot].draining = 0;
		s->state[free_slot] = SLOT_LIVE;
		s->weight[free_slot] = want->e[j].weight;
		changed = 1;
	}
	if (want->truncated && !s->full_said++)
		fprintf(stderr, "l7run: upstream %s: more than %d endpoints given; the first are used\n", s->name, L7_EP_MAX);
	if (!changed && !force)
		return 0;
	build(d, s, use_health);
	return publish_table(d, s, idx) ? -1 : changed;
}

static void say_set(const struct rtsets *d, const struct rtset *s)
{
	const struct cfg_endpoint *up = &d->cfg->upstream[s->r->slot];
	char list[512] = "";
	int o = 0, live = 0;

	for (int i = 0; i < L7_RT_SLOTS; i++) {
		if (s->state[i] == SLOT_FREE)
			continue;
		char a[INET_ADDRSTRLEN];
		inet_ntop(AF_INET, &up[i].addr.sin_addr, a, sizeof a);
		int ej = ejected(d->env, s->name, &up[i].addr, 1), none = !ej && out_of_set(d->env, s->name, &up[i], 1);
		live += s->state[i] == SLOT_LIVE && !ej && !none;
		o += snprintf(list + o, sizeof list - (size_t)o, " %s:%d%s", a, ntohs(up[i].addr.sin_port),
			      s->state[i] == SLOT_RETIRED ? "(draining)" : ej ? "(ejected)" : none ? "(connecting)" : "");
	}
	fprintf(stderr, "l7run: upstream %s: %d endpoints in force:%s\n", s->name, live, live || o ? list : " none (503)");
}

/* The slots of the literal sets that their health keeps out, into l7_lb_down. */
static void write_down(struct rtsets *d)
{
	uint32_t down = 0;
	for (int i = 0; i < d->nlit; i++)
		for (unsigned k = 0; k < d->lit[i].n; k++)
			if (out_of_set(d->env, d->lit[i].name, &d->cfg->upstream[d->lit[i].first + k], 1))
				down |= 1u << (d->lit[i].first + k);
	if (down != d->down && !bpf_map_update_elem(d->down_fd, &(uint32_t){ 0 }, &down, BPF_ANY))
		d->down = down;
}

enum { SRC_FILE = 1, SRC_DNS = 2 };

/* Refresh the sets of d whose source is in `read` (SRC_*) from it; force: apply even an
 * unchanged source (the health), and rebuild the others from what their slots hold (a health
 * change resolves no name: getaddrinfo blocks the loop). */
static void refresh(struct rtsets *d, int read, int use_health, int quiet, int force)
{
	for (int i = 0; i < d->n; i++) {
		struct rtset *s = &d->set[i];
		struct l7_eps want;
		if (!(read & (s->r->source == L7M_RT_DNS ? SRC_DNS : SRC_FILE))) {
			if (force && s->written_us) {
				build(d, s, use_health);
				publish_table(d, s, i);
			}
			continue;
		}
		if (source_of(d->env, s, &want, quiet))
			continue;
		int r = apply(d, i, &want, use_health, force || !s->written_us);
		if (r > 0 && !quiet)
			say_set(d, s);
	}
	if (use_health)
		write_down(d);
}

/* At load (the loader: only this version): slots and tables from the sources. -1 refuses the
 * version: the file does not parse. */
int ep_setup(struct ep_env *env, struct bpf_object *obj, struct config *cfg, char *err, size_t errlen)
{
	const struct manifest *mf = cfg->mf;
	struct litset lit[L7_MAX_UPSTREAMS / 2];
	int nlit = 0;

	for (__u32 u = 0; u < mf->n_upstream && u < L7_MAX_UPSTREAMS; u++) {
		int rt = 0;
		for (__u32 i = 0; i < mf->n_runtime; i++)
			rt |= mf->runtime[i].slot == u;
		if (!rt && mf->upstream[u].endpoint == 0 && mf->upstream[u].endpoints > 1 &&
		    u + mf->upstream[u].endpoints <= L7_MAX_UPSTREAMS && nlit < L7_MAX_UPSTREAMS / 2)
			lit[nlit++] = (struct litset){ mf->upstream[u].name.s, u, mf->upstream[u].endpoints };
	}
	if (!mf->n_runtime && !nlit)
		return 0;
	int down = bpf_object__find_map_fd_by_name(obj, "l7_lb_down");
	if (!mf->n_runtime && down < 0)
		return 0;   /* an older l7c's object: its literal sets have no health */
	int tab = bpf_object__find_map_fd_by_name(obj, "l7_lb_tab"), gen = bpf_object__find_map_fd_by_name(obj, "l7_lb_gen");
	if (mf->n_runtime && (tab < 0 || gen < 0)) {
		snprintf(err, errlen, "the object has no l7_lb_tab or l7_lb_gen map");
		return -1;
	}
	struct rtsets *d = cfg->rt = calloc(1, sizeof *cfg->rt);
	if (!d) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	d->cfg = cfg;
	d->env = env;
	d->tab_fd = tab;
	d->gen_fd = gen;
	d->down_fd = down;
	memcpy(d->lit, lit, sizeof lit);
	d->nlit = nlit;
	d->n = (int)mf->n_runtime;   /* the reader bounds it by L7_MAX_RT_SETS */
	for (int i = 0; i < d->n; i++) {
		struct rtset *s = &d->set[i];
		s->r = &mf->runtime[i];
		if (s->r->slot + L7_RT_SLOTS > mf->n_upstream || mf->upstream[s->r->slot].endpoints != L7_RT_SLOTS ||
		    mf->upstream[s->r->slot].endpoint != 0) {
			snprintf(err, errlen, "corrupt manifest: runtime[%d] is not %d slots of one upstream", i, L7_RT_SLOTS);
			return -1;
		}
		s->half = 1;   /* the first write goes to half 0, which l7_lb_gen names from the start */
		snprintf(s->name, sizeof s->name, "%s", mf->upstream[s->r->slot].name.s);
		for (int k = 0; k < L7_RT_SLOTS; k++)
			cfg->upstream[s->r->slot + (unsigned)k].set = 1;
	}
	if (env->file[0]) {
		stat(env->file, &d->seen);
		struct l7_eps probe;
		if (read_file(env->file, "", &probe, 0)) {   /* the whole file parses, or the version is refused */
			snprintf(err, errlen, "endpoints: %s does not parse (above)", env->file);
			return -1;
		}
	}
	refresh(d, SRC_FILE | SRC_DNS, 0, 0, 1);
	return 0;
}

void ep_watch(struct ep_env *env, struct config *cfg, int on)
{
	struct rtsets *d = cfg->rt;

	if (!d)
		return;
	for (struct rtsets **pp = &env->watched; *pp; pp = &(*pp)->next)
		if (*pp == d) {
			if (!on)
				*pp = d->next;
			return;
		}
	if (!on)
		return;
	d->next = env->watched;
	env->watched = d;
	struct stat st;
	int file_changed = env->file[0] && !stat(env->file, &st) && !same_file(&st, &d->seen);
	if (file_changed)
		d->seen = st;
	refresh(d, SRC_FILE | SRC_DNS, 1, !file_changed, 1);   /* the health of the published versions, and what changed since the load */
}

void ep_rebuild(struct config *cfg)
{
	struct rtsets *d = cfg->rt;

	for (int i = 0; d && i < d->n; i++) {
		build(d, &d->set[i], 1);
		if (publish_table(d, &d->set[i], i))
			fprintf(stderr, "l7run: upstream %s: cannot write its table: %s\n", d->set[i].name, strerror(errno));
	}
	if (d)
		write_down(d);
}

void ep_free(struct config *cfg)
{
	if (!cfg->rt)
		return;
	ep_watch(cfg->rt->env, cfg, 0);
	free(cfg->rt);
	cfg->rt = NULL;
}

int ep_retired(const struct config *cfg, int slot)
{
	const struct rtsets *d = cfg->rt;
	for (int i = 0; d && i < d->n; i++) {
		int k = slot - (int)d->set[i].r->slot;
		if (k >= 0 && k < L7_RT_SLOTS)
			return d->set[i].state[k] == SLOT_RETIRED && !(d->set[i].in_table & (1u << k));
	}
	return 0;
}

const char *ep_empty_set(const struct config *cfg, uint32_t upstream)
{
	const struct rtsets *d = cfg->rt;
	uint32_t i = upstream - L7_MAX_UPSTREAMS;
	return d && upstream >= L7_MAX_UPSTREAMS && i < (uint32_t)d->n ? d->set[i].name : NULL;
}

void ep_drained(struct config *cfg, int slot)
{
	struct rtsets *d = cfg->rt;
	for (int i = 0; d && i < d->n; i++) {
		int k = slot - (int)d->set[i].r->slot;
		if (k >= 0 && k < L7_RT_SLOTS && d->set[i].state[k] == SLOT_RETIRED) {
			d->set[i].state[k] = SLOT_FREE;
			d->set[i].full_said = 0;
			cfg->upstream[slot].draining = 0;
			memset(&cfg->upstream[slot].addr, 0, sizeof cfg->upstream[slot].addr);
			cfg->upstream[slot].addr.sin_family = AF_INET;
			d->env->changed = 1;   /* an endpoint that waited for a slot may take it */
		}
	}
}

/* The set (upstream name) of a slot of a published version: NULL if it is not run-time. */
static const char *set_named(const struct ep_env *env, const char *name)
{
	for (const struct rtsets *d = env->watched; d; d = d->next) {
		for (int i = 0; i < d->n; i++)
			if (!strcmp(d->set[i].name, name))
				return d->set[i].name;
		for (int i = 0; i < d->nlit; i++)
			if (!strcmp(d->lit[i].name, name))
				return d->lit[i].name;
	}
	return NULL;
}

int ep_seen(struct ep_env *env, const struct cfg_endpoint *e, int ok, uint64_t now)
{
	char name[L7M_NAME_MAX + 1];
	snprintf(name, sizeof name, "%.*s", L7M_NAME_MAX, e->name);
	char *hash = strrchr(name, '#');
	if (hash)
		*hash = 0;   /* NAME#i: the endpoint's set */
	if (!set_named(env, name))
		return 0;
	struct ep_health *h = health_row(env, name, &e->addr);
	if (!h)
		return 0;
	if (ok) {
		h->fails = 0;
		if (!h->ejected)
			h->row = 0;   /* it answers: the next ejection starts from the base again */
		return 0;
	}
	if (h->ejected)
		return 0;   /* connects still under way when it was ejected */
	h->fails++;
	uint64_t ms = (uint64_t)EJECT_BASE_MS << (h->row < 5 ? h->row : 5);
	h->ejected = 1;
	h->row++;
	h->ejections++;
	h->until = now + (ms < EJECT_MAX_MS ? ms : EJECT_MAX_MS);
	env->changed = 1;
	char a[INET_ADDRSTRLEN];
	inet_ntop(AF_INET, &e->addr.sin_addr, a, sizeof a);
	fprintf(stderr, "l7run: upstream %s: endpoint %s:%d ejected for %.1f s (its connect failed)\n", name, a,
		ntohs(e->addr.sin_port), (double)(h->until - now) / 1000.0);
	return 1;
}

const struct ep_health *ep_health_row(const struct config *cfg, int i, int *in_set)
{
	const struct ep_env *env = cfg->rt ? cfg->rt->env : NULL;
	for (int k = 0; env && k < env->n_health; k++) {
		const struct ep_health *h = &env->health[k];
		int mine = -1, lit = -1;
		for (int s = 0; s < cfg->rt->n; s++)
			mine = !strcmp(cfg->rt->set[s].name, h->upstream) ? s : mine;
		for (int s = 0; s < cfg->rt->nlit; s++)
			lit = !strcmp(cfg->rt->lit[s].name, h->upstream) ? s : lit;
		if (lit >= 0 && i-- == 0) {
			*in_set = 1;   /* a literal set keeps its endpoints */
			return h;
		}
		if (mine >= 0 && i-- == 0) {
			*in_set = 0;
			for (int j = 0; j < L7_RT_SLOTS; j++) {
				struct sockaddr_in a;
				*in_set |= ep_set_endpoint(cfg, mine, j, &a) && same_addr(&a, &h->addr);
			}
			return h;
		}
	}
	return NULL;
}

/* Sets 0 .. n - 1 are the run-time ones, then the literal ones. */
int ep_sets(const struct config *cfg)
{
	return cfg->rt ? cfg->rt->n + cfg->rt->nlit : 0;
}

const char *ep_set_name(const struct config *cfg, int i)
{
	const struct rtsets *d = cfg->rt;
	if (!d || i < 0 || i >= d->n + d->nlit)
		return NULL;
	return i < d->n ? d->set[i].name : d->lit[i - d->n].name;
}

int ep_set_slots(const struct config *cfg, int i, int *first)
{
	const struct rtsets *d = cfg->rt;
	if (!d || i < 0 || i >= d->n + d->nlit)
		return 0;
	*first = (int)(i < d->n ? d->set[i].r->slot : d->lit[i - d->n].first);
	return i < d->n ? L7_RT_SLOTS : (int)d->lit[i - d->n].n;
}

int ep_set_endpoint(const struct config *cfg, int i, int k, struct sockaddr_in *a)
{
	const struct rtsets *d = cfg->rt;
	int first, n = ep_set_slots(cfg, i, &first);
	if (k < 0 || k >= n || (i < d->n && d->set[i].state[k] != SLOT_LIVE))
		return 0;
	*a = cfg->upstream[first + k].addr;
	return 1;
}

int ep_checked(struct ep_env *env, const char *set, const struct sockaddr_in *a, enum ep_check r, const char *why,
	       unsigned unhealthy, unsigned healthy)
{
	struct ep_health *h = health_row(env, set, a);
	if (!h)
		return 0;
	h->checks[r]++;
	int was = h->down;
	if (r == EP_CHECK_PASSED) {
		h->failures = 0;
		h->passes++;
		if (h->down && h->passes >= healthy)
			h->down = 0;
	} else {
		h->passes = 0;
		h->failures++;
		if (!h->down && h->failures >= unhealthy)
			h->down = 1;
	}
	if (h->down == was)
		return 0;
	env->changed = 1;   /* the tables are rebuilt at the next tick */
	char ip[INET_ADDRSTRLEN];
	inet_ntop(AF_INET, &a->sin_addr, ip, sizeof ip);
	if (h->down)
		fprintf(stderr, "l7run: upstream %s: endpoint %s:%d is down: %u health checks in a row failed (last: %s); out of its set\n",
			set, ip, ntohs(a->sin_port), h->failures, why);
	else
		fprintf(stderr, "l7run: upstream %s: endpoint %s:%d is healthy again after %u passed health checks; back in its set\n",
			set, ip, ntohs(a->sin_port), h->passes);
	return 1;
}

int ep_retries(const struct config *cfg, int slot)
{
	const struct manifest *mf = cfg->mf;
	if (slot < 0 || (__u32)slot >= mf->n_upstream)
		return 0;
	__u32 first = (__u32)slot - mf->upstream[slot].endpoint;
	for (__u32 i = 0; i < mf->n_retry; i++)
		if (mf->retry[i].slot == first)
			return (int)mf->retry[i].retries;
	return 0;
}

/* The next slot after `slot` of its upstream that can take the request: a live one (of a
 * run-time set) that its health does not keep out. */
int ep_retry_slot(const struct config *cfg, int slot, uint32_t tried)
{
	const struct manifest *mf = cfg->mf;
	if (slot < 0 || (__u32)slot >= mf->n_upstream)
		return -1;
	int first = slot - (int)mf->upstream[slot].endpoint, n = (int)mf->upstream[slot].endpoints;
	const struct rtsets *d = cfg->rt;
	const struct rtset *s = NULL;
	const char *lit = NULL;
	for (int i = 0; d && i < d->n; i++)
		s = (int)d->set[i].r->slot == first ? &d->set[i] : s;
	for (int i = 0; d && i < d->nlit; i++)
		lit = (int)d->lit[i].first == first ? d->lit[i].name : lit;
	for (int j = 1; j < n; j++) {
		int k = (slot - first + j) % n, cand = first + k;
		if (cand >= 32 || (tried & (1u << cand)) || !cfg->upstream[cand].set)
			continue;
		if (s && (s->state[k] != SLOT_LIVE || ejected(d->env, s->name, &cfg->upstream[cand].addr, 1)))
			continue;
		if (lit && ejected(d->env, lit, &cfg->upstream[cand].addr, 1))
			continue;
		return cand;
	}
	return -1;
}

/* The loop: re-read the file when it changed (once a second), re-resolve names every
 * resolve_every seconds, put back the endpoints whose ejection is over, rebuild what changed. */
void ep_tick(struct ep_env *env, uint64_t now)
{
	if (!env->watched)
		return;
	for (int i = 0; i < env->n_health; i++) {
		struct ep_health *h = &env->health[i];
		if (h->ejected && now >= h->until) {
			char a[INET_ADDRSTRLEN];
			inet_ntop(AF_INET, &h->addr.sin_addr, a, sizeof a);
			fprintf(stderr, "l7run: upstream %s: endpoint %s:%d back after its ejection\n", h->upstream, a,
				ntohs(h->addr.sin_port));
			h->ejected = 0;
			env->changed = 1;
		}
	}
	int file = 0, dns = 0;
	time_t t = time(NULL);
	struct stat st;
	if (env->file[0] && t != env->checked) {
		env->checked = t;
		if (!stat(env->file, &st))
			for (struct rtsets *d = env->watched; d; d = d->next)
				file |= !same_file(&st, &d->seen);
	}
	unsigned every = env->resolve_every ? env->resolve_every : EP_RESOLVE_DEFAULT;
	if (now - env->resolved_at >= every * 1000ull) {
		env->resolved_at = now;
		dns = 1;
	}
	if (!file && !dns && !env->changed)
		return;
	int all = file || env->changed, force = env->changed;
	env->changed = 0;
	if (file) {
		struct l7_eps probe;
		if (read_file(env->file, "", &probe, 0)) {
			fprintf(stderr, "l7run: endpoints: %s ignored, the endpoints in force stay\n", env->file);
			for (struct rtsets *d = env->watched; d; d = d->next)
				d->seen = st;   /* said once; read again when it changes again */
			all = 0;        /* the health still applies (force), to the slots as they are */
		} else {
			for (struct rtsets *d = env->watched; d; d = d->next)
				d->seen = st;
		}
	}
	for (struct rtsets *d = env->watched; d; d = d->next)
		refresh(d, (all ? SRC_FILE : 0) | (dns ? SRC_DNS : 0), 1, 0, force);
}
