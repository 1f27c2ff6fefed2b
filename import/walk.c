/* The schema of fields.def: each YAML mapping is checked against it, so an unknown field is an
 * error at its position and a field l7c cannot express is reported with what it does instead;
 * and typed reads of scalars and lists with the same care. */
#include "model.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static const char *const object_names[] = {
#define OBJECT(id, name) [id] = name,
#define FIELD(o, k, s, n)
#define WHEN(k, s, n)
#include "fields.def"
#undef OBJECT
#undef FIELD
#undef WHEN
};

static const struct field {
	enum fobject o;
	const char *key;
	enum fstatus s;
	const char *note;
} fields[] = {
#define OBJECT(id, name)
#define FIELD(o, k, s, n) { o, k, FS_##s, n },
#define WHEN(k, s, n)
#include "fields.def"
#undef OBJECT
#undef FIELD
#undef WHEN
};

static const struct when {
	const char *key;
	enum fstatus s;
	const char *note;
} whens[] = {
#define OBJECT(id, name)
#define FIELD(o, k, s, n)
#define WHEN(k, s, n) { k, FS_##s, n },
#include "fields.def"
#undef OBJECT
#undef FIELD
#undef WHEN
};

#define NFIELDS (sizeof(fields) / sizeof(fields[0]))

char *vxprintf(struct ictx *x, const char *fmt, va_list ap)
{
	va_list again;
	va_copy(again, ap);
	int n = vsnprintf(NULL, 0, fmt, ap);
	char *s = l7_alloc(x->a, (size_t)n + 1);
	vsnprintf(s, (size_t)n + 1, fmt, again);
	va_end(again);
	return s;
}

char *xprintf(struct ictx *x, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *s = vxprintf(x, fmt, ap);
	va_end(ap);
	return s;
}

const char *where_of(struct ictx *x, struct l7_loc l)
{
	return l.src ? xprintf(x, "%s:%u", l.src->path, l.line) : "?";
}

/* Keys are case-sensitive, suggestions not (HTTP: did you mean http?). */
static unsigned distance(const char *a, const char *b)
{
	char la[65], lb[65];
	size_t i = 0, j = 0;
	for (; a[i] && i < 64; i++)
		la[i] = (char)(a[i] | 32);
	for (; b[j] && j < 64; j++)
		lb[j] = (char)(b[j] | 32);
	la[i] = lb[j] = 0;
	return a[i] || b[j] ? 99 : l7_edit_distance(la, lb);
}

bool walk_fields(struct ictx *x, const struct ynode *map, enum fobject o)
{
	if (!map || y_is_null(map))
		return false;
	if (map->kind != Y_MAP) {
		l7_diag(x->d, L7_ERROR, map->loc, "%s must be a mapping", object_names[o]);
		return false;
	}
	for (int i = 0; i < map->n; i++) {
		const struct ynode *k = map->items[2 * i];
		const struct field *f = NULL;
		const char *best = NULL;
		unsigned bd = 3;
		for (size_t j = 0; j < NFIELDS; j++) {
			if (fields[j].o != o)
				continue;
			if (!strcmp(fields[j].key, k->str)) {
				f = &fields[j];
				break;
			}
			unsigned dd = distance(k->str, fields[j].key);
			if (dd < bd) {
				bd = dd;
				best = fields[j].key;
			}
		}
		if (!f) {
			if (best)
				l7_diag(x->d, L7_ERROR, k->loc, "unknown field '%s' in %s; did you mean '%s'?", k->str, object_names[o], best);
			else
				l7_diag(x->d, L7_ERROR, k->loc, "unknown field '%s' in %s", k->str, object_names[o]);
		} else if (f->s == FS_ERR) {
			l7_diag(x->d, L7_ERROR, k->loc, "%s: %s", f->key, f->note);
		} else if (f->s == FS_WARN) {
			l7_diag(x->d, L7_WARNING, k->loc, "%s: %s", f->key, f->note);
		}
	}
	return true;
}

const char *y_str(struct ictx *x, const struct ynode *n, const char *what)
{
	if (!n || n->kind != Y_SCALAR || y_is_null(n)) {
		if (n)
			l7_diag(x->d, L7_ERROR, n->loc, "%s must be a string", what);
		return NULL;
	}
	for (size_t i = 0; i < n->str_len; i++)
		if ((unsigned char)n->str[i] < 0x20 || n->str[i] == 0x7f) {
			l7_diag(x->d, L7_ERROR, n->loc, "%s holds a control character (byte 0x%02x)", what, (unsigned char)n->str[i]);
			return NULL;
		}
	return n->str;
}

struct ynode **y_list(struct ictx *x, const struct ynode *n, const char *what, int *count)
{
	*count = 0;
	if (!n || y_is_null(n))
		return NULL;
	if (n->kind != Y_SEQ) {
		l7_diag(x->d, L7_ERROR, n->loc, "%s must be a list", what);
		return NULL;
	}
	*count = n->n;
	return n->items;
}

bool y_bool(struct ictx *x, const struct ynode *n, const char *what, bool *out)
{
	if (n && n->kind == Y_SCALAR) {
		static const char *const yes[] = { "true", "True", "TRUE" }, *const no[] = { "false", "False", "FALSE" };
		for (int i = 0; i < 3; i++) {
			if (!strcmp(n->str, yes[i]))
				return *out = true;
			if (!strcmp(n->str, no[i]))
				return !(*out = false);
		}
	}
	if (n)
		l7_diag(x->d, L7_ERROR, n->loc, "%s must be true or false", what);
	return false;
}

/* ---- the table, for docs/import.md ---- */

static const char *const status_text[] = {
	[FS_OK] = "supported", [FS_PART] = "supported, with a difference", [FS_WARN] = "warning",
	[FS_ERR] = "error", [FS_META] = "read, no effect",
};

void print_fields(FILE *out)
{
	for (int o = 0; o < O_COUNT; o++) {
		fprintf(out, "\n**%s**\n\n| field | status | what l7c does |\n|---|---|---|\n", object_names[o]);
		for (size_t i = 0; i < NFIELDS; i++)
			if ((int)fields[i].o == o)
				fprintf(out, "| `%s` | %s | %s |\n", fields[i].key, status_text[fields[i].s], fields[i].note);
	}
	fprintf(out, "\n**when[] keys**\n\n| key | status | what l7c does |\n|---|---|---|\n");
	for (size_t i = 0; i < sizeof(whens) / sizeof(whens[0]); i++)
		fprintf(out, "| `%s` | %s | %s |\n", whens[i].key, status_text[whens[i].s], whens[i].note);
	fprintf(out, "| any other key | error | Istio ignores keys it does not know; l7c does not |\n");
}

/* The when[] key of the table that key is an instance of: "request.headers[x-a]" is
 * "request.headers[NAME]". NULL: unknown. */
const char *when_find(const char *key, enum fstatus *s, const char **note)
{
	for (size_t i = 0; i < sizeof(whens) / sizeof(whens[0]); i++) {
		const char *w = whens[i].key, *open = strstr(w, "[NAME]"), *star = strchr(w, '*');
		size_t kl = strlen(key);
		bool hit = open ? !strncmp(key, w, (size_t)(open - w) + 1) && kl > (size_t)(open - w) + 2 && key[kl - 1] == ']'
		     : star ? !strncmp(key, w, (size_t)(star - w))
			    : !strcmp(key, w);
		if (hit) {
			*s = whens[i].s;
			*note = whens[i].note;
			return w;
		}
	}
	return NULL;
}
