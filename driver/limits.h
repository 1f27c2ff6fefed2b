/* The kernel's hard limits on one program (limits.def), as constants LIMIT_<id>. */
#ifndef L7_LIMITS_H
#define L7_LIMITS_H

#include "l7/abi.h"

enum {
#define L7_LIMIT(id, value, unit, what, kernel) LIMIT_##id = (value),
#include "limits.def"
#undef L7_LIMIT
};

#endif
