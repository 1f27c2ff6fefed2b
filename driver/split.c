/* Splitting programs that are too big for the verifier.
 *
 * Two programs hold the policy: the gateway client parser and the mesh SK_MSG program. Each
 * is a parse half (framing, the HTTP parser) and a decide+act half (l7_policy_decide, then
 * redirect/insert/answer). The plan is made in rounds, each a full compile read by the budget
 * model (budget.c, which reads the object):
 *
 *   0. rules whose code would not fit in one function (a CPU v3 jump reaches 32K
 *      instructions) take the compact loop form first (compares with constants past
 *      CODEGEN_UNROLL_COMPACT bytes call bpf_strncmp instead of unrolling); what still does not
 *      fit is cut into chunks by their sizes (codegen_rule_size) before anything is compiled:
 *      both hosts split, one decide program per chunk;
 *   1. a program estimated over the budget first gets the compact loop form, if that changes
 *      anything; then a host over the budget is split (split point A): its parse half ends with a
 *      tail call into decide program 0, which runs the whole policy and the action half;
 *   2. a decide program estimated over the budget has its chunk cut into pieces (split point
 *      B): a chain of decide programs, each running a chunk of the first-match rule list and
 *      tail-calling the next until one decides.
 *
 * Every round also reads each function's longest jump once the verifier will have patched it
 * (inlined helpers: budget.c's `jump_reach`): a jump past its 16-bit reach is refused by the
 * kernel ("cannot be patched due to 16-bit range"), so a host or a chunk found over it is cut
 * like one over the budget, whatever the budget.
 *
 * The kernel's hard limits (limits.def) are checked on the last round: a function past a
 * jump's reach, a call chain past 512 bytes of stack, a program past 1M instructions or a chain
 * past 33 tail calls is an error naming the program, and no object is written. What cannot be
 * split further but is still estimated over the budget (a parse half, one huge rule) is a
 * warning: only the verifier knows the processed count, and --explain --verify asks it. */
#include "split.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend.h"
#include "ir.h"
#include "limits.h"
#include "timers.h"

/* Estimated instructions of one chunk's code (codegen_rule_size, an upper estimate: measured
 * code is 0.5-0.9 of it). A CPU v3 jump reaches 32K instructions, and the decide program's own
 * code comes on top; a chunk this size verifies in far less than the kernel's 1M. */
#define CHUNK_SIZE 24000
/* Code with a jump past its reach is cut into pieces of about this (patched) size: well under
 * it, as the pieces' sizes are estimates and each piece's program has the machinery on top. */
#define CODE_TARGET (LIMIT_JUMP * 2 / 3)
#define MAX_ROUNDS 10

static int rules_of(const struct ir_program *p, const struct ir_rule **out)
{
	int n = 0;
	for (int i = 0; i < p->npolicies; i++)
		for (int k = 0; k < p->policies[i].nrules; k++) {
			if (out)
				out[n] = &p->policies[i].rules[k];
			n++;
		}
	return n;
}

static const struct budget_func *find(const struct budget *b, const char *name)
{
	for (int i = 0; i < b->nfuncs; i++)
		if (!strcmp(b->funcs[i].name, name))
			return &b->funcs[i];
	return NULL;
}

static const struct budget_func *find_k(const struct budget *b, const char *prefix, int k)
{
	char name[64];
	snprintf(name, sizeof(name), "%s%d", prefix, k);
	return find(b, name);
}

/* The functions holding chunk k's rules (its decide programs, where a chunk that checks a JWT
 * is inlined, and its own subprogram): the largest patched size of those whose longest jump is
 * past its reach, 0 if none is. */
static int chunk_code(const struct split_build *sb, int k)
{
	const char *fn[] = { SPLIT_CHAIN_GW, SPLIT_CHAIN_MESH, CODEGEN_CHUNK_PREFIX };
	int on[] = { sb->plan.gw, sb->plan.mesh, 1 }, code = 0;
	for (int i = 0; i < 3; i++) {
		const struct budget_func *f = on[i] ? find_k(&sb->b, fn[i], k) : NULL;
		if (f && f->jump_reach > LIMIT_JUMP && f->patched > code)
			code = f->patched;
	}
	return code;
}

