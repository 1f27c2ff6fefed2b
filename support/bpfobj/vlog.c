/* Verifier refusals explained (vlog.h).
 *
 * At log level 1 the kernel keeps only the path it was walking when it gave up: instructions as
 * "IDX: (OP) TEXT ; STATE", the source line before each new one as "; TEXT @ FILE:LINE" (from
 * the line info libbpf hands it; the file's base name only, no column), the error line, and
 * "processed N insns ...". The failing instruction is the last one before the error line.
 * Its index is into the program as libbpf loaded it: the program's own instructions, then each
 * subprogram (bpf_loop callbacks, global functions, rule chunks: .text) appended at its first
 * call or address, depth first in instruction order, as libbpf's bpf_object__reloc_code does.
 * Laying the object out the same way maps the index back to the object's own line info
 * (.BTF.ext: full path, line and column) and to the BPF function; the log's "; ... @ FILE:LINE"
 * checks the mapping, and is what is used when it disagrees. */
#include "vlog.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bpfobj.h"

static const struct {
	const char *pattern, *cause, *hint;
} vmsgs[] = {
#define L7_VMSG(id, pattern, cause, hint) { pattern, cause, hint },
#include "vmsg.def"
#undef L7_VMSG
};

/* ---- the object, laid out as libbpf loads one program ---- */

#define VLOG_MAX_FUNCS 256

struct layout {
	const struct bpfobj *o;
	int fn[VLOG_MAX_FUNCS];
	long start[VLOG_MAX_FUNCS];
	int n;
	long len;
};

static int fn_named(const struct bpfobj *o, const char *name, bool text)
{
	for (int i = 0; i < o->nfns; i++)
		if (!strcmp(o->fns[i].name, name) && !strcmp(o->fns[i].section, ".text") == text)
			return i;
	return -1;
}

static int fn_at(const struct bpfobj *o, int sec, unsigned long off)
{
	for (int i = 0; i < o->nfns; i++)
		if (o->fns[i].sec == sec && o->fns[i].off == off)
			return i;
	return -1;
}

/* The subprogram instruction i of f calls or takes the address of (a bpf_loop callback), or -1. */
static int callee(const struct bpfobj *o, const struct bpfobj_fn *f, int i)
{
	const struct bpf_insn *in = &f->insns[i];
	bool call = in->code == (BPF_JMP | BPF_CALL) && in->src_reg == BPF_PSEUDO_CALL;
	if (!call && in->code != (BPF_LD | BPF_IMM | BPF_DW))
		return -1;
	const char *sym = bpfobj_reloc(o, f, i);
	if (sym)
		return fn_named(o, sym, true);   /* a map's name finds no function */
	if (call)   /* a call within the section, not relocated */
		return fn_at(o, f->sec, f->off + (unsigned long)((long)i + in->imm + 1) * sizeof(*in));
	return -1;
}

static void append(struct layout *L, int fi)
{
	if (L->n == VLOG_MAX_FUNCS)
		return;
	const struct bpfobj_fn *f = &L->o->fns[fi];
	L->fn[L->n] = fi;
	L->start[L->n++] = L->len;
	L->len += f->n;
	for (int i = 0; i < f->n; i++) {
		int t = callee(L->o, f, i);
		bool seen = t < 0;
		for (int k = 0; !seen && k < L->n; k++)
			seen = L->fn[k] == t;
		if (!seen)
			append(L, t);
		if (f->insns[i].code == (BPF_LD | BPF_IMM | BPF_DW))
			i++;
	}
}

/* A function's frame as the kernel adds it up (each rounded to 16 bytes, at least 16): its
 * deepest r10-based access. */
static int frame(const struct bpfobj_fn *f)
{
	int s = 0;
	for (int i = 0; i < f->n; i++) {
		const struct bpf_insn *in = &f->insns[i];
		int cls = BPF_CLASS(in->code);
		int base = cls == BPF_LDX ? in->src_reg : cls == BPF_ST || cls == BPF_STX ? in->dst_reg : -1;
		if (base == BPF_REG_10 && in->off < 0 && -in->off > s)
			s = -in->off;
	}
	return s ? (s + 15) / 16 * 16 : 16;
}

/* The deepest stack of the call chains from fi, the chain in chain[] (its length in *n) and, in
 * *site, the instruction of fi that starts it (-1: fi calls nothing). */
