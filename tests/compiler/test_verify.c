/* The IR verifier (ir/verify.c): every program the pipeline makes of the examples and the IR
 * goldens keeps the invariants after each pass, and each invariant broken on purpose (one
 * field of a real program at a time) is reported, naming what broke. */
#include <criterion/criterion.h>
#include <dirent.h>
#include "policy_files.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline.h"

static struct l7_unit unit;

static struct ir_program *load(const char *path)
{
	char *said = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&said, &len);
	struct l7_diags d = { .out = f };
	struct l7_pipeline po = { .quiet_passes = true, .verify_ir = true };
	enum l7_unit_status rc = l7_unit_load(&unit, path, &po, &d);
	fclose(f);
	cr_assert_eq(rc, L7_UNIT_OK, "%s:\n%s", path, said);
	free(said);
	return unit.ir;
}

/* ir_verify's report on p, which must break at least one invariant and say `want`. */
static void expect_broken(const struct ir_program *p, const char *want)
{
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);
	int n = ir_verify(p, "the test", f);
	fclose(f);
	cr_expect_gt(n, 0, "not reported: %s", want);
	cr_expect(strstr(out, want) != NULL, "want '%s' in:\n%s", want, out);
	cr_expect(strstr(out, "l7c: internal error: the IR after the test breaks an invariant: ") == out, "%s", out);
	free(out);
	l7_unit_free(&unit);
}

/* The first leaf of a kind in the rules, or NULL. */
static struct ir_cond *find(struct ir_cond *c, enum ir_cond_kind k)
{
	if (!c || c->kind == k)
		return c;
	struct ir_cond *a = find(c->a, k);
	return a ? a : find(c->b, k);
}

static struct ir_cond *leaf(struct ir_program *p, enum ir_cond_kind k, struct ir_rule **rule)
{
	for (int i = 0; i < p->npolicies; i++)
		for (int r = 0; r < p->policies[i].nrules; r++) {
			struct ir_cond *c = find(p->policies[i].rules[r].cond, k);
			if (c) {
				if (rule)
					*rule = &p->policies[i].rules[r];
				return c;
			}
		}
	cr_assert_fail("no condition of kind %s", ir_cond_kind_name(k));
	return NULL;
}

#define IR(name) IR_DIR "/" name ".l7"
#define EX(name) EXAMPLES_DIR "/" name ".l7"

Test(verify, every_program_keeps_the_invariants_after_each_pass)
{
	static char paths[128][512];
	int files = l7_policy_paths(IR_DIR, paths, 64);
	files += l7_policy_paths(EXAMPLES_DIR, paths + files, 64);
	for (int i = 0; i < files; i++) {
		load(paths[i]);   /* verified after lowering and after each pass */
		cr_expect_eq(ir_verify(unit.ir, "the test", stderr), 0, "%s", paths[i]);
		l7_unit_free(&unit);
	}
	cr_assert_gt(files, 20);
}

Test(verify, rule_ids_in_file_order)
{
	struct ir_program *p = load(IR("route"));
	p->policies[0].rules[1].id = 7;
	expect_broken(p, "its id should be 2");
}

Test(verify, header_index)
{
	struct ir_program *p = load(IR("route"));
	leaf(p, IR_C_STR_EQ, NULL)->field = IR_F_HEADER;
	leaf(p, IR_C_STR_EQ, NULL)->header = p->nheaders;
	char want[64];
	snprintf(want, sizeof(want), "STR_EQ: header %d of %d", p->nheaders, p->nheaders);
	expect_broken(p, want);
}

Test(verify, leaves_have_no_operands)
{
	struct ir_program *p = load(IR("route"));
	struct ir_cond *c = leaf(p, IR_C_STR_EQ, NULL);
	c->a = c;
	expect_broken(p, "STR_EQ has subconditions");
}

Test(verify, table_group)
{
	struct ir_program *p = load(IR("route_table"));
	struct ir_cond *t = leaf(p, IR_C_TABLE, NULL);
	t->group = p->tables[t->table].ngroups + 1;
	expect_broken(p, "TABLE: table 0 of 1, group");
}

