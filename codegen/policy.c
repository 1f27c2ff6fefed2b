/* l7_policy_decide(req, d): the Match and Action stages as control flow.
 *
 * Each policy is a chain of rule tests; a matching rule applies its mutations, then either
 * decides (store the decision, return) or continues with the next policy. Conditions are
 * lowered with short-circuit branches, leaves are calls into stdlib/bpf/policy.c that inline
 * to byte compares against constants. Every instruction carries the .l7 line it came from. */
#include "cg.h"

#include <stddef.h>
#include <stdio.h>

#include "l7/abi.h"

struct pcx {
	struct cg *g;
	LLVMValueRef fn, req, d;
	LLVMMetadataRef sp;
	LLVMTypeRef cmp_ty;
	LLVMValueRef eq_fn, prefix_fn;
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

static size_t span_offset(const struct ir_cond *k)
{
	switch (k->field) {
	case IR_F_PATH: return offsetof(struct l7_req, path);
	case IR_F_QUERY: return offsetof(struct l7_req, query);
	case IR_F_METHOD: return offsetof(struct l7_req, method_s);
	case IR_F_HOST: return offsetof(struct l7_req, host);
	case IR_F_HEADER: return offsetof(struct l7_req, hdr) + (size_t)k->header * sizeof(struct l7_span);
	}
	return 0;
}

static LLVMBasicBlockRef block(struct pcx *c, const char *name)
{
	return LLVMAppendBasicBlockInContext(c->g->ctx, c->fn, name);
}

/* Branches to yes or no on k. */
static void cond_br(struct pcx *c, const struct ir_cond *k, LLVMBasicBlockRef yes, LLVMBasicBlockRef no)
{
	struct cg *g = c->g;
	if (k->line)
		cg_di_at(g, c->sp, k->line);
	LLVMValueRef v;
	switch (k->kind) {
	case IR_C_TRUE: LLVMBuildBr(g->b, yes); return;
	case IR_C_FALSE: LLVMBuildBr(g->b, no); return;
	case IR_C_NOT: cond_br(c, k->a, no, yes); return;
	case IR_C_AND:
	case IR_C_OR: {
		LLVMBasicBlockRef second = block(c, k->kind == IR_C_AND ? "and" : "or");
		if (k->kind == IR_C_AND)
			cond_br(c, k->a, second, no);
		else
			cond_br(c, k->a, yes, second);
		LLVMPositionBuilderAtEnd(g->b, second);
		cond_br(c, k->b, yes, no);
		return;
	}
	case IR_C_STR_EQ:
	case IR_C_STR_PREFIX: {
		LLVMValueRef args[] = { c->req, at_offset(c, c->req, span_offset(k)), cg_string(g, k->str, k->len),
					u32c(c, k->len) };
		LLVMValueRef r = LLVMBuildCall2(g->b, c->cmp_ty, k->kind == IR_C_STR_EQ ? c->eq_fn : c->prefix_fn, args, 4, "");
		v = LLVMBuildICmp(g->b, LLVMIntNE, r, u32c(c, 0), "");
		break;
	}
	case IR_C_METHOD_IS:
		v = LLVMBuildICmp(g->b, LLVMIntEQ, load32(c, c->req, offsetof(struct l7_req, method)), u32c(c, k->method), "");
		break;
	case IR_C_SERVICE_IN: {
		LLVMValueRef s = LLVMBuildZExt(g->b, load32(c, c->req, offsetof(struct l7_req, service)), g->i64, "");
		LLVMValueRef in_range = LLVMBuildICmp(g->b, LLVMIntULT, s, LLVMConstInt(g->i64, 64, 0), "");
		LLVMValueRef bit = LLVMBuildAnd(g->b, LLVMBuildLShr(g->b, LLVMConstInt(g->i64, k->mask, 0), s, ""),
						LLVMConstInt(g->i64, 1, 0), "");
		v = LLVMBuildAnd(g->b, in_range, LLVMBuildTrunc(g->b, bit, g->i1, ""), "");
		break;
	}
	default:
		LLVMBuildBr(g->b, no);
		return;
	}
	LLVMBuildCondBr(g->b, v, yes, no);
}

/* d->set[d->n_set++] = m, bounded by L7_MAX_SET. */
static void add_mutation(struct pcx *c, int m)
{
	struct cg *g = c->g;
	LLVMValueRef n = load32(c, c->d, offsetof(struct l7_decision, n_set));
	LLVMValueRef room = LLVMBuildICmp(g->b, LLVMIntULT, n, u32c(c, L7_MAX_SET), "");
	LLVMBasicBlockRef put = block(c, "set"), done = block(c, "set.done");
	LLVMBuildCondBr(g->b, room, put, done);
	LLVMPositionBuilderAtEnd(g->b, put);
	LLVMValueRef idx[] = { LLVMConstInt(g->i64, 0, 0), LLVMBuildZExt(g->b, n, g->i64, "") };
	LLVMTypeRef set_ty = LLVMArrayType2(g->i32, L7_MAX_SET);
	LLVMValueRef slot = LLVMBuildInBoundsGEP2(g->b, set_ty, at_offset(c, c->d, offsetof(struct l7_decision, set)), idx, 2, "");
	LLVMBuildStore(g->b, u32c(c, (unsigned)m), slot);
	store32(c, c->d, offsetof(struct l7_decision, n_set), LLVMBuildAdd(g->b, n, u32c(c, 1), ""));
	LLVMBuildBr(g->b, done);
	LLVMPositionBuilderAtEnd(g->b, done);
}

static void decide(struct pcx *c, const struct ir_rule *r)
{
	static const unsigned verdict[] = { [IR_FORWARD] = L7_FORWARD, [IR_DENY] = L7_DENY, [IR_FALLBACK] = L7_FALLBACK };
	store32(c, c->d, offsetof(struct l7_decision, verdict), u32c(c, verdict[r->term]));
	store32(c, c->d, offsetof(struct l7_decision, upstream), u32c(c, r->upstream < 0 ? 0 : (unsigned)r->upstream));
	store32(c, c->d, offsetof(struct l7_decision, status), u32c(c, (unsigned)r->status));
	store32(c, c->d, offsetof(struct l7_decision, rule), u32c(c, (unsigned)r->id));
	LLVMBuildRet(c->g->b, u32c(c, verdict[r->term]));
}

void cg_policy(struct cg *g)
{
	struct pcx c = { .g = g };
	LLVMTypeRef pp[] = { g->ptr, g->ptr };
	LLVMTypeRef fty = LLVMFunctionType(g->i32, pp, 2, 0);
	c.fn = LLVMAddFunction(g->mod, "l7_policy_decide", fty);
	LLVMAddTargetDependentFunctionAttr(c.fn, "target-cpu", "v3");
	/* req and d never alias: lets LLVM keep compared request bytes in registers across the
	 * decision stores, and share a leaf that several rules test. */
	unsigned noalias = LLVMGetEnumAttributeKindForName("noalias", 7);
	LLVMAddAttributeAtIndex(c.fn, 1, LLVMCreateEnumAttribute(g->ctx, noalias, 0));
	LLVMAddAttributeAtIndex(c.fn, 2, LLVMCreateEnumAttribute(g->ctx, noalias, 0));
	c.req = LLVMGetParam(c.fn, 0);
	c.d = LLVMGetParam(c.fn, 1);
	LLVMTypeRef cp[] = { g->ptr, g->ptr, g->ptr, g->i32 };
	c.cmp_ty = LLVMFunctionType(g->i32, cp, 4, 0);
	c.eq_fn = LLVMAddFunction(g->mod, "l7_field_equals", c.cmp_ty);
	c.prefix_fn = LLVMAddFunction(g->mod, "l7_field_prefix", c.cmp_ty);

	const struct ir_program *p = g->p;
	unsigned first_line = p->npolicies ? p->policies[0].line : 1;
	const char *params[] = { "req", "decision" };
	c.sp = cg_di_function(g, c.fn, "l7_policy_decide", first_line, params, 2);

	LLVMPositionBuilderAtEnd(g->b, block(&c, "entry"));
	cg_di_at(g, c.sp, first_line);
	store32(&c, c.d, offsetof(struct l7_decision, n_set), u32c(&c, 0));

	for (int i = 0; i < p->npolicies; i++) {
		const struct ir_policy *pol = &p->policies[i];
		LLVMBasicBlockRef next_policy = block(&c, "policy.next");
		for (int r = 0; r < pol->nrules; r++) {
			const struct ir_rule *rule = &pol->rules[r];
			char name[32];
			snprintf(name, sizeof(name), "rule%d", rule->id);
			LLVMBasicBlockRef match = block(&c, name), next = block(&c, "rule.next");
			cond_br(&c, rule->cond, match, next);
			LLVMPositionBuilderAtEnd(g->b, match);
			for (int a = 0; a < rule->nactions; a++) {
				cg_di_at(g, c.sp, rule->actions[a].line);
				add_mutation(&c, rule->actions[a].mutation);
			}
			cg_di_at(g, c.sp, rule->line);
			if (rule->term == IR_CONTINUE)
				LLVMBuildBr(g->b, next_policy);   /* paths are exclusive: no other rule of this policy */
			else
				decide(&c, rule);
			LLVMPositionBuilderAtEnd(g->b, next);
		}
		LLVMBuildBr(g->b, next_policy);
		LLVMPositionBuilderAtEnd(g->b, next_policy);
	}
	cg_di_at(g, c.sp, p->npolicies ? p->policies[p->npolicies - 1].line : 1);
	decide(&c, &p->default_rule);
}
