/* Name resolution and type checking against the interface files.
 *
 * Act types, state types, their fields and actions are not known to this file: they come
 * from *.l7i interfaces. What the kernel implements is named by an intrinsic (`= route`), so a
 * new action in an interface binds to existing machinery without touching the compiler. */
#include "internal.h"

#include <limits.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <l7/abi.h>
#include <l7/grpc.h>

struct rx {
	struct l7_module *m;
	struct l7_diags *d;
	const struct l7_policy *p;     /* policy being checked */
};

static const char *type_names[] = {
	[T_ERROR] = "<error>", [T_VOID] = "void", [T_BOOL] = "bool", [T_INT] = "int",
	[T_STRING] = "string", [T_IP] = "ip", [T_CIDR] = "cidr", [T_ADDRESS] = "address",
	[T_UPSTREAM] = "upstream", [T_LIST] = "list", [T_RANGE] = "range", [T_ACT] = "act",
	[T_STATE] = "state", [T_IDENTITY] = "identity", [T_GRPC_STATUS] = "grpc_status",
};

const char *l7_type_name(enum l7_type t) { return type_names[t]; }

static enum l7_type type_by_name(const char *s)
{
	for (size_t i = T_BOOL; i < sizeof(type_names) / sizeof(type_names[0]); i++)
		if (!strcmp(s, type_names[i]) && i != T_ACT && i != T_STATE && i != T_LIST)
			return (enum l7_type)i;
	return T_ERROR;
}

enum { HOW_STR = 1, HOW_COND, HOW_CMP };   /* how a field is read (intrinsics.def) */

static const struct {
	const char *name;
	enum l7_intrinsic in;
	bool is_field;
	enum l7_state_kind state;
	unsigned flags;
	int how;
} intrinsics[] = {
#define L7_FIELD(e, name, state, how, irf) { #name, I_##e, true, state, 0, HOW_##how },
#define L7_ACTION(e, name, state, flags) { #name, I_##e, false, state, flags, 0 },
#include "intrinsics.def"
#undef L7_ACTION
#undef L7_FIELD
};

#define NINTRINSICS (sizeof(intrinsics) / sizeof(intrinsics[0]))

/* intrinsics[] is in enum order: I_x is row x - 1 */
unsigned l7_action_flags(enum l7_intrinsic in) { return in > I_NONE && in <= NINTRINSICS ? intrinsics[in - 1].flags : 0; }

static enum l7_state_kind state_of(enum l7_intrinsic in)
{
	return in > I_NONE && in <= NINTRINSICS ? intrinsics[in - 1].state : SK_NONE;
}

/* A string of the request itself (path, a header, ...; not of a state: a claim) */
static bool request_string(enum l7_intrinsic in)
{
	return in > I_NONE && in <= NINTRINSICS && intrinsics[in - 1].how == HOW_STR && intrinsics[in - 1].state == SK_NONE;
}

static const struct {
	const char *name, *what;
	enum l7_builtin b;
} builtins[] = {
#define L7_BUILTIN(e, name, what) { #name, #what, B_##e },
#include "builtins.def"
#undef L7_BUILTIN
};

/* ---- "did you mean" ---- */

unsigned l7_edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	if (la > 64 || lb > 64)
		return UINT_MAX;
	unsigned row[65];
	for (size_t j = 0; j <= lb; j++)
		row[j] = (unsigned)j;
	for (size_t i = 1; i <= la; i++) {
		unsigned prev = row[0];
		row[0] = (unsigned)i;
		for (size_t j = 1; j <= lb; j++) {
			unsigned cur = row[j];
			unsigned sub = prev + (a[i - 1] != b[j - 1]);
			unsigned del = row[j] + 1, ins = row[j - 1] + 1;
			row[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
			prev = cur;
		}
	}
	return row[lb];
}

struct suggest {
	const char *best;
	unsigned dist;
};

static void consider(struct suggest *s, const char *want, const char *cand)
{
	unsigned dd = l7_edit_distance(want, cand);
	size_t l = strlen(want);
	unsigned limit = l <= 3 ? 1 : l <= 6 ? 2 : 3;
	if (dd <= limit && (!s->best || dd < s->dist)) {
		s->best = cand;
		s->dist = dd;
	}
}

static void did_you_mean(char *buf, size_t n, const struct suggest *s)
{
	if (s->best)
		snprintf(buf, n, "; did you mean '%s'?", s->best);
	else
		buf[0] = 0;
}

/* ---- interfaces ---- */

const struct l7_iface_type *l7_find_type(const struct l7_module *m, const char *name)
{
	for (int i = 0; i < m->ntypes; i++)
		if (!strcmp(m->types[i].name, name))
			return &m->types[i];
	return NULL;
}

static bool find_file(const char *name, const char *const *dirs, int ndirs, const char *rel_to, char *out, size_t n)
{
	if (rel_to) {   /* next to the policy file first */
		const char *slash = strrchr(rel_to, '/');
		snprintf(out, n, "%.*s%s", slash ? (int)(slash - rel_to + 1) : 0, rel_to, name);
		if (access(out, R_OK) == 0)
			return true;
	}
	for (int i = 0; i < ndirs; i++) {
		snprintf(out, n, "%s/%s", dirs[i], name);
		if (access(out, R_OK) == 0)
			return true;
	}
	return false;
}

static void load_interface(struct l7_module *m, const char *name, struct l7_loc at,
			   const char *const *dirs, int ndirs, struct l7_diags *d)
{
	char path[PATH_MAX];
	for (int i = 0; i < m->niface_sources; i++) {   /* each interface once */
		const char *p = m->iface_sources[i]->path, *base = strrchr(p, '/');
		if (!strcmp(base ? base + 1 : p, name))
			return;
	}
	if (!find_file(name, dirs, ndirs, m->src ? m->src->path : NULL, path, sizeof(path))) {
		l7_diag(d, L7_ERROR, at, "interface file '%s' not found (searched next to the policy and in %d -I director%s)",
			name, ndirs, ndirs == 1 ? "y" : "ies");
		return;
	}
	struct l7_source *s = l7_source_load(path, d);
	if (!s)
		return;
	m->iface_sources = realloc(m->iface_sources, sizeof(*m->iface_sources) * (m->niface_sources + 1));
	m->iface_sources[m->niface_sources++] = s;
	l7_parse(m, s, true, d);
}

/* The state kind of its fields' intrinsics (a JWT's first), else of its first action's that
 * has one (intrinsics.def). */
