#include "kobj.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KOBJ_LOG (1 << 20)

int kobj_load(struct kobj *k, const char *path, const char *const *progs, int n)
{
	static char vlog[KOBJ_MAX][KOBJ_LOG];
	int err;

	memset(k, 0, sizeof *k);
	if (n > KOBJ_MAX)
		return -1;
	k->progs = progs;
	k->n = n;
	k->obj = bpf_object__open(path);
	if (!k->obj) {
		fprintf(stderr, "cannot open %s\n", path);
		return -1;
	}
	for (int i = 0; i < n; i++) {
		struct bpf_program *p = bpf_object__find_program_by_name(k->obj, progs[i]);

		if (!p) {
			fprintf(stderr, "%s: no program %s\n", path, progs[i]);
			return -1;
		}
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
	if (err) {
		fprintf(stderr, "loading %s failed (%d): root/CAP_BPF needed, see the verifier log\n",
			path, err);
		return err;
	}
	for (int i = 0; i < n; i++)
		k->fd[i] = bpf_program__fd(bpf_object__find_program_by_name(k->obj, progs[i]));
	return 0;
}

int kobj_map(const struct kobj *k, const char *name)
{
	return bpf_object__find_map_fd_by_name(k->obj, name);
}

int kobj_run(const struct kobj *k, int i, __u32 repeat, __u32 *ns)
{
	static __u8 pkt[64];
	LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = pkt, .data_size_in = sizeof pkt,
		    .repeat = repeat);

	if (bpf_prog_test_run_opts(k->fd[i], &o))
		return -1;
	if (ns)
		*ns = o.duration;
	return (int)o.retval;
}
