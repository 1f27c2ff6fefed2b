/* --emit=ast: an S-expression per declaration, with resolved types. */
#include "frontend.h"

static const char *binop_name[] = { "||", "&&", "==", "!=", "<", "<=", ">", ">=", "in" };

static void ip_out(FILE *o, unsigned ip)
{
	fprintf(o, "%u.%u.%u.%u", ip >> 24, ip >> 16 & 255, ip >> 8 & 255, ip & 255);
}

static void expr_out(FILE *o, const struct l7_expr *e)
{
	switch (e->kind) {
	case E_STRING: fprintf(o, "\"%.*s\"", (int)e->str_len, e->str); return;
	case E_INT: fprintf(o, "%lld", e->num); return;
	case E_BOOL: fprintf(o, "%s", e->num ? "true" : "false"); return;
	case E_IP: ip_out(o, e->ip); return;
	case E_CIDR: ip_out(o, e->ip); fprintf(o, "/%lld", e->num2); return;
	case E_ADDRESS: ip_out(o, e->ip); fprintf(o, ":%lld", e->num2); return;
	case E_RANGE: fprintf(o, "%lld..%lld", e->num, e->num2); return;
	case E_IDENT: fprintf(o, "%s", e->str); break;
	case E_MEMBER: fprintf(o, "(field "); expr_out(o, e->lhs); fprintf(o, " %s)", e->str); break;
	case E_CALL:
		fprintf(o, "(%s %s", e->lhs ? "field-call" : "call", e->str);
		if (e->lhs) {
			fputc(' ', o);
			expr_out(o, e->lhs);
		}
		for (int i = 0; i < e->nargs; i++) {
			fputc(' ', o);
			expr_out(o, e->args[i]);
		}
		fputc(')', o);
		break;
	case E_BINARY:
		fprintf(o, "(%s ", binop_name[e->op]);
		expr_out(o, e->lhs);
		fputc(' ', o);
		expr_out(o, e->rhs);
		fputc(')', o);
		break;
	case E_NOT: fprintf(o, "(! "); expr_out(o, e->lhs); fputc(')', o); break;
	case E_LIST:
		fputc('[', o);
		for (int i = 0; i < e->nargs; i++) {
			if (i)
				fputc(' ', o);
			expr_out(o, e->args[i]);
		}
		fputc(']', o);
		break;
	}
	if (e->type)
		fprintf(o, ":%s", l7_type_name(e->type));
}

static void stmt_out(FILE *o, const struct l7_stmt *s, int ind)
{
	if (!s)
		return;
	fprintf(o, "%*s", ind, "");
	switch (s->kind) {
	case S_ACTION: fprintf(o, "(action %u ", s->loc.line); expr_out(o, s->call); fprintf(o, ")\n"); break;
	case S_SECTION: fprintf(o, "(section %s)\n", s->section); break;
	case S_IF:
		fprintf(o, "(if %u ", s->loc.line);
		expr_out(o, s->cond);
		fprintf(o, "\n");
		stmt_out(o, s->then, ind + 2);
		if (s->otherwise) {
			fprintf(o, "%*selse\n", ind + 1, "");
			stmt_out(o, s->otherwise, ind + 2);
		}
		fprintf(o, "%*s)\n", ind, "");
		break;
	case S_BLOCK:
		fprintf(o, "(block\n");
		for (int i = 0; i < s->nbody; i++)
			stmt_out(o, s->body[i], ind + 2);
		fprintf(o, "%*s)\n", ind, "");
		break;
	}
}

static void decl_out(FILE *o, const char *kind, const struct l7_decl *d)
{
	fprintf(o, "(%s %s", kind, d->name);
	for (int i = 0; i < d->nendpoints; i++) {
		fputc(' ', o);
		ip_out(o, d->endpoints[i].ip);
		fprintf(o, ":%u", d->endpoints[i].port);
		if (d->endpoints[i].weight != 1)
			fprintf(o, "*%u", d->endpoints[i].weight);
	}
	if (d->dyn == DYN_NAME)
		fprintf(o, " (name \"%s\" %u)", d->dyn_name, d->dyn_port);
	else if (d->dyn == DYN_SET)
		fprintf(o, " (endpoints \"%s\")", d->dyn_name);
	if (d->balance == LB_ROUND_ROBIN)
		fprintf(o, " (balance round_robin)");
	else if (d->balance == LB_HASH && d->key == LBK_HEADER)
		fprintf(o, " (balance hash header \"%.*s\")", (int)d->key_header_len, d->key_header);
	else if (d->balance == LB_HASH)
		fprintf(o, " (balance hash %s)", d->key == LBK_PATH ? "path" : "source");
	if (d->health.on)
		fprintf(o, " (health \"%s\" every %ums timeout %ums unhealthy %u healthy %u status %u..%u)", d->health.path,
			d->health.every_ms, d->health.timeout_ms, d->health.unhealthy, d->health.healthy, d->health.status_lo,
			d->health.status_hi);
	if (d->health.on && d->health.host)
		fprintf(o, " (health host \"%s\")", d->health.host);
	if (d->retries >= 0)
		fprintf(o, " (retries %d)", d->retries);
	fprintf(o, ")\n");
}

void l7_ast_dump(const struct l7_module *m, FILE *o)
{
	for (int i = 0; i < m->nservices; i++)
		decl_out(o, "service", &m->services[i]);
	for (int i = 0; i < m->nupstreams; i++)
		decl_out(o, "upstream", &m->upstreams[i]);
	if (m->fallback)
		decl_out(o, "fallback", m->fallback);
	for (int i = 0; i < m->npolicies; i++) {
		const struct l7_policy *p = &m->policies[i];
		fprintf(o, "(policy %s (act %s %s)", p->name, p->act.type, p->act.name);
		if (p->has_resp)
			fprintf(o, " (act %s %s)", p->resp.type, p->resp.name);
		for (int u = 0; u < p->nusings; u++)
			fprintf(o, " (using %s %s)", p->usings[u].type, p->usings[u].name);
		if (p->context)
			fprintf(o, " (context \"%s\")", p->context);
		fprintf(o, "\n");
		stmt_out(o, p->body, 2);
		fprintf(o, ")\n");
	}
}