static enum l7_state_kind kind_of(const struct l7_iface_type *ty)
{
	for (int i = 0; i < ty->nfields; i++)
		if (state_of(ty->fields[i].intrinsic) == SK_JWT)
			return SK_JWT;
	for (int i = 0; i < ty->nfields; i++)
		if (state_of(ty->fields[i].intrinsic) != SK_NONE)
			return state_of(ty->fields[i].intrinsic);
	for (int i = 0; i < ty->nactions; i++)
		if (state_of(ty->actions[i].intrinsic) != SK_NONE)
			return state_of(ty->actions[i].intrinsic);
	return SK_NONE;
}

static void check_interfaces(struct l7_module *m, struct l7_diags *d)
{
	for (int t = 0; t < m->ntypes; t++) {
		struct l7_iface_type *ty = &m->types[t];
		for (int u = 0; u < t; u++)
			if (!strcmp(m->types[u].name, ty->name))
				l7_diag_again(d, ty->loc, m->types[u].loc, "declaration", "type '%s' declared twice", ty->name);
		for (int i = 0; i < ty->nfields; i++) {
			struct l7_iface_field *f = &ty->fields[i];
			f->type = type_by_name(f->type_name);
			if (f->type == T_ERROR)
				l7_diag(d, L7_ERROR, f->loc, "field '%s' has unknown type '%s'", f->name, f->type_name);
			const char *in = f->intrinsic_name ? f->intrinsic_name : f->name;
			for (size_t k = 0; k < NINTRINSICS; k++)
				if (intrinsics[k].is_field && !strcmp(in, intrinsics[k].name))
					f->intrinsic = intrinsics[k].in;
			if (f->intrinsic == I_NONE)
				l7_diag(d, L7_ERROR, f->loc, "field '%s': the data plane has no field '%s'", f->name, in);
			for (int k = 0; k < f->nparams; k++)
				f->params[k].ty = type_by_name(f->params[k].type);
		}
		for (int i = 0; i < ty->nactions; i++) {
			struct l7_iface_action *a = &ty->actions[i];
			const char *in = a->intrinsic_name;
			if (!in && a->proxy_only)
				in = "proxy";
			for (size_t k = 0; in && k < NINTRINSICS; k++)
				if (!intrinsics[k].is_field && !strcmp(in, intrinsics[k].name))
					a->intrinsic = intrinsics[k].in;
			if (a->intrinsic == I_NONE)
				l7_diag(d, L7_ERROR, a->loc, "action '%s': the data plane implements no action '%s' (mark it [proxy] to run it in the fallback proxy)",
					a->name, in ? in : a->name);
			if (a->intrinsic == I_PROXY_ONLY)
				a->proxy_only = true;
			for (int k = 0; k < a->nparams; k++) {
				struct l7_iface_param *p = &a->params[k];
				if (p->is_self)
					continue;
				p->ty = type_by_name(p->type);
				if (p->ty == T_ERROR)
					l7_diag(d, L7_ERROR, a->loc, "action '%s': parameter '%s' has unknown type '%s'", a->name, p->name, p->type);
			}
		}
		ty->state_kind = kind_of(ty);
		if (ty->is_state && ty->state_kind == SK_NONE)
			l7_diag(d, L7_ERROR, ty->loc, "state type '%s' binds to no state the data plane implements (jwt_*, count, limit)", ty->name);
	}
}

/* ---- expressions ---- */

static void check_expr(struct rx *x, struct l7_expr *e);

static bool is_resp_var(struct rx *x, const struct l7_expr *e)
{
	return e && e->kind == E_IDENT && x->p->has_resp && !strcmp(e->str, x->p->resp.name);
}

/* The request's or the response's act variable. */
static bool is_act_var(struct rx *x, const struct l7_expr *e)
{
	return e && e->kind == E_IDENT && ((x->p->has_act && !strcmp(e->str, x->p->act.name)) || is_resp_var(x, e));
}

/* The act type of an act variable expression (request or response). */
static const struct l7_iface_type *act_type(struct rx *x, const struct l7_expr *e)
{
	return is_resp_var(x, e) || (e && e->ref == REF_RESP_VAR) ? x->p->resp.iface : x->p->act.iface;
}

static void unknown_name(struct rx *x, struct l7_expr *e)
{
	struct suggest s = { 0 };
	if (x->p->has_act)
		consider(&s, e->str, x->p->act.name);
	if (x->p->has_resp)
		consider(&s, e->str, x->p->resp.name);
	for (int i = 0; i < x->p->nusings; i++)
		consider(&s, e->str, x->p->usings[i].name);
	for (int i = 0; i < x->m->nupstreams; i++)
		consider(&s, e->str, x->m->upstreams[i].name);
	char hint[128];
	did_you_mean(hint, sizeof(hint), &s);
	l7_diag(x->d, L7_ERROR, e->loc, "use of undeclared name '%s'%s", e->str, hint);
}

/* What a name stands for: its type, kind and index. */
static void resolved(struct l7_expr *e, enum l7_type type, enum l7_ref_kind ref, int index)
{
	e->type = type;
	e->ref = ref;
	e->ref_index = index;
}

static void check_ident(struct rx *x, struct l7_expr *e)
{
	if (is_act_var(x, e)) {
		resolved(e, T_ACT, is_resp_var(x, e) ? REF_RESP_VAR : REF_ACT_VAR, 0);
		return;
	}
	for (int i = 0; i < x->p->nusings; i++)
		if (!strcmp(e->str, x->p->usings[i].name)) {
			resolved(e, T_STATE, REF_STATE_VAR, i);
			return;
		}
	for (int i = 0; i < x->m->nupstreams; i++)
		if (!strcmp(e->str, x->m->upstreams[i].name)) {
			resolved(e, T_UPSTREAM, REF_UPSTREAM, i);
			return;
		}
	if (x->m->fallback && !strcmp(e->str, x->m->fallback->name)) {
		l7_diag(x->d, L7_ERROR, e->loc, "'%s' is the fallback proxy; use Fallback(...) to send a request there", e->str);
		return;
	}
	/* caller identities, for request.caller; `external`: callers no identity covers */
	for (int i = 0; i <= x->m->nidentities; i++)
		if (!strcmp(e->str, i < x->m->nidentities ? x->m->identities[i].name : "external")) {
			e->type = T_IDENTITY;
			e->ref = REF_IDENTITY;
			e->ref_index = i;
			return;
		}
	unknown_name(x, e);
}

