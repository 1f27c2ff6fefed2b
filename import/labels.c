/* Label sets and the classes built from them.
 *
 * Cilium selects workloads and callers by labels, Istio by namespace, service account and
 * selector labels: all of them are label sets here (a namespace is the label
 * io.kubernetes.pod.namespace, a service account io.cilium.k8s.policy.serviceaccount, as
 * Cilium labels pods). A selector S matches a pod whose labels include S.
 *
 * The data plane knows one identity per caller address (and one service per listening
 * address), so each pod must be put in exactly one class: the classes are the selectors, closed
 * under the union of any two that a pod could carry together (no key with two values), and a
 * pod belongs to the largest class its labels include, which is unique because the classes
 * below one label set are closed under union. A selector then matches a pod exactly when it is
 * included in the pod's class. */
#include "model.h"

#include <stdlib.h>
#include <string.h>

#include "hash.h"

static int cmp_key(const void *a, const void *b)
{
	return strcmp(**(const char *const *const *)a, **(const char *const *const *)b);
}

struct lset *lset_new(struct ictx *x, int n, const char **k, const char **v)
{
	struct lset *s = l7_alloc(x->a, sizeof(*s));
	const char ***pairs = malloc(sizeof(*pairs) * (size_t)(n + 1));
	const char *(*kv)[2] = malloc(sizeof(*kv) * (size_t)(n + 1));
	for (int i = 0; i < n; i++) {
		kv[i][0] = k[i];
		kv[i][1] = v[i];
		pairs[i] = kv[i];
	}
	qsort(pairs, (size_t)n, sizeof(*pairs), cmp_key);
	s->k = l7_alloc(x->a, sizeof(char *) * (size_t)(n + 1));
	s->v = l7_alloc(x->a, sizeof(char *) * (size_t)(n + 1));
	size_t len = 1;
	for (int i = 0; i < n; i++) {
		if (s->n && !strcmp(s->k[s->n - 1], pairs[i][0]))
			continue;   /* callers keep keys distinct */
		s->k[s->n] = pairs[i][0];
		s->v[s->n++] = pairs[i][1];
		len += strlen(pairs[i][0]) + strlen(pairs[i][1]) + 2;
	}
	char *c = l7_alloc(x->a, len);
	for (int i = 0; i < s->n; i++) {
		if (i)
			strcat(c, ",");
		strcat(c, s->k[i]);
		strcat(c, "=");
		strcat(c, s->v[i]);
	}
	s->canon = c;
	free(pairs);
	free(kv);
	return s;
}

const char *lset_get(const struct lset *s, const char *k)
{
	for (int i = 0; i < s->n; i++)
		if (!strcmp(s->k[i], k))
			return s->v[i];
	return NULL;
}

struct lset *lset_add(struct ictx *x, const struct lset *s, const char *k, const char *v)
{
	const char **kk = malloc(sizeof(char *) * (size_t)(s->n + 1)), **vv = malloc(sizeof(char *) * (size_t)(s->n + 1));
	memcpy(kk, s->k, sizeof(char *) * (size_t)s->n);
	memcpy(vv, s->v, sizeof(char *) * (size_t)s->n);
	kk[s->n] = k;
	vv[s->n] = v;
	struct lset *r = lset_new(x, s->n + 1, kk, vv);
	free(kk);
	free(vv);
	return r;
}

bool lset_sub(const struct lset *small, const struct lset *big)
{
	for (int i = 0; i < small->n; i++) {
		const char *v = lset_get(big, small->k[i]);
		if (!v || strcmp(v, small->v[i]))
			return false;
	}
	return true;
}

/* One pod can carry both: no key with two values, and no principal outside SPIFFE's form next
 * to a namespace or a service account (Istio's namespace comes from the SPIFFE principal). */
static bool compatible(const struct lset *a, const struct lset *b)
{
	for (int side = 0; side < 2; side++) {
		const struct lset *p = side ? b : a, *q = side ? a : b;
		if (lset_get(p, PRINCIPAL_KEY) && (lset_get(q, NS_KEY) || lset_get(q, SA_KEY) || lset_get(q, TD_KEY)))
			return false;
	}
	for (int i = 0; i < a->n; i++) {
		const char *v = lset_get(b, a->k[i]);
		if (v && strcmp(v, a->v[i]))
			return false;
	}
	return true;
}

