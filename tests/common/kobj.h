/* A BPF test object in the running kernel, for the criterion tests of the stdlib/bpf building
 * blocks (tests/stdlib, tests/jwt, tests/h2): its programs loaded with the verifier's
 * statistics (log level 4), run with BPF_PROG_TEST_RUN on a small XDP packet. A failure fails
 * the test (a kernel test that cannot run is a failure, never a skip). */
#ifndef L7_TEST_KOBJ_H
#define L7_TEST_KOBJ_H

#include <linux/types.h>
#include <stdbool.h>

#define KOBJ_MAX 16

/* A map of the object and where the test wants its fd. */
struct kobj_fd {
	const char *name;
	int *fd;
};

struct kobj {
	const char *path;            /* what to load: the object file, */
	const char *const *progs;    /* its programs progs[0..n), */
	int n;
	const struct kobj_fd *maps;  /* the maps whose fds are filled in (up to a NULL name) */
	struct bpf_object *obj;      /* NULL until loaded */
	int fd[KOBJ_MAX];
	long insns[KOBJ_MAX];  /* "processed N insns" of the verifier, -1 if not printed */
	long usec[KOBJ_MAX];   /* its verification time */
};

/* Opens and loads k->path with programs k->progs[0..n) (the verifier's log of a program that
 * failed is printed: root/CAP_BPF is needed) and fills the fds of k->maps. Once: true if it
 * loaded now, false if k was loaded already. */
bool kobj_load(struct kobj *k);
/* The fd of the object's map `name`. */
int kobj_map(const struct kobj *k, const char *name);
/* Runs program i `repeat` times (loading k first), which must return XDP_PASS; the kernel's
 * average ns per run. */
__u32 kobj_run(struct kobj *k, int i, __u32 repeat);

#endif