/* request.path, request.header("x"), auth.valid: fields of the act type or of a state type. */
static void check_field(struct rx *x, struct l7_expr *e, struct l7_expr *object, bool called)
{
	check_expr(x, object);
	const struct l7_iface_type *ty = NULL;
	if (object->type == T_ACT)
		ty = act_type(x, object);
	else if (object->type == T_STATE)
		ty = x->p->usings[object->ref_index].iface;
	else if (object->type)
		l7_diag(x->d, L7_ERROR, object->loc, "'%s' has no fields (it is %s)", object->str ? object->str : "this",
			l7_type_name(object->type));
	if (!ty)
		return;
	struct suggest s = { 0 };
	for (int i = 0; i < ty->nfields; i++) {
		const struct l7_iface_field *f = &ty->fields[i];
		if (strcmp(f->name, e->str)) {
			consider(&s, e->str, f->name);
			continue;
		}
		if (called != (f->nparams > 0)) {
			l7_diag(x->d, L7_ERROR, e->loc, called ? "field '%s' of '%s' takes no arguments"
							       : "field '%s' of '%s' needs %d argument%s: %s.%s(...)",
				f->name, ty->name, f->nparams, f->nparams == 1 ? "" : "s", object->str, f->name);
			return;
		}
		if (called) {
			if (e->nargs != f->nparams) {
				l7_diag(x->d, L7_ERROR, e->loc, "'%s' takes %d argument%s, %d given", f->name, f->nparams,
					f->nparams == 1 ? "" : "s", e->nargs);
				return;
			}
			for (int k = 0; k < e->nargs; k++) {
				check_expr(x, e->args[k]);
				if (e->args[k]->type && e->args[k]->type != f->params[k].ty)
					l7_diag(x->d, L7_ERROR, e->args[k]->loc, "argument %d of '%s' must be %s, not %s", k + 1,
						f->name, l7_type_name(f->params[k].ty), l7_type_name(e->args[k]->type));
				else if (e->args[k]->kind != E_STRING && e->args[k]->kind != E_INT)
					l7_diag(x->d, L7_ERROR, e->args[k]->loc, "argument %d of '%s' must be a constant", k + 1, f->name);
			}
		}
		e->field = f;
		e->ref = REF_FIELD;
		e->type = f->type;
		return;
	}
	char hint[128];
	did_you_mean(hint, sizeof(hint), &s);
	l7_diag(x->d, L7_ERROR, e->loc, "'%s' has no field '%s'%s", ty->name, e->str, hint);
}

/* request.grpc_service / grpc_method, or NULL */
static const char *grpc_part(const struct l7_expr *e)
{
	if (!e || e->ref != REF_FIELD || !e->field)
		return NULL;
	return e->field->intrinsic == I_GRPC_SERVICE ? "service" : e->field->intrinsic == I_GRPC_METHOD ? "method" : NULL;
}

/* A gRPC service or method compared with lit (== / in; starts_with: prefix): a name with '/'
 * or an empty one never matches (a path not of the form /SERVICE/METHOD has neither), so
 * either is an error that says what the field holds. */
static void check_grpc_name(struct rx *x, const struct l7_expr *field, const struct l7_expr *lit, bool prefix)
{
	const char *part = grpc_part(field);
	if (!part || !lit || lit->kind != E_STRING)
		return;
	const char *slash = memchr(lit->str, '/', lit->str_len);
	if (slash) {
		l7_diag(x->d, L7_ERROR, lit->loc, "a gRPC %s never contains '/': %s.grpc_%s is the %s of a path /SERVICE/METHOD",
			part, x->p->act.name, part, part);
		/* the name without its outer slashes; one inside: it was SERVICE/METHOD */
		const char *b = lit->str, *end = lit->str + lit->str_len;
		while (b < end && *b == '/')
			b++;
		while (end > b && end[-1] == '/')
			end--;
		const char *mid = memchr(b, '/', (size_t)(end - b));
		if (mid && !memchr(mid + 1, '/', (size_t)(end - mid - 1)) && mid > b && mid + 1 < end)
			l7_hint(x->d, lit->loc, "for the call %.*s, write %s.grpc_service == \"%.*s\" && %s.grpc_method == \"%.*s\"",
				(int)(end - b), b, x->p->act.name, (int)(mid - b), b, x->p->act.name, (int)(end - mid - 1), mid + 1);
		else if (!mid && end > b)
			l7_hint(x->d, lit->loc, "write the name without slashes: \"%.*s\"", (int)(end - b), b);
		else
			l7_hint(x->d, lit->loc, "to match other paths, compare %s.path", x->p->act.name);
	} else if (!lit->str_len && !prefix) {
		l7_diag(x->d, L7_ERROR, lit->loc, "a gRPC %s is never empty: a path not of the form /SERVICE/METHOD has none, and compares with no name",
			part);
		l7_hint(x->d, lit->loc, "to tell gRPC paths from others, test starts_with(%s.grpc_%s, \"\")", x->p->act.name, part);
	}
}

static bool is_protocol(const struct l7_expr *e)
{
	return e && e->ref == REF_FIELD && e->field && e->field->intrinsic == I_PROTOCOL;
}

/* request.protocol OP lit: the field on the left, a name of L7_PROTO_NAMES on the right. */
static void check_protocol(struct rx *x, const struct l7_expr *e)
{
	static const char *const names[] = L7_PROTO_NAMES;
	if (is_protocol(e->rhs)) {
		l7_diag(x->d, L7_ERROR, e->loc, "write the protocol first: %s.protocol %s \"...\"", x->p->act.name,
			e->op == OP_NE ? "!=" : "==");
		return;
	}
	if (!is_protocol(e->lhs))
		return;
	const struct l7_expr *r = e->rhs;
	for (int i = 0; i < (r->kind == E_LIST ? r->nargs : 1); i++) {
		const struct l7_expr *v = r->kind == E_LIST ? r->args[i] : r;
		if (v->kind != E_STRING)
			continue;   /* reported: a list item or an operand of another type */
		bool known = false;
		for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++)
			known |= strlen(names[k]) == v->str_len && !memcmp(names[k], v->str, v->str_len);
		if (!known) {   /* the version it names, by its digits ("HTTP/2.0", "h2", "http/1.1") */
			const char *want = memchr(v->str, '2', v->str_len) ? names[L7_P_HTTP2]
					   : strstr(v->str, "1.0") ? names[L7_P_HTTP10] : memchr(v->str, '1', v->str_len) ? names[L7_P_HTTP11] : NULL;
			l7_diag(x->d, L7_ERROR, v->loc, "the data plane speaks HTTP/1.1, HTTP/1.0 and HTTP/2, not '%s'%s%s%s", v->str,
				want ? "; did you mean '" : "", want ? want : "", want ? "'?" : "");
		}
	}
}

