/* Syntax errors: what tree-sitter could not place (ERROR and MISSING nodes), each reported
 * once, at the first token it could not place, and the rest of the file is still read.
 *
 * The mistakes people make are said in words, with a note on what is accepted, instead of
 * "unexpected 'upstream'": an address that is a host name, has no port or is IPv6; a string
 * left open; an escape strings do not know (a regex's \d written "\d"). A declaration whose
 * address did not parse is still declared (l7_decl.syntax_error), so its uses raise nothing
 * more: no "undeclared name" and no "did you mean" after the real mistake. */
#include "internal.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

struct se {
	struct l7_module *m;
	const struct l7_source *src;
	struct l7_diags *d;
	struct l7_broken_decl *broken;
	int nbroken;
	unsigned said_line;          /* the line of the last mistake explained: a generic error on
	                              * the same line is its echo, not another mistake */
};

static bool is(TSNode n, const char *t) { return !ts_node_is_null(n) && !strcmp(ts_node_type(n), t); }

static struct l7_loc at(const struct se *s, unsigned start, unsigned end) { return l7_loc_at(s->src, start, end); }

static struct l7_loc loc_of(const struct se *s, TSNode n) { return at(s, ts_node_start_byte(n), ts_node_end_byte(n)); }

static TSNode first_leaf(TSNode n)
{
	while (ts_node_child_count(n) > 0)
		n = ts_node_child(n, 0);
	return n;
}

/* The leaves under n in source order, strings whole (strings = false: their parts too). */
static int leaves(TSNode n, TSNode *out, int cap, int k, bool strings)
{
	uint32_t c = ts_node_child_count(n);
	if (!c || (strings && is(n, "string"))) {
		if (k < cap)
			out[k] = n;
		return k + 1;
	}
	for (uint32_t i = 0; i < c; i++)
		k = leaves(ts_node_child(n, i), out, cap, k, strings);
	return k;
}

/* ---- strings ---- */

/* The string holding n is a regex: the pattern of matches(), or a policy's context. */
static bool in_regex(const struct se *s, TSNode n)
{
	for (; !ts_node_is_null(n); n = ts_node_parent(n)) {
		if (is(n, "context_binding"))
			return true;
		if (is(n, "call_expression")) {
			TSNode fn = ts_node_child_by_field_name(n, "function", 8);
			unsigned a = ts_node_start_byte(fn), b = ts_node_end_byte(fn);
			return is(fn, "identifier") && b - a == 7 && !memcmp(s->src->text + a, "matches", 7);
		}
	}
	return false;
}

static bool known_escape(char c) { return strchr("\\\"'nrt0", c) != NULL; }

/* `\c` at pos is not an escape strings know. */
static void bad_escape(struct se *s, TSNode near, unsigned pos)
{
	char c = s->src->text[pos + 1];
	struct l7_loc l = at(s, pos, pos + 2);
	l7_diag(s->d, L7_ERROR, l, "unknown escape sequence '\\%c' in a string", c);
	if (in_regex(s, near)) {
		const char *cls = c == 'd' ? "[0-9]" : c == 'w' ? "[A-Za-z0-9_]" : NULL;
		l7_hint(s->d, l, "write the regex's backslash as \\\\ in a string: \"\\\\%c\"%s%s%s", c, cls ? " (or " : "",
			cls ? cls : "", cls ? ")" : "");
	} else {
		l7_hint(s->d, l, "strings know the escapes \\\\ \\\" \\' \\n \\r \\t and \\0");
	}
	s->said_line = l.line;
}

/* The string problem at leaf, if any. 0: none (*to: where a string that opens at leaf
 * ends, else 0); 1: an unknown escape, said (*to: the string's end); 2: a string left open,
 * said (*to: the end of its line, where the string lexer stopped). */
