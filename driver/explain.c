/* l7c --explain: per program, the verifier budget (instructions, estimated and, with
 * --verify, actual processed instructions, stack, tail calls) and how l7run attaches it; per
 * rule, the program it landed in, its share and its .l7 line; what goes to the slow path and
 * why; and the object's worst against each of the kernel's hard limits.
 *
 * The numbers come from the compiled object itself: its line info (.BTF.ext) attributes every
 * instruction to the .l7 line it implements. All of it is put in one report (report.h) before
 * anything is printed; the three formats only lay that report out. */
#include "explain.h"

#include <cmark.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "codegen.h"
#include "frontend.h"
#include "ir.h"
#include "limits.h"
#include "report.h"
#include "timers.h"

/* ---- the report ---- */

/* How many tail calls it takes to reach program f: 0 for a host, k + 1 for decide program k. */
static int tail_depth(const struct budget_func *f)
{
	const char *d = strstr(f->name, "_decide_");
	return d && !f->is_subprog ? atoi(d + 8) + 1 : 0;
}

/* The program a function's code runs in: a rule chunk runs in the decide programs calling it. */
static void runs_in(const struct budget *b, int f, char *buf, size_t n)
{
	const struct budget_func *fn = &b->funcs[f];
	buf[0] = 0;
	for (int i = 0; fn->is_chunk && i < b->nfuncs; i++)
		for (int c = 0; !b->funcs[i].is_subprog && c < b->funcs[i].ncallees; c++)
			if (b->funcs[i].called[c] && !strcmp(b->funcs[i].callees[c], fn->name))
				snprintf(buf + strlen(buf), n - strlen(buf), "%s%s", buf[0] ? "," : "", b->funcs[i].name);
	if (!buf[0])
		snprintf(buf, n, "%s", fn->name);
}

/* The .l7 lines a rule owns: its decision and its actions; conditions were placed on the
 * lines of their expressions, which are the rule's if-lines. */
static int rule_insns(const struct budget *b, const struct ir_rule *ru, int *prog)
{
	int total = 0;
	*prog = -1;
	unsigned lines[64];
	int n = 0;
	lines[n++] = ru->line;
	for (int a = 0; a < ru->nactions && n < 64; a++)
		lines[n++] = ru->actions[a].line;
	const struct ir_cond *stack[64];
	int sp = 0;
	stack[sp++] = ru->cond;
	while (sp) {
		const struct ir_cond *c = stack[--sp];
		if (c->line && n < 64)
			lines[n++] = c->line;
		if (c->a && sp < 63)
			stack[sp++] = c->a;
		if (c->b && sp < 63)
			stack[sp++] = c->b;
	}
	for (int i = 0; i < n; i++) {
		bool dup = false;
		for (int j = 0; j < i; j++)
			dup |= lines[j] == lines[i];
		if (dup || lines[i] >= b->nlines)
			continue;
		total += b->line_insns[lines[i]];
		if (*prog < 0)
			*prog = b->line_func[lines[i]];
	}
	return total;
}

static const char *term_name(enum ir_term t)
{
	return t == IR_FORWARD ? "forward" : t == IR_DENY ? "deny" : t == IR_FALLBACK ? "fallback" : t == IR_ALLOW ? "allow"
															: "continue";
}

static void note(struct report *r, const char *fmt, const char *name, long a, long b)
{
	if (r->nnotes < RP_MAX_NOTES)
		snprintf(r->notes[r->nnotes++], sizeof(r->notes[0]), fmt, name, a, b);
}

static void fill_programs(struct report *r)
{
	const struct budget *b = &r->sb.b;
	r->nprogs = b->nfuncs;
	for (int i = 0; i < b->nfuncs; i++) {
		const struct budget_func *f = &b->funcs[i];
		struct rp_prog *g = &r->progs[i];
		*g = (struct rp_prog){ .f = f, .processed = -1, .used = -1, .attach_errno = -1 };
		g->kind = !f->is_subprog ? RP_PROGRAM : f->is_chunk ? RP_CHUNK : f->is_global ? RP_GLOBAL : RP_CALLBACK;
		static const char *what[] = { NULL, "(rule chunk)", "(global function)", "(bpf_loop callback)" };
		g->where = g->kind == RP_PROGRAM ? f->section : what[g->kind];
		g->tails = tail_depth(f);
		r->nprograms += g->kind == RP_PROGRAM;
	}
}

/* What --verify adds to each program: its count (else the estimate) against the budget, and
 * the notes and the model's error that follow from it. */
