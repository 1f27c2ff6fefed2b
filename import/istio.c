/* Istio AuthorizationPolicy and RequestAuthentication (security.istio.io/v1 and v1beta1).
 *
 * Semantics followed (istio/api security/v1/authorization_policy.proto): a rule matches when
 * one of its sources, one of its operations and all of its conditions match; fields of a
 * source or an operation are ANDed, the values of one field ORed; strings match exactly, by
 * "prefix*", "*suffix", or "*" (not empty). CUSTOM, then DENY, then ALLOW: a request some
 * CUSTOM policy matches is decided by its provider; one a DENY policy matches is denied; if
 * ALLOW policies apply to the workload, one must match. RequestAuthentication refuses a token
 * that is present and invalid (401); claims and request principals come from valid tokens. */
#include "model.h"

#include <stdlib.h>
#include <string.h>

static const char *must_str(struct ictx *x, const struct ynode *n, const char *what)
{
	return n ? y_str(x, n, what) : NULL;
}

/* The workloads a policy applies to: its namespace's (every namespace's, in the root
 * namespace), those with the selector's labels. */
static struct lset *target_of(struct ictx *x, const struct ynode *spec, const char *ns, bool *ok)
{
	const struct ynode *sel = y_get(spec, "selector");
	struct lset *l = lset_new(x, 0, NULL, NULL);
	*ok = true;
	if (sel && !y_is_null(sel)) {
		if (!walk_fields(x, sel, O_ISEL)) {
			*ok = false;
			return NULL;
		}
		l = lset_from_map(x, y_get(sel, "matchLabels"), false);
		if (!l) {
			*ok = false;
			return NULL;
		}
	}
	if (strcmp(ns, x->o->istio_root))
		l = lset_add(x, l, NS_KEY, ns);
	atom_add(x, &x->wl_atoms, &x->nwl_atoms, l);
	return l;
}

/* ---- sources ---- */

/* A peer principal TD/ns/NS/sa/SA (or a prefix or suffix of one that ends at a '/'): the
 * labels of the callers it names. */
static struct cnode *principal(struct ictx *x, const struct ynode *n, bool ns_only)
{
	const char *v = y_str(x, n, ns_only ? "a namespace" : "a principal");
	if (!v)
		return NULL;
	if (!strcmp(v, "*")) {
		x->any_auth = true;
		struct cnode *c = c_new(x, CK_ANY_AUTH);
		c->m = ns_only;   /* a namespace: not the callers of a principal outside SPIFFE's form */
		return c;
	}
	const char *k[3], *val[3];
	int nk = 0;
	if (ns_only) {
		if (strchr(v, '*')) {
			l7_diag(x->d, L7_ERROR, n->loc, "namespace pattern '%s': callers are told apart by exact namespaces (or *)", v);
			return NULL;
		}
		k[nk] = NS_KEY;
		val[nk++] = v;
	} else {
		size_t len = strlen(v);
		bool pre = len > 1 && v[len - 1] == '*', suf = len > 1 && v[0] == '*';
		char *body = l7_strndup(x->a, v + suf, len - pre - suf);
		/* the components: TD ns NS sa SA, as many as are given */
		char *part[8];
		int np = 0;
		for (char *s = body; np < 8;) {
			part[np++] = s;
			char *sl = strchr(s, '/');
			if (!sl)
				break;
			*sl = 0;
			s = sl + 1;
		}
		bool spiffe = false;
		if (!pre && !suf && np == 5 && !strcmp(part[1], "ns") && !strcmp(part[3], "sa"))
			spiffe = *part[0] && *part[2] && *part[4];
		else if (pre && np >= 2 && !*part[np - 1])   /* "TD/", "TD/ns/NS/", "TD/ns/NS/sa/" */
			spiffe = (np == 2 && *part[0]) || (np == 4 && !strcmp(part[1], "ns") && *part[2]) ||
				 (np == 5 && !strcmp(part[1], "ns") && *part[2] && !strcmp(part[3], "sa"));
		else if (suf && np >= 3 && !*part[0])   /* "/sa/SA", "/ns/NS/sa/SA" */
			spiffe = (np == 3 && !strcmp(part[1], "sa") && *part[2]) ||
				 (np == 5 && !strcmp(part[1], "ns") && *part[2] && !strcmp(part[3], "sa") && *part[4]);
		if (spiffe && !suf) {
			if (strcmp(part[0], "cluster.local")) {   /* Istio's default trust domain: every caller's */
				k[nk] = TD_KEY;
				val[nk++] = part[0];
			}
			if (np >= 4) {
				k[nk] = NS_KEY;
				val[nk++] = part[2];
			}
			if (np == 5 && *part[4]) {
				k[nk] = SA_KEY;
				val[nk++] = part[4];
			}
		} else if (spiffe) {
			if (np == 5) {
				k[nk] = NS_KEY;
				val[nk++] = part[2];
			}
			k[nk] = SA_KEY;
			val[nk++] = part[np - 1];
		} else if (!strchr(v, '*')) {   /* not SPIFFE: a principal of its own */
			k[nk] = PRINCIPAL_KEY;
			val[nk++] = v;
		} else {
			l7_diag(x->d, L7_ERROR, n->loc,
				"principal pattern '%s': callers are told apart by trust domain, namespace and service account; "
				"a prefix or suffix must end at a '/' (TD/ns/NS/*, */sa/SA)", v);
			return NULL;
		}
	}
	struct lset *l = lset_new(x, nk, k, val);
	atom_add(x, &x->id_atoms, &x->nid_atoms, l);
	return c_caller(x, l);
}

