/* Partial evaluation over what the policy fixes at compile time. Each pass rewrites the rules
 * of every policy and keeps first-match semantics (the evaluator decides identically before
 * and after: tests/compiler property test). The pass order is the table at the bottom. */
#include "ir.h"

#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "diag.h"
#include "l7/abi.h"

#define MAX_TERMS 256

/* ---- conditions as conjunct lists ---- */

static bool cond_eq(const struct ir_cond *a, const struct ir_cond *b)
{
	if (a == b)
		return true;
	if (a->kind != b->kind)
		return false;
	switch (a->kind) {
	case IR_C_TRUE:
	case IR_C_FALSE: return true;
	case IR_C_NOT: return cond_eq(a->a, b->a);
	case IR_C_AND:
	case IR_C_OR: return cond_eq(a->a, b->a) && cond_eq(a->b, b->b);
	case IR_C_STR_EQ:
	case IR_C_STR_PREFIX:
		return a->field == b->field && (a->field < IR_F_HEADER || a->header == b->header) && a->len == b->len &&
		       !memcmp(a->str, b->str, a->len);
	case IR_C_METHOD_IS: return a->method == b->method;
	case IR_C_SERVICE_IN: return a->mask == b->mask;
	case IR_C_HAS_HEADER: return a->header == b->header;
	case IR_C_SOURCE_IN: return a->net == b->net && a->netmask == b->netmask;
	case IR_C_PORT_IN: return a->lo == b->lo && a->hi == b->hi;
	case IR_C_JWT_VALID: return a->jwt == b->jwt;
	case IR_C_IDENTITY: return a->ident == b->ident;
	case IR_C_TABLE: return a->table == b->table && a->group == b->group;
	case IR_C_SOURCE_SET: return a->set == b->set;
	case IR_C_COUNTER_IN: return a->state == b->state && a->lo == b->lo && a->hi == b->hi;
	case IR_C_TIMER_ELAPSED: return a->state == b->state && a->lo == b->lo;
	case IR_C_REGEX: return a->field == b->field && (a->field < IR_F_HEADER || a->header == b->header) && a->re == b->re;
	}
	return false;
}

/* What a regex says about a field compared with a constant: its DFA runs on the constant at
 * compile time. */
static bool regex_accepts(const struct ir_cond *re, const struct ir_cond *eq)
{
	return re_match(&re->re->dfa, (const unsigned char *)eq->str, eq->len);
}

static bool regex_dead_after(const struct ir_cond *re, const struct ir_cond *prefix)
{
	const struct re_dfa *d = &re->re->dfa;
	return re_run(d, d->start, (const unsigned char *)prefix->str, prefix->len) == 0;
}

/* Every value the regex accepts starts with the prefix: on the way through the prefix no
 * state accepts, and every byte but the prefix's next one leads to the dead state. */
static bool regex_implies_prefix(const struct ir_cond *re, const struct ir_cond *prefix)
{
	const struct re_dfa *d = &re->re->dfa;
	int s = d->start;
	for (size_t i = 0; i < prefix->len; i++) {
		if (d->accept[s])
			return false;
		unsigned char want = (unsigned char)prefix->str[i];
		for (int b = 0; b < 256; b++)
			if (d->cls[b] != d->cls[want] && d->next[(size_t)s * (size_t)d->nclasses + d->cls[b]])
				return false;
		for (int b = 0; b < 256; b++)   /* and the prefix's byte must be alone in its class */
			if (b != want && d->cls[b] == d->cls[want])
				return false;
		s = d->next[(size_t)s * (size_t)d->nclasses + d->cls[want]];
	}
	return true;
}

struct terms {
	const struct ir_cond *t[MAX_TERMS];
	int n;
	bool overflow;
};

