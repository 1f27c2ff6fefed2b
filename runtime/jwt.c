/* JWT support in l7run: the HMAC keys (l7_jwt_keys) and the wall-clock offset (l7_jwt_clock)
 * that stdlib/bpf/jwt.h reads.
 *
 * Keys: the manifest's JWT records (name, key file; written by l7c), overridden by
 * `--jwt-key IDX=PATH`, read as stdlib/bpf/jwt_key.h says (one trailing newline stripped,
 * keys over 64 bytes hashed). A declared configuration whose key cannot be read stops l7run (a
 * reload: refuses the new version): running would refuse every token (401) without saying why.
 *
 * Clock: BPF has no CLOCK_REALTIME but has bpf_ktime_get_tai_ns(); l7run writes
 * CLOCK_TAI - CLOCK_REALTIME (whole seconds: the kernel's TAI offset) at start and re-checks it
 * every 10 s (it changes only when the TAI offset is set or a leap second passes). Tests set
 * the data plane's JWT clock with L7RUN_JWT_NOW=EPOCH: it then reads EPOCH (Unix seconds) when
 * l7run starts and runs on from there (the offset moves by REALTIME - EPOCH), as `l7c --eval
 * --now=EPOCH` reads it, so tokens can be made for a fixed time. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <bpf/bpf.h>
#include "policy.h"
#include "../stdlib/bpf/jwt_key.h"

/* --jwt-key IDX=PATH (the command line wins over every version's key_file) */
int jwt_key_arg(struct jwt_env *env, const char *arg)
{
	const char *eq = strchr(arg, '=');
	int idx = atoi(arg);

	if (!eq || idx < 0 || idx >= L7_MAX_JWT || !eq[1])
		return -1;
	snprintf(env->key_override[idx], sizeof env->key_override[idx], "%s", eq + 1);
	return 0;
}

/* One loader at a time (reload.c): jwt_key.h's buffers are static. */
static int load_key(const char *name, const char *path, struct l7_jwt_key *k, char *err, size_t errlen)
{
	char why[600];

	if (l7_jwt_key_file(path, k, why, sizeof why)) {
		snprintf(err, errlen, "jwt %s: %s", name, why);
		return -1;
	}
	return 0;
}

/* L7RUN_JWT_NOW=EPOCH (tests): how far the data plane's JWT clock runs behind real time, in
 * ns, fixed at start; 0 without it. */
int64_t jwt_test_shift(void)
{
	const char *v = getenv("L7RUN_JWT_NOW");
	__s64 shift;

	if (!v || !*v)
		return 0;
	char *end;
	long long epoch = strtoll(v, &end, 10);
	if (*end || epoch <= 0) {
		fprintf(stderr, "l7run: L7RUN_JWT_NOW=%s is not a Unix time in seconds; the JWT clock is real time\n", v);
		return 0;
	}
	shift = ((__s64)time(NULL) - epoch) * 1000000000LL;
	fprintf(stderr, "l7run: JWT clock set for tests: it reads %lld now (L7RUN_JWT_NOW)\n", epoch);
	return shift;
}

static __s64 clock_offset(const struct jwt_env *env)
{
	struct timespec tai, real;

	clock_gettime(CLOCK_TAI, &tai);
	clock_gettime(CLOCK_REALTIME, &real);
	__s64 off = ((__s64)tai.tv_sec - real.tv_sec) * 1000000000LL + (tai.tv_nsec - real.tv_nsec);
	return (off + 500000000LL) / 1000000000LL * 1000000000LL + env->test_shift;   /* whole seconds */
}

static int clock_write(int fd, __s64 off)
{
	__u32 zero = 0;
	return bpf_map_update_elem(fd, &zero, &off, BPF_ANY);
}

/* After the object is loaded: keys and clock. Objects without the JWT maps need nothing. */
int jwt_setup(struct policy_env *env, struct bpf_object *obj, const struct config *cfg, int *clock_fd, char *err,
	      size_t errlen)
{
	int kfd = bpf_object__find_map_fd_by_name(obj, "l7_jwt_keys");
	int cfd = bpf_object__find_map_fd_by_name(obj, "l7_jwt_clock");
	const char (*key_override)[512] = env->jwt.key_override;

	*clock_fd = -1;
	if (kfd < 0 || cfd < 0)
		return 0;
	if (clock_write(cfd, clock_offset(&env->jwt))) {
		snprintf(err, errlen, "jwt clock: %s", strerror(errno));
		return -1;
	}
	for (__u32 i = 0; i < L7_MAX_JWT; i++) {   /* the reader bounds the records by L7_MAX_JWT */
		const struct l7m_jwt *d = i < cfg->mf->n_jwt ? &cfg->mf->jwt[i] : NULL;
		const char *path = key_override[i][0] ? key_override[i] : d ? d->key_file.s : "";
		const char *name = d ? d->name.s : "";
		struct l7_jwt_key k;
		if (!d && !key_override[i][0])
			continue;
		if (!path[0]) {
			snprintf(err, errlen, "jwt %s has no key file (use --jwt-key %u=PATH)", name, i);
			return -1;
		}
		if (load_key(name, path, &k, err, errlen))
			return -1;
		k.gen = ++env->jwt.gen;   /* one loader at a time */
		if (bpf_map_update_elem(kfd, &i, &k, BPF_ANY)) {
			snprintf(err, errlen, "jwt key %u: %s", i, strerror(errno));
			return -1;
		}
		if (env->verbose)
			fprintf(stderr, "l7run: jwt %s: %u-byte key from %s\n", name, k.len, path);
	}
	*clock_fd = cfd;
	return 0;
}

/* Keep (on) or stop keeping (off) a version's clock map up to date. */
void jwt_clock_watch(struct jwt_env *C, int fd, int on)
{
	for (int i = 0; i < C->n_clocks; i++)
		if (C->clock_fd[i] == fd) {
			if (!on)
				C->clock_fd[i] = C->clock_fd[--C->n_clocks];
			return;
		}
	if (on && C->n_clocks < JWT_MAX_CLOCKS) {
		C->clock_fd[C->n_clocks++] = fd;
		if (C->off != -1)
			clock_write(fd, C->off);
	}
}

/* From the run loop: re-check the clock offset every 10 s. */
void jwt_tick(struct jwt_env *C)
{
	if (!C->n_clocks || time(NULL) - C->at < 10)
		return;
	C->at = time(NULL);
	__s64 off = clock_offset(C);
	if (off == C->off)
		return;
	C->off = off;
	for (int i = 0; i < C->n_clocks; i++)
		clock_write(C->clock_fd[i], off);
}