/* request.auth.principal "ISS/SUB" of a valid token: its iss and sub claims. */
static struct cnode *claim(struct ictx *x, const char *name, enum smatch m, const char *v)
{
	struct cnode *c = c_new(x, CK_CLAIM);
	c->claim = name;
	c->m = m;
	c->val = v;
	return c;
}

/* request.auth.principal "ISS/SUB" of a valid token: bound per Jwt instance, whose issuer is
 * known, to compares of its sub claim (cond.c). */
static struct cnode *request_principal(struct ictx *x, const struct ynode *n)
{
	const char *v = y_str(x, n, "a request principal");
	if (!v)
		return NULL;
	struct cnode *c = c_new(x, CK_REQP);
	c->m = smatch_of(x, v, &c->val);
	if (!match_ok(x, c->m, c->val, false, n->loc))   /* its sub compare, at worst as long */
		return NULL;
	return c;
}

typedef struct cnode *(*value_fn)(struct ictx *x, const struct ynode *n, const void *arg);

/* values: one of them; notValues: none of them; absent: no constraint (NULL: an error) */
static struct cnode *one_of(struct ictx *x, const struct ynode *list, const char *what, value_fn f, const void *arg)
{
	int n;
	struct ynode **it = y_list(x, list, what, &n);
	if (list && !it && !y_is_null(list))
		return NULL;
	struct cnode *c = c_new(x, CK_OR);
	bool ok = true;
	for (int i = 0; i < n; i++) {
		struct cnode *v = f(x, it[i], arg);
		ok &= v != NULL;
		if (v)
			c = c_bin(x, CK_OR, c, v);
	}
	return ok ? c : NULL;
}

