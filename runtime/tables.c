/* Rule tables: the compiler turned long runs of method+path rules into tables (ir/passes.c
 * "tables") and long source-prefix lists into sets ("sets"), and wrote their entries into
 * l7.config; they go into the l7_exact hash map and the l7_prefix and l7_cidrs tries here
 * (and the policy's Timers are started), after the object is loaded and before anything is attached, so no
 * request is ever judged by a half-filled table. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "l7run.h"

int fill_rule_tables(struct bpf_object *obj, const char *config, char *err, size_t errlen)
{
	char *text = strdup(config);
	if (!text)
		return -1;
	int cidrs = bpf_object__find_map_fd_by_name(obj, "l7_cidrs");
	int timers = bpf_object__find_map_fd_by_name(obj, "l7_timers");
	int exact = bpf_object__find_map_fd_by_name(obj, "l7_exact");
	int prefix = bpf_object__find_map_fd_by_name(obj, "l7_prefix");
	int n = 0, rc = 0;
	for (char *save = NULL, *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		unsigned table, method, set, a, b, c, d, bits;
		char kind[8], p[L7_TABLE_PATH + 1];
		if (sscanf(line, "timer %u", &set) == 1) {   /* the policy's Timers start now */
			struct timespec now;
			clock_gettime(CLOCK_MONOTONIC, &now);   /* bpf_ktime_get_ns()'s clock */
			uint64_t ns = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
			if (timers < 0 || bpf_map_update_elem(timers, &set, &ns, BPF_ANY)) {
				snprintf(err, errlen, "cannot start timer %u: %s", set, timers < 0 ? "no l7_timers map" : strerror(errno));
				rc = -1;
				break;
			}
			continue;
		}
		if (sscanf(line, "cidrset %u %u.%u.%u.%u/%u", &set, &a, &b, &c, &d, &bits) == 6) {
			uint32_t one = 1;
			struct l7_cidr_key k = { 32 + bits, htonl(set), htonl(a << 24 | b << 16 | c << 8 | d) };
			if (cidrs < 0 || bits > 32 || bpf_map_update_elem(cidrs, &k, &one, BPF_ANY)) {
				snprintf(err, errlen, "prefix set %u: cannot insert %u.%u.%u.%u/%u: %s", set, a, b, c, d, bits,
					 cidrs < 0 ? "no l7_cidrs map" : strerror(errno));
				rc = -1;
				break;
			}
			n++;
			continue;
		}
		unsigned value;   /* L7_TABLE_VALUE(position in the run, group) */
		if (sscanf(line, "table %u %7s %u %u %64s", &table, kind, &method, &value, p) != 5) {
			if (sscanf(line, "table %u %7s %u %u", &table, kind, &method, &value) != 4 || strcmp(kind, "exact"))
				continue;
			p[0] = 0;   /* the empty path (exact only) */
		}
		size_t len = strlen(p);
		if (exact < 0 || prefix < 0) {
			snprintf(err, errlen, "the object has rule tables but no l7_exact/l7_prefix maps");
			rc = -1;
			break;
		}
		if (!strcmp(kind, "exact")) {
			struct l7_table_key k = { .table = table, .method = method, .len = (uint32_t)len };
			memcpy(k.path, p, len);
			rc = bpf_map_update_elem(exact, &k, &value, BPF_ANY);
		} else {
			struct l7_prefix_key k = { .prefixlen = (uint32_t)(64 + 8 * len), .table = htonl(table),
						   .method = htonl(method) };
			memcpy(k.path, p, len);
			rc = bpf_map_update_elem(prefix, &k, &value, BPF_ANY);
		}
		if (rc) {
			snprintf(err, errlen, "rule table %u: cannot insert '%s': %s", table, p, strerror(errno));
			break;
		}
		n++;
	}
	if (!rc && n && getenv("L7RUN_VERBOSE_TABLES"))
		fprintf(stderr, "l7run: %d rule table entries loaded\n", n);
	free(text);
	return rc;
}
