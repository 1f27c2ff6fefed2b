/* The reference evaluator: what the IR means, in plain C. The kernel data plane must agree
 * with it on every request (tests/kernel differential test), and so must the IR after each
 * optimisation pass (tests/compiler property test).
 *
 * Across policies (Meshlib's semantics): policies run in order, each to its first matching
 * rule; a Deny anywhere decides at once (deny wins); Route and Fallback are remembered (the
 * first wins) while later policies still run; if an ALLOW policy applied and no Allow was
 * reached, the request is denied 403; a request nothing routed gets the default (404). */
#include "ir.h"

#include <assert.h>
#include <limits.h>
#include <string.h>
#include <strings.h>

#include "l7/abi.h"
#include "l7/grpc.h"
#include "l7/dataplane.h"

struct ev {
	const struct ir_program *p;
	struct l7_req *r;          /* JWT checks write their claims into it */
	const struct ir_eval_env *env;
};

static const struct l7_span *span_of(const struct l7_req *r, enum ir_field f, int idx)
{
	assert((f != IR_F_HEADER || (idx >= 0 && idx < L7_MAX_WANTED)) && (f != IR_F_CLAIM || (idx >= 0 && idx < L7_MAX_CLAIMS)));
	switch (f) {
	case IR_F_PATH: return &r->path;
	case IR_F_TARGET: return &r->target;
	case IR_F_QUERY: return &r->query;
	case IR_F_METHOD: return &r->method_s;
	case IR_F_HOST: return &r->host;
	case IR_F_HEADER: return &r->hdr[idx];
	case IR_F_CLAIM: return &r->claim[idx];
	}
	return &r->path;
}

static const __u8 *base_of(const struct l7_req *r, enum ir_field f)
{
	return f == IR_F_CLAIM ? r->jwt_json : r->buf;
}

/* The identity of the longest declared prefix holding the client (as the data plane's
 * l7_idents trie answers before l7run adds runtime entries); nidentities if none. */
int ir_identity_of(const struct ir_program *p, unsigned src_be)
{
	int best = p->nidentities, best_len = -1;
	for (int i = 0; i < p->nidentities; i++)
		for (int k = 0; k < p->identities[i].n; k++) {
			int len = __builtin_popcount(p->identities[i].netmasks[k]);
			if ((src_be & p->identities[i].netmasks[k]) == p->identities[i].nets[k] && len > best_len)
				best = i, best_len = len;
		}
	return best;
}

/* The first entry of table t the request matches, or NULL. */
static const struct ir_table_entry *table_first(const struct ev *e, const struct ir_table *t)
{
	const struct l7_req *r = e->r;
	const struct l7_span *s = span_of(r, t->field, t->header);
	for (int i = 0; i < t->n; i++) {
		const struct ir_table_entry *en = &t->entries[i];
		bool len_ok = en->prefix ? s->len >= en->len : s->len == en->len;
		if ((!en->method || en->method == r->method) && len_ok && (size_t)s->off + en->len <= sizeof(r->buf) &&
		    !memcmp(r->buf + s->off, en->value, en->len))
			return en;
	}
	return NULL;
}

/* Does the request satisfy c: one hook per condition kind (conds.def). */
typedef bool holds_fn(const struct ev *e, const struct ir_cond *c);
#define IR_COND(kind, operands) static holds_fn holds_##kind;
#include "conds.def"
#undef IR_COND

static bool holds(const struct ev *e, const struct ir_cond *c)
{
	static holds_fn *const hooks[] = {
#define IR_COND(kind, operands) [IR_C_##kind] = holds_##kind,
#include "conds.def"
#undef IR_COND
	};
	assert(c && ir_cond_kind_name(c->kind));
	return hooks[c->kind](e, c);
}

static bool holds_TRUE(const struct ev *e, const struct ir_cond *c) { return (void)e, (void)c, true; }
static bool holds_FALSE(const struct ev *e, const struct ir_cond *c) { return (void)e, (void)c, false; }
static bool holds_AND(const struct ev *e, const struct ir_cond *c) { return holds(e, c->a) && holds(e, c->b); }
static bool holds_OR(const struct ev *e, const struct ir_cond *c) { return holds(e, c->a) || holds(e, c->b); }
static bool holds_NOT(const struct ev *e, const struct ir_cond *c) { return !holds(e, c->a); }

