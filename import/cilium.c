/* CiliumNetworkPolicy and CiliumClusterwideNetworkPolicy: the ingress (allow) and ingressDeny
 * rules of each rule (spec, specs[]), with the L7 HTTP rules of their ports.
 *
 * Semantics followed (Cilium's policy docs and its Envoy filter, cilium/proxy
 * cilium/network_policy.cc): a workload an ingress section selects is in default deny, and a
 * request is allowed if some ingress rule of some rule selecting it allows its caller, its port
 * and, when the port has HTTP rules, one of them; ingressDeny wins over every allow. An HTTP
 * rule's fields are full-match regexes (RE2 in Envoy, POSIX ERE in the docs): path against the
 * whole :path (query included), method, host; headers are presence or exact values. An ingress
 * rule with neither peers nor ports matches nothing; one with ports and no peers, any caller. */
#include "model.h"

#include <stdlib.h>
#include <string.h>

#include "regex_dfa.h"

struct crule {                   /* what the ingress rule being read has so far */
	struct ictx *x;
	struct ipol *p;
	const char *ns;              /* NULL: clusterwide */
	bool deny;
};

/* An IPv4 address or prefix as .l7 text (host bits cleared); NULL reported. */
const char *cidr_text(struct ictx *x, const struct ynode *n, const char *what)
{
	const char *s = y_str(x, n, what);
	if (!s)
		return NULL;
	unsigned a, b, c, dd, len = 32;
	char tail;
	int got = sscanf(s, "%u.%u.%u.%u/%u%c", &a, &b, &c, &dd, &len, &tail);
	if (strchr(s, ':')) {
		l7_diag(x->d, L7_ERROR, n->loc, "'%s': IPv6 is not supported (the data plane is IPv4)", s);
		return NULL;
	}
	if ((got != 4 && got != 5) || (got == 4 && strchr(s, '/')) || a > 255 || b > 255 || c > 255 || dd > 255 || len > 32) {
		l7_diag(x->d, L7_ERROR, n->loc, "'%s' is not an IPv4 address or prefix", s);
		return NULL;
	}
	unsigned ip = a << 24 | b << 16 | c << 8 | dd, mask = len ? ~0u << (32 - len) : 0;
	ip &= mask;
	if (len == 32)
		return xprintf(x, "%u.%u.%u.%u", ip >> 24, ip >> 16 & 255, ip >> 8 & 255, ip & 255);
	return xprintf(x, "%u.%u.%u.%u/%u", ip >> 24, ip >> 16 & 255, ip >> 8 & 255, ip & 255, len);
}

/* "request.source in [a, b]" for a list of address nodes; NULL if one is bad. */
struct cnode *source_in(struct ictx *x, struct ynode **items, int n, const char *what)
{
	const char *list = "";
	bool ok = true;
	for (int i = 0; i < n; i++) {
		const char *c = cidr_text(x, items[i], what);
		ok &= c != NULL;
		if (c)
			list = xprintf(x, "%s%s%s", list, i ? ", " : "", c);
	}
	if (!ok)
		return NULL;
	if (!n)
		return c_new(x, CK_FALSE);
	if (n == 1)
		return strchr(list, '/') ? c_text(x, "request.source in %s", list) : c_cmp(x, "request.source", true, list);
	return c_text(x, "request.source in [%s]", list);
}

/* A selector (endpointSelector, fromEndpoints[]) as labels; ns: the namespace a namespaced
 * policy adds when the selector names none. */
static struct lset *selector(struct ictx *x, const struct ynode *sel, const char *ns, const char *what)
{
	if (sel && y_is_null(sel))
		sel = NULL;
	if (sel && !walk_fields(x, sel, O_CSEL))
		return NULL;
	const struct ynode *ml = y_get(sel, "matchLabels");
	if (y_get(sel, "matchExpressions"))
		return NULL;   /* reported by the table */
	for (int i = 0; ml && ml->kind == Y_MAP && i < ml->n; i++) {
		const char *k = ml->items[2 * i]->str, *colon = strchr(k, ':');
		if (colon && strncmp(k, "k8s:", 4) && strncmp(k, "any:", 4)) {
			l7_diag(x->d, L7_ERROR, ml->items[2 * i]->loc,
				"label source '%.*s:' in %s: only Kubernetes labels (k8s:, any: or none) select workloads here%s",
				(int)(colon - k), k, what, !strncmp(k, "reserved:", 9) ? "; use fromEntities" : "");
			return NULL;
		}
	}
	struct lset *l = lset_from_map(x, ml, true);
	if (l && ns && !lset_get(l, NS_KEY))
		l = lset_add(x, l, NS_KEY, ns);
	return l;
}

