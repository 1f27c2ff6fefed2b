/* The IR verifier: every invariant the later stages rely on, checked on a whole program. It
 * runs after lowering and after every pass when asked (pipeline.c: l7c --verify-ir, the
 * environment's L7C_VERIFY_IR, Debug builds; ctest sets it for every test), so a pass that
 * breaks one is named at once instead of showing up as a wrong BPF program.
 *
 * What codegen, the evaluator and l7run's readers index with is in range: header-vector,
 * claim, mutation, counter, bucket, timer, JWT, identity, table, prefix-set and regex indices,
 * upstreams and their slots; what they assume of the shapes holds: rule ids 1..n in file order,
 * a table's test first in each of its group rules, those rules consecutive in one policy, no
 * table entry covered by an earlier one, prefixes masked, a DFA's dead state 0, ring points
 * ascending, each condition using only the operands of its kind (conds.def). */
#include "ir.h"

#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "l7/abi.h"
#include "l7/dataplane.h"
#include "l7/grpc.h"

struct vx {
	const struct ir_program *p;
	const char *stage;
	FILE *out;
	int broken;
	char where[96];             /* the rule being checked */
	const struct ir_cond *table_test;   /* where ir_rule_table finds the rule's table test */
};

__attribute__((format(printf, 2, 3))) static void bad(struct vx *v, const char *fmt, ...)
{
	if (v->broken++ >= 20)
		return;   /* the first ones say enough */
	fprintf(v->out, "l7c: internal error: the IR after %s breaks an invariant: %s", v->stage, v->where);
	va_list ap;
	va_start(ap, fmt);
	vfprintf(v->out, fmt, ap);
	va_end(ap);
	fputc('\n', v->out);
}

#define CHECK(v, ok, ...) ((ok) ? (void)0 : bad(v, __VA_ARGS__))

static bool in(int i, int n) { return i >= 0 && i < n; }

static void check_prefix(struct vx *v, unsigned net, unsigned netmask, const char *what)
{
	unsigned m = __builtin_bswap32(netmask);
	CHECK(v, (m | (m - 1)) == ~0u || m == 0, "%s: netmask %08x is not a prefix", what, netmask);
	CHECK(v, (net & ~netmask) == 0, "%s: net %08x has bits outside its netmask %08x", what, net, netmask);
}

static void check_field(struct vx *v, int field, int header, const char *what)
{
	const struct ir_program *p = v->p;
	CHECK(v, field >= IR_F_PATH && field <= IR_F_LAST, "%s: field %d", what, field);
	if (field == IR_F_HEADER)
		CHECK(v, in(header, p->nheaders), "%s: header %d of %d", what, header, p->nheaders);
	if (field == IR_F_CLAIM)
		CHECK(v, in(header, p->nclaims), "%s: claim %d of %d", what, header, p->nclaims);
}

