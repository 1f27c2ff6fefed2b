/* JWT support in l7run: the HMAC keys (l7_jwt_keys) and the wall-clock offset (l7_jwt_clock)
 * that stdlib/bpf/jwt.h reads.
 *
 * Keys: l7.config lines `jwt IDX NAME key-file PATH` (written by l7c), overridden by
 * `--jwt-key IDX=PATH`. A key file holds the raw key bytes; one trailing newline ("\n" or
 * "\r\n") is stripped, since editors add one. Keys longer than 64 bytes are replaced by their
 * SHA-256 (RFC 2104), which is what HMAC does with them, so the kernel only handles <= 64.
 * A declared configuration whose key cannot be read stops l7run: running would refuse every
 * token (401) without saying why.
 *
 * Clock: BPF has no CLOCK_REALTIME but has bpf_ktime_get_tai_ns(); l7run writes
 * CLOCK_TAI - CLOCK_REALTIME (whole seconds: the kernel's TAI offset) at start and re-checks it
 * every 10 s (it changes only when the TAI offset is set or a leap second passes). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <bpf/bpf.h>
#include "l7run.h"
#include "../stdlib/bpf/sha256.h"

static struct {
	char path[L7_MAX_JWT][512];
	char name[L7_MAX_JWT][64];
	int declared[L7_MAX_JWT];
	int clock_fd;
	__s64 clock_off;
	time_t clock_at;
} J = { .clock_fd = -1 };

/* `jwt IDX NAME key-file PATH` from l7.config; 1 if the line was one. */
int jwt_config_line(const char *line)
{
	int idx;
	char name[64], path[512];

	if (sscanf(line, "jwt %d %63s key-file %511s", &idx, name, path) != 3)
		return 0;
	if (idx < 0 || idx >= L7_MAX_JWT)
		return 1;
	J.declared[idx] = 1;
	snprintf(J.name[idx], sizeof J.name[idx], "%s", name);
	if (!J.path[idx][0])   /* --jwt-key, parsed earlier, wins */
		snprintf(J.path[idx], sizeof J.path[idx], "%s", path);
	return 1;
}

/* --jwt-key IDX=PATH */
int jwt_key_arg(const char *arg)
{
	const char *eq = strchr(arg, '=');
	int idx = atoi(arg);

	if (!eq || idx < 0 || idx >= L7_MAX_JWT || !eq[1])
		return -1;
	snprintf(J.path[idx], sizeof J.path[idx], "%s", eq + 1);
	return 0;
}

static int load_key(int idx, struct l7_jwt_key *k)
{
	static __u8 buf[L7_MAX_HEAD + 64];
	static struct l7_sha256 sha;
	FILE *f = fopen(J.path[idx], "rb");
	size_t n;

	if (!f) {
		fprintf(stderr, "l7run: jwt %s: key file %s: %s\n", J.name[idx], J.path[idx], strerror(errno));
		return -1;
	}
	n = fread(buf, 1, L7_MAX_HEAD + 1, f);
	fclose(f);
	if (n > L7_MAX_HEAD) {
		fprintf(stderr, "l7run: jwt %s: key file %s is over %d bytes\n", J.name[idx], J.path[idx], L7_MAX_HEAD);
		return -1;
	}
	if (n && buf[n - 1] == '\n')
		n--;
	if (n && buf[n - 1] == '\r')
		n--;
	if (!n) {
		fprintf(stderr, "l7run: jwt %s: key file %s is empty\n", J.name[idx], J.path[idx]);
		return -1;
	}
	memset(k, 0, sizeof *k);
	if (n > 64) {
		l7_sha256(&sha, buf, 0, (__u32)n, k->key);
		k->len = 32;
	} else {
		memcpy(k->key, buf, n);
		k->len = (__u32)n;
	}
	return 0;
}

static void clock_write(void)
{
	struct timespec tai, real;
	__s64 off;

	clock_gettime(CLOCK_TAI, &tai);
	clock_gettime(CLOCK_REALTIME, &real);
	off = ((__s64)tai.tv_sec - real.tv_sec) * 1000000000LL + (tai.tv_nsec - real.tv_nsec);
	off = (off + 500000000LL) / 1000000000LL * 1000000000LL;   /* the offset is whole seconds */
	J.clock_at = real.tv_sec;
	if (off == J.clock_off && J.clock_at)
		return;
	__u32 zero = 0;
	if (bpf_map_update_elem(J.clock_fd, &zero, &off, BPF_ANY) == 0)
		J.clock_off = off;
}

/* After the object is loaded: keys and clock. Objects without the JWT maps need nothing. */
int jwt_setup(struct bpf_object *obj)
{
	int kfd = bpf_object__find_map_fd_by_name(obj, "l7_jwt_keys");
	static __u32 gen;

	J.clock_fd = bpf_object__find_map_fd_by_name(obj, "l7_jwt_clock");
	if (kfd < 0 || J.clock_fd < 0)
		return 0;
	J.clock_off = -1;
	clock_write();
	for (__u32 i = 0; i < L7_MAX_JWT; i++) {
		struct l7_jwt_key k;
		if (!J.declared[i] && !J.path[i][0])
			continue;
		if (!J.path[i][0]) {
			fprintf(stderr, "l7run: jwt %s has no key file (use --jwt-key %u=PATH)\n", J.name[i], i);
			return -1;
		}
		if (load_key((int)i, &k))
			return -1;
		k.gen = ++gen;
		if (bpf_map_update_elem(kfd, &i, &k, BPF_ANY)) {
			fprintf(stderr, "l7run: jwt key %u: %s\n", i, strerror(errno));
			return -1;
		}
		vlog("jwt %s: %u-byte key from %s", J.name[i], k.len, J.path[i]);
	}
	return 0;
}

/* From the run loops: re-check the clock offset every 10 s. */
void jwt_tick(void)
{
	if (J.clock_fd >= 0 && time(NULL) - J.clock_at >= 10)
		clock_write();
}
