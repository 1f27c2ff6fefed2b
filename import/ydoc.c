/* libyaml's document model turned into ynode trees with positions (ydoc.h). */
#include "ydoc.h"

#include <stdlib.h>
#include <string.h>
#include <yaml.h>

/* Aliases are copied where they are used: a document whose aliases expand past this many
 * nodes is refused (the "billion laughs"), and so is nesting deeper than MAX_DEPTH (a
 * recursive alias expands forever). Policies are far smaller. */
#define MAX_NODES 200000
#define MAX_DEPTH 64

struct ld {
	struct l7_arena **a;
	const struct l7_source *src;
	struct l7_diags *d;
	yaml_document_t *doc;
	size_t *line_start;          /* byte offset of each line (0-based lines) */
	size_t nlines;
	long nodes;
	bool failed;
};

/* libyaml counts columns (and its index) in characters; the caret needs bytes. */
static struct l7_loc loc_at(const struct ld *x, yaml_mark_t m, yaml_mark_t end)
{
	struct l7_loc l = { x->src, (unsigned)m.line + 1, (unsigned)m.column + 1, 0, 0 };
	for (int which = 0; which < 2; which++) {
		yaml_mark_t k = which ? end : m;
		size_t at = k.line < x->nlines ? x->line_start[k.line] : x->src->len;
		for (size_t c = 0; c < k.column && at < x->src->len && x->src->text[at] != '\n'; c++) {
			at++;
			while (at < x->src->len && ((unsigned char)x->src->text[at] & 0xc0) == 0x80)
				at++;   /* the rest of a UTF-8 sequence */
		}
		*(which ? &l.end : &l.start) = (unsigned)at;
	}
	if (l.end < l.start)
		l.end = l.start;
	return l;
}

static struct ynode *convert(struct ld *x, yaml_node_t *n, int depth)
{
	if (x->failed)
		return NULL;
	if (depth > MAX_DEPTH || ++x->nodes > MAX_NODES) {
		l7_diag(x->d, L7_ERROR, loc_at(x, n->start_mark, n->end_mark),
			depth > MAX_DEPTH ? "YAML nested deeper than %d levels (a recursive alias?)"
					  : "YAML document expands to more than %d nodes (aliases?)",
			depth > MAX_DEPTH ? MAX_DEPTH : MAX_NODES);
		x->failed = true;
		return NULL;
	}
	struct ynode *y = l7_alloc(x->a, sizeof(*y));
	y->loc = loc_at(x, n->start_mark, n->end_mark);
	switch (n->type) {
	case YAML_SCALAR_NODE:
		y->kind = Y_SCALAR;
		y->str = l7_strndup(x->a, (const char *)n->data.scalar.value, n->data.scalar.length);
		y->str_len = n->data.scalar.length;
		y->plain = n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
		return y;
	case YAML_SEQUENCE_NODE: {
		y->kind = Y_SEQ;
		long cnt = n->data.sequence.items.top - n->data.sequence.items.start;
		y->items = l7_alloc(x->a, sizeof(*y->items) * (size_t)(cnt + 1));
		for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++) {
			struct ynode *c = convert(x, yaml_document_get_node(x->doc, *it), depth + 1);
			if (!c)
				return NULL;
			y->items[y->n++] = c;
		}
		return y;
	}
	case YAML_MAPPING_NODE: {
		y->kind = Y_MAP;
		long cnt = n->data.mapping.pairs.top - n->data.mapping.pairs.start;
		y->items = l7_alloc(x->a, sizeof(*y->items) * (size_t)(2 * cnt + 1));
		for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
			struct ynode *k = convert(x, yaml_document_get_node(x->doc, p->key), depth + 1);
			struct ynode *v = k ? convert(x, yaml_document_get_node(x->doc, p->value), depth + 1) : NULL;
			if (!v)
				return NULL;
			if (k->kind != Y_SCALAR) {
				l7_diag(x->d, L7_ERROR, k->loc, "mapping keys must be plain strings");
				x->failed = true;
				return NULL;
			}
			/* YAML forbids a key twice and Kubernetes refuses it: which one would count? */
			for (int i = 0; i < y->n; i++)
				if (y->items[2 * i]->str_len == k->str_len && !memcmp(y->items[2 * i]->str, k->str, k->str_len)) {
					l7_diag(x->d, L7_ERROR, k->loc, "key '%s' given twice in this mapping (first at line %u)", k->str,
						y->items[2 * i]->loc.line);
					x->failed = true;
					return NULL;
				}
			y->items[2 * y->n] = k;
			y->items[2 * y->n + 1] = v;
			y->n++;
		}
		return y;
	}
	default:
		l7_diag(x->d, L7_ERROR, y->loc, "empty YAML node");
		x->failed = true;
		return NULL;
	}
}

