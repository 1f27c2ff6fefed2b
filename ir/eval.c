/* The reference evaluator: what the IR means, in plain C. The kernel data plane must agree
 * with it on every request (tests/kernel differential test), and so must the IR after each
 * optimisation pass (tests/compiler property test). */
#include "ir.h"

#include <string.h>

#include "l7/abi.h"

static const struct l7_span *span_of(const struct l7_req *r, const struct ir_cond *c)
{
	switch (c->field) {
	case IR_F_PATH: return &r->path;
	case IR_F_QUERY: return &r->query;
	case IR_F_METHOD: return &r->method_s;
	case IR_F_HOST: return &r->host;
	case IR_F_HEADER: return &r->hdr[c->header];
	}
	return &r->path;
}

static bool holds(const struct l7_req *r, const struct ir_cond *c)
{
	switch (c->kind) {
	case IR_C_TRUE: return true;
	case IR_C_FALSE: return false;
	case IR_C_AND: return holds(r, c->a) && holds(r, c->b);
	case IR_C_OR: return holds(r, c->a) || holds(r, c->b);
	case IR_C_NOT: return !holds(r, c->a);
	case IR_C_STR_EQ:
	case IR_C_STR_PREFIX: {
		const struct l7_span *s = span_of(r, c);
		bool fits = c->kind == IR_C_STR_EQ ? s->len == c->len : s->len >= c->len;
		return fits && (size_t)s->off + c->len <= sizeof(r->buf) && memcmp(r->buf + s->off, c->str, c->len) == 0;
	}
	case IR_C_METHOD_IS: return r->method == c->method;
	case IR_C_SERVICE_IN: return r->service < 64 && (c->mask >> r->service & 1);
	}
	return false;
}

void ir_eval(const struct ir_program *p, const struct l7_req *req, struct ir_decision *out)
{
	memset(out, 0, sizeof(*out));
	for (int i = 0; i < p->npolicies; i++) {
		const struct ir_policy *pol = &p->policies[i];
		for (int k = 0; k < pol->nrules; k++) {
			const struct ir_rule *r = &pol->rules[k];
			if (!holds(req, r->cond))
				continue;
			for (int a = 0; a < r->nactions && out->nset < L7_MAX_SET; a++)
				out->set[out->nset++] = r->actions[a].mutation;
			if (r->term != IR_CONTINUE) {
				out->term = r->term;
				out->upstream = r->upstream;
				out->status = r->status;
				out->rule = r;
				return;
			}
			break;   /* paths of one policy are exclusive: on to the next policy */
		}
	}
	out->term = p->default_rule.term;
	out->status = p->default_rule.status;
	out->upstream = -1;
	out->rule = &p->default_rule;
}
