/* Split programs (l7/progs.def L7_TAIL rows): a host program too big for the verifier ends its
 * parse half with a tail call into a chain of decide programs NAME_0, NAME_1, ... l7run puts
 * NAME_k in slot k of the chain's PROG_ARRAY after loading and before anything is attached, so
 * no request meets an empty slot (one that does is refused: the data plane fails closed). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "l7/abi.h"
#include "policy.h"

static const struct {
	const char *name, *prog_array, *host;
} chains[] = {
#define L7_PROG(name, section, entry, map, whole)
#define L7_TAIL(name, section, entry, prog_array, host) { #name, #prog_array, #host },
#include "l7/progs.def"
#undef L7_TAIL
#undef L7_PROG
};

int tail_chain_count(void)
{
	return (int)(sizeof chains / sizeof chains[0]);
}

const char *tail_chain_name(int i, const char **prog_array)
{
	if (prog_array)
		*prog_array = chains[i].prog_array;
	return chains[i].name;
}

int fill_tail_calls(struct bpf_object *obj, int mesh, char *err, size_t errlen)
{
	int filled = 0;
	for (size_t i = 0; i < sizeof chains / sizeof chains[0]; i++) {
		if (!strcmp(chains[i].host, "l7_mesh_msg_prog") != !!mesh)
			continue;   /* the other mode's chain */
		int map = -1;
		for (int k = 0; k < L7_MAX_TAILS; k++) {
			char name[64];
			snprintf(name, sizeof name, "%s_%d", chains[i].name, k);
			struct bpf_program *p = bpf_object__find_program_by_name(obj, name);
			if (!p)
				break;
			if (map < 0)
				map = bpf_object__find_map_fd_by_name(obj, chains[i].prog_array);
			int fd = bpf_program__fd(p);
			__u32 key = (__u32)k;
			if (map < 0 || fd < 0 || bpf_map_update_elem(map, &key, &fd, BPF_ANY)) {
				snprintf(err, errlen, "cannot put %s in slot %d of %s: %s", name, k, chains[i].prog_array,
					 map < 0 ? "the object has no such map" : fd < 0 ? "not loaded" : strerror(errno));
				return -1;
			}
			filled++;
		}
	}
	return filled;
}