static void check_cond(struct vx *v, const struct ir_cond *c)
{
	const struct ir_program *p = v->p;
	if (!c) {
		bad(v, "a missing condition");
		return;
	}
	if (!ir_cond_kind_name(c->kind)) {
		bad(v, "condition kind %d", c->kind);
		return;
	}
	const char *k = ir_cond_kind_name(c->kind);
	unsigned o = ir_cond_operands(c->kind);
	if (o & IR_O_AB) {
		CHECK(v, c->a && c->b, "%s without both operands", k);
		if (c->a && c->b) {
			check_cond(v, c->a);
			check_cond(v, c->b);
		}
		return;
	}
	if (o & IR_O_A) {
		CHECK(v, c->a && !c->b, "%s needs exactly one operand", k);
		if (c->a)
			check_cond(v, c->a);
		return;
	}
	CHECK(v, !c->a && !c->b, "%s has subconditions", k);
	if (o & IR_O_FIELD)
		check_field(v, (int)c->field, c->header, k);
	if (o & IR_O_STR)
		CHECK(v, c->len < L7_MAX_HEAD && (c->str || !c->len), "%s: a constant of %zu bytes", k, c->len);
	if (o & IR_O_METHOD)
		CHECK(v, c->method > L7_M_OTHER && c->method <= L7_M_PATCH, "%s: method %u", k, c->method);
	if (o & IR_O_SERVICES)
		CHECK(v, c->mask && (p->nservices >= 64 || c->mask >> p->nservices == 0), "%s: mask %llx of %d services", k,
		      c->mask, p->nservices);
	if (o & IR_O_HEADER)
		CHECK(v, in(c->header, p->nheaders) && c->header < 32, "%s: header %d of %d", k, c->header, p->nheaders);
	if (o & IR_O_PREFIX)
		check_prefix(v, c->net, c->netmask, k);
	if (o & IR_O_PORTS)
		CHECK(v, c->lo <= c->hi && c->hi <= 65535, "%s: %u..%u", k, c->lo, c->hi);
	if (o & IR_O_RANGE)
		CHECK(v, c->lo <= c->hi, "%s: %u..%u", k, c->lo, c->hi);
	if (o & IR_O_JWT)
		CHECK(v, in(c->jwt, p->njwts), "%s: jwt %d of %d", k, c->jwt, p->njwts);
	if (o & IR_O_IDENT)
		CHECK(v, in(c->ident, p->nidentities + 1), "%s: identity %d of %d", k, c->ident, p->nidentities);
	if (o & IR_O_TABLE) {
		CHECK(v, c == v->table_test, "%s is not the first test of its rule (codegen looks the table up there)", k);
		CHECK(v, in(c->table, p->ntables) && c->group >= 1 && c->group <= p->tables[c->table].ngroups,
		      "%s: table %d of %d, group %d", k, c->table, p->ntables, c->group);
	}
	if (o & IR_O_SET)
		CHECK(v, in(c->set, p->ncidr_sets), "%s: set %d of %d", k, c->set, p->ncidr_sets);
	if (o & IR_O_COUNTER)
		CHECK(v, in(c->state, p->ncounters) && c->state < L7_MAX_READ_COUNTERS && (p->counters_read >> c->state & 1),
		      "%s: counter %d of %d (read: %llx)", k, c->state, p->ncounters, p->counters_read);
	if (o & IR_O_TIMER)
		CHECK(v, in(c->state, p->ntimers), "%s: timer %d of %d", k, c->state, p->ntimers);
	if (o & IR_O_SECONDS)
		CHECK(v, c->lo <= 31536000, "%s: %u seconds", k, c->lo);
	if (o & IR_O_PROTO)
		CHECK(v, c->lo <= L7_P_HTTP2, "%s: protocol %u", k, c->lo);
	if (o & IR_O_RE)
		CHECK(v, c->re && in(c->re->index, p->nregexes) && p->regexes[c->re->index] == c->re, "%s: regex %d of %d", k,
		      c->re ? c->re->index : -1, p->nregexes);
}

static void check_action(struct vx *v, const struct ir_action *a)
{
	const struct ir_program *p = v->p;
	if (!ir_action_kind_name(a->kind)) {
		bad(v, "action kind %d", a->kind);
		return;
	}
	unsigned o = ir_action_operands(a->kind);
	const char *k = ir_action_kind_name(a->kind);
	if (o & IR_AO_MUTATION) {
		CHECK(v, a->op == IR_MUT_SET || a->op == IR_MUT_ADD || a->op == IR_MUT_REMOVE, "%s: op %d", k, a->op);
		if (a->op == IR_MUT_ADD)
			CHECK(v, a->header == -1, "%s: an ADD names header %d", k, a->header);
		else
			CHECK(v, in(a->header, a->response ? p->nrheaders : p->nheaders), "%s: %s header %d of %d", k,
			      a->response ? "response" : "request", a->header, a->response ? p->nrheaders : p->nheaders);
		if (a->op == IR_MUT_REMOVE)
			CHECK(v, a->mutation == -1, "%s: a REMOVE adds line %d", k, a->mutation);
		else
			CHECK(v, in(a->mutation, p->nmutations), "%s: mutation line %d of %d", k, a->mutation, p->nmutations);
	}
	if (o & IR_AO_COUNTER)
		CHECK(v, in(a->counter, p->ncounters), "%s: counter %d of %d", k, a->counter, p->ncounters);
	if (o & IR_AO_TIMER)
		CHECK(v, in(a->timer, p->ntimers), "%s: timer %d of %d", k, a->timer, p->ntimers);
	if (o & IR_AO_BUCKET) {
		CHECK(v, in(a->bucket, p->nbuckets), "%s: bucket %d of %d", k, a->bucket, p->nbuckets);
		if (a->key_source)
			CHECK(v, (int)a->key_field == -1, "%s: by source, and also by field %d", k, a->key_field);
		else if ((int)a->key_field != -1)
			check_field(v, (int)a->key_field, a->key_header, "the Limit key");
	}
}

