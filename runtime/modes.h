/* modes.h: the modes l7run runs in, each a table of operations (l7run.h, struct mode_ops). */
#ifndef L7RUN_MODES_H
#define L7RUN_MODES_H

#include "l7run.h"

extern const struct mode_ops gateway_mode;   /* gateway.c */
extern const struct mode_ops mesh_mode;      /* mesh.c */

#endif