static struct cnode *v_principal(struct ictx *x, const struct ynode *n, const void *arg)
{
	(void)arg;
	return principal(x, n, false);
}
static struct cnode *v_namespace(struct ictx *x, const struct ynode *n, const void *arg)
{
	(void)arg;
	return principal(x, n, true);
}
static struct cnode *v_request_principal(struct ictx *x, const struct ynode *n, const void *arg)
{
	(void)arg;
	return request_principal(x, n);
}
static struct cnode *v_ip(struct ictx *x, const struct ynode *n, const void *arg)
{
	(void)arg;
	return source_in(x, (struct ynode **)&n, 1, "an IP block");
}
static struct cnode *v_string(struct ictx *x, const struct ynode *n, const void *arg)   /* arg: field, ci */
{
	const char *const *fa = arg;
	const char *v = y_str(x, n, "a value");
	if (!v)
		return NULL;
	if (!strcmp(fa[0], "request.path") && (strstr(v, "{*}") || strstr(v, "{**}"))) {
		l7_diag(x->d, L7_ERROR, n->loc, "path template '%s': templates ({*}, {**}) are not supported", v);
		return NULL;
	}
	const char *lit;
	enum smatch m = smatch_of(x, v, &lit);
	if (!match_ok(x, m, lit, fa[1] != NULL, n->loc))
		return NULL;
	return c_match(x, fa[0], m, lit, fa[1] != NULL);
}
static struct cnode *v_claim(struct ictx *x, const struct ynode *n, const void *arg)
{
	const char *v = y_str(x, n, "a value"), *lit;
	if (!v)
		return NULL;
	enum smatch m = smatch_of(x, v, &lit);
	if (!match_ok(x, m, lit, false, n->loc))
		return NULL;
	return claim(x, arg, m, lit);
}
struct portarg {
	struct ipol *p;
};
static struct cnode *v_port(struct ictx *x, const struct ynode *n, const void *arg)
{
	const struct portarg *pa = arg;
	const char *v = y_str(x, n, "a port");
	if (!v)
		return NULL;
	char *e;
	long port = strtol(v, &e, 10);
	if (*e || !*v || port < 1 || port > 65535) {
		l7_diag(x->d, L7_ERROR, n->loc, "port '%s' is not a port number", v);
		return NULL;
	}
	note_port(x, pa->p, (int)port);
	return c_port(x, (int)port, (int)port);
}

/* `key` and `notKey` of a mapping: (one of key) and (none of notKey). */
static struct cnode *pair(struct ictx *x, const struct ynode *m, const char *key, value_fn f, const void *arg,
			  struct cnode *acc)
{
	char notkey[64];
	snprintf(notkey, sizeof notkey, "not%c%s", key[0] & ~32, key + 1);
	const struct ynode *yes = y_get(m, key), *no = y_get(m, notkey);
	bool ok = acc != NULL;   /* a field after a bad one is still read, for its own errors */
	if (yes) {
		struct cnode *c = one_of(x, yes, key, f, arg);
		ok &= c != NULL;
		if (ok)
			acc = c_bin(x, CK_AND, acc, c);
	}
	if (no) {
		struct cnode *c = one_of(x, no, notkey, f, arg);
		ok &= c != NULL;
		if (ok)
			acc = c_bin(x, CK_AND, acc, c_not(x, c));
	}
	return ok ? acc : NULL;
}

static void remote_warning(struct ictx *x, const struct ynode *m, const char *key)
{
	const struct ynode *k = y_key(m, key);
	if (k)
		l7_diag(x->d, L7_WARNING, k->loc, "%s: matched against the connection's address, as Istio does with "
			"numTrustedProxies 0 (X-Forwarded-For is not read)", key);
}

static struct cnode *source(struct ictx *x, const struct ynode *s)
{
	if (y_is_null(s))
		return c_new(x, CK_TRUE);
	if (!walk_fields(x, s, O_ASOURCE))
		return NULL;
	struct cnode *c = c_new(x, CK_AND);
	c = pair(x, s, "principals", v_principal, NULL, c);
	c = pair(x, s, "requestPrincipals", v_request_principal, NULL, c);
	c = pair(x, s, "namespaces", v_namespace, NULL, c);
	c = pair(x, s, "ipBlocks", v_ip, NULL, c);
	c = pair(x, s, "remoteIpBlocks", v_ip, NULL, c);
	remote_warning(x, s, "remoteIpBlocks");
	remote_warning(x, s, "notRemoteIpBlocks");
	return c;
}

