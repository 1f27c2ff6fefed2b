/* The data-plane machinery linked into every compiled policy. The entry points named in
 * l7/progs.def are non-static so they survive into the bitcode; l7c internalises and inlines
 * them into the program wrappers it generates. */
#include "gateway.h"
#include "mesh.h"
#include "mesh_h2.h"
/* After them: jwt.h uses the maps gateway.h declares; the generated policy calls l7_jwt_check. */
#define L7_JWT_EXTERN
#include "jwt.h"