static bool comparable(enum l7_type a, enum l7_type b) { return a == b && a != T_ACT && a != T_STATE && a != T_LIST; }

/* Identities compare only as `request.caller == NAME` / `in [NAME, ...]`: what the data plane
 * looks up is the caller of the request. */
static void check_caller(struct rx *x, const struct l7_expr *e)
{
	if (!(e->lhs->ref == REF_FIELD && e->lhs->field && e->lhs->field->intrinsic == I_CALLER)) {
		l7_diag(x->d, L7_ERROR, e->lhs->loc, "identities are compared with the caller: request.caller == NAME");
		return;
	}
	const struct l7_expr *const *items = e->rhs->kind == E_LIST ? (const struct l7_expr *const *)e->rhs->args : (const struct l7_expr *const *)&e->rhs;
	for (int i = 0; i < (e->rhs->kind == E_LIST ? e->rhs->nargs : 1); i++)
		if (items[i]->ref != REF_IDENTITY)
			l7_diag(x->d, L7_ERROR, items[i]->loc, "expected an identity name (or external), not an expression");
}

static void check_binary(struct rx *x, struct l7_expr *e)
{
	check_expr(x, e->lhs);
	check_expr(x, e->rhs);
	enum l7_type l = e->lhs->type, r = e->rhs->type;
	e->type = T_BOOL;
	if (!l || !r)
		return;   /* already reported */
	switch (e->op) {
	case OP_OR:
	case OP_AND:
		if (l != T_BOOL || r != T_BOOL)
			l7_diag(x->d, L7_ERROR, l != T_BOOL ? e->lhs->loc : e->rhs->loc, "operands of '%s' must be bool, not %s",
				e->op == OP_OR ? "||" : "&&", l7_type_name(l != T_BOOL ? l : r));
		return;
	case OP_EQ:
	case OP_NE:
		if (!comparable(l, r))
			l7_diag(x->d, L7_ERROR, e->loc, "cannot compare %s with %s", l7_type_name(l), l7_type_name(r));
		else if (l == T_IDENTITY)
			check_caller(x, e);
		check_grpc_name(x, e->lhs, e->rhs, false);
		check_grpc_name(x, e->rhs, e->lhs, false);
		check_protocol(x, e);
		return;
	case OP_LT:
	case OP_LE:
	case OP_GT:
	case OP_GE:
		if (l != T_INT || r != T_INT)
			l7_diag(x->d, L7_ERROR, e->loc, "ordering compares ints, not %s and %s", l7_type_name(l), l7_type_name(r));
		return;
	case OP_IN:
		if (r == T_LIST) {
			for (int i = 0; i < e->rhs->nargs; i++)
				if (e->rhs->args[i]->type && !comparable(l, e->rhs->args[i]->type) &&
				    !(l == T_IP && e->rhs->args[i]->type == T_CIDR))
					l7_diag(x->d, L7_ERROR, e->rhs->args[i]->loc, "list item is %s, expected %s",
						l7_type_name(e->rhs->args[i]->type), l7_type_name(l));
			if (l == T_IDENTITY)
				check_caller(x, e);
			for (int i = 0; i < e->rhs->nargs; i++)
				check_grpc_name(x, e->lhs, e->rhs->args[i], false);
			check_protocol(x, e);
		} else if (!((l == T_INT && r == T_RANGE) || (l == T_IP && r == T_CIDR))) {
			l7_diag(x->d, L7_ERROR, e->loc, "'in' needs a list, an int range or an IP prefix on the right, not %s", l7_type_name(r));
		}
		return;
	}
}

/* Copper's predicate style, `IsTimeSince(window, 60)`, for a field with parameters of the
 * state a first argument names: the same as `window.IsTimeSince(60)`. */
static bool state_predicate(struct rx *x, struct l7_expr *e)
{
	if (e->nargs < 1 || e->args[0]->kind != E_IDENT)
		return false;
	for (int i = 0; i < x->p->nusings; i++) {
		const struct l7_iface_type *ty = x->p->usings[i].iface;
		if (!ty || strcmp(x->p->usings[i].name, e->args[0]->str))
			continue;
		for (int k = 0; k < ty->nfields; k++)
			if (ty->fields[k].nparams > 0 && !strcmp(ty->fields[k].name, e->str)) {
				e->lhs = e->args[0];
				memmove(e->args, e->args + 1, sizeof(*e->args) * (size_t)(e->nargs - 1));
				e->nargs--;
				check_field(x, e, e->lhs, true);
				return true;
			}
	}
	return false;
}

static void check_builtin_call(struct rx *x, struct l7_expr *e)
{
	if (state_predicate(x, e))
		return;
	for (int i = 0; i < e->nargs; i++)
		check_expr(x, e->args[i]);
	for (size_t b = 0; b < sizeof(builtins) / sizeof(builtins[0]); b++) {
		const char *name = builtins[b].name, *what = builtins[b].what;
		if (strcmp(e->str, name))
			continue;
		e->builtin = builtins[b].b;
		e->type = T_BOOL;
		if (e->nargs != 2) {
			l7_diag(x->d, L7_ERROR, e->loc, "%s(string, %s) takes 2 arguments, %d given", name, what, e->nargs);
			return;
		}
		for (int i = 0; i < 2; i++)
			if (e->args[i]->type && e->args[i]->type != T_STRING)
				l7_diag(x->d, L7_ERROR, e->args[i]->loc, "argument %d of %s must be string, not %s", i + 1, name,
					l7_type_name(e->args[i]->type));
		if (e->args[1]->kind != E_STRING)
			l7_diag(x->d, L7_ERROR, e->args[1]->loc, "the %s of %s must be a constant string", what, name);
		else if (e->builtin == B_STARTS_WITH)
			check_grpc_name(x, e->args[0], e->args[1], true);
		if (is_protocol(e->args[0]))
			l7_diag(x->d, L7_ERROR, e->args[0]->loc, "%s.protocol is one of three names: compare it with ==, != or in",
				x->p->act.name);
		return;
	}
	struct suggest s = { 0 };
	for (size_t b = 0; b < sizeof(builtins) / sizeof(builtins[0]); b++)
		consider(&s, e->str, builtins[b].name);
	const struct l7_iface_type *ty = x->p->act.iface;
	for (int i = 0; ty && i < ty->nactions; i++)
		if (!strcmp(ty->actions[i].name, e->str)) {
			l7_diag(x->d, L7_ERROR, e->loc, "'%s' is an action; actions are statements, not conditions", e->str);
			return;
		}
	char hint[128];
	did_you_mean(hint, sizeof(hint), &s);
	l7_diag(x->d, L7_ERROR, e->loc, "unknown function '%s'%s", e->str, hint);
}

