/* Internal to frontend/: what its files share beyond frontend.h. */
#ifndef L7_FRONTEND_INTERNAL_H
#define L7_FRONTEND_INTERNAL_H

#include "frontend.h"

/* state.c */
void l7_check_instances(struct l7_module *m, struct l7_diags *d);
void l7_bind_instance(struct l7_module *m, struct l7_binding *b, struct l7_diags *d);

#endif
