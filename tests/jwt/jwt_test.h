/* Shared by the native and kernel JWT tests: keys, token building, request set-up. */
#ifndef L7_JWT_TEST_H
#define L7_JWT_TEST_H

#include <stddef.h>
#include <l7/dataplane.h>

#define T_NOW 1700000000LL   /* the tests' "now" (Unix seconds) */

extern long long test_now;   /* what L7_JWT_NOW() returns natively */

/* Key of configuration i as l7run stores it (long keys hashed). */
void test_key(unsigned cfg, struct l7_jwt_key *k);
/* The raw key bytes of configuration i (before hashing). */
const unsigned char *test_raw_key(unsigned cfg, size_t *len);

/* header.payload.signature with the given JSON texts and key; returns its length. */
size_t make_token(char *out, size_t cap, const char *hdr, const char *pay,
		  const unsigned char *key, size_t klen);
/* The same, signed with configuration cfg's key. */
size_t make_token_cfg(char *out, size_t cap, const char *hdr, const char *pay, unsigned cfg);

/* input "." signature with cfg's key: for signing malformed parts. */
size_t sign_raw(char *out, size_t cap, const char *input, unsigned cfg);

/* Parse "GET / HTTP/1.1" with the given header line (e.g. "Authorization: Bearer ...")
 * into *req; returns the head length (> 0) or the parser's error. */
int make_req(struct l7_req *req, const char *line);

/* Native environment of jwt.h (env.c). */
void env_reset(void);             /* empty cache, zero stats, keys from test_key() */
unsigned long long env_stat(unsigned idx);
void env_set_gen(unsigned cfg, unsigned gen);

#endif