static void fill_budget(struct report *r)
{
	double err = 0;
	for (int i = 0; i < r->nprogs; i++) {
		struct rp_prog *g = &r->progs[i];
		if (g->kind != RP_PROGRAM)
			continue;
		g->used = g->processed >= 0 ? g->processed : g->f->estimate;
		g->budget_pct = 100.0 * (double)g->used / (double)r->budget;
		if (g->used > r->budget && g->processed >= 0 && g->f->estimate <= r->budget)
			note(r,
			     "%s exceeds the budget: %ld processed instructions of %ld (the model estimated it under: "
			     "l7c did not split it); lower --budget to split",
			     g->f->name, g->used, r->budget);
		else if (g->used > r->budget && r->nnotes < RP_MAX_NOTES)
			split_advice(&r->sb, g->f, g->used, r->budget, r->notes[r->nnotes++], sizeof(r->notes[0]));
		if (g->processed > 0) {
			double e = ((double)g->f->estimate - (double)g->processed) / (double)g->processed;
			err += e < 0 ? -e : e;
			r->est_n++;
		}
	}
	r->est_err = r->est_n ? 100 * err / r->est_n : 0;
}

static void fill_rules(struct report *r)
{
	const struct ir_program *p = r->p;
	for (int i = 0; i < p->npolicies; i++)
		r->nrules += p->policies[i].nrules;
	r->rules = calloc((size_t)r->nrules + 1, sizeof(*r->rules));
	r->slow = calloc((size_t)r->nrules + 4, sizeof(*r->slow));
	int n = 0;
	for (int i = 0; i < p->npolicies; i++)
		for (int k = 0; k < p->policies[i].nrules; k++) {
			const struct ir_rule *ru = &p->policies[i].rules[k];
			struct rp_rule *rr = &r->rules[n++];
			int prog;
			rr->r = ru;
			rr->policy = p->policies[i].name;
			rr->insns = rule_insns(&r->sb.b, ru, &prog);
			if (prog >= 0)
				runs_in(&r->sb.b, prog, rr->program, sizeof(rr->program));
			else
				snprintf(rr->program, sizeof(rr->program), "(folded away)");
			rr->share = prog >= 0 && r->sb.b.funcs[prog].insns ? 100.0 * rr->insns / r->sb.b.funcs[prog].insns : 0;
			if (ru->term == IR_FORWARD || ru->term == IR_FALLBACK)
				snprintf(rr->decision, sizeof(rr->decision), "%s %s", term_name(ru->term), p->upstreams[ru->upstream].name);
			else if (ru->term == IR_DENY)
				snprintf(rr->decision, sizeof(rr->decision), "deny %d", ru->status);
			else
				snprintf(rr->decision, sizeof(rr->decision), "%s", term_name(ru->term));
			for (int a = 0; a < ru->nactions; a++) {
				rr->mutates |= ru->actions[a].kind == IR_A_MUTATE;
				rr->audit |= ru->actions[a].kind == IR_A_AUDIT;
			}
			const struct ir_cond *c = ir_rule_table(ru);
			rr->table = c ? c->table : -1;
			for (int e = 0; c && e < p->tables[c->table].n; e++)
				rr->table_rules += p->tables[c->table].entries[e].group == c->group;
			if (ru->term == IR_FALLBACK)
				snprintf(r->slow[r->nslow++], sizeof(r->slow[0]), "rule %d (line %u): %s", ru->id, ru->line, ru->reason);
		}
	if (!r->nslow)
		snprintf(r->slow[r->nslow++], sizeof(r->slow[0]), "no rule sends requests to the fallback proxy");
	snprintf(r->slow[r->nslow++], sizeof(r->slow[0]),
		 "malformed or ambiguous requests: answered 400/414/431 in the kernel path, never forwarded");
	snprintf(r->slow[r->nslow++], sizeof(r->slow[0]),
		 "chunked bodies, upgrades, and requests behind one that l7run holds: relayed by l7run");
}

/* The object's worst against each kernel limit, and where. */
static void fill_limits(struct report *r)
{
	static const struct { const char *id, *unit, *what, *kernel; long limit; } defs[] = {
#define L7_LIMIT(id, value, unit, what, kernel) { #id, unit, what, kernel, value },
#include "limits.def"
#undef L7_LIMIT
	};
	for (size_t l = 0; l < sizeof defs / sizeof defs[0]; l++) {
		struct rp_limit *x = &r->limits[r->nlimits++];
		*x = (struct rp_limit){ defs[l].id, defs[l].unit, defs[l].what, defs[l].kernel, defs[l].limit, 0, "-" };
		for (int i = 0; i < r->nprogs; i++) {
			const struct rp_prog *g = &r->progs[i];
			long v = !strcmp(x->id, "JUMP")		? g->f->jump_reach
				 : g->kind != RP_PROGRAM	? -1
				 : !strcmp(x->id, "PROCESSED") ? g->used
				 : !strcmp(x->id, "INSNS")	? g->f->chain_insns
				 : !strcmp(x->id, "STACK")	? g->f->chain_stack
								: g->tails;
			if (v > x->worst) {
				x->worst = v;
				x->program = g->f->name;
			}
		}
	}
}

