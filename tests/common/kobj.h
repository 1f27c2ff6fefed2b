/* A BPF test object in the running kernel, for the criterion tests of the stdlib/bpf building
 * blocks (tests/stdlib, tests/jwt, tests/h2): its programs loaded with the verifier's
 * statistics (log level 4), run with BPF_PROG_TEST_RUN on a small XDP packet. A failure fails
 * the test (a kernel test that cannot run is a failure, never a skip). */
#ifndef L7_TEST_KOBJ_H
#define L7_TEST_KOBJ_H

#include <linux/types.h>

#define KOBJ_MAX 16

struct kobj {
	struct bpf_object *obj;
	const char *const *progs;
	int n;
	int fd[KOBJ_MAX];
	long insns[KOBJ_MAX];  /* "processed N insns" of the verifier, -1 if not printed */
	long usec[KOBJ_MAX];   /* its verification time */
};

/* Opens and loads `path` with programs progs[0..n) (the verifier's log of a program that
 * failed is printed: root/CAP_BPF is needed). Once: a loaded k is left as it is. */
void kobj_load(struct kobj *k, const char *path, const char *const *progs, int n);
/* The fd of the object's map `name`. */
int kobj_map(const struct kobj *k, const char *name);
/* Runs program i `repeat` times, which must return XDP_PASS; the kernel's average ns per run. */
__u32 kobj_run(const struct kobj *k, int i, __u32 repeat);

#endif
