/* Shared between the BPF test program and its loader: map value layouts. */
#ifndef L7_STDLIB_KERN_H
#define L7_STDLIB_KERN_H

#include <linux/types.h>
#include <l7/abi.h>

#define T_BUF (L7_MAX_HEAD + 64)   /* L7_DATA_MASK + 1 + slack */

enum { T_SHA_INIT = 0, T_SHA_UPDATE = 1, T_SHA_FINAL = 2 };

struct t_in {
	__u32 op;      /* T_SHA_* for t_sha256_stream */
	__u32 len;     /* bytes of data */
	__u32 klen;    /* bytes of key (hmac) / output capacity (base64url) / offset (chunked) */
	__u32 seed32;
	__u64 seed64;
	__u8 data[T_BUF];
	__u8 key[T_BUF];
};

struct t_out {
	__s64 rc;
	__u64 h;
	__u8 dig[32];
	__u8 data[T_BUF];
};

#endif
