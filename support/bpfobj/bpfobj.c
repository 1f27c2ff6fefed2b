/* Reading a BPF ELF object for the budget model: functions (STT_FUNC symbols of executable
 * sections), relocations (which map, callback or subprogram an instruction names) and line
 * info (.BTF.ext, whose instruction offsets are in bytes in an object file). */
#include "bpfobj.h"

#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct sym { char name[64]; int sec; unsigned long value; int type; };
struct rel { int sec; unsigned long off; int sym; };
struct line { int sec; unsigned long off; unsigned line, col; const char *file, *path; };

struct priv {
	Elf *e;
	struct sym *syms;
	int nsyms;
	struct rel *rels;            /* sorted by (sec, off) */
	int nrels;
	struct line *lines;          /* sorted by (sec, off) */
	int nlines;
	char (*secname)[64];
	int nsecs;
};

static int by_sec_off(const void *a, const void *b, size_t so, size_t oo)
{
	int sa = *(const int *)((const char *)a + so), sb = *(const int *)((const char *)b + so);
	unsigned long oa = *(const unsigned long *)((const char *)a + oo), ob = *(const unsigned long *)((const char *)b + oo);
	return sa != sb ? (sa < sb ? -1 : 1) : oa < ob ? -1 : oa > ob;
}

static int cmp_rel(const void *a, const void *b) { return by_sec_off(a, b, offsetof(struct rel, sec), offsetof(struct rel, off)); }
static int cmp_line(const void *a, const void *b) { return by_sec_off(a, b, offsetof(struct line, sec), offsetof(struct line, off)); }

static int cmp_fn(const void *a, const void *b)
{
	const struct bpfobj_fn *x = a, *y = b;
	return x->sec != y->sec ? (x->sec < y->sec ? -1 : 1) : x->off < y->off ? -1 : x->off > y->off;
}

/* .BTF strings, for the line info's file names */
static const char *btf_strings(Elf_Data *btf, uint32_t *len)
{
	if (!btf || btf->d_size < 24)
		return NULL;
	const uint8_t *d = btf->d_buf;
	uint32_t hdr, str_off, str_len;
	memcpy(&hdr, d + 4, 4);
	memcpy(&str_off, d + 16, 4);
	memcpy(&str_len, d + 20, 4);
	if ((uint64_t)hdr + str_off + str_len > btf->d_size)
		return NULL;
	*len = str_len;
	return (const char *)d + hdr + str_off;
}

static void read_lines(struct priv *p, Elf_Data *btf, Elf_Data *ext)
{
	uint32_t slen = 0;
	const char *str = btf_strings(btf, &slen);
	if (!str || !ext || ext->d_size < 24)
		return;
	const uint8_t *d = ext->d_buf;
	uint32_t hdr, off, len, rec;
	memcpy(&hdr, d + 4, 4);
	memcpy(&off, d + 16, 4);
	memcpy(&len, d + 20, 4);
	if ((uint64_t)hdr + off + len > ext->d_size || len < 4)
		return;
	const uint8_t *at = d + hdr + off, *end = at + len;
	memcpy(&rec, at, 4);
	at += 4;
	if (rec < 16)
		return;
	while (at + 8 <= end) {
		uint32_t name, n;
		memcpy(&name, at, 4);
		memcpy(&n, at + 4, 4);
		at += 8;
		int sec = -1;
		for (int s = 0; name < slen && s < p->nsecs; s++)
			if (!strcmp(p->secname[s], str + name))
				sec = s;
		if ((uint64_t)n * rec > (uint64_t)(end - at))
			return;
		p->lines = realloc(p->lines, sizeof(*p->lines) * (size_t)(p->nlines + (int)n));
		for (uint32_t i = 0; i < n; i++, at += rec) {
			uint32_t insn, file, line_col;
			memcpy(&insn, at, 4);
			memcpy(&file, at + 4, 4);
			memcpy(&line_col, at + 12, 4);
			if (sec < 0 || file >= slen)
				continue;
			const char *f = str + file, *slash = strrchr(f, '/');
			p->lines[p->nlines++] = (struct line){ sec, insn, line_col >> 10, line_col & 0x3ff, slash ? slash + 1 : f, f };
		}
	}
	qsort(p->lines, (size_t)p->nlines, sizeof(*p->lines), cmp_line);
}

