/* Building blocks the generated policy calls (codegen/policy.c): comparisons of a field of the
 * header vector with a constant. Compiled to BPF bitcode, linked into every policy and inlined;
 * after inlining `s` and `n` are constants, so LLVM unrolls short compares.
 *
 * Spans always lie inside the parsed head (off + len <= head_len <= L7_MAX_HEAD), so masking an
 * index with L7_MAX_HEAD - 1 never changes it; the mask is what proves it to the verifier. */
#include "l7/abi.h"

/* Non-static so the definitions survive into the bitcode; l7c internalises them after linking. */
#define L7_INLINE __attribute__((always_inline))

#define HEAD_MASK (L7_MAX_HEAD - 1)

L7_INLINE int l7_bytes_at(const struct l7_req *req, __u32 off, const char *s, __u32 n)
{
	for (__u32 i = 0; i < n && i < L7_MAX_HEAD; i++)
		if (req->buf[(off + i) & HEAD_MASK] != (__u8)s[i])
			return 0;
	return 1;
}

/* field == s */
L7_INLINE int l7_field_equals(const struct l7_req *req, const struct l7_span *f, const char *s, __u32 n)
{
	return f->len == n && l7_bytes_at(req, f->off, s, n);
}

/* field starts with s */
L7_INLINE int l7_field_prefix(const struct l7_req *req, const struct l7_span *f, const char *s, __u32 n)
{
	return f->len >= n && l7_bytes_at(req, f->off, s, n);
}
