/* --emit=ir: a stable text form of the Parse-Match-Action IR, for reading and golden tests. */
#include "ir.h"

#include "l7/abi.h"
#include "l7/grpc.h"

#include <assert.h>
#include <limits.h>
#include <string.h>

static const char *const method_names[] = {
	"OTHER", "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH",
};

static void str_out(FILE *o, const char *s, size_t n)
{
	fputc('"', o);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '"' || c == '\\')
			fprintf(o, "\\%c", c);
		else if (c < 32 || c >= 127)
			fprintf(o, "\\x%02x", c);
		else
			fputc(c, o);
	}
	fputc('"', o);
}

static void field_out(const struct ir_program *p, enum ir_field f, int idx, FILE *o)
{
	assert(f != IR_F_HEADER || (idx >= 0 && idx < p->nheaders));
	assert(f != IR_F_CLAIM || (idx >= 0 && idx < p->nclaims));
	static const char *names[] = { "path", "query", "method", "host", "header", "claim", "target" };
	if (f == IR_F_HEADER)
		fprintf(o, "header[%d:%s]", idx, p->headers[idx]);
	else if (f == IR_F_CLAIM)
		fprintf(o, "claim[%d:%s.%s]", idx, p->jwts[p->claims[idx].jwt].name, p->claims[idx].name);
	else if ((int)f >= 0)
		fputs(names[f], o);
	else
		fputs("(one for all)", o);
}

static void ip_out(FILE *o, unsigned be)
{
	const unsigned char *b = (const unsigned char *)&be;
	fprintf(o, "%u.%u.%u.%u", b[0], b[1], b[2], b[3]);
}

/* The text of each condition kind (conds.def): one hook each. */
typedef void print_fn(const struct ir_program *p, const struct ir_cond *c, FILE *o);
#define IR_COND(kind, operands) static print_fn print_##kind;
#include "conds.def"
#undef IR_COND

void ir_cond_print(const struct ir_program *p, const struct ir_cond *c, FILE *o)
{
	static print_fn *const hooks[] = {
#define IR_COND(kind, operands) [IR_C_##kind] = print_##kind,
#include "conds.def"
#undef IR_COND
	};
	hooks[c->kind](p, c, o);
}

static void print_TRUE(const struct ir_program *p, const struct ir_cond *c, FILE *o) { (void)p, (void)c, fputs("true", o); }
static void print_FALSE(const struct ir_program *p, const struct ir_cond *c, FILE *o) { (void)p, (void)c, fputs("false", o); }

static void binary(const struct ir_program *p, const struct ir_cond *c, FILE *o, const char *op)
{
	fputc('(', o);
	ir_cond_print(p, c->a, o);
	fputs(op, o);
	ir_cond_print(p, c->b, o);
	fputc(')', o);
}

static void print_AND(const struct ir_program *p, const struct ir_cond *c, FILE *o) { binary(p, c, o, " && "); }
static void print_OR(const struct ir_program *p, const struct ir_cond *c, FILE *o) { binary(p, c, o, " || "); }

static void print_NOT(const struct ir_program *p, const struct ir_cond *c, FILE *o)
{
	bool wrap = c->a->kind != IR_C_AND && c->a->kind != IR_C_OR;   /* those print their own () */
	fputs(wrap ? "!(" : "!", o);
	ir_cond_print(p, c->a, o);
	if (wrap)
		fputc(')', o);
}

static void print_STR_EQ(const struct ir_program *p, const struct ir_cond *c, FILE *o)
{
	field_out(p, c->field, c->header, o);
	fputs(" == ", o);
	str_out(o, c->str, c->len);
}

/* name(field, "constant") */
static void call_out(const struct ir_program *p, const struct ir_cond *c, FILE *o, const char *name, const char *s,
		     size_t n)
{
	fprintf(o, "%s(", name);
	field_out(p, c->field, c->header, o);
	fputs(", ", o);
	str_out(o, s, n);
	fputc(')', o);
}

static void print_STR_PREFIX(const struct ir_program *p, const struct ir_cond *c, FILE *o)
{
	call_out(p, c, o, "starts_with", c->str, c->len);
}

static void print_REGEX(const struct ir_program *p, const struct ir_cond *c, FILE *o)
{
	call_out(p, c, o, "matches", c->re->src, c->re->len);
	fprintf(o, " [regex #%d]", c->re->index);
}

static void print_PROTOCOL(const struct ir_program *p, const struct ir_cond *c, FILE *o)
{
	(void)p;
	fprintf(o, "protocol is %s", ir_protocol_name(c->lo));
}

