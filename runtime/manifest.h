/* The manifest of a compiled policy (l7/manifest.h), read into typed records: the only reader
 * of the section, for l7run, the round-trip test and the fuzzer. */
#ifndef L7RUN_MANIFEST_H
#define L7RUN_MANIFEST_H

#include <stddef.h>
#include <stdio.h>
#include "l7/manifest.h"

/* Every kind of l7/manifest.def as an array in record order: m->service[i], m->n_service.
 * Records are checked: every field within its bounds, every reference to a record that
 * exists, every string NUL-terminated in the manifest's own copy. */
struct manifest {
	__u32 version, size, count;
#define L7M_KIND(id, name, max, help, fields) struct l7m_##name *name; __u32 n_##name;
#include "l7/manifest.def"
	char *strings;           /* what the records' strings point into */
};

/* Reads a manifest of len bytes; 0, or -1 with why in err (and m left empty). */
int manifest_read(const void *bytes, size_t len, struct manifest *m, char *err, size_t errlen);
/* The same, from the L7_MANIFEST_SECTION of an ELF object in memory. */
int manifest_of_object(const void *obj, size_t len, struct manifest *m, char *err, size_t errlen);
void manifest_free(struct manifest *m);
/* Every record as a line of text (l7run --manifest). */
void manifest_print(FILE *out, const struct manifest *m);

/* The name of an L7M_ENUM value of RULE.decision ("forward", ...). */
const char *manifest_decision(__u32 d);
/* The name l7run gives backend slot i: the upstream's, or for an endpoint of a set NAME#k. */
void manifest_slot_name(const struct manifest *m, __u32 slot, char *buf, size_t n);

#endif
