/* Shared between the BPF test programs (h2_kern.c) and their loader: map value layouts. */
#ifndef L7_H2_KERN_H
#define L7_H2_KERN_H

#include <linux/types.h>
#include <l7/abi.h>
#include <l7/h2.h>

/* The stream bytes one scan looks at (the L7_H2_BUF convention: masked, 64 bytes of slack). */
struct t_buf {
	__u8 b[L7_H2_BUF + L7_BUF_SLACK];
};

/* t_in / t_out: the Huffman program's string, and what the others take besides their maps */
#define T_HUFF_MAX L7_MAX_HEAD   /* the L7_DATA_MASK convention of huffman.h */
struct t_in {
	__u32 len;       /* bytes of data (huffman), of t_buf (scan) */
	__u32 mode;      /* t_h2_req: decode a completed block as this enum l7_hpack_mode */
	__u8 data[T_HUFF_MAX + L7_BUF_SLACK];
};

struct t_out {
	__s32 rc;        /* huffman: decoded length or < 0; scan: its return */
	__s32 rc2;       /* t_h2_req: the decode's return (if a block completed) */
	__u8 data[T_HUFF_MAX + L7_BUF_SLACK];
};

#endif
