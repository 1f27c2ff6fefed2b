/* Concrete syntax tree (tree-sitter) -> AST.
 *
 * Syntax errors (ERROR and MISSING nodes) are reported by syntax_errors.c; the rest of the file
 * is still turned into AST so that name and type errors elsewhere are reported in the same run. */
#include "internal.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

const TSLanguage *tree_sitter_l7(void);

struct cx {
	struct l7_module *m;
	const struct l7_source *src;
	struct l7_diags *d;
	bool is_interface;
};

#define NEW(cx, T) ((T *)l7_alloc(&(cx)->m->arena, sizeof(T)))
#define GROW(cx, arr, n) grow(cx, (void **)&(arr), (n), sizeof(*(arr)))
/* A new, zeroed last element of arr (n counts it). */
#define PUSH(cx, arr, n) ((typeof(&(arr)[0]))push(cx, (void **)&(arr), &(n), sizeof(*(arr))))

/* Arrays are built by doubling in the arena; old blocks stay until the arena goes. */
static void grow(struct cx *cx, void **arr, int n, size_t elem)
{
	if (n == 0 || (n & (n - 1)) == 0) {
		size_t cap = n ? (size_t)n * 2 : 4;
		void *p = l7_alloc(&cx->m->arena, cap * elem);
		if (n)
			memcpy(p, *arr, (size_t)n * elem);
		*arr = p;
	}
}

static void *push(struct cx *cx, void **arr, int *n, size_t elem)
{
	grow(cx, arr, *n, elem);
	void *at = (char *)*arr + (size_t)(*n)++ * elem;
	memset(at, 0, elem);
	return at;
}

static struct l7_loc loc_of(struct cx *cx, TSNode n)
{
	TSPoint p = ts_node_start_point(n);
	struct l7_loc l = { cx->src, p.row + 1, p.column + 1, ts_node_start_byte(n), ts_node_end_byte(n) };
	return l;
}

static const char *type_of(TSNode n) { return ts_node_type(n); }
static bool is(TSNode n, const char *t) { return !ts_node_is_null(n) && strcmp(ts_node_type(n), t) == 0; }
static TSNode field(TSNode n, const char *name) { return ts_node_child_by_field_name(n, name, strlen(name)); }

static char *text(struct cx *cx, TSNode n)
{
	uint32_t a = ts_node_start_byte(n), b = ts_node_end_byte(n);
	return l7_strndup(&cx->m->arena, cx->src->text + a, b - a);
}

/* The text of n's "name" field, and where it stands. */
static char *name_of(struct cx *cx, TSNode n, struct l7_loc *loc)
{
	*loc = loc_of(cx, field(n, "name"));
	return text(cx, field(n, "name"));
}

/* ---- literals ---- */

static bool parse_ipv4(const char *s, unsigned *ip, const char **rest)
{
	unsigned v = 0;
	for (int i = 0; i < 4; i++) {
		char *end;
		long o = strtol(s, &end, 10);
		if (end == s || o < 0 || o > 255)
			return false;
		v = v << 8 | (unsigned)o;
		s = end;
		if (i < 3) {
			if (*s != '.')
				return false;
			s++;
		}
	}
	*ip = v;
	*rest = s;
	return true;
}

static struct l7_expr *new_expr(struct cx *cx, enum l7_expr_kind k, TSNode n)
{
	struct l7_expr *e = NEW(cx, struct l7_expr);
	e->kind = k;
	e->loc = loc_of(cx, n);
	return e;
}

/* Decodes a quoted string with its escapes. */
static void string_value(struct cx *cx, TSNode n, struct l7_expr *e)
{
	const char *t = cx->src->text + ts_node_start_byte(n) + 1;
	size_t len = ts_node_end_byte(n) - ts_node_start_byte(n);
	len = len >= 2 ? len - 2 : 0;
	char *out = l7_alloc(&cx->m->arena, len + 1);
	size_t o = 0;
	for (size_t i = 0; i < len; i++) {
		char c = t[i];
		if (c == '\\' && i + 1 < len) {
			c = t[++i];
			c = c == 'n' ? '\n' : c == 'r' ? '\r' : c == 't' ? '\t' : c == '0' ? '\0' : c;
		}
		out[o++] = c;
	}
	e->str = out;
	e->str_len = o;
}