int bpfobj_open(struct bpfobj *o, const char *data, size_t len)
{
	memset(o, 0, sizeof(*o));
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -1;
	struct priv *p = calloc(1, sizeof(*p));
	o->priv = p;
	p->e = elf_memory((char *)data, len);
	size_t shstrndx, nsecs;
	if (!p->e || elf_getshdrstrndx(p->e, &shstrndx) || elf_getshdrnum(p->e, &nsecs))
		return -1;
	p->nsecs = (int)nsecs;
	p->secname = calloc(nsecs, sizeof(*p->secname));
	Elf_Data *btf = NULL, *ext = NULL;
	for (Elf_Scn *scn = NULL; (scn = elf_nextscn(p->e, scn));) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh))
			continue;
		int idx = (int)elf_ndxscn(scn);
		const char *name = elf_strptr(p->e, shstrndx, sh.sh_name);
		snprintf(p->secname[idx], sizeof(p->secname[0]), "%s", name ? name : "");
		Elf_Data *d = elf_getdata(scn, NULL);
		if (name && !strcmp(name, ".BTF"))
			btf = d;
		else if (name && !strcmp(name, ".BTF.ext"))
			ext = d;
		if (sh.sh_type == SHT_SYMTAB && d) {
			size_t n = sh.sh_entsize ? sh.sh_size / sh.sh_entsize : 0;
			p->syms = calloc(n + 1, sizeof(*p->syms));
			p->nsyms = (int)n;
			for (size_t i = 0; i < n; i++) {
				GElf_Sym s;
				if (!gelf_getsym(d, (int)i, &s))
					continue;
				const char *sn = elf_strptr(p->e, sh.sh_link, s.st_name);
				snprintf(p->syms[i].name, sizeof(p->syms[i].name), "%s", sn ? sn : "");
				p->syms[i].sec = s.st_shndx;
				p->syms[i].value = s.st_value;
				p->syms[i].type = GELF_ST_TYPE(s.st_info);
				if (p->syms[i].type == STT_FUNC && s.st_size && s.st_shndx < nsecs) {
					o->fns = realloc(o->fns, sizeof(*o->fns) * (size_t)(o->nfns + 1));
					struct bpfobj_fn *f = &o->fns[o->nfns++];
					memset(f, 0, sizeof(*f));
					snprintf(f->name, sizeof(f->name), "%s", p->syms[i].name);
					f->sec = s.st_shndx;
					f->off = s.st_value;
					f->n = (int)(s.st_size / sizeof(struct bpf_insn));
				}
			}
		}
	}
	for (Elf_Scn *scn = NULL; (scn = elf_nextscn(p->e, scn));) {   /* relocations, once symbols are known */
		GElf_Shdr sh;
		Elf_Data *d = elf_getdata(scn, NULL);
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_REL || !d || !sh.sh_entsize)
			continue;
		size_t n = sh.sh_size / sh.sh_entsize;
		p->rels = realloc(p->rels, sizeof(*p->rels) * (p->nrels + n));
		for (size_t i = 0; i < n; i++) {
			GElf_Rel r;
			if (gelf_getrel(d, (int)i, &r) && (int)GELF_R_SYM(r.r_info) < p->nsyms)
				p->rels[p->nrels++] = (struct rel){ (int)sh.sh_info, r.r_offset, (int)GELF_R_SYM(r.r_info) };
		}
	}
	qsort(p->rels, (size_t)p->nrels, sizeof(*p->rels), cmp_rel);
	for (int i = 0; i < o->nfns; i++) {   /* instructions, now that section data is known */
		struct bpfobj_fn *f = &o->fns[i];
		Elf_Scn *scn = elf_getscn(p->e, (size_t)f->sec);
		Elf_Data *d = scn ? elf_getdata(scn, NULL) : NULL;
		snprintf(f->section, sizeof(f->section), "%s", p->secname[f->sec]);
		if (!d || f->off + (unsigned long)f->n * sizeof(struct bpf_insn) > d->d_size)
			f->n = 0;
		else
			f->insns = (const struct bpf_insn *)((const char *)d->d_buf + f->off);
	}
	qsort(o->fns, (size_t)o->nfns, sizeof(*o->fns), cmp_fn);
	read_lines(p, btf, ext);
	return 0;
}

