/* A BPF test object in the running kernel, for the tests of the stdlib/bpf building blocks
 * (tests/stdlib, tests/jwt, tests/h2): its programs loaded with the verifier's statistics
 * (log level 4), run with BPF_PROG_TEST_RUN on a small XDP packet. */
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

/* Opens and loads `path` with programs progs[0..n); 0, or < 0 (the verifier's log of a program
 * that failed is printed: root/CAP_BPF is needed). */
int kobj_load(struct kobj *k, const char *path, const char *const *progs, int n);
/* The fd of a map of the object, -1 if it has none of that name. */
int kobj_map(const struct kobj *k, const char *name);
/* Runs program i `repeat` times; returns its XDP return value (< 0 if the run failed), and
 * the kernel's average ns per run in *ns. */
int kobj_run(const struct kobj *k, int i, __u32 repeat, __u32 *ns);

#endif
