/* The .l7 the importer writes: the classes of workloads (services) and callers (identities),
 * the Jwt instances, then the policies in the order that keeps Istio's: the audited ones
 * (AUDIT, DENY/ALLOW dry runs: Audit decides nothing, so they see every request), CUSTOM
 * (their Fallback is the first route reached), RequestAuthentication, DENY, Cilium, ALLOW, what
 * is only a comment (a CUSTOM dry run), and last the routes to each workload. Deny wins wherever it is
 * reached; an ALLOW policy that applies and does not allow denies (docs/language.md). */
#include "model.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "hash.h"
#include "l7/abi.h"
#include "l7/dataplane.h"

struct svc {
	int w;                       /* workload class */
	int port;
	const char *name, *backend;
	unsigned listen_ip, backend_ip;
};

struct em {
	struct ictx *x;
	FILE *o;
	struct svc *svcs;
	int nsvcs;
	const char **names;          /* every top-level name written: they must differ */
	int nnames;
	bool *allow_live;            /* per service: an ALLOW policy with a rule that can match there */
	const char **claims;         /* "instance.claim" pairs read (the data plane reads at most 8) */
	int nclaims;
};

static const char *unique(struct em *e, const char *base)
{
	const char *n = xprintf(e->x, "%s", base);
	for (int k = 2;; k++) {
		bool taken = false;
		for (int i = 0; i < e->nnames && !taken; i++)
			taken = !strcmp(e->names[i], n);
		if (!taken)
			break;
		n = xprintf(e->x, "%s_%d", base, k);
	}
	const char **nn = l7_alloc(e->x->a, sizeof(*nn) * (size_t)(e->nnames + 1));
	if (e->nnames)
		memcpy(nn, e->names, sizeof(*nn) * (size_t)e->nnames);
	nn[e->nnames++] = n;
	e->names = nn;
	return n;
}

