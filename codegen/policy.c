/* l7_policy_decide(req, d): the Match and Action stages as control flow.
 *
 * Each policy is a chain of rule tests, first match wins. A matching rule counts its hit,
 * applies its actions (header mutations, counters, rate limits), then: Deny decides at once
 * (deny wins); Route/Fallback is remembered if nothing was routed yet; Allow marks the request
 * allowed; evaluation goes on with the next policy. At the end an ALLOW policy that applied
 * without allowing denies 403, else the remembered route decides, else the default (404) —
 * the semantics of ir_eval, which the tests hold this code to.
 *
 * Conditions are lowered with short-circuit branches; leaves are compares emitted here (string
 * compares up to unroll_max bytes, unrolled) or calls into stdlib/bpf/policy.c (and
 * l7_jwt_check of the machinery) that inline. Every instruction carries the .l7 line it came
 * from.
 *
 * Split programs (codegen_split): the rules of all policies, in file order, are cut into
 * chunks; l7_policy_chunk_<k>(req, st) runs chunk k with the decision and the combination
 * state (routed, allowed, an ALLOW policy applied, the first unfinished policy) in st, the
 * per-CPU l7_chain value the decide programs pass along. A chunk returns the verdict when it
 * decides (a Deny, or the last chunk's combination), 0 when the next chunk must go on. A policy
 * cut in two resumes in the next chunk only if the first part did not match (first match). */
#include "cg.h"

#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "l7/abi.h"
#include "l7/dataplane.h"

struct pcx {
	struct cg *g;
	LLVMValueRef fn, req, d;
	LLVMValueRef st;                               /* chunks: struct l7_chain *, else NULL */
	LLVMMetadataRef sp;
	LLVMValueRef routed, allowed, allow_applies;   /* i1 allocas */
	LLVMTypeRef cmp_ty, jwt_ty, ident_ty, count_ty, take_ty, table_ty, hash_ty, rr_ty, rt_ty, re_ty, drop_ty, add_ty;
	LLVMValueRef eq_fn, prefix_fn, jwt_fn, ident_fn, count_fn, take_fn, table_fn, re_fn;
	LLVMValueRef drop_fn, add_fn;
	LLVMValueRef set_fn;        /* l7_source_in_set: int (req, set), the type of jwt_fn */
	LLVMTypeRef take_src_ty;    /* l7_bucket_take_source: int (req, bucket, rate, burst) */
	LLVMValueRef take_src_fn;
	LLVMTypeRef u_ty, uu_ty;    /* int (int), int (int, int) */
	LLVMValueRef hash_fn, rr_fn, rt_fn;
	LLVMValueRef *re_desc;      /* per regex, made when first tested */
	LLVMValueRef *re_val;       /* per shared regex of the path tested by two or more rules of this
	                             * function: its answer, computed at the function's entry */
	LLVMValueRef *table_val;    /* per rule table, l7_table_match's answer in this function: looked
	                             * up at the first of its group rules, which dominates the others
	                             * (they are consecutive, and the table test comes first in each) */
	LLVMValueRef jwt_val[L7_MAX_JWT];   /* per JWT instance tested by two or more rules of this
	                                     * function: l7_jwt_check's answer, asked once at its entry */
};

static LLVMValueRef at_offset(struct pcx *c, LLVMValueRef base, size_t off)
{
	LLVMValueRef idx = LLVMConstInt(c->g->i64, off, 0);
	return LLVMBuildInBoundsGEP2(c->g->b, c->g->i8, base, &idx, 1, "");
}

static LLVMValueRef load32(struct pcx *c, LLVMValueRef base, size_t off)
{
	return LLVMBuildLoad2(c->g->b, c->g->i32, at_offset(c, base, off), "");
}

static void store32(struct pcx *c, LLVMValueRef base, size_t off, LLVMValueRef v)
{
	LLVMBuildStore(c->g->b, v, at_offset(c, base, off));
}

static LLVMValueRef u32c(struct pcx *c, unsigned long long v) { return LLVMConstInt(c->g->i32, v, 0); }

static size_t span_offset(enum ir_field f, int idx)
{
	assert((f != IR_F_HEADER && f != IR_F_CLAIM) || (idx >= 0 && idx < (f == IR_F_CLAIM ? L7_MAX_CLAIMS : L7_MAX_WANTED)));
	switch (f) {
	case IR_F_PATH: return offsetof(struct l7_req, path);
	case IR_F_TARGET: return offsetof(struct l7_req, target);
	case IR_F_QUERY: return offsetof(struct l7_req, query);
	case IR_F_METHOD: return offsetof(struct l7_req, method_s);
	case IR_F_HOST: return offsetof(struct l7_req, host);
	case IR_F_HEADER: return offsetof(struct l7_req, hdr) + (size_t)idx * sizeof(struct l7_span);
	case IR_F_CLAIM: return offsetof(struct l7_req, claim) + (size_t)idx * sizeof(struct l7_span);
	}
	return 0;
}

static LLVMBasicBlockRef block(struct pcx *c, const char *name)
{
	return LLVMAppendBasicBlockInContext(c->g->ctx, c->fn, name);
}

static LLVMValueRef call(struct pcx *c, LLVMTypeRef ty, LLVMValueRef fn, LLVMValueRef *args, unsigned n)
{
	return LLVMBuildCall2(c->g->b, ty, fn, args, n, "");
}

static LLVMValueRef declare(struct pcx *c, const char *name, LLVMTypeRef ty)
{
	LLVMValueRef f = LLVMGetNamedFunction(c->g->mod, name);
	return f ? f : LLVMAddFunction(c->g->mod, name, ty);
}

static LLVMValueRef in_range(struct pcx *c, LLVMValueRef v, unsigned lo, unsigned hi)
{
	/* lo <= v <= hi as one unsigned compare: v - lo <= hi - lo */
	LLVMValueRef off = LLVMBuildSub(c->g->b, v, u32c(c, lo), "");
	return LLVMBuildICmp(c->g->b, LLVMIntULE, off, u32c(c, hi - lo), "");
}

/* The struct l7_re_desc of a regex (l7/abi.h): its DFA with each state numbered by its row
 * offset, the dead state first and the accepting states last, so that the runner needs one
 * add per byte and one compare at the end. */
static LLVMValueRef regex_desc(struct pcx *c, const struct ir_regex *re)
{
	struct cg *g = c->g;
	assert(re->index >= 0 && re->index < g->p->nregexes && g->p->regexes[re->index] == re);
	if (c->re_desc[re->index])
		return c->re_desc[re->index];
	const struct re_dfa *d = &re->dfa;
	int n = d->nstates, k = d->nclasses;
	int *pos = malloc(sizeof(int) * (size_t)n), at = 1, acc_lo = n;
	pos[0] = 0;
	for (int pass = 0; pass < 2; pass++)
		for (int s = 1; s < n; s++)
			if (d->accept[s] == pass) {
				if (pass && acc_lo == n)
					acc_lo = at;
				pos[s] = at++;
			}
	unsigned entries = 1;
	while (entries < (unsigned)(n * k))
		entries *= 2;
	LLVMValueRef *next = calloc(entries, sizeof(LLVMValueRef));
	for (unsigned i = 0; i < entries; i++)
		next[i] = LLVMConstInt(g->i16, 0, 0);
	for (int s = 0; s < n; s++)
		for (int cl = 0; cl < k; cl++)
			next[pos[s] * k + cl] = LLVMConstInt(g->i16, (unsigned)(pos[d->next[s * k + cl]] * k), 0);
	LLVMValueRef cls[256];
	for (int b = 0; b < 256; b++)
		cls[b] = LLVMConstInt(g->i8, d->cls[b], 0);
	LLVMValueRef fields[] = {
		u32c(c, (unsigned)(pos[d->start] * k)), u32c(c, (unsigned)(acc_lo * k)), u32c(c, entries - 1), u32c(c, 0),
		LLVMConstArray2(g->i8, cls, 256), LLVMConstArray2(g->i16, next, entries),
	};
	char name[32];
	snprintf(name, sizeof(name), "l7_re_%d", re->index);
	c->re_desc[re->index] = cg_const_global(g, name, LLVMConstStructInContext(g->ctx, fields, 6, 0), 1);
	free(next);
	free(pos);
	return c->re_desc[re->index];
}

