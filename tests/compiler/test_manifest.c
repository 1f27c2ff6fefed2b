/* The manifest between l7c and l7run (l7/manifest.h): for every example and IR test policy,
 * codegen writes the object, runtime/manifest.c (l7run's reader) reads its section, and every
 * field of every record equals what the IR says; together the policies use every record kind.
 * Then the reader refuses what is not a manifest of its version, or is cut short or corrupt,
 * with the reason, and never reads past the bytes it is given (every truncation and every
 * single-byte change of a real manifest). */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codegen.h"
#include "manifest.h"
#include "pipeline.h"

struct compiled {
	struct l7_unit u;            /* the pipeline's: source, AST, IR */
	struct ir_program *p;
	char *obj;
	size_t len;
};

static int compile(const char *path, struct compiled *c)
{
	struct l7_diags d = { .out = stderr };
	struct l7_pipeline po = { .quiet_passes = true, .verify_ir = true };
	memset(c, 0, sizeof *c);
	if (l7_unit_load(&c->u, path, &po, &d) != L7_UNIT_OK)
		return -1;
	c->p = c->u.ir;
	struct codegen_opts o = { .opt_level = 2, .output = CG_EMIT_OBJ, .out_buf = &c->obj, .out_len = &c->len };
	return codegen_emit(c->p, &o);
}

static void compiled_free(struct compiled *c)
{
	free(c->obj);
	l7_unit_free(&c->u);
}

static int str_is(const struct l7m_str *s, const char *v, size_t n)
{
	return s->len == n && !memcmp(s->s, v, n) && s->s[n] == 0;
}
#define expect_str(field, v, what, ...) \
	cr_expect(str_is(&(field), v, strlen(v)), what ": \"%.*s\", not \"%s\"", __VA_ARGS__, (int)(field).len, (field).s, v)

static unsigned char kinds_seen[L7M_KINDS];
static int resp_mut_seen;