static void check_rule(struct vx *v, const struct ir_rule *r, bool in_policy)
{
	const struct ir_program *p = v->p;
	v->table_test = ir_rule_table(r);
	check_cond(v, r->cond);
	v->table_test = NULL;
	for (int a = 0; a < r->nactions; a++)
		check_action(v, &r->actions[a]);
	switch (r->term) {
	case IR_FORWARD:
		CHECK(v, in(r->upstream, p->nupstreams) && r->upstream != p->fallback, "Route to upstream %d of %d", r->upstream,
		      p->nupstreams);
		break;
	case IR_FALLBACK:
		CHECK(v, p->fallback >= 0 && r->upstream == p->fallback && r->reason, "Fallback to %d (the fallback is %d)",
		      r->upstream, p->fallback);
		break;
	case IR_DENY:
		CHECK(v, r->status >= 200 && r->status <= 599, "status %d", r->status);
		CHECK(v, r->grpc == 0 || (r->grpc > 1 && l7_grpc_status_name((unsigned)r->grpc - 1)), "gRPC status %d", r->grpc - 1);
		break;
	case IR_CONTINUE:
	case IR_ALLOW:
		CHECK(v, in_policy, "a default that does not decide");
		break;
	default:
		bad(v, "terminal %d", r->term);
	}
}

/* Rule ids are 1..nrules in file order (they index the hit counters); the group rules of a
 * table are consecutive in one policy, one per group (codegen looks the table up at the first,
 * which dominates the others). */
static void check_policies(struct vx *v)
{
	const struct ir_program *p = v->p;
	int id = 0;
	int *groups = calloc((size_t)p->ntables + 1, sizeof(int));   /* rules testing each table */
	int *last = calloc((size_t)p->ntables + 1, sizeof(int));     /* the id of the last of them */
	for (int i = 0; i < p->npolicies; i++) {
		const struct ir_policy *pol = &p->policies[i];
		CHECK(v, pol->name && pol->nrules >= 0, "policy %d", i);
		if (pol->has_allow) {
			snprintf(v->where, sizeof(v->where), "policy %s (line %u), its context: ", pol->name, pol->line);
			check_cond(v, pol->applies);
		}
		for (int k = 0; k < pol->nrules; k++) {
			const struct ir_rule *r = &pol->rules[k];
			snprintf(v->where, sizeof(v->where), "rule %d (line %u) of policy %s: ", r->id, r->line, pol->name);
			CHECK(v, r->id == ++id, "its id should be %d", id);
			check_rule(v, r, true);
			const struct ir_cond *t = ir_rule_table(r);
			if (t && in(t->table, p->ntables)) {
				CHECK(v, !groups[t->table] || (last[t->table] == r->id - 1 && k > 0),
				      "the group rules of table %d are not consecutive in one policy", t->table);
				groups[t->table]++;
				last[t->table] = r->id;
			}
		}
	}
	v->where[0] = 0;
	CHECK(v, id == p->nrules, "%d rules, %d counted", id, p->nrules);
	for (int t = 0; t < p->ntables; t++)
		CHECK(v, groups[t] == p->tables[t].ngroups, "table %d: %d group rules for %d groups", t, groups[t],
		      p->tables[t].ngroups);
	free(groups);
	free(last);
	snprintf(v->where, sizeof(v->where), "the default rule: ");
	check_rule(v, &p->default_rule, false);
	snprintf(v->where, sizeof(v->where), "the ALLOW policies' 403: ");
	check_rule(v, &p->rbac_rule, false);
	v->where[0] = 0;
}