static void check_expr(struct rx *x, struct l7_expr *e)
{
	switch (e->kind) {
	case E_STRING: e->type = T_STRING; break;
	case E_INT: e->type = T_INT; break;
	case E_BOOL: e->type = T_BOOL; break;
	case E_IP: e->type = T_IP; break;
	case E_CIDR: e->type = T_CIDR; break;
	case E_ADDRESS: e->type = T_ADDRESS; break;
	case E_RANGE: e->type = T_RANGE; break;
	case E_IDENT: check_ident(x, e); break;
	case E_MEMBER: check_field(x, e, e->lhs, false); break;
	case E_CALL:
		if (e->lhs)
			check_field(x, e, e->lhs, true);
		else
			check_builtin_call(x, e);
		break;
	case E_BINARY: check_binary(x, e); break;
	case E_NOT:
		check_expr(x, e->lhs);
		e->type = T_BOOL;
		if (e->lhs->type && e->lhs->type != T_BOOL)
			l7_diag(x->d, L7_ERROR, e->lhs->loc, "operand of '!' must be bool, not %s", l7_type_name(e->lhs->type));
		break;
	case E_LIST:
		e->type = T_LIST;
		for (int i = 0; i < e->nargs; i++)
			check_expr(x, e->args[i]);
		break;
	}
}

/* ---- statements ---- */

static const struct { const char *name; int code; } grpc_statuses[] = {
#define L7__X(n, v) { #n, v },
	L7_GRPC_STATUSES(L7__X)
#undef L7__X
};

/* A grpc_status argument: one of l7/grpc.h's names, but OK (a deny is not a success). */
static void check_grpc_status(struct rx *x, struct l7_expr *arg, const char *action)
{
	if (arg->kind != E_IDENT) {
		check_expr(x, arg);
		l7_diag(x->d, L7_ERROR, arg->loc, "the gRPC status of '%s' is a name: PERMISSION_DENIED, UNAUTHENTICATED, ...", action);
		return;
	}
	struct suggest s = { 0 };
	for (size_t i = 0; i < sizeof(grpc_statuses) / sizeof(grpc_statuses[0]); i++) {
		if (strcmp(arg->str, grpc_statuses[i].name)) {
			consider(&s, arg->str, grpc_statuses[i].name);
			continue;
		}
		if (grpc_statuses[i].code == L7_GRPC_OK) {
			l7_diag(x->d, L7_ERROR, arg->loc, "'%s' denies with OK: a gRPC client would take the denial for a success", action);
			return;
		}
		arg->type = T_GRPC_STATUS;
		arg->num = grpc_statuses[i].code;
		return;
	}
	char hint[128];
	did_you_mean(hint, sizeof(hint), &s);
	l7_diag(x->d, L7_ERROR, arg->loc, "unknown gRPC status '%s'%s", arg->str, hint);
}

static const struct l7_iface_action *find_action(const struct l7_iface_type *ty, const char *name)
{
	for (int i = 0; ty && i < ty->nactions; i++)
		if (!strcmp(ty->actions[i].name, name))
			return &ty->actions[i];
	return NULL;
}

/* Header fields the data plane frames or routes by: a policy must not add, replace or remove
 * them (a removed Content-Length would desynchronise the stream, a second Host confuse the
 * backend). Responses: only their framing. */
static const struct { const char *name, *why; } framing_fields[] = {
	{ "content-length", "frames the stream by it" }, { "transfer-encoding", "frames the stream by it" },
	{ "host", "has parsed and checked the Host the client sent" },
	{ "connection", "decides from it whether the connection goes on" },
	{ "upgrade", "decides from it whether the stream stays HTTP" },
};

static void check_mutation(struct rx *x, const struct l7_iface_action *a, const struct l7_expr *c, bool response)
{
	const struct l7_expr *name = c->args[1], *val = c->nargs == 3 ? c->args[2] : NULL;
	if (name->kind != E_STRING)
		return;   /* reported: arguments must be constants */
	bool ok = name->str_len > 0;
	for (size_t i = 0; i < name->str_len; i++)
		ok &= name->str[i] > 32 && name->str[i] < 127 && !strchr("()<>@,;:\\\"/[]?={}", name->str[i]);
	if (!ok) {
		l7_diag(x->d, L7_ERROR, name->loc, "'%s' is not a valid header name", name->str);
		return;
	}
	for (size_t k = 0; k < (response ? 2 : sizeof(framing_fields) / sizeof(framing_fields[0])); k++)
		if (name->str_len == strlen(framing_fields[k].name) && !strncasecmp(name->str, framing_fields[k].name, name->str_len)) {
			l7_diag(x->d, L7_ERROR, name->loc, "%s cannot %s %s: the data plane %s", a->name,
				a->intrinsic == I_REMOVE_HEADER ? "remove" : a->intrinsic == I_ADD_HEADER ? "add" : "replace",
				framing_fields[k].name, framing_fields[k].why);
			return;
		}
	for (size_t i = 0; val && val->kind == E_STRING && i < val->str_len; i++)
		if (val->str[i] == '\r' || val->str[i] == '\n' || val->str[i] == 0) {
			l7_diag(x->d, L7_ERROR, val->loc, "header value must not contain CR, LF or NUL");
			break;
		}
}