static void print_METHOD_IS(const struct ir_program *p, const struct ir_cond *c, FILE *o)
{
	(void)p;
	fprintf(o, "method is %s", c->method < sizeof(method_names) / sizeof(*method_names) ? method_names[c->method] : "?");
}

static void print_HAS_HEADER(const struct ir_program *p, const struct ir_cond *c, FILE *o)
{
	fprintf(o, "has header[%d:%s]", c->header, p->headers[c->header]);
}

static void print_SOURCE_IN(const struct ir_program *p, const struct ir_cond *c, FILE *o)
{
	(void)p;
	fputs("source in ", o);
	ip_out(o, c->net);
	fprintf(o, "/%d", __builtin_popcount(c->netmask));
}

static void print_PORT_IN(const struct ir_program *p, const struct ir_cond *c, FILE *o)
{
	(void)p;
	if (c->lo == c->hi)
		fprintf(o, "port == %u", c->lo);
	else
		fprintf(o, "port in %u..%u", c->lo, c->hi);
}

static void print_JWT_VALID(const struct ir_program *p, const struct ir_cond *c, FILE *o)
{
	fprintf(o, "jwt %s valid", p->jwts[c->jwt].name);
}

static void print_IDENTITY(const struct ir_program *p, const struct ir_cond *c, FILE *o)
{
	fprintf(o, "caller is %s", c->ident < p->nidentities ? p->identities[c->ident].name : "external");
}

static void print_COUNTER_IN(const struct ir_program *p, const struct ir_cond *c, FILE *o)
{
	if (c->hi == UINT_MAX)
		fprintf(o, "%s.value >= %u", p->counters[c->state], c->lo);
	else
		fprintf(o, "%s.value in %u..%u", p->counters[c->state], c->lo, c->hi);
}

static void print_TIMER_ELAPSED(const struct ir_program *p, const struct ir_cond *c, FILE *o)
{
	fprintf(o, "%s elapsed %us", p->timers[c->state], c->lo);
}

static void print_SOURCE_SET(const struct ir_program *p, const struct ir_cond *c, FILE *o)
{
	fprintf(o, "source in set #%d (%d prefixes)", c->set, p->cidr_sets[c->set].n);
}

static void print_TABLE(const struct ir_program *p, const struct ir_cond *c, FILE *o)
{
	const struct ir_table *t = &p->tables[c->table];
	fputs("(method, ", o);
	field_out(p, t->field, t->header, o);
	if (t->ngroups == 1)
		fprintf(o, ") in table #%d (%d entries)", c->table, t->n);
	else
		fprintf(o, ") first in table #%d is of group %d of %d (%d entries)", c->table, c->group, t->ngroups, t->n);
}

static void print_SERVICE_IN(const struct ir_program *p, const struct ir_cond *c, FILE *o)
{
	fputs("service in {", o);
	for (int i = 0, first = 1; i < p->nservices && i < 64; i++)
		if (c->mask >> i & 1) {
			fprintf(o, "%s%s", first ? "" : ", ", p->services[i].name);
			first = 0;
		}
	fputc('}', o);
}

/* " a.b.c.d/len ..." and the end of the line */
static void prefixes_out(FILE *o, const unsigned *nets, const unsigned *netmasks, int n)
{
	for (int k = 0; k < n; k++) {
		fputc(' ', o);
		ip_out(o, nets[k]);
		fprintf(o, "/%d", __builtin_popcount(netmasks[k]));
	}
	fputc('\n', o);
}

static void endpoint_out(FILE *o, const struct ir_endpoint *e)
{
	fprintf(o, " %u.%u.%u.%u:%u", e->ip >> 24, e->ip >> 16 & 255, e->ip >> 8 & 255, e->ip & 255, e->port);
	if (e->weight != 1)
		fprintf(o, " weight %u", e->weight);
}

/* A service or a single-endpoint upstream: one line (an upstream's index is its backend
 * slot). A set: one line per slot, named NAME#i as l7run names it, then how it balances. */
