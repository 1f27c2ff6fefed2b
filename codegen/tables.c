/* The object's data: the tables the machinery reads (header names to extract, mutation
 * lines), the manifest l7run reads (l7/manifest.h), the license, the maps of l7/maps.def, and one
 * program wrapper per entry of l7/progs.def. */
#include "cg.h"

#include <arpa/inet.h>
#include <assert.h>
#include <linux/bpf.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "l7/abi.h"
#include "l7/attach.h"
#include "l7/dataplane.h"
#include "l7/manifest.h"

void cg_keep(struct cg *g, LLVMValueRef v)
{
	g->used = realloc(g->used, sizeof(*g->used) * (g->nused + 1));
	g->used[g->nused++] = v;
}

LLVMValueRef cg_const_global(struct cg *g, const char *name, LLVMValueRef init, int internal)
{
	LLVMValueRef v = LLVMAddGlobal(g->mod, LLVMTypeOf(init), name);
	LLVMSetInitializer(v, init);
	LLVMSetGlobalConstant(v, 1);
	if (internal) {
		LLVMSetLinkage(v, LLVMPrivateLinkage);
		LLVMSetUnnamedAddress(v, LLVMGlobalUnnamedAddr);
	}
	return v;
}

/* NUL-terminated: long compares hand the constant to bpf_strncmp (stdlib/bpf/policy.c). */
LLVMValueRef cg_string(struct cg *g, const char *s, size_t n)
{
	return cg_const_global(g, ".str", LLVMConstStringInContext(g->ctx, s, (unsigned)n, 0), 1);
}

static LLVMValueRef u32c(struct cg *g, unsigned long long v) { return LLVMConstInt(g->i32, v, 0); }

/* A table of up to `max` header names as three constants: the count, the lengths, the names
 * (NUL-padded to L7_MAX_NAME), read by the stdlib's scanners. */
static void name_table(struct cg *g, const char *count, const char *len, const char *name,
		       char *const *names, int n, int max)
{
	assert(n >= 0 && n <= max);
	LLVMValueRef lens[max], strs[max];
	for (int i = 0; i < max; i++) {
		char buf[L7_MAX_NAME] = { 0 };
		size_t k = i < n ? strlen(names[i]) : 0;
		memcpy(buf, i < n ? names[i] : "", k);
		lens[i] = LLVMConstInt(g->i8, k, 0);
		strs[i] = LLVMConstStringInContext(g->ctx, buf, L7_MAX_NAME, 1);
	}
	cg_const_global(g, count, u32c(g, (unsigned)n), 0);
	cg_const_global(g, len, LLVMConstArray2(g->i8, lens, (uint64_t)max), 0);
	cg_const_global(g, name, LLVMConstArray2(LLVMArrayType2(g->i8, L7_MAX_NAME), strs, (uint64_t)max), 0);
}

/* Names of the headers the policy reads: the parser extracts only these (header-vector
 * minimisation of the L7FP design). */
static void wanted_headers(struct cg *g)
{
	name_table(g, "l7_n_wanted", "l7_wanted_len", "l7_wanted_name", g->p->headers, g->p->nheaders, L7_MAX_WANTED);
}

static unsigned mutates_responses(const struct ir_program *p)
{
	for (int i = 0; i < p->npolicies; i++)
		for (int k = 0; k < p->policies[i].nrules; k++)
			for (int a = 0; a < p->policies[i].rules[k].nactions; a++)
				if (p->policies[i].rules[k].actions[a].kind == IR_A_MUTATE && p->policies[i].rules[k].actions[a].response)
					return 1;
	return 0;
}

/* Response field names SET/REMOVE act on: the response scanners find their lines. And
 * whether any rule mutates a response at all: the machinery's response side folds away, and
 * l7run attaches nothing for it, when none does. */
static void response_fields(struct cg *g)
{
	name_table(g, "l7_n_rhdr", "l7_rhdr_len", "l7_rhdr_name", g->p->rheaders, g->p->nrheaders, L7_MAX_RHDR);
	cg_const_global(g, "l7_resp_mut", u32c(g, mutates_responses(g->p)), 0);
}