/* Every record of mf against the IR it was written from. */
static void check_policy(const char *name, const struct ir_program *p, const struct manifest *mf)
{
	cr_expect_eq(mf->version, L7M_VERSION, "%s: version", name);
	cr_expect_eq(mf->n_source, 1, "%s: one source record", name);
	if (mf->n_source)
		expect_str(mf->source[0].path, p->source_path, "%s: source", name);

	int mut = 0;
	for (int i = 0; i < p->npolicies; i++)
		for (int k = 0; k < p->policies[i].nrules; k++)
			for (int a = 0; a < p->policies[i].rules[k].nactions; a++)
				mut |= p->policies[i].rules[k].actions[a].kind == IR_A_MUTATE && p->policies[i].rules[k].actions[a].response;
	cr_expect(mf->n_flags == 1 && mf->flags[0].response_mutations == (__u32)mut, "%s: flags", name);
	resp_mut_seen |= mut;

	cr_assert_eq(mf->n_policy, (__u32)p->npolicies, "%s: policies", name);
	for (int i = 0; i < p->npolicies; i++) {
		expect_str(mf->policy[i].name, p->policies[i].name, "%s: policy %d", name, i);
		cr_expect_eq(mf->policy[i].line, p->policies[i].line, "%s: policy %d line", name, i);
	}
	cr_assert_eq(mf->n_service, (__u32)p->nservices, "%s: services", name);
	for (int i = 0; i < p->nservices; i++) {
		expect_str(mf->service[i].name, p->services[i].name, "%s: service %d", name, i);
		cr_expect(mf->service[i].ip == p->services[i].endpoints[0].ip && mf->service[i].port == p->services[i].endpoints[0].port,
			  "%s: service %d address", name, i);
	}
	cr_assert_eq(mf->n_upstream, (__u32)p->nslots, "%s: one upstream record per backend slot", name);
	for (int u = 0; u < p->nupstreams; u++)
		for (int e = 0; e < p->upstreams[u].nendpoints; e++) {
			const struct ir_target *t = &p->upstreams[u];
			const struct l7m_upstream *r = &mf->upstream[t->slot + e];
			expect_str(r->name, t->name, "%s: slot %d", name, t->slot + e);
			cr_expect(r->endpoint == (__u32)e && r->endpoints == (__u32)t->nendpoints && r->ip == t->endpoints[e].ip &&
					  r->port == t->endpoints[e].port,
				  "%s: slot %d: endpoint %u of %u at %08x:%u", name, t->slot + e, r->endpoint, r->endpoints, r->ip, r->port);
		}
	cr_expect_eq(mf->n_fallback, p->fallback >= 0 ? 1u : 0u, "%s: fallback", name);
	if (p->fallback >= 0 && mf->n_fallback)
		cr_expect_eq(mf->fallback[0].slot, (__u32)p->upstreams[p->fallback].slot, "%s: fallback slot", name);
	__u32 nh = 0, nr = 0;   /* HEALTH: one per set with checks; RETRY: one per upstream that retries */
	for (int u = 0; u < p->nupstreams; u++) {
		const struct ir_target *t = &p->upstreams[u];
		if (t->health && (t->rt >= 0 || t->nendpoints > 1)) {
			cr_assert_lt(nh, mf->n_health, "%s: health records", name);
			const struct l7m_health *h = &mf->health[nh++];
			expect_str(h->path, t->health->path, "%s: health path of %s", name, t->name);
			expect_str(h->host, t->health->host, "%s: health host of %s", name, t->name);
			cr_expect(h->slot == (__u32)t->slot && h->every_ms == t->health->every_ms && h->timeout_ms == t->health->timeout_ms &&
					  h->unhealthy == t->health->unhealthy && h->healthy == t->health->healthy &&
					  h->status_lo == t->health->status_lo && h->status_hi == t->health->status_hi,
				  "%s: health of %s", name, t->name);
		}
		if (t->retries > 0) {
			cr_assert_lt(nr, mf->n_retry, "%s: retry records", name);
			cr_expect(mf->retry[nr].slot == (__u32)t->slot && mf->retry[nr].retries == (__u32)t->retries, "%s: retries of %s",
				  name, t->name);
			nr++;
		}
	}
	cr_expect(mf->n_health == nh && mf->n_retry == nr, "%s: %u health and %u retry records", name, mf->n_health, mf->n_retry);
	cr_assert_eq(mf->n_jwt, (__u32)p->njwts, "%s: jwts", name);
	for (int i = 0; i < p->njwts; i++) {
		expect_str(mf->jwt[i].name, p->jwts[i].name, "%s: jwt %d", name, i);
		expect_str(mf->jwt[i].key_file, p->jwts[i].key_file, "%s: jwt %d key file", name, i);
	}
	cr_assert_eq(mf->n_identity, (__u32)p->nidentities, "%s: identities", name);
	__u32 net = 0;
	for (int i = 0; i < p->nidentities; i++) {
		expect_str(mf->identity[i].name, p->identities[i].name, "%s: identity %d", name, i);
		for (int k = 0; k < p->identities[i].n; k++, net++) {
			cr_assert_lt(net, mf->n_identity_net, "%s: identity prefixes", name);
			const struct l7m_identity_net *r = &mf->identity_net[net];
			cr_expect(r->identity == (__u32)i && r->ip == ntohl(p->identities[i].nets[k]) &&
					  r->bits == (__u32)__builtin_popcount(p->identities[i].netmasks[k]),
				  "%s: identity %d prefix %d", name, i, k);
		}
	}
	cr_expect_eq(mf->n_identity_net, net, "%s: identity prefixes", name);
	cr_assert_eq(mf->n_timer, (__u32)p->ntimers, "%s: timers", name);
	for (int i = 0; i < p->ntimers; i++)
		expect_str(mf->timer[i].name, p->timers[i], "%s: timer %d", name, i);
	cr_assert_eq(mf->n_bucket, (__u32)p->nbuckets, "%s: buckets", name);
	for (int i = 0; i < p->nbuckets; i++) {
		expect_str(mf->bucket[i].name, p->buckets[i].name, "%s: bucket %d", name, i);
		cr_expect(mf->bucket[i].rate == p->buckets[i].rate && mf->bucket[i].burst == p->buckets[i].burst &&
				  mf->bucket[i].status == p->buckets[i].status,
			  "%s: bucket %d settings", name, i);
	}
	__u32 n = 0;
	for (int s = 0; s < p->ncidr_sets; s++)
		for (int k = 0; k < p->cidr_sets[s].n; k++, n++) {
			cr_assert_lt(n, mf->n_cidr, "%s: prefix set entries", name);
			cr_expect(mf->cidr[n].set == (__u32)s && mf->cidr[n].ip == ntohl(p->cidr_sets[s].nets[k]) &&
					  mf->cidr[n].bits == (__u32)__builtin_popcount(p->cidr_sets[s].netmasks[k]),
				  "%s: prefix set %d entry %d", name, s, k);
		}
	cr_expect_eq(mf->n_cidr, n, "%s: prefix set entries", name);
	n = 0;
	for (int t = 0; t < p->ntables; t++)
		for (int i = 0; i < p->tables[t].n; i++, n++) {
			const struct ir_table_entry *e = &p->tables[t].entries[i];
			cr_assert_lt(n, mf->n_table, "%s: table entries", name);
			const struct l7m_table *r = &mf->table[n];
			cr_expect(r->table == (__u32)t && r->match == (e->prefix ? L7M_PREFIX : L7M_EXACT) && r->method == e->method &&
					  r->group == (__u32)e->group && str_is(&r->key, e->value, e->len),
				  "%s: table %d entry %d (\"%.*s\")", name, t, i, (int)e->len, e->value);
		}
	cr_expect_eq(mf->n_table, n, "%s: table entries", name);
	cr_assert_eq(mf->n_counter, (__u32)p->ncounters, "%s: counters", name);
	for (int i = 0; i < p->ncounters; i++)
		expect_str(mf->counter[i].name, p->counters[i], "%s: counter %d", name, i);

	/* rules: one record per rule, or per rule of the run a table rule decides for */
	static const __u32 decision[] = { [IR_CONTINUE] = L7M_D_CONTINUE, [IR_FORWARD] = L7M_D_FORWARD,
					  [IR_DENY] = L7M_D_DENY, [IR_FALLBACK] = L7M_D_FALLBACK, [IR_ALLOW] = L7M_D_ALLOW };
	n = 0;
	for (int i = 0; i < p->npolicies; i++)
		for (int k = 0; k < p->policies[i].nrules; k++) {
			const struct ir_rule *r = &p->policies[i].rules[k];
			const struct ir_cond *c = ir_rule_table(r);
			__u32 target = r->term == IR_FORWARD || r->term == IR_FALLBACK ? (__u32)p->upstreams[r->upstream].slot : L7M_NONE;
			int base = 0;
			for (int t = 0; c && t < c->table; t++)
				base += p->tables[t].n;
			for (int e = c ? 0 : -1; e < (c ? p->tables[c->table].n : 0); e++) {
				if (e >= 0 && p->tables[c->table].entries[e].group != c->group)
					continue;
				cr_assert_lt(n, mf->n_rule, "%s: rule records", name);
				const struct l7m_rule *m = &mf->rule[n++];
				cr_expect(m->id == (__u32)r->id && m->policy == (__u32)i && m->decision == decision[r->term] &&
						  m->status == (r->term == IR_DENY ? (__u32)r->status : 0) && m->target == target,
					  "%s: rule %d: id %u policy %u decision %u status %u target %u", name, r->id, m->id, m->policy,
					  m->decision, m->status, m->target);
				if (e < 0)
					cr_expect(m->line == r->line && m->counter == (__u32)(p->ncounters + r->id) && m->entry == L7M_NONE,
						  "%s: rule %d counted in l7_counters at line %u", name, r->id, m->line);
				else
					cr_expect(m->line == p->tables[c->table].entries[e].line && m->counter == L7M_NONE &&
							  m->entry == (__u32)(base + e),
						  "%s: rule %d entry %d counted in l7_entry_hits", name, r->id, e);
			}
		}
	cr_expect_eq(mf->n_rule, n, "%s: rule records", name);

#define L7M_KIND(id, kname, max, help, fields) kinds_seen[L7M_##id] |= mf->n_##kname > 0;
#include "l7/manifest.def"

	/* and the printer says every record */
	char *text = NULL;
	size_t tl = 0;
	FILE *f = open_memstream(&text, &tl);
	manifest_print(f, mf);
	fclose(f);
	int lines = 0;
	for (char *s = text; (s = strchr(s, '\n')); s++)
		lines++;
	char head[32];
	snprintf(head, sizeof head, "manifest version %d:", L7M_VERSION);
	cr_expect(!strncmp(text, head, strlen(head)), "%s: printed: %.80s", name, text);
	int comments = 0;
	for (char *s = text; (s = strstr(s, "\n# ")); s++)
		comments++;
	cr_expect_eq((__u32)(lines - 1 - comments), mf->count, "%s: one printed line per record", name);
	free(text);
}