/* What a decide program's rules may take of the budget once its machinery's share is counted
 * (calibrated): 90% of it less that share. Both the cut and the advice read it. */
static long rules_room(long budget, long mach)
{
	return budget * 9 / 10 - mach;   /* cutting the rules helps only while this is above 0 */
}

/* Pieces a run of rules is cut into: for its estimate over the budget (calibrated, each piece
 * keeps the machinery's share `mach`: the rules' share is cut to fit what it leaves of 90% of
 * the budget, and if the machinery alone takes that, cutting the rules cannot help and they are
 * not cut for the budget; uncalibrated, the structural estimate is cut to 70% of it), for its
 * code past a jump's reach. */
static int pieces_for(long est, long mach, bool calibrated, long budget, int code)
{
	int pieces = 1;
	long aim = calibrated ? rules_room(budget, mach) : budget * 7 / 10;
	bool over = est > budget && aim > 0;
	if (over)
		pieces = (int)((est - (calibrated ? mach : 0) + aim - 1) / aim);
	if (code > LIMIT_JUMP && (code + CODE_TARGET - 1) / CODE_TARGET > pieces)
		pieces = (code + CODE_TARGET - 1) / CODE_TARGET;
	return pieces > 1 ? pieces : over || code > LIMIT_JUMP ? 2 : 1;
}

/* Cuts rules [first, last) into `pieces` runs of about equal size; appends the starts of all
 * but the first to starts[]. */
static int cut(const int *size, int first, int last, int pieces, int *starts, int n)
{
	long sum = 0, acc = 0;
	for (int i = first; i < last; i++)
		sum += size[i];
	for (int i = first, piece = 1; i < last && piece < pieces; i++) {
		acc += size[i];
		if (acc * pieces >= sum * piece && i + 1 < last) {
			starts[n++] = i + 1;
			piece++;
		}
	}
	return n;
}

/* Each rule's estimated code size in a loop form; returns the sum. */
static long sizes(const struct ir_program *p, const struct ir_rule **rules, int total, int unroll, int *size)
{
	long sum = 0;
	for (int i = 0; i < total; i++)
		sum += size[i] = codegen_rule_size(p, rules[i], unroll);
	return sum;
}

static void set_chunks(struct codegen_split *plan, const int *starts, int n)
{
	plan->nchunks = n;
	for (int i = 0; i < n && i < CODEGEN_MAX_CHUNKS; i++)
		plan->chunk_first[i] = starts[i];
	if (n > 1)
		plan->gw = plan->mesh = 1;   /* the policy exists only in chunks */
}

static int too_many(const struct ir_program *p, int total, int n, const char *why)
{
	fprintf(stderr,
		"l7c: error: %s: %d rules need %d decide programs %s, but a tail-call chain holds at most %d "
		"(the kernel's limit); a run of 32+ rules that differ only in method and one field's value (the path, "
		"Host, one header) becomes a table, and source prefixes in one `in [...]` list a set, but rules that "
		"mix fields, regexes and claim tests stay code: fewer or shorter ones fit\n",
		p->source_path, total, n, why, CODEGEN_MAX_CHUNKS);
	return 1;
}

/* One round of the plan from the model of the last compile. Returns 1 if the plan changed,
 * 0 if not, -1 if the policy cannot fit. */
