/* The verifier budget model.
 *
 * The kernel verifier walks every path of a program, pruning a path when it reaches a jump
 * target in a state equivalent to one seen there before. Statically we cannot know which states
 * are equivalent, so the model counts, per basic block, the acyclic paths that reach it and
 * assumes the verifier keeps at most STATES of them apart (the rest are pruned):
 *
 *   processed(f) = sum over blocks of len(block) * min(paths(block), STATES)
 *                + (bound - 1) * len(body) for each bounded loop
 *                + CALLBACK_PASSES * min(paths reaching the call, CALLBACK_STATES) * processed(cb)
 *                  for each bpf_loop callback cb
 *
 *                + min(paths reaching the call, CALLBACK_STATES) * processed(sub)
 *                  for each subprogram sub called directly (a split program's rule chunk)
 *                + processed(g) for each global function g it calls (verified once, on its own)
 *
 * A bounded loop's bound is the constant of its back edge's compare, else the largest constant
 * a branch leaving the loop compares with (capped at LOOP_CAP). Callbacks are verified at each
 * call site in each distinct state, more than once until the loop state converges; a called
 * subprogram once per distinct state at its call.
 * The instructions come from the object itself (bpfobj.c: jump targets, relocations naming
 * callbacks and subprograms, .BTF.ext lines). This structural model alone is off by a mean 44%
 * (below; worst 6.7x over, a JWT decide program; 3.5x under, the upstream parser, whose
 * chunk-size callback the verifier re-walks once per scanner state it enumerates): the
 * verifier's state enumeration is beyond it.
 *
 * So the estimate is calibrated (calib.h, scripts/calibrate.py): the verifier is deterministic
 * for a program and a kernel, and most of a program's count is the machinery's (the upstream
 * parser has 3 policy instructions and 53K processed; the client parser 4 of 88K once split).
 * A program the calibration measured (by its instructions) is its count; else its machinery
 * configuration's (the machinery source lines it holds) cost plus the policy's own walk (the
 * structural count of the instructions on .l7 lines) at a rate fitted per program; else the
 * same by the functions it reaches (the features); else the count of the configuration whose
 * structural estimate is the nearest, scaled by the ratio of the two estimates, but never
 * below the structural estimate (istio_jwt.yaml imported, its JWT checked in many rules: scaled
 * 150K, structural 425K, the kernel 735K; the splitter must not trust a guess under it). The
 * machinery's share (the estimate less the policy's walk at that rate) is what split.c cuts by
 * and names in its advice. Measured (6.18, 220 programs of the examples, two splits and
 * bench/scaling.py's policies): structural mean 44%, worst +573%; calibrated 0% on them; each
 * policy left out of the fit, mean 4.8% (worst +236%, a JWT parser no other policy resembles,
 * estimated at its structural count); per program in docs/architecture.md ("The budget model").
 * Overrides: L7C_BUDGET_STATES, L7C_BUDGET_CB, L7C_BUDGET_CBS (the structural constants),
 * L7C_CALIBRATION (a table, or none); L7C_BUDGET_DEBUG prints each function's walk and loops. */
#include "budget.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bpfobj/bpfobj.h"
#include "hash.h"

static long STATES = 2, CALLBACK_PASSES = 2, CALLBACK_STATES = 4;
/* The mesh SK_MSG program's own code is walked many more times than the path count says (the
 * verifier keeps states apart across its hold / redirect / answer branches): measured on this
 * kernel, route.l7 40x, rate_limit.l7 55x, a 100-rule feature mix at least 25x its walk (1M
 * processed, estimated 458K without this). A measured factor until the calibrated model of
 * issue #18 replaces it; the gateway parser's estimates are within 3% without one. */
#define MESH_WALKS 25
#define MESH_HOST "l7_mesh_msg_prog"
#define LOOP_CAP 8192
/* The maps of l7/maps.def by name, for what a lookup in each becomes once patched. */
static const struct { const char *name; int type; } map_types[] = {
#define L7_MAP(name, type, key, value, max) { #name, type },
#include "l7/maps.def"
#undef L7_MAP
};