/* Where a rule's action adds mutation line m (the first, in file order), or nowhere. */
static struct l7_loc action_loc(const struct ir_program *p, int m)
{
	for (int i = 0; i < p->npolicies; i++)
		for (int k = 0; k < p->policies[i].nrules; k++)
			for (int a = 0; a < p->policies[i].rules[k].nactions; a++)
				if (p->policies[i].rules[k].actions[a].kind == IR_A_MUTATE &&
				    p->policies[i].rules[k].actions[a].mutation == m)
					return l7_loc_of_line(p->src, p->policies[i].rules[k].actions[a].line);
	return (struct l7_loc){ 0 };
}

/* What of the mutation tables a policy's lines may use: the last entry is the machinery's
 * (L7_MUT_CLOSE, gateway mode's response to a request that closes). */
#define L7_MUT_POLICY       L7_MUT_CLOSE
#define L7_MUT_POLICY_BYTES (L7_MUT_BYTES - L7_CLOSE_LINE_LEN)

/* The first mutation line past the tables' room, where a rule adds it (or a later one that
 * is still used: the passes may have removed every rule adding it). */
static struct l7_loc mutation_loc(const struct ir_program *p, int n)
{
	size_t at = 0;
	int first = n;
	for (int i = 0; i < n && first == n; i++)
		if (i >= L7_MUT_POLICY || (at += p->mutations[i].line_len) > L7_MUT_POLICY_BYTES)
			first = i;
	for (int i = first; i < n; i++) {
		struct l7_loc loc = action_loc(p, i);
		if (loc.src)
			return loc;
	}
	return (struct l7_loc){ 0 };
}

/* Header mutations as complete field lines ("name: value\r\n"), ready to splice in. The
 * tables have the fixed sizes the machinery declares (L7_MAX_MUT, L7_MUT_BYTES). */
static int mutations(struct cg *g)
{
	const struct ir_program *p = g->p;
	int n = p->nmutations;
	size_t total = 0;
	for (int i = 0; i < n; i++)
		total += p->mutations[i].line_len;
	if (n > L7_MUT_POLICY || total > L7_MUT_POLICY_BYTES) {
		struct l7_loc at = mutation_loc(p, n);
		l7_diag(g->d, L7_ERROR, at, "%d distinct header mutations of %zu bytes; the data plane holds at most %d of %d bytes",
			n, total, L7_MUT_POLICY, (int)L7_MUT_POLICY_BYTES);
		if (at.src)
			l7_hint(g->d, at, "this is the first that does not fit");
		return -1;
	}
	char bytes[L7_MUT_BYTES] = { 0 };
	LLVMValueRef offs[L7_MAX_MUT], lens[L7_MAX_MUT];
	size_t at = 0;
	for (int i = 0; i < L7_MAX_MUT; i++) {
		size_t len = i < n ? p->mutations[i].line_len : 0;
		if (i == L7_MUT_CLOSE)
			at = L7_MUT_POLICY_BYTES, len = L7_CLOSE_LINE_LEN;
		if (i == L7_MUT_CLOSE)
			memcpy(bytes + at, L7_CLOSE_LINE, len);
		else if (len)
			memcpy(bytes + at, p->mutations[i].line, len);
		offs[i] = LLVMConstInt(g->i16, at, 0);
		lens[i] = LLVMConstInt(g->i16, len, 0);
		at += len;
	}
	cg_const_global(g, "l7_n_mut", u32c(g, (unsigned)n), 0);
	cg_const_global(g, "l7_mut_off", LLVMConstArray2(g->i16, offs, L7_MAX_MUT), 0);
	cg_const_global(g, "l7_mut_len", LLVMConstArray2(g->i16, lens, L7_MAX_MUT), 0);
	cg_const_global(g, "l7_mut_bytes", LLVMConstStringInContext(g->ctx, bytes, L7_MUT_BYTES, 1), 0);
	return 0;
}

static LLVMValueRef bytes_const(struct cg *g, const char *s, unsigned n)
{
	char buf[256] = { 0 };
	memcpy(buf, s, strlen(s) < n ? strlen(s) : n);
	return LLVMConstStringInContext(g->ctx, buf, n, 1);
}