static void round_trip(const char *path)
{
	struct compiled c;
	char err[512];
	struct manifest mf;
	cr_assert_eq(compile(path, &c), 0, "%s does not compile", path);
	cr_assert_eq(manifest_of_object(c.obj, c.len, &mf, err, sizeof err), 0, "%s: %s", path, err);
	check_policy(path, c.p, &mf);
	manifest_free(&mf);
	compiled_free(&c);
}

static int round_trip_dir(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;
	char path[1024];
	cr_assert_not_null(d, "%s", dir);
	while ((e = readdir(d))) {
		size_t l = strlen(e->d_name);
		if (l < 4 || strcmp(e->d_name + l - 3, ".l7"))
			continue;
		snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
		round_trip(path);
		n++;
	}
	closedir(d);
	return n;
}

Test(manifest, round_trip, .timeout = 900)
{
	int n = round_trip_dir(EXAMPLES_DIR) + round_trip_dir(IR_DIR);
	cr_expect_geq(n, 20, "%d policies", n);
	for (int k = 1; k < L7M_KINDS; k++)
		cr_expect(kinds_seen[k], "no policy has a record of kind %d: add one that does", k);
	cr_expect(resp_mut_seen, "no policy mutates responses");
}

/* ---- the reader on bad input ---- */