static void check_action(struct rx *x, struct l7_stmt *s)
{
	struct l7_expr *c = s->call;
	if (c->lhs) {
		l7_diag(x->d, L7_ERROR, c->loc, "actions are called as %s(%s, ...), not as methods", c->str,
			x->p->has_act ? x->p->act.name : "request");
		return;
	}
	/* The first argument names the object: the act variable or a state variable. */
	const struct l7_iface_type *ty = c->nargs > 0 ? act_type(x, c->args[0]) : x->p->act.iface;
	if (c->nargs > 0 && c->args[0]->kind == E_IDENT && !is_act_var(x, c->args[0])) {
		bool bound = false;
		for (int i = 0; i < x->p->nusings; i++)
			bound |= !strcmp(c->args[0]->str, x->p->usings[i].name);
		for (int i = 0; !bound && i < x->m->ninstances; i++)
			if (!strcmp(x->m->instances[i].name, c->args[0]->str)) {
				l7_diag(x->d, L7_ERROR, c->args[0]->loc, "'%s' is not bound in policy '%s'; add using (%s %s) to its header",
					c->args[0]->str, x->p->name, x->m->instances[i].type, c->args[0]->str);
				return;
			}
	}
	if (c->nargs > 0 && c->args[0]->kind == E_IDENT)
		for (int i = 0; i < x->p->nusings; i++)
			if (!strcmp(c->args[0]->str, x->p->usings[i].name))
				ty = x->p->usings[i].iface;
	const struct l7_iface_action *a = find_action(ty, c->str);
	if (!a) {
		struct suggest sg = { 0 };
		for (int i = 0; ty && i < ty->nactions; i++)
			consider(&sg, c->str, ty->actions[i].name);
		char hint[128];
		did_you_mean(hint, sizeof(hint), &sg);
		for (int i = 0; i < c->nargs; i++)
			check_expr(x, c->args[i]);
		if (ty)
			l7_diag(x->d, L7_ERROR, c->loc, "unknown action '%s' for '%s'%s", c->str, ty->name, hint);
		return;
	}
	s->action = a;
	if (c->nargs != a->nparams) {
		l7_diag(x->d, L7_ERROR, c->loc, "action '%s' takes %d argument%s, %d given", a->name, a->nparams,
			a->nparams == 1 ? "" : "s", c->nargs);
		return;
	}
	for (int i = 0; i < c->nargs; i++) {
		struct l7_expr *arg = c->args[i];
		const struct l7_iface_param *p = &a->params[i];
		if (p->ty == T_GRPC_STATUS) {   /* a name of l7/grpc.h, not of the policy */
			check_grpc_status(x, arg, a->name);
			continue;
		}
		check_expr(x, arg);
		if (!arg->type)
			continue;
		/* Limit's key: a string (a constant or a request field), or the client's address */
		bool limit_field = a->intrinsic == I_LIMIT && arg->ref == REF_FIELD && arg->field &&
				   (request_string(arg->field->intrinsic) || arg->field->intrinsic == I_SOURCE);
		if (p->is_self) {
			if (arg->type != T_ACT && arg->type != T_STATE)
				l7_diag(x->d, L7_ERROR, arg->loc, "argument %d of '%s' must be the %s variable", i + 1, a->name,
					ty->is_state ? "state" : "act");
		} else if (limit_field && grpc_part(arg)) {
			l7_diag(x->d, L7_ERROR, arg->loc, "a Limit's key is a field the data plane holds; the gRPC %s is read from the path",
				grpc_part(arg));
			l7_hint(x->d, arg->loc, "key by %s.path: one bucket per gRPC method", x->p->act.name);
		} else if (arg->type != p->ty && !(limit_field && arg->field->intrinsic == I_SOURCE)) {
			l7_diag(x->d, L7_ERROR, arg->loc, "argument %d of '%s' (%s) must be %s%s, not %s", i + 1, a->name,
				p->name, l7_type_name(p->ty), a->intrinsic == I_LIMIT ? " or request.source" : "",
				l7_type_name(arg->type));
		} else if (arg->kind != E_STRING && arg->kind != E_INT && arg->kind != E_IDENT && !limit_field) {
			l7_diag(x->d, L7_ERROR, arg->loc, "argument %d of '%s' must be a constant%s", i + 1, a->name,
				a->intrinsic == I_LIMIT ? " or a request field" : "");
		}
	}
	if (a->intrinsic == I_DENY && c->nargs >= 2 && c->args[1]->kind == E_INT &&
	    (c->args[1]->num < 200 || c->args[1]->num > 599))
		l7_diag(x->d, L7_ERROR, c->args[1]->loc, "HTTP status %lld is out of range (200-599)", c->args[1]->num);
	if ((l7_action_flags(a->intrinsic) & L7_MUTATION) && c->nargs >= 2)
		check_mutation(x, a, c, ty && ty->is_response);
	/* Said here, once per statement: ir_lower meets a statement once per path through it. */
	if (a->intrinsic == I_PROXY_ONLY)
		l7_diag(x->d, L7_WARNING, s->loc, "'%s' runs only in the userspace proxy: requests reaching it take the slow path", a->name);
	if ((l7_action_flags(a->intrinsic) & L7_SLOW) && !x->m->fallback)
		l7_diag(x->d, L7_ERROR, s->loc, "requests reaching this line go to the fallback proxy, but the policy file declares none (add: fallback proxy = ADDR:PORT;)");
}

static void check_stmt(struct rx *x, struct l7_stmt *s)
{
	if (!s)
		return;
	switch (s->kind) {
	case S_ACTION: check_action(x, s); break;
	case S_IF:
		check_expr(x, s->cond);
		if (s->cond->type && s->cond->type != T_BOOL)
			l7_diag(x->d, L7_ERROR, s->cond->loc, "condition must be bool, not %s", l7_type_name(s->cond->type));
		check_stmt(x, s->then);
		check_stmt(x, s->otherwise);
		break;
	case S_BLOCK:
		for (int i = 0; i < s->nbody; i++) {
			check_stmt(x, s->body[i]);
			const struct l7_iface_action *a = s->body[i]->action;
			bool terminal = s->body[i]->kind == S_ACTION && a && (l7_action_flags(a->intrinsic) & L7_TERMINAL);
			if (terminal && i + 1 < s->nbody && s->body[i + 1]->kind != S_SECTION)
				l7_diag(x->d, L7_WARNING, s->body[i + 1]->loc,
					"statement is never reached: '%s' on line %u already decided the request", a->name,
					s->body[i]->loc.line);
		}
		break;
	case S_SECTION:
		if (strcmp(s->section, "Ingress") && strcmp(s->section, "Egress"))
			l7_diag(x->d, L7_ERROR, s->loc, "unknown section '[%s]' (expected [Ingress] or [Egress])", s->section);
		break;
	}
}

static void check_binding(struct rx *x, struct l7_binding *b, bool want_state)
{
	b->iface = l7_find_type(x->m, b->type);
	if (b->iface && b->iface->is_state == want_state)
		return;
	if (b->iface) {
		l7_diag(x->d, L7_ERROR, b->type_loc, "'%s' is %s type; '%s' needs %s type", b->type,
			b->iface->is_state ? "a state" : "an act", want_state ? "using" : "act", want_state ? "a state" : "an act");
		b->iface = NULL;
		return;
	}
	struct suggest s = { 0 };
	for (int i = 0; i < x->m->ntypes; i++)
		if (x->m->types[i].is_state == want_state)
			consider(&s, b->type, x->m->types[i].name);
	char hint[128];
	did_you_mean(hint, sizeof(hint), &s);
	l7_diag(x->d, L7_ERROR, b->type_loc, "unknown %s type '%s'%s", want_state ? "state" : "act", b->type, hint);
}