static int refine(const struct ir_program *p, const int *size, int total, long budget, bool compactable,
		  struct split_build *sb)
{
	struct codegen_split *plan = &sb->plan;
	const struct budget_func *gw = find(&sb->b, SPLIT_HOST_GW), *mesh = find(&sb->b, SPLIT_HOST_MESH);
	int changed = 0;
	if (compactable && plan->unroll_max > CODEGEN_UNROLL_COMPACT) {   /* before any split */
		bool over = false;
		for (int i = 0; i < sb->b.nfuncs; i++)
			over |= !sb->b.funcs[i].is_subprog &&
				(sb->b.funcs[i].estimate > budget || sb->b.funcs[i].jump_reach > LIMIT_JUMP) &&
				(!strcmp(sb->b.funcs[i].name, SPLIT_HOST_GW) || !strcmp(sb->b.funcs[i].name, SPLIT_HOST_MESH) ||
				 strstr(sb->b.funcs[i].name, "_decide_"));
		if (over) {
			plan->unroll_max = CODEGEN_UNROLL_COMPACT;
			return 1;
		}
	}
	int code = 0;   /* a host past a jump's reach holds the whole policy: cut it now */
	if (gw && !plan->gw && (gw->estimate > budget || gw->jump_reach > LIMIT_JUMP)) {
		plan->gw = changed = 1;
		code = gw->jump_reach > LIMIT_JUMP ? gw->patched : 0;
	}
	if (mesh && !plan->mesh && (mesh->estimate > budget || mesh->jump_reach > LIMIT_JUMP)) {
		plan->mesh = changed = 1;
		code = mesh->jump_reach > LIMIT_JUMP && mesh->patched > code ? mesh->patched : code;
	}
	if (changed && plan->nchunks <= 1) {
		int starts[4 * CODEGEN_MAX_CHUNKS], n = 1, pieces = pieces_for(0, 0, false, budget, code);
		starts[0] = 0;
		if (pieces > 1)
			n = cut(size, 0, total, pieces, starts, n);
		if (n > CODEGEN_MAX_CHUNKS) {
			too_many(p, total, n, "(each past a jump's reach)");
			return -1;
		}
		set_chunks(plan, starts, n);
	}
	if (changed)
		return 1;   /* the decide programs' numbers come with the next compile */

	int starts[4 * CODEGEN_MAX_CHUNKS], n = 0;
	for (int k = 0; k < plan->nchunks; k++) {
		int first = plan->chunk_first[k], last = k + 1 < plan->nchunks ? plan->chunk_first[k + 1] : total;
		/* each chain's decide program: its own machinery's share */
		int code = chunk_code(sb, k), pieces = 1;
		const char *chain[] = { SPLIT_CHAIN_GW, SPLIT_CHAIN_MESH };
		int on[] = { plan->gw, plan->mesh };
		for (int c = 0; c < 2; c++) {
			const struct budget_func *f = on[c] ? find_k(&sb->b, chain[c], k) : NULL;
			int np = f ? pieces_for(f->estimate, f->machinery_estimate, f->calib != CALIB_NONE, budget, code) : 1;
			pieces = np > pieces ? np : pieces;
		}
		starts[n++] = first;
		if (pieces > 1 && last - first > 1) {
			n = cut(size, first, last, pieces, starts, n);
			changed = 1;
		}
		if (n > 3 * CODEGEN_MAX_CHUNKS)
			break;
	}
	if (!changed)
		return 0;
	if (n > CODEGEN_MAX_CHUNKS) {
		char why[96];
		snprintf(why, sizeof(why), "of at most %ld estimated processed instructions each", budget);
		too_many(p, total, n, why);
		return -1;
	}
	set_chunks(plan, starts, n);
	return 1;
}

/* The kernel's hard limits (limits.def) on the object as built: each breach is an error naming
 * the program, and the object is not written. Returns the number of breaches. */