/* Values in byte order, a prefix before what it starts, then in rule order. */
static int by_value(const void *x, const void *y)
{
	const struct ir_table_entry *a = *(const struct ir_table_entry *const *)x, *b = *(const struct ir_table_entry *const *)y;
	int c = memcmp(a->value, b->value, a->len < b->len ? a->len : b->len);
	return c ? c : a->len != b->len ? (a->len < b->len ? -1 : 1) : (a < b ? -1 : a > b);
}

static bool starts(const struct ir_table_entry *e, const struct ir_table_entry *with)
{
	return e->len >= with->len && !memcmp(e->value, with->value, with->len);
}

/* No entry is covered by an earlier one: that would make the longest match in a lookup not the
 * first. In value order what an entry can cover comes right after it (its own value, then
 * values it starts), so this is a scan, not every pair of a 10,000-entry table. */
static void check_covered(struct vx *v, const struct ir_table *t)
{
	const struct ir_table_entry **e = malloc(sizeof(*e) * (size_t)t->n);
	for (int k = 0; k < t->n; k++)
		e[k] = &t->entries[k];
	qsort(e, (size_t)t->n, sizeof(*e), by_value);
	for (int i = 0; i < t->n; i++)
		for (int j = i + 1; j < t->n && starts(e[j], e[i]) && (e[i]->prefix || e[j]->len == e[i]->len); j++)
			if (e[i] < e[j] && ir_table_entry_covers(e[i], e[j])) {
				bad(v, "entry %d (line %u) is covered by entry %d (line %u)", (int)(e[j] - t->entries), e[j]->line,
				    (int)(e[i] - t->entries), e[i]->line);
				break;
			}
	free(e);
}

static void check_tables(struct vx *v)
{
	const struct ir_program *p = v->p;
	long entries = 0;
	for (int i = 0; i < p->ntables; i++) {
		const struct ir_table *t = &p->tables[i];
		snprintf(v->where, sizeof(v->where), "table %d: ", i);
		entries += t->n;
		CHECK(v, t->n >= 1 && t->ngroups >= 1 && t->ngroups <= L7_TABLE_MAX_GROUPS, "%d entries, %d groups", t->n,
		      t->ngroups);
		CHECK(v, t->field == IR_F_PATH || t->field == IR_F_HOST || t->field == IR_F_HEADER || t->field == IR_F_QUERY,
		      "keyed on field %d", t->field);
		check_field(v, (int)t->field, t->header, "its key");
		bool seen[4] = { false };
		for (int k = 0; k < t->n; k++) {
			const struct ir_table_entry *e = &t->entries[k];
			CHECK(v, e->len <= L7_TABLE_PATH && e->group >= 1 && e->group <= t->ngroups && e->method <= L7_M_PATCH,
			      "entry %d: %zu bytes, group %d, method %u", k, e->len, e->group, e->method);
			seen[(e->prefix ? 2 : 0) + (e->method ? 1 : 0)] = true;
		}
		check_covered(v, t);
		CHECK(v, seen[0] == t->exact_any && seen[1] == t->exact_method && seen[2] == t->prefix_any &&
			     seen[3] == t->prefix_method, "its lookups do not match its entries");
	}
	v->where[0] = 0;
	CHECK(v, entries <= L7_TABLE_ENTRIES, "%ld table entries", entries);
}