/* the field's bytes equal c's constant, or start with it */
static bool str_holds(const struct ev *e, const struct ir_cond *c, bool whole)
{
	const struct l7_req *r = e->r;
	const struct l7_span *s = span_of(r, c->field, c->header);
	size_t cap = c->field == IR_F_CLAIM ? sizeof(r->jwt_json) : sizeof(r->buf);
	bool fits = whole ? s->len == c->len : s->len >= c->len;
	return fits && (size_t)s->off + c->len <= cap && memcmp(base_of(r, c->field) + s->off, c->str, c->len) == 0;
}

static bool holds_STR_EQ(const struct ev *e, const struct ir_cond *c) { return str_holds(e, c, true); }
static bool holds_STR_PREFIX(const struct ev *e, const struct ir_cond *c) { return str_holds(e, c, false); }

static bool holds_REGEX(const struct ev *e, const struct ir_cond *c)
{
	const struct l7_req *r = e->r;
	const struct l7_span *s = span_of(r, c->field, c->header);
	size_t cap = c->field == IR_F_CLAIM ? sizeof(r->jwt_json) : sizeof(r->buf);
	return (size_t)s->off + s->len <= cap && re_match(&c->re->dfa, base_of(r, c->field) + s->off, s->len);
}

static bool holds_METHOD_IS(const struct ev *e, const struct ir_cond *c) { return e->r->method == c->method; }

static bool holds_PROTOCOL(const struct ev *e, const struct ir_cond *c)
{
	return (e->r->flags & L7_PROTO_MASK) == L7_PROTO_FLAGS(c->lo);
}

static bool holds_SERVICE_IN(const struct ev *e, const struct ir_cond *c)
{
	return e->r->service < 64 && (c->mask >> e->r->service & 1);
}

static bool holds_HAS_HEADER(const struct ev *e, const struct ir_cond *c) { return e->r->hdr_present >> c->header & 1; }
static bool holds_SOURCE_IN(const struct ev *e, const struct ir_cond *c) { return (e->r->src_ip4 & c->netmask) == c->net; }

static bool holds_PORT_IN(const struct ev *e, const struct ir_cond *c)
{
	return e->r->dst_port >= c->lo && e->r->dst_port <= c->hi;
}

static bool holds_JWT_VALID(const struct ev *e, const struct ir_cond *c)
{
	return e->env && e->env->jwt_valid && e->env->jwt_valid(e->env->ctx, c->jwt, e->r);
}

static bool holds_IDENTITY(const struct ev *e, const struct ir_cond *c) { return ir_identity_of(e->p, e->r->src_ip4) == c->ident; }

static bool holds_COUNTER_IN(const struct ev *e, const struct ir_cond *c)
{
	unsigned long long v = e->env && e->env->counter_value ? e->env->counter_value(e->env->ctx, c->state) : 0;
	return v >= c->lo && (c->hi == UINT_MAX || v <= c->hi);
}

static bool holds_TIMER_ELAPSED(const struct ev *e, const struct ir_cond *c)
{
	return e->env && e->env->timer_elapsed && e->env->timer_elapsed(e->env->ctx, c->state, c->lo);
}

static bool holds_SOURCE_SET(const struct ev *e, const struct ir_cond *c)
{
	const struct ir_cidr_set *s = &e->p->cidr_sets[c->set];
	for (int i = 0; i < s->n; i++)
		if ((e->r->src_ip4 & s->netmasks[i]) == s->nets[i])
			return true;
	return false;
}

static bool holds_TABLE(const struct ev *e, const struct ir_cond *c)   /* the first entry in rule order decides */
{
	const struct ir_table_entry *en = table_first(e, &e->p->tables[c->table]);
	return en && en->group == c->group;
}

/* The .l7 line that decided: a rule's, or for a rule that stands for a table (its first test),
 * the line of the table entry the request matched. */