static void report_free(struct report *r)
{
	for (int i = 0; i < r->nprogs; i++)
		free(r->progs[i].why);
	split_build_free(&r->sb);
	free(r->rules);
	free(r->slow);
}

/* Which calibration the estimates used (calib.h), and how many programs each level served. */
static void calib_text(const struct report *r, char *buf, size_t n)
{
	const struct calib *c = calib_get();
	int lv[5] = { 0 };
	for (int i = 0; i < r->nprogs; i++)
		if (r->progs[i].kind == RP_PROGRAM)
			lv[r->progs[i].f->calib]++;
	if (!strcmp(c->source, "none"))
		snprintf(buf, n, "calibration: none for kernel %s (%s): structural estimates only", c->running, c->note);
	else
		snprintf(buf, n, "calibration: kernel %s, %s %s%s%s: %d program%s exact, %d by machinery configuration, %d by features, %d by program, %d uncalibrated",
			 c->release, c->source, c->path, c->note[0] ? "; " : "", c->note, lv[CALIB_EXACT], lv[CALIB_EXACT] == 1 ? "" : "s",
			 lv[CALIB_CONFIG], lv[CALIB_FEATURES], lv[CALIB_PROGRAM], lv[CALIB_NONE]);
}

/* ---- text ---- */

/* A rule's decision as the reports print it: "forward api + header mutations (table #0: 3 rules)" */
static void rule_text(const struct rp_rule *rr, char *buf, size_t n)
{
	char tab[64] = "";
	if (rr->table >= 0)
		snprintf(tab, sizeof(tab), " (table #%d: %d rule%s)", rr->table, rr->table_rules, rr->table_rules == 1 ? "" : "s");
	snprintf(buf, n, "%s%s%s%s", rr->audit ? "audit (a deny not enforced), then " : "", rr->decision,
		 rr->mutates ? " + header mutations" : "", tab);
}

static void chains(const struct report *r, FILE *o, const char *indent, const char *arrow)
{
	const struct codegen_split *s = &r->sb.plan;
	const char *host[] = { SPLIT_HOST_GW, SPLIT_HOST_MESH }, *chain[] = { SPLIT_CHAIN_GW, SPLIT_CHAIN_MESH };
	int on[] = { s->gw, s->mesh };
	for (int h = 0; h < 2; h++) {
		if (!on[h])
			continue;
		fprintf(o, "%s%s", indent, host[h]);
		for (int k = 0; k < s->nchunks; k++)
			fprintf(o, " %s %s%d", arrow, chain[h], k);
		fprintf(o, "  (%d tail call%s of %d)\n", s->nchunks, s->nchunks == 1 ? "" : "s", LIMIT_TAILS);
	}
}

static const char *verdict_text(const struct rp_prog *g, char *buf, size_t n)
{
	if (g->verdict == RP_ACCEPTED)
		return "accepted";
	if (g->verdict == RP_REJECTED)
		snprintf(buf, n, "rejected: %s", g->reason);
	else
		buf[0] = 0;
	return buf;
}

static const char *attach_text(const struct rp_prog *g, char *buf, size_t n)
{
	if (!g->attach_as)
		return "";
	if (g->attach_errno == 0)
		snprintf(buf, n, "attached: %s to %s", g->attach_as, g->attach_to);
	else if (g->attach_errno < 0)
		snprintf(buf, n, "not attached (%s to %s): not loaded", g->attach_as, g->attach_to);
	else
		snprintf(buf, n, "attach refused (%s to %s): %s", g->attach_as, g->attach_to, g->attach_why);
	return buf;
}

