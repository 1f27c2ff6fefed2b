/* How a program of l7/progs.def is attached, from its ELF section: the attach type of
 * bpf_prog_attach (sk_skb and sk_msg programs, to the SOCKHASH progs.def names) or of a cgroup
 * bpf_link (sockops). One answer for l7run, which attaches, and `l7c --verify`, which attaches
 * the same way to see what the kernel refuses. */
#ifndef L7_ATTACH_H
#define L7_ATTACH_H

#include <linux/bpf.h>
#include <string.h>

/* Which l7run mode a map of maps.def, and so a program of progs.def attached to it, belongs
 * to: mesh mode's are the l7_mesh_* ones. One answer for codegen, which emits one mode's
 * programs for `l7c --mode`, and l7run, which loads and attaches one mode's. */
static inline int l7_map_is_mesh(const char *map)
{
	return !strncmp(map, "l7_mesh_", 8);
}

/* The attach type, or -1 for a section that is not attached (a decide program of a chain). */
static inline int l7_attach_type(const char *section)
{
	if (!strcmp(section, "sk_skb/stream_parser"))
		return BPF_SK_SKB_STREAM_PARSER;
	if (!strcmp(section, "sk_skb/stream_verdict"))
		return BPF_SK_SKB_STREAM_VERDICT;
	if (!strcmp(section, "sk_skb/verdict"))
		return BPF_SK_SKB_VERDICT;
	if (!strcmp(section, "sk_msg"))
		return BPF_SK_MSG_VERDICT;
	if (!strcmp(section, "sockops"))
		return BPF_CGROUP_SOCK_OPS;
	if (!strncmp(section, "raw_tp/", 7) || !strncmp(section, "tp_btf/", 7))
		return BPF_TRACE_RAW_TP;   /* bpf_raw_tracepoint_open(l7_raw_tp_name(section)) */
	return -1;
}

/* The tracepoint name bpf_raw_tracepoint_open wants for a BPF_TRACE_RAW_TP section: the part
 * after "raw_tp/"; NULL for "tp_btf/", whose program was loaded against its tracepoint. */
static inline const char *l7_raw_tp_name(const char *section)
{
	return strncmp(section, "raw_tp/", 7) ? NULL : section + 7;
}

/* Its name in messages: the part of the section after "sk_skb/", or the section. */
static inline const char *l7_attach_name(const char *section)
{
	return strncmp(section, "sk_skb/", 7) ? section : section + 7;
}

#endif
