#include "kobj.h"

#include <criterion/criterion.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KOBJ_LOG (1 << 20)

bool kobj_load(struct kobj *k)
{
	static char vlog[KOBJ_MAX][KOBJ_LOG];
	const char *path = k->path;
	const char *const *progs = k->progs;
	int n = k->n, err;

	if (k->obj)
		return false;
	cr_assert_leq(n, KOBJ_MAX);
	k->obj = bpf_object__open(path);
	cr_assert_not_null(k->obj, "cannot open %s", path);
	for (int i = 0; i < n; i++) {
		struct bpf_program *p = bpf_object__find_program_by_name(k->obj, progs[i]);

		cr_assert_not_null(p, "%s: no program %s", path, progs[i]);
		vlog[i][0] = 0;
		bpf_program__set_log_buf(p, vlog[i], KOBJ_LOG);
		bpf_program__set_log_level(p, 4);   /* statistics only: "processed N insns" */
	}
	err = bpf_object__load(k->obj);
	for (int i = 0; i < n; i++) {
		const char *s = strstr(vlog[i], "processed "), *t = strstr(vlog[i], "verification time ");

		k->insns[i] = s ? atol(s + 10) : -1;
		k->usec[i] = t ? atol(t + 18) : -1;
		if (err && !s)
			fprintf(stderr, "%s: %s\n", progs[i], vlog[i]);
	}
	cr_assert_eq(err, 0, "loading %s failed (%d): root/CAP_BPF needed, see the verifier log",
		     path, err);
	for (int i = 0; i < n; i++)
		k->fd[i] = bpf_program__fd(bpf_object__find_program_by_name(k->obj, progs[i]));
	for (const struct kobj_fd *m = k->maps; m && m->name; m++)
		*m->fd = kobj_map(k, m->name);
	return true;
}

int kobj_map(const struct kobj *k, const char *name)
{
	int fd = bpf_object__find_map_fd_by_name(k->obj, name);

	cr_assert_geq(fd, 0, "no map %s", name);
	return fd;
}

__u32 kobj_run(struct kobj *k, int i, __u32 repeat)
{
	static __u8 pkt[64];
	LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = pkt, .data_size_in = sizeof pkt,
		    .repeat = repeat);

	kobj_load(k);
	cr_assert_eq(bpf_prog_test_run_opts(k->fd[i], &o), 0, "test_run %s", k->progs[i]);
	cr_assert_eq(o.retval, XDP_PASS, "%s returned %u", k->progs[i], o.retval);
	return o.duration;
}