/* field == str, starts_with(field, str): what l7_field_equals/_prefix and l7_claim_* of
 * stdlib/bpf/policy.c compute (ir/eval.c is the reference), emitted already unrolled for
 * constants up to unroll_max bytes (codegen.h; longer field compares call l7_field_*, one
 * bpf_strncmp; claims always compare bytes, as there): the span's length decides first, then the bytes at
 * masked offsets (the mask is what bounds the index for the verifier) are compared without a
 * branch per byte. Leaving the unrolling to LLVM cost most of the optimisation time of large
 * policies (LoopFullUnroll, one loop per compare), and every byte's branch was a state for the
 * verifier to keep. */
static int unroll_max(const struct codegen_split *s)
{
	return s && s->unroll_max ? s->unroll_max : CODEGEN_UNROLL_MAX;
}

static void str_match(struct pcx *c, const struct ir_cond *k, LLVMBasicBlockRef yes, LLVMBasicBlockRef no)
{
	struct cg *g = c->g;
	assert(k->len < L7_MAX_HEAD);
	bool claim = k->field == IR_F_CLAIM;
	size_t span = claim ? offsetof(struct l7_req, claim) + (size_t)(k->header & (L7_MAX_CLAIMS - 1)) * sizeof(struct l7_span)
			    : span_offset(k->field, k->header);
	size_t base = claim ? offsetof(struct l7_req, jwt_json) : offsetof(struct l7_req, buf);
	unsigned mask = claim ? L7_JWT_JSON - 1 : L7_MAX_HEAD - 1;
	LLVMValueRef off = LLVMBuildZExt(g->b, LLVMBuildLoad2(g->b, g->i16, at_offset(c, c->req, span + offsetof(struct l7_span, off)), ""),
					 g->i32, "");
	LLVMValueRef len = LLVMBuildZExt(g->b, LLVMBuildLoad2(g->b, g->i16, at_offset(c, c->req, span + offsetof(struct l7_span, len)), ""),
					 g->i32, "");
	LLVMValueRef fits = LLVMBuildICmp(g->b, k->kind == IR_C_STR_EQ ? LLVMIntEQ : LLVMIntUGE, len, u32c(c, k->len), "");
	if (!k->len) {
		LLVMBuildCondBr(g->b, fits, yes, no);
		return;
	}
	LLVMBasicBlockRef bytes = block(c, "bytes");
	LLVMBuildCondBr(g->b, fits, bytes, no);
	LLVMPositionBuilderAtEnd(g->b, bytes);
	LLVMValueRef diff = NULL;
	for (size_t i = 0; i < k->len; i++) {
		LLVMValueRef idx = LLVMBuildAnd(g->b, LLVMBuildAdd(g->b, off, u32c(c, i), ""), u32c(c, mask), "");
		LLVMValueRef at = LLVMBuildAdd(g->b, LLVMBuildZExt(g->b, idx, g->i64, ""), LLVMConstInt(g->i64, base, 0), "");
		LLVMValueRef byte = LLVMBuildLoad2(g->b, g->i8, LLVMBuildInBoundsGEP2(g->b, g->i8, c->req, &at, 1, ""), "");
		LLVMValueRef x = LLVMBuildXor(g->b, byte, LLVMConstInt(g->i8, (unsigned char)k->str[i], 0), "");
		diff = diff ? LLVMBuildOr(g->b, diff, x, "") : x;
	}
	LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntEQ, diff, LLVMConstInt(g->i8, 0, 0), ""), yes, no);
}

/* Each condition kind (ir/conds.def) as code: a hook that ends its block with a branch to yes
 * or no. Leaves compute an i1 and branch on it. */
typedef void emit_fn(struct pcx *c, const struct ir_cond *k, LLVMBasicBlockRef yes, LLVMBasicBlockRef no);
#define IR_COND(kind, operands) static emit_fn emit_##kind;
#include "conds.def"
#undef IR_COND

/* Branches to yes or no on k. */
static void cond_br(struct pcx *c, const struct ir_cond *k, LLVMBasicBlockRef yes, LLVMBasicBlockRef no)
{
	static emit_fn *const hooks[] = {
#define IR_COND(kind, operands) [IR_C_##kind] = emit_##kind,
#include "conds.def"
#undef IR_COND
	};
	if (k->line)
		cg_di_at(c->g, c->sp, k->line, k->col);
	hooks[k->kind](c, k, yes, no);
}

static void branch(struct pcx *c, LLVMValueRef v, LLVMBasicBlockRef yes, LLVMBasicBlockRef no)
{
	LLVMBuildCondBr(c->g->b, v, yes, no);
}

/* v != 0 */
static LLVMValueRef nonzero(struct pcx *c, LLVMValueRef v) { return LLVMBuildICmp(c->g->b, LLVMIntNE, v, u32c(c, 0), ""); }

static void emit_TRUE(struct pcx *c, const struct ir_cond *k, LLVMBasicBlockRef yes, LLVMBasicBlockRef no)
{
	(void)k, (void)no;
	LLVMBuildBr(c->g->b, yes);
}

static void emit_FALSE(struct pcx *c, const struct ir_cond *k, LLVMBasicBlockRef yes, LLVMBasicBlockRef no)
{
	(void)k, (void)yes;
	LLVMBuildBr(c->g->b, no);
}

static void emit_NOT(struct pcx *c, const struct ir_cond *k, LLVMBasicBlockRef yes, LLVMBasicBlockRef no)
{
	cond_br(c, k->a, no, yes);
}

static void emit_AND(struct pcx *c, const struct ir_cond *k, LLVMBasicBlockRef yes, LLVMBasicBlockRef no)
{
	LLVMBasicBlockRef second = block(c, "and");
	cond_br(c, k->a, second, no);
	LLVMPositionBuilderAtEnd(c->g->b, second);
	cond_br(c, k->b, yes, no);
}

static void emit_OR(struct pcx *c, const struct ir_cond *k, LLVMBasicBlockRef yes, LLVMBasicBlockRef no)
{
	LLVMBasicBlockRef second = block(c, "or");
	cond_br(c, k->a, yes, second);
	LLVMPositionBuilderAtEnd(c->g->b, second);
	cond_br(c, k->b, yes, no);
}

/* STR_EQ and STR_PREFIX: unrolled up to unroll_max bytes (claims always), else one call */
static void str_cmp(struct pcx *c, const struct ir_cond *k, LLVMBasicBlockRef yes, LLVMBasicBlockRef no)
{
	struct cg *g = c->g;
	if (k->field == IR_F_CLAIM || k->len <= (size_t)unroll_max(g->split)) {
		str_match(c, k, yes, no);
		return;
	}
	LLVMValueRef args[] = { c->req, at_offset(c, c->req, span_offset(k->field, k->header)), cg_string(g, k->str, k->len),
				u32c(c, k->len) };
	branch(c, nonzero(c, call(c, c->cmp_ty, k->kind == IR_C_STR_EQ ? c->eq_fn : c->prefix_fn, args, 4)), yes, no);
}

static void emit_STR_EQ(struct pcx *c, const struct ir_cond *k, LLVMBasicBlockRef yes, LLVMBasicBlockRef no)
{
	str_cmp(c, k, yes, no);
}

static void emit_STR_PREFIX(struct pcx *c, const struct ir_cond *k, LLVMBasicBlockRef yes, LLVMBasicBlockRef no)
{
	str_cmp(c, k, yes, no);
}

