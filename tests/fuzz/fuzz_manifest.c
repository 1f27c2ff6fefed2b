/* libFuzzer harness: the manifest reader (runtime/manifest.c), which reads the l7.manifest
 * section of every object l7run is given. Whatever the section holds, it is read or refused
 * with a reason, never read past; and what is read holds only what l7run may use as it does
 * (runtime/load.c, jwt.c, identities.c, tables.c, metrics.c): every reference names a record
 * that exists, every index is within the data plane's arrays, every table key fits the map key.
 * ASan sees any access outside the records. Seeds: the manifests of the examples and the IR
 * test policies (manifest_seeds.sh, at test time, so that they are always of this version). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void use(const struct manifest *m)
{
	static FILE *sink;
	char name[L7M_NAME_MAX + 16];
	size_t sum = 0;

	if (!sink)
		sink = fopen("/dev/null", "w");
	manifest_print(sink, m);
	if (m->n_service > L7M_MAX_SERVICES || m->n_upstream > L7_MAX_UPSTREAMS || m->n_jwt > L7_MAX_JWT ||
	    m->n_flags > 1 || m->n_fallback > 1 || m->n_source > 1)
		__builtin_trap();   /* past what l7run's arrays hold */
	for (__u32 i = 0; i < m->n_upstream; i++) {
		manifest_slot_name(m, i, name, sizeof name);
		sum += strlen(name);
	}
	for (__u32 i = 0; i < m->n_fallback; i++)
		sum += m->upstream[m->fallback[i].slot].port;
	for (__u32 i = 0; i < m->n_identity_net; i++) {
		if (m->identity_net[i].bits > 32)
			__builtin_trap();
		sum += strlen(m->identity[m->identity_net[i].identity].name.s);
	}
	for (__u32 i = 0; i < m->n_cidr; i++)
		if (m->cidr[i].bits > 32)
			__builtin_trap();
	for (__u32 i = 0; i < m->n_table; i++) {
		struct l7_table_key k = { .len = m->table[i].key.len };
		if (m->table[i].key.len > sizeof k.path || m->table[i].match > L7M_PREFIX)
			__builtin_trap();
		memcpy(k.path, m->table[i].key.s, m->table[i].key.len);
		sum += k.path[0];
	}
	for (__u32 i = 0; i < m->n_rule; i++) {
		const struct l7m_rule *r = &m->rule[i];
		sum += strlen(m->policy[r->policy].name.s) + strlen(manifest_decision(r->decision));
		if (r->target != L7M_NONE)
			sum += strlen(m->upstream[r->target].name.s);
		if (r->entry != L7M_NONE)
			sum += m->table[r->entry].group;
	}
	fprintf(sink, "%zu\n", sum);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct manifest m;
	char err[512];

	err[0] = 0;
	if (manifest_read(data, size, &m, err, sizeof err)) {
		if (!err[0])
			__builtin_trap();   /* refused without saying why */
		return 0;
	}
	use(&m);
	manifest_free(&m);
	return 0;
}