static void target_out(const struct ir_program *p, FILE *o, const char *kind, int idx, const struct ir_target *t)
{
	if (t->nendpoints <= 1) {
		fprintf(o, "%s %d %s", kind, idx, t->name);
		for (int i = 0; i < t->nendpoints; i++)
			endpoint_out(o, &t->endpoints[i]);
		fputc('\n', o);
		return;
	}
	for (int i = 0; i < t->nendpoints; i++) {
		fprintf(o, "%s %d %s#%d", kind, t->slot + i, t->name, i);
		endpoint_out(o, &t->endpoints[i]);
		fputc('\n', o);
	}
	fprintf(o, "balance %s over slots %d-%d: ", t->name, t->slot, t->slot + t->nendpoints - 1);
	if (t->rt_kind != IR_RT_NONE)
		fprintf(o, "run-time endpoints (%s \"%s\"%s%.0u), tables filled by l7run: ",
			t->rt_kind == IR_RT_NAME ? "name" : "set", t->rt_name, t->rt_kind == IR_RT_NAME ? " port " : "", t->rt_port);
	if (t->balance == IR_LB_ROUND_ROBIN && t->rt_kind != IR_RT_NONE) {
		fputs("round robin\n", o);
		return;
	}
	if (t->balance == IR_LB_ROUND_ROBIN) {
		fprintf(o, "round robin, %d turns\n", t->nturns);
		return;
	}
	fputs("hash(", o);
	if (t->key_field < 0)
		fputs("source", o);
	else if (t->key_field == IR_F_HEADER && t->key_header < 0)
		fputs("header, not read: no rule routes here", o);
	else
		field_out(p, (enum ir_field)t->key_field, t->key_header, o);
	if (t->rt_kind != IR_RT_NONE)
		fputs(")\n", o);
	else
		fprintf(o, "), ketama ring of %d points (%d with padding)\n", t->ring_points, 1 << t->ring_log2);
}

/* Each action kind's text (actions.def): one hook each. */
typedef void show_fn(const struct ir_program *p, const struct ir_action *a, FILE *o);
#define IR_ACTION(kind, operands) static show_fn show_##kind;
#include "actions.def"
#undef IR_ACTION

static void show_MUTATE(const struct ir_program *p, const struct ir_action *a, FILE *o)
{
	static const char *const op[] = { "set", "add", "remove" };
	fprintf(o, " %s %s", op[a->op], a->response ? "response" : "request");
	if (a->op == IR_MUT_REMOVE)
		fprintf(o, " header[%d:%s];", a->header, a->response ? p->rheaders[a->header] : p->headers[a->header]);
	else
		fprintf(o, " #%d;", a->mutation);
}

static void show_COUNT(const struct ir_program *p, const struct ir_action *a, FILE *o)
{
	fprintf(o, " count %s;", p->counters[a->counter]);
}

static void show_COUNTER_RESET(const struct ir_program *p, const struct ir_action *a, FILE *o)
{
	fprintf(o, " reset %s;", p->counters[a->counter]);
}

static void show_TIMER_RESTART(const struct ir_program *p, const struct ir_action *a, FILE *o)
{
	fprintf(o, " restart %s;", p->timers[a->timer]);
}

static void show_LIMIT(const struct ir_program *p, const struct ir_action *a, FILE *o)
{
	fprintf(o, " limit %s by ", p->buckets[a->bucket].name);
	if (a->key_source)
		fputs("source", o);
	else
		field_out(p, a->key_field, a->key_header, o);
	fputc(';', o);
}

static void show_AUDIT(const struct ir_program *p, const struct ir_action *a, FILE *o)
{
	(void)p, (void)a;
	fputs(" audit;", o);
}

static void show_NOLOG(const struct ir_program *p, const struct ir_action *a, FILE *o)
{
	(void)p, (void)a;
	fputs(" nolog;", o);
}

static void rule_out(const struct ir_program *p, const struct ir_rule *r, FILE *o)
{
	static show_fn *const hooks[] = {
#define IR_ACTION(kind, operands) [IR_A_##kind] = show_##kind,
#include "actions.def"
#undef IR_ACTION
	};
	fprintf(o, "  rule %d (line %u): ", r->id, r->line);
	ir_cond_print(p, r->cond, o);
	fputs("\n    ->", o);
	for (int i = 0; i < r->nactions; i++)
		hooks[r->actions[i].kind](p, &r->actions[i], o);
	switch (r->term) {
	case IR_ALLOW: fputs(" allow\n", o); break;
	case IR_CONTINUE: fputs(" continue\n", o); break;
	case IR_FORWARD: fprintf(o, " forward %s\n", p->upstreams[r->upstream].name); break;
	case IR_DENY:
		fprintf(o, " deny %d", r->status);
		if (r->grpc)
			fprintf(o, " grpc %s", l7_grpc_status_name((unsigned)r->grpc - 1));
		fputs("\n", o);
		break;
	case IR_FALLBACK: fprintf(o, " fallback (%s)\n", r->reason ? r->reason : ""); break;
	}
}