/* JWT configurations and the claims rules read (struct l7_jwt_cfg of l7/abi.h). */
static void jwt_tables(struct cg *g)
{
	const struct ir_program *p = g->p;
	assert(p->njwts <= L7_MAX_JWT && p->nclaims <= L7_MAX_CLAIMS);
	LLVMTypeRef chars = LLVMArrayType2(g->i8, 64);
	LLVMTypeRef fields[] = { g->i32, g->i32, g->i32, g->i32, chars, chars };
	LLVMTypeRef cfg_ty = LLVMStructTypeInContext(g->ctx, fields, 6, 0);
	LLVMValueRef cfgs[L7_MAX_JWT];
	for (int i = 0; i < L7_MAX_JWT; i++) {
		struct l7_jwt_cfg c = { 0 };
		if (i < p->njwts)
			ir_jwt_cfg(p, i, &c);   /* what the evaluator's verifier reads too */
		LLVMValueRef v[] = {
			u32c(g, c.header), u32c(g, c.leeway), u32c(g, c.iss_len), u32c(g, c.aud_len),
			LLVMConstStringInContext(g->ctx, c.iss, sizeof(c.iss), 1),
			LLVMConstStringInContext(g->ctx, c.aud, sizeof(c.aud), 1),
		};
		cfgs[i] = LLVMConstNamedStruct(cfg_ty, v, 6);
	}
	cg_const_global(g, "l7_n_jwt", u32c(g, (unsigned)p->njwts), 0);
	cg_const_global(g, "l7_jwt_cfg", LLVMConstArray2(cfg_ty, cfgs, L7_MAX_JWT), 0);

	LLVMValueRef cfg[L7_MAX_CLAIMS], len[L7_MAX_CLAIMS], name[L7_MAX_CLAIMS];
	for (int i = 0; i < L7_MAX_CLAIMS; i++) {
		const struct ir_claim *c = i < p->nclaims ? &p->claims[i] : NULL;
		cfg[i] = LLVMConstInt(g->i8, c ? (unsigned)c->jwt : 0, 0);
		len[i] = LLVMConstInt(g->i8, c ? strlen(c->name) : 0, 0);
		name[i] = bytes_const(g, c ? c->name : "", L7_MAX_NAME);
	}
	cg_const_global(g, "l7_n_claims", u32c(g, (unsigned)p->nclaims), 0);
	cg_const_global(g, "l7_claim_cfg", LLVMConstArray2(g->i8, cfg, L7_MAX_CLAIMS), 0);
	cg_const_global(g, "l7_claim_len", LLVMConstArray2(g->i8, len, L7_MAX_CLAIMS), 0);
	cg_const_global(g, "l7_claim_name", LLVMConstArray2(LLVMArrayType2(g->i8, L7_MAX_NAME), name, L7_MAX_CLAIMS), 0);
}

/* Caller identities live in the l7_idents LPM trie, which l7run fills from the manifest's
 * IDENTITY records and keeps current from --identities; the code only needs their count
 * (the id of "external"). */
static int identity_tables(struct cg *g)
{
	cg_const_global(g, "l7_n_identities", u32c(g, (unsigned)g->p->nidentities), 0);
	return 0;
}

/* The manifest writer (l7/manifest.h): one put_KIND per row of l7/manifest.def, with the
 * reader's bounds, so that l7c never writes a manifest l7run refuses. */
struct mw {
	unsigned char *b;
	size_t len, cap;
	unsigned count, n[L7M_KINDS];
	const char *kind;            /* the record being written, for errors */
	const char *src;
	int err;
};