static void text_report(const struct report *r)
{
	const struct ir_program *p = r->p;
	char buf[512];
	printf("%s: %d program%s, %d rule%s, budget %ld processed instructions per program\n\n", p->source_path,
	       r->nprogs, r->nprogs == 1 ? "" : "s", p->nrules, p->nrules == 1 ? "" : "s", r->budget);
	if (r->sb.plan.unroll_max == CODEGEN_UNROLL_COMPACT)
		printf("compact compares: constants over %d bytes are one bpf_strncmp call each (unrolled, the rules "
		       "would not fit the budget or one program)\n\n", CODEGEN_UNROLL_COMPACT);
	if (r->sb.plan.gw || r->sb.plan.mesh) {
		printf("split into tail-call chains (parse half -> decide programs, %d rule chunk%s):\n", r->sb.plan.nchunks,
		       r->sb.plan.nchunks == 1 ? "" : "s");
		chains(r, stdout, "  ", "->");
		printf("\n");
	}
	char cal[1024];
	calib_text(r, cal, sizeof(cal));
	printf("%s\n\n", cal);
	printf("%-22s %-22s %7s %7s %9s %9s %6s %5s %6s  %s\n", "program", "section", "insns", "policy", "est.proc",
	       "processed", "budget", "stack", "tails", r->verified ? "verifier" : "");
	for (int i = 0; i < r->nprogs; i++) {
		const struct rp_prog *g = &r->progs[i];
		char proc[24] = "-", est[24] = "-", pct[24] = "-";
		if (g->processed >= 0)
			snprintf(proc, sizeof(proc), "%ld", g->processed);
		if (g->kind == RP_PROGRAM) {
			snprintf(est, sizeof(est), "%ld", g->f->estimate);
			snprintf(pct, sizeof(pct), "%.1f%%", g->budget_pct);
		}
		printf("%-22s %-22s %7d %7d %9s %9s %6s %5d %3d/%-2d  %s\n", g->f->name, g->where, g->f->insns, g->f->policy_insns,
		       est, proc, pct, g->f->stack, g->tails, LIMIT_TAILS, verdict_text(g, buf, sizeof(buf)));
	}
	for (int i = 0; i < r->nnotes; i++)
		printf("warning: %s\n", r->notes[i]);
	if (r->est_n)
		printf("estimate error: %.1f%% mean absolute over %d programs\n", r->est_err, r->est_n);
	if (r->verified) {
		printf("\nattached as l7run would (tail-call slots first):\n");
		for (int i = 0; i < r->nprogs; i++)
			if (r->progs[i].attach_as)
				printf("  %-22s %s\n", r->progs[i].f->name, attach_text(&r->progs[i], buf, sizeof(buf)));
		printf("verify: %d of %d programs loaded, %d attached; %d refused to load, %d refused to attach\n", r->loaded,
		       r->nprograms, r->attached, r->rejected, r->attach_refused);
		for (int i = 0; i < r->nprogs; i++)
			if (r->progs[i].why) {
				char line[1024];
				vlog_line(line, sizeof(line), r->progs[i].why, r->progs[i].f->name);
				printf("refused: %s\n", line);
			}
	}
	printf("\nkernel limits (the worst program):\n");
	for (int i = 0; i < r->nlimits; i++) {
		const struct rp_limit *l = &r->limits[i];
		printf("  %-9s %8ld of %8ld %-12s %-22s %s\n", l->id, l->worst, l->limit, l->unit, l->program, l->what);
	}

	printf("\n%-6s %-5s %-16s %-22s %6s %7s  %s\n", "rule", "line", "policy", "program", "insns", "share", "decision");
	for (int i = 0; i < r->nrules; i++) {
		const struct rp_rule *rr = &r->rules[i];
		rule_text(rr, buf, sizeof(buf));
		printf("%-6d %-5u %-16s %-22s %6d %6.2f%%  %s\n", rr->r->id, rr->r->line, rr->policy, rr->program, rr->insns,
		       rr->share, buf);
	}
	for (int t = 0; t < p->ntables; t++) {
		const struct ir_table *tb = &p->tables[t];
		static const char *field[] = { "path", "query", "method", "Host", "header", "claim" };
		printf("%stable #%d on %s%s%s: %d rules of lines %u..%u, one lookup (l7_exact, l7_prefix), %d decision%s\n",
		       t ? "" : "\nrule tables:\n", t, field[tb->field], tb->field == IR_F_HEADER ? " " : "",
		       tb->field == IR_F_HEADER ? p->headers[tb->header] : "", tb->n, tb->entries[0].line,
		       tb->entries[tb->n - 1].line, tb->ngroups, tb->ngroups == 1 ? "" : "s");
	}
	printf("\nslow path (userspace):\n");
	for (int i = 0; i < r->nslow; i++)
		printf("  %s\n", r->slow[i]);
}

/* ---- JSON ---- */

static void json_str(FILE *o, const char *s)
{
	if (!s) {
		fputs("null", o);
		return;
	}
	fputc('"', o);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fprintf(o, "\\%c", *s);
		else if ((unsigned char)*s < 32)
			fprintf(o, "\\u%04x", *s);
		else
			fputc(*s, o);
	}
	fputc('"', o);
}

