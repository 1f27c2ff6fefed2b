/* Caller identities in l7run: the l7_idents LPM trie that stdlib/bpf/policy.c reads to know
 * who a client is (Meshlib's IP cache).
 *
 * Entries come from the policy's `identity` declarations (the manifest's IDENTITY and
 * IDENTITY_NET records) and from `--identities FILE`, which l7run re-reads when it
 * changes (checked every second), so that pods coming and going need no recompilation. The
 * file has one identity per line, names from the policy, then its addresses:
 *     # name    prefixes or addresses
 *     login     10.0.1.0/24 10.0.3.7
 * The file wins over the policy for the same prefix; the longest prefix decides. A file that
 * does not parse stops l7run at start and is ignored (with the reason) while running: the
 * entries in force stay as they were, never half-applied.
 * Update order: new and changed entries first, then the stale ones are deleted, so an address
 * in both the old and the new set never looks "external" in between.
 * Every loaded policy version (hot reload) has its own l7_idents and its own declarations: the
 * file is applied to each with that version's names (struct idents, one per version). */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "policy.h"

struct entry {
	struct l7_ident_key key;
	__u32 id;
};

struct entries {
	struct entry *e;
	int n, cap;
};

/* A version's identities: its declarations (the manifest's) and what its l7_idents holds. */
struct idents {
	const struct manifest *mf;  /* the names: mf->identity[id].name */
	struct entries policy;      /* the manifest's prefixes */
	struct entries applied;     /* what l7_idents holds now */
	int map_fd;
	struct stat seen;           /* the file as this version last read it */
	struct ident_env *env;      /* --identities, set by ident_setup */
	struct idents *next;        /* the env's watched list (published versions, run loop only) */
};

static int add(struct entries *s, __u32 addr_be, __u32 len, __u32 id)
{
	__u32 mask = len ? htonl(~0u << (32 - len)) : 0;
	for (int i = 0; i < s->n; i++)
		if (s->e[i].key.prefixlen == len && s->e[i].key.addr == (addr_be & mask)) {
			if (s->e[i].id != id)
				return -1;   /* one prefix, two identities */
			return 0;
		}
	if (s->n == s->cap) {
		int cap = s->cap ? 2 * s->cap : 64;
		struct entry *e = realloc(s->e, sizeof(*e) * (size_t)cap);
		if (!e)
			return -1;
		s->e = e, s->cap = cap;
	}
	s->e[s->n++] = (struct entry){ { len, addr_be & mask }, id };
	return 0;
}

/* "A.B.C.D" or "A.B.C.D/LEN" */
static int parse_prefix(const char *s, __u32 *addr_be, __u32 *len)
{
	char ip[32];
	const char *slash = strchr(s, '/');
	size_t n = slash ? (size_t)(slash - s) : strlen(s);
	struct in_addr a;
	char *end;

	if (n >= sizeof ip)
		return -1;
	memcpy(ip, s, n);
	ip[n] = 0;
	if (inet_pton(AF_INET, ip, &a) != 1)
		return -1;
	*addr_be = a.s_addr;
	*len = 32;
	if (slash) {
		long l = strtol(slash + 1, &end, 10);
		if (!slash[1] || *end || l < 0 || l > 32)
			return -1;
		*len = (__u32)l;
	}
	return 0;
}

/* The version's declarations, made on first use. */
static struct idents *idents_of(struct config *cfg)
{
	if (!cfg->idents) {
		struct idents *d = cfg->idents = calloc(1, sizeof *cfg->idents);
		d->map_fd = -1;
		d->mf = cfg->mf;
		for (__u32 i = 0; i < d->mf->n_identity_net; i++) {   /* l7c refused duplicate prefixes */
			const struct l7m_identity_net *n = &d->mf->identity_net[i];
			add(&d->policy, htonl(n->ip), n->bits, n->identity);
		}
	}
	return cfg->idents;
}

/* --identities FILE */
int ident_file_arg(struct ident_env *env, const char *path)
{
	if (!path[0] || strlen(path) >= sizeof env->file)
		return -1;
	snprintf(env->file, sizeof env->file, "%s", path);
	return 0;
}

static int id_of(const struct idents *d, const char *name)
{
	for (__u32 i = 0; i < d->mf->n_identity; i++)
		if (!strcmp(d->mf->identity[i].name.s, name))
			return (int)i;
	return -1;
}

static int contains(const struct entries *s, const struct entry *e)
{
	for (int i = 0; i < s->n; i++)
		if (s->e[i].key.prefixlen == e->key.prefixlen && s->e[i].key.addr == e->key.addr)
			return 1;
	return 0;
}