static int load(struct l7_arena **a, const struct l7_source *src, struct ydoc **docs, struct l7_diags *d,
		void (*each)(void *ctx, const struct ynode *root), void *ctx)
{
	*docs = NULL;
	if (src->len >= 2 && (((unsigned char)src->text[0] == 0xfe && (unsigned char)src->text[1] == 0xff) ||
			      ((unsigned char)src->text[0] == 0xff && (unsigned char)src->text[1] == 0xfe))) {
		struct l7_loc l = { src, 1, 1, 0, 0 };
		l7_diag(d, L7_ERROR, l, "the file is UTF-16; l7c import reads UTF-8 YAML");
		return 0;
	}
	struct ld x = { .a = a, .src = src, .d = d };
	x.line_start = malloc(sizeof(size_t) * (src->len + 2));
	x.line_start[x.nlines++] = 0;
	for (size_t i = 0; i < src->len; i++)
		if (src->text[i] == '\n')
			x.line_start[x.nlines++] = i + 1;

	yaml_parser_t p;
	yaml_parser_initialize(&p);
	yaml_parser_set_input_string(&p, (const unsigned char *)src->text, src->len);
	int n = 0, cap = 0;
	for (;;) {
		yaml_document_t doc;
		if (!yaml_parser_load(&p, &doc)) {
			yaml_mark_t m = p.problem_mark;
			struct l7_loc l = loc_at(&x, m, m);
			if (p.context)
				l7_diag(d, L7_ERROR, l, "YAML: %s %s (line %zu)", p.problem ? p.problem : "error", p.context,
					p.context_mark.line + 1);
			else
				l7_diag(d, L7_ERROR, l, "YAML: %s", p.problem ? p.problem : "cannot be read");
			break;   /* libyaml cannot go on after an error */
		}
		yaml_node_t *root = yaml_document_get_root_node(&doc);
		if (!root) {   /* the end of the stream */
			yaml_document_delete(&doc);
			break;
		}
		if (n == cap) {
			cap = cap ? cap * 2 : 8;
			struct ydoc *nd = l7_alloc(a, sizeof(*nd) * (size_t)cap);
			if (n)
				memcpy(nd, *docs, sizeof(*nd) * (size_t)n);
			*docs = nd;
		}
		x.doc = &doc;
		x.failed = false;
		x.nodes = 0;
		struct ydoc *yd = &(*docs)[n++];
		yd->loc = loc_at(&x, doc.start_mark, doc.start_mark);
		yd->root = convert(&x, root, 0);
		yaml_document_delete(&doc);
		if (each)
			each(ctx, yd->root);
	}
	yaml_parser_delete(&p);
	free(x.line_start);
	return n;
}

int y_load(struct l7_arena **a, const struct l7_source *src, struct ydoc **docs, struct l7_diags *d)
{
	return load(a, src, docs, d, NULL, NULL);
}

int y_each(struct l7_arena **a, const struct l7_source *src, struct l7_diags *d,
	   void (*each)(void *ctx, const struct ynode *root), void *ctx)
{
	struct ydoc *docs;
	return load(a, src, &docs, d, each, ctx);
}

const struct ynode *y_key(const struct ynode *m, const char *key)
{
	if (!m || m->kind != Y_MAP)
		return NULL;
	for (int i = 0; i < m->n; i++)
		if (!strcmp(m->items[2 * i]->str, key))
			return m->items[2 * i];
	return NULL;
}

const struct ynode *y_get(const struct ynode *m, const char *key)
{
	if (!m || m->kind != Y_MAP)
		return NULL;
	for (int i = 0; i < m->n; i++)
		if (!strcmp(m->items[2 * i]->str, key))
			return m->items[2 * i + 1];
	return NULL;
}

bool y_is_null(const struct ynode *n)
{
	return n && n->kind == Y_SCALAR && n->plain &&
	       (!n->str_len || !strcmp(n->str, "~") || !strcmp(n->str, "null") || !strcmp(n->str, "Null") ||
		!strcmp(n->str, "NULL"));
}