/* --verify: a refused program's explanation (support/bpfobj/vlog.c), null if none */
static void json_refusal(const struct rp_prog *g)
{
	const struct vlog_explained *x = g->why;
	printf(",\"refusal\":");
	if (!x) {
		printf("null");
		return;
	}
	const struct vlog_where *w = x->policy.file[0] ? &x->policy : &x->at;
	char line[1024];
	vlog_line(line, sizeof(line), x, g->f->name);
	printf("{\"file\":");
	json_str(stdout, w->file[0] ? w->file : NULL);
	printf(",\"line\":%u,\"column\":%u,\"cause\":", w->line, w->col);
	json_str(stdout, x->cause ? x->cause : x->error);
	printf(",\"hint\":");
	json_str(stdout, x->hint && x->hint[0] ? x->hint : NULL);
	printf(",\"error\":");
	json_str(stdout, x->error);
	printf(",\"instruction\":");
	json_str(stdout, x->insn[0] ? x->insn : NULL);
	printf(",\"at\":{\"file\":");
	json_str(stdout, x->at.file[0] ? x->at.file : NULL);
	printf(",\"line\":%u,\"function\":", x->at.line);
	json_str(stdout, x->at.func[0] ? x->at.func : x->at.bpf_func[0] ? x->at.bpf_func : NULL);
	printf("},\"processed\":%ld,\"log\":", x->processed);
	json_str(stdout, x->log_path[0] ? x->log_path : NULL);
	printf(",\"diagnostic\":");
	json_str(stdout, line);
	printf("}");
}