static LLVMValueRef regex_call(struct pcx *c, enum ir_field f, int header, const struct ir_regex *re)
{
	assert(c->re_fn);
	LLVMValueRef args[] = { c->req, at_offset(c, c->req, span_offset(f, header)), u32c(c, f == IR_F_CLAIM), regex_desc(c, re) };
	return call(c, c->re_ty, c->re_fn, args, 4);
}

static void emit_REGEX(struct pcx *c, const struct ir_cond *k, LLVMBasicBlockRef yes, LLVMBasicBlockRef no)
{
	LLVMValueRef v = k->field == IR_F_PATH && c->re_val[k->re->index] ? c->re_val[k->re->index]   /* emit_rules */
									  : regex_call(c, k->field, k->header, k->re);
	branch(c, nonzero(c, v), yes, no);
}

static void emit_PROTOCOL(struct pcx *c, const struct ir_cond *k, LLVMBasicBlockRef yes, LLVMBasicBlockRef no)
{
	LLVMValueRef f = LLVMBuildAnd(c->g->b, load32(c, c->req, offsetof(struct l7_req, flags)), u32c(c, L7_PROTO_MASK), "");
	branch(c, LLVMBuildICmp(c->g->b, LLVMIntEQ, f, u32c(c, L7_PROTO_FLAGS(k->lo)), ""), yes, no);
}

static void emit_METHOD_IS(struct pcx *c, const struct ir_cond *k, LLVMBasicBlockRef yes, LLVMBasicBlockRef no)
{
	branch(c, LLVMBuildICmp(c->g->b, LLVMIntEQ, load32(c, c->req, offsetof(struct l7_req, method)), u32c(c, k->method), ""),
	       yes, no);
}

static void emit_SERVICE_IN(struct pcx *c, const struct ir_cond *k, LLVMBasicBlockRef yes, LLVMBasicBlockRef no)
{
	struct cg *g = c->g;
	LLVMValueRef s = LLVMBuildZExt(g->b, load32(c, c->req, offsetof(struct l7_req, service)), g->i64, "");
	LLVMValueRef ok = LLVMBuildICmp(g->b, LLVMIntULT, s, LLVMConstInt(g->i64, 64, 0), "");
	LLVMValueRef bit = LLVMBuildAnd(g->b, LLVMBuildLShr(g->b, LLVMConstInt(g->i64, k->mask, 0), s, ""),
					LLVMConstInt(g->i64, 1, 0), "");
	branch(c, LLVMBuildAnd(g->b, ok, LLVMBuildTrunc(g->b, bit, g->i1, ""), ""), yes, no);
}

static void emit_HAS_HEADER(struct pcx *c, const struct ir_cond *k, LLVMBasicBlockRef yes, LLVMBasicBlockRef no)
{
	assert(k->header >= 0 && k->header < 32);   /* a bit of hdr_present (ir_verify) */
	LLVMValueRef bits = load32(c, c->req, offsetof(struct l7_req, hdr_present));
	branch(c, nonzero(c, LLVMBuildAnd(c->g->b, bits, u32c(c, 1u << k->header), "")), yes, no);
}

static void emit_SOURCE_IN(struct pcx *c, const struct ir_cond *k, LLVMBasicBlockRef yes, LLVMBasicBlockRef no)
{
	struct cg *g = c->g;
	LLVMValueRef ip = load32(c, c->req, offsetof(struct l7_req, src_ip4));
	branch(c, LLVMBuildICmp(g->b, LLVMIntEQ, LLVMBuildAnd(g->b, ip, u32c(c, k->netmask), ""), u32c(c, k->net), ""), yes, no);
}

static void emit_PORT_IN(struct pcx *c, const struct ir_cond *k, LLVMBasicBlockRef yes, LLVMBasicBlockRef no)
{
	branch(c, in_range(c, load32(c, c->req, offsetof(struct l7_req, dst_port)), k->lo, k->hi), yes, no);
}

static void emit_JWT_VALID(struct pcx *c, const struct ir_cond *k, LLVMBasicBlockRef yes, LLVMBasicBlockRef no)
{
	assert(c->jwt_fn && k->jwt >= 0 && k->jwt < L7_MAX_JWT);   /* declared when the program has JWTs */
	LLVMValueRef args[] = { c->req, u32c(c, (unsigned)k->jwt) };
	LLVMValueRef ok = k->jwt >= 0 && k->jwt < L7_MAX_JWT && c->jwt_val[k->jwt] ? c->jwt_val[k->jwt]   /* emit_rules */
										: call(c, c->jwt_ty, c->jwt_fn, args, 2);
	branch(c, nonzero(c, ok), yes, no);
}

static void emit_IDENTITY(struct pcx *c, const struct ir_cond *k, LLVMBasicBlockRef yes, LLVMBasicBlockRef no)
{
	branch(c, LLVMBuildICmp(c->g->b, LLVMIntEQ, call(c, c->ident_ty, c->ident_fn, &c->req, 1), u32c(c, (unsigned)k->ident), ""),
	       yes, no);
}

static void emit_COUNTER_IN(struct pcx *c, const struct ir_cond *k, LLVMBasicBlockRef yes, LLVMBasicBlockRef no)
{
	LLVMValueRef idx = u32c(c, (unsigned)k->state);
	branch(c, in_range(c, call(c, c->u_ty, declare(c, "l7_counter_value", c->u_ty), &idx, 1), k->lo, k->hi), yes, no);
}

static void emit_TIMER_ELAPSED(struct pcx *c, const struct ir_cond *k, LLVMBasicBlockRef yes, LLVMBasicBlockRef no)
{
	LLVMValueRef args[] = { u32c(c, (unsigned)k->state), u32c(c, k->lo) };
	branch(c, nonzero(c, call(c, c->uu_ty, declare(c, "l7_timer_elapsed", c->uu_ty), args, 2)), yes, no);
}

static void emit_SOURCE_SET(struct pcx *c, const struct ir_cond *k, LLVMBasicBlockRef yes, LLVMBasicBlockRef no)
{
	assert(c->set_fn && k->set >= 0 && k->set < c->g->p->ncidr_sets);
	LLVMValueRef args[] = { c->req, u32c(c, (unsigned)k->set) };
	branch(c, nonzero(c, call(c, c->jwt_ty, c->set_fn, args, 2)), yes, no);
}

static void emit_TABLE(struct pcx *c, const struct ir_cond *k, LLVMBasicBlockRef yes, LLVMBasicBlockRef no)
{
	struct cg *g = c->g;
	assert(k->table >= 0 && k->table < g->p->ntables && k->group >= 1 && k->group <= L7_TABLE_MAX_GROUPS);
	const struct ir_table *t = &g->p->tables[k->table];
	if (!c->table_val[k->table]) {
		unsigned lookups = (t->exact_any ? 1 : 0) | (t->exact_method ? 2 : 0) | (t->prefix_any ? 4 : 0) |
				   (t->prefix_method ? 8 : 0);
		LLVMValueRef args[] = { c->req, at_offset(c, c->req, span_offset(t->field, t->header)), u32c(c, (unsigned)k->table),
					u32c(c, lookups) };
		c->table_val[k->table] = call(c, c->table_ty, c->table_fn, args, 4);
	}
	LLVMValueRef group = LLVMBuildAnd(g->b, c->table_val[k->table], u32c(c, 0xff), "");
	branch(c, LLVMBuildICmp(g->b, LLVMIntEQ, group, u32c(c, (unsigned)k->group), ""), yes, no);
}

static void count(struct pcx *c, unsigned idx)
{
	if (idx < L7_MAX_COUNTERS) {
		LLVMValueRef a = u32c(c, idx);
		call(c, c->count_ty, c->count_fn, &a, 1);
	}
}

/* A void (int) machinery call: l7_counter_add, l7_counter_reset, l7_timer_restart. */
static void state_call(struct pcx *c, const char *fn, unsigned idx)
{
	LLVMValueRef a = u32c(c, idx);
	call(c, c->count_ty, declare(c, fn, c->count_ty), &a, 1);
}