static bool address_value(struct cx *cx, TSNode n, unsigned *ip, unsigned *port)
{
	char *t = text(cx, n);
	const char *rest;
	if (!parse_ipv4(t, ip, &rest) || *rest != ':')
		goto bad;
	char *end;
	long p = strtol(rest + 1, &end, 10);
	if (*end || p < 1 || p > 65535)
		goto bad;
	*port = (unsigned)p;
	return true;
bad:
	l7_diag(cx->d, L7_ERROR, loc_of(cx, n), "invalid address '%s' (expected A.B.C.D:PORT, port 1-65535)", t);
	return false;
}

/* ---- expressions ---- */

static struct l7_expr *expr(struct cx *cx, TSNode n);

static void expr_list(struct cx *cx, TSNode n, struct l7_expr *e)
{
	uint32_t c = ts_node_named_child_count(n);
	for (uint32_t i = 0; i < c; i++) {
		TSNode ch = ts_node_named_child(n, i);
		if (is(ch, "comment"))
			continue;
		struct l7_expr *a = expr(cx, ch);
		if (!a)
			continue;
		GROW(cx, e->args, e->nargs);
		e->args[e->nargs++] = a;
	}
}

static const struct { const char *tok; enum l7_binop op; } binops[] = {
	{ "||", OP_OR }, { "&&", OP_AND }, { "==", OP_EQ }, { "!=", OP_NE }, { "<", OP_LT },
	{ "<=", OP_LE }, { ">", OP_GT }, { ">=", OP_GE }, { "in", OP_IN },
};

static struct l7_expr *expr(struct cx *cx, TSNode n)
{
	/* an expression with a syntax error inside (reported) is not checked: its shape is a guess */
	if (ts_node_is_null(n) || ts_node_has_error(n))
		return NULL;
	const char *t = type_of(n);
	struct l7_expr *e;
	if (!strcmp(t, "string")) {
		e = new_expr(cx, E_STRING, n);
		string_value(cx, n, e);
	} else if (!strcmp(t, "integer")) {
		e = new_expr(cx, E_INT, n);
		char *s = text(cx, n), *end;
		e->num = strtoll(s, &end, 10);
		if (strlen(s) > 12)
			l7_diag(cx->d, L7_ERROR, e->loc, "integer '%s' is too large", s);
	} else if (!strcmp(t, "boolean")) {
		e = new_expr(cx, E_BOOL, n);
		e->num = !strcmp(text(cx, n), "true");
	} else if (!strcmp(t, "ip") || !strcmp(t, "cidr")) {
		e = new_expr(cx, !strcmp(t, "ip") ? E_IP : E_CIDR, n);
		const char *rest, *s = text(cx, n);
		bool ok = parse_ipv4(s, &e->ip, &rest);
		e->num2 = 32;
		if (ok && *rest == '/') {
			e->num2 = strtol(rest + 1, NULL, 10);
			ok = e->num2 <= 32;
		}
		if (!ok) {
			l7_diag(cx->d, L7_ERROR, e->loc, "invalid IPv4 %s '%s'", e->kind == E_IP ? "address" : "prefix", s);
			e->num2 = 32;   /* later passes still look at it (and shift by 32 - length) */
		}
	} else if (!strcmp(t, "address")) {
		e = new_expr(cx, E_ADDRESS, n);
		unsigned port = 0;
		address_value(cx, n, &e->ip, &port);
		e->num2 = port;
	} else if (!strcmp(t, "identifier")) {
		e = new_expr(cx, E_IDENT, n);
		e->str = text(cx, n);
	} else if (!strcmp(t, "member_expression")) {
		e = new_expr(cx, E_MEMBER, n);
		e->lhs = expr(cx, field(n, "object"));
		e->str = text(cx, field(n, "field"));
		e->loc = loc_of(cx, field(n, "field"));
		if (!e->lhs)
			return NULL;
	} else if (!strcmp(t, "call_expression")) {
		e = new_expr(cx, E_CALL, n);
		TSNode fn = field(n, "function");
		if (is(fn, "member_expression")) {
			e->lhs = expr(cx, field(fn, "object"));
			e->str = text(cx, field(fn, "field"));
		} else {
			e->str = text(cx, fn);
		}
		expr_list(cx, field(n, "arguments"), e);
	} else if (!strcmp(t, "binary_expression")) {
		e = new_expr(cx, E_BINARY, n);
		char *op = text(cx, field(n, "operator"));
		for (size_t i = 0; i < sizeof(binops) / sizeof(binops[0]); i++)
			if (!strcmp(op, binops[i].tok))
				e->op = binops[i].op;
		e->lhs = expr(cx, field(n, "left"));
		e->rhs = expr(cx, field(n, "right"));
		if (!e->lhs || !e->rhs)
			return NULL;
	} else if (!strcmp(t, "unary_expression")) {
		e = new_expr(cx, E_NOT, n);
		e->lhs = expr(cx, field(n, "operand"));
		if (!e->lhs)
			return NULL;
	} else if (!strcmp(t, "parenthesized_expression")) {
		/* the expression, not a comment before it: `(// why` would otherwise drop the whole
		 * statement that holds it, silently */
		for (uint32_t i = 0; i < ts_node_named_child_count(n); i++)
			if (!is(ts_node_named_child(n, i), "comment"))
				return expr(cx, ts_node_named_child(n, i));
		return NULL;
	} else if (!strcmp(t, "list")) {
		e = new_expr(cx, E_LIST, n);
		expr_list(cx, n, e);
	} else if (!strcmp(t, "range")) {
		e = new_expr(cx, E_RANGE, n);
		e->num = strtoll(text(cx, field(n, "low")), NULL, 10);
		e->num2 = strtoll(text(cx, field(n, "high")), NULL, 10);
		if (e->num > e->num2)
			l7_diag(cx->d, L7_ERROR, e->loc, "empty range: %lld > %lld", e->num, e->num2);
	} else {
		return NULL;   /* comments and anything the parser could not place */
	}
	return e;
}