static void flatten(const struct ir_cond *c, struct terms *out)
{
	if (c->kind == IR_C_AND) {
		flatten(c->a, out);
		flatten(c->b, out);
		return;
	}
	if (c->kind == IR_C_TRUE)
		return;
	for (int i = 0; i < out->n; i++)
		if (cond_eq(out->t[i], c))
			return;   /* x && x */
	if (out->n == MAX_TERMS) {
		out->overflow = true;
		return;
	}
	out->t[out->n++] = c;
}

static struct ir_cond *rebuild(struct ir_program *p, const struct terms *s, unsigned line)
{
	struct ir_cond *acc = NULL;
	for (int i = s->n - 1; i >= 0; i--) {
		if (!acc) {
			acc = (struct ir_cond *)s->t[i];
			continue;
		}
		struct ir_cond *c = l7_alloc(&p->arena, sizeof(*c));
		c->kind = IR_C_AND;
		c->a = (struct ir_cond *)s->t[i];
		c->b = acc;
		c->line = s->t[i]->line;
		acc = c;
	}
	if (!acc) {
		acc = l7_alloc(&p->arena, sizeof(*acc));
		acc->kind = IR_C_TRUE;
		acc->line = line;
	}
	return acc;
}

/* Two facts about one field that cannot both hold. */
static bool contradict(const struct ir_cond *a, const struct ir_cond *b)
{
	bool same_field = a->field == b->field && (a->field < IR_F_HEADER || a->header == b->header);
	if (a->kind == IR_C_METHOD_IS && b->kind == IR_C_METHOD_IS)
		return a->method != b->method;
	if (a->kind == IR_C_IDENTITY && b->kind == IR_C_IDENTITY)
		return false;   /* identities may overlap */
	if (a->kind == IR_C_PORT_IN && b->kind == IR_C_PORT_IN)
		return a->hi < b->lo || b->hi < a->lo;
	if (a->kind == IR_C_SOURCE_IN && b->kind == IR_C_SOURCE_IN)
		return ((a->net ^ b->net) & a->netmask & b->netmask) != 0;
	if (a->kind == IR_C_NOT && cond_eq(a->a, b))
		return true;
	if (b->kind == IR_C_NOT && cond_eq(b->a, a))
		return true;
	if (!same_field)
		return false;
	if (a->kind == IR_C_STR_EQ && b->kind == IR_C_STR_EQ)
		return a->len != b->len || memcmp(a->str, b->str, a->len);
	if (a->kind == IR_C_STR_EQ && b->kind == IR_C_STR_PREFIX)
		return a->len < b->len || memcmp(a->str, b->str, b->len);
	if (a->kind == IR_C_STR_PREFIX && b->kind == IR_C_STR_EQ)
		return contradict(b, a);
	if (a->kind == IR_C_STR_PREFIX && b->kind == IR_C_STR_PREFIX) {
		size_t n = a->len < b->len ? a->len : b->len;
		return memcmp(a->str, b->str, n) != 0;
	}
	if (a->kind == IR_C_REGEX && b->kind == IR_C_STR_EQ)
		return !regex_accepts(a, b);
	if (a->kind == IR_C_REGEX && b->kind == IR_C_STR_PREFIX)
		return regex_dead_after(a, b);
	if (b->kind == IR_C_REGEX && (a->kind == IR_C_STR_EQ || a->kind == IR_C_STR_PREFIX))
		return contradict(b, a);
	return false;
}

/* A conjunction that can never hold. */
static bool never_holds(const struct ir_cond *c)
{
	struct terms s = { .n = 0 };
	flatten(c, &s);
	if (s.overflow)
		return false;
	for (int a = 0; a < s.n; a++) {
		if (s.t[a]->kind == IR_C_FALSE)
			return true;
		for (int b = a + 1; b < s.n; b++)
			if (contradict(s.t[a], s.t[b]))
				return true;
	}
	return false;
}