static void check_names(struct vx *v, char *const *names, int n, int max, const char *what)
{
	CHECK(v, n >= 0 && n <= max, "%d %s names (at most %d)", n, what, max);
	for (int i = 0; i < n && i < max; i++) {
		size_t len = strlen(names[i]);
		bool lower = len > 0 && len < L7_MAX_NAME;
		for (size_t k = 0; k < len; k++)
			lower &= !(names[i][k] >= 'A' && names[i][k] <= 'Z');
		CHECK(v, lower, "%s name %d '%s' (1 to %d lower-case bytes)", what, i, names[i], L7_MAX_NAME - 1);
		for (int j = 0; j < i; j++)
			CHECK(v, strcmp(names[i], names[j]), "%s names %d and %d are both '%s'", what, j, i, names[i]);
	}
}

static void check_targets(struct vx *v)
{
	const struct ir_program *p = v->p;
	for (int i = 0; i < p->nservices; i++)
		CHECK(v, p->services[i].nendpoints == 1, "service %s has %d endpoints", p->services[i].name,
		      p->services[i].nendpoints);
	CHECK(v, p->fallback == -1 || p->fallback == p->nupstreams - 1, "the fallback is upstream %d of %d", p->fallback,
	      p->nupstreams);
	int slot = 0;
	for (int i = 0; i < p->nupstreams; i++) {
		const struct ir_target *t = &p->upstreams[i];
		snprintf(v->where, sizeof(v->where), "upstream %s: ", t->name);
		CHECK(v, t->nendpoints >= 1 && t->slot == slot, "%d endpoints from slot %d (expected %d)", t->nendpoints,
		      t->slot, slot);
		slot += t->nendpoints;
		CHECK(v, (t->balance == IR_LB_ONE) == (t->nendpoints <= 1), "balance %d over %d endpoints", t->balance,
		      t->nendpoints);
		CHECK(v, t->rt_kind == IR_RT_NONE || (t->nendpoints == L7_RT_SLOTS && t->rt < L7_MAX_RT_SETS && !t->ring && !t->turns),
		      "run-time set %d of %d slots", t->rt, t->nendpoints);
		if (t->balance == IR_LB_HASH && t->rt_kind == IR_RT_NONE) {
			int n = 1 << t->ring_log2;
			CHECK(v, t->ring && t->ring_points >= 1 && t->ring_points < n, "a ring of %d points in %d", t->ring_points, n);
			for (int k = 0; t->ring && k < n; k++) {
				CHECK(v, k == 0 || t->ring[k - 1] <= t->ring[k], "ring point %d is below the one before", k);
				CHECK(v, t->ring_slot[k] >= t->slot && t->ring_slot[k] < t->slot + t->nendpoints, "ring point %d: slot %d",
				      k, t->ring_slot[k]);
			}
			if (t->key_field == IR_F_HEADER)
				CHECK(v, t->key_header == -1 || in(t->key_header, p->nheaders), "keyed on header %d of %d",
				      t->key_header, p->nheaders);
			else
				CHECK(v, t->key_field == -1 || t->key_field == IR_F_PATH || t->key_field == IR_F_HOST, "keyed on field %d",
				      t->key_field);
		}
		if (t->balance == IR_LB_ROUND_ROBIN && t->rt_kind == IR_RT_NONE) {
			unsigned sum = 0;
			for (int e = 0; e < t->nendpoints; e++)
				sum += t->endpoints[e].weight;
			CHECK(v, t->turns && (unsigned)t->nturns == sum, "%d turns for weights summing to %u", t->nturns, sum);
			for (int k = 0; t->turns && k < t->nturns; k++)
				CHECK(v, t->turns[k] >= t->slot && t->turns[k] < t->slot + t->nendpoints, "turn %d: slot %d", k,
				      t->turns[k]);
		}
	}
	v->where[0] = 0;
	CHECK(v, slot == p->nslots && p->nslots <= L7_MAX_UPSTREAMS, "%d slots (%d counted, at most %d)", p->nslots, slot,
	      L7_MAX_UPSTREAMS);
}