/* ---- statements ---- */

static struct l7_stmt *stmt(struct cx *cx, TSNode n)
{
	if (ts_node_is_null(n) || is(n, "ERROR") || ts_node_is_missing(n) || is(n, "comment"))
		return NULL;
	struct l7_stmt *s = NEW(cx, struct l7_stmt);
	s->loc = loc_of(cx, n);
	const char *t = type_of(n);
	if (!strcmp(t, "action_statement")) {
		s->kind = S_ACTION;
		s->call = expr(cx, field(n, "call"));
		if (!s->call)
			return NULL;
	} else if (!strcmp(t, "if_statement")) {
		s->kind = S_IF;
		s->cond = expr(cx, field(n, "condition"));
		s->then = stmt(cx, field(n, "consequence"));
		s->otherwise = stmt(cx, field(n, "alternative"));
		if (!s->cond)
			return NULL;
	} else if (!strcmp(t, "block")) {
		s->kind = S_BLOCK;
		uint32_t c = ts_node_named_child_count(n);
		for (uint32_t i = 0; i < c; i++) {
			struct l7_stmt *ch = stmt(cx, ts_node_named_child(n, i));
			if (!ch)
				continue;
			GROW(cx, s->body, s->nbody);
			s->body[s->nbody++] = ch;
		}
	} else if (!strcmp(t, "section_tag")) {
		s->kind = S_SECTION;
		s->section = text(cx, field(n, "name"));
	} else {
		return NULL;
	}
	return s;
}

/* ---- declarations ---- */

static void binding(struct cx *cx, TSNode n, struct l7_binding *b)
{
	b->type = text(cx, field(n, "type"));
	b->name = name_of(cx, n, &b->loc);
	b->type_loc = loc_of(cx, field(n, "type"));
}

static void policy(struct cx *cx, TSNode n)
{
	struct l7_module *m = cx->m;
	struct l7_policy *p = PUSH(cx, m->policies, m->npolicies);
	p->name = name_of(cx, n, &p->loc);
	uint32_t c = ts_node_named_child_count(n);
	for (uint32_t i = 0; i < c; i++) {
		TSNode ch = ts_node_named_child(n, i);
		if (is(ch, "act_binding")) {
			/* the request's act and, optionally, its response's (which is which is
			 * settled by l7_resolve from the types) */
			if (p->has_resp) {
				l7_diag(cx->d, L7_ERROR, loc_of(cx, ch), "policy '%s' binds more than two acts (a request and its response)",
					p->name);
			} else if (p->has_act) {
				binding(cx, ch, &p->resp);
				p->has_resp = true;
			} else {
				binding(cx, ch, &p->act);
				p->has_act = true;
			}
		} else if (is(ch, "using_binding")) {
			GROW(cx, p->usings, p->nusings);
			binding(cx, ch, &p->usings[p->nusings++]);
		} else if (is(ch, "context_binding")) {
			struct l7_expr tmp = { 0 };
			TSNode pat = field(ch, "pattern");
			string_value(cx, pat, &tmp);
			p->context = tmp.str;
			p->context_loc = loc_of(cx, pat);
		}
	}
	if (!p->has_act)
		l7_diag(cx->d, L7_ERROR, p->loc, "policy '%s' has no 'act (Type name)' binding", p->name);
	p->body = stmt(cx, field(n, "body"));
}

