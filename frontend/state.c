/* State instances (`Jwt auth { key_file = "k"; }`) and the `using` bindings that refer to
 * them. Which settings an instance takes depends on what its state type binds to in the data
 * plane (enum l7_state_kind); the schema is here. */
#include "internal.h"

#include <limits.h>
#include <string.h>
#include <unistd.h>

struct spec {
	const char *name;
	enum l7_type type;
	bool required;
	long long min, max;     /* ints */
};

static const struct spec jwt_spec[] = {
	{ "key_file", T_STRING, true, 0, 0 }, { "issuer", T_STRING, false, 0, 0 },
	{ "audience", T_STRING, false, 0, 0 }, { "header", T_STRING, false, 0, 0 },
	{ "leeway", T_INT, false, 0, 3600 }, { NULL, 0, false, 0, 0 },
};
static const struct spec bucket_spec[] = {
	{ "rate", T_INT, true, 1, 1000000 }, { "burst", T_INT, false, 1, 1000000 },
	{ "status", T_INT, false, 200, 599 }, { NULL, 0, false, 0, 0 },
};
static const struct spec none_spec[] = { { NULL, 0, false, 0, 0 } };

static const struct spec *spec_of(enum l7_state_kind k)
{
	return k == SK_JWT ? jwt_spec : k == SK_BUCKET ? bucket_spec : none_spec;
}

const struct l7_expr *l7_instance_setting(const struct l7_instance *in, const char *name)
{
	for (int i = 0; i < in->nsettings; i++)
		if (!strcmp(in->settings[i].name, name))
			return in->settings[i].value;
	return NULL;
}

static void check_key_file(const struct l7_module *m, const struct l7_setting *st, struct l7_diags *d)
{
	char path[PATH_MAX];
	const char *f = st->value->str;
	if (f[0] == '/' || !m->src) {
		snprintf(path, sizeof(path), "%s", f);
	} else {
		const char *slash = strrchr(m->src->path, '/');
		snprintf(path, sizeof(path), "%.*s%s", slash ? (int)(slash - m->src->path + 1) : 0, m->src->path, f);
	}
	if (access(path, R_OK) != 0)
		l7_diag(d, L7_ERROR, st->value->loc, "key file '%s' cannot be read (paths are relative to the policy file)", f);
}

void l7_check_instances(struct l7_module *m, struct l7_diags *d)
{
	for (int i = 0; i < m->ninstances; i++) {
		struct l7_instance *in = &m->instances[i];
		for (int j = 0; j < i; j++)
			if (!strcmp(m->instances[j].name, in->name))
				l7_diag_again(d, in->loc, m->instances[j].loc, "declaration", "'%s' is declared twice", in->name);
		in->iface = l7_find_type(m, in->type);
		if (!in->iface || !in->iface->is_state) {
			l7_diag(d, L7_ERROR, in->type_loc, "'%s' is not a state type (declare it in an interface file: state %s { ... })",
				in->type, in->type);
			in->iface = NULL;
			continue;
		}
		const struct spec *sp = spec_of(in->iface->state_kind);
		for (int k = 0; k < in->nsettings; k++) {
			const struct l7_setting *st = &in->settings[k];
			const struct spec *s = sp;
			while (s->name && strcmp(s->name, st->name))
				s++;
			if (!s->name) {
				char known[256] = "";
				for (const struct spec *t = sp; t->name; t++)
					snprintf(known + strlen(known), sizeof(known) - strlen(known), "%s%s", t == sp ? "" : ", ", t->name);
				l7_diag(d, L7_ERROR, st->loc, "'%s' has no setting '%s'%s%s", in->type, st->name,
					*known ? "; it takes: " : "", known);
				continue;
			}
			for (int j = 0; j < k; j++)
				if (!strcmp(in->settings[j].name, st->name))
					l7_diag(d, L7_ERROR, st->loc, "setting '%s' given twice", st->name);
			enum l7_type t = st->value->kind == E_STRING ? T_STRING : st->value->kind == E_INT ? T_INT : T_ERROR;
			if (t != s->type) {
				l7_diag(d, L7_ERROR, st->value->loc, "setting '%s' must be a constant %s", st->name, l7_type_name(s->type));
				continue;
			}
			if (t == T_INT && (st->value->num < s->min || st->value->num > s->max))
				l7_diag(d, L7_ERROR, st->value->loc, "setting '%s' must be between %lld and %lld", st->name, s->min, s->max);
			if (t == T_STRING && st->value->str_len > 63)
				l7_diag(d, L7_ERROR, st->value->loc, "setting '%s' is longer than 63 bytes", st->name);
			if (!strcmp(st->name, "key_file"))
				check_key_file(m, st, d);
		}
		for (const struct spec *s = sp; s->name; s++)
			if (s->required && !l7_instance_setting(in, s->name))
				l7_diag(d, L7_ERROR, in->loc, "%s '%s' needs the setting '%s'", in->type, in->name, s->name);
	}
}

/* using (Type name): the instance called name, or a new one for types without settings. */
void l7_bind_instance(struct l7_module *m, struct l7_binding *b, struct l7_diags *d)
{
	b->instance = -1;
	if (!b->iface)
		return;
	for (int i = 0; i < m->ninstances; i++) {
		const struct l7_instance *in = &m->instances[i];
		if (strcmp(in->name, b->name))
			continue;
		if (strcmp(in->type, b->type)) {
			l7_diag(d, L7_ERROR, b->type_loc, "'%s' is a %s, not a %s", b->name, in->type, b->type);
			l7_diag(d, L7_NOTE, in->loc, "declared here");
			return;
		}
		b->instance = i;
		return;
	}
	bool needs_settings = false;
	for (const struct spec *s = spec_of(b->iface->state_kind); s->name; s++)
		needs_settings |= s->required;
	if (needs_settings) {
		l7_diag(d, L7_ERROR, b->loc, "no %s named '%s' is declared (add: %s %s { ... })", b->type, b->name, b->type, b->name);
		return;
	}
	/* implicit: a Counter needs nothing but a name, shared by every policy that uses it */
	struct l7_instance *n = l7_alloc(&m->arena, sizeof(*n) * (size_t)(m->ninstances + 1));
	if (m->ninstances)   /* memcpy from NULL is undefined even for 0 bytes */
		memcpy(n, m->instances, sizeof(*n) * (size_t)m->ninstances);
	n[m->ninstances] = (struct l7_instance){ .type = b->type, .name = b->name, .loc = b->loc, .type_loc = b->type_loc,
						 .implicit = true, .iface = b->iface };
	m->instances = n;
	b->instance = m->ninstances++;
}
