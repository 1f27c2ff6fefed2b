/* l7c --eval --endpoints FILE / --resolve (eval_ep.h): the same sources, parser and table
 * builder as l7run's (support/epfile.c, stdlib/bpf/ring.h), for a set as l7run fills it at
 * start: its endpoints take its slots in the order the file (or the resolver) first gives
 * them, up to L7_RT_SLOTS. After changes at run time l7run keeps each endpoint's slot, so a
 * slot number (and the order of the turns) may differ from a fresh start's; the endpoint a
 * ring gives does not (its points are its address's). */
#include "eval_ep.h"

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

#include "diag.h"
#include "epfile.h"
#include "ir.h"
#include "ring.h"
#include "source.h"
#include "l7/dataplane.h"

struct eval_set {
	bool known;
	char why[640];               /* known: where the endpoints come from; else why not */
	struct l7_eps eps;           /* the first L7_RT_SLOTS are in force */
	struct l7_lb_tab tab;
};

struct eval_eps {
	struct eval_set set[L7_MAX_UPSTREAMS];
};

struct eval_eps *eval_eps_new(const struct ir_program *ir, const char *file, bool resolve, struct l7_diags *d, int *rc)
{
	struct eval_eps *e = calloc(1, sizeof *e);
	char *text = NULL;
	size_t len = 0;
	char why[300];

	*rc = 0;
	if (file && !(text = l7_epfile_load(file, &len, why, sizeof why))) {
		fprintf(stderr, "l7c: error: --endpoints %s\n", why);
		free(e);
		*rc = 2;
		return NULL;
	}
	struct l7_epfile_err err;
	if (text && l7_epfile_parse(text, len, "", &e->set[0].eps, &err)) {   /* all of it parses, as l7run asks */
		struct l7_source *src = l7_source_from_bytes(file, text, len);
		struct l7_loc loc = l7_loc_at(src, err.start, err.end);
		l7_diag(d, L7_ERROR, loc, "%s", err.msg);
		l7_hint(d, loc, "%s (l7run refuses the file too)", err.hint);
		l7_source_free(src);
		free(text);
		free(e);
		*rc = 1;
		return NULL;
	}
	for (int u = 0; u < ir->nupstreams && u < L7_MAX_UPSTREAMS; u++) {
		const struct ir_target *t = &ir->upstreams[u];
		struct eval_set *s = &e->set[u];
		memset(&s->eps, 0, sizeof s->eps);
		if (t->rt_kind == IR_RT_SET && text) {
			l7_epfile_parse(text, len, t->rt_name, &s->eps, &err);
			s->known = true;
			snprintf(s->why, sizeof s->why, "set \"%s\" of %s", t->rt_name, file);
		} else if (t->rt_kind == IR_RT_SET) {
			snprintf(s->why, sizeof s->why,
				 "set \"%s\" is not known: its endpoints are the lines `%s ADDR:PORT` of l7run --endpoints; "
				 "l7c --eval --endpoints FILE says which one", t->rt_name, t->rt_name);
		} else if (t->rt_kind == IR_RT_NAME && resolve) {
			s->known = true;
			if (l7_ep_resolve(t->rt_name, t->rt_port, &s->eps, why, sizeof why))
				snprintf(s->why, sizeof s->why, "\"%s\" does not resolve now (%s)", t->rt_name, why);
			else
				snprintf(s->why, sizeof s->why, "what \"%s\" resolves to now, port %u", t->rt_name, t->rt_port);
		} else if (t->rt_kind == IR_RT_NAME) {
			snprintf(s->why, sizeof s->why,
				 "what l7run resolves \"%s\" to is not known: l7c --eval --resolve resolves it now, as l7run does",
				 t->rt_name);
		}
		if (!s->known)
			continue;
		struct l7_ring_ep r[L7_RT_SLOTS];
		int n = s->eps.n < L7_RT_SLOTS ? s->eps.n : L7_RT_SLOTS;   /* l7run: the rest wait for a slot */
		for (int i = 0; i < n; i++)
			r[i] = (struct l7_ring_ep){ ntohl(s->eps.e[i].addr.sin_addr.s_addr), ntohs(s->eps.e[i].addr.sin_port),
						    s->eps.e[i].weight, (__u32)(t->slot + i) };
		s->eps.n = n;
		if (l7_ring_tab(&s->tab, r, n, t->balance == IR_LB_HASH))
			s->known = false, snprintf(s->why, sizeof s->why, "out of memory");
	}
	free(text);
	return e;
}

void eval_eps_free(struct eval_eps *e)
{
	free(e);
}

const struct l7_lb_tab *eval_eps_tab(void *ctx, int upstream)
{
	const struct eval_eps *e = ctx;
	return e && upstream >= 0 && upstream < L7_MAX_UPSTREAMS && e->set[upstream].known ? &e->set[upstream].tab : NULL;
}

static void print_ep(FILE *out, const struct ir_target *t, const struct eval_set *s, int slot, const char *sep)
{
	const struct sockaddr_in *a = &s->eps.e[slot - t->slot].addr;
	char ip[INET_ADDRSTRLEN];
	inet_ntop(AF_INET, &a->sin_addr, ip, sizeof ip);
	fprintf(out, "%s%s#%d %s:%u", sep, t->name, slot - t->slot, ip, ntohs(a->sin_port));
}

void eval_eps_print(const struct eval_eps *e, const struct ir_program *ir, const struct ir_decision *dec, FILE *out)
{
	const struct ir_target *t = &ir->upstreams[dec->upstream];
	const struct eval_set *s = e ? &e->set[dec->upstream] : NULL;
	const char *how = t->balance == IR_LB_HASH ? "ketama" : "round robin";

	if (!s || !s->known) {
		fprintf(out, "endpoint: upstream %s (run-time endpoints, slots %d-%d, %s): %s\n", t->name, t->slot,
			t->slot + t->nendpoints - 1, how, s ? s->why : "?");
		return;
	}
	if (dec->no_endpoint) {
		fprintf(out, "endpoint: none: %s has no endpoint; the client gets 503 with the body "
			     "\"503 Service Unavailable: upstream %s has no endpoint\" (counted as no_endpoint)\n", s->why, t->name);
		return;
	}
	if (dec->slot >= 0) {
		print_ep(out, t, s, dec->slot, "endpoint: ");
		fprintf(out, " (slot %d, %s over the %d endpoints of %s)\n", dec->slot, how, s->eps.n, s->why);
		return;
	}
	fprintf(out, "endpoint: round robin over the %d endpoints of %s: turn t of the set's counter takes turn t mod %u\n",
		s->eps.n, s->why, s->tab.nturns);
	fprintf(out, "turns:");
	for (__u32 k = 0; k < s->tab.nturns; k++)
		print_ep(out, t, s, s->tab.turns[k], " ");
	fprintf(out, "\n");
}