static void json_report(const struct report *r)
{
	const struct ir_program *p = r->p;
	char buf[512];
	printf("{\"source\":");
	json_str(stdout, p->source_path);
	const struct calib *cal = calib_get();
	printf(",\"budget\":%ld,\"unroll_max\":%d,\"calibration\":{\"source\":\"%s\",\"release\":", r->budget, r->sb.plan.unroll_max,
	       cal->source);
	json_str(stdout, cal->release[0] ? cal->release : NULL);
	printf(",\"running\":");
	json_str(stdout, cal->running);
	printf(",\"path\":");
	json_str(stdout, cal->path[0] ? cal->path : NULL);
	printf(",\"note\":");
	json_str(stdout, cal->note[0] ? cal->note : NULL);
	printf("},\"programs\":[");
	for (int i = 0; i < r->nprogs; i++) {
		const struct rp_prog *g = &r->progs[i];
		printf("%s{\"name\":\"%s\",\"section\":\"%s\",\"kind\":", i ? "," : "", g->f->name, g->f->section);
		json_str(stdout, g->where);
		printf(",\"subprogram\":%s,\"rule_chunk\":%s,\"insns\":%d,\"policy_insns\":%d,\"estimated_processed\":%ld,"
		       "\"processed\":%ld,\"budget_used\":%ld,\"stack\":%d,\"tail_calls\":%d,\"verify_ms\":%.2f,\"patched\":%d,"
		       "\"jump_reach\":%d,\"chain_stack\":%d,\"chain_insns\":%ld,\"code\":\"%016llx\",\"machinery\":\"%016llx\",\"features\":\"%016llx\","
		       "\"policy_walk\":%ld,\"model_estimate\":%ld,\"machinery_estimate\":%ld,\"calibration\":\"%s\",\"verifier\":",
		       g->kind != RP_PROGRAM ? "true" : "false", g->kind == RP_CHUNK ? "true" : "false", g->f->insns,
		       g->f->policy_insns, g->f->estimate, g->processed, g->used, g->f->stack, g->tails, g->verify_ms,
		       g->f->patched, g->f->jump_reach, g->f->chain_stack, g->f->chain_insns,
		       (unsigned long long)g->f->chain_code, (unsigned long long)g->f->chain_sig,
		       (unsigned long long)g->f->chain_feat, g->f->chain_policy_walk,
		       g->f->model_estimate, g->f->machinery_estimate, g->kind == RP_PROGRAM ? calib_level_name(g->f->calib) : "-");
		json_str(stdout, verdict_text(g, buf, sizeof(buf)));
		json_refusal(g);
		printf(",\"attach\":");
		if (!g->attach_as) {
			printf("null}");
			continue;
		}
		printf("{\"as\":\"%s\",\"to\":", g->attach_as);
		json_str(stdout, g->attach_to);
		printf(",\"tried\":%s,\"attached\":%s,\"errno\":%d,\"error\":", r->verified ? "true" : "false",
		       g->attach_errno == 0 ? "true" : "false", g->attach_errno > 0 ? g->attach_errno : 0);
		json_str(stdout, g->attach_errno > 0 ? g->attach_why : NULL);
		printf("}}");
	}
	printf("],\"max_tail_calls\":%d,\"chains\":[", LIMIT_TAILS);
	const struct codegen_split *sp = &r->sb.plan;
	const char *host[] = { SPLIT_HOST_GW, SPLIT_HOST_MESH }, *chain[] = { SPLIT_CHAIN_GW, SPLIT_CHAIN_MESH };
	int on[] = { sp->gw, sp->mesh }, nc = 0;
	for (int h = 0; h < 2; h++) {
		if (!on[h])
			continue;
		printf("%s{\"host\":\"%s\",\"tail_calls\":%d,\"programs\":[", nc++ ? "," : "", host[h], sp->nchunks);
		for (int k = 0; k < sp->nchunks; k++)
			printf("%s\"%s%d\"", k ? "," : "", chain[h], k);
		printf("]}");
	}
	printf("],\"verify\":{\"ran\":%s,\"loaded\":%d,\"rejected\":%d,\"attached\":%d,\"attach_refused\":%d,\"error\":",
	       r->verified ? "true" : "false", r->loaded, r->rejected, r->attached, r->attach_refused);
	json_str(stdout, r->verify_error[0] ? r->verify_error : NULL);
	printf(",\"estimate_error\":");
	if (r->est_n)
		printf("%.1f", r->est_err);
	else
		printf("null");
	printf("},\"limits\":[");
	for (int i = 0; i < r->nlimits; i++) {
		const struct rp_limit *l = &r->limits[i];
		printf("%s{\"id\":\"%s\",\"limit\":%ld,\"unit\":\"%s\",\"worst\":%ld,\"program\":", i ? "," : "", l->id, l->limit,
		       l->unit, l->worst);
		json_str(stdout, l->program);
		printf(",\"what\":");
		json_str(stdout, l->what);
		printf(",\"kernel\":");
		json_str(stdout, l->kernel);
		printf("}");
	}
	printf("],\"notes\":[");
	for (int i = 0; i < r->nnotes; i++) {
		printf("%s", i ? "," : "");
		json_str(stdout, r->notes[i]);
	}
	printf("],\"rules\":[");
	for (int i = 0; i < r->nrules; i++) {
		const struct rp_rule *rr = &r->rules[i];
		const struct ir_rule *ru = rr->r;
		printf("%s{\"id\":%d,\"line\":%u,\"policy\":", i ? "," : "", ru->id, ru->line);
		json_str(stdout, rr->policy);
		printf(",\"program\":");
		json_str(stdout, rr->program);
		printf(",\"insns\":%d,\"share\":%.2f,\"decision\":\"%s\",\"status\":%d,\"upstream\":", rr->insns, rr->share,
		       term_name(ru->term), ru->status);
		json_str(stdout, ru->upstream >= 0 && (ru->term == IR_FORWARD || ru->term == IR_FALLBACK) ? p->upstreams[ru->upstream].name
													     : "");
		rule_text(rr, buf, sizeof(buf));
		printf(",\"header_mutations\":%s,\"audit\":%s,\"table\":%d,\"table_rules\":%d,\"text\":",
		       rr->mutates ? "true" : "false", rr->audit ? "true" : "false", rr->table, rr->table_rules);
		json_str(stdout, buf);
		printf(",\"slow_path\":");
		json_str(stdout, ru->term == IR_FALLBACK ? ru->reason : NULL);
		printf("}");
	}
	printf("],\"tables\":[");
	for (int t = 0; t < p->ntables; t++) {
		static const char *field[] = { "path", "query", "method", "host", "header", "claim" };
		const struct ir_table *tb = &p->tables[t];
		printf("%s{\"id\":%d,\"field\":\"%s\",\"header\":", t ? "," : "", t, field[tb->field]);
		json_str(stdout, tb->field == IR_F_HEADER ? p->headers[tb->header] : NULL);
		printf(",\"rules\":%d,\"first_line\":%u,\"last_line\":%u,\"decisions\":%d}", tb->n, tb->entries[0].line,
		       tb->entries[tb->n - 1].line, tb->ngroups);
	}
	printf("],\"slow_path\":[");
	for (int i = 0; i < r->nslow; i++) {
		printf("%s", i ? "," : "");
		json_str(stdout, r->slow[i]);
	}
	printf("]}\n");
}

/* ---- HTML ---- */

/* Markdown rendered to HTML by cmark. CommonMark has no tables, so the tables (and the bar per
 * program showing the budget used) are raw HTML blocks inside the Markdown; what the policy
 * or the kernel wrote into them is escaped. */
static void html_text(FILE *f, const char *s)
{
	for (; s && *s; s++)
		if (*s == '<')
			fputs("&lt;", f);
		else if (*s == '>')
			fputs("&gt;", f);
		else if (*s == '&')
			fputs("&amp;", f);
		else
			fputc(*s, f);
}

