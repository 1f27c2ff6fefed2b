/* A run of rules that differ only in method and one field's value (RBAC lists and route tables
 * on the path, tenants on a header, virtual hosts on Host) costs compares per rule, in
 * instructions and in verifier work; as a table it costs at most four map lookups (exact and
 * prefix, with and without the method), whatever its size. What the run's rules share besides
 * stays a guard beside the lookup. The run's rules may
 * decide differently: those that decide alike form a group, the lookup answers the group of
 * the first matching entry, and the run becomes one rule per group (the groups exclude each
 * other, so their order does not matter). A 10,000-line route table to eight upstreams is
 * eight rules. The cost model: a run of TABLE_MIN_RULES or more becomes a table (below that
 * the compares are cheaper than the lookups); at most L7_TABLE_MAX_GROUPS groups a table. */
#include "passes.h"

#include <assert.h>
#include <string.h>

#include "arena.h"
#include "conj.h"
#include "diag.h"
#include "l7/abi.h"

#define TABLE_MIN_RULES 32

static bool same_actions(const struct ir_rule *a, const struct ir_rule *b)
{
	if (a->term != b->term || a->upstream != b->upstream || a->status != b->status || a->grpc != b->grpc || a->nactions != b->nactions ||
	    (a->reason != b->reason && (!a->reason || !b->reason || strcmp(a->reason, b->reason))))
		return false;
	for (int i = 0; i < a->nactions; i++) {
		const struct ir_action *x = &a->actions[i], *y = &b->actions[i];
		if (x->kind != y->kind || x->mutation != y->mutation || x->op != y->op || x->response != y->response ||
		    x->header != y->header || x->counter != y->counter || x->bucket != y->bucket ||
		    x->timer != y->timer || x->key_field != y->key_field || x->key_header != y->key_header ||
		    x->key_source != y->key_source)
			return false;
	}
	return true;
}

/* A compare a table can hold: with a field of the head (not a claim) and a constant the
 * lookup key holds whole (any bytes: the manifest carries them as they are). Lower ranks are
 * preferred when a rule has several: runs form on the path first. */
static int table_rank(const struct ir_cond *c)
{
	static const int rank[] = { [IR_F_PATH] = 1, [IR_F_HOST] = 2, [IR_F_HEADER] = 3, [IR_F_QUERY] = 4 };
	if ((c->kind != IR_C_STR_EQ && c->kind != IR_C_STR_PREFIX) || c->len > L7_TABLE_PATH ||
	    (c->field != IR_F_PATH && c->field != IR_F_HOST && c->field != IR_F_HEADER && c->field != IR_F_QUERY))
		return 0;
	return c->kind == IR_C_STR_EQ || c->len > 0 ? rank[c->field] : 0;
}

/* Two compares on the same field (the same header). */
static bool same_field(const struct ir_cond *a, const struct ir_cond *b)
{
	return a->field == b->field && (a->field != IR_F_HEADER || a->header == b->header);
}

/* Splits a rule's conjunction into its table entry (method, value of the field `on` compares)
 * and the rest; *key is the compare the entry came from. */
static bool split_entry(const struct ir_rule *r, const struct ir_cond *on, struct ir_table_entry *e,
			const struct ir_cond **key, struct conj *rest)
{
	struct conj s = { .n = 0 };
	conj_flatten(r->cond, &s);
	if (s.overflow)
		return false;
	rest->n = 0;
	rest->overflow = false;
	const struct ir_cond *k = NULL, *method = NULL;
	for (int i = 0; i < s.n; i++)
		if (table_rank(s.t[i]) && same_field(s.t[i], on) && (!k || table_rank(s.t[i]) < table_rank(k)))
			k = s.t[i];
	for (int i = 0; i < s.n; i++) {
		if (s.t[i] == k)
			continue;
		if (!method && s.t[i]->kind == IR_C_METHOD_IS)
			method = s.t[i];
		else
			rest->t[rest->n++] = s.t[i];
	}
	if (!k)
		return false;
	*e = (struct ir_table_entry){ .method = method ? method->method : 0, .prefix = k->kind == IR_C_STR_PREFIX,
				       .value = k->str, .len = k->len, .line = r->line };
	*key = k;
	return true;
}

static bool same_terms(const struct conj *a, const struct conj *b)
{
	if (a->n != b->n)
		return false;
	for (int i = 0; i < a->n; i++) {
		bool found = false;
		for (int j = 0; j < b->n && !found; j++)
			found = conj_eq(a->t[i], b->t[j]);
		if (!found)
			return false;
	}
	return true;
}

/* The rules [k, end) of pol (one guard, `guard`) as table p->ntables: entries an earlier entry
 * shadows go with a warning (so the longest match in a lookup is the first), the rules of each
 * group but its first go, and the group's first tests the table. */