static const struct { const char *name; int allow; } entities[] = {
	{ "all", 1 }, { "world", 2 }, { "cluster", 3 }, { "host", 0 }, { "remote-node", 0 },
	{ "kube-apiserver", 0 }, { "ingress", 0 }, { "init", 0 }, { "health", 0 }, { "unmanaged", 0 },
	{ "none", 0 },
};

static struct cnode *entity(struct crule *r, const struct ynode *n)
{
	struct ictx *x = r->x;
	const char *e = y_str(x, n, "an entity");
	if (!e)
		return NULL;
	for (size_t i = 0; i < sizeof(entities) / sizeof(entities[0]); i++) {
		if (strcmp(e, entities[i].name))
			continue;
		switch (entities[i].allow) {
		case 1: return c_new(x, CK_TRUE);
		case 2: return c_text(x, "request.caller == external");
		case 3: x->any_auth = true; return c_new(x, CK_ANY_AUTH);
		default:
			l7_diag(x->d, L7_WARNING, n->loc, "entity '%s' is not a caller l7c tells apart: %s", e,
				r->deny ? "this deny rule matches every caller (fail closed)" : "it matches no caller here");
			return c_new(x, r->deny ? CK_TRUE : CK_FALSE);
		}
	}
	l7_diag(x->d, L7_ERROR, n->loc, "unknown entity '%s'", e);
	return NULL;
}

/* The callers an ingress rule names: fromEndpoints, fromCIDR, fromCIDRSet, fromEntities (any
 * of them); *named false when it names none. */
static struct cnode *peers(struct crule *r, const struct ynode *in, bool *named)
{
	struct ictx *x = r->x;
	struct cnode *any = c_new(x, CK_OR);
	int n;
	bool ok = true;
	*named = false;
	static const char *const keys[] = { "fromEndpoints", "fromCIDR", "fromCIDRSet", "fromEntities" };
	for (int f = 0; f < 4; f++) {
		const struct ynode *v = y_get(in, keys[f]);
		struct ynode **it = y_list(x, v, keys[f], &n);
		*named |= v && !y_is_null(v);
		for (int i = 0; i < n; i++) {
			struct cnode *c = NULL;
			if (f == 0) {
				struct lset *l = selector(x, it[i], r->ns, "fromEndpoints");
				if (l) {
					atom_add(x, &x->id_atoms, &x->nid_atoms, l);
					c = c_caller(x, l);
				}
			} else if (f == 1) {
				c = source_in(x, &it[i], 1, "fromCIDR");
			} else if (f == 2) {
				if (!walk_fields(x, it[i], O_CCIDRSET))
					continue;
				const struct ynode *cidr = y_get(it[i], "cidr");
				int ne;
				struct ynode **ex = y_list(x, y_get(it[i], "except"), "except", &ne);
				if (!cidr) {
					if (!y_get(it[i], "cidrGroupRef") && !y_get(it[i], "cidrGroupSelector"))
						l7_diag(x->d, L7_ERROR, it[i]->loc, "fromCIDRSet entry without cidr");
					ok = false;
					continue;
				}
				struct cnode *in_set = source_in(x, (struct ynode **)&cidr, 1, "cidr");
				struct cnode *out = ne ? source_in(x, ex, ne, "except") : c_new(x, CK_FALSE);
				c = in_set && out ? c_bin(x, CK_AND, in_set, c_not(x, out)) : NULL;
			} else {
				c = entity(r, it[i]);
			}
			if (c)
				any = c_bin(x, CK_OR, any, c);
			else
				ok = false;
		}
	}
	return ok ? any : NULL;
}

/* ---- L7 ---- */

/* A Cilium regex as a condition on field: full match, compiled here first so that a regex
 * l7c refuses is reported at its YAML position; a plain literal becomes an == compare. */