static void endpoint(struct cx *cx, TSNode n, struct l7_decl *decl)
{
	struct l7_endpoint *ep = PUSH(cx, decl->endpoints, decl->nendpoints);
	TSNode addr = is(n, "address") ? n : field(n, "address");
	ep->loc = loc_of(cx, addr);
	ep->weight = 1;
	address_value(cx, addr, &ep->ip, &ep->port);
	TSNode w = is(n, "endpoint") ? field(n, "weight") : (TSNode){ 0 };
	if (!ts_node_is_null(w)) {
		/* 255: a round-robin turn table of sum(weights) entries stays small, and libketama's
		 * and HAProxy's ranges are about the same (HAProxy: 0-256) */
		long v = strtol(text(cx, w), NULL, 10);
		if (v < 1 || v > 255)
			l7_diag(cx->d, L7_ERROR, loc_of(cx, w), "weight must be between 1 and 255");
		ep->weight = v < 1 ? 1 : v > 255 ? 255 : (unsigned)v;
	}
}

/* balance round_robin | balance hash(path | source | header "name") */
static void balance(struct cx *cx, TSNode n, struct l7_decl *decl)
{
	TSNode pol = field(n, "policy"), key = field(n, "key");
	char *name = text(cx, pol);
	bool parens = false;
	for (uint32_t i = 0; i < ts_node_child_count(n); i++)
		parens |= !strcmp(ts_node_type(ts_node_child(n, i)), "(");
	decl->balance_loc = loc_of(cx, n);
	if (!strcmp(name, "round_robin")) {
		if (parens)
			l7_diag(cx->d, L7_ERROR, loc_of(cx, n), "round_robin takes no key: write 'balance round_robin'");
		decl->balance = LB_ROUND_ROBIN;
		return;
	}
	if (strcmp(name, "hash")) {
		l7_diag(cx->d, L7_ERROR, loc_of(cx, pol),
			"unknown balance policy '%s' (expected round_robin, hash(path), hash(source) or hash(header \"name\"))", name);
		return;
	}
	if (ts_node_is_null(key)) {
		l7_diag(cx->d, L7_ERROR, loc_of(cx, n), "hash needs a key: hash(path), hash(source) or hash(header \"name\")");
		return;
	}
	TSNode kind = field(key, "kind"), hname = field(key, "name");
	char *k = text(cx, kind);
	decl->key_loc = loc_of(cx, key);
	if (!strcmp(k, "header") && !ts_node_is_null(hname)) {
		struct l7_expr tmp = { 0 };
		string_value(cx, hname, &tmp);
		decl->key = LBK_HEADER;
		decl->key_header = tmp.str;
		decl->key_header_len = tmp.str_len;
		decl->key_loc = loc_of(cx, hname);
	} else if (!strcmp(k, "path") || !strcmp(k, "source")) {
		decl->key = !strcmp(k, "path") ? LBK_PATH : LBK_SOURCE;
		if (!ts_node_is_null(hname)) {
			l7_diag(cx->d, L7_ERROR, loc_of(cx, hname), "hash(%s) takes no name", k);
			return;
		}
	} else if (!strcmp(k, "header")) {
		l7_diag(cx->d, L7_ERROR, loc_of(cx, key), "hash(header) needs the header's name: hash(header \"x-user\")");
		return;
	} else {
		l7_diag(cx->d, L7_ERROR, loc_of(cx, kind), "unknown hash key '%s' (expected path, source or header \"name\")", k);
		return;
	}
	decl->balance = LB_HASH;
}

/* A duration as written: 500ms, 2s, 1m; ms, or 0 if it is not one. */
static unsigned long duration_ms(const char *t)
{
	char *end;
	unsigned long v = strtoul(t, &end, 10);
	unsigned long mul = !strcmp(end, "ms") ? 1 : !strcmp(end, "s") ? 1000 : !strcmp(end, "m") ? 60000 : 0;
	return v > 86400000ul ? 86400000ul : v * mul;
}

/* health "PATH" [every D] [timeout D] [unhealthy N] [healthy N] [status LO..HI]: the defaults
 * are HAProxy's (inter 2s, fall 3, rise 2) with Envoy's 2xx, and a timeout of 1 s. */
