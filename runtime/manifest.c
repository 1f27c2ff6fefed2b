/* The manifest reader (l7/manifest.h; its records are the rows of l7/manifest.def). Bad input
 * is refused with the reason, never read past: the header is checked (magic, then version,
 * then size) before anything else, a first pass over the record headers checks that they
 * tile the section exactly and sizes the arrays, and every field is checked against what is
 * left of its record before it is copied out. */
#include <gelf.h>
#include <libelf.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "manifest.h"

static const struct {
	const char *name, *help;
	__u32 max;
} kinds[L7M_KINDS] = {
	[L7M_NOKIND] = { "kind 0", "", 0 },
#define L7M_KIND(id, name, max, help, fields) [L7M_##id] = { #name, help, max },
#include "l7/manifest.def"
};

static __u32 le(const unsigned char *p, int n)
{
	__u32 v = 0;
	for (int i = n - 1; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static void say(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* One record being read. */
struct rd {
	const unsigned char *p;
	size_t left;             /* bytes of the record not read yet */
	const __u32 *count;      /* records of each kind in the manifest */
	char *strings;           /* the manifest's copy of its strings */
	size_t used, cap;
	__u32 rec;               /* its number, for errors */
	enum l7m_kind kind;
	char *err;
	size_t errlen;
};

static int bad(struct rd *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bad(struct rd *r, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(r->err, r->errlen, "corrupt manifest: record %u (%s): ", r->rec, kinds[r->kind].name);
	va_start(ap, fmt);
	if (n >= 0 && (size_t)n < r->errlen)
		vsnprintf(r->err + n, r->errlen - (size_t)n, fmt, ap);
	va_end(ap);
	return -1;
}

static int take(struct rd *r, const char *f, size_t n)
{
	return r->left < n ? bad(r, "%s runs past the end of the record (%zu bytes left, %zu needed)", f, r->left, n) : 0;
}

static int get_u32(struct rd *r, const char *f, __u32 *v, __u32 max)
{
	if (take(r, f, 4))
		return -1;
	*v = le(r->p, 4);
	r->p += 4;
	r->left -= 4;
	return max && *v > max ? bad(r, "%s is %u, at most %u", f, *v, max) : 0;
}

static int get_enum(struct rd *r, const char *f, __u32 *v, __u32 n)
{
	if (get_u32(r, f, v, 0))
		return -1;
	return *v >= n ? bad(r, "%s is %u, one of 0-%u", f, *v, n - 1) : 0;
}

static int get_str(struct rd *r, const char *f, struct l7m_str *s, __u32 max)
{
	if (take(r, f, 2))
		return -1;
	__u32 n = le(r->p, 2);
	r->p += 2;
	r->left -= 2;
	if (n > max)
		return bad(r, "%s is %u bytes, at most %u", f, n, max);
	if (take(r, f, n))
		return -1;
	if (r->used + n + 1 > r->cap)   /* cannot happen: a string takes more room in the section */
		return bad(r, "%s: no room for its strings", f);
	char *d = r->strings + r->used;
	memcpy(d, r->p, n);
	d[n] = 0;
	r->used += n + 1;
	r->p += n;
	r->left -= n;
	*s = (struct l7m_str){ d, n };
	return 0;
}

static int get_ref(struct rd *r, const char *f, __u32 *v, enum l7m_kind k, int opt)
{
	if (get_u32(r, f, v, 0))
		return -1;
	if ((opt && *v == L7M_NONE) || *v < r->count[k])
		return 0;
	return bad(r, "%s refers to %s %u, and there are %u", f, kinds[k].name, *v, r->count[k]);
}

static int get_end(struct rd *r)
{
	return r->left ? bad(r, "%zu bytes more than its fields", r->left) : 0;
}

#define L7M_U32(f, max) if (get_u32(r, #f, &o->f, max)) return -1;
#define L7M_ENUM(f, names) if (get_enum(r, #f, &o->f, L7M_COUNT(names))) return -1;
#define L7M_IP4(f) if (get_u32(r, #f, &o->f, 0)) return -1;
#define L7M_STR(f, max) if (get_str(r, #f, &o->f, max)) return -1;
#define L7M_REF(f, kind) if (get_ref(r, #f, &o->f, L7M_##kind, 0)) return -1;
#define L7M_OPT(f, kind) if (get_ref(r, #f, &o->f, L7M_##kind, 1)) return -1;
#define L7M_KIND(id, name, max, help, fields) \
	static int get_##name(struct rd *r, struct l7m_##name *o) { fields return get_end(r); }
#include "l7/manifest.def"

void manifest_free(struct manifest *m)
{
#define L7M_KIND(id, name, max, help, fields) free(m->name);
#include "l7/manifest.def"
	free(m->strings);
	memset(m, 0, sizeof *m);
}

/* The header: magic, then the version (the same 8 bytes in every version), then the size. */
static int header(const unsigned char *b, size_t len, char *err, size_t errlen)
{
	if (len >= 11 && !memcmp(b, "l7c-config ", 11)) {
		say(err, errlen, "compiled by an older l7c: manifest version 1 (text), this l7run reads %d; "
			"recompile the policy", L7M_VERSION);
		return -1;
	}
	if (len < 8) {
		say(err, errlen, "truncated manifest: %zu bytes, its header alone is %d", len, L7M_HEADER);
		return -1;
	}
	if (le(b, 4) != L7M_MAGIC) {
		say(err, errlen, "not an l7c manifest (it starts %02x %02x %02x %02x; a manifest starts \"L7MF\")", b[0], b[1], b[2],
		    b[3]);
		return -1;
	}
	__u32 v = le(b + 4, 4);
	if (v != L7M_VERSION) {
		say(err, errlen, "compiled by %s l7c: manifest version %u, this l7run reads %d%s", v > L7M_VERSION ? "a newer" : "an older",
		    v, L7M_VERSION, v > L7M_VERSION ? " (run the l7run of that l7c)" : "; recompile the policy");
		return -1;
	}
	if (len < L7M_HEADER || le(b + 8, 4) > len) {
		say(err, errlen, "truncated manifest: %zu bytes, its header says %u", len, len < L7M_HEADER ? L7M_HEADER : le(b + 8, 4));
		return -1;
	}
	if (le(b + 8, 4) < len) {
		say(err, errlen, "corrupt manifest: %zu bytes, its header says %u", len, le(b + 8, 4));
		return -1;
	}
	return 0;
}

int manifest_read(const void *bytes, size_t len, struct manifest *m, char *err, size_t errlen)
{
	const unsigned char *b = bytes;
	__u32 count[L7M_KINDS] = { 0 }, i = 0;
	size_t at;

	memset(m, 0, sizeof *m);
	if (header(b, len, err, errlen))
		return -1;
	/* the record headers tile the rest exactly; how many of each kind */
	for (at = L7M_HEADER; at < len; at += L7M_RECORD + le(b + at + 2, 2), i++) {
		__u32 k = len - at < L7M_RECORD ? 0 : le(b + at, 2);
		if (len - at < L7M_RECORD || k == L7M_NOKIND || k >= L7M_KINDS) {
			say(err, errlen, "corrupt manifest: record %u (at byte %zu): %s", i, at,
			    len - at < L7M_RECORD ? "its header runs past the end" : "unknown kind");
			if (k && len - at >= L7M_RECORD)
				snprintf(err + strlen(err), errlen - strlen(err), " %u", k);
			return -1;
		}
		if (le(b + at + 2, 2) > len - at - L7M_RECORD) {
			say(err, errlen, "corrupt manifest: record %u (%s, at byte %zu): %u bytes, %zu left", i, kinds[k].name, at,
			    le(b + at + 2, 2), len - at - L7M_RECORD);
			return -1;
		}
		if (kinds[k].max && count[k] == kinds[k].max) {
			say(err, errlen, "corrupt manifest: more than %u %s records", kinds[k].max, kinds[k].name);
			return -1;
		}
		count[k]++;
	}
	if (i != le(b + 12, 4)) {
		say(err, errlen, "corrupt manifest: %u records, its header says %u", i, le(b + 12, 4));
		return -1;
	}
	m->version = L7M_VERSION;
	m->size = (__u32)len;
	m->count = i;
	int nomem = !(m->strings = malloc(len));
#define L7M_KIND(id, name, max, help, fields) \
	nomem |= count[L7M_##id] && !(m->name = calloc(count[L7M_##id], sizeof *m->name));
#include "l7/manifest.def"
	if (nomem) {
		manifest_free(m);
		say(err, errlen, "out of memory for a manifest of %zu bytes", len);
		return -1;
	}
	struct rd r = { .count = count, .strings = m->strings, .cap = len, .err = err, .errlen = errlen };
	for (at = L7M_HEADER, i = 0; at < len; at += L7M_RECORD + r.left, i++) {
		r.kind = (enum l7m_kind)le(b + at, 2);
		r.left = le(b + at + 2, 2);
		r.p = b + at + L7M_RECORD;
		r.rec = i;
		size_t size = r.left;
		int rc = -1;
		switch (r.kind) {
#define L7M_KIND(id, name, max, help, fields) \
	case L7M_##id: rc = get_##name(&r, &m->name[m->n_##name++]); break;
#include "l7/manifest.def"
		case L7M_NOKIND:
		case L7M_KINDS: break;
		}
		if (rc) {
			manifest_free(m);
			return -1;
		}
		r.left = size;
	}
	return 0;
}

int manifest_of_object(const void *obj, size_t len, struct manifest *m, char *err, size_t errlen)
{
	Elf_Data *d = NULL;
	int v1 = 0, rc = -1;
	size_t shstrndx;

	memset(m, 0, sizeof *m);
	Elf *e = elf_version(EV_CURRENT) == EV_NONE ? NULL : elf_memory((char *)obj, len);
	if (!e || elf_kind(e) != ELF_K_ELF || elf_getshdrstrndx(e, &shstrndx)) {
		say(err, errlen, "not an l7c object (not an ELF object)");
		goto out;
	}
	for (Elf_Scn *scn = NULL; !d && (scn = elf_nextscn(e, scn));) {
		GElf_Shdr sh;
		const char *name = gelf_getshdr(scn, &sh) ? elf_strptr(e, shstrndx, sh.sh_name) : NULL;
		if (name && !strcmp(name, L7_MANIFEST_SECTION))
			d = elf_getdata(scn, NULL);
		v1 |= name && !strcmp(name, L7_MANIFEST_V1_SECTION);
	}
	if (d)
		rc = manifest_read(d->d_buf ? d->d_buf : "", d->d_buf ? d->d_size : 0, m, err, errlen);
	else if (v1)
		say(err, errlen, "compiled by an older l7c: manifest version 1 (its text section %s), this l7run reads %d; "
			"recompile the policy", L7_MANIFEST_V1_SECTION, L7M_VERSION);
	else
		say(err, errlen, "not an l7c object (no %s section)", L7_MANIFEST_SECTION);
out:
	if (e)
		elf_end(e);
	return rc;
}

const char *manifest_decision(__u32 d)
{
	static const char *const names[] = L7M_DECISION_NAMES;
	return d < L7M_COUNT(L7M_DECISION_NAMES) ? names[d] : "?";
}

void manifest_slot_name(const struct manifest *m, __u32 slot, char *buf, size_t n)
{
	const struct l7m_upstream *u = slot < m->n_upstream ? &m->upstream[slot] : NULL;
	if (!u)
		snprintf(buf, n, "#%u", slot);
	else if (u->endpoints > 1)
		snprintf(buf, n, "%s#%u", u->name.s, u->endpoint);
	else
		snprintf(buf, n, "%s", u->name.s);
}

/* The printer: one line per record, `kind[index] field=value ...`, strings quoted with every
 * byte outside printable ASCII (and " and \) as \xHH. */
static void put_str(FILE *out, const char *f, const struct l7m_str *s)
{
	fprintf(out, " %s=\"", f);
	for (__u32 i = 0; i < s->len; i++) {
		unsigned char c = (unsigned char)s->s[i];
		if (c < 0x20 || c > 0x7e || c == '"' || c == '\\')
			fprintf(out, "\\x%02x", c);
		else
			fputc(c, out);
	}
	fputc('"', out);
}

static void put_num(FILE *out, const char *f, __u32 v, const char *kind)
{
	if (v == L7M_NONE)
		fprintf(out, " %s=none", f);
	else if (kind)
		fprintf(out, " %s=%s[%u]", f, kind, v);
	else
		fprintf(out, " %s=%u", f, v);
}

#define L7M_U32(f, max) put_num(out, #f, o->f, NULL);
#define L7M_ENUM(f, names) fprintf(out, " %s=%s", #f, o->f < L7M_COUNT(names) ? ((const char *const[])names)[o->f] : "?");
#define L7M_IP4(f) fprintf(out, " %s=%u.%u.%u.%u", #f, o->f >> 24, o->f >> 16 & 255, o->f >> 8 & 255, o->f & 255);
#define L7M_STR(f, max) put_str(out, #f, &o->f);
#define L7M_REF(f, kind) put_num(out, #f, o->f, kinds[L7M_##kind].name);
#define L7M_OPT(f, kind) put_num(out, #f, o->f, kinds[L7M_##kind].name);
#define L7M_KIND(id, name, max, help, fields) \
	static void print_##name(FILE *out, const struct l7m_##name *o) { fields }
#include "l7/manifest.def"

void manifest_print(FILE *out, const struct manifest *m)
{
	fprintf(out, "manifest version %u: %u bytes, %u records\n", m->version, m->size, m->count);
#define L7M_KIND(id, name, max, help, fields)                           \
	for (__u32 i = 0; i < m->n_##name; i++) {                       \
		if (!i)                                                 \
			fprintf(out, "# %s: %s\n", #name, help);        \
		fprintf(out, "%s[%u]", #name, i);                       \
		print_##name(out, &m->name[i]);                         \
		fputc('\n', out);                                       \
	}
#include "l7/manifest.def"
}