static unsigned line_of(const struct ev *e, const struct ir_rule *r)
{
	const struct ir_cond *c = ir_rule_table(r);
	const struct ir_table_entry *en = c ? table_first(e, &e->p->tables[c->table]) : NULL;
	return en ? en->line : r->line;
}

/* Limit: a token of the action's bucket for its key, from the environment. */
static bool take(const struct ev *e, const struct ir_action *a)
{
	const struct l7_req *r = e->r;
	if (a->key_source)
		return e->env->bucket_take(e->env->ctx, a->bucket, &r->src_ip4, sizeof(r->src_ip4));
	if ((int)a->key_field < 0)
		return e->env->bucket_take(e->env->ctx, a->bucket, NULL, 0);
	const struct l7_span *s = span_of(r, a->key_field, a->key_header);
	size_t cap = a->key_field == IR_F_CLAIM ? sizeof(r->jwt_json) : sizeof(r->buf);
	size_t len = (size_t)s->off + s->len <= cap ? s->len : 0;
	return e->env->bucket_take(e->env->ctx, a->bucket, base_of(r, a->key_field) + s->off, len);
}

/* A header mutation, in the order reached: SET and REMOVE take every line of the name from
 * the sender's message (del) and drop lines added for it before; SET and ADD add theirs. */
static void mutate(const struct ir_program *p, struct ir_decision *out, const struct ir_action *a)
{
	int *set = a->response ? out->rset : out->set;
	int *n = a->response ? &out->nrset : &out->nset;
	assert(a->op == IR_MUT_ADD || (a->header >= 0 && a->header < 32));   /* a bit of del / rdel */
	if (a->op != IR_MUT_ADD) {
		const char *name = a->response ? p->rheaders[a->header] : p->headers[a->header];
		int k = 0;
		for (int i = 0; i < *n; i++)
			if (strcasecmp(p->mutations[set[i]].name, name))
				set[k++] = set[i];
		*n = k;
		*(a->response ? &out->rdel : &out->del) |= 1u << a->header;
	}
	if (a->op != IR_MUT_REMOVE && *n < L7_MAX_SET)   /* never more: ir_lower bounds them */
		set[(*n)++] = a->mutation;
}

static void decide(const struct ev *e, struct ir_decision *out, const struct ir_rule *r)
{
	out->term = r->term;
	out->upstream = r->upstream;
	out->slot = -1;
	out->status = r->status;
	out->grpc = r->term == IR_DENY ? l7_grpc_status_of((unsigned)r->grpc, (__u16)r->status) : 0;
	out->grpc_named = r->term == IR_DENY && r->grpc;
	out->rule = r;
	out->line = line_of(e, r);
}

/* Each action kind (actions.def): what it does to the decision. False when it decided (a
 * Limit over its rate denies at once). */
typedef bool apply_fn(const struct ev *e, struct ir_decision *out, const struct ir_rule *r, const struct ir_action *a);
#define IR_ACTION(kind, operands) static apply_fn apply_##kind;
#include "actions.def"
#undef IR_ACTION

/* The actions of rule r, in order. */
static bool apply(const struct ev *e, struct ir_decision *out, const struct ir_rule *r)
{
	static apply_fn *const hooks[] = {
#define IR_ACTION(kind, operands) [IR_A_##kind] = apply_##kind,
#include "actions.def"
#undef IR_ACTION
	};
	for (int a = 0; a < r->nactions; a++)
		if (!hooks[r->actions[a].kind](e, out, r, &r->actions[a]))
			return false;
	return true;
}

static bool apply_MUTATE(const struct ev *e, struct ir_decision *out, const struct ir_rule *r, const struct ir_action *a)
{
	(void)r;
	mutate(e->p, out, a);
	return true;
}

static bool apply_COUNT(const struct ev *e, struct ir_decision *out, const struct ir_rule *r, const struct ir_action *a)
{
	(void)e, (void)r;
	if (out->ncounted < 16)
		out->counted[out->ncounted++] = a->counter;
	return true;
}