static void health(struct cx *cx, TSNode n, struct l7_decl *decl)
{
	struct l7_health *h = &decl->health;
	struct l7_expr tmp = { 0 };
	TSNode path = field(n, "path");
	unsigned seen = 0;
	static const char *const names[] = { "every", "timeout", "unhealthy", "healthy", "status", "host" };

	if (h->on) {
		l7_diag(cx->d, L7_ERROR, loc_of(cx, n), "upstream '%s' has two health clauses", decl->name);
		return;
	}
	*h = (struct l7_health){ true, NULL, NULL, 2000, 1000, 3, 2, 200, 299, loc_of(cx, n) };
	string_value(cx, path, &tmp);
	h->path = tmp.str;
	bool clean = tmp.str_len > 0 && tmp.str_len <= 1024 && strlen(tmp.str) == tmp.str_len;
	for (size_t i = 0; clean && i < tmp.str_len; i++)
		clean = (unsigned char)tmp.str[i] > ' ' && tmp.str[i] != 0x7f;
	if (!clean || tmp.str[0] != '/')
		l7_diag(cx->d, L7_ERROR, loc_of(cx, path),
			"health check path \"%s\" is not a request target: it starts with '/' and has no spaces or control bytes (up to 1024)",
			tmp.str);
	for (uint32_t i = 0; i < ts_node_named_child_count(n); i++) {
		TSNode o = ts_node_named_child(n, i);
		if (!is(o, "health_option"))
			continue;
		TSNode name = field(o, "name"), val = field(o, "value");
		char *k = text(cx, name), *v = text(cx, val);
		int which = -1;
		for (int j = 0; j < 6; j++)
			which = !strcmp(k, names[j]) ? j : which;
		if (which < 0) {
			l7_diag(cx->d, L7_ERROR, loc_of(cx, name),
				"unknown health option '%s' (expected every, timeout, unhealthy, healthy, status or host)", k);
			continue;
		}
		if (is(val, "string") != (which == 5)) {
			l7_diag(cx->d, L7_ERROR, loc_of(cx, val), which == 5 ? "'host' takes a string: host \"api.example\"" :
				"'%s' takes no string", k);
			continue;
		}
		if (seen & (1u << which)) {
			l7_diag(cx->d, L7_ERROR, loc_of(cx, name), "health option '%s' given twice", k);
			continue;
		}
		seen |= 1u << which;
		if (which <= 1) {
			unsigned long ms = is(val, "duration") ? duration_ms(v) : 0;
			if (!is(val, "duration"))
				l7_diag(cx->d, L7_ERROR, loc_of(cx, val), "'%s' takes a duration: 500ms, 2s, 1m", k);
			else if (ms < (which ? 10 : 100) || ms > 3600000)
				l7_diag(cx->d, L7_ERROR, loc_of(cx, val), "health check %s %s is out of range (%s to 1h)", which ? "timeout" : "period", v,
					which ? "10ms" : "100ms");
			else if (which)
				h->timeout_ms = (unsigned)ms;
			else
				h->every_ms = (unsigned)ms;
		} else if (which <= 3) {
			long c = is(val, "integer") ? strtol(v, NULL, 10) : 0;
			if (c < 1 || c > 100)
				l7_diag(cx->d, L7_ERROR, loc_of(cx, val), "'%s' takes a count of checks in a row, 1 to 100", k);
			else if (which == 2)
				h->unhealthy = (unsigned)c;
			else
				h->healthy = (unsigned)c;
		} else if (which == 5) {
			struct l7_expr hs = { 0 };
			string_value(cx, val, &hs);
			bool ok = hs.str_len > 0 && hs.str_len <= 255 && strlen(hs.str) == hs.str_len;
			for (size_t j = 0; ok && j < hs.str_len; j++)
				ok = (unsigned char)hs.str[j] > ' ' && hs.str[j] != 0x7f;
			if (!ok)
				l7_diag(cx->d, L7_ERROR, loc_of(cx, val),
					"health check host \"%s\" is not a Host value: 1-255 bytes, no spaces or control bytes", hs.str);
			else
				h->host = hs.str;
		} else {
			long lo = is(val, "range") ? strtol(text(cx, field(val, "low")), NULL, 10) : 0;
			long hi = is(val, "range") ? strtol(text(cx, field(val, "high")), NULL, 10) : 0;
			if (is(val, "integer"))
				lo = hi = strtol(v, NULL, 10);
			if (lo < 100 || hi > 599 || lo > hi)
				l7_diag(cx->d, L7_ERROR, loc_of(cx, val),
					"'status' takes a status or a range of them within 100..599: status 200..399");
			else
				h->status_lo = (unsigned)lo, h->status_hi = (unsigned)hi;
		}
	}
	if (h->timeout_ms > h->every_ms)
		l7_diag(cx->d, L7_ERROR, h->loc, "a health check timeout of %u ms is longer than its period (%u ms)", h->timeout_ms,
			h->every_ms);
}