void ir_dump(const struct ir_program *p, FILE *o)
{
	fprintf(o, "; Parse-Match-Action IR\n");
	for (int i = 0; i < p->nservices; i++)
		target_out(p, o, "service", i, &p->services[i]);
	for (int i = 0; i < p->nupstreams; i++)
		target_out(p, o, i == p->fallback ? "fallback" : "upstream", p->upstreams[i].slot, &p->upstreams[i]);
	fputs("parse:", o);
	if (p->reads_method)
		fputs(" method", o);
	if (p->reads_path)
		fputs(" path", o);
	if (p->reads_query)
		fputs(" query", o);
	if (p->reads_host)
		fputs(" host", o);
	for (int i = 0; i < p->nheaders; i++)
		fprintf(o, " header[%d:%s]", i, p->headers[i]);
	fputc('\n', o);
	if (p->nrheaders) {
		fputs("response fields:", o);
		for (int i = 0; i < p->nrheaders; i++)
			fprintf(o, " header[%d:%s]", i, p->rheaders[i]);
		fputc('\n', o);
	}
	for (int i = 0; i < p->nmutations; i++) {
		fprintf(o, "mutation #%d line ", i);
		str_out(o, p->mutations[i].name, strlen(p->mutations[i].name));
		fputs(" = ", o);
		str_out(o, p->mutations[i].value, strlen(p->mutations[i].value));
		fputc('\n', o);
	}
	for (int i = 0; i < p->njwts; i++) {
		const struct ir_jwt *j = &p->jwts[i];
		fprintf(o, "jwt #%d %s: token in header[%d:%s], issuer \"%s\", audience \"%s\", leeway %us\n", i, j->name,
			j->header, p->headers[j->header], j->issuer, j->audience, j->leeway);
	}
	for (int i = 0; i < p->nclaims; i++)
		fprintf(o, "claim #%d %s.%s\n", i, p->jwts[p->claims[i].jwt].name, p->claims[i].name);
	for (int i = 0; i < p->ncounters; i++)
		fprintf(o, "counter #%d %s\n", i, p->counters[i]);
	for (int i = 0; i < p->ntimers; i++)
		fprintf(o, "timer #%d %s\n", i, p->timers[i]);
	for (int i = 0; i < p->nbuckets; i++)
		fprintf(o, "bucket #%d %s: %u/s, burst %u, status %u\n", i, p->buckets[i].name, p->buckets[i].rate,
			p->buckets[i].burst, p->buckets[i].status);
	for (int i = 0; i < p->nidentities; i++) {
		fprintf(o, "identity #%d %s:", i, p->identities[i].name);
		prefixes_out(o, p->identities[i].nets, p->identities[i].netmasks, p->identities[i].n);
	}
	for (int i = 0; i < p->ncidr_sets; i++) {
		fprintf(o, "set #%d:", i);
		prefixes_out(o, p->cidr_sets[i].nets, p->cidr_sets[i].netmasks, p->cidr_sets[i].n);
	}
	for (int i = 0; i < p->ntables; i++) {
		const struct ir_table *t = &p->tables[i];
		fprintf(o, "table #%d on ", i);
		field_out(p, t->field, t->header, o);
		fprintf(o, ": %d entries (lines %u..%u), %d group%s\n", t->n, t->entries[0].line, t->entries[t->n - 1].line,
			t->ngroups, t->ngroups == 1 ? "" : "s");
		for (int k = 0; k < t->n && k < 16; k++) {   /* enough to see its shape */
			const struct ir_table_entry *e = &t->entries[k];
			fprintf(o, "  method %s, %s ",
				!e->method ? "any" : e->method < sizeof(method_names) / sizeof(*method_names) ? method_names[e->method] : "?",
				e->prefix ? "starts with" : "==");
			str_out(o, e->value, e->len);
			fprintf(o, " -> group %d (line %u)\n", e->group, e->line);
		}
		if (t->n > 16)
			fprintf(o, "  ... %d more\n", t->n - 16);
	}
	for (int i = 0; i < p->nregexes; i++) {
		const struct ir_regex *re = p->regexes[i];
		fprintf(o, "regex #%d ", i);
		str_out(o, re->src, re->len);
		fprintf(o, ": DFA of %d states (0 dead, > start, * accepting), %d byte classes\n", re->dfa.nstates, re->dfa.nclasses);
		re_dump(&re->dfa, o, "  ");
	}
	for (int i = 0; i < p->npolicies; i++) {
		const struct ir_policy *pol = &p->policies[i];
		fprintf(o, "policy %s (line %u): %d rule%s%s\n", pol->name, pol->line, pol->nrules, pol->nrules == 1 ? "" : "s",
			pol->has_allow ? ", ALLOW policy (403 when it applies and no rule allows)" : "");
		for (int r = 0; r < pol->nrules; r++)
			rule_out(p, &pol->rules[r], o);
	}
	fprintf(o, "default: deny %d\n", p->default_rule.status);
}