static bool apply_LIMIT(const struct ev *e, struct ir_decision *out, const struct ir_rule *r, const struct ir_action *a)
{
	if (!e->env || !e->env->bucket_take || take(e, a))
		return true;
	out->term = IR_DENY;
	out->status = (int)e->p->buckets[a->bucket].status;
	out->grpc = l7_grpc_status_of_http((__u16)out->status);
	out->grpc_named = false;
	out->upstream = -1;
	out->slot = -1;
	out->rule = r;
	out->line = line_of(e, r);
	return false;
}

/* the counter's value and the timer are the environment's (ir_eval_env) */
static bool apply_COUNTER_RESET(const struct ev *e, struct ir_decision *out, const struct ir_rule *r,
				const struct ir_action *a)
{
	return (void)e, (void)out, (void)r, (void)a, true;
}

static void audited(struct ir_decision *out, int rule, unsigned line)
{
	if (out->naudit < 16) {
		out->audit_rule[out->naudit] = rule;
		out->audit_line[out->naudit++] = line;
	}
}

static bool apply_AUDIT(const struct ev *e, struct ir_decision *out, const struct ir_rule *r, const struct ir_action *a)
{
	(void)e;
	audited(out, r->id, a->line);
	return true;
}

static bool apply_NOLOG(const struct ev *e, struct ir_decision *out, const struct ir_rule *r, const struct ir_action *a)
{
	(void)e, (void)r, (void)a;
	out->nolog = true;
	return true;
}

static bool apply_TIMER_RESTART(const struct ev *e, struct ir_decision *out, const struct ir_rule *r,
				const struct ir_action *a)
{
	return (void)e, (void)out, (void)r, (void)a, true;
}

void ir_eval_with(const struct ir_program *p, struct l7_req *req, const struct ir_eval_env *env,
		  struct ir_decision *out)
{
	struct ev e = { p, req, env };
	memset(out, 0, sizeof(*out));
	const struct ir_rule *route = NULL;
	bool allow_applies = false, allowed = false;
	for (int i = 0; i < p->npolicies; i++) {
		const struct ir_policy *pol = &p->policies[i];
		if (pol->has_allow && holds(&e, pol->applies))
			allow_applies = true;
		for (int k = 0; k < pol->nrules; k++) {
			const struct ir_rule *r = &pol->rules[k];
			if (!holds(&e, r->cond))
				continue;
			if (!apply(&e, out, r))
				return;   /* a Limit denied */
			if (r->term == IR_DENY && e.env && e.env->audit_all) {
				audited(out, r->id, line_of(&e, r));   /* the policy decides nothing */
				break;
			}
			if (r->term == IR_DENY) {
				decide(&e, out, r);
				return;
			}
			if (r->term == IR_ALLOW)
				allowed = true;
			if ((r->term == IR_FORWARD || r->term == IR_FALLBACK) && !route)
				route = r;
			break;   /* paths of one policy are exclusive: on to the next policy */
		}
	}
	if (allow_applies && !allowed && env && env->audit_all)
		audited(out, p->rbac_rule.id, p->rbac_rule.line);
	if (allow_applies && !allowed && !(env && env->audit_all))
		decide(&e, out, &p->rbac_rule);
	else if (route)
		decide(&e, out, route);
	else
		decide(&e, out, &p->default_rule);
	if (out->term == IR_DENY) {
		out->upstream = -1;
		return;
	}
	/* the endpoint: a Ketama ring picks it as the kernel does; round robin rotates; a run-time
	 * set over the table the environment gives, if it gives one */
	const struct ir_target *t = &p->upstreams[out->upstream];
	const struct l7_lb_tab *tab = t->rt_kind != IR_RT_NONE && env && env->lb_tab ? env->lb_tab(env->lb_ctx, out->upstream) : NULL;
	out->slot = tab ? ir_balance_pick_tab(t, tab, req) : ir_balance_pick(p, t, req);
	if (out->slot == (int)L7_NO_SLOT) {   /* the kernel's 503 (l7_lb_pick_rt) */
		out->term = IR_DENY;
		out->status = 503;
		out->grpc = l7_grpc_status_of_http(503);
		out->grpc_named = false;
		out->slot = -1;
		out->no_endpoint = true;
	}
}

void ir_eval(const struct ir_program *p, struct l7_req *req, struct ir_decision *out)
{
	ir_eval_with(p, req, NULL, out);
}