/* retries N: connect failures of an idempotent request tried again, each on another endpoint */
static void retries(struct cx *cx, TSNode n, struct l7_decl *decl)
{
	TSNode c = field(n, "count");
	long v = strtol(text(cx, c), NULL, 10);
	if (decl->retries >= 0)
		l7_diag(cx->d, L7_ERROR, loc_of(cx, n), "upstream '%s' has two retries clauses", decl->name);
	else if (v > 3)
		l7_diag(cx->d, L7_ERROR, loc_of(cx, c), "retries must be between 0 and 3 (each goes to another endpoint of the set)");
	decl->retries = v > 3 ? 3 : (int)v;
	decl->retries_loc = loc_of(cx, n);
}

/* A host name as DNS writes it (RFC 1123): dot-separated labels of letters, digits and inner
 * hyphens, 1-63 bytes each, 253 in all (a trailing dot allowed). */
static bool host_name_ok(const char *h, size_t n)
{
	if (n && h[n - 1] == '.')
		n--;
	if (!n || n > 253)
		return false;
	for (size_t i = 0, len = 0; i <= n; i++) {
		char c = i < n ? h[i] : '.';
		if (c == '.') {
			if (!len || h[i - 1] == '-')
				return false;
			len = 0;
		} else if (isalnum((unsigned char)c) || (c == '-' && len)) {
			if (++len > 63)
				return false;
		} else {
			return false;
		}
	}
	return true;
}

/* upstream api = "NAME:PORT"; | upstream api = endpoints("NAME"); */
static void dyn_target(struct cx *cx, TSNode n, struct l7_decl *dcl)
{
	TSNode s = field(n, "name");
	struct l7_expr tmp = { 0 };
	string_value(cx, s, &tmp);
	dcl->dyn_loc = loc_of(cx, s);
	dcl->dyn_name = tmp.str;
	if (is(n, "endpoint_set")) {
		dcl->dyn = DYN_SET;
		bool ok = tmp.str_len && tmp.str_len <= 63;
		for (size_t i = 0; ok && i < tmp.str_len; i++)
			ok = isalnum((unsigned char)tmp.str[i]) || strchr("._-", tmp.str[i]);
		if (!ok)
			l7_diag(cx->d, L7_ERROR, dcl->dyn_loc,
				"invalid endpoint set name '%s' (1-63 letters, digits, '.', '_' or '-', as the --endpoints file writes it)",
				tmp.str);
		return;
	}
	dcl->dyn = DYN_NAME;
	const char *colon = NULL;
	for (size_t i = 0; i < tmp.str_len; i++)
		colon = tmp.str[i] == ':' ? tmp.str + i : colon;
	char *end = NULL;
	long port = colon ? strtol(colon + 1, &end, 10) : 0;
	if (!colon || colon[1] == '-' || !colon[1] || *end || port < 1 || port > 65535) {
		l7_diag(cx->d, L7_ERROR, dcl->dyn_loc, "invalid upstream address \"%s\": expected \"NAME:PORT\", port 1-65535", tmp.str);
		return;
	}
	if (!host_name_ok(tmp.str, (size_t)(colon - tmp.str))) {
		l7_diag(cx->d, L7_ERROR, dcl->dyn_loc,
			"invalid host name \"%.*s\": labels of letters, digits and inner '-', 1-63 bytes each, 253 in all", (int)(colon - tmp.str),
			tmp.str);
		return;
	}
	tmp.str[colon - tmp.str] = 0;   /* the name alone */
	dcl->dyn_port = (unsigned)port;
}

static struct l7_decl *decl(struct cx *cx, TSNode n, struct l7_decl **arr, int *count)
{
	struct l7_decl *dcl = PUSH(cx, *arr, *count);
	dcl->name = name_of(cx, n, &dcl->loc);
	dcl->syntax_error = ts_node_has_error(n);
	dcl->retries = -1;
	uint32_t c = ts_node_named_child_count(n);
	for (uint32_t i = 0; i < c; i++) {
		TSNode ch = ts_node_named_child(n, i);
		if (is(ch, "endpoint") || is(ch, "address"))
			endpoint(cx, ch, dcl);
		else if (is(ch, "balance") && dcl->balance != LB_DEFAULT)
			l7_diag(cx->d, L7_ERROR, loc_of(cx, ch), "upstream '%s' has two balance clauses", dcl->name);
		else if (is(ch, "balance"))
			balance(cx, ch, dcl);
		else if (is(ch, "health"))
			health(cx, ch, dcl);
		else if (is(ch, "retries"))
			retries(cx, ch, dcl);
		else if (is(ch, "endpoint_name") || is(ch, "endpoint_set"))
			dyn_target(cx, ch, dcl);
	}
	return dcl;
}

