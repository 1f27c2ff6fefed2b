/* Shared by the BPF JWT test program and its loader: map value layouts. */
#ifndef L7_JWT_KERN_H
#define L7_JWT_KERN_H

#include <linux/types.h>
#include <l7/abi.h>

struct t_jwt_in {
	__u32 cfg;
	__u32 pad;
	__s64 now;     /* Unix seconds; 0: the kernel clock (bpf_ktime_get_tai_ns - l7_jwt_clock) */
};

struct t_jwt_out {
	__s64 rc;
	__u32 jwt_done, jwt_ok;
	struct l7_span claim[L7_MAX_CLAIMS];
};

#endif