static int deepest(const struct bpfobj *o, int fi, int depth, int *chain, int *n, int *site)
{
	const struct bpfobj_fn *f = &o->fns[fi];
	int best = 0, best_chain[8], best_n = 0;
	bool seen[VLOG_MAX_FUNCS] = { 0 };   /* each callee once, whatever its call sites */
	*site = -1;
	for (int i = 0; depth < 8 && i < f->n; i++) {
		int t = callee(o, f, i), sub_chain[8], sub_n = 0, sub_site;
		if (t >= 0 && t != fi && t < VLOG_MAX_FUNCS && !seen[t]) {
			seen[t] = true;
			int d = deepest(o, t, depth + 1, sub_chain, &sub_n, &sub_site);
			if (d > best) {
				best = d, best_n = sub_n, *site = i;
				memcpy(best_chain, sub_chain, sizeof(int) * (size_t)sub_n);
			}
		}
		if (f->insns[i].code == (BPF_LD | BPF_IMM | BPF_DW))
			i++;
	}
	chain[0] = fi;
	memcpy(chain + 1, best_chain, sizeof(int) * (size_t)(best_n < 7 ? best_n : 7));
	*n = 1 + (best_n < 7 ? best_n : 7);
	return frame(f) + best;
}

/* Where instruction idx of the loaded program comes from; false if it is past the layout. */
static bool locate(const struct layout *L, long idx, struct vlog_where *w)
{
	for (int k = 0; k < L->n; k++) {
		const struct bpfobj_fn *f = &L->o->fns[L->fn[k]];
		if (idx < L->start[k] || idx >= L->start[k] + f->n)
			continue;
		const char *path;
		unsigned col, line = bpfobj_loc(L->o, f, (int)(idx - L->start[k]), &path, &col);
		memset(w, 0, sizeof(*w));
		snprintf(w->bpf_func, sizeof(w->bpf_func), "%s", f->name);
		if (line) {
			snprintf(w->file, sizeof(w->file), "%s", path);
			w->line = line, w->col = col;
		}
		return true;
	}
	return false;
}

/* ---- the log ---- */

static const char *base_name(const char *p)
{
	const char *s = strrchr(p, '/');
	return s ? s + 1 : p;
}

static bool is_l7(const char *file)
{
	size_t n = strlen(file);
	return n > 3 && !strcmp(file + n - 3, ".l7");
}

/* "IDX: (OP) TEXT": the index, and TEXT without the state the log prints after it */
static long insn_line(const char *l, char *text, size_t n)
{
	char *end;
	long idx = strtol(l, &end, 10);
	if (end == l || end[0] != ':' || end[1] != ' ' || end[2] != '(' || !end[3] || !end[4] || end[5] != ')')
		return -1;
	const char *t = end + 7, *semi = strstr(t, " ; ");
	size_t len = semi ? (size_t)(semi - t) : strlen(t);
	while (len && t[len - 1] == ' ')
		len--;
	snprintf(text, n, "%d: %.*s", (int)idx, (int)len, t);
	return idx;
}

/* "; TEXT @ FILE:LINE": the file's base name and the line */
static bool source_line(const char *l, char *file, size_t n, unsigned *line)
{
	if (l[0] != ';' || l[1] != ' ')
		return false;
	const char *at = strstr(l, " @ ");
	for (const char *a = at; a; a = strstr(a + 3, " @ "))   /* the last " @ " */
		at = a;
	const char *colon = at ? strrchr(at, ':') : NULL;
	if (!colon)
		return false;
	snprintf(file, n, "%.*s", (int)(colon - at - 3), at + 3);
	*line = (unsigned)strtoul(colon + 1, NULL, 10);
	return *line > 0;
}

static bool stats_line(const char *l)
{
	return !strncmp(l, "processed ", 10) || !strncmp(l, "verification time", 17) ||
	       !strncmp(l, "stack depth", 11);
}

/* The C function that holds line `line` of the file at path: the nearest line at or above it
 * that starts in column 0 with a declaration that has a parameter list ("static inline int
 * l7_foo(" or "l7_foo("). Empty when the file is not there (an installed l7c, another machine). */
static void c_function(const char *path, unsigned line, char *out, size_t n)
{
	out[0] = 0;
	FILE *f = path[0] ? fopen(path, "r") : NULL;
	if (!f)
		return;
	char buf[512];
	for (unsigned k = 1; k <= line && fgets(buf, sizeof(buf), f); k++) {
		char c = buf[0];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') || !strncmp(buf, "SEC(", 4))
			continue;
		char *paren = strchr(buf, '(');
		char *eq = strchr(buf, '=');
		if (!paren || (eq && eq < paren))
			continue;
		char *e = paren;
		while (e > buf && e[-1] == ' ')
			e--;
		char *s = e;
		while (s > buf && (s[-1] == '_' || (s[-1] >= 'a' && s[-1] <= 'z') || (s[-1] >= 'A' && s[-1] <= 'Z') ||
				   (s[-1] >= '0' && s[-1] <= '9')))
			s--;
		bool lower = false;
		for (char *q = s; q < e; q++)
			lower |= *q >= 'a' && *q <= 'z';
		static const char *const not_fn[] = { "if", "for", "while", "switch", "return", "sizeof", "__attribute__" };
		bool keyword = false;
		for (size_t i = 0; i < sizeof not_fn / sizeof not_fn[0]; i++)
			keyword |= (size_t)(e - s) == strlen(not_fn[i]) && !strncmp(s, not_fn[i], (size_t)(e - s));
		if (e > s && lower && !keyword)
			snprintf(out, n, "%.*s", (int)(e - s), s);
	}
	fclose(f);
}

