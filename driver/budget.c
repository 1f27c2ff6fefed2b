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
 *                + processed(g) for each global function g it calls (verified once, on its own)
 *
 * A bounded loop's bound is the constant of its back edge's compare, else the largest constant
 * a branch leaving the loop compares with (capped at LOOP_CAP). Callbacks are verified at each
 * call site in each distinct state, more than once until the loop state converges.
 * The constants are calibrated on the examples against the kernel: mean error 39%, but the
 * verifier's state explosion in the large parsers (mesh SK_MSG with JWT: 660K processed vs
 * 113K estimated) is beyond this model; `--verify` gives the real numbers, and
 * tests/kernel/explain.sh bounds the error per program. Overrides for calibration:
 * L7C_BUDGET_STATES, L7C_BUDGET_CB, L7C_BUDGET_CBS. */
#include "budget.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long STATES = 2, CALLBACK_PASSES = 2, CALLBACK_STATES = 4;
#define LOOP_CAP 8192

struct insn {
	char label[32];        /* label defined right before this instruction */
	char target[32];       /* branch target */
	bool cond, jump, exit;
	int slots;
	long imm;              /* the constant a conditional branch compares with, or -1 */
	int callee;            /* index into the function's callees when it loads a callback, or -1 */
};

struct fn_code {
	struct insn *v;
	int n, cap;
};

static int find_label(const struct fn_code *c, const char *l)
{
	for (int i = 0; i < c->n; i++)
		if (c->v[i].label[0] && !strcmp(c->v[i].label, l))
			return i;
	return -1;
}

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

static long block_slots(const struct fn_code *c, int s, int e)
{
	long n = 0;
	for (int i = s; i < e; i++)
		n += c->v[i].slots;
	return n;
}

/* Paths per block over the acyclic part of the graph (loop back edges found by DFS), plus the
 * extra iterations of each natural loop. */
