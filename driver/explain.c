/* l7c --explain: per program, the verifier budget (instructions, estimated and, with
 * --verify, actual processed instructions, stack, tail calls); per rule, the program it landed
 * in, its share of the budget and its .l7 line; and what goes to the slow path and why.
 *
 * The numbers come from the compiled object itself: its line info (.BTF.ext) attributes every
 * instruction to the .l7 line it implements. */
#include "explain.h"

#include "budget.h"
#include "split.h"

#include <bpf/libbpf.h>
#include <cmark.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "codegen.h"
#include "frontend.h"
#include "ir.h"

#define MAX_TAIL_CALLS 33
#define STACK_LIMIT 512

struct prog {                     /* a function of the object, with the kernel's verdict */
	const struct budget_func *f;
	long processed;               /* -1 unless --verify */
	double verify_ms;
	char verdict[160];
};

struct report {
	struct split_build sb;        /* the object as l7c builds it, and its budget model */
	struct budget b;              /* == sb.b */
	struct prog progs[BUDGET_MAX_FUNCS];
	int nprogs;
	int maps;
};

/* ---- tail-call chains of split programs ---- */

/* How many tail calls it takes to reach program f: 0 for a host, k + 1 for decide program k. */
static int tail_depth(const struct budget_func *f)
{
	const char *d = strstr(f->name, "_decide_");
	return d && !f->is_subprog ? atoi(d + 8) + 1 : 0;
}

/* Prints "host -> name_0 -> ... -> name_<n-1>" for each split host. */
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
		fprintf(o, "  (%d tail call%s of %d)\n", s->nchunks, s->nchunks == 1 ? "" : "s", MAX_TAIL_CALLS);
	}
}

/* The program a function's code runs in: a rule chunk runs in the decide programs calling it. */
static const char *runs_in(const struct report *r, int f, char *buf, size_t n)
{
	const struct budget_func *fn = &r->b.funcs[f];
	if (!fn->is_chunk)
		return fn->name;
	buf[0] = 0;
	for (int i = 0; i < r->b.nfuncs; i++)
		for (int c = 0; !r->b.funcs[i].is_subprog && c < r->b.funcs[i].ncallees; c++)
			if (r->b.funcs[i].called[c] && !strcmp(r->b.funcs[i].callees[c], fn->name))
				snprintf(buf + strlen(buf), n - strlen(buf), "%s%s", buf[0] ? "," : "", r->b.funcs[i].name);
	return buf[0] ? buf : fn->name;
}

/* ---- --verify: what the kernel says ---- */

static double now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int silent(enum libbpf_print_level l, const char *f, va_list ap)
{
	(void)l, (void)f, (void)ap;
	return 0;
}

static void verify(struct report *r, const char *obj, size_t len)
{
	if (!obj) {
		fprintf(stderr, "l7c: warning: --verify: no object\n");
		return;
	}
	libbpf_set_print(silent);
	LIBBPF_OPTS(bpf_object_open_opts, oo, .object_name = "l7c-explain");
	struct bpf_object *o = bpf_object__open_mem(obj, len, &oo);
	if (!o) {
		fprintf(stderr, "l7c: warning: --verify: libbpf cannot open the object\n");
		return;
	}
	struct bpf_map *m;
	bpf_object__for_each_map(m, o)
		r->maps++;
	/* Load each program on its own (others autoload off), so one rejection does not hide the
	 * others' numbers and the time is per program. Log level 4 (statistics only) keeps the log
	 * small; a rejected program is loaded again at level 1 for the verifier's reason. */
	for (int i = 0; i < r->nprogs; i++) {
		struct prog *p = &r->progs[i];
		if (p->f->is_subprog)
			continue;
		size_t log_size = 1 << 16;
		for (int level = 4; level; level = level == 4 ? 1 : 0) {
			struct bpf_object *one = bpf_object__open_mem(obj, len, &oo);
			if (!one)
				break;
			if (level == 1)
				log_size = 64u << 20;
			char *log = calloc(1, log_size);
			struct bpf_program *bp;
			bpf_object__for_each_program(bp, one) {
				bool me = !strcmp(bpf_program__name(bp), p->f->name);
				bpf_program__set_autoload(bp, me);
				if (me) {
					bpf_program__set_log_buf(bp, log, log_size);
					bpf_program__set_log_level(bp, (__u32)level);
				}
			}
			double t0 = now_ms();
			int err = bpf_object__load(one);
			if (level == 4) {
				p->verify_ms = now_ms() - t0;
				const char *st = strstr(log, "processed ");
				p->processed = st ? strtol(st + 10, NULL, 10) : -1;
			}
			if (!err) {
				snprintf(p->verdict, sizeof(p->verdict), "accepted");
				level = 0;
			} else if (level == 1) {
				/* the verifier's reason: the last log line before its statistics */
				char *stats = strstr(log, "\nverification time");
				if (!stats)
					stats = strstr(log, "\nprocessed ");
				if (stats)
					*stats = 0;
				size_t n = strlen(log);
				while (n && log[n - 1] == '\n')
					log[--n] = 0;
				const char *why = log + n;
				while (why > log && why[-1] != '\n')
					why--;
				snprintf(p->verdict, sizeof(p->verdict), "rejected: %.140s", *why ? why : "(no verifier log)");
			}
			free(log);
			bpf_object__close(one);
			if (!err)
				break;
		}
	}
	bpf_object__close(o);
}