/* The lines of l7_mut_* named `name` (case-insensitive), as a mask over their indices. */
static unsigned long long lines_named(const struct ir_program *p, const char *name)
{
	unsigned long long m = 0;
	for (int i = 0; i < p->nmutations && i < 64; i++)
		if (!strcasecmp(p->mutations[i].name, name))
			m |= 1ull << i;
	return m;
}

/* Can a line of this action's name have been added before it, for the same message? By an
 * earlier action of its rule, or by any rule of an earlier policy (one rule per policy runs). */
static bool added_before(const struct ir_program *p, int pol, const struct ir_rule *r, int a)
{
	const struct ir_action *me = &r->actions[a];
	unsigned long long named = lines_named(p, me->response ? p->rheaders[me->header] : p->headers[me->header]);
	for (int i = 0; i <= pol; i++)
		for (int k = 0; k < p->policies[i].nrules; k++) {
			const struct ir_rule *o = &p->policies[i].rules[k];
			if (i == pol && o != r)
				continue;
			for (int b = 0; b < (o == r ? a : o->nactions); b++) {
				const struct ir_action *x = &o->actions[b];
				if (x->kind == IR_A_MUTATE && x->response == me->response && x->mutation >= 0 &&
				    (named >> x->mutation & 1))
					return true;
			}
		}
	return false;
}

/* A header mutation: calls into stdlib/bpf/policy.c that fold to a few stores. */
static void mutation(struct pcx *c, int pol, const struct ir_rule *r, int a)
{
	struct cg *g = c->g;
	const struct ir_action *x = &r->actions[a];
	/* a name's lines are bit `header` of del/rdel; a line, an index into l7_mut_* (ir_verify) */
	assert(x->op == IR_MUT_ADD || (x->header >= 0 && x->header < (x->response ? L7_MAX_RHDR : L7_MAX_WANTED)));
	assert(x->op == IR_MUT_REMOVE || (x->mutation >= 0 && x->mutation < g->p->nmutations));
	if (x->op != IR_MUT_ADD) {
		unsigned long long same = 0;
		if (added_before(g->p, pol, r, a))
			same = lines_named(g->p, x->response ? g->p->rheaders[x->header] : g->p->headers[x->header]);
		LLVMValueRef args[] = { c->d, u32c(c, x->response), LLVMConstInt(g->i64, same, 0), u32c(c, 1u << x->header) };
		call(c, c->drop_ty, c->drop_fn, args, 4);
	}
	if (x->op != IR_MUT_REMOVE) {
		LLVMValueRef args[] = { c->d, u32c(c, x->response), u32c(c, (unsigned)x->mutation) };
		call(c, c->add_ty, c->add_fn, args, 3);
	}
}

static const unsigned verdict_of[] = { [IR_FORWARD] = L7_FORWARD, [IR_DENY] = L7_DENY, [IR_FALLBACK] = L7_FALLBACK };

/* The backend slot of upstream u: its only endpoint, or the one its balance policy picks for
 * this request (stdlib/bpf/policy.c). Computed only where the route is taken. */
static LLVMValueRef slot_of(struct pcx *c, int u)
{
	struct cg *g = c->g;
	assert(u >= 0 && u < g->p->nupstreams);
	const struct ir_target *t = &g->p->upstreams[u];
	if (t->balance == IR_LB_ONE)
		return u32c(c, (unsigned)t->slot);
	if (t->rt_kind != IR_RT_NONE) {   /* over the tables l7run fills */
		LLVMValueRef key = t->key_field >= 0 && t->balance == IR_LB_HASH
					   ? at_offset(c, c->req, span_offset((enum ir_field)t->key_field, t->key_header))
					   : LLVMConstNull(g->ptr);
		LLVMValueRef args[] = { c->req, key, u32c(c, (unsigned)u), u32c(c, (unsigned)t->rt),
					u32c(c, t->balance == IR_LB_HASH) };
		return call(c, c->rt_ty, c->rt_fn, args, 5);
	}
	LLVMValueRef points, slots;
	cg_balance_tables(g, u, &points, &slots);
	if (t->balance == IR_LB_ROUND_ROBIN) {
		LLVMValueRef args[] = { u32c(c, (unsigned)u), slots, u32c(c, (unsigned)t->nturns) };
		return call(c, c->rr_ty, c->rr_fn, args, 3);
	}
	LLVMValueRef key = t->key_field >= 0 ? at_offset(c, c->req, span_offset((enum ir_field)t->key_field, t->key_header))
					     : LLVMConstNull(g->ptr);
	LLVMValueRef args[] = { c->req, key, points, slots, u32c(c, (unsigned)t->ring_log2) };
	return call(c, c->hash_ty, c->hash_fn, args, 5);
}

static void store_decision(struct pcx *c, enum ir_term term, int upstream, int status, int rule)
{
	assert(term == IR_FORWARD || term == IR_DENY || term == IR_FALLBACK);   /* what verdict_of maps */
	if (upstream >= 0 && c->g->p->upstreams[upstream].rt_kind != IR_RT_NONE) {   /* no endpoint: 503 */
		LLVMValueRef slot = slot_of(c, upstream);
		LLVMValueRef none = LLVMBuildICmp(c->g->b, LLVMIntEQ, slot, u32c(c, L7_NO_SLOT), "");
		store32(c, c->d, offsetof(struct l7_decision, verdict),
			LLVMBuildSelect(c->g->b, none, u32c(c, L7_DENY), u32c(c, verdict_of[term]), ""));
		/* the deny names the set for l7run's answer (l7/dataplane.h L7_NO_SLOT) */
		unsigned named = L7_MAX_UPSTREAMS + (unsigned)c->g->p->upstreams[upstream].rt;
		store32(c, c->d, offsetof(struct l7_decision, upstream), LLVMBuildSelect(c->g->b, none, u32c(c, named), slot, ""));
		store32(c, c->d, offsetof(struct l7_decision, status),
			LLVMBuildSelect(c->g->b, none, u32c(c, 503), u32c(c, (unsigned)status), ""));
	} else {   /* endpoints compiled in: the slot, as chosen */
		store32(c, c->d, offsetof(struct l7_decision, verdict), u32c(c, verdict_of[term]));
		store32(c, c->d, offsetof(struct l7_decision, upstream), upstream < 0 ? u32c(c, 0) : slot_of(c, upstream));
		store32(c, c->d, offsetof(struct l7_decision, status), u32c(c, (unsigned)status));
	}
	store32(c, c->d, offsetof(struct l7_decision, rule), u32c(c, (unsigned)rule));
}

/* grpc: the rule's (ir_rule.grpc), stored only when it names one: a Deny's decision is what it
 * was before gRPC (the machinery zeroes d) */
static void deny_now(struct pcx *c, int status, int grpc, int rule)
{
	store_decision(c, IR_DENY, -1, status, rule);
	if (grpc)
		store32(c, c->d, offsetof(struct l7_decision, grpc), LLVMConstInt(c->g->i16, (unsigned)grpc, 0));
	LLVMBuildRet(c->g->b, u32c(c, L7_DENY));
}

/* A Deny (or an ALLOW policy's 403) that `l7run --audit` (l7_config, no recompile) does not
 * enforce: l7_audit_deny counts it in the rule's audit counter and goes to `audited` (the
 * policy decides nothing); otherwise deny. */
static void deny_or_audit(struct pcx *c, int status, int grpc, int rule, LLVMBasicBlockRef audited)
{
	struct cg *g = c->g;
	LLVMValueRef args[] = { c->d, u32c(c, (unsigned)rule) };
	LLVMValueRef on = call(c, c->jwt_ty, declare(c, "l7_audit_deny", c->jwt_ty), args, 2);
	LLVMBasicBlockRef deny = block(c, "deny");
	LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntNE, on, u32c(c, 0), ""), audited, deny);
	LLVMPositionBuilderAtEnd(g->b, deny);
	deny_now(c, status, grpc, rule);
}