static struct cnode *regex_cond(struct ictx *x, const struct ynode *n, const char *field, const char *what)
{
	const char *re = y_str(x, n, what);
	if (!re)
		return NULL;
	if (!*re)
		return c_new(x, CK_TRUE);   /* "If omitted or empty, all ... are allowed" */
	struct re_dfa dfa;
	struct re_error err;
	if (!re_compile(re, strlen(re), &dfa, &err)) {
		re_free(&dfa);
		if (!re_ok(x, re, n->loc, what))   /* within the limits of all regexes together */
			return NULL;
	} else {
		struct l7_loc l = n->loc;
		/* the caret at the offending byte when the scalar is written as it reads */
		size_t quote = n->plain ? 0 : 1;
		if (l.src && l.start + quote + strlen(re) <= l.src->len && !memcmp(l.src->text + l.start + quote, re, strlen(re))) {
			l.start += (unsigned)(quote + err.pos);
			l.col += (unsigned)(quote + err.pos);
			l.end = l.start + (unsigned)(err.len ? err.len : 1);
		}
		l7_diag(x->d, L7_ERROR, l, "%s regex: %s", what, err.msg);
		return NULL;
	}
	/* ^x$ and x are the same full match; a regex without operators is a string */
	size_t len = strlen(re);
	const char *lit = re;
	if (lit[0] == '^') {
		lit++;
		len--;
	}
	if (len && lit[len - 1] == '$' && (len < 2 || lit[len - 2] != '\\'))
		len--;
	bool plain = len > 0;
	for (size_t i = 0; i < len; i++)
		plain &= !strchr(".[](){}*+?|^$\\", lit[i]);
	if (plain)
		return c_cmp(x, field, true, l7_quote(x, lit, len));
	return c_text(x, "matches(%s, %s)", field, l7_quote(x, re, strlen(re)));
}

static bool header_name_ok(struct ictx *x, const struct ynode *n, const char *name)
{
	bool ok = *name != 0;
	for (const char *p = name; *p; p++)
		ok &= *p > 32 && *p < 127 && !strchr("()<>@,;:\\\"/[]?={}", *p);
	if (!ok)
		l7_diag(x->d, L7_ERROR, n->loc, "'%s' is not a valid header name", name);
	return ok;
}

static const char *const framing[] = { "host", "content-length", "transfer-encoding", "connection", "upgrade" };

static void header_match(struct crule *r, const struct ynode *hm, struct cnode *base, struct cnode **allow,
			 const char *what)
{
	struct ictx *x = r->x;
	if (!walk_fields(x, hm, O_CHDRMATCH)) {
		*allow = NULL;
		return;
	}
	const char *name = y_str(x, y_get(hm, "name"), "name");
	const struct ynode *vn = y_get(hm, "value"), *mn = y_get(hm, "mismatch");
	const char *value = vn ? y_str(x, vn, "value") : "", *mis = mn ? y_str(x, mn, "mismatch") : "";
	if (!y_get(hm, "name"))
		l7_diag(x->d, L7_ERROR, hm->loc, "header match without a name");
	if (!name || !value || !mis || y_get(hm, "secret") || !header_name_ok(x, y_get(hm, "name"), name)) {
		*allow = NULL;
		return;
	}
	note_header(x, name, y_get(hm, "name")->loc);
	const char *qn = l7_quote(x, name, strlen(name)), *qv = l7_quote(x, value, strlen(value));
	struct cnode *match = *value ? c_cmp(x, xprintf(x, "request.header(%s)", qn), true, qv) : c_text(x, "request.has_header(%s)", qn);
	if (!*mis) {   /* the rule requires the match */
		*allow = c_bin(x, CK_AND, *allow, match);
		return;
	}
	const char *op = NULL;
	struct cnode *when = c_not(x, match);
	if (!strcmp(mis, "LOG")) {
		l7_diag(x->d, L7_WARNING, mn->loc, "mismatch LOG: the rule matches without the header, and the mismatch is not "
			"logged (l7c has no access log yet)");
		return;
	} else if (!strcmp(mis, "ADD")) {
		op = "AddHeader";
	} else if (!strcmp(mis, "REPLACE")) {
		op = "SetHeader";
	} else if (!strcmp(mis, "DELETE")) {
		if (!*value) {
			l7_diag(x->d, L7_WARNING, mn->loc, "mismatch DELETE of a presence match does nothing (there is no header to remove)");
			return;
		}
		op = "RemoveHeader";
		when = c_bin(x, CK_AND, c_text(x, "request.has_header(%s)", qn), when);
	} else {
		l7_diag(x->d, L7_ERROR, mn->loc, "mismatch '%s': expected LOG, ADD, DELETE or REPLACE", mis);
		*allow = NULL;
		return;
	}
	for (size_t i = 0; i < sizeof(framing) / sizeof(framing[0]); i++)
		if (!strcasecmp(name, framing[i])) {
			l7_diag(x->d, L7_ERROR, y_get(hm, "name")->loc, "mismatch %s cannot edit %s: the data plane frames or routes by it",
				mis, name);
			*allow = NULL;
			return;
		}
	struct ipol *p = r->p;
	struct mutation *m = l7_alloc(x->a, sizeof(*m) * (size_t)(p->nmuts + 1));
	if (p->nmuts)
		memcpy(m, p->muts, sizeof(*m) * (size_t)p->nmuts);
	m[p->nmuts] = (struct mutation){ c_bin(x, CK_AND, base, when), op, name, value,
					 xprintf(x, "%s: mismatch %s (%s)", what, mis, where_of(x, hm->loc)) };
	p->muts = m;
	p->nmuts++;
}