static const char *ident(struct em *e, const char *prefix, const char *a, const char *b)
{
	char buf[200];
	snprintf(buf, sizeof buf, "%s_%s%s%s", prefix, a ? a : "", a && b ? "_" : "", b ? b : "");
	for (char *p = buf; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9')))
			*p = '_';
	return unique(e, buf);
}

static const char *ip_text(struct ictx *x, unsigned ip)
{
	return xprintf(x, "%u.%u.%u.%u", ip >> 24, ip >> 16 & 255, ip >> 8 & 255, ip & 255);
}

static int cmp_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

/* ---- the classes, their addresses and ports ---- */

static bool applies(const struct ipol *p, const struct klass *w) { return lset_sub(p->target, w->l); }

static bool workloads(struct em *e)
{
	struct ictx *x = e->x;
	if (!x->nwl_atoms)
		return true;
	if (!classes_build(x, x->wl_atoms, x->nwl_atoms, true, &x->wls, &x->nwls, 64))
		return false;
	if (x->any_auth)
		atom_add(x, &x->id_atoms, &x->nid_atoms, lset_new(x, 0, NULL, NULL));
	if (x->nid_atoms && !classes_build(x, x->id_atoms, x->nid_atoms, false, &x->ids, &x->nids, 64))
		return false;
	for (int w = 0; w < x->nwls; w++) {
		struct klass *k = &x->wls[w];
		int cap = 1 + x->nports_named;
		k->ports = l7_alloc(x->a, sizeof(int) * (size_t)cap);
		k->ports[k->nports++] = x->o->port;
		for (int i = 0; i < x->nports_named; i++)
			if (applies(x->port_pol[i], k)) {
				bool dup = false;
				for (int j = 0; j < k->nports; j++)
					dup |= k->ports[j] == x->atom_ports[i];
				if (!dup)
					k->ports[k->nports++] = x->atom_ports[i];
			}
		qsort(k->ports, (size_t)k->nports, sizeof(int), cmp_int);
	}
	/* addresses: the workload's own listening address and its pods, one of each per workload
	 * (ports keep their meaning: request.port is the workload's port) */
	for (int i = 0; i < x->o->nlisten + x->o->nbackend; i++) {
		const struct l7_import_addr *a = i < x->o->nlisten ? &x->o->listen[i] : &x->o->backend[i - x->o->nlisten];
		bool found = false;
		for (int w = 0; w < x->nwls; w++)
			found |= !strcmp(x->wls[w].name, a->workload);
		if (!found)
			l7_diag(x->d, L7_ERROR, (struct l7_loc){ 0 }, "--%s %s: no workload of that name (the workloads are listed at "
				"the top of the output)", i < x->o->nlisten ? "listen" : "backend", a->workload);
	}
	for (int w = 0; w < x->nwls; w++)
		for (int i = 0; i < x->wls[w].nports; i++) {
			struct svc *s = l7_alloc(x->a, sizeof(*s) * (size_t)(e->nsvcs + 1));
			if (e->nsvcs)
				memcpy(s, e->svcs, sizeof(*s) * (size_t)e->nsvcs);
			e->svcs = s;
			s = &e->svcs[e->nsvcs++];
			s->w = w;
			s->port = x->wls[w].ports[i];
			s->listen_ip = 0x7f010001u + (unsigned)w;   /* 127.1.0.1, 127.1.0.2, ... */
			s->backend_ip = 0x7f020001u + (unsigned)w;  /* 127.2.0.1, ... */
			for (int k = 0; k < x->o->nlisten; k++)
				if (!strcmp(x->o->listen[k].workload, x->wls[w].name))
					s->listen_ip = x->o->listen[k].ip;
			for (int k = 0; k < x->o->nbackend; k++)
				if (!strcmp(x->o->backend[k].workload, x->wls[w].name))
					s->backend_ip = x->o->backend[k].ip;
			s->name = unique(e, xprintf(x, "%s_%d", x->wls[w].name, s->port));
			s->backend = unique(e, xprintf(x, "%s_%d_backend", x->wls[w].name, s->port));
		}
	int endpoints = e->nsvcs + (x->need_fallback ? 1 : 0);
	if (endpoints > L7_MAX_UPSTREAMS)
		l7_diag(x->d, L7_ERROR, (struct l7_loc){ 0 }, "the policies make %d workload ports%s: the data plane serves at most %d "
			"upstream endpoints (one per workload port)", e->nsvcs, x->need_fallback ? " and the fallback proxy" : "",
			L7_MAX_UPSTREAMS);
	return true;
}

/* The Jwt instances of each workload: those of the RequestAuthentications that apply to it. */
static void jwt_sets(struct em *e)
{
	struct ictx *x = e->x;
	x->jwtsets = l7_alloc(x->a, sizeof(int *) * (size_t)(x->nwls + 1));
	x->njwtset = l7_alloc(x->a, sizeof(int) * (size_t)(x->nwls + 1));
	for (int w = 0; w < x->nwls; w++) {
		int *set = l7_alloc(x->a, sizeof(int) * (size_t)(x->njwts + 1)), n = 0;
		for (int j = 0; j < x->njwts; j++)
			for (int p = 0; p < x->npols; p++) {
				const struct ipol *pp = x->pols[p];
				bool mine = false;
				for (int k = 0; k < pp->njwts; k++)
					mine |= pp->jwts[k] == j;
				if (pp->k == PK_AUTHN && mine && applies(pp, &x->wls[w])) {
					set[n++] = j;
					break;
				}
			}
		if (!n)
			continue;
		int s = 0;
		for (; s < x->njwtsets; s++)
			if (x->njwtset[s] == n && !memcmp(x->jwtsets[s], set, sizeof(int) * (size_t)n))
				break;
		if (s == x->njwtsets) {
			x->jwtsets[s] = set;
			x->njwtset[s] = n;
			x->njwtsets++;
		}
		x->wls[w].jwtset = s;
	}
	if (x->njwts > L7_MAX_JWT)
		l7_diag(x->d, L7_ERROR, (struct l7_loc){ 0 }, "the RequestAuthentications make %d Jwt instances (one per key and "
			"audience): the data plane verifies at most %d kinds of token", x->njwts, L7_MAX_JWT);
}

/* ---- groups: the services a policy applies to, by their Jwt instances and, when it tests
 * ports, by port: each group is one policy, where those atoms are constants ---- */

struct group {
	int *svcs;
	int nsvcs;
	int jwtset;                  /* -1: none */
	int port;                    /* the port of every service of the group; 0: not split */
};

/* p's services (those of workload w if w >= 0) */
static int groups_of(struct em *e, const struct ipol *p, int w, bool by_jwt, bool by_port, struct group *g)
{
	struct ictx *x = e->x;
	int ng = 0;
	for (int s = 0; s < e->nsvcs; s++) {
		const struct klass *k = &x->wls[e->svcs[s].w];
		if (p ? !applies(p, k) : e->svcs[s].w != w)
			continue;
		int set = by_jwt ? k->jwtset : -1, port = by_port ? e->svcs[s].port : 0, i = 0;
		while (i < ng && (g[i].jwtset != set || g[i].port != port))
			i++;
		if (i == ng) {
			g[ng].svcs = l7_alloc(x->a, sizeof(int) * (size_t)(e->nsvcs + 1));
			g[ng].nsvcs = 0;
			g[ng].port = port;
			g[ng++].jwtset = set;
		}
		g[i].svcs[g[i].nsvcs++] = s;
	}
	return ng;
}

static struct cnode *bind(struct em *e, const struct cnode *c, const struct group *g)
{
	struct ictx *x = e->x;
	struct benv env = { g && g->jwtset >= 0 ? x->jwtsets[g->jwtset] : NULL, g && g->jwtset >= 0 ? x->njwtset[g->jwtset] : 0,
			    g ? g->port : 0 };
	return c_bind(x, c, &env);
}

/* ---- printing ---- */

static void policy_head(struct em *e, const char *lead, const char *name, const struct group *g, bool jwt)
{
	struct ictx *x = e->x;
	fprintf(e->o, "%spolicy %s (\n%s  act (HttpRequest request)\n", lead, name, lead);
	if (jwt && g->jwtset >= 0)
		for (int i = 0; i < x->njwtset[g->jwtset]; i++)
			fprintf(e->o, "%s  using (Jwt %s)\n", lead, x->jwts[x->jwtsets[g->jwtset][i]].name);
	if (g->nsvcs != e->nsvcs) {
		fprintf(e->o, "%s  context ('.*->", lead);
		if (g->nsvcs > 1)
			fputc('(', e->o);
		for (int i = 0; i < g->nsvcs; i++)
			fprintf(e->o, "%s%s", i ? "|" : "", e->svcs[g->svcs[i]].name);
		fprintf(e->o, "%s')\n", g->nsvcs > 1 ? ")" : "");
	}
	fprintf(e->o, "%s) {\n", lead);
}

/* if (cond) { action } with the rule's comment (kw: "if", or "else if" in a chain); a
 * condition that is always true is the action (in a chain: its else). */
static void guarded_kw(struct em *e, const char *lead, const struct cnode *c, const char *comment, const char *action,
		       const char *kw)
{
	if (comment)
		fprintf(e->o, "%s  // %s\n", lead, comment);
	if (c->k == CK_TRUE) {
		if (strcmp(kw, "if"))
			fprintf(e->o, "%s  else {\n%s    %s\n%s  }\n", lead, lead, action, lead);
		else
			fprintf(e->o, "%s  %s\n", lead, action);
		return;
	}
	fprintf(e->o, "%s  %s (", lead, kw);
	/* a commented-out policy prints its condition on one line per line break, prefixed too */
	if (*lead) {
		char *buf = NULL;
		size_t len = 0;
		FILE *m = open_memstream(&buf, &len);
		FILE *save = e->o;
		e->o = m;
		c_print(e->x, m, c, 6);
		fclose(m);
		e->o = save;
		for (char *p = buf; *p; p++) {
			fputc(*p, e->o);
			if (*p == '\n')
				fputs(lead, e->o);
		}
		free(buf);
	} else {
		c_print(e->x, e->o, c, 6);
	}
	fprintf(e->o, ") {\n%s    %s\n%s  }\n", lead, action, lead);
}

static void guarded(struct em *e, const char *lead, const struct cnode *c, const char *comment, const char *action)
{
	guarded_kw(e, lead, c, comment, action, "if");
}

/* An audited policy's body: Audit(request) is not terminal, so its rules are one else-if chain
 * (one path each: n ifs in a row would be 2^n paths). AUDIT and a DENY's dry run audit what a
 * rule matches; an ALLOW's dry run what none of its rules matches. */
static void audited_rules(struct em *e, const struct ipol *p, struct cnode **conds)
{
	bool allow = p->k == PK_ALLOW, first = true;
	for (int i = 0; i < p->nrules; i++) {
		if (conds[i]->k == CK_FALSE) {
			fprintf(e->o, "  // %s: matches no request here\n", p->rules[i].comment);
			continue;
		}
		guarded_kw(e, "", conds[i], p->rules[i].comment, allow ? "// allowed: nothing to audit" : "Audit(request);",
			   first ? "if" : "else if");
		first = false;
		if (conds[i]->k == CK_TRUE)
			return;   /* the rest is never reached (ALLOW: everything is allowed) */
	}
	if (allow)
		fprintf(e->o, first ? "  Audit(request);   // it allows nothing\n" : "  else {\n    Audit(request);   // no rule allows it\n  }\n");
}

static const char *action_of(const struct ipol *p)
{
	switch (p->k) {
	case PK_CUSTOM: return NULL;
	case PK_DENY: return "Deny(request, 403);";
	case PK_AUDIT: return "Audit(request);";
	default: return "Allow(request);";
	}
}

static const char *policy_prefix(const struct ipol *p)
{
	if (p->audited)
		return "audit";
	switch (p->k) {
	case PK_CUSTOM: return "custom";
	case PK_DENY: return "deny";
	case PK_AUDIT: return "audit";
	default: return "allow";
	}
}

static const char *action_text(struct em *e, const struct ipol *p)
{
	if (p->k == PK_CUSTOM)
		return xprintf(e->x, "ExtAuthz(request, %s);", l7_quote(e->x, p->provider, strlen(p->provider)));
	return action_of(p);
}

/* One AuthorizationPolicy: a policy per group of its workloads' services (by Jwt instances
 * when its rules read tokens, by port when they test ports), each rule an if. */
static void authz(struct em *e, const struct ipol *p)
{
	struct ictx *x = e->x;
	bool jwt = false, ports = false;
	for (int i = 0; i < p->nrules; i++) {
		jwt |= p->rules[i].uses_jwt;
		ports |= c_uses(p->rules[i].cond, CK_PORT);
	}
	struct group *g = l7_alloc(x->a, sizeof(*g) * (size_t)(e->nsvcs + 1));
	int ng = groups_of(e, p, -1, jwt, ports, g);
	const char *lead = p->commented ? "// " : "";
	const char *what = p->k == PK_CUSTOM ? xprintf(x, "CUSTOM, provider %s: the requests it matches go to the fallback "
						       "proxy (the slow path), which asks the provider", p->provider)
			 : p->k == PK_DENY ? "DENY" : p->k == PK_AUDIT ? "AUDIT" : "ALLOW";
	fprintf(e->o, "\n// %s (%s): %s%s\n", p->title, p->where, what,
		p->audited && p->k != PK_AUDIT ? ", a dry run (istio.io/dry-run): what it would deny is audited, not denied"
		: p->k == PK_AUDIT ? ": the requests it matches are audited (counted and logged); it decides nothing" : "");
	if (p->commented)
		fprintf(e->o, "// %s: not enforced, kept as a comment%s\n", p->why_commented,
			p->k == PK_AUDIT ? " (it would audit the requests it matches)" : "");
	if (!ng) {
		fprintf(e->o, "// (it applies to no workload of this import)\n");
		return;
	}
	for (int k = 0; k < ng; k++) {
		const char *name = ident(e, policy_prefix(p), p->ns, g[k].port ? xprintf(x, "%s_%d", p->name, g[k].port) : p->name);
		struct cnode **conds = l7_alloc(x->a, sizeof(*conds) * (size_t)(p->nrules + 1));
		int live = 0;
		for (int i = 0; i < p->nrules; i++) {
			conds[i] = bind(e, p->rules[i].cond, &g[k]);
			live += conds[i]->k != CK_FALSE;
		}
		const char *where = ng > 1 ? xprintf(x, " on %s%s", e->svcs[g[k].svcs[0]].name, g[k].nsvcs > 1 ? ", ..." : "") : "";
		if (p->audited && (live || p->k == PK_ALLOW)) {
			policy_head(e, "", name, &g[k], jwt);
			audited_rules(e, p, conds);
			fprintf(e->o, "}\n");
			continue;
		}
		if (!live && (p->k != PK_ALLOW || p->commented || p->audited)) {
			fprintf(e->o, "// no rule can match%s: it does nothing\n", where);
			continue;
		}
		if (!live) {   /* ALLOW that allows nothing: it denies, unless another ALLOW policy allows */
			struct group dead = { l7_alloc(x->a, sizeof(int) * (size_t)(g[k].nsvcs + 1)), 0, -1, g[k].port };
			for (int i = 0; i < g[k].nsvcs; i++)
				if (!e->allow_live[g[k].svcs[i]])
					dead.svcs[dead.nsvcs++] = g[k].svcs[i];
			fprintf(e->o, "// It allows nothing%s%s: where no other ALLOW policy can allow, every request is denied.\n",
				p->nrules ? " (no rule can match)" : "", where);
			if (!dead.nsvcs) {
				fprintf(e->o, "// (other ALLOW policies apply to each of these services: it adds nothing)\n");
				continue;
			}
			policy_head(e, "", name, &dead, false);
			fprintf(e->o, "  Deny(request, 403);\n}\n");
			continue;
		}
		policy_head(e, lead, name, &g[k], jwt);
		for (int i = 0; i < p->nrules; i++)
			if (conds[i]->k != CK_FALSE)
				guarded(e, lead, conds[i], p->rules[i].comment, action_text(e, p));
			else
				fprintf(e->o, "%s  // %s: matches no request here\n", lead, p->rules[i].comment);
		fprintf(e->o, "%s}\n", lead);
	}
}

/* The allow-list of one workload's services (one policy per port when its rules test ports):
 * every Cilium rule selecting it (the L7 HTTP rules of its ports included), its deny rules,
 * and before them the header edits of headerMatches, each a policy of its own: an edit applies
 * whenever its rule matches, whatever the others do (ifs in one policy would make every
 * combination of them a path, most of them impossible). */
static void cilium_group(struct em *e, int w, const struct group *g, bool default_deny)
{
	struct ictx *x = e->x;
	struct klass *k = &x->wls[w];
	const char *suffix = g->port ? xprintf(x, "%d", g->port) : NULL;
	int muts = 0;
	for (int i = 0; i < x->npols; i++) {
		const struct ipol *p = x->pols[i];
		for (int m = 0; p->k == PK_CILIUM && applies(p, k) && m < p->nmuts; m++) {
			const struct mutation *mu = &p->muts[m];
			struct cnode *c = bind(e, mu->cond, g);
			if (c->k == CK_FALSE)
				continue;
			const char *qn = l7_quote(x, mu->name, strlen(mu->name));
			const char *act = !strcmp(mu->op, "RemoveHeader") ? xprintf(x, "RemoveHeader(request, %s);", qn)
				: xprintf(x, "%s(request, %s, %s);", mu->op, qn, l7_quote(x, mu->value, strlen(mu->value)));
			fprintf(e->o, "\n// %s %s\n", p->title, mu->comment);
			policy_head(e, "", ident(e, "cilium", k->name, suffix ? xprintf(x, "%s_edit", suffix) : "edit"), g, false);
			guarded(e, "", c, NULL, act);
			fprintf(e->o, "}\n");
			muts++;
		}
	}
	if (muts > L7_MAX_SET)
		l7_diag(x->d, L7_ERROR, (struct l7_loc){ 0 }, "workload %s: %d header edits (headerMatches actions) can apply to one "
			"request; the data plane applies at most %d", k->name, muts, L7_MAX_SET);
	fprintf(e->o, "\n// Cilium ingress of workload %s (%s)%s%s, from:\n", k->name, k->desc,
		g->port ? xprintf(x, " on port %d", g->port) : "", default_deny ? ": a request no rule allows gets 403" : "");
	for (int i = 0; i < x->npols; i++) {
		const struct ipol *p = x->pols[i];
		if (p->k == PK_CILIUM && applies(p, k) && (p->default_deny || p->ndeny || p->nmuts || p->nallow))
			fprintf(e->o, "//   %s (%s)\n", p->title, p->where);
	}
	policy_head(e, "", ident(e, "cilium", k->name, suffix), g, false);
	struct cnode *allow = c_new(x, CK_OR);
	for (int i = 0; i < x->npols; i++) {
		const struct ipol *p = x->pols[i];
		if (p->k != PK_CILIUM || !applies(p, k))
			continue;
		for (int d = 0; d < p->ndeny; d++) {
			struct cnode *c = bind(e, p->deny[d], g);
			if (c->k == CK_FALSE)
				fprintf(e->o, "  // %s: denies no request here\n", p->deny_comment[d]);
			else
				guarded(e, "", c, p->deny_comment[d], "Deny(request, 403);");
		}
		for (int a = 0; a < p->nallow; a++) {
			struct cnode *c = bind(e, p->allow[a], g);
			if (c->k == CK_FALSE) {
				fprintf(e->o, "  // %s: allows no request here\n", p->allow_comment[a]);
				continue;
			}
			c->comment = p->allow_comment[a];
			allow = c_bin(x, CK_OR, allow, c);
		}
	}
	if (default_deny) {
		struct cnode *b = c_bind(x, allow, NULL);
		if (b->k == CK_TRUE) {
			fprintf(e->o, "  // every request is allowed\n");
		} else if (b->k == CK_FALSE) {
			fprintf(e->o, "  // no rule allows any request\n  Deny(request, 403);\n");
		} else {
			if (b->k != CK_OR) {   /* one rule: its comment above the if */
				fprintf(e->o, "  // %s\n", b->comment ? b->comment : "the allow-list");
				b->comment = NULL;
			}
			fprintf(e->o, b->n && b->a[0]->comment ? "  if (!(\n        " : "  if (!(");   /* a comment on a line of its own */
			c_print(x, e->o, b, 8);
			fprintf(e->o, ")) {\n    Deny(request, 403);\n  }\n");
		}
	}
	fprintf(e->o, "}\n");
}

static void cilium_workload(struct em *e, int w)
{
	struct ictx *x = e->x;
	bool default_deny = false, any = false, ports = false;
	for (int i = 0; i < x->npols; i++) {
		const struct ipol *p = x->pols[i];
		if (p->k != PK_CILIUM || !applies(p, &x->wls[w]))
			continue;
		any |= p->default_deny || p->ndeny || p->nmuts;
		default_deny |= p->default_deny;
		for (int a = 0; a < p->nallow; a++)
			ports |= c_uses(p->allow[a], CK_PORT);
		for (int a = 0; a < p->ndeny; a++)
			ports |= c_uses(p->deny[a], CK_PORT);
		for (int a = 0; a < p->nmuts; a++)
			ports |= c_uses(p->muts[a].cond, CK_PORT);
	}
	if (!any)
		return;
	struct group *g = l7_alloc(x->a, sizeof(*g) * (size_t)(e->nsvcs + 1));
	int ng = groups_of(e, NULL, w, false, ports, g);
	for (int k = 0; k < ng; k++)
		cilium_group(e, w, &g[k], default_deny);
}

/* A present token must be valid (PERMISSIVE), a valid one is required (STRICT), or neither
 * (IGNORE); a valid token is not forwarded unless forwardOriginalToken. */
/* Instance j accepts the token: its signature, times, issuer and audience; more than one
 * audience: its aud claim is one of them. */
static struct cnode *valid_of(struct em *e, int j)
{
	struct ictx *x = e->x;
	struct cnode *v = c_text(x, "%s.valid", x->jwts[j].name);
	if (!x->jwts[j].nauds)
		return v;
	struct cnode *any = c_new(x, CK_OR);
	for (int a = 0; a < x->jwts[j].nauds; a++) {
		struct cnode *c = c_new(x, CK_CLAIM);
		c->claim = "aud";
		c->m = SM_EXACT;
		c->val = x->jwts[j].auds[a];
		any = c_bin(x, CK_OR, any, c);
	}
	struct benv one = { &j, 1, 0 };
	return c_bind(x, any, &one);   /* a claim compare implies the valid token */
}

static void authn(struct em *e, int jwtset)
{
	struct ictx *x = e->x;
	const int *set = x->jwtsets[jwtset];
	int n = x->njwtset[jwtset];
	struct group g = { l7_alloc(x->a, sizeof(int) * (size_t)(e->nsvcs + 1)), 0, jwtset, 0 };
	for (int s = 0; s < e->nsvcs; s++)
		if (x->wls[e->svcs[s].w].jwtset == jwtset)
			g.svcs[g.nsvcs++] = s;
	fprintf(e->o, "\n// Request authentication, from:\n");
	for (int i = 0; i < n; i++)
		fprintf(e->o, "//   %s: %s\n", x->jwts[set[i]].name, x->jwts[set[i]].source);
	policy_head(e, "", ident(e, "authn", x->wls[e->svcs[g.svcs[0]].w].name, NULL), &g, true);
	/* per header (the first instance reading it stands for all of them): valid, or refused when
	 * present (PERMISSIVE) or always (STRICT), unless an IGNORE rule reads it; each token read
	 * once on every path (the verifier walks the check at each place it is written) */
	bool strict = false;
	for (int i = 0; i < n; i++)
		strict |= x->jwts[set[i]].failure == 2;
	bool headers_differ = false;
	for (int i = 1; i < n; i++)
		headers_differ |= strcasecmp(x->jwts[set[i]].header, x->jwts[set[0]].header) != 0;
	for (int i = 0; i < n; i++) {
		const char *h = x->jwts[set[i]].header;
		bool first = true, ignore = false, forward = true;
		struct cnode *valid = c_new(x, CK_OR);
		for (int j = 0; j < n; j++) {
			if (strcasecmp(x->jwts[set[j]].header, h))
				continue;
			first &= j >= i;
			ignore |= x->jwts[set[j]].failure == 1;
			forward &= x->jwts[set[j]].forward;
			valid = c_bin(x, CK_OR, valid, valid_of(e, set[j]));
		}
		if (!first)
			continue;
		valid = c_bind(x, valid, NULL);
		const char *qh = l7_quote(x, h, strlen(h));
		struct cnode *present = c_text(x, "matches(request.header(%s), \"[Bb][Ee][Aa][Rr][Ee][Rr] +.*\")", qh);
		const char *refuse = ignore ? NULL : "Deny(request, 401);";
		bool always = strict && !headers_differ;   /* STRICT with one header: no token is refused too */
		fprintf(e->o, "  // the token in %s: %s%s\n", h, ignore ? "never refused (IGNORE)" : always ? "required and valid (STRICT), "
			"401 otherwise" : "valid when present, 401 otherwise", forward ? "" : "; the upstream does not get it "
			"(forwardOriginalToken false)");
		const char *rm = forward ? NULL : xprintf(x, "RemoveHeader(request, %s);", qh);
		if (rm) {
			fprintf(e->o, "  if (");
			c_print(x, e->o, valid, 6);
			fprintf(e->o, ") {\n    %s\n  }", rm);
			if (refuse) {
				fprintf(e->o, " else ");
				if (always)
					fprintf(e->o, "{\n    %s\n  }\n", refuse);
				else
					fprintf(e->o, "if (%s) {\n    %s\n  }\n", present->text, refuse);
			} else {
				fputc('\n', e->o);
			}
		} else if (refuse) {
			guarded(e, "", c_bind(x, always ? c_not(x, valid) : c_bin(x, CK_AND, present, c_not(x, valid)), NULL), NULL, refuse);
		}
	}
	if (strict && headers_differ) {   /* STRICT over several headers: some token must be valid */
		struct cnode *any = c_new(x, CK_OR);
		for (int i = 0; i < n; i++)
			any = c_bin(x, CK_OR, any, valid_of(e, set[i]));
		guarded(e, "", c_bind(x, c_not(x, any), NULL), "failureMode STRICT: a valid token is required", "Deny(request, 401);");
	}
	fprintf(e->o, "}\n");
}

/* ---- the whole file ---- */

static bool read_identities(struct em *e, const char **addrs)
{
	struct ictx *x = e->x;
	const struct l7_source *s = x->o->identities;
	if (!s)
		return true;
	bool ok = true;
	unsigned line = 1;
	for (const char *p = s->text; *p; line++) {
		const char *eol = strchr(p, '\n');
		size_t n = eol ? (size_t)(eol - p) : strlen(p);
		char *l = l7_strndup(x->a, p, n), *hash = strchr(l, '#');
		if (hash)
			*hash = 0;
		char *save, *name = strtok_r(l, " \t\r", &save);
		struct l7_loc loc = l7_loc_of_line(s, line);
		int id = -1;
		for (int i = 0; name && i < x->nids; i++)
			if (!strcmp(x->ids[i].name, name))
				id = i;
		if (name && id < 0) {
			l7_diag(x->d, L7_ERROR, loc, "identity '%s' is not one the import makes", name);
			ok = false;
		}
		for (char *a = name ? strtok_r(NULL, " \t\r", &save) : NULL; a && id >= 0; a = strtok_r(NULL, " \t\r", &save)) {
			struct ynode yn = { .kind = Y_SCALAR, .loc = loc, .str = a, .str_len = strlen(a) };
			const char *c = cidr_text(x, &yn, "an address");
			if (!c) {
				ok = false;
				continue;
			}
			addrs[id] = addrs[id] ? xprintf(x, "%s, %s", addrs[id], c) : c;
		}
		p += n + (eol ? 1 : 0);
	}
	return ok;
}

/* What a Jwt's key_file setting holds (frontend/state.c: 63 bytes): a longer name would be an
 * import that does not compile (reliability.fuzz_import: a 60-byte provider name). */
#define KEY_FILE_MAX 63

static const char *key_path(struct ictx *x, const char *name, bool full)
{
	const char *out = x->o->out_path && strcmp(x->o->out_path, "-") ? x->o->out_path : "policy.l7";
	const char *slash = strrchr(out, '/'), *base = slash ? slash + 1 : out, *dot = strrchr(base, '.');
	int stem = (int)(dot && dot != base ? (size_t)(dot - base) : strlen(base));
	int dir = slash ? (int)(slash - out + 1) : 0;
	const char *file = xprintf(x, "%.*s.%s.key", stem, base, name);
	if (strlen(file) > KEY_FILE_MAX) {   /* the stem, cut, and a hash of the name: still one file per Jwt */
		unsigned long long h = l7_fnv1a(L7_FNV_BASIS, name, strlen(name));
		file = xprintf(x, "%.*s.%016llx.key", stem < KEY_FILE_MAX - 22 ? stem : KEY_FILE_MAX - 22, base, h);
	}
	return full ? xprintf(x, "%.*s%s", dir, out, file) : file;
}

/* one trailing "\n" (or "\r\n") is stripped by l7run: end the key so that its bytes survive */
static int write_key(struct ictx *x, const struct jwt *j)
{
	const char *path = key_path(x, j->name, true);
	FILE *f = fopen(path, "wb");
	if (!f) {
		l7_diag(x->d, L7_ERROR, (struct l7_loc){ 0 }, "cannot write key file '%s': %s", path, strerror(errno));
		return -1;
	}
	fwrite(j->key, 1, j->key_len, f);
	fputs(j->key_len && j->key[j->key_len - 1] == '\r' ? "\r\n" : "\n", f);
	fclose(f);
	return 0;
}

int emit(struct ictx *x, FILE *out)
{
	struct em e = { .x = x };
	for (int i = 0; i < x->npols; i++)
		x->need_fallback |= x->pols[i]->k == PK_CUSTOM && !x->pols[i]->commented && x->pols[i]->nrules;
	if (!workloads(&e))
		return 1;
	if (!x->nwls) {
		l7_diag(x->d, L7_ERROR, (struct l7_loc){ 0 }, "nothing to import: no policy in the input");
		return 1;
	}
	if (x->need_fallback)
		unique(&e, "proxy");
	for (int p = 0; p < x->npols; p++)
		for (int k = 0; k < x->pols[p]->njwts; k++)
			x->jwts[x->pols[p]->jwts[k]].name = ident(&e, "jwt", x->pols[p]->ns, x->pols[p]->name);
	jwt_sets(&e);
	if (x->njwts && x->o->out_path && !strcmp(x->o->out_path, "-"))
		l7_diag(x->d, L7_ERROR, (struct l7_loc){ 0 }, "the JWT keys are written next to the output: give -o FILE");
	const char **addrs = l7_alloc(x->a, sizeof(char *) * (size_t)(x->nids + 1));
	read_identities(&e, addrs);
	e.allow_live = l7_alloc(x->a, sizeof(bool) * (size_t)(e.nsvcs + 1));
	for (int s = 0; s < e.nsvcs; s++) {
		const struct klass *k = &x->wls[e.svcs[s].w];
		struct group one = { &s, 1, k->jwtset, e.svcs[s].port };
		for (int p = 0; p < x->npols; p++) {
			const struct ipol *pp = x->pols[p];
			if (pp->k != PK_ALLOW || pp->commented || pp->audited || !applies(pp, k))
				continue;
			for (int r = 0; r < pp->nrules; r++)
				e.allow_live[s] |= bind(&e, pp->rules[r].cond, &one)->k != CK_FALSE;
		}
	}
	if (x->d->errors)
		return 1;

	x->nclaim_names = 0;
	x->count_claims = true;
	char *buf = NULL;
	size_t len = 0;
	e.o = open_memstream(&buf, &len);
	FILE *o = e.o;
	fprintf(o, "// Imported by `l7c import` (docs/import.md) from:\n");
	for (int p = 0; p < x->npols; p++)
		fprintf(o, "//   %s (%s)\n", x->pols[p]->title, x->pols[p]->where);
	fprintf(o, "// Import again rather than edit.\n//\n// Workloads: l7run serves each at a service, one per port, and forwards to its backend.\n");
	fprintf(o, "// A pod belongs to the most specific workload whose labels it carries.\n");
	for (int w = 0; w < x->nwls; w++)
		fprintf(o, "//   %-28s %s\n", x->wls[w].name, x->wls[w].desc);
	if (x->nids) {
		fprintf(o, "//\n// Caller identities: give each its callers' addresses (l7run --identities FILE, one line\n"
			"// each: NAME ADDRESS...). A caller belongs to the most specific identity whose labels it\n"
			"// carries; a caller of none is `external`.\n");
		for (int i = 0; i < x->nids; i++)
			fprintf(o, "//   %-28s %s%s\n", x->ids[i].name, x->ids[i].l->n ? "" : "callers of the mesh with no other identity",
				x->ids[i].l->n ? x->ids[i].desc : "");
	}
	fprintf(o, "\n");
	for (int s = 0; s < e.nsvcs; s++)
		fprintf(o, "service %s = %s:%d;\nupstream %s = %s:%d;\n", e.svcs[s].name, ip_text(x, e.svcs[s].listen_ip), e.svcs[s].port,
			e.svcs[s].backend, ip_text(x, e.svcs[s].backend_ip), e.svcs[s].port);
	if (x->need_fallback)
		fprintf(o, "fallback proxy = %s:%d;   // CUSTOM policies: the slow path that asks their provider\n",
			ip_text(x, x->o->fallback_ip), x->o->fallback_port);
	for (int i = 0; i < x->nids; i++)
		fprintf(o, "identity %s = [%s];\n", x->ids[i].name, addrs[i] ? addrs[i] : "");
	for (int j = 0; j < x->njwts; j++) {
		const struct jwt *jw = &x->jwts[j];
		fprintf(o, "Jwt %s { key_file = %s; issuer = %s;", jw->name, l7_quote(x, key_path(x, jw->name, false), strlen(key_path(x, jw->name, false))),
			l7_quote(x, jw->issuer, strlen(jw->issuer)));
		if (jw->audience)
			fprintf(o, " audience = %s;", l7_quote(x, jw->audience, strlen(jw->audience)));
		if (strcasecmp(jw->header, "authorization"))
			fprintf(o, " header = %s;", l7_quote(x, jw->header, strlen(jw->header)));
		fprintf(o, " leeway = 60; }   // Envoy's clock skew\n");
	}
	/* first the audited policies: Audit(request) decides nothing, so they see every request,
	 * also those a later policy denies */
	for (int p = 0; p < x->npols; p++)
		if (x->pols[p]->audited)
			authz(&e, x->pols[p]);
	for (int k = 0; k <= PK_AUDIT; k++) {
		if (k == PK_AUTHN) {
			for (int s = 0; s < x->njwtsets; s++)
				authn(&e, s);
			continue;
		}
		if (k == PK_CILIUM) {
			for (int w = 0; w < x->nwls; w++)
				cilium_workload(&e, w);
			continue;
		}
		for (int p = 0; p < x->npols; p++) {
			const struct ipol *pp = x->pols[p];
			bool commented = pp->commented;
			if (pp->audited)
				continue;
			if ((int)pp->k == k && !commented && pp->k != PK_AUDIT) {
				authz(&e, pp);
			} else if (k == PK_AUDIT && commented) {
				x->count_claims = false;   /* comments read no claim */
				authz(&e, pp);
				x->count_claims = true;
			}
		}
	}
	fprintf(o, "\n// Routes: each workload's requests go to its backend.\n");
	for (int s = 0; s < e.nsvcs; s++) {
		struct group g = { &s, 1, -1, 0 };
		policy_head(&e, "", ident(&e, "route", e.svcs[s].name, NULL), &g, false);
		fprintf(o, "  Route(request, %s);\n}\n", e.svcs[s].backend);
	}
	fclose(o);
	if (x->nclaim_names > L7_MAX_CLAIMS)
		l7_diag(x->d, L7_ERROR, (struct l7_loc){ 0 }, "the policies read %d claims of Jwt instances (%s, ...): the data plane "
			"reads at most %d", x->nclaim_names, x->claim_names[0], L7_MAX_CLAIMS);
	int rc = 1;
	if (!x->d->errors) {
		rc = 0;
		for (int j = 0; j < x->njwts && x->o->out_path && strcmp(x->o->out_path, "-"); j++)
			rc |= write_key(x, &x->jwts[j]);
		if (!rc)
			fwrite(buf, 1, len, out);
	}
	free(buf);
	bool unaddressed = false;
	for (int i = 0; i < x->nids; i++)
		unaddressed |= !addrs[i];
	if (!rc && unaddressed)
		l7_diag(x->d, L7_NOTE, (struct l7_loc){ 0 }, "%d caller %s addresses at run time: l7run --identities FILE "
			"(the names are listed at the top of the output)", x->nids, x->nids == 1 ? "identity needs" : "identities need");
	return rc;
}