/* Limit(bucket, key): take a token or deny with the bucket's status. */
static void limit(struct pcx *c, const struct ir_action *a, const struct ir_rule *r)
{
	struct cg *g = c->g;
	assert(a->bucket >= 0 && a->bucket < g->p->nbuckets);
	const struct ir_bucket *b = &g->p->buckets[a->bucket];
	LLVMValueRef taken;
	if (a->key_source) {   /* one bucket per client address */
		LLVMValueRef args[] = { c->req, u32c(c, (unsigned)a->bucket), u32c(c, b->rate), u32c(c, b->burst) };
		taken = call(c, c->take_src_ty, c->take_src_fn, args, 4);
	} else {
		LLVMValueRef key = (int)a->key_field >= 0 ? at_offset(c, c->req, span_offset(a->key_field, a->key_header))
							  : LLVMConstNull(g->ptr);
		LLVMValueRef args[] = { c->req, u32c(c, (unsigned)a->bucket), key, u32c(c, b->rate), u32c(c, b->burst) };
		taken = call(c, c->take_ty, c->take_fn, args, 5);
	}
	LLVMValueRef ok = LLVMBuildICmp(g->b, LLVMIntNE, taken, u32c(c, 0), "");
	LLVMBasicBlockRef pass = block(c, "limit.ok"), over = block(c, "limit.over");
	LLVMBuildCondBr(g->b, ok, pass, over);
	LLVMPositionBuilderAtEnd(g->b, over);
	deny_now(c, (int)b->status, 0, r->id);
	LLVMPositionBuilderAtEnd(g->b, pass);
}

static void set_flag(struct pcx *c, LLVMValueRef flag) { LLVMBuildStore(c->g->b, LLVMConstInt(c->g->i1, 1, 0), flag); }

/* The first Route/Fallback reached is remembered in d; later ones do not replace it. */
static void remember_route(struct pcx *c, const struct ir_rule *r, LLVMBasicBlockRef next)
{
	struct cg *g = c->g;
	LLVMBasicBlockRef first = block(c, "route.first");
	LLVMValueRef had = LLVMBuildLoad2(g->b, g->i1, c->routed, "");
	LLVMBuildCondBr(g->b, had, next, first);
	LLVMPositionBuilderAtEnd(g->b, first);
	store_decision(c, r->term, r->upstream, 0, r->id);
	set_flag(c, c->routed);
	LLVMBuildBr(g->b, next);
}

/* Each action kind (ir/actions.def) as code: action k of rule r of policy pol. */
typedef void act_fn(struct pcx *c, int pol, const struct ir_rule *r, int k);
#define IR_ACTION(kind, operands) static act_fn act_##kind;
#include "actions.def"
#undef IR_ACTION
static act_fn *const act_hooks[] = {
#define IR_ACTION(kind, operands) [IR_A_##kind] = act_##kind,
#include "actions.def"
#undef IR_ACTION
};

static void act_MUTATE(struct pcx *c, int pol, const struct ir_rule *r, int k) { mutation(c, pol, r, k); }

/* a counter whose value conditions read keeps that value too (shared by all CPUs, unlike
 * its per-CPU telemetry total) */
static bool value_read(const struct pcx *c, int counter)
{
	return counter < 64 && (c->g->p->counters_read >> counter & 1);
}

static void act_COUNT(struct pcx *c, int pol, const struct ir_rule *r, int k)
{
	(void)pol;
	int counter = r->actions[k].counter;
	count(c, (unsigned)counter);
	if (value_read(c, counter))
		state_call(c, "l7_counter_add", (unsigned)counter);
}

static void act_COUNTER_RESET(struct pcx *c, int pol, const struct ir_rule *r, int k)
{
	(void)pol;
	if (value_read(c, r->actions[k].counter))
		state_call(c, "l7_counter_reset", (unsigned)r->actions[k].counter);
}

/* Audit(request): counted in the rule's audit counter, marked in the decision (for the log) */
static void act_AUDIT(struct pcx *c, int pol, const struct ir_rule *r, int k)
{
	(void)pol, (void)k;
	LLVMValueRef args[] = { c->d, u32c(c, (unsigned)r->id) };
	call(c, c->jwt_ty, declare(c, "l7_audit_mark", c->jwt_ty), args, 2);
}

/* NoLog(request): the decision says so; the machinery then writes no access-log record */
static void act_NOLOG(struct pcx *c, int pol, const struct ir_rule *r, int k)
{
	(void)pol, (void)r, (void)k;
	store32(c, c->d, offsetof(struct l7_decision, nolog), LLVMConstInt(c->g->i16, 1, 0));
}

static void act_TIMER_RESTART(struct pcx *c, int pol, const struct ir_rule *r, int k)
{
	(void)pol;
	state_call(c, "l7_timer_restart", (unsigned)r->actions[k].timer);
}

static void act_LIMIT(struct pcx *c, int pol, const struct ir_rule *r, int k)
{
	(void)pol;
	limit(c, &r->actions[k], r);
}

static void declare_leaves(struct pcx *c)
{
	struct cg *g = c->g;
	const struct ir_program *p = g->p;
	LLVMTypeRef cp[] = { g->ptr, g->ptr, g->ptr, g->i32 };
	c->cmp_ty = LLVMFunctionType(g->i32, cp, 4, 0);
	c->eq_fn = declare(c, "l7_field_equals", c->cmp_ty);
	c->prefix_fn = declare(c, "l7_field_prefix", c->cmp_ty);
	LLVMTypeRef jp[] = { g->ptr, g->i32 };
	c->jwt_ty = LLVMFunctionType(g->i32, jp, 2, 0);
	c->jwt_fn = p->njwts ? declare(c, "l7_jwt_check", c->jwt_ty) : NULL;
	c->set_fn = p->ncidr_sets ? declare(c, "l7_source_in_set", c->jwt_ty) : NULL;
	c->u_ty = LLVMFunctionType(g->i32, &g->i32, 1, 0);
	LLVMTypeRef uup[] = { g->i32, g->i32 };
	c->uu_ty = LLVMFunctionType(g->i32, uup, 2, 0);
	c->ident_ty = LLVMFunctionType(g->i32, &g->ptr, 1, 0);
	c->ident_fn = declare(c, "l7_identity_of", c->ident_ty);
	c->count_ty = LLVMFunctionType(LLVMVoidTypeInContext(g->ctx), &g->i32, 1, 0);
	c->count_fn = declare(c, "l7_count", c->count_ty);
	LLVMTypeRef tp[] = { g->ptr, g->i32, g->ptr, g->i32, g->i32 };
	c->take_ty = LLVMFunctionType(g->i32, tp, 5, 0);
	c->take_fn = declare(c, "l7_bucket_take", c->take_ty);
	LLVMTypeRef tsp[] = { g->ptr, g->i32, g->i32, g->i32 };
	c->take_src_ty = LLVMFunctionType(g->i32, tsp, 4, 0);
	c->take_src_fn = declare(c, "l7_bucket_take_source", c->take_src_ty);
	LLVMTypeRef tbp[] = { g->ptr, g->ptr, g->i32, g->i32 };
	c->table_ty = LLVMFunctionType(g->i32, tbp, 4, 0);
	c->table_fn = declare(c, "l7_table_match", c->table_ty);
	LLVMTypeRef hp[] = { g->ptr, g->ptr, g->ptr, g->ptr, g->i32 };
	c->hash_ty = LLVMFunctionType(g->i32, hp, 5, 0);
	c->hash_fn = declare(c, "l7_lb_pick_hash", c->hash_ty);
	LLVMTypeRef rp[] = { g->i32, g->ptr, g->i32 };
	c->rr_ty = LLVMFunctionType(g->i32, rp, 3, 0);
	c->rr_fn = declare(c, "l7_lb_pick_rr", c->rr_ty);
	LLVMTypeRef rtp[] = { g->ptr, g->ptr, g->i32, g->i32, g->i32 };
	c->rt_ty = LLVMFunctionType(g->i32, rtp, 5, 0);
	c->rt_fn = declare(c, "l7_lb_pick_rt", c->rt_ty);
	LLVMTypeRef rep[] = { g->ptr, g->ptr, g->i32, g->ptr };
	c->re_ty = LLVMFunctionType(g->i32, rep, 4, 0);
	c->re_fn = p->nregexes ? declare(c, "l7_regex_match", c->re_ty) : NULL;
	c->re_desc = calloc((size_t)p->nregexes + 1, sizeof(LLVMValueRef));
	c->re_val = calloc((size_t)p->nregexes + 1, sizeof(LLVMValueRef));
	c->table_val = calloc((size_t)p->ntables + 1, sizeof(LLVMValueRef));
	LLVMTypeRef dp[] = { g->ptr, g->i32, g->i64, g->i32 };
	c->drop_ty = LLVMFunctionType(LLVMVoidTypeInContext(g->ctx), dp, 4, 0);
	c->drop_fn = declare(c, "l7_mut_drop", c->drop_ty);
	LLVMTypeRef ap[] = { g->ptr, g->i32, g->i32 };
	c->add_ty = LLVMFunctionType(LLVMVoidTypeInContext(g->ctx), ap, 3, 0);
	c->add_fn = declare(c, "l7_mut_add", c->add_ty);
}