/* a implies b (so b is redundant next to a) */
static bool implies(const struct ir_cond *a, const struct ir_cond *b)
{
	if (cond_eq(a, b))
		return true;
	if (a->kind == IR_C_PORT_IN && b->kind == IR_C_PORT_IN)
		return a->lo >= b->lo && a->hi <= b->hi;
	if (a->kind == IR_C_SOURCE_IN && b->kind == IR_C_SOURCE_IN)   /* a narrower prefix inside b */
		return (a->netmask & b->netmask) == b->netmask && (a->net & b->netmask) == b->net;
	bool same_field = a->field == b->field && (a->field < IR_F_HEADER || a->header == b->header);
	if (same_field && a->kind == IR_C_STR_EQ && b->kind == IR_C_REGEX)
		return regex_accepts(b, a);
	if (same_field && a->kind == IR_C_REGEX && b->kind == IR_C_STR_PREFIX)
		return regex_implies_prefix(a, b);
	if (!same_field || b->kind != IR_C_STR_PREFIX)
		return false;
	if (a->kind != IR_C_STR_EQ && a->kind != IR_C_STR_PREFIX)
		return false;
	return a->len >= b->len && !memcmp(a->str, b->str, b->len);
}

static void remove_rule(struct ir_policy *pol, int k)
{
	memmove(&pol->rules[k], &pol->rules[k + 1], sizeof(pol->rules[0]) * (size_t)(pol->nrules - k - 1));
	pol->nrules--;
}

/* ---- pass: simplify ----
 * Per rule: flatten the conjunction, drop duplicates and implied facts (a path equal to "/a/b"
 * needs no "starts with /a" beside it), and remove rules whose facts contradict (path equal to
 * two different strings): those never match. */
static void pass_simplify(struct ir_program *p, struct l7_diags *d)
{
	for (int i = 0; i < p->npolicies; i++) {
		struct ir_policy *pol = &p->policies[i];
		for (int k = 0; k < pol->nrules; k++) {
			struct ir_rule *r = &pol->rules[k];
			struct terms s = { .n = 0 };
			flatten(r->cond, &s);
			if (s.overflow)
				continue;
			if (never_holds(r->cond)) {
				if (d)
					l7_diag(d, L7_WARNING, l7_loc_of_line(p->src, r->line),
						"this rule can never match (its conditions contradict each other); removed");
				remove_rule(pol, k--);
				continue;
			}
			struct terms kept = { .n = 0 };
			for (int a = 0; a < s.n; a++) {
				/* !(x && y) where x && y never holds is always true */
				bool redundant = s.t[a]->kind == IR_C_NOT && never_holds(s.t[a]->a);
				for (int b = 0; b < s.n && !redundant; b++)
					redundant = b != a && implies(s.t[b], s.t[a]) && (!cond_eq(s.t[a], s.t[b]) || b < a);
				if (!redundant)
					kept.t[kept.n++] = s.t[a];
			}
			r->cond = rebuild(p, &kept, r->line);
		}
	}
}

/* ---- pass: first-match ----
 * Rules are tried in order and the first match wins, so a rule need not re-check that earlier
 * rules failed: a conjunct !X of rule k goes when some earlier rule j matches every request of
 * X && (the rest of k) — then those requests never reach k. This removes the negated prefixes
 * that if/else chains leave behind. */
static void pass_first_match(struct ir_program *p, struct l7_diags *d)
{
	(void)d;
	for (int i = 0; i < p->npolicies; i++) {
		struct ir_policy *pol = &p->policies[i];
		for (int k = 1; k < pol->nrules; k++) {
			struct ir_rule *r = &pol->rules[k];
			struct terms s = { .n = 0 };
			flatten(r->cond, &s);
			if (s.overflow)
				continue;
			for (int t = 0; t < s.n; t++) {
				if (s.t[t]->kind != IR_C_NOT)
					continue;
				/* the requests !X excludes: X plus every other conjunct of k */
				struct terms region = { .n = 0 };
				for (int o = 0; o < s.n; o++)
					if (o != t)
						flatten(s.t[o], &region);
				flatten(s.t[t]->a, &region);
				bool captured = false;
				for (int j = 0; j < k && !captured && !region.overflow; j++) {
					struct terms cj = { .n = 0 };
					flatten(pol->rules[j].cond, &cj);
					captured = !cj.overflow;
					for (int c = 0; c < cj.n && captured; c++) {
						bool covered = false;
						for (int q = 0; q < region.n && !covered; q++)
							covered = implies(region.t[q], cj.t[c]);
						captured = covered;
					}
				}
				if (captured) {
					memmove(&s.t[t], &s.t[t + 1], sizeof(s.t[0]) * (size_t)(s.n - t - 1));
					s.n--;
					t--;
				}
			}
			r->cond = rebuild(p, &s, r->line);
		}
	}
}