static struct manifest M;
static char ERR[512];

static unsigned char *good(size_t *len)
{
	static unsigned char *b;
	static size_t n;
	if (!b) {   /* a policy with several kinds of records: tables, identities, a fallback, JWT */
		struct compiled c;
		struct manifest mf;
		cr_assert_eq(compile(IR_DIR "/features.l7", &c), 0);
		cr_assert_eq(manifest_of_object(c.obj, c.len, &mf, ERR, sizeof ERR), 0, "%s", ERR);
		manifest_free(&mf);
		/* the section's bytes: find them by the magic (the reader was just shown they are there) */
		for (size_t i = 0; i + 16 <= c.len; i++)
			if (!memcmp(c.obj + i, "L7MF", 4) && c.obj[i + 4] == L7M_VERSION) {
				for (int k = 3; k >= 0; k--)
					n = n << 8 | (unsigned char)c.obj[i + 8 + k];
				b = malloc(n);
				memcpy(b, c.obj + i, n);
				break;
			}
		compiled_free(&c);
		cr_assert_not_null(b);
	}
	*len = n;
	unsigned char *copy = malloc(n);
	memcpy(copy, b, n);
	return copy;
}

static void put32(unsigned char *p, __u32 v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> 8 * i);
}

static int refused(const void *b, size_t n, const char *says)
{
	int rc = manifest_read(b, n, &M, ERR, sizeof ERR);
	cr_expect(rc == -1 && strstr(ERR, says), "refused with '%s', got %d '%s'", says, rc, rc ? ERR : "");
	return rc;
}

/* The offset of the first record of kind k, its payload at +4. */
static size_t find(const unsigned char *b, size_t n, enum l7m_kind k)
{
	for (size_t at = L7M_HEADER; at + 4 <= n; at += 4 + (b[at + 2] | b[at + 3] << 8))
		if ((enum l7m_kind)(b[at] | b[at + 1] << 8) == k)
			return at;
	cr_assert_fail("no record of kind %d", k);
	return 0;
}

Test(manifest, header)
{
	size_t n;
	unsigned char *b = good(&n);
	cr_assert_eq(manifest_read(b, n, &M, ERR, sizeof ERR), 0, "%s", ERR);
	manifest_free(&M);
	put32(b + 4, L7M_VERSION + 1);
	char says[160];
	snprintf(says, sizeof says, "compiled by a newer l7c: manifest version %d, this l7run reads %d", L7M_VERSION + 1, L7M_VERSION);
	refused(b, n, says);
	put32(b + 4, 1);
	snprintf(says, sizeof says, "compiled by an older l7c: manifest version 1, this l7run reads %d; recompile the policy",
		 L7M_VERSION);
	refused(b, n, says);
	put32(b + 4, L7M_VERSION);
	b[0] = 'X';
	refused(b, n, "not an l7c manifest");
	refused("l7c-config 1\npolicy x\n", 22, "manifest version 1 (text)");
	refused("", 0, "truncated manifest: 0 bytes");
	free(b);
}

Test(manifest, every_truncation_refused)
{
	size_t n;
	unsigned char *b = good(&n);
	for (size_t k = 0; k < n; k++) {
		unsigned char *cut = malloc(k ? k : 1);   /* exactly k bytes: ASan would see a read past them */
		memcpy(cut, b, k);
		cr_expect_eq(manifest_read(cut, k, &M, ERR, sizeof ERR), -1, "%zu of %zu bytes accepted", k, n);
		cr_expect(k < 8 || strstr(ERR, "truncated manifest"), "%zu bytes: %s", k, ERR);
		free(cut);
	}
	/* a header that says fewer bytes than there are, or other records */
	put32(b + 8, (__u32)n - 1);
	refused(b, n, "its header says");
	put32(b + 8, (__u32)n);
	put32(b + 12, 1);
	refused(b, n, "records, its header says 1");
	free(b);
}