/* One HTTP rule: the condition that allows (headerMatches without an action included), and the
 * mutations of its headerMatches actions, which run when the rest of it matches. */
static struct cnode *http_rule(struct crule *r, const struct ynode *h, struct cnode *peer_port, const char *what)
{
	struct ictx *x = r->x;
	if (y_is_null(h) || (h->kind == Y_MAP && !h->n))
		return c_new(x, CK_TRUE);   /* {}: every request */
	if (!walk_fields(x, h, O_CHTTP))
		return NULL;
	struct cnode *c = c_new(x, CK_AND);
	bool ok = true;
	static const char *const fields[][2] = { { "method", "request.method" }, { "path", "request.target" }, { "host", "request.host" } };
	for (int i = 0; i < 3; i++) {
		const struct ynode *v = y_get(h, fields[i][0]);
		if (!v)
			continue;
		struct cnode *m = regex_cond(x, v, fields[i][1], fields[i][0]);
		ok &= m != NULL;
		if (m)
			c = c_bin(x, CK_AND, c, m);
	}
	int n;
	struct ynode **hs = y_list(x, y_get(h, "headers"), "headers", &n);
	for (int i = 0; i < n; i++) {
		const char *s = y_str(x, hs[i], "a header");
		if (!s) {
			ok = false;
			continue;
		}
		/* as Cilium: split at the first space; "Name: value" (the ':' trimmed) or "Name" */
		const char *sp = strchr(s, ' ');
		size_t nl = sp ? (size_t)(sp - s) : strlen(s);
		while (sp && nl && s[nl - 1] == ':')
			nl--;
		char *name = l7_strndup(x->a, s, nl);
		if (!header_name_ok(x, hs[i], name)) {
			ok = false;
			continue;
		}
		note_header(x, name, hs[i]->loc);
		const char *qn = l7_quote(x, name, nl);
		c = c_bin(x, CK_AND, c, sp ? c_cmp(x, xprintf(x, "request.header(%s)", qn), true, l7_quote(x, sp + 1, strlen(sp + 1)))
					   : c_text(x, "request.has_header(%s)", qn));
	}
	struct cnode *base = c_bin(x, CK_AND, peer_port, c);
	struct ynode **hm = y_list(x, y_get(h, "headerMatches"), "headerMatches", &n);
	for (int i = 0; i < n; i++) {   /* each reported, even after an error */
		struct cnode *cc = c;
		header_match(r, hm[i], base, &cc, xprintf(x, "%s headerMatches[%d]", what, i));
		ok &= cc != NULL;
		c = cc ? cc : c;
	}
	return ok ? c : NULL;
}