/* ---- pass: shadow ----
 * A rule every request of which an earlier rule already takes never decides anything: remove
 * it and say which line shadows it. */
static void pass_shadow(struct ir_program *p, struct l7_diags *d)
{
	for (int i = 0; i < p->npolicies; i++) {
		struct ir_policy *pol = &p->policies[i];
		for (int k = 1; k < pol->nrules; k++) {
			struct terms s = { .n = 0 };
			flatten(pol->rules[k].cond, &s);
			for (int j = 0; j < k && !s.overflow; j++) {
				struct terms cj = { .n = 0 };
				flatten(pol->rules[j].cond, &cj);
				bool shadows = !cj.overflow;
				for (int c = 0; c < cj.n && shadows; c++) {
					bool covered = false;
					for (int q = 0; q < s.n && !covered; q++)
						covered = implies(s.t[q], cj.t[c]);
					shadows = covered;
				}
				if (!shadows)
					continue;
				if (d && pol->rules[k].line != pol->rules[j].line)
					l7_diag(d, L7_WARNING, l7_loc_of_line(p->src, pol->rules[k].line),
						"this rule is shadowed by the rule at line %u, which takes all its requests; removed",
						pol->rules[j].line);
				remove_rule(pol, k--);
				break;
			}
		}
	}
}

/* ---- pass: tables ----
 * A run of rules that differ only in method and one field's value (RBAC lists and route tables
 * on the path, tenants on a header, virtual hosts on Host) costs compares per rule, in
 * instructions and in verifier work; as a table it costs at most four map lookups (exact and
 * prefix, with and without the method), whatever its size. What the run's rules share besides
 * stays a guard beside the lookup. The run's rules may
 * decide differently: those that decide alike form a group, the lookup answers the group of
 * the first matching entry, and the run becomes one rule per group (the groups exclude each
 * other, so their order does not matter). A 10,000-line route table to eight upstreams is
 * eight rules. The cost model: a run of TABLE_MIN_RULES or more becomes a table (below that
 * the compares are cheaper than the lookups); at most L7_TABLE_MAX_GROUPS groups a table. */
#define TABLE_MIN_RULES 32