/* ---- output ---- */

static const char *term_name(enum ir_term t)
{
	return t == IR_FORWARD ? "forward" : t == IR_DENY ? "deny" : t == IR_FALLBACK ? "fallback" : "continue";
}

/* The rule table a rule tests (its first conjunct, ir/passes.c "tables"), or -1; *entries: the
 * table's entries that decide as this rule does. */
static int rule_table(const struct ir_program *p, const struct ir_rule *ru, int *entries)
{
	const struct ir_cond *c = ir_rule_table(ru);
	*entries = 0;
	if (!c)
		return -1;
	for (int i = 0; i < p->tables[c->table].n; i++)
		*entries += p->tables[c->table].entries[i].group == c->group;
	return c->table;
}

/* The .l7 lines a rule owns: its decision and its actions; conditions were placed on the
 * lines of their expressions, which are the rule's if-lines. */
static int rule_insns(const struct report *r, const struct ir_rule *ru, int *prog)
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
		if (dup || lines[i] >= r->b.nlines)
			continue;
		total += r->b.line_insns[lines[i]];
		if (*prog < 0)
			*prog = r->b.line_func[lines[i]];
	}
	return total;
}

static void text_report(const struct report *r, const struct ir_program *p, const struct explain_opts *o)
{
	printf("%s: %d program%s, %d rule%s, budget %ld processed instructions per program\n\n", p->source_path,
	       r->nprogs, r->nprogs == 1 ? "" : "s", p->nrules, p->nrules == 1 ? "" : "s", o->budget);
	if (r->sb.plan.unroll_max == CODEGEN_UNROLL_COMPACT)
		printf("compact compares: constants over %d bytes are one bpf_strncmp call each (unrolled, the rules "
		       "would not fit the budget or one program)\n\n", CODEGEN_UNROLL_COMPACT);
	if (r->sb.plan.gw || r->sb.plan.mesh) {
		printf("split into tail-call chains (parse half -> decide programs, %d rule chunk%s):\n", r->sb.plan.nchunks,
		       r->sb.plan.nchunks == 1 ? "" : "s");
		chains(r, stdout, "  ", "->");
		printf("\n");
	}
	printf("%-22s %-22s %7s %7s %9s %9s %6s %5s %6s  %s\n", "program", "section", "insns", "policy", "est.proc",
	       "processed", "budget", "stack", "tails", o->verify ? "verifier" : "");
	for (int i = 0; i < r->nprogs; i++) {
		const struct prog *g = &r->progs[i];
		long used = g->processed >= 0 ? g->processed : g->f->estimate;
		char proc[24] = "-", est[24] = "-", pct[24] = "-";
		if (g->processed >= 0)
			snprintf(proc, sizeof(proc), "%ld", g->processed);
		if (!g->f->is_subprog) {
			snprintf(est, sizeof(est), "%ld", g->f->estimate);
			snprintf(pct, sizeof(pct), "%.1f%%", 100.0 * (double)used / (double)o->budget);
		}
		printf("%-22s %-22s %7d %7d %9s %9s %6s %5d %3d/%-2d  %s\n", g->f->name,
		       g->f->is_chunk ? "(rule chunk)" : g->f->is_global ? "(global function)" : g->f->is_subprog ? "(bpf_loop callback)"
												  : g->f->section, g->f->insns,
		       g->f->policy_insns, est, proc, pct, g->f->stack, tail_depth(g->f), MAX_TAIL_CALLS, g->verdict);
	}
	for (int i = 0; i < r->nprogs; i++) {
		const struct prog *g = &r->progs[i];
		if (!g->f->is_subprog && g->f->stack > STACK_LIMIT)
			printf("warning: %s uses %d bytes of stack (limit %d)\n", g->f->name, g->f->stack, STACK_LIMIT);
		if (!g->f->is_subprog && (g->processed >= 0 ? g->processed : g->f->estimate) > o->budget)
			printf("warning: %s exceeds the budget%s\n", g->f->name,
			       g->processed >= 0 && g->f->estimate <= o->budget
				       ? " (the model estimated it under: l7c did not split it); lower --budget to split"
				       : "; it cannot be split further: move large rule sets to tables or sets");
	}
	if (o->verify) {
		double err = 0;
		int n = 0;
		for (int i = 0; i < r->nprogs; i++)
			if (!r->progs[i].f->is_subprog && r->progs[i].processed > 0) {
				double e = ((double)r->progs[i].f->estimate - (double)r->progs[i].processed) / (double)r->progs[i].processed;
				err += e < 0 ? -e : e;
				n++;
			}
		if (n)
			printf("estimate error: %.1f%% mean absolute over %d programs\n", 100 * err / n, n);
	}
	printf("\n%-6s %-5s %-16s %-22s %6s %7s  %s\n", "rule", "line", "policy", "program", "insns", "share", "decision");
	for (int i = 0; i < p->npolicies; i++)
		for (int k = 0; k < p->policies[i].nrules; k++) {
			const struct ir_rule *ru = &p->policies[i].rules[k];
			int prog, n = rule_insns(r, ru, &prog);
			const struct prog *g = prog >= 0 ? &r->progs[prog] : NULL;
			char dec[96], where[256];
			if (ru->term == IR_FORWARD || ru->term == IR_FALLBACK)
				snprintf(dec, sizeof(dec), "%s %s", term_name(ru->term), p->upstreams[ru->upstream].name);
			else if (ru->term == IR_DENY)
				snprintf(dec, sizeof(dec), "deny %d", ru->status);
			else
				snprintf(dec, sizeof(dec), "continue");
			int entries, t = rule_table(p, ru, &entries);
			char tab[64] = "";
			if (t >= 0)
				snprintf(tab, sizeof(tab), " (table #%d: %d rule%s)", t, entries, entries == 1 ? "" : "s");
			printf("%-6d %-5u %-16s %-22s %6d %6.2f%%  %s%s%s\n", ru->id, ru->line, p->policies[i].name,
			       g ? runs_in(r, prog, where, sizeof(where)) : "(folded away)", n,
			       g && g->f->insns ? 100.0 * n / g->f->insns : 0.0, dec,
			       ru->nactions ? " + header mutations" : "", tab);
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
	int any = 0;
	for (int i = 0; i < p->npolicies; i++)
		for (int k = 0; k < p->policies[i].nrules; k++) {
			const struct ir_rule *ru = &p->policies[i].rules[k];
			if (ru->term == IR_FALLBACK) {
				printf("  rule %d (line %u): %s\n", ru->id, ru->line, ru->reason);
				any = 1;
			}
		}
	if (!any)
		printf("  no rule sends requests to the fallback proxy\n");
	printf("  malformed or ambiguous requests: answered 400/414/431 in the kernel path, never forwarded\n"
	       "  chunked bodies, upgrades, and requests behind one that l7run holds: relayed by l7run\n");
}

static void json_str(FILE *o, const char *s)
{
	fputc('"', o);
	for (; s && *s; s++) {
		if (*s == '"' || *s == '\\')
			fprintf(o, "\\%c", *s);
		else if ((unsigned char)*s < 32)
			fprintf(o, "\\u%04x", *s);
		else
			fputc(*s, o);
	}
	fputc('"', o);
}

static void json_report(const struct report *r, const struct ir_program *p, const struct explain_opts *o)
{
	printf("{\"source\":");
	json_str(stdout, p->source_path);
	printf(",\"budget\":%ld,\"unroll_max\":%d,\"programs\":[", o->budget, r->sb.plan.unroll_max);
	for (int i = 0; i < r->nprogs; i++) {
		const struct prog *g = &r->progs[i];
		printf("%s{\"name\":\"%s\",\"section\":\"%s\",\"subprogram\":%s,\"rule_chunk\":%s,\"insns\":%d,"
		       "\"policy_insns\":%d,\"estimated_processed\":%ld,\"processed\":%ld,\"stack\":%d,\"tail_calls\":%d,"
		       "\"verify_ms\":%.2f,\"verifier\":",
		       i ? "," : "", g->f->name, g->f->section, g->f->is_subprog ? "true" : "false", g->f->is_chunk ? "true" : "false",
		       g->f->insns, g->f->policy_insns, g->f->estimate, g->processed, g->f->stack, tail_depth(g->f), g->verify_ms);
		json_str(stdout, g->verdict);
		printf("}");
	}
	printf("],\"max_tail_calls\":%d,\"chains\":[", MAX_TAIL_CALLS);
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
	printf("],\"rules\":[");
	int first = 1;
	for (int i = 0; i < p->npolicies; i++)
		for (int k = 0; k < p->policies[i].nrules; k++) {
			const struct ir_rule *ru = &p->policies[i].rules[k];
			int prog, n = rule_insns(r, ru, &prog);
			printf("%s{\"id\":%d,\"line\":%u,\"policy\":\"%s\",\"program\":", first ? "" : ",", ru->id, ru->line,
			       p->policies[i].name);
			first = 0;
			char where[256];
			json_str(stdout, prog >= 0 ? runs_in(r, prog, where, sizeof(where)) : NULL);
			printf(",\"insns\":%d,\"decision\":\"%s\",\"status\":%d,\"upstream\":", n, term_name(ru->term), ru->status);
			json_str(stdout, ru->upstream >= 0 && ru->term != IR_DENY ? p->upstreams[ru->upstream].name : "");
			int entries, t = rule_table(p, ru, &entries);
			printf(",\"table\":%d,\"table_rules\":%d,\"slow_path\":", t, entries);
			if (ru->term == IR_FALLBACK)
				json_str(stdout, ru->reason);
			else
				printf("null");
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
	printf("]}\n");
}

/* Markdown rendered to HTML by cmark. CommonMark has no tables, so the tables (and the bar per
 * program showing the budget used) are raw HTML blocks inside the Markdown. */
static void html_report(const struct report *r, const struct ir_program *p, const struct explain_opts *o)
{
	char *md = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&md, &len);
	fprintf(f, "# l7c --explain: `%s`\n\nBudget: %ld processed instructions per program%s.\n\n## Programs\n\n",
		p->source_path, o->budget, o->verify ? "; *processed* is the kernel verifier's count" : "");
	if (r->sb.plan.unroll_max == CODEGEN_UNROLL_COMPACT)
		fprintf(f, "Compact compares: constants over %d bytes are one `bpf_strncmp` call each (unrolled, the rules "
			   "would not fit the budget or one program).\n\n", CODEGEN_UNROLL_COMPACT);
	if (r->sb.plan.gw || r->sb.plan.mesh) {
		fprintf(f, "Split into tail-call chains (parse half, then decide programs; %d rule chunk%s):\n\n",
			r->sb.plan.nchunks, r->sb.plan.nchunks == 1 ? "" : "s");
		chains(r, f, "- ", "&rarr;");
		fprintf(f, "\n");
	}
	fprintf(f, "<table>\n<tr><th>program</th><th>section</th><th>insns</th><th>est. processed</th><th>processed</th>"
		   "<th>budget used</th><th>stack</th><th>tail calls</th><th>verifier</th></tr>\n");
	for (int i = 0; i < r->nprogs; i++) {
		const struct prog *g = &r->progs[i];
		if (g->f->is_subprog) {
			fprintf(f, "<tr><td>%s</td><td>%s</td><td>%d</td><td></td><td></td><td></td><td>%d</td><td></td><td></td></tr>\n",
				g->f->name, g->f->is_chunk ? "rule chunk" : g->f->is_global ? "global function" : "bpf_loop callback",
				g->f->insns, g->f->stack);
			continue;
		}
		long used = g->processed >= 0 ? g->processed : g->f->estimate;
		double pct = 100.0 * (double)used / (double)o->budget;
		int w = pct > 100 ? 100 : pct < 0.5 ? 1 : (int)pct;
		fprintf(f, "<tr><td>%s</td><td>%s</td><td>%d</td><td>%ld</td><td>%s%ld</td><td><div style=\"background:#ddd;width:200px\">"
			   "<div style=\"background:%s;width:%dpx;height:10px\"></div></div>%.2f%%</td><td>%d</td><td>%d/%d</td><td>%s</td></tr>\n",
			g->f->name, g->f->section, g->f->insns, g->f->estimate, g->processed < 0 ? "-" : "",
			g->processed < 0 ? 0 : g->processed, pct > 100 ? "#c33" : "#3a3", w * 2, pct, g->f->stack, tail_depth(g->f),
			MAX_TAIL_CALLS, g->verdict);
	}
	fprintf(f, "</table>\n\n## Rules\n\n<table>\n<tr><th>rule</th><th>line</th><th>policy</th><th>program</th><th>insns</th>"
		   "<th>decision</th></tr>\n");
	for (int i = 0; i < p->npolicies; i++)
		for (int k = 0; k < p->policies[i].nrules; k++) {
			const struct ir_rule *ru = &p->policies[i].rules[k];
			int prog, n = rule_insns(r, ru, &prog);
			char where[256], tab[64] = "";
			int entries, t = rule_table(p, ru, &entries);
			if (t >= 0)
				snprintf(tab, sizeof(tab), " (table #%d: %d rule%s)", t, entries, entries == 1 ? "" : "s");
			fprintf(f, "<tr><td>%d</td><td>%u</td><td>%s</td><td>%s</td><td>%d</td><td>%s%s%s%s</td></tr>\n", ru->id,
				ru->line, p->policies[i].name, prog >= 0 ? runs_in(r, prog, where, sizeof(where)) : "(folded away)", n,
				term_name(ru->term), ru->term == IR_FALLBACK ? ": " : "", ru->term == IR_FALLBACK ? ru->reason : "", tab);
		}
	fprintf(f, "</table>\n\n## Slow path\n\n");
	int any = 0;
	for (int i = 0; i < p->npolicies; i++)
		for (int k = 0; k < p->policies[i].nrules; k++)
			if (p->policies[i].rules[k].term == IR_FALLBACK) {
				fprintf(f, "- rule %d (line %u): %s\n", p->policies[i].rules[k].id, p->policies[i].rules[k].line,
					p->policies[i].rules[k].reason);
				any = 1;
			}
	if (!any)
		fprintf(f, "- no rule sends requests to the fallback proxy\n");
	fprintf(f, "- malformed or ambiguous requests: answered 400/414/431 in the kernel path, never forwarded\n");
	fclose(f);
	char *html = cmark_markdown_to_html(md, len, CMARK_OPT_UNSAFE);
	printf("<!doctype html>\n<meta charset=\"utf-8\"><title>l7c --explain</title>\n"
	       "<style>body{font-family:sans-serif;max-width:70em;margin:2em auto}table{border-collapse:collapse}"
	       "td,th{border:1px solid #ccc;padding:2px 6px}</style>\n%s", html);
	free(html);
	free(md);
}

int explain(const struct ir_program *p, const struct explain_opts *o)
{
	static struct report r;   /* large: the budget model of every function */
	memset(&r, 0, sizeof(r));
	int rc = split_build(p, o->opt_level, o->budget, (enum split_mode)o->split, &r.sb);
	if (rc)
		return rc;
	r.b = r.sb.b;
	r.nprogs = r.b.nfuncs;
	for (int i = 0; i < r.nprogs; i++)
		r.progs[i] = (struct prog){ .f = &r.b.funcs[i], .processed = -1 };
	if (o->out_path) {   /* the object explained, so that a test loads exactly what it read */
		FILE *f = fopen(o->out_path, "wb");
		if (!f || fwrite(r.sb.obj, 1, r.sb.obj_len, f) != r.sb.obj_len || fclose(f)) {
			fprintf(stderr, "l7c: error: cannot write '%s'\n", o->out_path);
			split_build_free(&r.sb);
			return 2;
		}
	}
	if (o->verify)
		verify(&r, r.sb.obj, r.sb.obj_len);
	if (o->format == EXPLAIN_JSON)
		json_report(&r, p, o);
	else if (o->format == EXPLAIN_HTML)
		html_report(&r, p, o);
	else
		text_report(&r, p, o);
	split_build_free(&r.sb);
	return 0;
}