/* The line's text, when the file is there; and for line info without a column (codegen's
 * cg_di_at emits none for .l7 lines, and the machinery is built with -gcodeview, which has no
 * column info) the line's first non-blank character, where its statement starts. */
static void read_line(struct vlog_where *w)
{
	FILE *f = w->file[0] && w->line ? fopen(w->file, "r") : NULL;
	if (!f)
		return;
	char buf[1024];
	for (unsigned k = 1; fgets(buf, sizeof(buf), f); k++)
		if (k == w->line) {
			buf[strcspn(buf, "\r\n")] = 0;
			snprintf(w->text, sizeof(w->text), "%.*s", (int)sizeof(w->text) - 1, buf);
			unsigned c = (unsigned)strspn(buf, " \t");
			if (!w->col)
				w->col = buf[c] ? c + 1 : 0;
			break;
		}
	fclose(f);
}

/* The log's lines, without copying them: lines[i] of lens[i] bytes. */
struct lines {
	const char **at;
	size_t *len, n;
};

static void split_lines(struct lines *ls, const char *p)
{
	size_t cap = 256;
	ls->at = malloc(cap * sizeof(*ls->at));
	ls->len = malloc(cap * sizeof(*ls->len));
	ls->n = 0;
	while (*p && ls->at && ls->len) {
		const char *e = strchr(p, '\n');
		size_t l = e ? (size_t)(e - p) : strlen(p);
		if (ls->n == cap) {
			cap *= 2;
			ls->at = realloc(ls->at, cap * sizeof(*ls->at));
			ls->len = realloc(ls->len, cap * sizeof(*ls->len));
			if (!ls->at || !ls->len)
				break;
		}
		ls->at[ls->n] = p, ls->len[ls->n++] = l;
		p += l + (e != NULL);
	}
	if (!ls->at || !ls->len)
		ls->n = 0;
}

/* line i as a string (long lines cut: nothing the parser looks at is that far in) */
static const char *line_at(const struct lines *ls, long i, char *buf, size_t n)
{
	snprintf(buf, n, "%.*s", (int)ls->len[i], ls->at[i]);
	return buf;
}

/* A stack refusal names no instruction: the object's deepest call chain, and its first call
 * as the place. */
static void stack_chain(struct vlog_explained *x, const struct bpfobj *o, const struct layout *L, int main_fn)
{
	int chain[8], n, site, total = deepest(o, main_fn, 0, chain, &n, &site);
	size_t w = (size_t)snprintf(x->chain, sizeof(x->chain), "%d bytes:", total);
	for (int k = 0; k < n && w < sizeof(x->chain); k++)
		w += (size_t)snprintf(x->chain + w, sizeof(x->chain) - w, "%s %s (%d)", k ? " ->" : "", o->fns[chain[k]].name,
				      frame(&o->fns[chain[k]]));
	if (site >= 0 && locate(L, site, &x->at))
		snprintf(x->insn, sizeof(x->insn), "%d: call %s", site, o->fns[chain[1]].name);
}