static struct cnode *port_cond(struct crule *r, const struct ynode *pn)
{
	struct ictx *x = r->x;
	if (!walk_fields(x, pn, O_CPORT))
		return NULL;
	const struct ynode *proto = y_get(pn, "protocol"), *port = y_get(pn, "port"), *end = y_get(pn, "endPort");
	const char *pr = proto ? y_str(x, proto, "protocol") : "TCP";
	if (!pr)
		return NULL;
	if (strcasecmp(pr, "TCP") && strcasecmp(pr, "ANY")) {
		if (strcasecmp(pr, "UDP") && strcasecmp(pr, "SCTP")) {
			l7_diag(x->d, L7_ERROR, proto->loc, "protocol '%s': expected TCP, UDP, SCTP or ANY", pr);
			return NULL;
		}
		l7_diag(x->d, L7_WARNING, proto->loc, "protocol %s carries no HTTP: this port %s nothing here", pr,
			r->deny ? "denies" : "allows");
		return c_new(x, CK_FALSE);
	}
	long lo = 0, hi = 0;
	const char *ps = port ? y_str(x, port, "port") : "0";
	if (!ps)
		return NULL;
	char *e;
	lo = strtol(ps, &e, 10);
	if (*e || !*ps || lo < 0 || lo > 65535) {
		l7_diag(x->d, L7_ERROR, port->loc, "port '%s': named ports are not supported; give the number", ps);
		return NULL;
	}
	hi = lo;
	if (end) {
		const char *es = y_str(x, end, "endPort");
		if (!es)
			return NULL;
		hi = strtol(es, &e, 10);
		if (*e || !*es || hi < lo || hi > 65535) {
			l7_diag(x->d, L7_ERROR, end->loc, "endPort '%s' must be a port number not below port %ld", es, lo);
			return NULL;
		}
	}
	if (!lo)
		return c_new(x, CK_TRUE);   /* port 0: every port */
	note_port(x, r->p, (int)lo);
	return c_port(x, (int)lo, (int)hi);
}

/* toPorts[i]: (one of its ports) and (one of its HTTP rules, if it has any) */
static struct cnode *port_rule(struct crule *r, const struct ynode *pr, struct cnode *peer, const char *what)
{
	struct ictx *x = r->x;
	if (!walk_fields(x, pr, O_CPORTRULE))
		return NULL;
	int n;
	bool ok = true;
	struct ynode **ps = y_list(x, y_get(pr, "ports"), "ports", &n);
	struct cnode *ports = n ? c_new(x, CK_OR) : c_new(x, CK_TRUE);
	for (int i = 0; i < n; i++) {
		struct cnode *c = port_cond(r, ps[i]);
		ok &= c != NULL;
		if (c)
			ports = c_bin(x, CK_OR, ports, c);
	}
	const struct ynode *rules = y_get(pr, "rules");
	if (!ok || !rules || y_is_null(rules))
		return ok ? ports : NULL;
	if (r->deny) {
		l7_diag(x->d, L7_ERROR, y_key(pr, "rules")->loc, "ingressDeny rules have no L7 part (Cilium refuses them too)");
		return NULL;
	}
	if (!walk_fields(x, rules, O_CL7))
		return NULL;
	if (y_get(rules, "kafka") || y_get(rules, "dns") || y_get(rules, "l7proto") || y_get(rules, "l7"))
		return NULL;   /* reported by the table */
	struct ynode **hs = y_list(x, y_get(rules, "http"), "http", &n);
	if (!n)
		return ports;   /* no HTTP rules: the port allows every request */
	struct cnode *peer_port = c_bin(x, CK_AND, peer, ports);
	struct cnode *any = c_new(x, CK_OR);
	for (int i = 0; i < n; i++) {
		const char *w = xprintf(x, "%s rules.http[%d]", what, i);
		struct cnode *c = http_rule(r, hs[i], peer_port, w);
		if (!c) {
			ok = false;
			continue;
		}
		c->comment = xprintf(x, "%s (%s)", w, where_of(x, hs[i]->loc));
		any = c_bin(x, CK_OR, any, c);
	}
	return ok ? c_bin(x, CK_AND, ports, any) : NULL;
}

static struct cnode *ingress_rule(struct crule *r, const struct ynode *in, const char *what)
{
	struct ictx *x = r->x;
	if (y_is_null(in) || (in->kind == Y_MAP && !in->n))
		return c_new(x, CK_FALSE);   /* {}: no peer, no port: allows nothing */
	if (!walk_fields(x, in, r->deny ? O_CINGRESSDENY : O_CINGRESS))
		return NULL;
	bool named;
	struct cnode *peer = peers(r, in, &named);
	const struct ynode *tp = y_get(in, "toPorts");
	int n;
	struct ynode **ps = y_list(x, tp, "toPorts", &n);
	if (!peer)
		return NULL;
	if (!named)   /* ports only: every caller */
		peer = c_new(x, tp && n ? CK_TRUE : CK_FALSE);
	if (y_get(in, "icmps") && !tp)
		return c_new(x, CK_FALSE);
	if (!tp || y_is_null(tp))
		return peer;
	struct cnode *ports = c_new(x, CK_OR);
	bool ok = true;
	for (int i = 0; i < n; i++) {
		struct cnode *c = port_rule(r, ps[i], peer, xprintf(x, "%s toPorts[%d]", what, i));
		ok &= c != NULL;
		if (c)
			ports = c_bin(x, CK_OR, ports, c);
	}
	return ok ? c_bin(x, CK_AND, peer, ports) : NULL;
}

