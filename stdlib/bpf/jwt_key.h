/* jwt_key.h: a JWT configuration's HMAC key as the data plane holds it (struct l7_jwt_key),
 * natively: from its raw bytes, or from a key file as l7run reads it. One definition for
 * l7run (runtime/jwt.c), the reference evaluator (ir/eval_jwt.c) and the JWT tests.
 *
 * A key file holds the raw key bytes; one trailing newline ("\n" or "\r\n") is stripped,
 * since editors add one. Keys longer than the 64-byte SHA-256 block are replaced by their
 * SHA-256 (RFC 2104: what HMAC does with them), so the kernel only handles <= 64 bytes. */
#ifndef L7_BPF_JWT_KEY_H
#define L7_BPF_JWT_KEY_H

#ifdef __bpf__
#error "jwt_key.h is for native code: the kernel only reads struct l7_jwt_key"
#endif

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <l7/dataplane.h>
#include "sha256.h"

/* k = the key of n raw bytes (gen 0: the caller numbers its writes). */
static inline void l7_jwt_key_set(struct l7_jwt_key *k, const __u8 *raw, size_t n)
{
	static __u8 buf[L7_MAX_HEAD + 64];   /* sha256.h's buffer convention (masked reads) */
	static struct l7_sha256 sha;

	memset(k, 0, sizeof *k);
	if (n > 64) {
		memcpy(buf, raw, n < L7_MAX_HEAD ? n : L7_MAX_HEAD);
		l7_sha256(&sha, buf, 0, (__u32)(n < L7_MAX_HEAD ? n : L7_MAX_HEAD), k->key);
		k->len = 32;
	} else {
		memcpy(k->key, raw, n);
		k->len = (__u32)n;
	}
}

/* k = the key in file path; 0, or -1 with why in err ("key file PATH: ..."). */
static inline int l7_jwt_key_file(const char *path, struct l7_jwt_key *k, char *err, size_t errlen)
{
	static __u8 raw[L7_MAX_HEAD + 1];
	FILE *f = fopen(path, "rb");
	size_t n;

	if (!f) {
		snprintf(err, errlen, "key file %s: %s", path, strerror(errno));
		return -1;
	}
	n = fread(raw, 1, sizeof raw, f);
	fclose(f);
	if (n > L7_MAX_HEAD) {
		snprintf(err, errlen, "key file %s is over %d bytes", path, L7_MAX_HEAD);
		return -1;
	}
	if (n && raw[n - 1] == '\n')
		n--;
	if (n && raw[n - 1] == '\r')
		n--;
	if (!n) {
		snprintf(err, errlen, "key file %s is empty", path);
		return -1;
	}
	l7_jwt_key_set(k, raw, n);
	return 0;
}

#endif /* L7_BPF_JWT_KEY_H */