static struct cnode *operation(struct ictx *x, struct ipol *p, const struct ynode *o)
{
	if (y_is_null(o))
		return c_new(x, CK_TRUE);
	if (!walk_fields(x, o, O_AOP))
		return NULL;
	static const char *const host[] = { "request.host", "ci" }, *const method[] = { "request.method", NULL },
				  *const path[] = { "request.path", NULL };
	struct portarg pa = { p };
	struct cnode *c = c_new(x, CK_AND);
	c = pair(x, o, "hosts", v_string, host, c);
	c = pair(x, o, "ports", v_port, &pa, c);
	c = pair(x, o, "methods", v_string, method, c);
	c = pair(x, o, "paths", v_string, path, c);
	return c;
}

/* when[]: one condition */
static struct cnode *condition(struct ictx *x, struct ipol *p, const struct ynode *cn)
{
	if (!walk_fields(x, cn, O_ACOND))
		return NULL;
	const struct ynode *kn = y_get(cn, "key");
	const char *key = must_str(x, kn, "key"), *note;
	if (!kn) {
		l7_diag(x->d, L7_ERROR, cn->loc, "a condition needs a key");
		return NULL;
	}
	if (!key)
		return NULL;
	if (!y_get(cn, "values") && !y_get(cn, "notValues")) {
		l7_diag(x->d, L7_ERROR, cn->loc, "condition '%s' has neither values nor notValues", key);
		return NULL;
	}
	enum fstatus st;
	const char *pat = when_find(key, &st, &note);
	if (!pat) {
		l7_diag(x->d, L7_ERROR, kn->loc, "unknown condition key '%s' (Istio ignores keys it does not know; l7c does not)", key);
		return NULL;
	}
	if (st == FS_ERR) {
		l7_diag(x->d, L7_ERROR, kn->loc, "%s: %s", key, note);
		return NULL;
	}
	const char *open = strchr(key, '[');
	char *inner = open ? l7_strndup(x->a, open + 1, strlen(open + 1) - 1) : NULL;
	struct portarg pa = { p };
	value_fn f = NULL;
	const void *arg = NULL;
	if (!strncmp(pat, "request.headers", 15)) {
		if (strchr(inner, '[') || strchr(inner, ']')) {
			l7_diag(x->d, L7_ERROR, kn->loc, "'%s' is not a header name", inner);
			return NULL;
		}
		note_header(x, inner, kn->loc);
		const char *field = xprintf(x, "request.header(%s)", l7_quote(x, inner, strlen(inner)));
		const char **a = l7_alloc(x->a, sizeof(char *) * 2);
		a[0] = field;
		a[1] = NULL;
		f = v_string;
		arg = a;
	} else if (!strncmp(pat, "request.auth.claims", 19) || !strcmp(key, "request.auth.audiences") ||
		   !strcmp(key, "request.auth.presenter")) {
		if (inner && (strchr(inner, '[') || strchr(inner, ']'))) {
			l7_diag(x->d, L7_ERROR, kn->loc, "nested claim in '%s': only top-level string claims are read", key);
			return NULL;
		}
		f = v_claim;
		arg = inner ? inner : !strcmp(key, "request.auth.audiences") ? "aud" : "azp";
		if (p->k == PK_DENY || y_get(cn, "notValues"))
			l7_diag(x->d, L7_WARNING, kn->loc, "%s: l7c reads string claims only; a token whose claim '%s' is a list or a "
				"number does not match%s", key, (const char *)arg,
				p->k == PK_DENY ? ", so this DENY rule lets it through" : " values, so it matches notValues");
	} else if (!strcmp(key, "request.auth.principal")) {
		f = v_request_principal;
	} else if (!strcmp(key, "source.ip") || !strcmp(key, "remote.ip")) {
		f = v_ip;
		if (!strcmp(key, "remote.ip"))
			l7_diag(x->d, L7_WARNING, kn->loc, "remote.ip: matched against the connection's address, as Istio does with "
				"numTrustedProxies 0 (X-Forwarded-For is not read)");
	} else if (!strcmp(key, "source.namespace")) {
		f = v_namespace;
	} else if (!strcmp(key, "source.principal")) {
		f = v_principal;
	} else if (!strcmp(key, "destination.port")) {
		f = v_port;
		arg = &pa;
	}
	if (!f) {
		l7_diag(x->d, L7_ERROR, kn->loc, "condition key '%s' is not supported", key);
		return NULL;
	}
	struct cnode *c = c_new(x, CK_AND);
	if (y_get(cn, "values")) {
		struct cnode *v = one_of(x, y_get(cn, "values"), "values", f, arg);
		if (!v)
			return NULL;
		c = c_bin(x, CK_AND, c, v);
	}
	if (y_get(cn, "notValues")) {
		struct cnode *v = one_of(x, y_get(cn, "notValues"), "notValues", f, arg);
		if (!v)
			return NULL;
		c = c_bin(x, CK_AND, c, c_not(x, v));
	}
	return c;
}