static struct lset *lset_union(struct ictx *x, const struct lset *a, const struct lset *b)
{
	const char **k = malloc(sizeof(char *) * (size_t)(a->n + b->n + 1)), **v = malloc(sizeof(char *) * (size_t)(a->n + b->n + 1));
	int n = 0;
	for (int i = 0; i < a->n; i++, n++) {
		k[n] = a->k[i];
		v[n] = a->v[i];
	}
	for (int i = 0; i < b->n; i++, n++) {
		k[n] = b->k[i];
		v[n] = b->v[i];
	}
	struct lset *r = lset_new(x, n, k, v);
	free(k);
	free(v);
	return r;
}

struct lset *lset_from_map(struct ictx *x, const struct ynode *m, bool cilium)
{
	int n = m && m->kind == Y_MAP ? m->n : 0;
	if (m && !y_is_null(m) && m->kind != Y_MAP) {
		l7_diag(x->d, L7_ERROR, m->loc, "matchLabels must be a mapping of labels");
		return NULL;
	}
	const char **k = malloc(sizeof(char *) * (size_t)(n + 1)), **v = malloc(sizeof(char *) * (size_t)(n + 1));
	bool ok = true;
	for (int i = 0; i < n; i++) {
		const char *key = m->items[2 * i]->str;
		if (cilium && (!strncmp(key, "k8s:", 4) || !strncmp(key, "any:", 4)))
			key += 4;   /* the label's source: every source matches here */
		v[i] = y_str(x, m->items[2 * i + 1], "a label value");
		k[i] = key;
		ok &= v[i] != NULL;
		if (!*key) {
			l7_diag(x->d, L7_ERROR, m->items[2 * i]->loc, "empty label key");
			ok = false;
		}
	}
	struct lset *s = ok ? lset_new(x, n, k, v) : NULL;
	free(k);
	free(v);
	return s;
}

int atom_add(struct ictx *x, struct lset ***atoms, int *n, struct lset *s)
{
	for (int i = 0; i < *n; i++)
		if (!strcmp((*atoms)[i]->canon, s->canon))
			return i;
	struct lset **na = l7_alloc(x->a, sizeof(*na) * (size_t)(*n + 1));
	if (*n)
		memcpy(na, *atoms, sizeof(*na) * (size_t)*n);
	na[*n] = s;
	*atoms = na;
	return (*n)++;
}

/* ---- names ---- */