static void push_rule(struct ictx *x, struct cnode ***list, const char ***comments, int *n, struct cnode *c, const char *comment)
{
	struct cnode **l = l7_alloc(x->a, sizeof(*l) * (size_t)(*n + 1));
	const char **cm = l7_alloc(x->a, sizeof(*cm) * (size_t)(*n + 1));
	if (*n) {
		memcpy(l, *list, sizeof(*l) * (size_t)*n);
		memcpy(cm, *comments, sizeof(*cm) * (size_t)*n);
	}
	l[*n] = c;
	cm[*n] = comment;
	*list = l;
	*comments = cm;
	(*n)++;
}

/* ns: the policy's namespace (NULL for a clusterwide one) */
static void cilium_rule(struct ictx *x, const struct ynode *rule, const char *kind, const char *ns, const char *name,
			const char *what, struct l7_loc at)
{
	if (!walk_fields(x, rule, O_CRULE))
		return;
	const struct ynode *es = y_get(rule, "endpointSelector");
	if (!es) {
		if (!y_get(rule, "nodeSelector"))
			l7_diag(x->d, L7_ERROR, rule->loc, "%s has no endpointSelector", *what ? "this rule of specs" : "this rule");
		return;
	}
	struct lset *target = selector(x, es, ns, "endpointSelector");
	if (!target)
		return;
	struct ipol *p = pol_new(x, PK_CILIUM, kind, ns, name, at);
	p->target = target;
	if (*what)   /* one of specs[]: named in every comment */
		p->title = xprintf(x, "%s %.*s", p->title, (int)strlen(what) - 1, what);
	atom_add(x, &x->wl_atoms, &x->nwl_atoms, target);
	bool default_deny = true;
	const struct ynode *dd = y_get(rule, "enableDefaultDeny");
	if (dd && walk_fields(x, dd, O_CDEFDENY) && y_get(dd, "ingress"))
		y_bool(x, y_get(dd, "ingress"), "enableDefaultDeny.ingress", &default_deny);
	for (int deny = 0; deny < 2; deny++) {
		const char *key = deny ? "ingressDeny" : "ingress";
		int n;
		struct ynode **items = y_list(x, y_get(rule, key), key, &n);
		struct crule r = { x, p, ns, deny };
		p->default_deny |= n > 0 && default_deny;
		for (int i = 0; i < n; i++) {
			const char *w = xprintf(x, "%s[%d]", key, i);
			struct cnode *c = ingress_rule(&r, items[i], w);
			if (!c)
				continue;
			const char *cm = xprintf(x, "%s %s (%s)", p->title, w, where_of(x, items[i]->loc));
			if (deny)
				push_rule(x, &p->deny, &p->deny_comment, &p->ndeny, c, cm);
			else
				push_rule(x, &p->allow, &p->allow_comment, &p->nallow, c, cm);
		}
	}
}

void cilium_object(struct ictx *x, const struct ynode *doc, const char *kind, const char *ns, const char *name,
		   const struct ynode *meta)
{
	(void)meta;
	const struct ynode *spec = y_get(doc, "spec"), *specs = y_get(doc, "specs");
	if (!spec && !specs) {
		l7_diag(x->d, L7_ERROR, doc->loc, "%s %s has neither spec nor specs", kind, name);
		return;
	}
	if (spec && !y_is_null(spec))
		cilium_rule(x, spec, kind, ns, name, "", doc->loc);
	int n;
	struct ynode **rules = y_list(x, specs, "specs", &n);
	for (int i = 0; i < n; i++)
		cilium_rule(x, rules[i], kind, ns, name, xprintf(x, "specs[%d] ", i), rules[i]->loc);
}