/* A generated function: i32 name(ptr, ptr[, i32]) with its DISubprogram; the builder at its
 * entry block. */
static LLVMValueRef function(struct pcx *c, const char *name, int nparams, const char *const *params, unsigned line)
{
	struct cg *g = c->g;
	LLVMTypeRef pp[] = { g->ptr, g->ptr, g->i32 };
	LLVMValueRef fn = LLVMAddFunction(g->mod, name, LLVMFunctionType(g->i32, pp, (unsigned)nparams, 0));
	LLVMAddTargetDependentFunctionAttr(fn, "target-cpu", "v3");
	/* req and d (or st) never alias: lets LLVM keep compared request bytes in registers across
	 * the decision stores, and share a leaf that several rules test. */
	unsigned noalias = LLVMGetEnumAttributeKindForName("noalias", 7);
	LLVMAddAttributeAtIndex(fn, 1, LLVMCreateEnumAttribute(g->ctx, noalias, 0));
	LLVMAddAttributeAtIndex(fn, 2, LLVMCreateEnumAttribute(g->ctx, noalias, 0));
	c->fn = fn;
	if (!strncmp(name, CODEGEN_CHUNK_PREFIX, strlen(CODEGEN_CHUNK_PREFIX)))
		LLVMSetLinkage(fn, LLVMInternalLinkage);   /* a static subprogram (module.c internalise) */
	c->sp = cg_di_function(g, fn, name, line, params, nparams);
	LLVMPositionBuilderAtEnd(g->b, block(c, "entry"));
	cg_di_at(g, c->sp, line, 0);
	return fn;
}

static LLVMValueRef flag_bit(struct pcx *c, LLVMValueRef flags, unsigned bit)
{
	struct cg *g = c->g;
	return LLVMBuildICmp(g->b, LLVMIntNE, LLVMBuildAnd(g->b, flags, u32c(c, bit), ""), u32c(c, 0), "");
}

static LLVMValueRef flag_val(struct pcx *c, LLVMValueRef flag, unsigned bit)
{
	struct cg *g = c->g;
	return LLVMBuildSelect(g->b, LLVMBuildLoad2(g->b, g->i1, flag, ""), u32c(c, bit), u32c(c, 0), "");
}

static void store_resume(struct pcx *c, int policy)
{
	store32(c, c->st, offsetof(struct l7_chain, next_policy), u32c(c, (unsigned)policy));
}

/* Does leaf k test JWT instance i / regex i (a shared one: ir_regex.shared)? */
typedef bool test_fn(const struct ir_cond *k, int i);
static bool tests_jwt(const struct ir_cond *k, int i) { return k->kind == IR_C_JWT_VALID && k->jwt == i; }
static bool tests_re(const struct ir_cond *k, int i) { return k->kind == IR_C_REGEX && k->re->index == i && k->field == IR_F_PATH; }

static int tests(const struct ir_cond *k, test_fn *is, int i)
{
	return k ? is(k, i) + tests(k->a, is, i) + tests(k->b, is, i) : 0;
}

/* Tests of instance i in rules [first, last), and in the contexts of the ALLOW policies that
 * start there. */
static int sites(const struct ir_program *p, int first, int last, test_fn *is, int i)
{
	int n = 0;
	for (int k = 0, pf = 0; k < p->npolicies; pf += p->policies[k++].nrules) {
		const struct ir_policy *pol = &p->policies[k];
		if (pol->has_allow && pf >= first && pf < last)
			n += tests(pol->applies, is, i);
		for (int r = 0; r < pol->nrules; r++)
			if (pf + r >= first && pf + r < last)
				n += tests(pol->rules[r].cond, is, i);
	}
	return n;
}

/* The rules [first, last) of all policies in file order (total in all), into c->fn. init: the
 * first chunk (or the whole policy): nothing decided yet; else the state comes from c->st.
 * combine: the last chunk: Meshlib's combination ends it. A chunk that does not combine leaves
 * its state in c->st and returns 0. */