static struct cnode *rule(struct ictx *x, struct ipol *p, const struct ynode *r)
{
	if (y_is_null(r) || (r->kind == Y_MAP && !r->n))
		return c_new(x, CK_TRUE);   /* an empty rule matches every request */
	if (!walk_fields(x, r, O_ARULE))
		return NULL;
	struct cnode *c = c_new(x, CK_AND);
	int n;
	bool ok = true;   /* every part is read, for all of its errors */
	static const char *const parts[] = { "from", "to" };
	for (int k = 0; k < 2; k++) {
		struct ynode **it = y_list(x, y_get(r, parts[k]), parts[k], &n);
		if (!n)
			continue;   /* not set: any source, any operation */
		struct cnode *any = c_new(x, CK_OR);
		for (int i = 0; i < n; i++) {
			if (!walk_fields(x, it[i], k ? O_ATO : O_AFROM)) {
				ok = false;
				continue;
			}
			const struct ynode *inner = y_get(it[i], k ? "operation" : "source");
			struct cnode *s = k ? operation(x, p, inner) : source(x, inner);
			ok &= s != NULL;
			if (s)
				any = c_bin(x, CK_OR, any, s);
		}
		c = c_bin(x, CK_AND, c, any);
	}
	struct ynode **w = y_list(x, y_get(r, "when"), "when", &n);
	for (int i = 0; i < n; i++) {
		struct cnode *cc = condition(x, p, w[i]);
		ok &= cc != NULL;
		if (cc)
			c = c_bin(x, CK_AND, c, cc);
	}
	return ok ? c : NULL;
}

void istio_authz(struct ictx *x, const struct ynode *doc, const char *ns, const char *name, const struct ynode *meta)
{
	const struct ynode *spec = y_get(doc, "spec");
	if (spec && !y_is_null(spec) && !walk_fields(x, spec, O_APSPEC))
		return;
	bool ok;   /* targetRef(s): reported by the table; the rest is still read */
	struct lset *target = target_of(x, spec, ns, &ok);
	if (!ok)
		return;
	const struct ynode *an = y_get(spec, "action");
	const char *action = an ? y_str(x, an, "action") : "ALLOW";
	if (!action)
		return;
	static const char *const actions[] = { "ALLOW", "DENY", "AUDIT", "CUSTOM" };
	static const enum pkind kinds[] = { PK_ALLOW, PK_DENY, PK_AUDIT, PK_CUSTOM };
	int a = -1;
	for (int i = 0; i < 4; i++)
		if (!strcmp(action, actions[i]))
			a = i;
	if (a < 0) {
		l7_diag(x->d, L7_ERROR, an->loc, "action '%s': expected ALLOW, DENY, AUDIT or CUSTOM", action);
		return;
	}
	struct ipol *p = pol_new(x, kinds[a], "AuthorizationPolicy", ns, name, doc->loc);
	p->target = target;
	const struct ynode *prov = y_get(spec, "provider");
	if (prov && walk_fields(x, prov, O_APPROVIDER))
		p->provider = must_str(x, y_get(prov, "name"), "provider.name");
	if (kinds[a] == PK_CUSTOM && !p->provider) {
		l7_diag(x->d, L7_ERROR, an->loc, "action CUSTOM needs provider.name (the external authorizer)");
		return;
	}
	if (kinds[a] != PK_CUSTOM && prov)
		l7_diag(x->d, L7_ERROR, y_key(spec, "provider")->loc, "provider is for action CUSTOM only");
	/* Istio's dry run: the policy is evaluated and logged, not enforced */
	const struct ynode *dry = y_get(y_get(meta, "annotations"), "istio.io/dry-run");
	if (dry && dry->kind == Y_SCALAR && !strcmp(dry->str, "true")) {
		if (kinds[a] == PK_CUSTOM) {
			p->commented = true;
			p->why_commented = "istio.io/dry-run";
			l7_diag(x->d, L7_WARNING, dry->loc, "istio.io/dry-run: the policy is not enforced; it is written as a comment");
		} else {   /* what it would deny is audited: counted and logged, and judged on */
			p->audited = true;
			l7_diag(x->d, L7_WARNING, dry->loc, "istio.io/dry-run: the policy is not enforced; what it would deny is "
				"audited (Audit(request))");
		}
	}
	if (kinds[a] == PK_AUDIT)   /* Istio's AUDIT decides nothing: the requests it matches are audited */
		p->audited = true;
	int n;
	struct ynode **rules = y_list(x, y_get(spec, "rules"), "rules", &n);
	p->rules = l7_alloc(x->a, sizeof(*p->rules) * (size_t)(n + 1));
	for (int i = 0; i < n; i++) {
		struct cnode *c = rule(x, p, rules[i]);
		if (!c)
			continue;
		struct irule *r = &p->rules[p->nrules++];
		r->cond = c;
		r->comment = xprintf(x, "rules[%d] (%s)", i, where_of(x, rules[i]->loc));
		r->uses_jwt = c_uses(c, CK_CLAIM);
	}
}