static int string_problem(struct se *s, TSNode leaf, unsigned *to)
{
	const char *t = s->src->text;
	unsigned pos = ts_node_start_byte(leaf), end = ts_node_end_byte(leaf);
	*to = 0;
	if (pos >= s->src->len)
		return 0;
	if (is(leaf, "string")) {   /* whole, with an ERROR inside */
		for (unsigned i = pos + 1; ts_node_has_error(leaf) && i + 1 < end; i++)
			if (t[i] == '\\' && !known_escape(t[++i])) {
				bad_escape(s, leaf, i - 1);
				*to = end;
				return 1;
			}
		return 0;
	}
	if (t[pos] == '\\') {   /* in what is left of a string */
		bad_escape(s, leaf, pos);
		*to = end;
		return 1;
	}
	if ((t[pos] != '"' && t[pos] != '\'') || is(ts_node_parent(leaf), "string"))
		return 0;
	/* an opening quote outside any string: closed on its line? */
	unsigned e = pos + 1, bad = 0;
	while (e < s->src->len && t[e] != '\n' && t[e] != t[pos]) {
		if (t[e] == '\\' && e + 1 < s->src->len && t[e + 1] != '\n') {
			if (!bad && !known_escape(t[e + 1]))
				bad = e;
			e++;
		}
		e++;
	}
	if (e < s->src->len && t[e] == t[pos]) {
		*to = e + 1;
		if (!bad)
			return 0;
		bad_escape(s, leaf, bad);
		return 1;
	}
	struct l7_loc l = at(s, pos, e);
	l7_diag(s->d, L7_ERROR, l, "missing terminating '%c' character", t[pos]);
	l7_hint(s->d, l, "a string ends on the line it starts: close it with %c", t[pos]);
	s->said_line = l.line;
	*to = e;
	return 2;
}

/* ---- addresses ---- */

enum addr_kind { A_OK, A_NAME, A_NO_PORT, A_IPV6, A_NOT_IP, A_PORT, A_PREFIX, A_HAS_PORT };

static bool ipv4(const char *p, size_t n)
{
	int parts = 0;
	size_t i = 0;
	while (parts < 4) {
		size_t start = i;
		long v = 0;
		while (i < n && isdigit((unsigned char)p[i]) && i - start < 4)
			v = v * 10 + (p[i++] - '0');
		if (i == start || i - start > 3 || v > 255)
			return false;
		parts++;
		if (parts < 4) {
			if (i >= n || p[i] != '.')
				return false;
			i++;
		}
	}
	return i == n;
}

static size_t colons(const char *p, size_t n)
{
	size_t c = 0;
	for (size_t i = 0; i < n; i++)
		c += p[i] == ':';
	return c;
}

/* What an element of a declaration's value is (identities take addresses and prefixes,
 * the others an address with a port). */
static enum addr_kind classify(const char *p, size_t n, bool identity)
{
	if (!n)
		return A_OK;
	if (colons(p, n) >= 2 || p[0] == ':')
		return A_IPV6;
	if (p[0] == '"' || p[0] == '\'' || isalpha((unsigned char)p[0]) || p[0] == '_')
		return A_NAME;
	const char *colon = memchr(p, ':', n), *slash = memchr(p, '/', n);
	if (slash && !colon) {
		char *end;
		long len = strtol(slash + 1, &end, 10);
		if (!ipv4(p, (size_t)(slash - p)) || end != p + n || end == slash + 1)
			return A_NOT_IP;
		return identity ? (len <= 32 ? A_OK : A_NOT_IP) : A_PREFIX;
	}
	if (!colon)
		return !ipv4(p, n) ? A_NOT_IP : identity ? A_OK : A_NO_PORT;
	if (!ipv4(p, (size_t)(colon - p)))
		return A_NOT_IP;
	if (identity)
		return A_HAS_PORT;
	long port = 0;
	size_t i = (size_t)(colon - p) + 1;
	if (i == n)
		return A_PORT;
	for (; i < n; i++) {
		if (!isdigit((unsigned char)p[i]))
			return A_NOT_IP;
		if (port <= 65535)
			port = port * 10 + (p[i] - '0');
	}
	return port >= 1 && port <= 65535 ? A_OK : A_PORT;
}

static const char *accepted(const char *kind)
{
	if (!strcmp(kind, "upstream"))
		return "upstreams are literal IPv4 addresses with a port today (127.0.0.1:8080, or a list: "
		       "[10.0.0.1:80, 10.0.0.2:80])";
	if (!strcmp(kind, "service"))
		return "a service is a literal IPv4 address with a port (127.0.0.1:8080)";
	if (!strcmp(kind, "fallback"))
		return "the fallback proxy is a literal IPv4 address with a port (127.0.0.1:15001)";
	return "identities are IPv4 addresses and prefixes (10.0.1.7, 10.0.1.0/24)";
}