static void emit_rules(struct pcx *c, int first, int last, int total, bool init, bool combine)
{
	struct cg *g = c->g;
	const struct ir_program *p = g->p;

	if (p->ntables)
		memset(c->table_val, 0, sizeof(*c->table_val) * (size_t)p->ntables);
	c->routed = LLVMBuildAlloca(g->b, g->i1, "routed");
	c->allowed = LLVMBuildAlloca(g->b, g->i1, "allowed");
	c->allow_applies = LLVMBuildAlloca(g->b, g->i1, "allow_applies");
	if (init) {
		LLVMValueRef no = LLVMConstInt(g->i1, 0, 0);
		LLVMBuildStore(g->b, no, c->routed);
		LLVMBuildStore(g->b, no, c->allowed);
		LLVMBuildStore(g->b, no, c->allow_applies);
		store32(c, c->d, offsetof(struct l7_decision, n_set), u32c(c, 0));
		store32(c, c->d, offsetof(struct l7_decision, del), u32c(c, 0));
		store32(c, c->d, offsetof(struct l7_decision, n_rset), u32c(c, 0));
		store32(c, c->d, offsetof(struct l7_decision, rdel), u32c(c, 0));
	} else {
		LLVMValueRef flags = load32(c, c->st, offsetof(struct l7_chain, flags));
		LLVMBuildStore(g->b, flag_bit(c, flags, L7_CHAIN_ROUTED), c->routed);
		LLVMBuildStore(g->b, flag_bit(c, flags, L7_CHAIN_ALLOWED), c->allowed);
		LLVMBuildStore(g->b, flag_bit(c, flags, L7_CHAIN_APPLIES), c->allow_applies);
	}
	LLVMBasicBlockRef out = combine ? NULL : block(c, "chunk.out");
	/* A token two or more rules test is checked once, here, not at each test: l7_jwt_check
	 * inlines whole (verification, cache, claims; ~830 instructions), and the verifier walks it
	 * again at every test a path reaches (~60K processed instructions each). The answer is the
	 * same (it is cached per request); only a request no such rule reaches pays for the check. */
	memset(c->jwt_val, 0, sizeof(c->jwt_val));
	for (int j = 0; j < p->njwts && j < L7_MAX_JWT; j++)
		if (sites(p, first, last, tests_jwt, j) >= 2) {
			LLVMValueRef args[] = { c->req, u32c(c, (unsigned)j) };
			c->jwt_val[j] = call(c, c->jwt_ty, c->jwt_fn, args, 2);
		}
	/* The same for the gRPC form of the path (lower.c: a regex every gRPC service compare
	 * tests): one bpf_loop run and one callback for the verifier, not one per rule (~1,900
	 * processed instructions each). */
	for (int r = 0; r < p->nregexes; r++) {
		c->re_val[r] = NULL;
		if (p->regexes[r]->shared && sites(p, first, last, tests_re, r) >= 2)
			c->re_val[r] = regex_call(c, IR_F_PATH, 0, p->regexes[r]);
	}

	for (int i = 0, pf = 0; i < p->npolicies; pf += p->policies[i++].nrules) {
		const struct ir_policy *pol = &p->policies[i];
		int pe = pf + pol->nrules;
		/* a policy without rules (an ALLOW policy can have none) goes where its position is */
		bool here = pol->nrules ? pf < last && pe > first : pf >= first && (pf < last || (combine && pf == total));
		if (!here)
			continue;
		int a = pf > first ? pf : first, b = pe < last ? pe : last;
		bool continued = a > pf, continues = b < pe;
		LLVMBasicBlockRef next_policy = block(c, "policy.next"), rules = block(c, "rules");
		LLVMBasicBlockRef matched = next_policy;
		if (continues)   /* its other rules come in the next chunk: a match here skips them */
			matched = block(c, "policy.matched");
		if (continued) {   /* an earlier chunk holds its first rules: did one of them match? */
			LLVMValueRef resume = load32(c, c->st, offsetof(struct l7_chain, next_policy));
			LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntUGT, resume, u32c(c, (unsigned)i), ""), matched, rules);
		} else if (pol->has_allow) {   /* does this ALLOW policy apply? */
			LLVMBasicBlockRef yes = block(c, "allow.applies");
			cond_br(c, pol->applies, yes, rules);
			LLVMPositionBuilderAtEnd(g->b, yes);
			set_flag(c, c->allow_applies);
			LLVMBuildBr(g->b, rules);
		} else {
			LLVMBuildBr(g->b, rules);
		}
		LLVMPositionBuilderAtEnd(g->b, rules);
		for (int r = a - pf; r < b - pf; r++) {
			const struct ir_rule *rule = &pol->rules[r];
			char name[32];
			snprintf(name, sizeof(name), "rule%d", rule->id);
			LLVMBasicBlockRef match = block(c, name), next = block(c, "rule.next");
			cond_br(c, rule->cond, match, next);
			LLVMPositionBuilderAtEnd(g->b, match);
			cg_di_at(g, c->sp, rule->line, rule->col);
			count(c, (unsigned)(p->ncounters + rule->id));
			const struct ir_cond *tab = ir_rule_table(rule);
			/* the table was looked up at its first group rule, which dominates this one */
			assert(!tab || c->table_val[tab->table]);
			if (tab)   /* which rule of the table: its own hit counter */
				call(c, c->count_ty, declare(c, "l7_table_hit", c->count_ty), &c->table_val[tab->table], 1);
			for (int k = 0; k < rule->nactions; k++) {
				cg_di_at(g, c->sp, rule->actions[k].line, rule->actions[k].col);
				act_hooks[rule->actions[k].kind](c, i, rule, k);
			}
			cg_di_at(g, c->sp, rule->line, rule->col);
			switch (rule->term) {
			case IR_DENY: deny_or_audit(c, rule->status, rule->grpc, rule->id, matched); break;
			case IR_ALLOW: set_flag(c, c->allowed); LLVMBuildBr(g->b, matched); break;
			case IR_FORWARD:
			case IR_FALLBACK: remember_route(c, rule, matched); break;
			case IR_CONTINUE: LLVMBuildBr(g->b, matched); break;
			}
			LLVMPositionBuilderAtEnd(g->b, next);
		}
		if (continues) {   /* the last policy of this chunk: no match yet, resume in it */
			store_resume(c, i);
			LLVMBuildBr(g->b, out);
			LLVMPositionBuilderAtEnd(g->b, matched);
			store_resume(c, i + 1);
			LLVMBuildBr(g->b, out);
			LLVMDeleteBasicBlock(next_policy);
			break;
		}
		LLVMBuildBr(g->b, next_policy);
		LLVMPositionBuilderAtEnd(g->b, next_policy);
	}

	if (!combine) {   /* the next chunk goes on: hand it the state */
		if (LLVMGetBasicBlockTerminator(LLVMGetInsertBlock(g->b)) == NULL)
			LLVMBuildBr(g->b, out);
		LLVMPositionBuilderAtEnd(g->b, out);
		LLVMValueRef flags = LLVMBuildOr(g->b, flag_val(c, c->routed, L7_CHAIN_ROUTED),
						 LLVMBuildOr(g->b, flag_val(c, c->allowed, L7_CHAIN_ALLOWED),
							     flag_val(c, c->allow_applies, L7_CHAIN_APPLIES), ""), "");
		store32(c, c->st, offsetof(struct l7_chain, flags), flags);
		LLVMBuildRet(g->b, u32c(c, 0));
		return;
	}
	/* combine: an ALLOW policy that applied without allowing, then the route, then 404 */
	cg_di_at(g, c->sp, p->npolicies ? p->policies[p->npolicies - 1].line : 1, 0);
	LLVMBasicBlockRef rbac = block(c, "rbac.deny"), routing = block(c, "routing");
	LLVMValueRef applies = LLVMBuildLoad2(g->b, g->i1, c->allow_applies, "");
	LLVMValueRef allowed = LLVMBuildLoad2(g->b, g->i1, c->allowed, "");
	LLVMBuildCondBr(g->b, LLVMBuildAnd(g->b, applies, LLVMBuildNot(g->b, allowed, ""), ""), rbac, routing);
	LLVMPositionBuilderAtEnd(g->b, rbac);
	deny_or_audit(c, p->rbac_rule.status, 0, 0, routing);
	LLVMPositionBuilderAtEnd(g->b, routing);
	LLVMBasicBlockRef routed = block(c, "routed"), none = block(c, "default");
	LLVMBuildCondBr(g->b, LLVMBuildLoad2(g->b, g->i1, c->routed, ""), routed, none);
	LLVMPositionBuilderAtEnd(g->b, routed);
	LLVMBuildRet(g->b, load32(c, c->d, offsetof(struct l7_decision, verdict)));
	LLVMPositionBuilderAtEnd(g->b, none);
	deny_now(c, p->default_rule.status, 0, 0);
}

/* A function the machinery references but this object never runs (its branch folds away):
 * it denies, should it ever be reached. */
static void stub(struct pcx *c, const char *name, int nparams, const char *const *params)
{
	function(c, name, nparams, params, 1);
	LLVMBuildRet(c->g->b, u32c(c, L7_DENY));
}

static int rules_in_all(const struct ir_program *p)
{
	int n = 0;
	for (int i = 0; i < p->npolicies; i++)
		n += p->policies[i].nrules;
	return n;
}

static bool cond_jwt(const struct ir_cond *k)
{
	return k && (k->kind == IR_C_JWT_VALID || ((k->kind == IR_C_STR_EQ || k->kind == IR_C_STR_PREFIX) && k->field == IR_F_CLAIM) ||
		     cond_jwt(k->a) || cond_jwt(k->b));
}

/* Does anything in rules [first, last) (or an ALLOW policy's context there) check a JWT? */
static bool checks_jwt(const struct ir_program *p, int first, int last)
{
	for (int i = 0, pf = 0; i < p->npolicies; pf += p->policies[i++].nrules) {
		const struct ir_policy *pol = &p->policies[i];
		if (pol->has_allow && pf >= first && pf < last && cond_jwt(pol->applies))
			return true;
		for (int r = 0; r < pol->nrules; r++)
			if (pf + r >= first && pf + r < last && cond_jwt(pol->rules[r].cond))
				return true;
	}
	return false;
}