void vlog_explain(const char *log, const void *obj, size_t len, const char *prog, struct vlog_explained *x)
{
	memset(x, 0, sizeof(*x));
	x->insn_idx = -1;
	x->processed = -1;
	struct lines ls;
	split_lines(&ls, log ? log : "");
	char line[1024], insn[160];

	/* the end of the error: the last line before the statistics */
	long err = -1;
	for (long i = (long)ls.n - 1; i >= 0 && err < 0; i--) {
		line_at(&ls, i, line, sizeof(line));
		if (!strncmp(line, "processed ", 10))
			x->processed = strtol(line + 10, NULL, 10);
		if (line[0] && !stats_line(line))
			err = i;
	}
	if (err < 0) {
		snprintf(x->error, sizeof(x->error), "(the verifier wrote no log)");
		free(ls.at);
		free(ls.len);
		return;
	}
	/* the failing instruction: the last one before it */
	long fail = -1;
	for (long i = err - 1; i >= 0 && fail < 0; i--)
		if ((x->insn_idx = insn_line(line_at(&ls, i, line, sizeof(line)), insn, sizeof(insn))) >= 0) {
			fail = i;
			snprintf(x->insn, sizeof(x->insn), "%s", insn);
		}
	/* the error: the lines after it ("invalid access to map value, ..." then "R1 min value is
	 * outside of the allowed memory range"), else the last line; and vmsg.def's sentence */
	size_t w = 0;
	for (long i = fail >= 0 ? fail + 1 : err; i <= err && w + 2 < sizeof(x->error); i++)
		w += (size_t)snprintf(x->error + w, sizeof(x->error) - w, "%s%.*s", w ? "; " : "", (int)ls.len[i], ls.at[i]);
	for (size_t i = 0; i < sizeof vmsgs / sizeof vmsgs[0] && !x->cause; i++)
		if (strstr(x->error, vmsgs[i].pattern))
			x->cause = vmsgs[i].cause, x->hint = vmsgs[i].hint;

	/* where it is: the object laid out as libbpf loaded it, checked against the log's line */
	struct bpfobj o;
	struct layout L = { .o = &o };
	bool have_obj = obj && !bpfobj_open(&o, obj, len);
	if (obj && !have_obj)
		bpfobj_close(&o);   /* what the failed open holds */
	int main_fn = have_obj ? fn_named(&o, prog, false) : -1;
	if (main_fn >= 0)
		append(&L, main_fn);
	char log_file[256] = "";
	unsigned log_line = 0;
	for (long i = fail - 1; i >= 0 && !log_line; i--)
		source_line(line_at(&ls, i, line, sizeof(line)), log_file, sizeof(log_file), &log_line);
	bool layout = main_fn >= 0;
	if (x->insn_idx >= 0) {
		if (layout && locate(&L, x->insn_idx, &x->at) && log_line &&
		    (x->at.line != log_line || strcmp(base_name(x->at.file), log_file)))
			layout = false;   /* not libbpf's layout after all: the log's lines only */
		if (!layout) {
			memset(&x->at, 0, sizeof(x->at));
			snprintf(x->at.file, sizeof(x->at.file), "%s", log_file);
			x->at.line = log_line;
		}
	}
	/* the policy's part: the last of the path's instructions (else source lines) from a .l7 */
	for (long i = fail; i >= 0 && !x->policy.file[0]; i--) {
		line_at(&ls, i, line, sizeof(line));
		long idx = layout ? insn_line(line, insn, sizeof(insn)) : -1;
		struct vlog_where at;
		char f[256];
		unsigned l;
		if (idx >= 0 && locate(&L, idx, &at) && is_l7(at.file))
			x->policy = at;
		else if (!layout && source_line(line, f, sizeof(f), &l) && is_l7(f)) {
			snprintf(x->policy.file, sizeof(x->policy.file), "%s", f);
			x->policy.line = l;
		}
	}
	if (x->insn_idx < 0 && main_fn >= 0 && (strstr(x->error, "stack size") || strstr(x->error, "stack depth")))
		stack_chain(x, &o, &L, main_fn);
	read_line(&x->at);
	read_line(&x->policy);
	if (x->at.file[0] && !is_l7(x->at.file))
		c_function(x->at.file, x->at.line, x->at.func, sizeof(x->at.func));
	if (have_obj)
		bpfobj_close(&o);
	free(ls.at);
	free(ls.len);
}

int vlog_write(const char *log, const char *dir, const char *stem, const char *prog, struct vlog_explained *x)
{
	const char *tmp = getenv("TMPDIR") && getenv("TMPDIR")[0] ? getenv("TMPDIR") : "/tmp";
	char path[sizeof(x->log_path)];
	x->log_path[0] = 0;
	snprintf(path, sizeof(path), "%s/%s-%s.verifier.log", dir && dir[0] ? dir : tmp, stem, prog);
	/* not through a link someone else left in a shared directory */
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0 && dir && dir[0]) {   /* the output's directory is not there: $TMPDIR */
		snprintf(path, sizeof(path), "%s/%s-%s.verifier.log", tmp, stem, prog);
		fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
	}
	if (fd < 0)
		return -1;
	size_t n = log ? strlen(log) : 0, done = 0;
	while (done < n) {
		ssize_t w = write(fd, log + done, n - done);
		if (w <= 0)
			break;
		done += (size_t)w;
	}
	if (close(fd) || done != n)
		return -1;
	snprintf(x->log_path, sizeof(x->log_path), "%s", path);
	return 0;
}

