/* Regex -> minimal DFA (see regex_dfa.h).
 *
 *   parse      recursive descent into nodes; every refusal names a byte of the regex
 *   nfa        Thompson construction; ^ and $ are assertion edges, counted repetition copies
 *   classes    the bytes split by every set some transition tests
 *   subsets    states are sets of NFA states; ^ is followed only from the initial state, $ only
 *              when deciding whether a state accepts (the input ends there)
 *   minimise   Moore's partition refinement, then states renumbered breadth-first (dead = 0)
 *              and classes with identical columns merged
 * Nothing here backtracks: matching reads each byte once. */
#include "regex_dfa.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- byte sets ---- */

struct bset {
	uint64_t w[4];
};

static void bs_add(struct bset *s, unsigned c) { s->w[c >> 6] |= 1ull << (c & 63); }
static bool bs_has(const struct bset *s, unsigned c) { return s->w[c >> 6] >> (c & 63) & 1; }
static void bs_range(struct bset *s, unsigned lo, unsigned hi)
{
	for (unsigned c = lo; c <= hi; c++)
		bs_add(s, c);
}
static void bs_or(struct bset *s, const struct bset *o)
{
	for (int i = 0; i < 4; i++)
		s->w[i] |= o->w[i];
}
static void bs_not(struct bset *s)
{
	for (int i = 0; i < 4; i++)
		s->w[i] = ~s->w[i];
}

/* ---- parse ---- */

enum node_kind { N_EMPTY, N_SET, N_CAT, N_ALT, N_REPEAT, N_BOL, N_EOL };

struct node {
	enum node_kind k;
	int a, b;          /* CAT, ALT; REPEAT: a */
	int set;           /* SET */
	int min, max;      /* REPEAT; max -1: unbounded */
};

#define MAX_DEPTH 100

struct rp {
	const char *s;
	size_t n, i;
	struct node *nodes;
	int nn, ncap;
	struct bset *sets;
	int nsets, scap;
	int depth;
	struct re_error *err;
	bool failed;
};