static void instance(struct cx *cx, TSNode n)
{
	struct l7_module *m = cx->m;
	struct l7_instance *in = PUSH(cx, m->instances, m->ninstances);
	in->type = text(cx, field(n, "type"));
	in->type_loc = loc_of(cx, field(n, "type"));
	in->name = name_of(cx, n, &in->loc);
	uint32_t c = ts_node_named_child_count(n);
	for (uint32_t i = 0; i < c; i++) {
		TSNode ch = ts_node_named_child(n, i);
		if (!is(ch, "setting"))
			continue;
		struct l7_expr *v = expr(cx, field(ch, "value"));
		if (!v)
			continue;
		GROW(cx, in->settings, in->nsettings);
		struct l7_setting *st = &in->settings[in->nsettings++];
		st->name = name_of(cx, ch, &st->loc);
		st->value = v;
	}
}

static void identity(struct cx *cx, TSNode n)
{
	struct l7_module *m = cx->m;
	struct l7_identity *id = PUSH(cx, m->identities, m->nidentities);
	id->name = name_of(cx, n, &id->loc);
	uint32_t c = ts_node_named_child_count(n);
	for (uint32_t i = 0; i < c; i++) {
		TSNode ch = ts_node_named_child(n, i);
		if (!is(ch, "cidr") && !is(ch, "ip"))
			continue;
		struct l7_expr *e = expr(cx, ch);
		if (!e)
			continue;
		GROW(cx, id->ips, id->n);
		GROW(cx, id->prefixes, id->n);
		id->ips[id->n] = e->ip;
		id->prefixes[id->n++] = (unsigned)e->num2;
	}
}

static void params(struct cx *cx, TSNode n, struct l7_iface_param **out, int *count)
{
	uint32_t c = ts_node_named_child_count(n);
	for (uint32_t i = 0; i < c; i++) {
		TSNode ch = ts_node_named_child(n, i);
		if (!is(ch, "self") && !is(ch, "parameter"))
			continue;
		GROW(cx, *out, *count);
		struct l7_iface_param *p = &(*out)[(*count)++];
		memset(p, 0, sizeof(*p));
		p->is_self = is(ch, "self");
		if (!p->is_self) {
			p->type = text(cx, field(ch, "type"));
			p->name = text(cx, field(ch, "name"));
		}
	}
}

static void iface_type(struct cx *cx, TSNode n, bool is_state)
{
	struct l7_module *m = cx->m;
	if (!cx->is_interface) {
		l7_diag(cx->d, L7_ERROR, loc_of(cx, n), "%s types are declared in interface files (*.l7i), not in policies",
			is_state ? "state" : "act");
		return;
	}
	struct l7_iface_type *ty = PUSH(cx, m->types, m->ntypes);
	ty->name = name_of(cx, n, &ty->loc);
	ty->is_state = is_state;
	TSNode base = field(n, "base");
	ty->is_response = !is_state && !ts_node_is_null(base) && !strcmp(text(cx, base), "Response");
	uint32_t c = ts_node_named_child_count(n);
	for (uint32_t i = 0; i < c; i++) {
		TSNode ch = ts_node_named_child(n, i);
		TSNode intr = field(ch, "intrinsic");
		if (is(ch, "field_declaration")) {
			struct l7_iface_field *f = PUSH(cx, ty->fields, ty->nfields);
			f->name = name_of(cx, ch, &f->loc);
			TSNode ps = field(ch, "parameters");
			if (!ts_node_is_null(ps))
				params(cx, ps, &f->params, &f->nparams);
			f->type_name = text(cx, field(ch, "type"));
			f->intrinsic_name = ts_node_is_null(intr) ? NULL : text(cx, intr);
		} else if (is(ch, "action_declaration")) {
			struct l7_iface_action *a = PUSH(cx, ty->actions, ty->nactions);
			a->name = name_of(cx, ch, &a->loc);
			params(cx, field(ch, "parameters"), &a->params, &a->nparams);
			/* tags and the intrinsic name are interpreted by l7_resolve */
			for (uint32_t k = 0; k < ts_node_named_child_count(ch); k++) {
				TSNode tag = ts_node_named_child(ch, k);
				if (!is(tag, "section_tag"))
					continue;
				char *tn = text(cx, field(tag, "name"));
				if (!strcmp(tn, "proxy"))
					a->proxy_only = true;
				else if (!strcmp(tn, "Ingress"))
					a->ingress_only = true;
				else if (!strcmp(tn, "Egress"))
					a->egress_only = true;
				else
					l7_diag(cx->d, L7_ERROR, loc_of(cx, tag), "unknown action tag '[%s]' (expected [proxy], [Ingress] or [Egress])", tn);
			}
			a->intrinsic_name = ts_node_is_null(intr) ? NULL : text(cx, intr);
		}
	}
}