/* The policy's entries overlaid with the file's; -1 (and why, on stderr) if the file is bad. */
static int read_file(const struct idents *d, struct entries *out)
{
	const char *path = d->env->file;
	FILE *f = fopen(path, "r");
	char line[4096];
	int lineno = 0, rc = 0;

	if (!f) {
		fprintf(stderr, "l7run: --identities %s: %s\n", path, strerror(errno));
		return -1;
	}
	struct entries file = { 0 };
	while (!rc && fgets(line, sizeof line, f)) {
		lineno++;
		char *hash = strchr(line, '#'), *save = NULL;
		if (hash)
			*hash = 0;
		char *name = strtok_r(line, " \t\r\n", &save);
		if (!name)
			continue;
		int id = id_of(d, name);
		if (id < 0) {
			fprintf(stderr, "l7run: %s:%d: unknown identity '%s' (the policy declares:", path, lineno, name);
			for (__u32 i = 0; i < d->mf->n_identity; i++)
				fprintf(stderr, " %s", d->mf->identity[i].name.s);
			fprintf(stderr, "%s)\n", d->mf->n_identity ? "" : " none");
			rc = -1;
			break;
		}
		for (char *t = strtok_r(NULL, " \t\r\n", &save); t; t = strtok_r(NULL, " \t\r\n", &save)) {
			__u32 addr, len;
			if (parse_prefix(t, &addr, &len)) {
				fprintf(stderr, "l7run: %s:%d: '%s' is not an IPv4 address or prefix\n", path, lineno, t);
				rc = -1;
				break;
			}
			if (add(&file, addr, len, (__u32)id)) {
				fprintf(stderr, "l7run: %s:%d: %s is given to two identities\n", path, lineno, t);
				rc = -1;
				break;
			}
		}
	}
	fclose(f);
	out->n = 0;
	for (int i = 0; !rc && i < file.n; i++)
		add(out, file.e[i].key.addr, file.e[i].key.prefixlen, file.e[i].id);
	for (int i = 0; !rc && i < d->policy.n; i++) {
		const struct entry *p = &d->policy.e[i];
		if (!contains(out, p))   /* the file's entry for the same prefix wins */
			add(out, p->key.addr, p->key.prefixlen, p->id);
	}
	free(file.e);
	return rc;
}

/* Makes d's l7_idents hold exactly `want`. */
static int apply(struct idents *d, const struct entries *want)
{
	for (int i = 0; i < want->n; i++)
		if (bpf_map_update_elem(d->map_fd, &want->e[i].key, &want->e[i].id, BPF_ANY)) {
			fprintf(stderr, "l7run: l7_idents: %s\n", strerror(errno));
			return -1;
		}
	for (int i = 0; i < d->applied.n; i++)
		if (!contains(want, &d->applied.e[i]))
			bpf_map_delete_elem(d->map_fd, &d->applied.e[i].key);
	d->applied.n = 0;
	for (int i = 0; i < want->n; i++)
		add(&d->applied, want->e[i].key.addr, want->e[i].key.prefixlen, want->e[i].id);
	return 0;
}

/* Read the file (or take the policy's entries alone) and apply them to d. */
static int refresh(struct idents *d)
{
	struct entries want = { 0 };
	int rc = 0;

	if (d->env->file[0]) {
		stat(d->env->file, &d->seen);
		rc = read_file(d, &want);
	} else {
		for (int i = 0; i < d->policy.n; i++)
			add(&want, d->policy.e[i].key.addr, d->policy.e[i].key.prefixlen, d->policy.e[i].id);
	}
	if (!rc)
		rc = apply(d, &want);
	free(want.e);
	return rc;
}

/* Fills a version's l7_idents before any traffic (the loader: touches only this version);
 * -1 refuses the version (a bad --identities file). */
int ident_setup(struct ident_env *env, struct bpf_object *obj, struct config *cfg, char *err, size_t errlen)
{
	int fd = bpf_object__find_map_fd_by_name(obj, "l7_idents");

	if (fd < 0)
		return 0;   /* an object without identities support: nothing to keep */
	struct idents *d = idents_of(cfg);
	d->map_fd = fd;
	d->env = env;
	d->applied.n = 0;
	if (refresh(d)) {
		snprintf(err, errlen, "identities: %s does not fit the policy (above)", env->file);
		return -1;
	}
	return 0;
}

/* Keep (on) or stop keeping (off) a published version's l7_idents current. */
void ident_watch(struct ident_env *env, struct config *cfg, int on)
{
	struct idents *d = cfg->idents;
	struct stat st;

	if (!d || d->map_fd < 0)
		return;
	for (struct idents **pp = &env->watched; *pp; pp = &(*pp)->next)
		if (*pp == d) {
			if (!on)
				*pp = d->next;
			return;
		}
	if (!on)
		return;
	d->next = env->watched;
	env->watched = d;
	/* the file changed between the loader's read and now: this version catches up */
	if (env->file[0] && !stat(env->file, &st) && !same_file(&st, &d->seen))
		refresh(d);
}

void ident_free(struct config *cfg)
{
	if (!cfg->idents)
		return;
	if (cfg->idents->env)
		ident_watch(cfg->idents->env, cfg, 0);
	free(cfg->idents->policy.e);
	free(cfg->idents->applied.e);
	free(cfg->idents);
	cfg->idents = NULL;
}

/* Re-reads --identities when the file changed (at most once a second), for every version. */
void ident_tick(struct ident_env *I)
{
	struct stat st;
	time_t now = time(NULL);

	if (!I->file[0] || !I->watched || now == I->checked)
		return;
	I->checked = now;
	if (stat(I->file, &st))
		return;   /* being replaced: keep what is in force, look again next second */
	for (struct idents *d = I->watched; d; d = d->next) {
		if (same_file(&st, &d->seen))
			continue;
		int was = d->applied.n;
		if (refresh(d) == 0)
			fprintf(stderr, "l7run: identities: %d prefixes in force from %s\n", d->applied.n, I->file);
		else
			fprintf(stderr, "l7run: identities: %s ignored, the previous %d prefixes stay in force\n", I->file, was);
	}
}