static int over_limits(const struct ir_program *p, const struct split_build *sb)
{
	int bad = 0;
	for (int i = 0; i < sb->b.nfuncs; i++) {
		const struct budget_func *f = &sb->b.funcs[i];
		bool policy = !strcmp(f->name, SPLIT_HOST_GW) || !strcmp(f->name, SPLIT_HOST_MESH) || strstr(f->name, "_decide_") ||
			      f->is_chunk;
		if (f->jump_reach > LIMIT_JUMP && ++bad)
			fprintf(stderr,
				"l7c: error: %s: %s is %d instructions, and its longest jump spans about %d once the verifier has "
				"patched it: past the %d a BPF jump reaches, so the kernel would refuse it (\"cannot be patched due "
				"to 16-bit range\")%s\n",
				p->source_path, f->name, f->insns, f->jump_reach, LIMIT_JUMP,
				policy ? "; its rules cannot be cut further: shorten the longest rule, or move its compares to a table" : "");
		if (f->is_subprog)
			continue;
		if (f->chain_stack > LIMIT_STACK && ++bad)
			fprintf(stderr, "l7c: error: %s: %s needs %d bytes of stack in its deepest call chain (the kernel allows %d)\n",
				p->source_path, f->name, f->chain_stack, LIMIT_STACK);
		if (f->chain_insns > LIMIT_INSNS && ++bad)
			fprintf(stderr, "l7c: error: %s: %s is %ld instructions with its subprograms (the kernel loads at most %d)\n",
				p->source_path, f->name, f->chain_insns, LIMIT_INSNS);
	}
	if (sb->plan.nchunks > LIMIT_TAILS && ++bad)
		fprintf(stderr, "l7c: error: %s: a chain of %d decide programs: past the %d tail calls the kernel makes\n",
			p->source_path, sb->plan.nchunks, LIMIT_TAILS);
	return bad;
}

void split_advice(const struct split_build *sb, const struct budget_func *f, long used, long budget, char *buf, size_t n)
{
	bool host = !strcmp(f->name, SPLIT_HOST_GW) || !strcmp(f->name, SPLIT_HOST_MESH);
	bool split = host && (sb->plan.gw || sb->plan.mesh), no_rules = !host && !strstr(f->name, "_decide_");
	long mach = f->machinery_estimate, rules = used - mach > 0 ? used - mach : 0;
	int len = snprintf(buf, n, "%s needs %ld processed instructions, over the budget of %ld%s: ", f->name, used, budget,
			   used > LIMIT_PROCESSED ? " and the kernel's limit" : "");
	if (len < 0 || (size_t)len >= n)
		return;
	if (rules_room(budget, mach) < 0 || no_rules)   /* as pieces_for cuts */
		snprintf(buf + len, n - (size_t)len,
			 "the machinery alone needs about %ld (%s, calibration: %s; the policy's own code is %d instructions%s), "
			 "so no split of the rules and no table brings it under: raise --budget to at least %ld",
			 mach, split ? "its parse half" : no_rules ? "a program without rules" : "its decide part",
			 calib_level_name(f->calib), f->policy_insns, f->policy_insns ? "" : ", none", mach * 10 / 9 + 1);
	else
		snprintf(buf + len, n - (size_t)len,
			 "its rules need about %ld of it and the machinery %ld; %s: move large rule sets to tables or sets",
			 rules, mach, split ? "its parse half cannot be split further" : "its rules cannot be split further");
}

static void note_over(struct split_build *sb, long budget)
{
	for (int i = 0; i < sb->b.nfuncs && sb->nwarnings < 4; i++) {
		const struct budget_func *f = &sb->b.funcs[i];
		if (f->is_subprog || f->estimate <= budget)
			continue;
		split_advice(sb, f, f->estimate, budget, sb->warnings[sb->nwarnings++], sizeof(sb->warnings[0]));
	}
}

/* The machinery functions no policy reaches, compiled when l7c was built (driver/CMakeLists.txt). */
extern const unsigned char l7_fixed_bundle[];
extern const size_t l7_fixed_bundle_size;