void bpfobj_close(struct bpfobj *o)
{
	struct priv *p = o->priv;
	if (p) {
		if (p->e)
			elf_end(p->e);
		free(p->syms);
		free(p->rels);
		free(p->lines);
		free(p->secname);
		free(p);
	}
	free(o->fns);
	memset(o, 0, sizeof(*o));
}

static const char *fn_at(const struct bpfobj *o, int sec, unsigned long off)
{
	for (int i = 0; i < o->nfns; i++)
		if (o->fns[i].sec == sec && o->fns[i].off == off)
			return o->fns[i].name;
	return NULL;
}

int bpfobj_relocated(const struct bpfobj *o, const struct bpfobj_fn *f, int i)
{
	const struct priv *p = o->priv;
	struct rel key = { f->sec, f->off + (unsigned long)i * sizeof(struct bpf_insn), 0 };
	return bsearch(&key, p->rels, (size_t)p->nrels, sizeof(*p->rels), cmp_rel) != NULL;
}

const char *bpfobj_reloc(const struct bpfobj *o, const struct bpfobj_fn *f, int i)
{
	const struct priv *p = o->priv;
	struct rel key = { f->sec, f->off + (unsigned long)i * sizeof(struct bpf_insn), 0 };
	const struct rel *r = bsearch(&key, p->rels, (size_t)p->nrels, sizeof(*p->rels), cmp_rel);
	if (!r)
		return NULL;
	const struct sym *s = &p->syms[r->sym];
	if (s->type != STT_SECTION)
		return s->name[0] ? s->name : NULL;
	/* a static function named by its section and the offset the instruction carries */
	const struct bpf_insn *in = &f->insns[i];
	long target = BPF_CLASS(in->code) == BPF_JMP && BPF_OP(in->code) == BPF_CALL
			      ? (long)s->value + ((long)in->imm + 1) * (long)sizeof(struct bpf_insn)
			      : (long)s->value + in->imm;
	return target >= 0 ? fn_at(o, s->sec, (unsigned long)target) : NULL;
}

static const struct line *line_of(const struct bpfobj *o, const struct bpfobj_fn *f, int i)
{
	const struct priv *p = o->priv;
	unsigned long off = f->off + (unsigned long)i * sizeof(struct bpf_insn);
	int lo = 0, hi = p->nlines - 1, best = -1;
	while (lo <= hi) {   /* the last record at or before the instruction, in its section */
		int mid = (lo + hi) / 2;
		const struct line *l = &p->lines[mid];
		if (l->sec < f->sec || (l->sec == f->sec && l->off <= off)) {
			best = mid;
			lo = mid + 1;
		} else {
			hi = mid - 1;
		}
	}
	if (best < 0 || p->lines[best].sec != f->sec || p->lines[best].off < f->off)
		return NULL;
	return &p->lines[best];
}

unsigned bpfobj_line(const struct bpfobj *o, const struct bpfobj_fn *f, int i, const char **file)
{
	const struct line *l = line_of(o, f, i);
	*file = l ? l->file : "";
	return l ? l->line : 0;
}

unsigned bpfobj_loc(const struct bpfobj *o, const struct bpfobj_fn *f, int i, const char **path, unsigned *col)
{
	const struct line *l = line_of(o, f, i);
	*path = l ? l->path : "";
	*col = l ? l->col : 0;
	return l ? l->line : 0;
}
