/* The policy-side tables jwt.h reads, as l7c would generate them for a test policy; included
 * once by the native tests (env.c) and once by the BPF test program, so both see the same
 * configurations. */
#include <l7/abi.h>

const __u32 l7_n_wanted = 2;
const __u8 l7_wanted_len[L7_MAX_WANTED] = { 13, 7 };
const char l7_wanted_name[L7_MAX_WANTED][L7_MAX_NAME] = { "authorization", "x-token" };

/* 0: Authorization, iss and aud checked, 30 s leeway; 1: X-Token, nothing but exp, no
 * leeway, a 100-byte key (hashed, RFC 2104); 2: the RFC 7515 A.1 example (iss "joe");
 * 3: declared but l7run gave it no key. */
const __u32 l7_n_jwt = 4;
const struct l7_jwt_cfg l7_jwt_cfg[L7_MAX_JWT] = {
	{ .header = 0, .leeway = 30, .iss_len = 22, .iss = "https://issuer.example",
	  .aud_len = 3, .aud = "l7c" },
	{ .header = 1, .leeway = 0 },
	{ .header = 0, .leeway = 0, .iss_len = 3, .iss = "joe" },
	{ .header = 0, .leeway = 0 },
};

const __u32 l7_n_claims = 5;
const __u8 l7_claim_cfg[L7_MAX_CLAIMS] = { 0, 0, 0, 1, 2 };
const __u8 l7_claim_len[L7_MAX_CLAIMS] = { 3, 4, 3, 3, 3 };
const char l7_claim_name[L7_MAX_CLAIMS][L7_MAX_NAME] = { "sub", "role", "aud", "sub", "iss" };
