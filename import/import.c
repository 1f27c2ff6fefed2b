/* l7_import: every document of every file to its reader (cilium.c, istio.c), then the classes
 * of workloads and callers, then the output (emit.c). */
#include "model.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "l7/abi.h"

struct ipol *pol_new(struct ictx *x, enum pkind k, const char *kind, const char *ns, const char *name, struct l7_loc at)
{
	struct ipol *p = l7_alloc(x->a, sizeof(*p));
	p->k = k;
	p->kind = kind;
	p->ns = ns;
	p->name = name;
	p->where = where_of(x, at);
	p->title = ns ? xprintf(x, "%s %s/%s", kind, ns, name) : xprintf(x, "%s %s", kind, name);
	struct ipol **n = l7_alloc(x->a, sizeof(*n) * (size_t)(x->npols + 1));
	if (x->npols)
		memcpy(n, x->pols, sizeof(*n) * (size_t)x->npols);
	n[x->npols++] = p;
	x->pols = n;
	return p;
}

void note_header(struct ictx *x, const char *name, struct l7_loc at)
{
	for (int i = 0; i < x->nheader_names; i++)
		if (!strcasecmp(x->header_names[i], name))
			return;
	const char **n = l7_alloc(x->a, sizeof(*n) * (size_t)(x->nheader_names + 1));
	struct l7_loc *l = l7_alloc(x->a, sizeof(*l) * (size_t)(x->nheader_names + 1));
	if (x->nheader_names) {
		memcpy(n, x->header_names, sizeof(*n) * (size_t)x->nheader_names);
		memcpy(l, x->header_locs, sizeof(*l) * (size_t)x->nheader_names);
	}
	n[x->nheader_names] = name;
	l[x->nheader_names++] = at;
	x->header_names = n;
	x->header_locs = l;
	if (strlen(name) >= L7_MAX_NAME)
		l7_diag(x->d, L7_ERROR, at, "header name '%s' is longer than the %d bytes the data plane reads", name,
			L7_MAX_NAME - 1);
	if (x->nheader_names == L7_MAX_WANTED + 1)
		l7_diag(x->d, L7_ERROR, at, "header '%s' is the %dth distinct header name: the data plane reads at most %d",
			name, x->nheader_names, L7_MAX_WANTED);
}

void note_port(struct ictx *x, struct ipol *p, int port)
{
	int *np = l7_alloc(x->a, sizeof(int) * (size_t)(x->nports_named + 1));
	struct ipol **pp = l7_alloc(x->a, sizeof(*pp) * (size_t)(x->nports_named + 1));
	if (x->nports_named) {
		memcpy(np, x->atom_ports, sizeof(int) * (size_t)x->nports_named);
		memcpy(pp, x->port_pol, sizeof(*pp) * (size_t)x->nports_named);
	}
	np[x->nports_named] = port;
	pp[x->nports_named++] = p;   /* its workloads get a service on the port */
	x->atom_ports = np;
	x->port_pol = pp;
}

static const char *const cilium_kinds[] = { "CiliumNetworkPolicy", "CiliumClusterwideNetworkPolicy" };
static const char *const istio_kinds[] = { "AuthorizationPolicy", "RequestAuthentication" };

static void object(struct ictx *x, const struct ynode *doc, int depth)
{
	if (!doc || y_is_null(doc))
		return;   /* refused while read (reported), or empty */
	if (doc->kind != Y_MAP) {
		l7_diag(x->d, L7_ERROR, doc->loc, "expected an object (a mapping with apiVersion, kind, metadata, spec)");
		return;
	}
	walk_fields(x, doc, O_DOC);
	const struct ynode *kn = y_get(doc, "kind"), *vn = y_get(doc, "apiVersion"), *meta = y_get(doc, "metadata");
	const char *kind = kn ? y_str(x, kn, "kind") : NULL, *ver = vn ? y_str(x, vn, "apiVersion") : NULL;
	if (!kn || !vn) {
		l7_diag(x->d, L7_ERROR, doc->loc, "object without %s", !kn ? "kind" : "apiVersion");
		return;
	}
	if (!kind || !ver)
		return;
	if (!strcmp(kind, "List") && depth == 0) {   /* kubectl get -o yaml */
		int n;
		struct ynode **items = y_list(x, y_get(doc, "items"), "items", &n);
		for (int i = 0; i < n; i++)
			object(x, items[i], 1);
		return;
	}
	bool cilium = !strcmp(kind, cilium_kinds[0]) || !strcmp(kind, cilium_kinds[1]);
	bool istio = !strcmp(kind, istio_kinds[0]) || !strcmp(kind, istio_kinds[1]);
	if (!cilium && !istio) {
		l7_diag(x->d, L7_ERROR, kn->loc, "kind '%s' is not imported (l7c import reads CiliumNetworkPolicy, "
			"CiliumClusterwideNetworkPolicy, AuthorizationPolicy and RequestAuthentication)", kind);
		return;
	}
	if (cilium ? strcmp(ver, "cilium.io/v2") : strcmp(ver, "security.istio.io/v1") && strcmp(ver, "security.istio.io/v1beta1")) {
		l7_diag(x->d, L7_ERROR, vn->loc, "apiVersion '%s' for %s: expected %s", ver, kind,
			cilium ? "cilium.io/v2" : "security.istio.io/v1 or security.istio.io/v1beta1");
		return;
	}
	if (!meta || !walk_fields(x, meta, O_META)) {
		if (!meta)
			l7_diag(x->d, L7_ERROR, doc->loc, "%s without metadata", kind);
		return;
	}
	const struct ynode *nn = y_get(meta, "name"), *nsn = y_get(meta, "namespace");
	const char *name = nn ? y_str(x, nn, "metadata.name") : NULL;
	const char *ns = nsn ? y_str(x, nsn, "metadata.namespace") : x->o->ns;
	if (!nn)
		l7_diag(x->d, L7_ERROR, meta->loc, "%s without metadata.name", kind);
	if (!name || !ns)
		return;
	if (!strcmp(kind, cilium_kinds[1])) {
		if (nsn)
			l7_diag(x->d, L7_WARNING, nsn->loc, "a CiliumClusterwideNetworkPolicy has no namespace; this one is ignored");
		ns = NULL;
	}
	if (cilium)
		cilium_object(x, doc, kind, ns, name, meta);
	else if (!strcmp(kind, istio_kinds[0]))
		istio_authz(x, doc, ns, name, meta);
	else
		istio_authn(x, doc, ns, name);
}

static void each_object(void *ctx, const struct ynode *root) { object(ctx, root, 0); }

int l7_import(const struct l7_import_opts *o, struct l7_source *const *srcs, int nsrcs, FILE *out, struct l7_diags *d)
{
	struct l7_arena *arena = NULL;
	struct ictx x = { .a = &arena, .d = d, .o = o };
	int errors = d->errors;
	for (int f = 0; f < nsrcs; f++)
		y_each(&arena, srcs[f], d, each_object, &x);
	int rc = 1;
	if (d->errors == errors)
		rc = emit(&x, out);
	l7_arena_free(arena);
	return d->errors != errors ? 1 : rc;
}