/* `act (HttpRequest request) act (HttpResponse response)`: the request's act type first (a
 * policy acts on a request), its response's second, in either order. */
static void check_binding_pair(struct rx *x, struct l7_policy *p)
{
	check_binding(x, &p->resp, false);
	if (!p->act.iface || !p->resp.iface)
		return;
	if (p->act.iface->is_response && !p->resp.iface->is_response) {
		struct l7_binding t = p->act;
		p->act = p->resp;
		p->resp = t;
	}
	if (p->act.iface->is_response) {
		l7_diag(x->d, L7_ERROR, p->act.type_loc, "policy '%s' binds two response acts; it acts on a request: act (HttpRequest request)",
			p->name);
		p->act.iface = NULL;
	} else if (!p->resp.iface->is_response) {
		l7_diag(x->d, L7_ERROR, p->resp.type_loc, "'%s' is a request act type; a second act binds the response: act (HttpResponse response)",
			p->resp.type);
		p->resp.iface = NULL;
	} else if (!strcmp(p->act.name, p->resp.name)) {
		l7_diag(x->d, L7_ERROR, p->resp.loc, "'%s' is bound twice", p->resp.name);
		p->resp.iface = NULL;
	}
}

static bool same_prefix(unsigned a, unsigned alen, unsigned b, unsigned blen)
{
	unsigned mask = alen ? ~0u << (32 - alen) : 0;
	return alen == blen && (a & mask) == (b & mask);
}

static void check_decls(struct l7_module *m, struct l7_diags *d)
{
	struct { struct l7_decl *arr; int n; } groups[] = {
		{ m->services, m->nservices }, { m->upstreams, m->nupstreams }, { m->fallback, m->fallback ? 1 : 0 },
	};
	/* one namespace for services, upstreams and the fallback */
	for (int g = 0; g < 3; g++)
		for (int i = 0; i < groups[g].n; i++)
			for (int h = 0; h <= g; h++)
				for (int j = 0; j < (h == g ? i : groups[h].n); j++)
					if (!strcmp(groups[g].arr[i].name, groups[h].arr[j].name))
						l7_diag_again(d, groups[g].arr[i].loc, groups[h].arr[j].loc, "declaration",
							      "'%s' is declared twice", groups[g].arr[i].name);
	for (int i = 0; i < m->nidentities; i++) {
		const struct l7_identity *id = &m->identities[i];
		for (int j = 0; j < i; j++)
			if (!strcmp(id->name, m->identities[j].name))
				l7_diag(d, L7_ERROR, id->loc, "identity '%s' is declared twice", id->name);
		if (!strcmp(id->name, "external"))
			l7_diag(d, L7_ERROR, id->loc, "'external' names callers no identity covers; choose another name");
		/* the longest prefix decides; the same prefix in two identities would be a coin toss */
		for (int k = 0; k < id->n; k++)
			for (int j = 0; j < i; j++)
				for (int l = 0; l < m->identities[j].n; l++)
					if (same_prefix(id->ips[k], id->prefixes[k], m->identities[j].ips[l], m->identities[j].prefixes[l])) {
						l7_diag(d, L7_ERROR, id->loc, "identity '%s' claims a prefix identity '%s' also claims",
							id->name, m->identities[j].name);
						l7_diag(d, L7_NOTE, m->identities[j].loc, "'%s' is declared here", m->identities[j].name);
					}
	}
	for (int i = 0; i < m->nupstreams; i++) {
		const struct l7_decl *u = &m->upstreams[i];
		/* a single address has no set to be taken out of: a check could only watch it fail */
		if (u->health.on && u->dyn == DYN_NONE && u->nendpoints == 1 && !u->syntax_error)
			l7_diag(d, L7_ERROR, u->health.loc,
				"health checks need a set to take an endpoint out of: upstream '%s' is one address; write a set ([A:P, B:P]), endpoints(\"SET\") or \"HOST:PORT\"",
				u->name);
		if (u->retries > 0 && u->dyn == DYN_NONE && u->nendpoints == 1)
			l7_diag(d, L7_WARNING, u->retries_loc, "upstream '%s' has one endpoint: a retry has no other endpoint to go to",
				u->name);
	}
	for (int i = 0; i < m->nupstreams; i++)
		if (m->upstreams[i].syntax_error)
			continue;   /* its address did not parse: said */
		else if (m->upstreams[i].dyn != DYN_NONE)
			continue;   /* its endpoints come at run time */
		else if (m->upstreams[i].nendpoints == 0)
			l7_diag(d, L7_ERROR, m->upstreams[i].loc, "upstream '%s' has no endpoint", m->upstreams[i].name);
		else if (m->upstreams[i].balance != LB_DEFAULT && m->upstreams[i].nendpoints == 1)
			l7_diag(d, L7_WARNING, m->upstreams[i].balance_loc,
				"upstream '%s' has one endpoint: 'balance' has nothing to choose from", m->upstreams[i].name);
	for (int i = 0; i < m->nservices; i++)
		if (m->services[i].nendpoints != 1 && !m->services[i].syntax_error)
			l7_diag(d, L7_ERROR, m->services[i].loc, "service '%s' needs exactly one address", m->services[i].name);
	for (int i = 0; i < m->npolicies; i++)
		for (int j = 0; j < i; j++)
			if (!strcmp(m->policies[i].name, m->policies[j].name))
				l7_diag_again(d, m->policies[i].loc, m->policies[j].loc, "definition", "policy '%s' is defined twice",
					      m->policies[i].name);
}