static void make_table(struct ir_program *p, struct ir_policy *pol, int k, int end, const struct ir_cond *field,
		       struct conj *guard, struct l7_diags *d)
{
	struct ir_table *tabs = l7_alloc(&p->arena, sizeof(*tabs) * (size_t)(p->ntables + 1));
	if (p->ntables)
		memcpy(tabs, p->tables, sizeof(*tabs) * (size_t)p->ntables);
	struct ir_table *t = &tabs[p->ntables];
	t->entries = l7_alloc(&p->arena, sizeof(*t->entries) * (size_t)(end - k));
	t->field = field->field;
	t->header = field->header;
	int *leader = l7_alloc(&p->arena, sizeof(int) * (size_t)(end - k));   /* group -> its first rule */
	struct conj rest;
	for (int j = k; j < end; j++) {
		struct ir_table_entry e;
		const struct ir_cond *key;
		split_entry(&pol->rules[j], field, &e, &key, &rest);
		const struct ir_table_entry *by = NULL;
		for (int i = 0; i < t->n && !by; i++)
			if (t->entries[i].prefix || !e.prefix)
				by = ir_table_entry_covers(&t->entries[i], &e) ? &t->entries[i] : NULL;
		if (by) {
			conj_warn_shadowed(p, d, e.line, by->line);
			continue;
		}
		e.group = 0;
		for (int g = 0; g < t->ngroups && !e.group; g++)
			if (same_actions(&pol->rules[leader[g]], &pol->rules[j]))
				e.group = g + 1;
		if (!e.group) {
			leader[t->ngroups] = j;
			e.group = ++t->ngroups;
		}
		if (e.prefix)
			*(e.method ? &t->prefix_method : &t->prefix_any) = true;
		else
			*(e.method ? &t->exact_method : &t->exact_any) = true;
		t->entries[t->n++] = e;
	}
	p->tables = tabs;
	/* the group rules: the table test first (codegen looks it up once, at the first of them) */
	struct ir_rule *rules = l7_alloc(&p->arena, sizeof(*rules) * (size_t)t->ngroups);
	for (int g = 0; g < t->ngroups; g++) {
		struct ir_rule *r = &rules[g];
		*r = pol->rules[leader[g]];
		struct conj s = { .n = 0 };
		struct ir_cond *tc = l7_alloc(&p->arena, sizeof(*tc));
		*tc = (struct ir_cond){ .kind = IR_C_TABLE, .table = p->ntables, .group = g + 1, .line = r->line, .col = r->col };
		s.t[s.n++] = tc;
		for (int i = 0; i < guard->n; i++)
			s.t[s.n++] = guard->t[i];
		r->cond = conj_rebuild(p, &s, r->line);
	}
	/* run_end and groups_in chose the run: every group is one byte of the lookup's answer */
	assert(t->n >= 1 && t->ngroups >= 1 && t->ngroups <= L7_TABLE_MAX_GROUPS && t->ngroups <= end - k);
	p->ntables++;
	int removed = (end - k) - t->ngroups;
	memcpy(&pol->rules[k], rules, sizeof(*rules) * (size_t)t->ngroups);
	memmove(&pol->rules[k + t->ngroups], &pol->rules[end], sizeof(pol->rules[0]) * (size_t)(pol->nrules - end));
	pol->nrules -= removed;
}

/* How many distinct ways the rules [k, end) decide (stops counting past max). */
static int groups_in(const struct ir_policy *pol, int k, int end, int max)
{
	int leader[L7_TABLE_MAX_GROUPS + 1], n = 0;
	for (int j = k; j < end && n <= max; j++) {
		bool seen = false;
		for (int g = 0; g < n && !seen; g++)
			seen = same_actions(&pol->rules[leader[g]], &pol->rules[j]);
		if (!seen && n <= max)
			leader[n++] = j;
	}
	return n;
}

/* The end of the run of rules from k keyed on the field `on` compares (guard: rule k's rest). */
static int run_end(const struct ir_policy *pol, int k, const struct ir_cond *on, struct conj *guard)
{
	struct ir_table_entry e;
	const struct ir_cond *key;
	struct conj rest;
	if (!split_entry(&pol->rules[k], on, &e, &key, guard) || guard->n >= MAX_TERMS)
		return k;
	int end = k + 1;
	while (end < pol->nrules && split_entry(&pol->rules[end], on, &e, &key, &rest) && same_terms(guard, &rest))
		end++;
	return end;
}

void ir_pass_tables(struct ir_program *p, struct l7_diags *d)
{
	for (int i = 0; i < p->npolicies; i++) {
		struct ir_policy *pol = &p->policies[i];
		for (int k = 0; k < pol->nrules; k++) {
			/* key the run on whichever of rule k's compares gives the longest one (a path
			 * prefix every rule shares is guard; the header value that varies is the key) */
			struct conj s = { .n = 0 }, guard;
			conj_flatten(pol->rules[k].cond, &s);
			const struct ir_cond *field = NULL;
			int end = k;
			for (int t = 0; t < s.n && !s.overflow; t++) {
				if (!table_rank(s.t[t]))
					continue;
				int e = run_end(pol, k, s.t[t], &guard);
				if (e > end)
					end = e, field = s.t[t];
			}
			if (end - k < TABLE_MIN_RULES)
				continue;
			while (groups_in(pol, k, end, L7_TABLE_MAX_GROUPS) > L7_TABLE_MAX_GROUPS)
				end -= (end - k) / 8 + 1;   /* too many ways to decide: a shorter run */
			if (end - k < TABLE_MIN_RULES)
				continue;
			run_end(pol, k, field, &guard);   /* the guard of the chosen key */
			make_table(p, pol, k, end, field, &guard, d);
		}
	}
}