static void say_address(struct se *s, const char *kind, const char *name, enum addr_kind k, unsigned start, unsigned end)
{
	const char *e = s->src->text + start;
	int n = (int)(end - start);
	struct l7_loc l = at(s, start, end);
	s->said_line = l.line;
	switch (k) {
	case A_NAME:
		l7_diag(s->d, L7_ERROR, l, "%s '%s': '%.*s' is not an address", kind, name, n, e);
		if (!strcmp(kind, "upstream"))
			l7_hint(s->d, l, "a host name that l7run resolves is a string: \"%.*s\" (or a set l7run fills: endpoints(\"NAME\"))",
				n, e);
		else
			l7_hint(s->d, l, "%s; host names are not supported yet", accepted(kind));
		return;
	case A_NO_PORT:
		l7_diag(s->d, L7_ERROR, l, "%s '%s': address '%.*s' has no port", kind, name, n, e);
		l7_hint(s->d, l, "write the port after a colon: %.*s:PORT", n, e);
		return;
	case A_IPV6:
		l7_diag(s->d, L7_ERROR, l, "%s '%s': IPv6 addresses are not supported yet", kind, name);
		l7_hint(s->d, l, "%s", accepted(kind));
		return;
	case A_PORT:
		l7_diag(s->d, L7_ERROR, l, "%s '%s': '%.*s' has no valid port (1-65535)", kind, name, n, e);
		return;
	case A_PREFIX:
		l7_diag(s->d, L7_ERROR, l, "%s '%s': '%.*s' is a prefix, not an address", kind, name, n, e);
		l7_hint(s->d, l, "%s", accepted(kind));
		return;
	case A_HAS_PORT:
		l7_diag(s->d, L7_ERROR, l, "identity '%s': '%.*s' has a port", name, n, e);
		l7_hint(s->d, l, "%s, without ports", accepted(kind));
		return;
	default:
		l7_diag(s->d, L7_ERROR, l, "%s '%s': '%.*s' is not an IPv4 address", kind, name, n, e);
		l7_hint(s->d, l, "%s", accepted(kind));
		return;
	}
}

static unsigned skip_space(const char *t, unsigned i, unsigned end)
{
	while (i < end && (t[i] == ' ' || t[i] == '\t'))
		i++;
	return i;
}

/* The value of a declaration, text [from, to): the first element that is not an address is
 * explained; false if every element looks like one (the mistake is elsewhere). */
static bool explain_value(struct se *s, const char *kind, const char *name, unsigned from, unsigned to)
{
	const char *t = s->src->text;
	unsigned i = skip_space(t, from, to);
	bool list = i < to && t[i] == '[';
	if (list) {
		i++;
		for (unsigned j = i; j < to; j++)
			if (t[j] == ']') {
				to = j;
				break;
			}
	}
	while (i < to) {
		i = skip_space(t, i, to);
		unsigned e = i;
		/* an element: up to a comma, a space (then `weight N` or `balance ...`) or the end */
		bool quoted = i < to && (t[i] == '"' || t[i] == '\'');
		if (quoted) {
			for (e = i + 1; e < to && t[e] != t[i]; e++)
				;
			e = e < to ? e + 1 : e;
		}
		while (e < to && t[e] != ',' && t[e] != ' ' && t[e] != '\t' && t[e] != '\r' && t[e] != '/')
			e++;
		if (e < to && t[e] == '/') {   /* a prefix: its length too */
			e++;
			while (e < to && isdigit((unsigned char)t[e]))
				e++;
		}
		enum addr_kind k = classify(t + i, e - i, !strcmp(kind, "identity"));
		if (k != A_OK) {
			say_address(s, kind, name, k, i, e);
			return true;
		}
		if (!list)
			return false;
		while (e < to && t[e] != ',')
			e++;
		i = e + 1;
	}
	return false;
}

static const char *const decl_keywords[] = { "upstream", "service", "fallback", "identity" };

/* The declaration keyword leaf n is, or NULL. */
static const char *keyword_of(TSNode n)
{
	for (size_t i = 0; i < sizeof(decl_keywords) / sizeof(decl_keywords[0]); i++)
		if (is(n, decl_keywords[i]))
			return decl_keywords[i];
	return NULL;
}

/* The kind of declaration node n is, or NULL. */
static const char *decl_kind(TSNode n)
{
	const char *t = ts_node_type(n), *us = strchr(t, '_');
	if (!us || strcmp(us, "_declaration"))
		return NULL;
	for (size_t i = 0; i < sizeof(decl_keywords) / sizeof(decl_keywords[0]); i++)
		if (!strncmp(t, decl_keywords[i], (size_t)(us - t)) && !decl_keywords[i][us - t])
			return decl_keywords[i];
	return NULL;
}

