/* Rule tables: the compiler turned long runs of method+path rules into tables (ir/passes.c
 * "tables") and long source-prefix lists into sets ("sets"), and wrote their entries into
 * the manifest; they go into the l7_exact hash map and the l7_prefix and l7_cidrs tries here
 * (and the policy's Timers are started), after the object is loaded and before anything is attached, so no
 * request is ever judged by a half-filled table. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "policy.h"

int fill_rule_tables(struct bpf_object *obj, const struct manifest *mf, char *err, size_t errlen)
{
	int cidrs = bpf_object__find_map_fd_by_name(obj, "l7_cidrs");
	int timers = bpf_object__find_map_fd_by_name(obj, "l7_timers");
	int exact = bpf_object__find_map_fd_by_name(obj, "l7_exact");
	int prefix = bpf_object__find_map_fd_by_name(obj, "l7_prefix");

	for (__u32 i = 0; i < mf->n_timer; i++) {   /* the policy's Timers start now */
		struct timespec now;
		clock_gettime(CLOCK_MONOTONIC, &now);   /* bpf_ktime_get_ns()'s clock */
		uint64_t ns = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
		if (timers < 0 || bpf_map_update_elem(timers, &i, &ns, BPF_ANY)) {
			snprintf(err, errlen, "cannot start timer %s: %s", mf->timer[i].name.s,
				 timers < 0 ? "no l7_timers map" : strerror(errno));
			return -1;
		}
	}
	for (__u32 i = 0; i < mf->n_cidr; i++) {
		const struct l7m_cidr *c = &mf->cidr[i];
		uint32_t one = 1;
		struct l7_cidr_key k = { 32 + c->bits, htonl(c->set), htonl(c->ip) };   /* bits <= 32: the reader's bound */
		if (cidrs < 0 || bpf_map_update_elem(cidrs, &k, &one, BPF_ANY)) {
			snprintf(err, errlen, "prefix set %u: cannot insert %u.%u.%u.%u/%u: %s", c->set, c->ip >> 24,
				 c->ip >> 16 & 255, c->ip >> 8 & 255, c->ip & 255, c->bits,
				 cidrs < 0 ? "no l7_cidrs map" : strerror(errno));
			return -1;
		}
	}
	if (mf->n_table && (exact < 0 || prefix < 0)) {
		snprintf(err, errlen, "the object has rule tables but no l7_exact/l7_prefix maps");
		return -1;
	}
	/* an entry's key is any bytes, up to L7_TABLE_PATH (the reader's bound) */
	for (__u32 i = 0; i < mf->n_table; i++) {
		const struct l7m_table *t = &mf->table[i];
		uint32_t value = L7_TABLE_VALUE(i, t->group);   /* its position, its group */
		int rc;
		if (t->match == L7M_EXACT) {
			struct l7_table_key k = { .table = t->table, .method = t->method, .len = t->key.len };
			memcpy(k.path, t->key.s, t->key.len);
			rc = bpf_map_update_elem(exact, &k, &value, BPF_ANY);
		} else {
			struct l7_prefix_key k = { .prefixlen = 64 + 8 * t->key.len, .table = htonl(t->table),
						   .method = htonl(t->method) };
			memcpy(k.path, t->key.s, t->key.len);
			rc = bpf_map_update_elem(prefix, &k, &value, BPF_ANY);
		}
		if (rc) {
			snprintf(err, errlen, "rule table %u: cannot insert entry %u (%u bytes): %s", t->table, i, t->key.len,
				 strerror(errno));
			return -1;
		}
	}
	if (mf->n_table + mf->n_cidr && getenv("L7RUN_VERBOSE_TABLES"))
		fprintf(stderr, "l7run: %u rule table entries loaded\n", mf->n_table + mf->n_cidr);
	return 0;
}