/* "FILE:LINE:COL: " or "FILE:LINE: " or "" */
static void loc(char *buf, size_t n, const struct vlog_where *w)
{
	if (!w->file[0] || !w->line)
		buf[0] = 0;
	else if (w->col)
		snprintf(buf, n, "%s:%u:%u: ", w->file, w->line, w->col);
	else
		snprintf(buf, n, "%s:%u: ", w->file, w->line);
}

/* The function the failing instruction is in: "the machinery's l7_foo (inlined into
 * l7_chunk_step)" when the diagnostic is at a .l7 line and the instruction is not (an l7c
 * object), else "l7_foo" when that is not the program itself; "" if nothing to add. */
static void in_function(char *buf, size_t n, const struct vlog_explained *x, const char *prog)
{
	const char *fn = x->at.func[0] ? x->at.func : x->at.bpf_func;
	bool inlined = x->at.bpf_func[0] && strcmp(x->at.bpf_func, fn) && strcmp(x->at.bpf_func, prog);
	buf[0] = 0;
	if (x->policy.file[0] && !is_l7(x->at.file))
		snprintf(buf, n, "the machinery's %s%s%s%s", fn[0] ? fn : "code", inlined ? " (inlined into " : "",
			 inlined ? x->at.bpf_func : "", inlined ? ")" : "");
	else if (fn[0] && strcmp(fn, prog))
		snprintf(buf, n, "%s%s%s%s", fn, inlined ? " (inlined into " : "", inlined ? x->at.bpf_func : "",
			 inlined ? ")" : "");
}

void vlog_print(FILE *out, const struct vlog_explained *x, const char *prog)
{
	char at[320], mat[320], fn[200];
	loc(at, sizeof(at), x->policy.file[0] ? &x->policy : &x->at);
	loc(mat, sizeof(mat), &x->at);
	in_function(fn, sizeof(fn), x, prog);
	fprintf(out, "%serror: the kernel refused program %s: %s\n", at, prog, x->cause ? x->cause : x->error);
	const struct vlog_where *w = x->policy.file[0] ? &x->policy : &x->at;
	if (w->text[0] && w->col && w->col <= strlen(w->text)) {   /* the line and a caret, as l7_diag */
		fprintf(out, "%5u | %s\n      | ", w->line, w->text);
		for (unsigned i = 0; i + 1 < w->col; i++)
			fputc(w->text[i] == '\t' ? '\t' : ' ', out);
		fprintf(out, "^\n");
	}
	if (x->chain[0])
		fprintf(out, "%snote: the deepest call chain, from instruction %s: %s\n", mat, x->insn[0] ? x->insn : "?",
			x->chain);
	else if (x->insn[0])
		fprintf(out, "%snote: the verifier stopped at instruction %s%s%s\n", mat, x->insn, fn[0] ? ", in " : "", fn);
	if (x->hint && x->hint[0])
		fprintf(out, "%snote: %s\n", at, x->hint);
	if (x->cause)
		fprintf(out, "%snote: the verifier's words: %s\n", at, x->error);
	if (x->log_path[0])
		fprintf(out, "%snote: full verifier log in %s\n", at, x->log_path);
}

void vlog_line(char *buf, size_t n, const struct vlog_explained *x, const char *prog)
{
	char at[320], mat[320], fn[200], in[640] = "";
	loc(at, sizeof(at), x->policy.file[0] ? &x->policy : &x->at);
	loc(mat, sizeof(mat), &x->at);
	in_function(fn, sizeof(fn), x, prog);
	bool elsewhere = strcmp(at, mat) && mat[0];   /* the instruction is not at the diagnostic's line */
	size_t ml = strlen(mat);
	if (ml >= 2)
		mat[ml - 2] = 0;   /* without ": " */
	if (x->chain[0])
		snprintf(in, sizeof(in), " (the deepest call chain, from instruction %s: %s)", x->insn[0] ? x->insn : "?",
			 x->chain);
	else if (x->insn[0])
		snprintf(in, sizeof(in), " (at instruction %s%s%s%s%s)", x->insn, fn[0] ? ", in " : "", fn,
			 elsewhere ? ", " : "", elsewhere ? mat : "");
	snprintf(buf, n, "%serror: the kernel refused program %s: %s%s%s%s%s%s%s; full verifier log in %s", at, prog,
		 x->cause ? x->cause : x->error, in, x->hint && x->hint[0] ? "; " : "", x->hint ? x->hint : "",
		 x->cause ? " [the verifier: " : "", x->cause ? x->error : "", x->cause ? "]" : "",
		 x->log_path[0] ? x->log_path : "(not written)");
}