static void declare(struct se *s, const char *kind, char *name, struct l7_loc loc)
{
	struct l7_broken_decl *b = l7_alloc(&s->m->arena, sizeof(*b) * (size_t)(s->nbroken + 1));
	if (s->nbroken)
		memcpy(b, s->broken, sizeof(*b) * (size_t)s->nbroken);
	b[s->nbroken] = (struct l7_broken_decl){ kind, name, loc };
	s->broken = b;
	s->nbroken++;
}

static void unexpected_leaf(struct se *s, TSNode leaf);

/* A declaration: leaves lv[0..k) from its keyword to its ';' (strings whole), a node of its
 * own (in_error false) or a run of an ERROR. A run is always explained, and its name
 * declared; a node only when its value is the mistake (false: look at its ERROR parts). */
static bool explain_decl(struct se *s, const TSNode *lv, int k, const char *kind, bool in_error)
{
	if (k < 2 || !is(lv[1], "identifier")) {
		if (in_error)
			unexpected_leaf(s, lv[k < 2 ? 0 : 1]);
		return in_error;
	}
	const char *t = s->src->text;
	unsigned ns = ts_node_start_byte(lv[1]), ne = ts_node_end_byte(lv[1]);
	char *name = l7_strndup(&s->m->arena, t + ns, ne - ns);
	if (k < 3 || !is(lv[2], "=")) {
		if (!in_error)
			return false;
		struct l7_loc l = k < 3 ? at(s, ne, ne) : loc_of(s, lv[2]);
		l7_diag(s->d, L7_ERROR, l, "expected '=' after '%s %s'", kind, name);
		s->said_line = l.line;
	} else {
		unsigned from = ts_node_end_byte(lv[2]), to = from;
		while (to < s->src->len && t[to] != ';' && t[to] != '\n')
			to++;
		if (!explain_value(s, kind, name, from, to)) {
			if (!in_error)
				return false;
			/* the addresses look right: the first token that is none of their parts */
			int i = 3;
			while (i < k && (is(lv[i], "address") || is(lv[i], "ip") || is(lv[i], "cidr") || is(lv[i], "[") ||
					 is(lv[i], "]") || is(lv[i], ",") || is(lv[i], "weight") || is(lv[i], "integer")))
				i++;
			unexpected_leaf(s, lv[i < k ? i : k - 1]);
		}
	}
	if (in_error)
		declare(s, kind, name, at(s, ns, ne));
	return true;
}

/* An IPv6 address anywhere else (request.source == ::1), among leaves lv[0..k). */
static bool explain_ipv6(struct se *s, const TSNode *lv, int k)
{
	const char *t = s->src->text;
	for (int i = 0; i < k; i++) {
		unsigned a = ts_node_start_byte(lv[i]), b = a;
		if (is(lv[i], "string") || is(lv[i], "comment"))
			continue;
		while (a > 0 && (isxdigit((unsigned char)t[a - 1]) || t[a - 1] == ':' || t[a - 1] == '.'))
			a--;
		while (b < s->src->len && (isxdigit((unsigned char)t[b]) || t[b] == ':' || t[b] == '.'))
			b++;
		if (colons(t + a, b - a) < 2)
			continue;
		if (b < s->src->len && t[b] == '/')   /* a prefix */
			for (b++; b < s->src->len && isdigit((unsigned char)t[b]); b++)
				;
		struct l7_loc l = at(s, a, b);
		l7_diag(s->d, L7_ERROR, l, "IPv6 addresses are not supported yet");
		l7_hint(s->d, l, "addresses are IPv4 today: A.B.C.D, A.B.C.D/N, A.B.C.D:PORT");
		s->said_line = l.line;
		return true;
	}
	return false;
}

static void unexpected_leaf(struct se *s, TSNode leaf)
{
	leaf = first_leaf(leaf);
	struct l7_loc l = loc_of(s, leaf);
	if (l.line == s->said_line)
		return;
	s->said_line = l.line;
	unsigned a = ts_node_start_byte(leaf), b = ts_node_end_byte(leaf);
	if (a >= s->src->len || a == b)
		l7_diag(s->d, L7_ERROR, l, "syntax error: unexpected end of file");
	else
		l7_diag(s->d, L7_ERROR, l, "syntax error: unexpected '%.*s'", (int)(b - a > 40 ? 40 : b - a), s->src->text + a);
}

