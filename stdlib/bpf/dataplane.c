/* The data-plane machinery linked into every compiled policy. The entry points named in
 * l7/progs.def are non-static so they survive into the bitcode; l7c internalises and inlines
 * them into the program wrappers it generates. */
#include "gateway.h"
#include "mesh.h"