static int fail(struct rp *p, size_t pos, size_t len, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int fail(struct rp *p, size_t pos, size_t len, const char *fmt, ...)
{
	if (p->failed)
		return -1;
	p->failed = true;
	p->err->pos = pos;
	p->err->len = len ? len : 1;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(p->err->msg, sizeof(p->err->msg), fmt, ap);
	va_end(ap);
	return -1;
}

static int node(struct rp *p, enum node_kind k, int a, int b)
{
	if (p->nn == p->ncap) {
		p->ncap = p->ncap ? p->ncap * 2 : 64;
		p->nodes = realloc(p->nodes, sizeof(*p->nodes) * (size_t)p->ncap);
	}
	p->nodes[p->nn] = (struct node){ .k = k, .a = a, .b = b, .set = -1 };
	return p->nn++;
}

static int set_node(struct rp *p, const struct bset *s)
{
	int i = 0;
	while (i < p->nsets && memcmp(&p->sets[i], s, sizeof(*s)))
		i++;
	if (i == p->nsets) {
		if (p->nsets == p->scap) {
			p->scap = p->scap ? p->scap * 2 : 16;
			p->sets = realloc(p->sets, sizeof(*p->sets) * (size_t)p->scap);
		}
		p->sets[p->nsets++] = *s;
	}
	int n = node(p, N_SET, -1, -1);
	p->nodes[n].set = i;
	return n;
}

static int peek(const struct rp *p) { return p->i < p->n ? (unsigned char)p->s[p->i] : -1; }

static bool is_alnum(int c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

static int hexval(int c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* \d \w \s and their negations */
static bool class_escape(int c, struct bset *s)
{
	memset(s, 0, sizeof(*s));
	switch (c | 0x20) {
	case 'd': bs_range(s, '0', '9'); break;
	case 'w': bs_range(s, '0', '9'); bs_range(s, 'a', 'z'); bs_range(s, 'A', 'Z'); bs_add(s, '_'); break;
	case 's': bs_add(s, ' '); bs_range(s, '\t', '\r'); break;   /* \t \n \v \f \r */
	default: return false;
	}
	if (c >= 'A' && c <= 'Z')
		bs_not(s);
	return true;
}

/* An escape at p->i (the backslash): a class into *set (returns 1), or one byte (returns 0 and
 * *byte), or -1 after reporting. */
static int escape(struct rp *p, struct bset *set, int *byte)
{
	size_t at = p->i++;
	int c = peek(p);
	if (c < 0)
		return fail(p, at, 1, "trailing '\\' at the end of the regex");
	p->i++;
	if (c >= '1' && c <= '9')
		return fail(p, at, 2, "backreference \\%c: not a regular language; l7c regexes compile to a DFA", c);
	if (class_escape(c, set))
		return 1;
	switch (c) {
	case 'n': *byte = '\n'; return 0;
	case 'r': *byte = '\r'; return 0;
	case 't': *byte = '\t'; return 0;
	case 'f': *byte = '\f'; return 0;
	case 'v': *byte = '\v'; return 0;
	case 'x': {
		int h = p->i < p->n ? hexval((unsigned char)p->s[p->i]) : -1;
		int l = p->i + 1 < p->n ? hexval((unsigned char)p->s[p->i + 1]) : -1;
		if (h < 0 || l < 0)
			return fail(p, at, 2, "\\x needs two hex digits (\\x41)");
		p->i += 2;
		*byte = h * 16 + l;
		return 0;
	}
	case 'b':
	case 'B':
	case 'A':
	case 'z':
	case 'Z':
		return fail(p, at, 2, "assertion \\%c is not supported (matches() always matches the whole value)", c);
	}
	if (is_alnum(c))
		return fail(p, at, 2, "unknown escape \\%c", c);
	*byte = c;   /* \. \/ \\ \( ... and any other non-alphanumeric byte: itself */
	return 0;
}

static const struct {
	const char *name;
	const char *ranges;   /* pairs lo,hi */
} posix_classes[] = {
	{ "alpha", "azAZ" }, { "digit", "09" }, { "alnum", "azAZ09" }, { "upper", "AZ" }, { "lower", "az" },
	{ "space", "  \t\r" }, { "blank", "  \t\t" }, { "xdigit", "09afAF" }, { "punct", "!/:@[`{~" },
	{ "print", " ~" }, { "graph", "!~" }, { "cntrl", "\x01\x1f\x7f\x7f" },
};

/* [...]: at p->i the '[' */
static int bracket(struct rp *p)
{
	size_t open = p->i++;
	struct bset s = { { 0 } };
	bool neg = peek(p) == '^';
	if (neg)
		p->i++;
	bool first = true;
	for (;;) {
		int c = peek(p);
		if (c < 0)
			return fail(p, open, 1, "missing ']' for this '['");
		if (c == ']' && !first)
			break;
		first = false;
		size_t at = p->i;
		int lo;
		if (c == '[' && p->i + 1 < p->n && (p->s[p->i + 1] == ':' || p->s[p->i + 1] == '=' || p->s[p->i + 1] == '.')) {
			char kind = p->s[p->i + 1];
			const char *end = NULL;
			for (size_t k = p->i + 2; k + 1 < p->n && !end; k++)
				if (p->s[k] == kind && p->s[k + 1] == ']')
					end = p->s + k;
			if (!end)
				return fail(p, at, 2, "missing '%c]' for this '[%c'", kind, kind);
			size_t nlen = (size_t)(end - (p->s + p->i + 2));
			if (kind != ':')
				return fail(p, at, nlen + 4, "collating elements and equivalence classes ([%c...%c]) are not supported", kind, kind);
			size_t k = 0;
			while (k < sizeof(posix_classes) / sizeof(posix_classes[0]) &&
			       (strlen(posix_classes[k].name) != nlen || memcmp(posix_classes[k].name, p->s + p->i + 2, nlen)))
				k++;
			if (k == sizeof(posix_classes) / sizeof(posix_classes[0]))
				return fail(p, at, nlen + 4, "unknown character class [:%.*s:]", (int)nlen, p->s + p->i + 2);
			const char *r = posix_classes[k].ranges;
			for (size_t j = 0; r[j] && r[j + 1]; j += 2)
				bs_range(&s, (unsigned char)r[j], (unsigned char)r[j + 1]);
			if (!strcmp(posix_classes[k].name, "cntrl"))
				bs_add(&s, 0);
			p->i += nlen + 4;
			continue;
		}
		if (c == '\\') {
			struct bset cs;
			int r = escape(p, &cs, &lo);
			if (r < 0)
				return -1;
			if (r == 1) {
				bs_or(&s, &cs);
				continue;
			}
		} else {
			lo = c;
			p->i++;
		}
		/* a range lo-hi, unless the '-' is the last thing before ']' */
		if (peek(p) == '-' && p->i + 1 < p->n && p->s[p->i + 1] != ']') {
			p->i++;
			int hi;
			if (peek(p) == '\\') {
				struct bset cs;
				int r = escape(p, &cs, &hi);
				if (r < 0)
					return -1;
				if (r == 1)
					return fail(p, at, p->i - at, "a class escape cannot end a range");
			} else if (peek(p) == '[' && p->i + 1 < p->n && p->s[p->i + 1] == ':') {
				return fail(p, at, p->i - at + 1, "a character class cannot end a range");
			} else {
				hi = peek(p);
				p->i++;
			}
			if (hi < lo)
				return fail(p, at, p->i - at, "range %.*s is reversed", (int)(p->i - at), p->s + at);
			bs_range(&s, (unsigned)lo, (unsigned)hi);
		} else {
			bs_add(&s, (unsigned)lo);
		}
	}
	p->i++;   /* ']' */
	if (neg)
		bs_not(&s);
	return set_node(p, &s);
}

static int parse_alt(struct rp *p);

static bool is_quant(int c) { return c == '*' || c == '+' || c == '?' || c == '{'; }

static int atom(struct rp *p)
{
	size_t at = p->i;
	int c = peek(p);
	struct bset s = { { 0 } };
	switch (c) {
	case '(': {
		p->i++;
		if (peek(p) == '?') {
			int k = p->i + 1 < p->n ? (unsigned char)p->s[p->i + 1] : -1;
			int k2 = p->i + 2 < p->n ? (unsigned char)p->s[p->i + 2] : -1;
			if (k == '=' || k == '!' || (k == '<' && (k2 == '=' || k2 == '!')))
				return fail(p, at, k == '<' ? 4 : 3, "lookaround (%.*s...): not a regular language; l7c regexes compile to a DFA",
					    k == '<' ? 3 : 2, p->s + at + 1);
			if (k != ':')
				return fail(p, at, 2, "unsupported group '(?'; groups are (...) or (?:...)");
			p->i += 2;
		}
		int inner = parse_alt(p);
		if (inner < 0)
			return -1;
		if (peek(p) != ')')
			return fail(p, at, 1, "missing ')' for this '('");
		p->i++;
		return inner;
	}
	case '[': return bracket(p);
	case '.':
		p->i++;
		bs_not(&s);
		return set_node(p, &s);
	case '^': p->i++; return node(p, N_BOL, -1, -1);
	case '$': p->i++; return node(p, N_EOL, -1, -1);
	case '\\': {
		int b;
		int r = escape(p, &s, &b);
		if (r < 0)
			return -1;
		if (r == 0)
			bs_add(&s, (unsigned)b);
		return set_node(p, &s);
	}
	default:
		if (is_quant(c))
			return fail(p, at, 1, "'%c' has nothing to repeat%s", c, c == '{' ? " (a literal brace is \\{)" : "");
		p->i++;
		bs_add(&s, (unsigned)c);
		return set_node(p, &s);
	}
}

static int count(struct rp *p, size_t open)
{
	int v = 0, digits = 0;
	while (peek(p) >= '0' && peek(p) <= '9') {
		if (v <= RE_MAX_REPEAT)
			v = v * 10 + (peek(p) - '0');
		p->i++;
		digits++;
	}
	if (!digits)
		return fail(p, open, p->i - open + 1, "expected a count: {m}, {m,n} or {m,} (a literal brace is \\{)");
	if (v > RE_MAX_REPEAT)
		return fail(p, open, p->i - open, "repetition count above %d", RE_MAX_REPEAT);
	return v;
}

/* atom, then at most one quantifier */
static int repeat(struct rp *p)
{
	size_t at = p->i;
	int a = atom(p);
	if (a < 0)
		return -1;
	int c = peek(p);
	if (!is_quant(c))
		return a;
	size_t q = p->i++;
	if (p->nodes[a].k == N_BOL || p->nodes[a].k == N_EOL)
		return fail(p, q, 1, "'%c' has nothing to repeat (it follows an anchor)", c);
	int min = 0, max = -1;
	if (c == '+')
		min = 1;
	else if (c == '?')
		max = 1;
	else if (c == '{') {
		if ((min = count(p, q)) < 0)
			return -1;
		max = min;
		if (peek(p) == ',') {
			p->i++;
			max = -1;
			if (peek(p) != '}' && (max = count(p, q)) < 0)
				return -1;
		}
		if (peek(p) != '}')
			return fail(p, q, p->i - q + 1, "expected a count: {m}, {m,n} or {m,} (a literal brace is \\{)");
		p->i++;
		if (max >= 0 && max < min)
			return fail(p, q, p->i - q, "repetition %.*s: the minimum exceeds the maximum", (int)(p->i - q), p->s + q);
	}
	if (is_quant(peek(p)))
		return fail(p, p->i, 1, "a quantifier cannot follow another; group the repeated part: (%.*s)%c",
			    (int)(p->i - at), p->s + at, peek(p));
	int r = node(p, N_REPEAT, a, -1);
	p->nodes[r].min = min;
	p->nodes[r].max = max;
	return r;
}

static int parse_cat(struct rp *p)
{
	int acc = -1;
	while (!p->failed && p->i < p->n && peek(p) != '|' && peek(p) != ')') {
		int r = repeat(p);
		if (r < 0)
			return -1;
		acc = acc < 0 ? r : node(p, N_CAT, acc, r);
	}
	return acc < 0 ? node(p, N_EMPTY, -1, -1) : acc;
}

static int parse_alt(struct rp *p)
{
	if (++p->depth > MAX_DEPTH)
		return fail(p, p->i ? p->i - 1 : 0, 1, "groups nested more than %d deep", MAX_DEPTH);
	int a = parse_cat(p);
	while (a >= 0 && peek(p) == '|') {
		p->i++;
		int b = parse_cat(p);
		a = b < 0 ? -1 : node(p, N_ALT, a, b);
	}
	p->depth--;
	return a;
}

/* ---- Thompson NFA ---- */

enum { S_EPS, S_CHAR, S_BOL, S_EOL, S_MATCH };

struct nst {
	unsigned char kind;
	int set;
	int out, out1;     /* -1: none */
};

struct nfa {
	struct nst *st;
	int n, cap;
	bool full;
	const struct rp *p;
};

struct frag {
	int start, end;    /* end: an S_EPS whose out is still open */
};

static int nst(struct nfa *f, int kind, int set)
{
	if (f->n == RE_MAX_NFA) {
		f->full = true;
		return 0;   /* keep building into state 0; the result is discarded */
	}
	if (f->n == f->cap) {
		f->cap = f->cap ? f->cap * 2 : 256;
		f->st = realloc(f->st, sizeof(*f->st) * (size_t)f->cap);
	}
	f->st[f->n] = (struct nst){ (unsigned char)kind, set, -1, -1 };
	return f->n++;
}

static void link_to(struct nfa *f, int from_end, int to) { f->st[from_end].out = to; }

static struct frag build(struct nfa *f, int n);

static struct frag cat(struct nfa *f, struct frag a, struct frag b)
{
	link_to(f, a.end, b.start);
	return (struct frag){ a.start, b.end };
}

static struct frag build_repeat(struct nfa *f, const struct node *nd)
{
	int e0 = nst(f, S_EPS, -1);
	struct frag acc = { e0, e0 };
	for (int i = 0; i < nd->min && !f->full; i++)
		acc = cat(f, acc, build(f, nd->a));
	if (nd->max < 0) {   /* x* : s -> x -> s, s -> e */
		struct frag x = build(f, nd->a);
		int s = nst(f, S_EPS, -1), e = nst(f, S_EPS, -1);
		f->st[s].out = x.start;
		f->st[s].out1 = e;
		link_to(f, x.end, s);
		return cat(f, acc, (struct frag){ s, e });
	}
	for (int i = nd->min; i < nd->max && !f->full; i++) {   /* x? each */
		struct frag x = build(f, nd->a);
		int s = nst(f, S_EPS, -1), e = nst(f, S_EPS, -1);
		f->st[s].out = x.start;
		f->st[s].out1 = e;
		link_to(f, x.end, e);
		acc = cat(f, acc, (struct frag){ s, e });
	}
	return acc;
}

static struct frag build(struct nfa *f, int n)
{
	const struct node *nd = &f->p->nodes[n];
	if (f->full)
		return (struct frag){ 0, 0 };
	switch (nd->k) {
	case N_EMPTY: {
		int e = nst(f, S_EPS, -1);
		return (struct frag){ e, e };
	}
	case N_SET:
	case N_BOL:
	case N_EOL: {
		int s = nst(f, nd->k == N_SET ? S_CHAR : nd->k == N_BOL ? S_BOL : S_EOL, nd->set);
		int e = nst(f, S_EPS, -1);
		f->st[s].out = e;
		return (struct frag){ s, e };
	}
	case N_CAT: {
		/* left-deep chains: walk them iteratively so long literals do not recurse deeply */
		int depth = 0, k = n;
		while (f->p->nodes[k].k == N_CAT) {
			k = f->p->nodes[k].a;
			depth++;
		}
		int *right = malloc(sizeof(int) * (size_t)depth);
		for (int i = depth - 1, j = n; i >= 0; i--, j = f->p->nodes[j].a)
			right[i] = f->p->nodes[j].b;
		struct frag acc = build(f, k);
		for (int i = 0; i < depth && !f->full; i++)
			acc = cat(f, acc, build(f, right[i]));
		free(right);
		return acc;
	}
	case N_ALT: {
		struct frag a = build(f, nd->a), b = build(f, nd->b);
		int s = nst(f, S_EPS, -1), e = nst(f, S_EPS, -1);
		f->st[s].out = a.start;
		f->st[s].out1 = b.start;
		link_to(f, a.end, e);
		link_to(f, b.end, e);
		return (struct frag){ s, e };
	}
	case N_REPEAT: return build_repeat(f, nd);
	}
	return (struct frag){ 0, 0 };
}

/* ---- subset construction ---- */

struct sub {                  /* the DFA being built */
	const struct nfa *f;
	const struct bset *sets;
	int ncls;
	unsigned char rep[256];   /* a byte of each class */
	int *mark, stamp;         /* per NFA state: visited in this closure */
	long work;                /* NFA states visited by all closures: bounds compile time */
	int *stack, *list, nlist;
	/* subsets: key = sorted NFA states of kind CHAR/EOL/MATCH, plus the initial flag */
	int **keys, *klen;
	int *next;                /* nd * ncls */
	unsigned char *accept;
	int nd, cap;
	int *hash, hcap;          /* open addressing, -1 empty */
};

/* Every NFA state reachable from seeds over epsilon edges (and ^ / $ edges when allowed). */
static void closure(struct sub *s, const int *seeds, int nseeds, bool bol, bool eol)
{
	const struct nst *st = s->f->st;
	int sp = 0;
	s->stamp++;
	s->nlist = 0;
	for (int i = 0; i < nseeds; i++)
		s->stack[sp++] = seeds[i];
	while (sp) {
		int x = s->stack[--sp];
		if (x < 0 || s->mark[x] == s->stamp)
			continue;
		s->mark[x] = s->stamp;
		s->list[s->nlist++] = x;
		s->work++;
		switch (st[x].kind) {
		case S_EPS:
			s->stack[sp++] = st[x].out;
			s->stack[sp++] = st[x].out1;
			break;
		case S_BOL:
			if (bol)
				s->stack[sp++] = st[x].out;
			break;
		case S_EOL:
			if (eol)
				s->stack[sp++] = st[x].out;
			break;
		default: break;
		}
	}
}

static int cmp_int(const void *a, const void *b) { return (*(const int *)a > *(const int *)b) - (*(const int *)a < *(const int *)b); }

static unsigned key_hash(const int *k, int n, bool initial)
{
	unsigned h = initial ? 0x9e3779b9u : 2166136261u;
	for (int i = 0; i < n; i++)
		h = (h ^ (unsigned)k[i]) * 16777619u;
	return h;
}

/* The DFA state for the closure in s->list (initial: the start state), added if new; -1 when
 * there are too many. */
static int intern(struct sub *s, bool initial)
{
	const struct nst *st = s->f->st;
	int *k = malloc(sizeof(int) * (size_t)(s->nlist + 1)), n = 0;
	bool acc = false;
	for (int i = 0; i < s->nlist; i++) {
		int x = s->list[i];
		if (st[x].kind == S_CHAR || st[x].kind == S_EOL || st[x].kind == S_MATCH)
			k[n++] = x;
		acc |= st[x].kind == S_MATCH;
	}
	qsort(k, (size_t)n, sizeof(int), cmp_int);
	unsigned h = key_hash(k, n, initial);
	for (unsigned j = h & (unsigned)(s->hcap - 1);; j = (j + 1) & (unsigned)(s->hcap - 1)) {
		int d = s->hash[j];
		if (d < 0) {
			if (s->nd == RE_MAX_SUBSET) {
				free(k);
				return -1;
			}
			s->hash[j] = s->nd;
			break;
		}
		if (s->klen[d] == n && (d == 0) == initial && !memcmp(s->keys[d], k, sizeof(int) * (size_t)n)) {
			free(k);
			return d;
		}
	}
	if (s->nd == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 64;
		s->keys = realloc(s->keys, sizeof(*s->keys) * (size_t)s->cap);
		s->klen = realloc(s->klen, sizeof(*s->klen) * (size_t)s->cap);
		s->accept = realloc(s->accept, (size_t)s->cap);
		s->next = realloc(s->next, sizeof(int) * (size_t)s->cap * (size_t)s->ncls);
	}
	int d = s->nd++;
	s->keys[d] = k;
	s->klen[d] = n;
	/* accepting: the match state is reachable when the input ends here ($ edges hold; at the
	 * initial state ^ holds too) */
	if (!acc) {
		int *seeds = malloc(sizeof(int) * (size_t)(s->nlist + 1));
		memcpy(seeds, s->list, sizeof(int) * (size_t)s->nlist);
		closure(s, seeds, s->nlist, initial, true);
		for (int i = 0; i < s->nlist && !acc; i++)
			acc = st[s->list[i]].kind == S_MATCH;
		free(seeds);
	}
	s->accept[d] = acc;
	return d;
}

/* Byte classes: bytes no set tells apart share a class. Each set splits every class it cuts. */
static int byte_classes(const struct bset *sets, int nsets, const struct nfa *f, unsigned char cls[256])
{
	bool *used = calloc((size_t)nsets + 1, 1);
	for (int i = 0; i < f->n; i++)
		if (f->st[i].kind == S_CHAR)
			used[f->st[i].set] = true;
	memset(cls, 0, 256);
	int n = 1;
	for (int k = 0; k < nsets; k++) {
		if (!used[k])
			continue;
		int size[256] = { 0 }, inside[256] = { 0 }, split[256];
		for (int b = 0; b < 256; b++) {
			size[cls[b]]++;
			inside[cls[b]] += bs_has(&sets[k], (unsigned)b);
		}
		for (int c = 0; c < n; c++)
			split[c] = inside[c] && inside[c] < size[c] ? -1 : c;
		for (int b = 0; b < 256; b++) {
			int c = cls[b];
			if (split[c] >= 0 || !bs_has(&sets[k], (unsigned)b))
				continue;
			if (split[c] == -1)
				split[c] = -2 - n++;   /* the new class of c's bytes inside the set */
			cls[b] = (unsigned char)(-2 - split[c]);
		}
	}
	free(used);
	return n;
}

/* ---- minimise ---- */

/* Moore: states split by acceptance, then by the blocks of their successors, until stable
 * (or past RE_MAX_STATES blocks: then the regex is refused anyway). Returns the number of
 * blocks; block[] per state. */
static int moore(const struct sub *s, int *block)
{
	int nd = s->nd, k = s->ncls, nb = 0;
	for (int i = 0; i < nd; i++)
		block[i] = s->accept[i];
	nb = 1;
	for (int i = 0; i < nd; i++)
		if (block[i] != block[0])
			nb = 2;
	if (nb == 2 && block[0] == 1)   /* number blocks 0..nb-1 */
		for (int i = 0; i < nd; i++)
			block[i] ^= 1;
	int *sig = malloc(sizeof(int) * (size_t)nd * (size_t)(k + 1));
	int hcap = 1;
	while (hcap < nd * 2)
		hcap *= 2;
	int *hash = malloc(sizeof(int) * (size_t)hcap), *nblock = malloc(sizeof(int) * (size_t)nd);
	for (;;) {
		for (int i = 0; i < nd; i++) {
			int *g = &sig[(size_t)i * (size_t)(k + 1)];
			g[0] = block[i];
			for (int c = 0; c < k; c++)
				g[c + 1] = block[s->next[(size_t)i * (size_t)k + (size_t)c]];
		}
		for (int j = 0; j < hcap; j++)
			hash[j] = -1;
		int n = 0;
		for (int i = 0; i < nd; i++) {
			const int *g = &sig[(size_t)i * (size_t)(k + 1)];
			unsigned h = key_hash(g, k + 1, false);
			for (unsigned j = h & (unsigned)(hcap - 1);; j = (j + 1) & (unsigned)(hcap - 1)) {
				if (hash[j] < 0) {
					hash[j] = i;
					nblock[i] = n++;
					break;
				}
				if (!memcmp(&sig[(size_t)hash[j] * (size_t)(k + 1)], g, sizeof(int) * (size_t)(k + 1))) {
					nblock[i] = nblock[hash[j]];
					break;
				}
			}
		}
		memcpy(block, nblock, sizeof(int) * (size_t)nd);
		if (n == nb || n > RE_MAX_STATES) {   /* stable, or already too many: blocks only split */
			nb = n;
			break;
		}
		nb = n;
	}
	free(sig);
	free(hash);
	free(nblock);
	return nb;
}

static void sub_free(struct sub *s)
{
	for (int i = 0; i < s->nd; i++)
		free(s->keys[i]);
	free(s->keys);
	free(s->klen);
	free(s->next);
	free(s->accept);
	free(s->hash);
	free(s->mark);
	free(s->stack);
	free(s->list);
}

static int too_many_states(struct re_error *err, size_t relen)
{
	err->pos = 0;
	err->len = relen ? relen : 1;
	snprintf(err->msg, sizeof(err->msg), "regex needs more than %d DFA states (simplify it, or split it into several rules)",
		 RE_MAX_STATES);
	return -1;
}

/* The minimal DFA of s: dead = 0, the others numbered breadth-first from the start, classes
 * with equal columns merged. */
static int finish(const struct sub *s, struct re_dfa *out, const unsigned char cls[256], struct re_error *err, size_t relen)
{
	int nd = s->nd, k = s->ncls;
	int *block = malloc(sizeof(int) * (size_t)nd);
	int nb = moore(s, block);
	if (nb > RE_MAX_STATES) {
		free(block);
		return too_many_states(err, relen);
	}
	/* the dead block: non-accepting, every class back into itself */
	int dead = -1;
	for (int i = 0; i < nd && dead < 0; i++) {
		if (s->accept[i])
			continue;
		bool sink = true;
		for (int c = 0; c < k && sink; c++)
			sink = block[s->next[(size_t)i * (size_t)k + (size_t)c]] == block[i];
		if (sink)
			dead = block[i];
	}
	int *num = malloc(sizeof(int) * (size_t)(nb + 1)), *rep = malloc(sizeof(int) * (size_t)(nb + 1));
	for (int b = 0; b <= nb; b++)
		num[b] = -1;
	for (int i = nd - 1; i >= 0; i--)
		rep[block[i]] = i;
	int n = 1;   /* 0: dead */
	if (dead >= 0)
		num[dead] = 0;
	int *queue = malloc(sizeof(int) * (size_t)(nb + 1)), qh = 0, qt = 0;
	if (num[block[0]] < 0) {
		num[block[0]] = n++;
		queue[qt++] = block[0];
	}
	while (qh < qt) {
		int b = queue[qh++];
		for (int c = 0; c < k; c++) {
			int t = block[s->next[(size_t)rep[b] * (size_t)k + (size_t)c]];
			if (num[t] < 0) {
				num[t] = n++;
				queue[qt++] = t;
			}
		}
	}
	free(queue);
	if (n > RE_MAX_STATES) {
		free(num);
		free(rep);
		free(block);
		return too_many_states(err, relen);
	}
	/* table over the old classes, then merge equal columns */
	int *tab = calloc((size_t)n * (size_t)k, sizeof(int));
	unsigned char *acc = calloc((size_t)n, 1);
	for (int b = 0; b < nb; b++) {
		if (num[b] <= 0)
			continue;
		acc[num[b]] = s->accept[rep[b]];
		for (int c = 0; c < k; c++)
			tab[(size_t)num[b] * (size_t)k + (size_t)c] = num[block[s->next[(size_t)rep[b] * (size_t)k + (size_t)c]]];
	}
	int *merged = malloc(sizeof(int) * (size_t)k), nk = 0, *first = malloc(sizeof(int) * (size_t)k);
	for (int c = 0; c < k; c++)
		merged[c] = -1;
	/* classes in order of their first byte, so output does not depend on construction order */
	for (int b = 0; b < 256; b++) {
		int c = cls[b];
		if (merged[c] >= 0)
			continue;
		int same = -1;
		for (int m = 0; m < nk && same < 0; m++) {
			bool eq = true;
			for (int st = 0; st < n && eq; st++)
				eq = tab[(size_t)st * (size_t)k + (size_t)first[m]] == tab[(size_t)st * (size_t)k + (size_t)c];
			if (eq)
				same = m;
		}
		if (same < 0) {
			first[nk] = c;
			same = nk++;
		}
		merged[c] = same;
	}
	if ((long)n * nk > RE_MAX_TABLE) {
		snprintf(err->msg, sizeof(err->msg), "regex needs a table of %d states x %d byte classes; the limit is %d entries", n, nk,
			 RE_MAX_TABLE);
		err->pos = 0;
		err->len = relen ? relen : 1;
		free(block), free(num), free(rep), free(tab), free(acc), free(merged), free(first);
		return -1;
	}
	out->nstates = n;
	out->nclasses = nk;
	out->start = num[block[0]];
	for (int b = 0; b < 256; b++)
		out->cls[b] = (unsigned char)merged[cls[b]];
	out->next = calloc((size_t)n * (size_t)nk, sizeof(unsigned short));
	out->accept = acc;
	for (int st = 0; st < n; st++)
		for (int m = 0; m < nk; m++)
			out->next[(size_t)st * (size_t)nk + (size_t)m] = (unsigned short)tab[(size_t)st * (size_t)k + (size_t)first[m]];
	free(block), free(num), free(rep), free(tab), free(merged), free(first);
	return 0;
}

int re_compile(const char *re, size_t len, struct re_dfa *out, struct re_error *err)
{
	memset(out, 0, sizeof(*out));
	memset(err, 0, sizeof(*err));
	if (len > RE_MAX_SOURCE) {
		err->len = 1;
		snprintf(err->msg, sizeof(err->msg), "regex longer than %d bytes", RE_MAX_SOURCE);
		return -1;
	}
	struct rp p = { .s = re, .n = len, .err = err };
	int root = parse_alt(&p);
	if (!p.failed && p.i < p.n)   /* parse_alt stops only at the end or at a ')' */
		fail(&p, p.i, 1, "unmatched ')'");
	int rc = -1;
	struct nfa f = { .p = &p };
	struct sub s = { 0 };
	if (p.failed || root < 0)
		goto out;
	struct frag whole = build(&f, root);
	int match = nst(&f, S_MATCH, -1);
	if (f.full) {
		err->pos = 0;
		err->len = len ? len : 1;
		snprintf(err->msg, sizeof(err->msg), "regex too large: more than %d NFA states (counted repetition copies what it repeats)",
			 RE_MAX_NFA);
		goto out;
	}
	link_to(&f, whole.end, match);

	unsigned char cls[256];
	s.f = &f;
	s.sets = p.sets;
	s.ncls = byte_classes(p.sets, p.nsets, &f, cls);
	for (int b = 255; b >= 0; b--)
		s.rep[cls[b]] = (unsigned char)b;
	s.mark = calloc((size_t)f.n, sizeof(int));
	s.stack = malloc(sizeof(int) * (size_t)f.n * 3 + 16);
	s.list = malloc(sizeof(int) * (size_t)f.n + 16);
	s.hcap = RE_MAX_SUBSET * 2;
	s.hash = malloc(sizeof(int) * (size_t)s.hcap);
	for (int i = 0; i < s.hcap; i++)
		s.hash[i] = -1;
	closure(&s, &whole.start, 1, true, false);
	intern(&s, true);
	int *seeds = malloc(sizeof(int) * (size_t)f.n + 16);
	for (int d = 0; d < s.nd; d++) {   /* s.nd grows as new subsets appear */
		for (int c = 0; c < s.ncls; c++) {
			int ns = 0;
			for (int i = 0; i < s.klen[d]; i++) {
				const struct nst *x = &f.st[s.keys[d][i]];
				if (x->kind == S_CHAR && bs_has(&p.sets[x->set], s.rep[c]))
					seeds[ns++] = x->out;
			}
			closure(&s, seeds, ns, false, false);
			int t = s.work > RE_MAX_WORK ? -1 : intern(&s, false);
			if (t < 0) {
				err->pos = 0;
				err->len = len ? len : 1;
				if (s.work > RE_MAX_WORK)
					snprintf(err->msg, sizeof(err->msg), "regex too complex to compile: its DFA would need too many states (the limit is %d)",
						 RE_MAX_STATES);
				else
					snprintf(err->msg, sizeof(err->msg), "regex needs more than %d DFA states before minimisation; the limit after it is %d",
						 RE_MAX_SUBSET, RE_MAX_STATES);
				free(seeds);
				goto out;
			}
			s.next[(size_t)d * (size_t)s.ncls + (size_t)c] = t;
		}
	}
	free(seeds);
	rc = finish(&s, out, cls, err, len);
out:
	sub_free(&s);
	free(f.st);
	free(p.nodes);
	free(p.sets);
	return rc;
}

void re_free(struct re_dfa *d)
{
	free(d->next);
	free(d->accept);
	memset(d, 0, sizeof(*d));
}

int re_run(const struct re_dfa *d, int s, const unsigned char *str, size_t n)
{
	for (size_t i = 0; i < n && s; i++)
		s = d->next[(size_t)s * (size_t)d->nclasses + d->cls[str[i]]];
	return s;
}

bool re_match(const struct re_dfa *d, const unsigned char *s, size_t n) { return d->accept[re_run(d, d->start, s, n)]; }

static unsigned rnd(unsigned long long *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return (unsigned)(*s >> 33);
}

int re_example(const struct re_dfa *d, unsigned long long *seed, unsigned char *buf, size_t cap)
{
	/* dist[s]: fewest bytes from s to an accepting state */
	int n = d->nstates, k = d->nclasses;
	int *dist = malloc(sizeof(int) * (size_t)n);
	for (int s = 0; s < n; s++)
		dist[s] = d->accept[s] ? 0 : 1 << 30;
	for (bool changed = true; changed;) {
		changed = false;
		for (int s = 0; s < n; s++)
			for (int c = 0; c < k; c++) {
				int t = d->next[(size_t)s * (size_t)k + (size_t)c];
				if (dist[t] + 1 < dist[s]) {
					dist[s] = dist[t] + 1;
					changed = true;
				}
			}
	}
	int s = d->start;
	size_t len = 0;
	if ((size_t)dist[s] > cap) {
		free(dist);
		return -1;
	}
	for (;;) {
		size_t left = cap - len;
		if (d->accept[s] && (left == 0 || rnd(seed) % 4 == 0))
			break;
		/* a random class that can still reach acceptance within the room left */
		int pick = -1, seen = 0;
		for (int c = 0; c < k; c++) {
			int t = d->next[(size_t)s * (size_t)k + (size_t)c];
			if (t && (size_t)dist[t] + 1 <= left && rnd(seed) % (unsigned)++seen == 0)
				pick = c;
		}
		if (pick < 0)
			break;   /* only reachable when s accepts */
		/* a byte of the class: printable if the class has one */
		int byte = -1, nb = 0;
		for (int pass = 0; pass < 2 && byte < 0; pass++)
			for (int b = 0; b < 256; b++)
				if (d->cls[b] == pick && (pass || (b > ' ' && b < 127)) && rnd(seed) % (unsigned)++nb == 0)
					byte = b;
		buf[len++] = (unsigned char)byte;
		s = d->next[(size_t)s * (size_t)k + (size_t)pick];
	}
	free(dist);
	return (int)len;
}

static void byte_out(FILE *o, int b)
{
	if (b > ' ' && b < 127 && b != '\\' && b != ']' && b != '-' && b != '^')
		fputc(b, o);
	else
		fprintf(o, "\\x%02x", b);
}

void re_dump(const struct re_dfa *d, FILE *o, const char *indent)
{
	fprintf(o, "%sclasses:", indent);
	for (int c = 0; c < d->nclasses; c++) {
		fprintf(o, " %d=[", c);
		for (int b = 0; b < 256; b++) {
			if (d->cls[b] != c || (b > 0 && d->cls[b - 1] == c))
				continue;
			int e = b;
			while (e < 255 && d->cls[e + 1] == c)
				e++;
			byte_out(o, b);
			if (e > b) {
				if (e > b + 1)
					fputc('-', o);
				byte_out(o, e);
			}
		}
		fputc(']', o);
	}
	fputc('\n', o);
	for (int s = 1; s < d->nstates; s++) {
		fprintf(o, "%s%s%d%s:", indent, s == d->start ? ">" : " ", s, d->accept[s] ? "*" : " ");
		const unsigned short *row = &d->next[(size_t)s * (size_t)d->nclasses];
		int same = 1;
		for (int c = 1; c < d->nclasses; c++)
			same &= row[c] == row[0];
		if (same && row[0] && d->nclasses > 1) {   /* every byte to one state */
			fprintf(o, " any->%d\n", row[0]);
			continue;
		}
		for (int c = 0; c < d->nclasses; c++) {
			int t = d->next[(size_t)s * (size_t)d->nclasses + (size_t)c];
			if (t)
				fprintf(o, " %d->%d", c, t);
		}
		fputc('\n', o);
	}
}