static void html_report(const struct report *r)
{
	const struct ir_program *p = r->p;
	char buf[512];
	char *md = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&md, &len);
	fprintf(f, "# l7c --explain: `%s`\n\n%d programs, %d rules. Budget: %ld processed instructions per program%s.\n\n"
		   "## Programs\n\n",
		p->source_path, r->nprogs, p->nrules, r->budget, r->verified ? "; *processed* is the kernel verifier's count" : "");
	if (r->sb.plan.unroll_max == CODEGEN_UNROLL_COMPACT)
		fprintf(f, "Compact compares: constants over %d bytes are one `bpf_strncmp` call each (unrolled, the rules "
			   "would not fit the budget or one program).\n\n", CODEGEN_UNROLL_COMPACT);
	if (r->sb.plan.gw || r->sb.plan.mesh) {
		fprintf(f, "Split into tail-call chains (parse half, then decide programs; %d rule chunk%s):\n\n",
			r->sb.plan.nchunks, r->sb.plan.nchunks == 1 ? "" : "s");
		chains(r, f, "- ", "&rarr;");
		fprintf(f, "\n");
	}
	char cal[1024];
	calib_text(r, cal, sizeof(cal));
	html_text(f, cal);
	fprintf(f, "\n\n");
	fprintf(f, "<table>\n<tr><th>program</th><th>section</th><th>insns</th><th>policy</th><th>est. processed</th>"
		   "<th>processed</th><th>budget used</th><th>stack</th><th>tail calls</th><th>verifier</th><th>attach</th></tr>\n");
	for (int i = 0; i < r->nprogs; i++) {
		const struct rp_prog *g = &r->progs[i];
		fprintf(f, "<tr><td>%s</td><td>%s</td><td>%d</td><td>%d</td>", g->f->name, g->where, g->f->insns, g->f->policy_insns);
		if (g->kind != RP_PROGRAM) {
			fprintf(f, "<td></td><td></td><td></td><td>%d</td><td></td><td></td><td></td></tr>\n", g->f->stack);
			continue;
		}
		int w = g->budget_pct > 100 ? 100 : g->budget_pct < 0.5 ? 1 : (int)g->budget_pct;
		fprintf(f, "<td>%ld</td><td>", g->f->estimate);
		if (g->processed >= 0)
			fprintf(f, "%ld", g->processed);
		else
			fprintf(f, "-");
		fprintf(f, "</td><td><div style=\"background:#ddd;width:200px\"><div style=\"background:%s;width:%dpx;height:10px\">"
			   "</div></div>%.2f%%</td><td>%d</td><td>%d/%d</td><td>", g->budget_pct > 100 ? "#c33" : "#3a3", w * 2,
			g->budget_pct, g->f->stack, g->tails, LIMIT_TAILS);
		html_text(f, verdict_text(g, buf, sizeof(buf)));
		fprintf(f, "</td><td>");
		html_text(f, r->verified ? attach_text(g, buf, sizeof(buf)) : "");
		fprintf(f, "</td></tr>\n");
	}
	fprintf(f, "</table>\n\n");
	for (int i = 0; i < r->nnotes; i++) {
		fprintf(f, "%s- **warning**: ", i ? "" : "\n");
		html_text(f, r->notes[i]);
		fprintf(f, "\n");
	}
	if (r->est_n)
		fprintf(f, "\nEstimate error: %.1f%% mean absolute over %d programs.\n", r->est_err, r->est_n);
	if (r->verified)
		fprintf(f, "\nVerify: %d of %d programs loaded, %d attached; %d refused to load, %d refused to attach.\n",
			r->loaded, r->nprograms, r->attached, r->rejected, r->attach_refused);
	for (int i = 0; i < r->nprogs; i++)
		if (r->progs[i].why) {
			char line[1024];
			vlog_line(line, sizeof(line), r->progs[i].why, r->progs[i].f->name);
			fprintf(f, "\n- **refused**: ");
			html_text(f, line);
			fprintf(f, "\n");
		}
	fprintf(f, "\n## Kernel limits\n\n<table>\n<tr><th>limit</th><th>worst</th><th>of</th><th>unit</th><th>program</th>"
		   "<th>what</th></tr>\n");
	for (int i = 0; i < r->nlimits; i++) {
		const struct rp_limit *l = &r->limits[i];
		fprintf(f, "<tr><td>%s</td><td>%ld</td><td>%ld</td><td>%s</td><td>%s</td><td>", l->id, l->worst, l->limit, l->unit,
			l->program);
		html_text(f, l->what);
		fprintf(f, "</td></tr>\n");
	}
	fprintf(f, "</table>\n\n## Rules\n\n<table>\n<tr><th>rule</th><th>line</th><th>policy</th><th>program</th><th>insns</th>"
		   "<th>share</th><th>decision</th></tr>\n");
	for (int i = 0; i < r->nrules; i++) {
		const struct rp_rule *rr = &r->rules[i];
		rule_text(rr, buf, sizeof(buf));
		fprintf(f, "<tr><td>%d</td><td>%u</td><td>%s</td><td>%s</td><td>%d</td><td>%.2f%%</td><td>", rr->r->id, rr->r->line,
			rr->policy, rr->program, rr->insns, rr->share);
		html_text(f, buf);
		fprintf(f, "</td></tr>\n");
	}
	fprintf(f, "</table>\n\n");
	for (int t = 0; t < p->ntables; t++) {
		const struct ir_table *tb = &p->tables[t];
		static const char *field[] = { "path", "query", "method", "Host", "header", "claim" };
		fprintf(f, "%s- table #%d on %s%s%s: %d rules of lines %u..%u, one lookup (`l7_exact`, `l7_prefix`), %d decision%s\n",
			t ? "" : "## Rule tables\n\n", t, field[tb->field], tb->field == IR_F_HEADER ? " " : "",
			tb->field == IR_F_HEADER ? p->headers[tb->header] : "", tb->n, tb->entries[0].line,
			tb->entries[tb->n - 1].line, tb->ngroups, tb->ngroups == 1 ? "" : "s");
	}
	fprintf(f, "\n## Slow path\n\n");
	for (int i = 0; i < r->nslow; i++) {
		fprintf(f, "- ");
		html_text(f, r->slow[i]);
		fprintf(f, "\n");
	}
	fclose(f);
	char *html = cmark_markdown_to_html(md, len, CMARK_OPT_UNSAFE);
	printf("<!doctype html>\n<meta charset=\"utf-8\"><title>l7c --explain</title>\n"
	       "<style>body{font-family:sans-serif;max-width:70em;margin:2em auto}table{border-collapse:collapse}"
	       "td,th{border:1px solid #ccc;padding:2px 6px}</style>\n%s", html);
	free(html);
	free(md);
}