/* Tree-sitter wraps what it could not place in ERROR. When that ends with a complete construct
 * (e.g. `if (cond` then `{`), the mistake is the token after it; otherwise it is the first
 * token inside. */
static void unexpected(struct se *s, TSNode n)
{
	uint32_t nc = ts_node_child_count(n);
	TSNode last = nc ? ts_node_child(n, nc - 1) : n;
	TSNode after = ts_node_next_sibling(n);
	unexpected_leaf(s, nc && ts_node_is_named(last) && !is(last, "ERROR") && !ts_node_is_null(after) ? after : n);
}

#define MAX_LEAVES 4096

/* Leaves lv[0..k) of an ERROR (or what follows a declaration tree-sitter let run past its
 * ';'), read as runs up to each ';' (tree-sitter may put several declarations in one ERROR,
 * or a whole policy): a run with a string problem is that problem; a run that starts a
 * declaration is explained as one; the first run, otherwise, is an IPv6 address or the
 * generic "unexpected" (of the ERROR whole, if given); later runs are its consequences. */
static void explain_runs(struct se *s, TSNode whole, const TSNode *lv, int k)
{
	for (int i = 0; i < k;) {
		int start = i;
		bool said = false;
		unsigned skip = 0, stop = ~0u;
		for (; i < k && ts_node_start_byte(lv[i]) < stop; i++) {
			if (ts_node_start_byte(lv[i]) < skip)
				continue;   /* inside a string the parser saw as tokens */
			if (is(lv[i], ";"))
				break;
			unsigned to = 0;
			int r = said ? 0 : string_problem(s, lv[i], &to);
			said |= r != 0;
			if (r == 2)
				stop = to;
			else
				skip = to;
		}
		int end = i < k && is(lv[i], ";") ? ++i : i;
		const char *kind = keyword_of(lv[start]);
		if (said) {
			if (kind && end - start >= 2 && is(lv[start + 1], "identifier")) {
				unsigned a = ts_node_start_byte(lv[start + 1]), b = ts_node_end_byte(lv[start + 1]);
				declare(s, kind, l7_strndup(&s->m->arena, s->src->text + a, b - a), at(s, a, b));
			}
		} else if (kind) {
			explain_decl(s, lv + start, end - start, kind, true);
		} else if (start == 0 && !explain_ipv6(s, lv, end)) {
			if (ts_node_is_null(whole))
				unexpected_leaf(s, lv[start]);
			else
				unexpected(s, whole);
		}
	}
}

static void walk(struct se *s, TSNode n)
{
	if (!ts_node_has_error(n))
		return;
	if (ts_node_is_missing(n)) {
		struct l7_loc l = loc_of(s, n);
		if (l.line != s->said_line)
			l7_diag(s->d, L7_ERROR, l, "expected '%s'", ts_node_type(n));
		s->said_line = l.line;
		return;
	}
	static TSNode lv[MAX_LEAVES];
	const char *kind = decl_kind(n);
	int k = kind || is(n, "ERROR") ? leaves(n, lv, MAX_LEAVES, 0, true) : 0;
	k = k < MAX_LEAVES ? k : MAX_LEAVES;
	if (is(n, "ERROR")) {
		explain_runs(s, n, lv, k);
		return;
	}
	unsigned upto = ~0u;   /* the children to look into: all, or those of the declaration's own run */
	if (kind) {
		/* its run, to its ';'; tree-sitter can let a declaration run on into the next ones */
		int semi = 0;
		while (semi < k && !is(lv[semi], ";"))
			semi++;
		int own = semi < k ? semi + 1 : k;
		bool said = explain_decl(s, lv, own, kind, false);
		if (own < k) {
			upto = ts_node_end_byte(lv[semi]);
			explain_runs(s, (TSNode){ 0 }, lv + own, k - own);
		}
		if (said)
			return;
	}
	uint32_t c = ts_node_child_count(n);
	for (uint32_t i = 0; i < c; i++)
		if (ts_node_start_byte(ts_node_child(n, i)) < upto)
			walk(s, ts_node_child(n, i));
}

int l7_syntax_errors(struct l7_module *m, const struct l7_source *src, TSNode root, struct l7_diags *d,
		     struct l7_broken_decl **broken)
{
	struct se s = { .m = m, .src = src, .d = d };
	walk(&s, root);
	*broken = s.broken;
	return s.nbroken;
}
