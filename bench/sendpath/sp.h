/* What bench/sendpath/sp.c and sp.bpf.c share: the probes' control record (map sp_drop). */
#ifndef SP_H
#define SP_H
#include <linux/types.h>

#define SP_SPAN 8   /* spanprobe: the runs recorded */

struct sp_drop {
	__u32 pass;                  /* dropprobe: pass this many bytes, then drop (~0); 0: off */
	__u32 span_n;                /* spanprobe: runs to record; 0: off */
	__u64 discard;               /* dropprobe: not 0: instead of SK_DROP, redirect into this
	                              * sp_socks socket's receive queue (BPF_F_INGRESS: a discard
	                              * socket of user space's) */
	__u32 span_i;                /* spanprobe: run i passes with apply_bytes span_len[i] (or */
	__u32 span_redir;            /* redirects egress to sp_socks socket span_to if bit i of */
	__u64 span_to;               /* span_redir is set) and records the size and first byte */
	__u32 span_len[SP_SPAN];     /* of what it saw */
	__u32 span_size[SP_SPAN];
	__u8 span_first[SP_SPAN];
};

#endif