/* ---- the command ---- */

static int write_object(const char *path, const struct report *r)
{
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(r->sb.obj, 1, r->sb.obj_len, f) != r->sb.obj_len || fclose(f)) {
		fprintf(stderr, "l7c: error: cannot write '%s'\n", path);
		return 2;
	}
	return 0;
}

int explain(const struct ir_program *p, const struct explain_opts *o)
{
	static struct report r;   /* large: the budget model of every function */
	memset(&r, 0, sizeof(r));
	r.p = p;
	r.budget = o->budget;
	int rc = split_build(p, o->opt_level, o->budget, (enum split_mode)o->split, CG_MODE_BOTH, o->full_machinery, &r.sb, o->timers);
	if (rc) {
		report_free(&r);
		return rc;
	}
	fill_programs(&r);
	struct l7_tick t = l7_tick();
	/* a refused program's full log: beside the object asked for, else in $TMPDIR */
	char log_dir[4096] = "";
	const char *slash = o->out_path ? strrchr(o->out_path, '/') : NULL;
	if (o->out_path)
		snprintf(log_dir, sizeof(log_dir), "%.*s", slash ? (int)(slash - o->out_path) + (slash == o->out_path) : 1,
			 slash ? o->out_path : ".");
	if (o->verify && verify_object(&r, o->cgroup_root, log_dir[0] ? log_dir : NULL))
		rc = 2;
	if (o->verify)
		l7_timers_add(o->timers, L7_T_VERIFY, t);
	fill_budget(&r);
	fill_rules(&r);
	fill_limits(&r);
	if (o->format == EXPLAIN_JSON)
		json_report(&r);
	else if (o->format == EXPLAIN_HTML)
		html_report(&r);
	else
		text_report(&r);
	fflush(stdout);
	if (rc)
		fprintf(stderr, "l7c: error: --verify: %s\n", r.verify_error);
	for (int i = 0; i < r.nprogs; i++)   /* each refusal at its .l7 line, in one sentence */
		if (r.progs[i].why)
			vlog_print(stderr, r.progs[i].why, r.progs[i].f->name);
	if (r.rejected || r.attach_refused) {
		fprintf(stderr, "l7c: error: %s: the kernel refused %d program%s and %d attach%s (above)%s\n", p->source_path,
			r.rejected, r.rejected == 1 ? "" : "s", r.attach_refused, r.attach_refused == 1 ? "" : "es",
			o->out_path ? "; the object is not written" : "");
		rc = 1;
	}
	/* the object explained, so that a test loads exactly what it read; never one the kernel
	 * refused (nor an older one left at that path) */
	struct stat st;
	if (o->out_path && rc && !stat(o->out_path, &st) && S_ISREG(st.st_mode))
		unlink(o->out_path);
	else if (o->out_path && !rc)
		rc = write_object(o->out_path, &r);
	report_free(&r);
	return rc;
}