/* Instructions the verifier adds where it patches a helper call (kernel/bpf/verifier.c
 * do_misc_fixups and the maps' map_gen_lookup; fitted on 6.18 to what `bpftool prog dump
 * xlated` shows of the examples' and of generated policies' programs): bpf_loop is inlined
 * (+18); a lookup in an array is inlined (+7), in a per-CPU array (+8); one in a hash map
 * becomes a direct call and a null test (+2), in an LRU hash also the reference bit (+5); the
 * other calls stay calls (+1 each, as margin). */
static int patch_growth(const struct bpf_insn *in, const char *r1_map)
{
	if (in->imm == BPF_FUNC_loop)
		return 18;
	if (in->imm == BPF_FUNC_tail_call)
		return 8;
	if (in->imm == BPF_FUNC_get_smp_processor_id || in->imm == BPF_FUNC_jiffies64)
		return 4;
	if (in->imm != BPF_FUNC_map_lookup_elem)
		return 1;
	for (size_t m = 0; r1_map && m < sizeof map_types / sizeof map_types[0]; m++)
		if (!strcmp(map_types[m].name, r1_map))
			switch (map_types[m].type) {
			case BPF_MAP_TYPE_ARRAY: return 7;
			case BPF_MAP_TYPE_PERCPU_ARRAY: return 8;
			case BPF_MAP_TYPE_HASH: return 2;
			case BPF_MAP_TYPE_LRU_HASH: return 5;
			default: return 1;
			}
	return 8;   /* a map not of maps.def: as an array */
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

struct insn {
	bool cond, jump, exit;
	bool policy;           /* on a line of the .l7 file */
	int slots;
	long imm;              /* the constant a conditional branch compares with, or -1 */
	int callee;            /* index into the function's callees when it names one, or -1 */
	int target;            /* the branch target (index into the function's insns), or -1 */
};

struct fn_code {
	struct insn *v;
	int n;
};

static int block_of(const int *start, int nb, int insn)
{
	int lo = 0, hi = nb - 1;
	while (lo < hi) {   /* the last block starting at or before insn */
		int mid = (lo + hi + 1) / 2;
		if (start[mid] <= insn)
			lo = mid;
		else
			hi = mid - 1;
	}
	return lo;
}

static long block_slots(const struct fn_code *c, int s, int e, bool policy_only)
{
	long n = 0;
	for (int i = s; i < e; i++)
		n += !policy_only || c->v[i].policy ? c->v[i].slots : 0;
	return n;
}

/* Paths per block over the acyclic part of the graph (loop back edges found by DFS), plus the
 * extra iterations of each natural loop. */
static long walk_estimate(const struct fn_code *c, double *site_paths, long *policy_walk)
{
	int n = c->n;
	*policy_walk = 0;
	if (n == 0)
		return 0;
	bool *leader = calloc((size_t)n + 1, 1);
	int *target = malloc(sizeof(int) * (size_t)n);
	leader[0] = true;
	for (int i = 0; i < n; i++) {
		target[i] = c->v[i].jump || c->v[i].cond ? c->v[i].target : -1;
		if ((c->v[i].jump || c->v[i].cond || c->v[i].exit) && i + 1 < n)
			leader[i + 1] = true;
		if (target[i] >= 0)
			leader[target[i]] = true;
	}
	int nb = 0;
	for (int i = 0; i < n; i++)
		nb += leader[i];
	int *start = malloc(sizeof(int) * (size_t)nb), *end = malloc(sizeof(int) * (size_t)nb);
	int *s0 = malloc(sizeof(int) * (size_t)nb), *s1 = malloc(sizeof(int) * (size_t)nb);
	for (int i = 0, b = 0; i < n; i++)
		if (leader[i])
			start[b++] = i;
	for (int b = 0; b < nb; b++) {
		end[b] = b + 1 < nb ? start[b + 1] : n;
		const struct insn *last = &c->v[end[b] - 1];
		int t = target[end[b] - 1];
		s0[b] = s1[b] = -1;
		if (!last->jump && !last->exit && end[b] < n)
			s0[b] = b + 1;
		if (t >= 0)
			s1[b] = block_of(start, nb, t);
	}

	/* DFS: postorder, and back edges (to a block still on the stack) */
	int *state = calloc((size_t)nb, sizeof(int));   /* 0 new, 1 on stack, 2 done */
	int *order = malloc(sizeof(int) * (size_t)nb), no = 0;
	int *stack = malloc(sizeof(int) * (size_t)nb * 2), sp = 0;
	bool *back0 = calloc((size_t)nb, 1), *back1 = calloc((size_t)nb, 1);
	int *next = calloc((size_t)nb, sizeof(int));
	stack[sp++] = 0;
	state[0] = 1;
	while (sp) {
		int b = stack[sp - 1];
		int k = next[b]++;
		if (k < 2) {
			int s = k == 0 ? s0[b] : s1[b];
			if (s < 0)
				continue;
			if (state[s] == 1) {
				(k == 0 ? back0 : back1)[b] = true;
			} else if (state[s] == 0) {
				state[s] = 1;
				stack[sp++] = s;
			}
			continue;
		}
		state[b] = 2;
		order[no++] = b;
		sp--;
	}

	/* paths in reverse postorder (a topological order of the acyclic graph) */
	double *paths = calloc((size_t)nb, sizeof(double));
	paths[0] = 1;
	long total = 0;
	for (int i = no - 1; i >= 0; i--) {
		int b = order[i];
		double p = paths[b];
		total += block_slots(c, start[b], end[b], false) * (long)(p < STATES ? p : STATES);
		*policy_walk += block_slots(c, start[b], end[b], true) * (long)(p < STATES ? p : STATES);
		for (int k = start[b]; k < end[b]; k++)   /* paths reaching each callback's loop */
			if (c->v[k].callee >= 0)
				site_paths[c->v[k].callee] += p;
		if (s0[b] >= 0 && !back0[b])
			paths[s0[b]] += p;
		if (s1[b] >= 0 && !back1[b])
			paths[s1[b]] += p;
	}

	/* loops: each back edge u -> h spans the natural loop of blocks that reach u without h */
	bool *in = calloc((size_t)nb, 1);
	int *work = malloc(sizeof(int) * (size_t)nb);
	for (int u = 0; u < nb; u++)
		for (int e = 0; e < 2; e++) {
			if (!(e == 0 ? back0 : back1)[u])
				continue;
			int h = e == 0 ? s0[u] : s1[u];
			memset(in, 0, (size_t)nb);
			in[h] = true;
			int wn = 0;
			if (!in[u]) {
				in[u] = true;
				work[wn++] = u;
			}
			while (wn) {   /* predecessors, backwards from u */
				int x = work[--wn];
				for (int y = 0; y < nb; y++)
					if (!in[y] && (s0[y] == x || s1[y] == x)) {
						in[y] = true;
						work[wn++] = y;
					}
			}
			const struct insn *edge = &c->v[end[u] - 1];
			long bound = edge->cond && edge->imm > 0 ? edge->imm : 1, body = 0, pbody = 0;
			for (int b = 0; b < nb; b++) {
				if (!in[b])
					continue;
				body += block_slots(c, start[b], end[b], false);
				pbody += block_slots(c, start[b], end[b], true);
				const struct insn *l = &c->v[end[b] - 1];
				bool exits = (s0[b] >= 0 && !in[s0[b]]) || (s1[b] >= 0 && !in[s1[b]]);
				if (!(edge->cond && edge->imm > 0) && l->cond && exits && l->imm > bound)
					bound = l->imm;
			}
			if (bound > LOOP_CAP)
				bound = LOOP_CAP;
			if (getenv("L7C_BUDGET_DEBUG"))
				fprintf(stderr, "budget:   loop at insn %d: bound %ld, body %ld\n", start[h], bound, body);
			total += (bound - 1) * body;
			*policy_walk += (bound - 1) * pbody;
		}
	free(in);
	free(work);
	free(paths);
	free(state);
	free(order);
	free(stack);
	free(back0);
	free(back1);
	free(next);
	free(start);
	free(end);
	free(s0);
	free(s1);
	free(leader);
	free(target);
	return total;
}

/* The instructions of f as the model sees them, with the per-function facts in bf. */
static void decode(struct budget *b, struct budget_func *bf, struct fn_code *cc, const struct bpfobj *o,
		   const struct bpfobj_fn *f, const char *l7_base)
{
	int *at = malloc(sizeof(int) * (size_t)(f->n + 1));   /* slot -> index */
	int *growth = calloc((size_t)f->n + 2, sizeof(int));  /* growth[s + 1]: added by patching slot s */
	const char *r1_map = NULL;
	uint64_t *mlines = malloc(sizeof(uint64_t) * (size_t)(f->n + 1));   /* the machinery's lines */
	int nm = 0;
	cc->v = calloc((size_t)f->n + 1, sizeof(*cc->v));
	for (int i = 0; i < f->n; i++) {
		const struct bpf_insn *in = &f->insns[i];
		struct insn *x = &cc->v[cc->n];
		at[i] = cc->n++;
		int cls = BPF_CLASS(in->code), op = BPF_OP(in->code);
		bool jmp = cls == BPF_JMP || cls == BPF_JMP32;
		x->slots = in->code == (BPF_LD | BPF_IMM | BPF_DW) ? 2 : 1;   /* 64-bit immediate: two slots */
		x->exit = jmp && op == BPF_EXIT;
		x->jump = jmp && op == BPF_JA;
		x->cond = jmp && op != BPF_JA && op != BPF_CALL && op != BPF_EXIT;
		x->imm = x->cond && BPF_SRC(in->code) == BPF_K ? in->imm : -1;
		x->target = x->jump || x->cond ? i + in->off + 1 : -1;   /* a slot, mapped below */
		x->callee = -1;
		bf->insns += x->slots;
		/* a callback named as an immediate: bpf_loop(n, callback, ...), maps too; or a
		 * subprogram called by name (helpers are called by number) */
		bool call = jmp && op == BPF_CALL && in->src_reg == BPF_PSEUDO_CALL;
		const char *sym = x->slots == 2 || call ? bpfobj_reloc(o, f, i) : NULL;
		if (x->slots == 2 && in->dst_reg == BPF_REG_1)
			r1_map = sym;   /* the map a lookup right after it is made in */
		if (jmp && op == BPF_CALL && in->src_reg == 0) {
			bf->helper_calls++;
			bf->tail_call |= in->imm == BPF_FUNC_tail_call;
			growth[i + 1] = patch_growth(in, r1_map);
		}
		if (sym) {
			int k = 0;
			while (k < bf->ncallees && strcmp(bf->callees[k], sym))
				k++;
			if (k == bf->ncallees && k < BUDGET_MAX_CALLEES)
				snprintf(bf->callees[bf->ncallees++], sizeof(bf->callees[0]), "%s", sym);
			if (k < BUDGET_MAX_CALLEES && call)
				bf->called[k] = true;
			x->callee = k < BUDGET_MAX_CALLEES ? k : -1;
		}
		/* stack: memory operands based on r10 */
		int base = cls == BPF_LDX ? in->src_reg : cls == BPF_ST || cls == BPF_STX ? in->dst_reg : -1;
		if (base == BPF_REG_10 && in->off < 0 && -in->off > bf->stack)
			bf->stack = -in->off;
		const char *file;
		unsigned line = bpfobj_line(o, f, i, &file);
		if (line > 0 && file && strcmp(file, l7_base))
			mlines[nm++] = l7_fnv1a(l7_fnv1a(L7_FNV_BASIS, file, strlen(file)), &line, sizeof(line));
		if (line > 0 && line < b->nlines && !strcmp(file, l7_base)) {
			x->policy = true;
			bf->policy_insns += x->slots;
			b->line_insns[line] += x->slots;
			if (b->line_func[line] < 0)
				b->line_func[line] = (int)(bf - b->funcs);
		}
		if (x->slots == 2)
			i++;
	}
	at[f->n] = cc->n;
	/* the machinery's signature: which of its source lines the function holds, whatever the
	 * policy made of their registers and how often an unrolled loop repeats them */
	qsort(mlines, (size_t)nm, sizeof(uint64_t), cmp_u64);
	/* the code's signature: its instructions less the immediates a relocation fills (a call's
	 * or a function's offset in .text, a datum's in .rodata), which depend on where the linker
	 * put things, not on the code: an object joined from prebuilt machinery functions
	 * (codegen/fixed.c) lays them out differently from the full pipeline's */
	struct bpf_insn *code = malloc(sizeof(*code) * (size_t)(f->n + 1));
	memcpy(code, f->insns, sizeof(*code) * (size_t)f->n);
	for (int i = 0; i < f->n; i++)
		if (bpfobj_relocated(o, f, i)) {
			code[i].imm = 0;
			if (code[i].code == (BPF_LD | BPF_IMM | BPF_DW) && i + 1 < f->n)
				code[i + 1].imm = 0;
		}
	bf->csig = l7_fnv1a(l7_fnv1a(L7_FNV_BASIS, bf->name, strlen(bf->name)), code, sizeof(code[0]) * (size_t)f->n);
	free(code);
	bf->msig = l7_fnv1a(L7_FNV_BASIS, bf->name, calib_kind_len(bf->name));
	for (int i = 0; i < nm; i++)
		if (i == 0 || mlines[i] != mlines[i - 1])
			bf->msig = l7_fnv1a(bf->msig, &mlines[i], sizeof(uint64_t));
	free(mlines);
	/* the longest jump once patched: its offset plus what patching adds between it and its
	 * target (a jump spans its own function only) */
	for (int s = 1; s <= f->n; s++)
		growth[s] += growth[s - 1];
	bf->patched = bf->insns + growth[f->n];
	for (int i = 0; i < f->n; i++) {
		const struct bpf_insn *in = &f->insns[i];
		int cls = BPF_CLASS(in->code), op = BPF_OP(in->code);
		if ((cls != BPF_JMP && cls != BPF_JMP32) || op == BPF_CALL || op == BPF_EXIT)
			continue;
		int t = i + 1 + in->off;
		if (t < 0 || t > f->n)
			continue;
		int reach = in->off + growth[t] - growth[i + 1];
		reach = reach < 0 ? -reach : reach;
		if (reach > bf->jump_reach)
			bf->jump_reach = reach;
	}
	free(growth);
	for (int i = 0; i < cc->n; i++) {
		struct insn *x = &cc->v[i];
		if (x->target >= 0)
			x->target = x->target <= f->n ? at[x->target] : -1;
	}
	free(at);
}

/* f's estimate with what it reaches: a callback once per pass and distinct caller state, with
 * the callbacks it runs itself (the JWT stages run the base64 and SHA-256 loops); a called
 * subprogram once per distinct state at its call; a global function once, on its own. */
static long estimate(struct budget *b, double (*site_paths)[BUDGET_MAX_CALLEES], int i, int depth)
{
	struct budget_func *f = &b->funcs[i];
	if (f->estimate >= 0)
		return f->estimate;
	if (depth > 8)   /* a cycle: BPF has no recursion, so the object is not one l7c made */
		return f->paths_estimate;
	long e = f->paths_estimate * (!strcmp(f->name, MESH_HOST) ? MESH_WALKS : 1);
	for (int c = 0; c < f->ncallees; c++)
		for (int j = 0; j < b->nfuncs; j++)
			if (j != i && b->funcs[j].is_subprog && !strcmp(b->funcs[j].name, f->callees[c])) {
				/* verified once per distinct caller state: the paths reaching its loops,
				 * capped like the blocks' */
				double p = site_paths[i][c];
				long states = (long)(p < CALLBACK_STATES ? (p < 1 ? 1 : p) : CALLBACK_STATES);
				long sub = estimate(b, site_paths, j, depth + 1);
				e += b->funcs[j].is_global ? sub : f->called[c] ? states * sub
				     : CALLBACK_PASSES * states * b->funcs[j].paths_estimate + (sub - b->funcs[j].paths_estimate);
			}
	if (getenv("L7C_BUDGET_DEBUG"))
		fprintf(stderr, "budget: %s walk %ld callees %d estimate %ld\n", f->name, f->paths_estimate, f->ncallees, e);
	return f->estimate = e;
}

/* The deepest stack of the call chains from function i as the kernel counts it before it
 * inlines bpf_loop (6.18, JIT on: each frame rounded to 16 bytes; subprograms, global
 * functions and bpf_loop callbacks all push one; measured: 400 + a 160-byte callback is
 * refused as 560), and, once per function reached (seen[]), the instructions the
 * kernel loads with it, the machinery's signature and the policy's walk. */
static int reach(struct budget *b, int i, bool *seen, struct budget_func *root, int depth)
{
	struct budget_func *f = &b->funcs[i];
	int deepest = 0;
	if (!seen[i]) {   /* and the machinery's signature and the policy's walk of all it reaches */
		seen[i] = true;
		root->chain_insns += f->insns;
		root->chain_sig += f->msig * (depth ? 3 : 1);
		root->chain_code += f->csig * (depth ? 3 : 1);
		root->chain_feat += depth ? l7_fnv1a(L7_FNV_BASIS, f->name, strlen(f->name)) : 0;
		root->chain_policy_walk += f->policy_walk;
	}
	for (int c = 0; depth < 8 && c < f->ncallees; c++)
		for (int j = 0; j < b->nfuncs; j++)
			if (j != i && b->funcs[j].is_subprog && !strcmp(b->funcs[j].name, f->callees[c])) {
				int s = reach(b, j, seen, root, depth + 1);
				if (s > deepest)
					deepest = s;
			}
	return (f->stack > 0 ? (f->stack + 15) / 16 * 16 : 16) + deepest;
}

/* A program's estimate from the calibration (calib.h): the kernel's count for this very program,
 * else its machinery configuration's cost plus the policy's own walk at the program's rate,
 * else the same for the configurations of the same features (the functions it reaches), else
 * the nearest configuration's count, scaled (at least the structural estimate); the structural estimate if the
 * table has none of these. What the machinery alone needs is the estimate less the policy's walk
 * at that rate: what no split of the rules can take away. */
static void calibrate(struct budget_func *f, const struct calib *cal)
{
	const struct calib_row *e = calib_find(cal, 'e', f->name, f->chain_code);
	const struct calib_row *c = calib_find(cal, 'c', f->name, f->chain_sig);
	if (!c)
		c = calib_find(cal, 'f', f->name, f->chain_feat);
	const struct calib_row *p = calib_find(cal, 'p', f->name, 0), *near = calib_nearest(cal, f->name, (double)f->model_estimate);
	double rate = c ? c->b : p ? p->b : 1;
	f->calib = e ? CALIB_EXACT : c ? (c->kind == 'c' ? CALIB_CONFIG : CALIB_FEATURES) : near ? CALIB_PROGRAM : CALIB_NONE;
	if (e)
		f->estimate = (long)e->a;
	else if (c)
		f->estimate = (long)(c->a + c->b * (double)f->chain_policy_walk);
	else if (near) {   /* a configuration the table has not seen: never below the structural count */
		long scaled = (long)(near->b * (double)f->model_estimate / (near->a > 1 ? near->a : 1));
		f->estimate = scaled > f->model_estimate ? scaled : f->model_estimate;
	}
	long m = f->estimate - (long)(rate * (double)f->chain_policy_walk);
	f->machinery_estimate = m > 0 ? m : 0;
}

int budget_analyse(struct budget *b, const char *obj, size_t len, const char *l7_base, unsigned nlines)
{
	if (getenv("L7C_BUDGET_STATES"))
		STATES = atol(getenv("L7C_BUDGET_STATES"));
	if (getenv("L7C_BUDGET_CB"))
		CALLBACK_PASSES = atol(getenv("L7C_BUDGET_CB"));
	if (getenv("L7C_BUDGET_CBS"))
		CALLBACK_STATES = atol(getenv("L7C_BUDGET_CBS"));
	memset(b->funcs, 0, sizeof(b->funcs));
	b->nfuncs = 0;
	b->nlines = nlines;
	b->line_insns = calloc(nlines, sizeof(int));
	b->line_func = malloc(nlines * sizeof(int));
	for (unsigned i = 0; i < nlines; i++)
		b->line_func[i] = -1;
	struct bpfobj o;
	if (bpfobj_open(&o, obj, len)) {
		bpfobj_close(&o);
		return -1;
	}
	static struct fn_code code[BUDGET_MAX_FUNCS];
	memset(code, 0, sizeof(code));
	for (int pass = 0; pass < 2; pass++)   /* programs first, then subprograms (.text) */
		for (int i = 0; i < o.nfns && b->nfuncs < BUDGET_MAX_FUNCS; i++) {
			if ((strcmp(o.fns[i].section, ".text") == 0) != (pass == 1))
				continue;
			struct budget_func *bf = &b->funcs[b->nfuncs];
			snprintf(bf->name, sizeof(bf->name), "%s", o.fns[i].name);
			snprintf(bf->section, sizeof(bf->section), "%s", o.fns[i].section);
			bf->is_subprog = pass == 1;
			decode(b, bf, &code[b->nfuncs++], &o, &o.fns[i], l7_base);
		}
	bpfobj_close(&o);
	static double site_paths[BUDGET_MAX_FUNCS][BUDGET_MAX_CALLEES];
	memset(site_paths, 0, sizeof(site_paths));
	for (int i = 0; i < b->nfuncs; i++) {
		b->funcs[i].paths_estimate = walk_estimate(&code[i], site_paths[i], &b->funcs[i].policy_walk);
		free(code[i].v);
	}
	/* drop what is not code (data labels of maps and tables have no instructions) */
	int k = 0;
	for (int i = 0; i < b->nfuncs; i++)
		if (b->funcs[i].insns > 0) {
			if (k != i)
				for (unsigned l = 0; l < nlines; l++)
					if (b->line_func[l] == i)
						b->line_func[l] = k;
			memcpy(site_paths[k], site_paths[i], sizeof(site_paths[0]));
			b->funcs[k++] = b->funcs[i];
		}
	b->nfuncs = k;
	for (int i = 0; i < b->nfuncs; i++) {   /* subprograms called by name: rule chunks */
		b->funcs[i].caller = -1;
		for (int c = 0; c < b->funcs[i].ncallees; c++)
			for (int j = 0; b->funcs[i].called[c] && j < b->nfuncs; j++)
				if (b->funcs[j].is_subprog && !strcmp(b->funcs[j].name, b->funcs[i].callees[c])) {
					b->funcs[j].is_global = !strncmp(b->funcs[j].name, "l7g_", 4);
					b->funcs[j].is_chunk = !b->funcs[j].is_global;
				}
	}
	for (int i = 0; i < b->nfuncs; i++)
		for (int c = 0; !b->funcs[i].is_subprog && c < b->funcs[i].ncallees; c++)
			for (int j = 0; j < b->nfuncs; j++)
				if (b->funcs[j].is_chunk && b->funcs[j].caller < 0 && !strcmp(b->funcs[j].name, b->funcs[i].callees[c]))
					b->funcs[j].caller = i;
	for (int i = 0; i < b->nfuncs; i++)
		b->funcs[i].estimate = -1;
	for (int i = 0; i < b->nfuncs; i++)
		estimate(b, site_paths, i, 0);
	for (int i = 0; i < b->nfuncs; i++) {
		bool seen[BUDGET_MAX_FUNCS] = { 0 };
		struct budget_func *f = &b->funcs[i];
		f->chain_insns = 0;
		f->chain_sig = f->chain_code = f->chain_feat = 0;
		f->chain_policy_walk = 0;
		f->chain_stack = reach(b, i, seen, f, 0);
		f->model_estimate = f->estimate;
		if (!f->is_subprog)
			calibrate(f, calib_get());
	}
	return 0;
}