static void mw_fail(struct mw *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void mw_fail(struct mw *w, const char *fmt, ...)
{
	va_list ap;
	if (w->err++)
		return;   /* the first is the one to fix */
	fprintf(stderr, "l7c: error: %s: ", w->src);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static void mw_bytes(struct mw *w, const void *p, size_t n)
{
	if (w->len + n > w->cap) {
		w->cap = 2 * (w->len + n) + 256;
		w->b = realloc(w->b, w->cap);
	}
	memcpy(w->b + w->len, p, n);
	w->len += n;
}

static void mw_le(unsigned char *at, unsigned v, int n)
{
	for (int i = 0; i < n; i++)
		at[i] = (unsigned char)(v >> 8 * i);
}

static void mw_u32(struct mw *w, const char *f, __u32 v, __u32 max)
{
	unsigned char b[4];
	if (max && v > max)
		mw_fail(w, "%s %s is %u; the manifest holds at most %u", w->kind, f, v, max);
	mw_le(b, v, 4);
	mw_bytes(w, b, 4);
}

static void mw_str(struct mw *w, const char *f, struct l7m_str s, __u32 max)
{
	unsigned char b[2];
	if (s.len > max) {
		mw_fail(w, "%s %s '%.*s...' is %u bytes; the manifest holds at most %u", w->kind, f, 20, s.s, s.len, max);
		s.len = 0;
	}
	mw_le(b, s.len, 2);
	mw_bytes(w, b, 2);
	mw_bytes(w, s.s, s.len);
}

/* refs point back: the record referred to is written first */
static void mw_ref(struct mw *w, const char *f, __u32 v, enum l7m_kind k, int opt)
{
	if (!(opt && v == L7M_NONE) && v >= w->n[k])
		mw_fail(w, "%s %s refers to record %u of %u (internal error)", w->kind, f, v, w->n[k]);
	mw_u32(w, f, v, 0);
}

static size_t mw_begin(struct mw *w, enum l7m_kind k, const char *kind, unsigned max)
{
	unsigned char b[L7M_RECORD] = { 0 };
	w->kind = kind;
	if (max && w->n[k] == max)
		mw_fail(w, "more than %u %s records: the data plane holds %u", max, kind, max);
	w->n[k]++;
	w->count++;
	mw_le(b, k, 2);
	mw_bytes(w, b, sizeof b);
	return w->len;
}

static void mw_end(struct mw *w, size_t at)
{
	if (w->len - at > 0xffff)
		mw_fail(w, "a %s record of %zu bytes; the manifest holds 65535", w->kind, w->len - at);
	mw_le(w->b + at - 2, (unsigned)(w->len - at), 2);
}

#define L7M_U32(f, max) mw_u32(w, #f, r->f, max);
#define L7M_ENUM(f, names) mw_u32(w, #f, r->f, L7M_COUNT(names) - 1);
#define L7M_IP4(f) mw_u32(w, #f, r->f, 0);
#define L7M_STR(f, max) mw_str(w, #f, r->f, max);
#define L7M_REF(f, kind) mw_ref(w, #f, r->f, L7M_##kind, 0);
#define L7M_OPT(f, kind) mw_ref(w, #f, r->f, L7M_##kind, 1);
#define L7M_KIND(id, name, max, help, fields)                              \
	static void put_##name(struct mw *w, const struct l7m_##name *r)   \
	{                                                                  \
		size_t at = mw_begin(w, L7M_##id, #name, max);             \
		fields mw_end(w, at);                                      \
	}
#include "l7/manifest.def"

static struct l7m_str mstr(const char *s)
{
	return (struct l7m_str){ s, (__u32)strlen(s) };
}

/* The rules' hits as l7run exports them: one record per rule, or for a rule standing for a
 * table, one per rule of the run it decides for, each counted in l7_entry_hits (its position)
 * at its own .l7 line. l7_counters holds the Counter instances, then one hit counter per rule. */
static void manifest_rules(struct mw *w, const struct ir_program *p)
{
	static const __u32 decision[] = { [IR_CONTINUE] = L7M_D_CONTINUE, [IR_FORWARD] = L7M_D_FORWARD,
					  [IR_DENY] = L7M_D_DENY, [IR_FALLBACK] = L7M_D_FALLBACK, [IR_ALLOW] = L7M_D_ALLOW };
	for (int i = 0; i < p->npolicies; i++)
		for (int k = 0; k < p->policies[i].nrules; k++) {
			const struct ir_rule *r = &p->policies[i].rules[k];
			const struct ir_cond *c = ir_rule_table(r);
			int nt = c ? c->table : -1, base = 0;
			for (int t = 0; t < nt; t++)
				base += p->tables[t].n;
			struct l7m_rule m = {
				.id = (__u32)r->id, .line = r->line, .policy = (__u32)i, .decision = decision[r->term],
				.status = r->term == IR_DENY ? (__u32)r->status : 0,
				.target = r->term == IR_FORWARD || r->term == IR_FALLBACK ? (__u32)p->upstreams[r->upstream].slot
											  : L7M_NONE,
				.counter = (__u32)(p->ncounters + r->id), .entry = L7M_NONE,
			};
			if (nt < 0)
				put_rule(w, &m);
			for (int e = 0; nt >= 0 && e < p->tables[nt].n; e++)
				if (p->tables[nt].entries[e].group == c->group) {
					m.counter = L7M_NONE;
					m.entry = (__u32)(base + e);
					m.line = p->tables[nt].entries[e].line;
					put_rule(w, &m);
				}
		}
}

/* The manifest: services, upstreams and the fallback, JWT key files, identities, timers,
 * buckets, prefix sets and rule tables that l7run fills in before traffic, and the names it
 * exports telemetry under. */
static int manifest_section(struct cg *g)
{
	const struct ir_program *p = g->p;
	struct mw mw = { .src = p->source_path }, *w = &mw;
	mw_bytes(w, (unsigned char[L7M_HEADER]){ 0 }, L7M_HEADER);   /* filled in at the end */
	put_source(w, &(struct l7m_source){ mstr(p->source_path) });
	put_flags(w, &(struct l7m_flags){ mutates_responses(p) });
	for (int i = 0; i < p->npolicies; i++)
		put_policy(w, &(struct l7m_policy){ mstr(p->policies[i].name), p->policies[i].line });
	for (int i = 0; i < p->nservices; i++) {
		const struct ir_endpoint *e = &p->services[i].endpoints[0];
		put_service(w, &(struct l7m_service){ mstr(p->services[i].name), e->ip, e->port });
	}
	/* record i is backend slot i: the endpoints of every upstream (and the fallback) in order */
	for (int i = 0; i < p->nupstreams; i++)
		for (int e = 0; e < p->upstreams[i].nendpoints; e++) {
			const struct ir_target *t = &p->upstreams[i];
			if (t->slot + e != (int)w->n[L7M_UPSTREAM])
				mw_fail(w, "upstream %s: endpoint %d is slot %d, not %u (internal error)", t->name, e, t->slot + e,
					w->n[L7M_UPSTREAM]);
			put_upstream(w, &(struct l7m_upstream){ mstr(t->name), (__u32)e, (__u32)t->nendpoints,
								t->endpoints[e].ip, t->endpoints[e].port });
		}
	if (p->fallback >= 0)
		put_fallback(w, &(struct l7m_fallback){ (__u32)p->upstreams[p->fallback].slot });
	for (int i = 0; i < p->nupstreams; i++) {   /* record i is run-time set i */
		const struct ir_target *t = &p->upstreams[i];
		if (t->rt_kind == IR_RT_NONE)
			continue;
		if (t->rt != (int)w->n[L7M_RUNTIME])
			mw_fail(w, "upstream %s: run-time set %d, not %u (internal error)", t->name, t->rt, w->n[L7M_RUNTIME]);
		put_runtime(w, &(struct l7m_runtime){ (__u32)t->slot, t->rt_kind == IR_RT_NAME ? L7M_RT_DNS : L7M_RT_FILE,
						      mstr(t->rt_name), t->rt_port,
						      t->balance == IR_LB_HASH ? L7M_RT_HASH : L7M_RT_ROUND_ROBIN });
	}
	for (int i = 0; i < p->nupstreams; i++) {   /* after the RUNTIME records they name */
		const struct ir_target *t = &p->upstreams[i];
		const struct ir_health *h = t->health;
		if (h && (t->rt >= 0 || t->nendpoints > 1))
			put_health(w, &(struct l7m_health){ (__u32)t->slot, mstr(h->path), mstr(h->host), h->every_ms, h->timeout_ms, h->unhealthy,
							    h->healthy, h->status_lo, h->status_hi });
	}
	for (int i = 0; i < p->nupstreams; i++)
		if (p->upstreams[i].retries > 0)
			put_retry(w, &(struct l7m_retry){ (__u32)p->upstreams[i].slot, (__u32)p->upstreams[i].retries });
	for (int i = 0; i < p->njwts; i++)
		put_jwt(w, &(struct l7m_jwt){ mstr(p->jwts[i].name), mstr(p->jwts[i].key_file) });
	for (int i = 0; i < p->nidentities; i++) {   /* every one: --identities may name any */
		put_identity(w, &(struct l7m_identity){ mstr(p->identities[i].name) });
		for (int k = 0; k < p->identities[i].n; k++)
			put_identity_net(w, &(struct l7m_identity_net){ (__u32)i, ntohl(p->identities[i].nets[k]),
									(__u32)__builtin_popcount(p->identities[i].netmasks[k]) });
	}
	for (int i = 0; i < p->ntimers; i++)
		put_timer(w, &(struct l7m_timer){ mstr(p->timers[i]) });
	for (int i = 0; i < p->nbuckets; i++)
		put_bucket(w, &(struct l7m_bucket){ mstr(p->buckets[i].name), p->buckets[i].rate, p->buckets[i].burst,
						    p->buckets[i].status });
	for (int s = 0; s < p->ncidr_sets; s++)
		for (int k = 0; k < p->cidr_sets[s].n; k++)
			put_cidr(w, &(struct l7m_cidr){ (__u32)s, ntohl(p->cidr_sets[s].nets[k]),
							(__u32)__builtin_popcount(p->cidr_sets[s].netmasks[k]) });
	/* positions run on across tables (they index l7_entry_hits too) */
	for (int t = 0; t < p->ntables; t++)
		for (int i = 0; i < p->tables[t].n; i++) {
			const struct ir_table_entry *e = &p->tables[t].entries[i];
			put_table(w, &(struct l7m_table){ (__u32)t, e->prefix ? L7M_PREFIX : L7M_EXACT, e->method, (__u32)e->group,
							  { e->value, (__u32)e->len } });
		}
	for (int i = 0; i < p->ncounters; i++)
		put_counter(w, &(struct l7m_counter){ mstr(p->counters[i]) });
	manifest_rules(w, p);
	for (int i = 0; i < p->nheaders; i++)
		put_req_name(w, &(struct l7m_req_name){ mstr(p->headers[i]) });
	for (int i = 0; i < p->nrheaders; i++)
		put_resp_name(w, &(struct l7m_resp_name){ mstr(p->rheaders[i]) });
	for (int i = 0; i < p->nmutations; i++)
		put_mutation(w, &(struct l7m_mutation){ mstr(p->mutations[i].name), mstr(p->mutations[i].value) });
	mw_le(w->b, L7M_MAGIC, 4);
	mw_le(w->b + 4, L7M_VERSION, 4);
	mw_le(w->b + 8, (unsigned)w->len, 4);
	mw_le(w->b + 12, w->count, 4);
	if (!w->err) {
		/* No debug info: libbpf skips sections it does not know, and nothing in BTF refers here. */
		LLVMValueRef v = LLVMAddGlobal(g->mod, LLVMArrayType2(g->i8, w->len), "l7_manifest");
		LLVMSetInitializer(v, LLVMConstStringInContext(g->ctx, (const char *)w->b, (unsigned)w->len, 1));
		LLVMSetGlobalConstant(v, 1);
		LLVMSetSection(v, L7_MANIFEST_SECTION);
		LLVMSetAlignment(v, 4);
		cg_keep(g, v);
	}
	free(w->b);
	return w->err ? -1 : 0;
}

/* The tables of upstream set u, made when a Route first uses it: a Ketama ring (points and
 * their slots, 1 << ring_log2 of each) or the round-robin turns. Private constants in .rodata;
 * the search in stdlib/bpf/balance.h indexes them with a mask the verifier can bound. */
void cg_balance_tables(struct cg *g, int u, LLVMValueRef *points, LLVMValueRef *slots)
{
	const struct ir_target *t = &g->p->upstreams[u];
	assert(t->balance == IR_LB_HASH ? t->ring != NULL : t->balance == IR_LB_ROUND_ROBIN && t->turns != NULL);
	if (!g->lb_tab)
		g->lb_tab = calloc((size_t)g->p->nupstreams * 2, sizeof(*g->lb_tab));
	if (!g->lb_tab[2 * u + 1]) {
		int n = t->balance == IR_LB_HASH ? 1 << t->ring_log2 : t->nturns;
		const unsigned char *sl = t->balance == IR_LB_HASH ? t->ring_slot : t->turns;
		LLVMValueRef *v = malloc(sizeof(*v) * (size_t)n);
		for (int i = 0; i < n; i++)
			v[i] = LLVMConstInt(g->i8, sl[i], 0);
		g->lb_tab[2 * u + 1] = cg_const_global(g, "l7_lb_slots", LLVMConstArray2(g->i8, v, (uint64_t)n), 1);
		if (t->balance == IR_LB_HASH) {
			for (int i = 0; i < n; i++)
				v[i] = u32c(g, t->ring[i]);
			g->lb_tab[2 * u] = cg_const_global(g, "l7_lb_ring", LLVMConstArray2(g->i32, v, (uint64_t)n), 1);
			LLVMSetAlignment(g->lb_tab[2 * u], 4);
		}
		free(v);
	}
	*points = g->lb_tab[2 * u];
	*slots = g->lb_tab[2 * u + 1];
}

int cg_tables(struct cg *g)
{
	/* ir_lower refuses more (the upstream that does not fit is named there) */
	assert(g->p->nslots <= L7_MAX_UPSTREAMS);
	for (int i = 0; i < g->p->npolicies; i++)
		for (int k = 0; k < g->p->policies[i].nrules; k++) {
			const struct ir_rule *r = &g->p->policies[i].rules[k];
			if (g->p->ncounters + r->id + 1 > L7_MAX_COUNTERS) {   /* the first rule past them */
				l7_diag(g->d, L7_WARNING, l7_loc_of_line(g->p->src, r->line),
					"the data plane counts %d counters and rules; this rule and the ones after it are not counted",
					L7_MAX_COUNTERS);
				i = g->p->npolicies;
				break;
			}
		}
	wanted_headers(g);
	response_fields(g);
	jwt_tables(g);
	/* which hosts are split: the machinery tests these, and the other branch folds away */
	cg_const_global(g, "l7_split_gw", u32c(g, g->split->gw ? 1 : 0), 0);
	cg_const_global(g, "l7_split_mesh", u32c(g, g->split->mesh ? 1 : 0), 0);
	if (mutations(g) || identity_tables(g) || manifest_section(g))
		return -1;
	LLVMValueRef lic = LLVMAddGlobal(g->mod, LLVMArrayType2(g->i8, 4), "_license");
	LLVMSetInitializer(lic, LLVMConstStringInContext(g->ctx, "GPL", 3, 0));
	LLVMSetSection(lic, "license");
	cg_keep(g, lic);
	return 0;
}

/* Maps l7/maps.def lists as lazy: created without preallocation. */
static int map_is_lazy(const char *name)
{
	static const char *const lazy[] = {
#define L7_MAP(name, type, k, v, n)
#define L7_MAP_LAZY(name) #name,
#include "l7/maps.def"
#undef L7_MAP_LAZY
#undef L7_MAP
	};
	for (size_t i = 0; i < sizeof(lazy) / sizeof(lazy[0]); i++)
		if (!strcmp(lazy[i], name))
			return 1;
	return 0;
}

void cg_maps(struct cg *g)
{
	LLVMTypeRef ptrs[] = { g->ptr, g->ptr, g->ptr, g->ptr, g->ptr };
	LLVMTypeRef def4 = LLVMStructTypeInContext(g->ctx, ptrs, 4, 0), def5 = LLVMStructTypeInContext(g->ctx, ptrs, 5, 0);
	LLVMTypeRef def2 = LLVMStructTypeInContext(g->ctx, ptrs, 2, 0);
	/* an LPM trie must be created without preallocation, and the lazy hashes are: they take
	 * map_flags */
#define L7_MAP(name, type, key_size, value_size, max_entries)                                            \
	do {                                                                                            \
		unsigned flags = type == BPF_MAP_TYPE_LPM_TRIE || map_is_lazy(#name) ? BPF_F_NO_PREALLOC : 0; \
		LLVMTypeRef def = type == BPF_MAP_TYPE_RINGBUF ? def2 : flags ? def5 : def4;            \
		LLVMValueRef v = LLVMAddGlobal(g->mod, def, #name);                                     \
		LLVMSetInitializer(v, LLVMConstNull(def));                                              \
		LLVMSetSection(v, ".maps");                                                             \
		LLVMSetAlignment(v, 8);                                                                 \
		cg_di_map(g, v, #name, type, max_entries, key_size, value_size, flags);                 \
		cg_keep(g, v);                                                                          \
	} while (0);
#include "l7/maps.def"
#undef L7_MAP
}

static const struct { const char *name, *section, *entry, *map; int whole; } programs[] = {
#define L7_PROG(name, section, entry, map, whole) { #name, section, #entry, #map, whole },
#include "l7/progs.def"
#undef L7_PROG
};

/* The decide chains of split hosts: name_<k> for k < nchunks, in the host's section. */
static const struct { const char *name, *section, *entry, *host; } chains[] = {
#define L7_PROG(name, section, entry, map, whole)
#define L7_TAIL(name, section, entry, prog_array, host) { #name, section, #entry, #host },
#include "l7/progs.def"
#undef L7_TAIL
#undef L7_PROG
};

/* Whether the object holds the programs attached to this map (--mode). */
static int mode_on(const struct cg *g, const char *map)
{
	return g->split->mode == CG_MODE_BOTH || (g->split->mode == CG_MODE_MESH) == l7_map_is_mesh(map);
}

static int chain_on(const struct cg *g, size_t i)
{
	for (size_t j = 0; j < sizeof(programs) / sizeof(programs[0]); j++)
		if (!strcmp(programs[j].name, chains[i].host) && !mode_on(g, programs[j].map))
			return 0;
	return !strcmp(chains[i].host, "l7_client_parser") ? g->split->gw : g->split->mesh;
}

int cg_is_program(const struct cg *g, const char *name)
{
	for (size_t i = 0; i < sizeof(programs) / sizeof(programs[0]); i++)
		if (!strcmp(name, programs[i].name))
			return 1;
	for (size_t i = 0; i < sizeof(chains) / sizeof(chains[0]); i++) {
		size_t n = strlen(chains[i].name);
		if (chain_on(g, i) && !strncmp(name, chains[i].name, n) && name[n] == '_' && name[n + 1] >= '0' &&
		    name[n + 1] <= '9')
			return 1;
	}
	return 0;
}

static void wrapper(struct cg *g, const char *name, const char *section, const char *entry_name, int chunk)
{
	LLVMTypeRef fty = LLVMFunctionType(g->i32, &g->ptr, 1, 0);
	LLVMTypeRef ety = chunk < 0 ? fty : LLVMFunctionType(g->i32, (LLVMTypeRef[]){ g->ptr, g->i32 }, 2, 0);
	unsigned line = g->p->npolicies ? g->p->policies[0].line : 1;
	LLVMValueRef entry = LLVMGetNamedFunction(g->mod, entry_name);
	if (!entry)
		entry = LLVMAddFunction(g->mod, entry_name, ety);
	LLVMValueRef fn = LLVMAddFunction(g->mod, name, fty);
	LLVMSetSection(fn, section);
	LLVMAddTargetDependentFunctionAttr(fn, "target-cpu", "v3");
	const char *params[] = { "ctx" };
	LLVMMetadataRef sp = cg_di_function(g, fn, name, line, params, 1);
	LLVMPositionBuilderAtEnd(g->b, LLVMAppendBasicBlockInContext(g->ctx, fn, "entry"));
	cg_di_at(g, sp, line, 0);
	LLVMValueRef args[] = { LLVMGetParam(fn, 0), LLVMConstInt(g->i32, (unsigned)(chunk < 0 ? 0 : chunk), 0) };
	LLVMValueRef rc = LLVMBuildCall2(g->b, ety, entry, args, chunk < 0 ? 1 : 2, "");
	LLVMBuildRet(g->b, rc);
	cg_keep(g, fn);
}

/* Whether the policy host of the mode of this map is split (a `whole` program is then not
 * built: it would hold the policy unsplit). */
static int host_split(const struct cg *g, const char *map)
{
	return l7_map_is_mesh(map) ? g->split->mesh : g->split->gw;
}

/* int NAME(void *ctx) { return ENTRY(ctx); } in the program's section, and for a split host
 * int NAME_k(void *ctx) { return ENTRY(ctx, k); } per decide program. The machinery entry is
 * linked in from the stdlib bitcode and inlined. Line info: the first policy's line. */
void cg_programs(struct cg *g)
{
	for (size_t i = 0; i < sizeof(programs) / sizeof(programs[0]); i++)
		if (mode_on(g, programs[i].map) && !(programs[i].whole && host_split(g, programs[i].map)))
			wrapper(g, programs[i].name, programs[i].section, programs[i].entry, -1);
	for (size_t i = 0; i < sizeof(chains) / sizeof(chains[0]); i++)
		for (int k = 0; chain_on(g, i) && k < g->split->nchunks; k++) {
			char name[64];
			snprintf(name, sizeof(name), "%s_%d", chains[i].name, k);
			wrapper(g, name, chains[i].section, chains[i].entry, k);
		}
}
