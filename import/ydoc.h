/* YAML documents as small trees whose every node keeps its source position (libyaml), so the
 * importer's diagnostics point at file:line:col like the compiler's. (Not yaml.h: that is
 * libyaml's header.) */
#ifndef L7_IMPORT_YDOC_H
#define L7_IMPORT_YDOC_H

#include <stdbool.h>
#include <stddef.h>

#include "frontend.h"

enum ynode_kind { Y_SCALAR, Y_SEQ, Y_MAP };

struct ynode {
	enum ynode_kind kind;
	struct l7_loc loc;           /* where the node starts; end: where it ends (same line or not) */
	const char *str;             /* Y_SCALAR: the value, NUL-terminated (str_len bytes, may hold NULs) */
	size_t str_len;
	bool plain;                  /* Y_SCALAR written without quotes: null, ~, true, 80 are typed */
	struct ynode **items;        /* Y_SEQ: the items; Y_MAP: key 2i, value 2i+1 */
	int n;                       /* items (Y_SEQ) or pairs (Y_MAP) */
};

struct ydoc {
	struct ynode *root;          /* NULL for an empty document */
	struct l7_loc loc;           /* its first line (for "kind/ns/name at file:line") */
};

/* Loads every document of src into *docs. Errors (bad YAML, aliases that expand too far,
 * duplicate keys, non-scalar keys) are reported at their position and leave that document
 * NULL-rooted; a syntax error ends the file (libyaml cannot resynchronise). Returns the number
 * of documents. */
int y_load(struct l7_arena **a, const struct l7_source *src, struct ydoc **docs, struct l7_diags *d);
/* The same, handing each document to each(ctx, root) as soon as it is read (root NULL when the
 * document was refused), so that diagnostics come in the order of the file. */
int y_each(struct l7_arena **a, const struct l7_source *src, struct l7_diags *d,
	   void (*each)(void *ctx, const struct ynode *root), void *ctx);

/* The value of key in a mapping (NULL if absent or m is not a mapping), and the key node. */
const struct ynode *y_get(const struct ynode *m, const char *key);
const struct ynode *y_key(const struct ynode *m, const char *key);

/* A plain null (`~`, `null`, empty) */
bool y_is_null(const struct ynode *n);

#endif
