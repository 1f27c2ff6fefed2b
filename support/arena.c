/* Arenas: blocks of 64 KiB (or one allocation's size), freed together. */
#include "arena.h"

#include <stdlib.h>
#include <string.h>

struct l7_arena {
	struct l7_arena *next;
	size_t used, cap;
	char data[];
};

void *l7_alloc(struct l7_arena **a, size_t size)
{
	size = (size + 15) & ~(size_t)15;
	if (!*a || (*a)->used + size > (*a)->cap) {
		size_t cap = size > 65536 ? size : 65536;
		struct l7_arena *n = malloc(sizeof(*n) + cap);
		if (!n)
			abort();
		n->next = *a;
		n->used = 0;
		n->cap = cap;
		*a = n;
	}
	void *p = (*a)->data + (*a)->used;
	(*a)->used += size;
	memset(p, 0, size);
	return p;
}

char *l7_strndup(struct l7_arena **a, const char *s, size_t n)
{
	char *p = l7_alloc(a, n + 1);
	memcpy(p, s, n);
	p[n] = 0;
	return p;
}

void l7_arena_free(struct l7_arena *a)
{
	while (a) {
		struct l7_arena *next = a->next;
		free(a);
		a = next;
	}
}
