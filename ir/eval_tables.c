/* Writable definitions of the policy's constant tables that stdlib code reads natively: the
 * header names the parser extracts (eval_parse.c), the JWT configurations and the claims rules
 * read (eval_jwt.c). In the kernel they are constants of the compiled policy (codegen/tables.c);
 * here they are filled from the IR before each use. l7ir builds with L7_POLICY_TABLE defined
 * empty (compat.h), so http.h and jwt.h declare them as they are defined here. */
#include <string.h>

#include "http.h"
#include "eval_tables.h"
#include "ir.h"
#include "jwt.h"
#include "l7/abi.h"

__u32 l7_n_wanted;
__u8 l7_wanted_len[L7_MAX_WANTED];
char l7_wanted_name[L7_MAX_WANTED][L7_MAX_NAME];

__u32 l7_n_jwt;
struct l7_jwt_cfg l7_jwt_cfg[L7_MAX_JWT];
__u32 l7_n_claims;
__u8 l7_claim_cfg[L7_MAX_CLAIMS];
__u8 l7_claim_len[L7_MAX_CLAIMS];
char l7_claim_name[L7_MAX_CLAIMS][L7_MAX_NAME];

void ir_eval_set_wanted(const struct ir_program *p)
{
	memset(l7_wanted_name, 0, sizeof(l7_wanted_name));
	l7_n_wanted = (__u32)p->nheaders;
	for (int i = 0; i < p->nheaders && i < L7_MAX_WANTED; i++) {
		size_t n = strlen(p->headers[i]);
		l7_wanted_len[i] = (__u8)n;
		memcpy(l7_wanted_name[i], p->headers[i], n);
	}
}

void ir_jwt_cfg(const struct ir_program *p, int jwt, struct l7_jwt_cfg *out)
{
	const struct ir_jwt *j = &p->jwts[jwt];
	memset(out, 0, sizeof(*out));
	out->header = (__u32)j->header;
	out->leeway = j->leeway;
	out->iss_len = (__u32)strnlen(j->issuer, sizeof(out->iss));
	out->aud_len = (__u32)strnlen(j->audience, sizeof(out->aud));
	memcpy(out->iss, j->issuer, out->iss_len);
	memcpy(out->aud, j->audience, out->aud_len);
}

void ir_eval_set_jwt(const struct ir_program *p)
{
	memset(l7_jwt_cfg, 0, sizeof(l7_jwt_cfg));
	memset(l7_claim_name, 0, sizeof(l7_claim_name));
	l7_n_jwt = (__u32)p->njwts;
	for (int i = 0; i < p->njwts && i < L7_MAX_JWT; i++)
		ir_jwt_cfg(p, i, &l7_jwt_cfg[i]);
	l7_n_claims = (__u32)p->nclaims;
	for (int i = 0; i < p->nclaims && i < L7_MAX_CLAIMS; i++) {
		size_t n = strnlen(p->claims[i].name, L7_MAX_NAME - 1);
		l7_claim_cfg[i] = (__u8)p->claims[i].jwt;
		l7_claim_len[i] = (__u8)n;
		memcpy(l7_claim_name[i], p->claims[i].name, n);
	}
}