Test(manifest, corrupt_records_refused)
{
	size_t n;
	unsigned char *b = good(&n);
	size_t at = find(b, n, L7M_SERVICE);
	b[at] = 0x7f;   /* a kind no l7c writes */
	refused(b, n, "unknown kind 127");
	free(b);

	b = good(&n);
	at = find(b, n, L7M_SERVICE);
	b[at + 2] += 1;   /* a record one byte longer than its fields: the next one is cut */
	refused(b, n, "corrupt manifest");
	free(b);

	b = good(&n);
	at = find(b, n, L7M_SERVICE);
	b[at + 4] = 0xff;   /* its name's length runs past the record */
	b[at + 5] = 0x00;
	refused(b, n, "name runs past the end of the record");
	free(b);

	b = good(&n);
	at = find(b, n, L7M_SERVICE);   /* name, ip, port: the port out of range */
	size_t name = b[at + 4] | b[at + 5] << 8;
	put32(b + at + 4 + 2 + name + 4, 70000);
	refused(b, n, "(service): port is 70000, at most 65535");
	free(b);

	b = good(&n);
	at = find(b, n, L7M_RULE);   /* id, line, policy: a policy that is not there */
	put32(b + at + 4 + 8, 99);
	refused(b, n, "(rule): policy refers to policy 99");
	free(b);

	b = good(&n);
	at = find(b, n, L7M_RULE);   /* decision: not one of the five */
	put32(b + at + 4 + 12, 5);
	refused(b, n, "decision is 5, one of 0-4");
	free(b);
}

/* Every single-byte change of a real manifest is read or refused, never read past (the build
 * of the fuzzer, tests/fuzz, runs the reader under ASan). */
Test(manifest, every_byte_changed)
{
	size_t n;
	unsigned char *b = good(&n);
	int ok = 0, no = 0;
	for (size_t i = 0; i < n; i++)
		for (int v = 0; v < 256; v += 51) {
			unsigned char old = b[i];
			b[i] = (unsigned char)(old ^ (v | 1));
			if (manifest_read(b, n, &M, ERR, sizeof ERR) == 0) {
				ok++;
				manifest_free(&M);
			} else {
				no++;
				cr_expect(ERR[0], "refused without a reason");
			}
			b[i] = old;
		}
	cr_expect(no > 0 && ok > 0, "%d read, %d refused", ok, no);
	free(b);
}

/* A run of rules on header values with spaces (and a tab, quotes, a backslash, bytes past
 * ASCII) is a table, and its keys are the values' bytes. */
Test(manifest, table_keys_any_bytes)
{
	char path[] = "/tmp/l7manifest-XXXXXX.l7";
	int fd = mkstemps(path, 3);
	FILE *f = fdopen(fd, "w");
	fprintf(f, "service front = 127.0.0.1:8000;\nupstream a = 127.0.0.1:8001;\nupstream b = 127.0.0.1:8002;\n"
		   "policy t (act (HttpRequest request) context ('.*->front')) {\n");
	for (int i = 0; i < 40; i++)
		fprintf(f, "  %sif (request.header(\"x-tenant\") == \"acme corp %d\\t\\\"q\\\" \\\\ caf\xc3\xa9\") {\n    %s\n  }\n",
			i ? "else " : "", i, i % 2 ? "Route(request, a);" : "Route(request, b);");
	fprintf(f, "}\n");
	fclose(f);
	struct compiled c;
	struct manifest mf;
	cr_assert_eq(compile(path, &c), 0);
	cr_assert_eq(c.p->ntables, 1, "the rules became a table");
	cr_assert_eq(manifest_of_object(c.obj, c.len, &mf, ERR, sizeof ERR), 0, "%s", ERR);
	cr_assert_eq(mf.n_table, 40);
	char want[64];
	snprintf(want, sizeof want, "acme corp 17\t\"q\" \\ caf\xc3\xa9");
	cr_expect(str_is(&mf.table[17].key, want, strlen(want)), "entry 17: '%.*s'", (int)mf.table[17].key.len, mf.table[17].key.s);
	check_policy(path, c.p, &mf);
	manifest_free(&mf);
	compiled_free(&c);
	unlink(path);
}