static void check_state(struct vx *v)
{
	const struct ir_program *p = v->p;
	check_names(v, p->headers, p->nheaders, L7_MAX_WANTED, "header");
	check_names(v, p->rheaders, p->nrheaders, L7_MAX_RHDR, "response field");
	for (int i = 0; i < p->nmutations; i++) {
		const struct ir_mutation *m = &p->mutations[i];
		CHECK(v, m->line_len == strlen(m->name) + strlen(m->value) + 4 && strlen(m->line) == m->line_len,
		      "mutation %d: its line is not 'name: value\\r\\n'", i);
	}
	CHECK(v, p->njwts <= L7_MAX_JWT, "%d JWT configurations", p->njwts);
	for (int i = 0; i < p->njwts; i++)
		CHECK(v, in(p->jwts[i].header, p->nheaders), "jwt %s: its token's header %d of %d", p->jwts[i].name,
		      p->jwts[i].header, p->nheaders);
	CHECK(v, p->nclaims <= L7_MAX_CLAIMS, "%d claims", p->nclaims);
	for (int i = 0; i < p->nclaims; i++)
		CHECK(v, in(p->claims[i].jwt, p->njwts), "claim %d: jwt %d of %d", i, p->claims[i].jwt, p->njwts);
	CHECK(v, p->ncounters >= 64 || p->counters_read >> p->ncounters == 0, "counters read %llx of %d", p->counters_read,
	      p->ncounters);
	CHECK(v, p->ntimers <= L7_MAX_TIMERS, "%d timers", p->ntimers);
	for (int i = 0; i < p->nbuckets; i++)
		CHECK(v, p->buckets[i].rate >= 1 && p->buckets[i].burst >= 1 && p->buckets[i].status >= 200 &&
			     p->buckets[i].status <= 599, "bucket %s: rate %u, burst %u, status %u", p->buckets[i].name,
		      p->buckets[i].rate, p->buckets[i].burst, p->buckets[i].status);
	for (int i = 0; i < p->nidentities; i++)
		for (int k = 0; k < p->identities[i].n; k++)
			check_prefix(v, p->identities[i].nets[k], p->identities[i].netmasks[k], p->identities[i].name);
	for (int i = 0; i < p->ncidr_sets; i++) {
		CHECK(v, p->cidr_sets[i].n >= 1, "prefix set %d is empty", i);
		for (int k = 0; k < p->cidr_sets[i].n; k++)
			check_prefix(v, p->cidr_sets[i].nets[k], p->cidr_sets[i].netmasks[k], "a prefix set");
	}
	long cells = 0;
	for (int i = 0; i < p->nregexes; i++) {
		const struct ir_regex *re = p->regexes[i];
		const struct re_dfa *d = &re->dfa;
		CHECK(v, re->index == i, "regex %d says it is %d", i, re->index);
		bool ok = d->nstates >= 1 && d->nstates <= RE_MAX_STATES && d->nclasses >= 1 && in(d->start, d->nstates) &&
			  !d->accept[0];
		for (int b = 0; ok && b < 256; b++)
			ok = d->cls[b] < d->nclasses;
		for (int s = 0; ok && s < d->nstates * d->nclasses; s++)
			ok = d->next[s] < d->nstates && (s >= d->nclasses || d->next[s] == 0);
		CHECK(v, ok, "regex %d: its DFA is malformed (the dead state is 0 and goes nowhere else)", i);
		cells += (long)d->nstates * d->nclasses;
	}
	CHECK(v, cells <= RE_MAX_TOTAL, "%ld DFA cells", cells);
}

int ir_verify(const struct ir_program *p, const char *stage, FILE *out)
{
	struct vx v = { .p = p, .stage = stage, .out = out ? out : stderr };
	check_targets(&v);
	check_state(&v);
	check_tables(&v);
	check_policies(&v);
	if (v.broken > 20)
		fprintf(v.out, "l7c: internal error: ... and %d more\n", v.broken - 20);
	return v.broken;
}