/* ---- RequestAuthentication ---- */

static int b64url(const char *s, unsigned char *out, size_t cap)
{
	size_t n = 0;
	unsigned acc = 0;
	int bits = 0;
	for (; *s && *s != '='; s++) {
		const char *al = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
		const char *p = strchr(al, *s);
		if (!p)
			return -1;
		acc = acc << 6 | (unsigned)(p - al);
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			if (n == cap)
				return -1;
			out[n++] = (unsigned char)(acc >> bits);
		}
	}
	return (int)n;
}

/* The oct keys of an inline JWKS (its JSON read as YAML, which JSON is): each as raw bytes.
 * Positions inside the JSON are reported as "FILE:LINE: jwks:LINE:COL". */
static int jwks_keys(struct ictx *x, const struct ynode *jn, const unsigned char **keys, size_t *lens, int cap)
{
	if (jn->kind != Y_SCALAR) {
		l7_diag(x->d, L7_ERROR, jn->loc, "jwks must be a string (a JSON Web Key Set)");
		return -1;
	}
	struct l7_source *js = l7_source_from_string(xprintf(x, "%s:%u: jwks", jn->loc.src->path, jn->loc.line), jn->str);
	int errors = x->d->errors;
	struct ydoc *docs;
	int nd = y_load(x->a, js, &docs, x->d);
	const struct ynode *root = nd == 1 ? docs[0].root : NULL;
	int n = 0, nk = 0;
	if (x->d->errors == errors && (!root || root->kind != Y_MAP || !y_get(root, "keys")))
		l7_diag(x->d, L7_ERROR, jn->loc, "jwks is not a JSON Web Key Set ({\"keys\": [...]})");
	struct ynode **ks = x->d->errors == errors ? y_list(x, y_get(root, "keys"), "jwks keys", &n) : NULL;
	if (ks && !n)
		l7_diag(x->d, L7_ERROR, jn->loc, "jwks has no keys");
	for (int i = 0; i < n && x->d->errors == errors; i++) {
		if (!walk_fields(x, ks[i], O_JWK) || x->d->errors != errors)
			break;
		const struct ynode *kn = y_get(ks[i], "kty"), *an = y_get(ks[i], "alg"), *un = y_get(ks[i], "use");
		const char *kty = kn ? y_str(x, kn, "kty") : "", *alg = an ? y_str(x, an, "alg") : "HS256";
		const char *use = un ? y_str(x, un, "use") : "sig", *k = y_get(ks[i], "k") ? y_str(x, y_get(ks[i], "k"), "k") : NULL;
		if (!kty || !alg || !use)
			break;
		if (strcmp(kty, "oct"))
			l7_diag(x->d, L7_ERROR, kn ? kn->loc : ks[i]->loc, "kty '%s' is not supported: l7c verifies HS256 (kty oct) only%s",
				kty, !strcmp(kty, "RSA") ? "; RS256 keys are not" : "");
		else if (strcmp(alg, "HS256"))
			l7_diag(x->d, L7_ERROR, an->loc, "alg '%s' is not supported: l7c verifies HS256 only", alg);
		else if (strcmp(use, "sig"))
			l7_diag(x->d, L7_ERROR, un->loc, "use '%s': the key must be for signatures (sig)", use);
		else if (!k)
			l7_diag(x->d, L7_ERROR, ks[i]->loc, "an oct key needs \"k\"");
		else if (nk == cap)
			l7_diag(x->d, L7_ERROR, ks[i]->loc, "more than %d keys", cap);
		else {
			unsigned char *buf = l7_alloc(x->a, strlen(k) + 1);
			int len = b64url(k, buf, strlen(k) + 1);
			if (len <= 0)
				l7_diag(x->d, L7_ERROR, y_get(ks[i], "k")->loc, "\"k\" is not base64url");
			keys[nk] = buf;
			lens[nk++] = (size_t)(len > 0 ? len : 0);
		}
	}
	l7_source_free(js);
	return x->d->errors == errors ? nk : -1;
}