int split_build(const struct ir_program *p, int opt_level, long budget, enum split_mode mode, enum codegen_mode progs,
		int full, struct split_build *sb, struct l7_timers *timers)
{
	memset(sb, 0, sizeof(*sb));
	sb->plan.mode = progs;
	int total = rules_of(p, NULL);
	const struct ir_rule **rules = malloc(sizeof(*rules) * (size_t)(total + 1));
	int *size = malloc(sizeof(int) * (size_t)(total + 1));
	rules_of(p, rules);
	/* does the compact loop form change anything? (then it comes before any split) */
	bool compactable = false;
	for (int i = 0; i < total && !compactable; i++)
		compactable = codegen_rule_size(p, rules[i], CODEGEN_UNROLL_COMPACT) < codegen_rule_size(p, rules[i], CODEGEN_UNROLL_MAX);
	sb->plan.unroll_max = CODEGEN_UNROLL_MAX;
	long sum = sizes(p, rules, total, CODEGEN_UNROLL_MAX, size);
	if (sum > CHUNK_SIZE && compactable) {
		sb->plan.unroll_max = CODEGEN_UNROLL_COMPACT;
		sum = sizes(p, rules, total, CODEGEN_UNROLL_COMPACT, size);
	}
	int rc = 0;
	if (sum > CHUNK_SIZE) {   /* too big for one function whatever the budget */
		int starts[2 * CODEGEN_MAX_CHUNKS + 1], n = 1;
		starts[0] = 0;
		long acc = 0;
		for (int i = 0; i < total; i++) {
			if (acc && acc + size[i] > CHUNK_SIZE) {
				if (n == 2 * CODEGEN_MAX_CHUNKS + 1)
					break;
				starts[n++] = i;
				acc = 0;
			}
			acc += size[i];
		}
		if (n > CODEGEN_MAX_CHUNKS) {
			char why[96];
			snprintf(why, sizeof(why), "(about %ld instructions of rules, at most %d per program)", sum, CHUNK_SIZE);
			rc = too_many(p, total, n, why);
			goto out;
		}
		set_chunks(&sb->plan, starts, n);
	} else if (mode == SPLIT_PARSE || mode == SPLIT_RULES) {
		int starts[CODEGEN_MAX_CHUNKS], n = 1, per = total / CODEGEN_MAX_CHUNKS + 1;   /* rules a chunk */
		starts[0] = 0;
		while (mode == SPLIT_RULES && n < CODEGEN_MAX_CHUNKS && n * per < total) {
			starts[n] = n * per;
			n++;
		}
		set_chunks(&sb->plan, starts, n);
		sb->plan.gw = sb->plan.mesh = 1;
	}

	const char *base = strrchr(p->source_path, '/');
	base = base ? base + 1 : p->source_path;
	unsigned nlines = 3;
	for (const char *c = p->src ? p->src->text : ""; *c; c++)
		nlines += *c == '\n';
	for (int round = 0;; round++) {
		struct codegen_opts co = { .opt_level = opt_level, .output = CG_EMIT_OBJ, .out_buf = &sb->obj,
					   .out_len = &sb->obj_len, .split = &sb->plan, .timers = timers,
					   .fixed = full ? NULL : l7_fixed_bundle, .fixed_size = l7_fixed_bundle_size };
		if (timers)
			timers->rounds++;
		if (codegen_emit(p, &co)) {
			rc = 2;
			goto out;
		}
		struct l7_tick t = l7_tick();
		int bad = budget_analyse(&sb->b, sb->obj, sb->obj_len, base, nlines);
		l7_timers_add(timers, L7_T_BUDGET, t);
		if (bad) {
			fprintf(stderr, "l7c: internal error: the budget model cannot read the object\n");
			rc = 2;
			goto out;
		}
		int unroll = sb->plan.unroll_max;
		int r = round + 1 < MAX_ROUNDS && mode != SPLIT_NONE ? refine(p, size, total, budget, compactable, sb) : 0;
		if (r < 0) {
			rc = 1;
			goto out;
		}
		if (!r)
			break;
		if (sb->plan.unroll_max != unroll)
			sizes(p, rules, total, sb->plan.unroll_max, size);
		split_build_free(sb);
	}
	if (over_limits(p, sb)) {
		rc = 1;
		goto out;
	}
	note_over(sb, budget);
out:
	free(rules);
	free(size);
	return rc;
}

void split_build_free(struct split_build *sb)
{
	free(sb->obj);
	free(sb->b.line_insns);
	free(sb->b.line_func);
	sb->obj = NULL;
	sb->b.line_insns = sb->b.line_func = NULL;
}
