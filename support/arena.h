/* support: one arena per module or program, freed together (the AST's nodes, the IR's). */
#ifndef L7_ARENA_H
#define L7_ARENA_H

#include <stddef.h>

struct l7_arena;
void *l7_alloc(struct l7_arena **a, size_t size);              /* zeroed */
char *l7_strndup(struct l7_arena **a, const char *s, size_t n);
void l7_arena_free(struct l7_arena *a);

#endif