static long walk_estimate(const struct fn_code *c, double *site_paths)
{
	int n = c->n;
	if (n == 0)
		return 0;
	bool *leader = calloc((size_t)n + 1, 1);
	int *target = malloc(sizeof(int) * (size_t)n);
	leader[0] = true;
	for (int i = 0; i < n; i++) {
		target[i] = c->v[i].jump || c->v[i].cond ? find_label(c, c->v[i].target) : -1;
		if (c->v[i].label[0])
			leader[i] = true;
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
		total += block_slots(c, start[b], end[b]) * (long)(p < STATES ? p : STATES);
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
			long bound = edge->cond && edge->imm > 0 ? edge->imm : 1, body = 0;
			for (int b = 0; b < nb; b++) {
				if (!in[b])
					continue;
				body += block_slots(c, start[b], end[b]);
				const struct insn *l = &c->v[end[b] - 1];
				bool exits = (s0[b] >= 0 && !in[s0[b]]) || (s1[b] >= 0 && !in[s1[b]]);
				if (!(edge->cond && edge->imm > 0) && l->cond && exits && l->imm > bound)
					bound = l->imm;
			}
			if (bound > LOOP_CAP)
				bound = LOOP_CAP;
			total += (bound - 1) * body;
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

void budget_analyse(struct budget *b, const char *asm_text, const char *l7_base, unsigned nlines)
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

	struct fn_code code[BUDGET_MAX_FUNCS] = { 0 };
	int l7_file = -1, cur_file = -1;
	unsigned cur_line = 0;
	struct budget_func *cur = NULL;
	struct fn_code *cc = NULL;
	char section[64] = "", fn_name[64] = "", pending_label[32] = "";
	for (const char *line = asm_text; *line;) {
		const char *eol = strchr(line, '\n');
		size_t len = eol ? (size_t)(eol - line) : strlen(line);
		char buf[512];
		snprintf(buf, sizeof(buf), "%.*s", (int)(len < 511 ? len : 511), line);
		line = eol ? eol + 1 : line + len;

		int fno;
		unsigned ln;
		char dir[256], base[128];
		if (sscanf(buf, "\t.file\t%d \"%255[^\"]\" \"%127[^\"]\"", &fno, dir, base) == 3) {
			if (!strcmp(base, l7_base))
				l7_file = fno;
			continue;
		}
		if (sscanf(buf, "\t.loc\t%d %u", &fno, &ln) == 2) {
			cur_file = fno;
			cur_line = ln;
			continue;
		}
		if (!strncmp(buf, "\t.section\t", 10)) {   /* quoted when the name has a '/' */
			const char *s = buf + 10;
			size_t k = 0;
			if (*s == '"')
				s++;
			while (s[k] && s[k] != '"' && s[k] != ',' && k < sizeof(section) - 1)
				k++;
			snprintf(section, sizeof(section), "%.*s", (int)k, s);
			continue;
		}
		if (!strncmp(buf, "\t.text", 6)) {
			snprintf(section, sizeof(section), ".text");
			continue;
		}
		if (strstr(buf, ",@function") && sscanf(buf, "\t.type\t%63[^,]", fn_name) == 1)
			continue;
		size_t bl = strlen(buf);
		if (bl > 1 && buf[bl - 1] == ':' && buf[0] != '\t' && buf[0] != '.') {
			buf[bl - 1] = 0;
			if (strcmp(buf, fn_name)) {   /* a basic block label */
				snprintf(pending_label, sizeof(pending_label), "%s", buf);
				continue;
			}
			if (b->nfuncs == BUDGET_MAX_FUNCS) {
				cur = NULL;
				continue;
			}
			cc = &code[b->nfuncs];
			cur = &b->funcs[b->nfuncs++];
			snprintf(cur->name, sizeof(cur->name), "%s", buf);
			snprintf(cur->section, sizeof(cur->section), "%s", section);
			cur->is_subprog = !strcmp(section, ".text");
			fn_name[0] = 0;
			continue;
		}
		if (!cur || buf[0] != '\t' || buf[1] == '.' || buf[1] == 0)
			continue;
		if (!strncmp(buf, "\t.Lfunc_end", 11) || !strncmp(buf, ".Lfunc_end", 10))
			continue;
		if (cc->n == cc->cap) {
			cc->cap = cc->cap ? cc->cap * 2 : 256;
			cc->v = realloc(cc->v, sizeof(*cc->v) * (size_t)cc->cap);
		}
		struct insn *in = &cc->v[cc->n++];
		memset(in, 0, sizeof(*in));
		snprintf(in->label, sizeof(in->label), "%s", pending_label);
		pending_label[0] = 0;
		const char *g = strstr(buf, "goto ");
		in->cond = !strncmp(buf, "\tif ", 4);
		in->jump = !in->cond && g;
		in->exit = !strcmp(buf, "\texit");
		if (g)
			snprintf(in->target, sizeof(in->target), "%s", g + 5);
		char op[4];
		long imm;
		in->imm = -1;
		if (in->cond && sscanf(buf, "\tif %*s %3s %ld goto", op, &imm) == 2)
			in->imm = imm;
		in->slots = strstr(buf, " ll") ? 2 : 1;   /* a 64-bit immediate load is two slots */
		cur->insns += in->slots;
		/* a callback named as an immediate: bpf_loop(n, callback, ...); or a global function
		 * of the machinery called directly */
		char sym[64];
		in->callee = -1;
		bool global = sscanf(buf, "\tcall %63s", sym) == 1 && !strncmp(sym, "l7g_", 4);
		if (global || (sscanf(buf, "\tr%*d = %63s ll", sym) == 1 && (sym[0] < '0' || sym[0] > '9') && sym[0] != '-')) {
			int k = 0;
			while (k < cur->ncallees && strcmp(cur->callees[k], sym))
				k++;
			if (k == cur->ncallees && k < BUDGET_MAX_CALLEES) {
				cur->callee_global[k] = global;
				snprintf(cur->callees[cur->ncallees++], sizeof(cur->callees[0]), "%s", sym);
			}
			in->callee = k < BUDGET_MAX_CALLEES && !global ? k : -1;
		}
		const char *st = strstr(buf, "(r10 - ");
		if (st && atoi(st + 7) > cur->stack)
			cur->stack = atoi(st + 7);
		if (cur_file == l7_file && cur_line > 0 && cur_line < nlines) {
			cur->policy_insns += in->slots;
			b->line_insns[cur_line] += in->slots;
			if (b->line_func[cur_line] < 0)
				b->line_func[cur_line] = (int)(cur - b->funcs);
		}
	}
	double site_paths[BUDGET_MAX_FUNCS][BUDGET_MAX_CALLEES] = { { 0 } };
	for (int i = 0; i < b->nfuncs; i++) {
		b->funcs[i].paths_estimate = walk_estimate(&code[i], site_paths[i]);
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
	/* subprograms first (a global function's estimate includes its callbacks), then the
	 * programs that call them */
	for (int round = 0; round < 2; round++)
	for (int i = 0; i < b->nfuncs; i++) {
		struct budget_func *f = &b->funcs[i];
		if (f->is_subprog != (round == 0))
			continue;
		f->estimate = f->paths_estimate;
		if (getenv("L7C_BUDGET_DEBUG"))
			fprintf(stderr, "budget: %s walk %ld callees %d\n", f->name, f->paths_estimate, f->ncallees);
		for (int c = 0; c < f->ncallees; c++)
			for (int j = 0; j < b->nfuncs; j++)
				if (b->funcs[j].is_subprog && !strcmp(b->funcs[j].name, f->callees[c]) && f->callee_global[c]) {
					f->estimate += b->funcs[j].estimate;   /* verified once, on its own */
				} else if (b->funcs[j].is_subprog && !strcmp(b->funcs[j].name, f->callees[c])) {
					/* verified once per distinct caller state: the paths reaching its
					 * loops, capped like the blocks' */
					double p = site_paths[i][c];
					long states = (long)(p < CALLBACK_STATES ? (p < 1 ? 1 : p) : CALLBACK_STATES);
					f->estimate += CALLBACK_PASSES * states * b->funcs[j].paths_estimate;
				}
	}
}
