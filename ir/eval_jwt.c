/* JWT validity for the reference evaluator: the data plane's own HS256 verifier
 * (stdlib/bpf/jwt.h) built natively, with the keys l7run would load (jwt_key.h) and a time
 * the caller gives (`l7c --eval --now=EPOCH`), so the evaluator is the oracle of JWT rules
 * too. jwt.h reads its environment through the l7_jwt_native_* functions below; there is no
 * token cache (the kernel's gives the same answers: it re-checks exp and nbf on every hit). */
#include "eval_tables.h"
#include "ir.h"

#include <stdlib.h>
#include <string.h>

static long long eval_now;
#define L7_JWT_NOW() eval_now
#include "jwt.h"
#include "jwt_key.h"


struct ir_jwt_env {
	const struct ir_program *p;
	long long now;
	struct l7_jwt_key keys[L7_MAX_JWT];
};

static struct l7_jwt_work work;
static const struct ir_jwt_env *cur;   /* the environment of the check under way */

struct l7_jwt_work *l7_jwt_native_work(void) { return &work; }
const struct l7_jwt_key *l7_jwt_native_key(__u32 cfg) { return cur && cfg < L7_MAX_JWT ? &cur->keys[cfg] : NULL; }
const struct l7_jwt_cached *l7_jwt_native_cache_get(const struct l7_jwt_cache_key *k) { (void)k; return NULL; }
void l7_jwt_native_cache_put(const struct l7_jwt_cache_key *k, const struct l7_jwt_cached *v) { (void)k, (void)v; }
void l7_jwt_native_stat(__u32 idx) { (void)idx; }

struct ir_jwt_env *ir_jwt_env_new(const struct ir_program *p, long long now, char *err, size_t errlen)
{
	struct ir_jwt_env *e = calloc(1, sizeof(*e));
	e->p = p;
	e->now = now;
	for (int i = 0; i < p->njwts && i < L7_MAX_JWT; i++) {
		char why[600];
		if (l7_jwt_key_file(p->jwts[i].key_file, &e->keys[i], why, sizeof(why))) {
			snprintf(err, errlen, "jwt %s: %s", p->jwts[i].name, why);
			free(e);
			return NULL;
		}
		e->keys[i].gen = 1;
	}
	return e;
}

void ir_jwt_env_free(struct ir_jwt_env *e) { free(e); }

static void enter(const struct ir_jwt_env *e)
{
	cur = e;
	eval_now = e->now;
	ir_eval_set_jwt(e->p);
}

bool ir_jwt_valid(void *env, int jwt, struct l7_req *req)
{
	enter(env);
	return l7_jwt_check(req, (__u32)jwt) == 1;
}

const char *ir_jwt_why(void *env, int jwt, const struct l7_req *req)
{
	static struct l7_req copy;   /* the verifier writes the claims it finds */
	static const char *const why[] = {
		[-L7_JWTE_CFG] = "no token header", [-L7_JWTE_SCHEME] = "not \"Bearer <token>\"",
		[-L7_JWTE_SIZE] = "token empty or too long", [-L7_JWTE_FORMAT] = "not three parts",
		[-L7_JWTE_B64] = "bad base64url", [-L7_JWTE_JSON] = "malformed JSON",
		[-L7_JWTE_ALG] = "alg not HS256 (or typ not JWT)", [-L7_JWTE_KEY] = "no key",
		[-L7_JWTE_SIG] = "bad signature", [-L7_JWTE_NOEXP] = "no exp", [-L7_JWTE_EXP] = "expired",
		[-L7_JWTE_NBF] = "not yet valid (nbf)", [-L7_JWTE_ISS] = "wrong issuer",
		[-L7_JWTE_AUD] = "wrong audience", [-L7_JWTE_ENV] = "verifier environment",
	};
	enter(env);
	copy = *req;
	copy.jwt_done = copy.jwt_ok = 0;
	int r = l7__jwt_verify(&copy, (__u32)jwt, L7_JWT_NO_LOOKUP);
	if (r > 0)
		return "valid";
	return -r < (int)(sizeof(why) / sizeof(why[0])) && why[-r] ? why[-r] : "invalid";
}
