/* The maps of a BPF test object (one value each) and how its XDP programs reach them. */
#ifndef L7_TEST_MAPS_H
#define L7_TEST_MAPS_H

#define ARRAY1(name, vt)                                   \
	struct {                                           \
		__uint(type, BPF_MAP_TYPE_ARRAY);          \
		__uint(max_entries, 1);                    \
		__type(key, __u32);                        \
		__type(value, vt);                         \
	} name SEC(".maps")

/* var = the single value of map (type vt) */
#define GET(map, vt, var)                                     \
	__u32 var##_k = 0;                                    \
	vt *var = bpf_map_lookup_elem(&map, &var##_k);        \
	if (!var)                                             \
		return XDP_ABORTED

#endif
