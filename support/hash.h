/* support: FNV-1a, 64 bits, for names and keys that must not collide by accident (key file
 * names, identifiers, a build's sources, the budget model's calibration keys). Not for maps
 * the data plane hashes (stdlib/bpf/xxhash.h). */
#ifndef L7_HASH_H
#define L7_HASH_H

#include <stddef.h>
#include <stdint.h>

#define L7_FNV_BASIS 0xcbf29ce484222325ull

/* h (L7_FNV_BASIS to start) with n bytes of p folded in. */
static inline uint64_t l7_fnv1a(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

#endif