static bool same_actions(const struct ir_rule *a, const struct ir_rule *b)
{
	if (a->term != b->term || a->upstream != b->upstream || a->status != b->status || a->nactions != b->nactions ||
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
			const struct ir_cond **key, struct terms *rest)
{
	struct terms s = { .n = 0 };
	flatten(r->cond, &s);
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

static bool same_terms(const struct terms *a, const struct terms *b)
{
	if (a->n != b->n)
		return false;
	for (int i = 0; i < a->n; i++) {
		bool found = false;
		for (int j = 0; j < b->n && !found; j++)
			found = cond_eq(a->t[i], b->t[j]);
		if (!found)
			return false;
	}
	return true;
}

/* Every request entry b matches, entry a matches too. */
static bool entry_covers(const struct ir_table_entry *a, const struct ir_table_entry *b)
{
	if (a->method && a->method != b->method)
		return false;
	if (a->prefix)
		return b->len >= a->len && !memcmp(a->value, b->value, a->len);
	return !b->prefix && a->len == b->len && !memcmp(a->value, b->value, a->len);
}

/* The rules [k, end) of pol (one guard, `guard`) as table p->ntables: entries an earlier entry
 * shadows go with a warning (so the longest match in a lookup is the first), the rules of each
 * group but its first go, and the group's first tests the table. */
static void make_table(struct ir_program *p, struct ir_policy *pol, int k, int end, const struct ir_cond *field,
		       struct terms *guard, struct l7_diags *d)
{
	struct ir_table *tabs = l7_alloc(&p->arena, sizeof(*tabs) * (size_t)(p->ntables + 1));
	if (p->ntables)
		memcpy(tabs, p->tables, sizeof(*tabs) * (size_t)p->ntables);
	struct ir_table *t = &tabs[p->ntables];
	t->entries = l7_alloc(&p->arena, sizeof(*t->entries) * (size_t)(end - k));
	t->field = field->field;
	t->header = field->header;
	int *leader = l7_alloc(&p->arena, sizeof(int) * (size_t)(end - k));   /* group -> its first rule */
	struct terms rest;
	for (int j = k; j < end; j++) {
		struct ir_table_entry e;
		const struct ir_cond *key;
		split_entry(&pol->rules[j], field, &e, &key, &rest);
		const struct ir_table_entry *by = NULL;
		for (int i = 0; i < t->n && !by; i++)
			if (t->entries[i].prefix || !e.prefix)
				by = entry_covers(&t->entries[i], &e) ? &t->entries[i] : NULL;
		if (by) {
			if (d && e.line != by->line)
				l7_diag(d, L7_WARNING, l7_loc_of_line(p->src, e.line),
					"this rule is shadowed by the rule at line %u, which takes all its requests; removed",
					by->line);
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
		struct terms s = { .n = 0 };
		struct ir_cond *tc = l7_alloc(&p->arena, sizeof(*tc));
		*tc = (struct ir_cond){ .kind = IR_C_TABLE, .table = p->ntables, .group = g + 1, .line = r->line };
		s.t[s.n++] = tc;
		for (int i = 0; i < guard->n; i++)
			s.t[s.n++] = guard->t[i];
		r->cond = rebuild(p, &s, r->line);
	}
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
static int run_end(const struct ir_policy *pol, int k, const struct ir_cond *on, struct terms *guard)
{
	struct ir_table_entry e;
	const struct ir_cond *key;
	struct terms rest;
	if (!split_entry(&pol->rules[k], on, &e, &key, guard) || guard->n >= MAX_TERMS)
		return k;
	int end = k + 1;
	while (end < pol->nrules && split_entry(&pol->rules[end], on, &e, &key, &rest) && same_terms(guard, &rest))
		end++;
	return end;
}

static void pass_tables(struct ir_program *p, struct l7_diags *d)
{
	for (int i = 0; i < p->npolicies; i++) {
		struct ir_policy *pol = &p->policies[i];
		for (int k = 0; k < pol->nrules; k++) {
			/* key the run on whichever of rule k's compares gives the longest one (a path
			 * prefix every rule shares is guard; the header value that varies is the key) */
			struct terms s = { .n = 0 }, guard;
			flatten(pol->rules[k].cond, &s);
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

/* ---- pass: sets ----
 * `request.source in [...]` is an OR of prefix compares: three instructions each on every path
 * through the list, and verifier work per prefix. A list of SET_MIN_PREFIXES or more becomes
 * one lookup in the l7_cidrs LPM trie (a helper call and ~20 instructions whatever its size),
 * which l7run fills from the manifest before traffic. Below that the compares are cheaper. */
#define SET_MIN_PREFIXES 8

/* Prefix compares under an OR tree of only such compares (FALSE leaves allowed), or -1. */
static int source_leaves(const struct ir_cond *c)
{
	if (c->kind == IR_C_SOURCE_IN)
		return 1;
	if (c->kind == IR_C_FALSE)
		return 0;
	if (c->kind != IR_C_OR)
		return -1;
	int a = source_leaves(c->a), b = source_leaves(c->b);
	return a < 0 || b < 0 ? -1 : a + b;
}

static void collect_sources(const struct ir_cond *c, struct ir_cidr_set *s)
{
	if (c->kind == IR_C_SOURCE_IN) {
		s->nets[s->n] = c->net;
		s->netmasks[s->n++] = c->netmask;
	} else if (c->kind == IR_C_OR) {
		collect_sources(c->a, s);
		collect_sources(c->b, s);
	}
}

static struct ir_cond *to_sets(struct ir_program *p, struct ir_cond *c)
{
	int n = source_leaves(c);
	if (n >= SET_MIN_PREFIXES) {
		struct ir_cidr_set *sets = l7_alloc(&p->arena, sizeof(*sets) * (size_t)(p->ncidr_sets + 1));
		if (p->ncidr_sets)
			memcpy(sets, p->cidr_sets, sizeof(*sets) * (size_t)p->ncidr_sets);
		struct ir_cidr_set *s = &sets[p->ncidr_sets];
		s->n = 0;
		s->nets = l7_alloc(&p->arena, sizeof(unsigned) * (size_t)n);
		s->netmasks = l7_alloc(&p->arena, sizeof(unsigned) * (size_t)n);
		collect_sources(c, s);
		struct ir_cond *sc = l7_alloc(&p->arena, sizeof(*sc));
		sc->kind = IR_C_SOURCE_SET;
		sc->set = p->ncidr_sets;
		sc->line = c->line;
		p->cidr_sets = sets;
		p->ncidr_sets++;
		return sc;
	}
	if (n < 0 && (c->kind == IR_C_AND || c->kind == IR_C_OR || c->kind == IR_C_NOT)) {
		c->a = to_sets(p, c->a);
		if (c->kind != IR_C_NOT)
			c->b = to_sets(p, c->b);
	}
	return c;
}

static void pass_sets(struct ir_program *p, struct l7_diags *d)
{
	(void)d;
	for (int i = 0; i < p->npolicies; i++)
		for (int k = 0; k < p->policies[i].nrules; k++)
			p->policies[i].rules[k].cond = to_sets(p, p->policies[i].rules[k].cond);
}

/* The pass order. */
static const struct ir_pass {
	const char *name;
	void (*run)(struct ir_program *, struct l7_diags *);
} passes[] = {
	{ "simplify", pass_simplify },
	{ "tables", pass_tables },        /* early: the passes below compare rules pairwise */
	{ "sets", pass_sets },            /* after tables, which must see compares to split rules */
	{ "first-match", pass_first_match },
	{ "shadow", pass_shadow },
};

int ir_optimise(struct ir_program *p, const char *only, struct l7_diags *d, FILE *dump_each)
{
	if (only && !strcmp(only, "none"))
		return 0;
	for (size_t i = 0; i < sizeof(passes) / sizeof(passes[0]); i++) {
		if (only) {   /* a comma-separated list of pass names */
			const char *at = strstr(only, passes[i].name);
			size_t n = strlen(passes[i].name);
			if (!at || (at != only && at[-1] != ',') || (at[n] && at[n] != ','))
				continue;
		}
		passes[i].run(p, d);
		/* rules that remain are numbered 1..n again (ids index the hit counters) */
		p->nrules = 0;
		for (int k = 0; k < p->npolicies; k++)
			for (int r = 0; r < p->policies[k].nrules; r++)
				p->policies[k].rules[r].id = ++p->nrules;
		if (dump_each) {
			fprintf(dump_each, "; ---- after pass %s ----\n", passes[i].name);
			ir_dump(p, dump_each);
		}
	}
	return 0;
}

const struct ir_cond *ir_rule_table(const struct ir_rule *r)
{
	const struct ir_cond *c = r->cond && r->cond->kind == IR_C_AND ? r->cond->a : r->cond;
	return c && c->kind == IR_C_TABLE ? c : NULL;
}

const char *ir_pass_names(void) { return "simplify,tables,sets,first-match,shadow"; }