/* The .l7 line of the rule at index `at` of the file order (for a chunk's debug info). */
static unsigned line_at(const struct ir_program *p, int at)
{
	for (int i = 0; i < p->npolicies; at -= p->policies[i++].nrules)
		if (at < p->policies[i].nrules)
			return p->policies[i].rules[at].line;
	return p->npolicies ? p->policies[p->npolicies - 1].line : 1;
}

void cg_policy(struct cg *g)
{
	struct pcx c = { .g = g };
	const struct ir_program *p = g->p;
	const struct codegen_split *s = g->split;
	unsigned first_line = p->npolicies ? p->policies[0].line : 1;
	int total = rules_in_all(p);
	declare_leaves(&c);

	const char *params[] = { "req", "decision" };
	if (!s->gw || !s->mesh) {   /* some host decides in one piece */
		function(&c, "l7_policy_decide", 2, params, first_line);
		c.req = LLVMGetParam(c.fn, 0);
		c.d = LLVMGetParam(c.fn, 1);
		c.st = NULL;
		emit_rules(&c, 0, total, total, true, true);
	} else {
		stub(&c, "l7_policy_decide", 2, params);
	}

	const char *step_params[] = { "req", "state", "chunk" };
	if (!s->gw && !s->mesh) {
		stub(&c, "l7_policy_step", 3, step_params);
		free(c.re_desc);
		free(c.re_val);
		free(c.table_val);
		return;
	}
	/* the chunks, then l7_policy_step(req, st, chunk): a switch that folds to one chunk in each
	 * decide program, where chunk is a constant */
	LLVMValueRef chunks[CODEGEN_MAX_CHUNKS];
	const char *chunk_params[] = { "req", "state" };
	for (int k = 0; k < s->nchunks; k++) {
		int first = s->chunk_first[k], last = k + 1 < s->nchunks ? s->chunk_first[k + 1] : total;
		char name[48];
		snprintf(name, sizeof(name), CODEGEN_CHUNK_PREFIX "%d", k);
		chunks[k] = function(&c, name, 2, chunk_params, line_at(p, first));
		g->chunk_inline[k] = s->nchunks > 1 && checks_jwt(p, first, last);
		c.req = LLVMGetParam(c.fn, 0);
		c.st = LLVMGetParam(c.fn, 1);
		c.d = at_offset(&c, c.st, offsetof(struct l7_chain, d));
		emit_rules(&c, first, last, total, k == 0, k + 1 == s->nchunks);
	}
	function(&c, "l7_policy_step", 3, step_params, first_line);
	LLVMValueRef chunk = LLVMGetParam(c.fn, 2);
	LLVMBasicBlockRef bad = block(&c, "no.chunk");
	LLVMValueRef sw = LLVMBuildSwitch(g->b, chunk, bad, (unsigned)s->nchunks);
	LLVMTypeRef cty = LLVMGlobalGetValueType(chunks[0]);
	for (int k = 0; k < s->nchunks; k++) {
		LLVMBasicBlockRef bb = block(&c, "chunk");
		LLVMAddCase(sw, u32c(&c, (unsigned)k), bb);
		LLVMPositionBuilderAtEnd(g->b, bb);
		LLVMValueRef args[] = { LLVMGetParam(c.fn, 0), LLVMGetParam(c.fn, 1) };
		LLVMBuildRet(g->b, LLVMBuildCall2(g->b, cty, chunks[k], args, 2, ""));
	}
	LLVMPositionBuilderAtEnd(g->b, bad);   /* no such chunk: deny */
	c.d = at_offset(&c, LLVMGetParam(c.fn, 1), offsetof(struct l7_chain, d));
	deny_now(&c, 500, 0, 0);
	free(c.re_desc);
	free(c.re_val);
	free(c.table_val);
}

/* ---- sizes, for cutting chunks before compiling (codegen_rule_size) ----
 * Upper estimates in BPF instructions, measured with policies of 8-200 rules of each kind (what
 * LLVM makes of them, per rule: a header compare of 5 bytes 28, a source prefix 13, a claim 57);
 * an unrolled byte compare is up to 7 instructions a byte before LLVM shares loads between
 * rules. What the machinery inlines at each use is most of some rules (measured per use, LLVM
 * 19): a Route to a hashed upstream set the xxh64 and Ketama search, ~360; a Limit keyed on a
 * field hashing that field, ~300 (on a constant ~45). auth.valid inlines l7_jwt_check, ~830,
 * but once per function and token (emit_rules). */

/* Each condition kind's estimate (ir/conds.def): one hook each; most are constants. */
typedef int size_fn(const struct ir_cond *k, int unroll);
#define IR_COND(kind, operands) static size_fn size_##kind;
#include "conds.def"
#undef IR_COND

static int cond_size(const struct ir_cond *k, int unroll)
{
	static size_fn *const hooks[] = {
#define IR_COND(kind, operands) [IR_C_##kind] = size_##kind,
#include "conds.def"
#undef IR_COND
	};
	return hooks[k->kind](k, unroll);
}

#define SIZE(kind, n) \
	static int size_##kind(const struct ir_cond *k, int unroll) { return (void)k, (void)unroll, (n); }
SIZE(TRUE, 0)
SIZE(FALSE, 0)
SIZE(METHOD_IS, 6)
SIZE(PROTOCOL, 6)
SIZE(HAS_HEADER, 6)
SIZE(SOURCE_IN, 6)
SIZE(PORT_IN, 6)
SIZE(SERVICE_IN, 10)
SIZE(JWT_VALID, 40)   /* and l7_jwt_check once per function: CHUNK_SIZE's margin */
SIZE(IDENTITY, 30)
SIZE(TABLE, 150)
SIZE(SOURCE_SET, 45)
SIZE(COUNTER_IN, 45)
SIZE(TIMER_ELAPSED, 55)
SIZE(REGEX, 70)
#undef SIZE

static int size_AND(const struct ir_cond *k, int unroll) { return cond_size(k->a, unroll) + cond_size(k->b, unroll) + 1; }
static int size_OR(const struct ir_cond *k, int unroll) { return size_AND(k, unroll); }
static int size_NOT(const struct ir_cond *k, int unroll) { return cond_size(k->a, unroll); }

static int size_STR_EQ(const struct ir_cond *k, int unroll)
{
	return k->field == IR_F_CLAIM ? 30 + 5 * (int)k->len : k->len <= (size_t)unroll ? 6 + 5 * (int)k->len : 30;
}

static int size_STR_PREFIX(const struct ir_cond *k, int unroll) { return size_STR_EQ(k, unroll); }

/* Each action kind's estimate */
enum { act_size_MUTATE = 24, act_size_COUNT = 24, act_size_LIMIT = 60, act_size_COUNTER_RESET = 24, act_size_TIMER_RESTART = 24,
       act_size_AUDIT = 16, act_size_NOLOG = 2 };

int codegen_rule_size(const struct ir_program *p, const struct ir_rule *r, int unroll)
{
	int n = cond_size(r->cond, unroll ? unroll : CODEGEN_UNROLL_MAX) + 12 + 10;   /* the hit counter, the decision */
	if ((r->term == IR_FORWARD || r->term == IR_FALLBACK) && r->upstream >= 0 && r->upstream < p->nupstreams)
		n += p->upstreams[r->upstream].balance == IR_LB_HASH ? 440 : p->upstreams[r->upstream].balance == IR_LB_ONE ? 0 : 30;
	static const int act_size[] = {   /* per action kind (ir/actions.def) */
#define IR_ACTION(kind, operands) [IR_A_##kind] = act_size_##kind,
#include "actions.def"
#undef IR_ACTION
	};
	for (int a = 0; a < r->nactions; a++) {
		const struct ir_action *x = &r->actions[a];
		n += act_size[x->kind] + (x->kind == IR_A_LIMIT && (int)x->key_field >= 0 ? 300 : 0);   /* hashing the key */
	}
	return n;
}