void istio_authn(struct ictx *x, const struct ynode *doc, const char *ns, const char *name)
{
	const struct ynode *spec = y_get(doc, "spec");
	if (!spec || !walk_fields(x, spec, O_RASPEC))
		return;
	if (y_get(spec, "targetRef") || y_get(spec, "targetRefs"))
		return;
	bool ok;
	struct lset *target = target_of(x, spec, ns, &ok);
	if (!ok)
		return;
	struct ipol *p = pol_new(x, PK_AUTHN, "RequestAuthentication", ns, name, doc->loc);
	p->target = target;
	int n;
	struct ynode **rules = y_list(x, y_get(spec, "jwtRules"), "jwtRules", &n);
	for (int i = 0; i < n; i++) {
		const struct ynode *r = rules[i];
		if (!walk_fields(x, r, O_JWTRULE))
			continue;
		const char *iss = must_str(x, y_get(r, "issuer"), "issuer");
		if (!y_get(r, "issuer"))
			l7_diag(x->d, L7_ERROR, r->loc, "a JWT rule needs an issuer");   /* and the rest is still read */
		const struct ynode *jn = y_get(r, "jwks");
		if (!jn) {
			if (!y_get(r, "jwksUri"))
				l7_diag(x->d, L7_ERROR, r->loc, "JWT rule of issuer '%s' has no jwks: l7c does not discover keys (OpenID); "
					"give them inline (HS256 oct keys)", iss ? iss : "?");
			continue;
		}
		const char *header = "authorization";
		int nh;
		struct ynode **hs = y_list(x, y_get(r, "fromHeaders"), "fromHeaders", &nh);
		if (nh > 1)
			l7_diag(x->d, L7_ERROR, hs[1]->loc, "fromHeaders: l7c reads a token from one header per rule");
		if (nh >= 1 && walk_fields(x, hs[0], O_JWTHDR)) {
			header = must_str(x, y_get(hs[0], "name"), "name");
			const struct ynode *pn = y_get(hs[0], "prefix");
			const char *pre = pn ? must_str(x, pn, "prefix") : NULL;
			if (!pre || strcasecmp(pre, "Bearer ")) {
				l7_diag(x->d, L7_ERROR, pn ? pn->loc : hs[0]->loc, "fromHeaders: l7c's Jwt reads \"Bearer <token>\" "
					"values only; give prefix: \"Bearer \"");
				continue;
			}
			if (!header)
				continue;
			note_header(x, header, y_get(hs[0], "name")->loc);
		} else if (nh >= 1) {
			continue;
		} else if (y_get(r, "fromParams") || y_get(r, "fromCookies")) {
			l7_diag(x->d, L7_ERROR, r->loc, "this rule reads tokens only from query parameters or cookies, which l7c "
				"cannot read; add fromHeaders");
			continue;
		} else {
			note_header(x, header, r->loc);
		}
		int failure = 0;
		const struct ynode *fm = y_get(r, "failureMode");
		if (fm) {
			const char *f = must_str(x, fm, "failureMode");
			static const char *const modes[] = { "PERMISSIVE", "IGNORE", "STRICT" };
			failure = -1;
			for (int k = 0; f && k < 3; k++)
				if (!strcmp(f, modes[k]))
					failure = k;
			if (failure < 0 && f)
				l7_diag(x->d, L7_ERROR, fm->loc, "failureMode '%s': expected PERMISSIVE, IGNORE or STRICT", f);
			iss = failure < 0 ? NULL : iss;   /* the keys are still read; no instance */
		}
		bool forward = false;
		if (y_get(r, "forwardOriginalToken") && !y_bool(x, y_get(r, "forwardOriginalToken"), "forwardOriginalToken", &forward) &&
		    x->d->errors)
			continue;
		const unsigned char *keys[8];
		size_t lens[8];
		int nk = jwks_keys(x, jn, keys, lens, 8);
		if (nk <= 0 || !iss)
			continue;
		int na;
		struct ynode **auds = y_list(x, y_get(r, "audiences"), "audiences", &na);
		const char **aud = l7_alloc(x->a, sizeof(char *) * (size_t)(na + 1));
		bool auds_ok = true;
		for (int a = 0; a < na; a++)
			auds_ok &= (aud[a] = y_str(x, auds[a], "an audience")) != NULL;
		/* what a Jwt setting holds (frontend/state.c): longer would be an import that does not compile */
		if (iss && strlen(iss) > 63) {
			l7_diag(x->d, L7_ERROR, y_get(r, "issuer")->loc, "issuer is %zu bytes: l7c's Jwt issuer holds at most 63", strlen(iss));
			continue;
		}
		for (int a = 0; a < na && auds_ok; a++)
			if (strlen(aud[a]) > 63) {
				l7_diag(x->d, L7_ERROR, auds[a]->loc, "audience is %zu bytes: l7c's Jwt audience holds at most 63", strlen(aud[a]));
				auds_ok = false;
			}
		if (!auds_ok)
			continue;
		if (na > 1)
			l7_diag(x->d, L7_WARNING, y_key(r, "audiences")->loc, "audiences: with more than one, l7c compares the aud claim "
				"when it is a string; a token whose aud is a list is refused (401)");
		for (int k = 0; k < nk; k++) {   /* one instance per key: claims are read from it */
			struct jwt *j = l7_alloc(x->a, sizeof(*j) * (size_t)(x->njwts + 1));
			if (x->njwts)
				memcpy(j, x->jwts, sizeof(*j) * (size_t)x->njwts);
			x->jwts = j;
			j = &x->jwts[x->njwts];
			j->issuer = iss;
			j->audience = na == 1 ? aud[0] : NULL;
			j->auds = na > 1 ? aud : NULL;
			j->nauds = na > 1 ? na : 0;
			j->header = header;
			j->key = keys[k];
			j->key_len = lens[k];
			j->failure = failure;
			j->forward = forward;
			j->source = xprintf(x, "%s jwtRules[%d] (%s)%s", p->title, i, where_of(x, r->loc),
					    nk > 1 ? xprintf(x, " key %d", k) : "");
			int *js = l7_alloc(x->a, sizeof(int) * (size_t)(p->njwts + 1));
			if (p->njwts)
				memcpy(js, p->jwts, sizeof(int) * (size_t)p->njwts);
			js[p->njwts++] = x->njwts++;
			p->jwts = js;
		}
	}
}