void l7_resolve(struct l7_module *m, const char *const *include_dirs, int ninclude, struct l7_diags *d)
{
	struct l7_loc none = { 0 };
	bool have_http = false;
	for (int i = 0; i < m->nimports; i++) {
		load_interface(m, m->imports[i], m->import_locs[i], include_dirs, ninclude, d);
		have_http |= !strcmp(m->imports[i], "http.l7i");
	}
	if (!have_http)   /* HTTP is the language's own act type: always available */
		load_interface(m, "http.l7i", none, include_dirs, ninclude, d);
	load_interface(m, "state.l7i", none, include_dirs, ninclude, d);   /* Jwt, Counter, TokenBucket */
	check_interfaces(m, d);
	check_decls(m, d);
	l7_check_instances(m, d);

	for (int i = 0; i < m->npolicies; i++) {
		struct l7_policy *p = &m->policies[i];
		struct rx x = { m, d, p };
		if (p->has_act)
			check_binding(&x, &p->act, false);
		if (p->has_resp)
			check_binding_pair(&x, p);
		else if (p->act.iface && p->act.iface->is_response) {
			l7_diag(d, L7_ERROR, p->act.type_loc, "'%s' is a response act type; a policy acts on a request first: act (HttpRequest request)",
				p->act.type);
			p->act.iface = NULL;
		}
		for (int u = 0; u < p->nusings; u++) {
			check_binding(&x, &p->usings[u], true);
			l7_bind_instance(m, &p->usings[u], d);
			for (int v = 0; v < u; v++)
				if (!strcmp(p->usings[v].name, p->usings[u].name))
					l7_diag(d, L7_ERROR, p->usings[u].loc, "'%s' is bound twice", p->usings[u].name);
		}
		if (p->context) {
			regex_t re;
			char msg[160];
			int rc = l7_context_regcomp(&re, p->context, msg, sizeof(msg));
			if (rc > 0)
				regerror(rc, &re, msg, sizeof(msg));
			if (rc)
				l7_diag(d, L7_ERROR, p->context_loc, "invalid context pattern: %s", msg);
			else
				regfree(&re);
		}
		if (p->has_act && p->act.iface)
			check_stmt(&x, p->body);
	}
}

/* The shape of the pattern's repetitions ('*', '+', '?', '{n,m}'), which glibc's ERE compiler
 * takes time exponential and quadratic in (found by reliability.fuzz_frontend):
 * - depth: a repetition of an atom or group that holds one counts one more than it ('.*+' is
 *   2): '.*++++++' (7) and '((.*)+){1000}' (3) ran for more than a minute;
 * - loops: the parts that may match nothing ('*', '?', and the optional copies of '+' and
 *   '{n,m}'), counted once glibc has copied what repeats (X+ is X X*, X{n,m} is m copies): its
 *   time grows with their cube ('(a*|b*|c*){85}', 255, took 0.6 s; '{300}' and '(a?|b?){2000}'
 *   ran for more than 20 s);
 * - copies: how many copies of an atom it may make, the product of every repetition's factor
 *   ('+' 2, {n} n, {n,} n+1, {n,m} m), a bound for nested and sequential ones alike
 *   (sequential ones are over-counted; context patterns have a few): memory (48 '+' ran out). */
struct rep_shape { int depth; unsigned long long loops, copies; };

static struct rep_shape context_reps(const char *p)
{
	struct rep_shape frame[L7_CONTEXT_MAX_GROUPS + 1] = { { 0, 0, 0 } }, atom = { 0, 0, 0 }, worst = { 0, 0, 1 };
	int top = 0;
	for (; *p; p++) {
		unsigned long long copies = 1, optional = 1;
		switch (*p) {
		case '\\':
			p += p[1] != 0;
			atom = (struct rep_shape){ 0, 0, 0 };
			continue;
		case '[':   /* a bracket expression: ']' first is a member */
			p += p[1] == '^';
			p += p[1] == ']';
			while (p[1] && p[1] != ']')
				p++;
			p += p[1] != 0;
			atom = (struct rep_shape){ 0, 0, 0 };
			continue;
		case '(':
			if (top == L7_CONTEXT_MAX_GROUPS)
				return (struct rep_shape){ INT_MAX, 0, 0 };
			frame[++top] = (struct rep_shape){ 0, 0, 0 };
			atom = (struct rep_shape){ 0, 0, 0 };
			continue;
		case ')':   /* the group is an atom with what it holds, already counted in its parent */
			if (!top)
				continue;
			atom = frame[top--];
			if (atom.depth > frame[top].depth)
				frame[top].depth = atom.depth;
			frame[top].loops += atom.loops;
			continue;
		case '{': {
			char *e;
			unsigned long n = strtoul(p + 1, &e, 10), m = n;
			if (*e == ',')
				m = e[1] == '}' ? n + 1 : strtoul(e + 1, &e, 10);
			copies = m ? (m < 100000 ? m : 100000) : 1;
			optional = m > n ? (m - n < 100000 ? m - n : 100000) : 0;
			while (p[1] && p[1] != '}')
				p++;
			p += p[1] != 0;
			break;
		}
		case '*': case '?': break;
		case '+': copies = 2; break;
		default:
			atom = (struct rep_shape){ 0, 0, 0 };
			continue;
		}
		/* a repetition of atom: what it held is counted `copies` times now, not once */
		worst.copies = worst.copies * copies > L7_CONTEXT_MAX_COPIES ? L7_CONTEXT_MAX_COPIES + 1ull
									    : worst.copies * copies;
		unsigned long long was = atom.loops;
		atom.depth++;
		atom.loops = atom.loops * copies + optional;
		if (atom.loops > L7_CONTEXT_MAX_LOOPS * 2ull)
			atom.loops = L7_CONTEXT_MAX_LOOPS * 2ull;   /* past the bound: saturate */
		frame[top].loops += atom.loops - was;
		if (atom.depth > frame[top].depth)
			frame[top].depth = atom.depth;
		if (atom.depth > worst.depth)
			worst.depth = atom.depth;
		if (frame[top].loops > worst.loops)
			worst.loops = frame[top].loops;
	}
	return worst;
}

int l7_context_regcomp(struct re_pattern_buffer *re, const char *pattern, char *why, size_t whylen)
{
	struct rep_shape r = context_reps(pattern);
	if (r.depth > L7_CONTEXT_MAX_DEPTH) {
		snprintf(why, whylen, "its repetitions nest %s%d deep (a repetition of something that repeats); "
			 "write it with at most %d", r.depth == INT_MAX ? "past " : "",
			 r.depth == INT_MAX ? L7_CONTEXT_MAX_GROUPS : r.depth, L7_CONTEXT_MAX_DEPTH);
		return -1;
	}
	if (r.loops > L7_CONTEXT_MAX_LOOPS) {
		snprintf(why, whylen, "it would expand to more than %d parts that may match nothing ('*', '?' "
			 "and '{0,n}', copied by '+' and '{n,m}' around them); repeat fewer of them", L7_CONTEXT_MAX_LOOPS);
		return -1;
	}
	if (r.copies > L7_CONTEXT_MAX_COPIES) {
		snprintf(why, whylen, "its repetitions ('+', '{n,m}') would expand to more than %d copies; "
			 "write it with '*' or fewer repetitions", L7_CONTEXT_MAX_COPIES);
		return -1;
	}
	return regcomp(re, pattern, REG_EXTENDED | REG_NOSUB);
}