/* Appends s as identifier characters: letters and digits kept, anything else one '_'. */
static void ident_part(char *out, size_t cap, const char *s)
{
	size_t n = strlen(out);
	if (n && n + 1 < cap && out[n - 1] != '_')
		out[n++] = '_';
	for (; *s && n + 1 < cap; s++) {
		bool alnum = (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9');
		if (alnum)
			out[n++] = *s;
		else if (n && out[n - 1] != '_')
			out[n++] = '_';
	}
	while (n && out[n - 1] == '_')
		n--;
	out[n] = 0;
}

static const char *const reserved[] = {
	"external", "service", "upstream", "fallback", "identity", "policy", "act", "using", "context",
	"import", "if", "else", "true", "false", "request", "response", "balance", "weight", "mesh_all",
};

static const char *base_name(struct ictx *x, const struct lset *l, bool workloads)
{
	char b[160] = "";
	const char *ns = lset_get(l, NS_KEY), *sa = lset_get(l, SA_KEY), *td = lset_get(l, TD_KEY);
	const char *pr = lset_get(l, PRINCIPAL_KEY);
	if (ns)
		ident_part(b, sizeof b, ns);
	if (sa) {
		ident_part(b, sizeof b, "sa");
		ident_part(b, sizeof b, sa);
	}
	if (td && strcmp(td, "cluster.local")) {
		ident_part(b, sizeof b, "td");
		ident_part(b, sizeof b, td);
	}
	if (pr) {
		ident_part(b, sizeof b, "principal");
		ident_part(b, sizeof b, pr);
	}
	for (int i = 0; i < l->n; i++) {
		if (!strcmp(l->k[i], NS_KEY) || !strcmp(l->k[i], SA_KEY) || !strcmp(l->k[i], TD_KEY) ||
		    !strcmp(l->k[i], PRINCIPAL_KEY))
			continue;
		const char *slash = strrchr(l->k[i], '/');
		ident_part(b, sizeof b, slash ? slash + 1 : l->k[i]);
		ident_part(b, sizeof b, l->v[i]);
	}
	if (!b[0])
		strcpy(b, workloads ? "all" : "mesh");
	if (b[0] >= '0' && b[0] <= '9') {
		memmove(b + 1, b, strlen(b) + 1);
		b[0] = 'n';
	}
	b[40] = 0;   /* long names get their hash anyway (below) */
	return xprintf(x, "%s", b);
}

const char *class_desc(struct ictx *x, const struct lset *l)
{
	const char *s = "";
	const char *ns = lset_get(l, NS_KEY), *sa = lset_get(l, SA_KEY), *td = lset_get(l, TD_KEY);
	const char *pr = lset_get(l, PRINCIPAL_KEY);
	if (l->n == 3 && ns && sa && td)   /* an Istio principal */
		return xprintf(x, "principal %s/ns/%s/sa/%s", td, ns, sa);
	for (int i = 0; i < l->n; i++)
		if (strcmp(l->k[i], NS_KEY) && strcmp(l->k[i], SA_KEY) && strcmp(l->k[i], TD_KEY) && strcmp(l->k[i], PRINCIPAL_KEY))
			s = xprintf(x, "%s%s%s=%s", s, *s ? ", " : "", l->k[i], l->v[i]);
	if (sa)
		s = xprintf(x, "%s%sservice account %s", s, *s ? ", " : "", sa);
	if (pr)
		s = xprintf(x, "%s%sprincipal %s", s, *s ? ", " : "", pr);
	if (td)
		s = xprintf(x, "%s%strust domain %s", s, *s ? ", " : "", td);
	if (ns)
		s = xprintf(x, "%s%snamespace %s", s, *s ? " in " : "", ns);
	return *s ? s : "any";
}

bool classes_build(struct ictx *x, struct lset **atoms, int n, bool workloads, struct klass **out, int *nout, int max)
{
	struct lset **c = malloc(sizeof(*c) * (size_t)(max + 1));
	int nc = 0;
	bool ok = true;
	for (int i = 0; i < n && ok; i++) {
		bool dup = false;
		for (int j = 0; j < nc; j++)
			dup |= !strcmp(c[j]->canon, atoms[i]->canon);
		if (dup)
			continue;
		if (nc == max)
			ok = false;
		else
			c[nc++] = atoms[i];
	}
	for (bool changed = ok; changed && ok;) {
		changed = false;
		for (int i = 0; i < nc && ok; i++)
			for (int j = i + 1; j < nc && ok; j++) {
				if (!compatible(c[i], c[j]) || lset_sub(c[i], c[j]) || lset_sub(c[j], c[i]))
					continue;
				struct lset *u = lset_union(x, c[i], c[j]);
				bool dup = false;
				for (int k = 0; k < nc; k++)
					dup |= !strcmp(c[k]->canon, u->canon);
				if (dup)
					continue;
				if (nc == max) {
					ok = false;
					break;
				}
				c[nc++] = u;
				changed = true;
			}
	}
	if (!ok) {
		l7_diag(x->d, L7_ERROR, (struct l7_loc){ 0 },
			"the %s selectors make more than %d %s (one per set of labels a %s can carry together); l7c can serve "
			"at most %d", workloads ? "workload" : "caller", max, workloads ? "workloads" : "caller identities",
			workloads ? "pod" : "caller", max);
		free(c);
		return false;
	}
	struct klass *k = l7_alloc(x->a, sizeof(*k) * (size_t)(nc + 1));
	for (int i = 0; i < nc; i++) {
		k[i].l = c[i];
		k[i].name = base_name(x, c[i], workloads);
		k[i].desc = class_desc(x, c[i]);
		k[i].jwtset = -1;
	}
	/* the same name twice, a long one or a reserved word: every such class gets the hash of its
	 * labels appended (decided on the plain names, so the order of the inputs does not matter) */
	bool *clash = calloc((size_t)nc + 1, sizeof(bool));
	for (int i = 0; i < nc; i++) {
		clash[i] = strlen(k[i].name) >= 40;
		for (int j = 0; j < nc; j++)
			clash[i] |= j != i && !strcmp(k[i].name, k[j].name);
		for (size_t r = 0; r < sizeof(reserved) / sizeof(reserved[0]); r++)
			clash[i] |= !strcmp(k[i].name, reserved[r]);
	}
	for (int i = 0; i < nc; i++)
		if (clash[i])
			k[i].name = xprintf(x, "%s_%06llx", k[i].name, (unsigned long long)(l7_fnv1a(L7_FNV_BASIS, c[i]->canon, strlen(c[i]->canon)) & 0xffffff));
	free(clash);
	*out = k;
	*nout = nc;
	free(c);
	return true;
}
