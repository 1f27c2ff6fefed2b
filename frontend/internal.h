/* Internal to frontend/: what its files share beyond frontend.h. */
#ifndef L7_FRONTEND_INTERNAL_H
#define L7_FRONTEND_INTERNAL_H

#include "frontend.h"

#include <tree_sitter/api.h>

/* syntax_errors.c: reports the syntax errors under root. Declarations tree-sitter could not
 * place because of their value are returned (arena of m) for l7_parse to declare all the
 * same; the count is returned. */
struct l7_broken_decl {
	const char *kind;        /* "upstream", "service", "fallback" or "identity" */
	char *name;
	struct l7_loc loc;
};
int l7_syntax_errors(struct l7_module *m, const struct l7_source *src, TSNode root, struct l7_diags *d,
		     struct l7_broken_decl **broken);

/* resolve.c: the interface type called name, or NULL */
const struct l7_iface_type *l7_find_type(const struct l7_module *m, const char *name);

/* state.c */
void l7_check_instances(struct l7_module *m, struct l7_diags *d);
void l7_bind_instance(struct l7_module *m, struct l7_binding *b, struct l7_diags *d);

#endif