Test(verify, table_test_first)
{
	struct ir_program *p = load(IR("tenant_table"));
	struct ir_rule *r;
	leaf(p, IR_C_TABLE, &r);
	cr_assert_eq(r->cond->kind, IR_C_AND, "the table's group rules have a guard");
	struct ir_cond *a = r->cond->a;
	r->cond->a = r->cond->b;
	r->cond->b = a;
	expect_broken(p, "TABLE is not the first test of its rule");
}

Test(verify, table_entries_not_covered)
{
	struct ir_program *p = load(IR("route_table"));
	struct ir_table *t = &p->tables[0];
	cr_assert_gt(t->n, 2);
	t->entries[2] = t->entries[0];
	expect_broken(p, "entry 2 (line");
}

Test(verify, table_group_rules_one_per_group)
{
	struct ir_program *p = load(IR("route_table"));
	p->tables[0].ngroups++;
	expect_broken(p, "group rules for");
}

Test(verify, prefix_sets_masked)
{
	struct ir_program *p = load(IR("sets"));
	cr_assert_gt(p->ncidr_sets, 0);
	p->cidr_sets[0].nets[0] |= ~p->cidr_sets[0].netmasks[0];
	expect_broken(p, "has bits outside its netmask");
}

Test(verify, source_prefix)
{
	struct ir_program *p = load(IR("features"));
	leaf(p, IR_C_SOURCE_IN, NULL)->netmask = 0x00ff00ffu;
	expect_broken(p, "SOURCE_IN: netmask 00ff00ff is not a prefix");
}

Test(verify, regex_of_the_program)
{
	struct ir_program *p = load(IR("regex"));
	p->regexes[1]->index = 0;
	expect_broken(p, "regex 1 says it is 0");
}

Test(verify, dfa_dead_state)
{
	struct ir_program *p = load(IR("regex"));
	p->regexes[0]->dfa.accept[0] = 1;
	expect_broken(p, "regex 0: its DFA is malformed");
}

Test(verify, mutation_line)
{
	struct ir_program *p = load(EX("header_edit"));
	for (int i = 0; i < p->npolicies; i++)
		for (int r = 0; r < p->policies[i].nrules; r++)
			for (int a = 0; a < p->policies[i].rules[r].nactions; a++)
				if (p->policies[i].rules[r].actions[a].kind == IR_A_MUTATE &&
				    p->policies[i].rules[r].actions[a].mutation >= 0) {
					p->policies[i].rules[r].actions[a].mutation = p->nmutations;
					expect_broken(p, "mutation line");
					return;
				}
	cr_assert_fail("no mutation adds a line");
}

Test(verify, route_upstream)
{
	struct ir_program *p = load(IR("route"));
	for (int r = 0; r < p->policies[0].nrules; r++)
		if (p->policies[0].rules[r].term == IR_FORWARD) {
			p->policies[0].rules[r].upstream = p->nupstreams;
			expect_broken(p, "Route to upstream");
			return;
		}
	cr_assert_fail("no Route");
}

Test(verify, upstream_slots)
{
	struct ir_program *p = load(EX("load_balance"));
	p->upstreams[1].slot++;
	expect_broken(p, "from slot");
}

Test(verify, ring_ascending)
{
	struct ir_program *p = load(EX("load_balance"));
	for (int u = 0; u < p->nupstreams; u++)
		if (p->upstreams[u].balance == IR_LB_HASH) {
			p->upstreams[u].ring[1] = p->upstreams[u].ring[0] - 1;
			expect_broken(p, "ring point 1 is below the one before");
			return;
		}
	cr_assert_fail("no hashed upstream");
}

Test(verify, counter_read)
{
	struct ir_program *p = load(EX("copper_window"));
	struct ir_cond *c = leaf(p, IR_C_COUNTER_IN, NULL);
	p->counters_read &= ~(1ull << c->state);
	expect_broken(p, "COUNTER_IN: counter 0 of");
}

Test(verify, header_names_lower_case)
{
	struct ir_program *p = load(IR("route"));
	p->headers[0][0] = 'X';
	expect_broken(p, "header name 0 'X");
}