/* A declaration whose value did not parse (reported): its name is declared all the same, so
 * that its uses resolve. */
static void declare_broken(struct cx *cx, const struct l7_broken_decl *b)
{
	struct l7_module *m = cx->m;
	struct l7_decl *dcl = NULL;
	if (!strcmp(b->kind, "identity")) {
		struct l7_identity *id = PUSH(cx, m->identities, m->nidentities);
		id->name = b->name;
		id->loc = b->loc;
		return;
	}
	if (!strcmp(b->kind, "service")) {
		GROW(cx, m->services, m->nservices);
		dcl = &m->services[m->nservices++];
	} else if (!strcmp(b->kind, "upstream")) {
		GROW(cx, m->upstreams, m->nupstreams);
		dcl = &m->upstreams[m->nupstreams++];
	} else if (!m->fallback) {
		dcl = m->fallback = NEW(cx, struct l7_decl);
	} else {
		return;
	}
	memset(dcl, 0, sizeof(*dcl));
	dcl->name = b->name;
	dcl->loc = b->loc;
	dcl->syntax_error = true;
}

void l7_parse(struct l7_module *m, const struct l7_source *src, bool is_interface, struct l7_diags *d)
{
	struct cx cx = { m, src, d, is_interface };
	if (!m->src && !is_interface)
		m->src = src;
	TSParser *parser = ts_parser_new();
	ts_parser_set_language(parser, tree_sitter_l7());
	TSTree *tree = ts_parser_parse_string(parser, NULL, src->text, (uint32_t)src->len);
	TSNode root = ts_tree_root_node(tree);
	struct l7_broken_decl *broken;
	int nbroken = l7_syntax_errors(m, src, root, d, &broken);

	uint32_t c = ts_node_named_child_count(root);
	for (uint32_t i = 0; i < c; i++) {
		TSNode n = ts_node_named_child(root, i);
		const char *t = type_of(n);
		if (is_interface && strcmp(t, "act_declaration") && strcmp(t, "state_declaration") &&
		    strcmp(t, "comment") && strcmp(t, "ERROR")) {
			l7_diag(d, L7_ERROR, loc_of(&cx, n), "interface files declare only act and state types");
			continue;
		}
		if (!strcmp(t, "import_declaration")) {
			GROW(&cx, m->imports, m->nimports);
			GROW(&cx, m->import_locs, m->nimports);
			struct l7_expr tmp = { 0 };
			string_value(&cx, field(n, "path"), &tmp);
			m->import_locs[m->nimports] = loc_of(&cx, field(n, "path"));
			m->imports[m->nimports++] = tmp.str;
		} else if (!strcmp(t, "service_declaration")) {
			decl(&cx, n, &m->services, &m->nservices);
		} else if (!strcmp(t, "upstream_declaration")) {
			decl(&cx, n, &m->upstreams, &m->nupstreams);
		} else if (!strcmp(t, "fallback_declaration")) {
			if (m->fallback) {
				l7_diag(d, L7_ERROR, loc_of(&cx, n), "more than one fallback proxy declared");
				l7_diag(d, L7_NOTE, m->fallback->loc, "the first is here");
				continue;
			}
			int one = 0;
			m->fallback = NULL;
			struct l7_decl *arr = NULL;
			m->fallback = decl(&cx, n, &arr, &one);
		} else if (!strcmp(t, "policy_definition")) {
			policy(&cx, n);
		} else if (!strcmp(t, "instance_declaration")) {
			instance(&cx, n);
		} else if (!strcmp(t, "identity_declaration")) {
			identity(&cx, n);
		} else if (!strcmp(t, "act_declaration")) {
			iface_type(&cx, n, false);
		} else if (!strcmp(t, "state_declaration")) {
			iface_type(&cx, n, true);
		}
	}
	for (int i = 0; i < nbroken; i++)
		declare_broken(&cx, &broken[i]);
	ts_tree_delete(tree);
	ts_parser_delete(parser);
}

void l7_module_free(struct l7_module *m)
{
	for (int i = 0; i < m->niface_sources; i++)
		l7_source_free(m->iface_sources[i]);
	free(m->iface_sources);
	l7_arena_free(m->arena);
	memset(m, 0, sizeof(*m));
}
