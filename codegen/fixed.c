/* Fixed machinery functions: the BPF functions of the stdlib machinery (bpf_loop callbacks and
 * the global l7g_* functions) whose code no policy symbol reaches, compiled once at build time
 * and joined to each policy's object instead of being optimised and emitted again.
 *
 * Which functions are fixed is a property of the stdlib bitcode alone. The policy reaches the
 * machinery only through the symbols the bitcode imports (l7/abi.h: l7_policy_decide, the
 * header vector l7_n_wanted/l7_wanted_*, l7_split_*, the JWT configurations, ...; the maps of
 * maps.def are imported too but are fixed by that table). A BPF function of the machinery is
 * fixed when neither its body nor anything inlined into it uses an import other than a map: a
 * call to a global function or a callback's address is a relocation, not inlined code, so the
 * search stops there. Everything else (the HTTP parser step the header vector specialises, the
 * programs, which inline the policy) goes through the full pipeline per policy, so partial
 * evaluation is what it was: the fixed functions are exactly the ones it could not change.
 *
 * Build time (l7c_fixed_gen, stdlib/fixed.l7): the policy's module is built and linked once to
 * find the fixed functions, then once more per fixed function, in which it is the only root
 * and the functions it references by relocation are declarations, and compiled through the
 * same -O2 and backend as a policy into an object of its own; the objects and what each
 * references make the bundle l7c embeds. Compile time: the bundle's functions become
 * declarations in the policy's module before -O2, and after the backend the policy's object
 * and the units it references (transitively) are joined by libbpf's static linker
 * (bpf_linker). A callback is static in the full pipeline (BTF_FUNC_STATIC: verified in its
 * caller's context); across objects it must be a global symbol, so it is hidden (libbpf
 * treats hidden functions as static), its BTF linkage says global while objects are joined
 * and static again in the joined object, which is then what the full pipeline makes,
 * function for function (tests/compiler/fixed.py).
 *
 * What a caller's code may depend on besides a callee's name is what -O2 infers about the callee
 * (its attributes: memory effects, nocapture, ...): a global function that calls a global
 * function is fixed only if its callee is, it is compiled with its callees' bodies (stripped
 * before the backend), and the declarations that replace a fixed global function in a policy's
 * module carry the attributes -O2 inferred for it at build time. (On today's examples the
 * callers' code is the same without those attributes; compiler.fixed would see a difference.)
 *
 * Bundle format: "L7FIXED1", u32 count, then per unit: u16 name length, name, u16 number of
 * references, each a u16 length and a name, u16 number of attributes, each u32 index (0 the
 * return, 1.. the parameters, ~0 the function), u32 kind, u64 value, u32 object size, the
 * object. */
#define _GNU_SOURCE   /* memfd_create */
#include "cg.h"

#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <linux/btf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define BUNDLE_MAGIC "L7FIXED1"

/* ---- a set of LLVM values (open addressing on the pointer) ---- */

struct vset {
	LLVMValueRef *k;
	size_t cap, n;
};

static size_t vhash(LLVMValueRef v, size_t cap)
{
	return (size_t)(((uintptr_t)v >> 4) * 0x9e3779b97f4a7c15ull) & (cap - 1);
}

static int vset_has(const struct vset *s, LLVMValueRef v)
{
	if (!s->cap)
		return 0;
	for (size_t i = vhash(v, s->cap);; i = (i + 1) & (s->cap - 1)) {
		if (s->k[i] == v)
			return 1;
		if (!s->k[i])
			return 0;
	}
}

static int vset_add(struct vset *s, LLVMValueRef v)   /* 1 if added */
{
	if (vset_has(s, v))
		return 0;
	if ((s->n + 1) * 2 > s->cap) {
		struct vset t = { calloc(s->cap ? s->cap * 2 : 64, sizeof(*t.k)), s->cap ? s->cap * 2 : 64, 0 };
		for (size_t i = 0; i < s->cap; i++)
			if (s->k[i])
				vset_add(&t, s->k[i]);
		free(s->k);
		*s = t;
	}
	size_t i = vhash(v, s->cap);
	while (s->k[i])
		i = (i + 1) & (s->cap - 1);
	s->k[i] = v;
	s->n++;
	return 1;
}

/* ---- which functions are fixed (build time) ---- */

static int is_global_fn(const char *name)
{
	return !strncmp(name, "l7g_", 4);
}

/* A use of f other than as the callee of a call (bpf_loop's callback argument). */
static int address_taken(LLVMValueRef f)
{
	for (LLVMUseRef u = LLVMGetFirstUse(f); u; u = LLVMGetNextUse(u)) {
		LLVMValueRef user = LLVMGetUser(u);
		if (LLVMIsAGlobalVariable(user) && !strncmp(LLVMGetValueName(user), "llvm.", 5))
			continue;
		if (LLVMIsAConstant(user) && !LLVMIsAGlobalValue(user)) {
			/* a constant expression or array: follow it unless it only feeds llvm.* lists */
			int only_lists = 1;
			for (LLVMUseRef v = LLVMGetFirstUse(user); v; v = LLVMGetNextUse(v)) {
				LLVMValueRef w = LLVMGetUser(v);
				if (!(LLVMIsAGlobalVariable(w) && !strncmp(LLVMGetValueName(w), "llvm.", 5)))
					only_lists = 0;
			}
			if (only_lists)
				continue;
			return 1;
		}
		if (LLVMIsACallInst(user) && LLVMGetCalledValue(user) == f)
			continue;
		return 1;
	}
	return 0;
}

/* A BPF function of its own in the object: a global l7g_* function or a callback. */
static int is_unit(LLVMValueRef f)
{
	return !LLVMIsDeclaration(f) && (is_global_fn(LLVMGetValueName(f)) || address_taken(f));
}

struct walk {
	const struct vset *imports;    /* what the bitcode imports, less the maps */
	struct vset seen_globals;
	struct vset inlined;           /* functions whose bodies are inlined into the root */
	struct vset refs;              /* functions referenced by relocation */
	struct vset calls;             /* of those, global functions called */
	LLVMValueRef root;
	int tainted;
};

static void walk_fn(struct walk *w, LLVMValueRef f);

static void walk_value(struct walk *w, LLVMValueRef v, LLVMValueRef call)
{
	if (!v || w->tainted)
		return;
	if (LLVMIsAFunction(v)) {
		if (vset_has(w->imports, v)) {
			w->tainted = 1;
			return;
		}
		if (LLVMIsDeclaration(v))
			return;   /* an intrinsic */
		int called = call && LLVMGetCalledValue(call) == v;
		if (called && !is_global_fn(LLVMGetValueName(v)))
			walk_fn(w, v);   /* inlined */
		else if (v != w->root)
			vset_add(&w->refs, v);
		if (called && is_global_fn(LLVMGetValueName(v)))
			vset_add(&w->calls, v);
		return;
	}
	if (LLVMIsAGlobalVariable(v)) {
		if (vset_has(w->imports, v)) {
			w->tainted = 1;
			return;
		}
		if (vset_add(&w->seen_globals, v) && !LLVMIsDeclaration(v))
			walk_value(w, LLVMGetInitializer(v), NULL);
		return;
	}
	if (LLVMIsAConstant(v) && !LLVMIsAGlobalValue(v)) {
		int n = LLVMGetNumOperands(v);
		for (int i = 0; i < n; i++)
			walk_value(w, LLVMGetOperand(v, (unsigned)i), NULL);
	}
}

static void walk_fn(struct walk *w, LLVMValueRef f)
{
	if (!vset_add(&w->inlined, f))
		return;
	for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(f); bb && !w->tainted; bb = LLVMGetNextBasicBlock(bb))
		for (LLVMValueRef i = LLVMGetFirstInstruction(bb); i && !w->tainted; i = LLVMGetNextInstruction(i)) {
			int n = LLVMGetNumOperands(i);
			LLVMValueRef call = LLVMIsACallInst(i) ? i : NULL;
			for (int k = 0; k < n; k++) {
				LLVMValueRef op = LLVMGetOperand(i, (unsigned)k);
				if (op && !LLVMIsABasicBlock(op) && !LLVMIsAInstruction(op) && !LLVMIsAArgument(op) &&
				    (LLVMIsAConstant(op) || LLVMIsAGlobalValue(op)))
					walk_value(w, op, call);
			}
		}
}

/* ---- declarations in place of definitions ---- */

/* The subroutine type of a DISubprogram: its operand 4 (llvm/IR/DebugInfoMetadata.h; the C API
 * has no getter). */
static LLVMMetadataRef sp_type(LLVMContextRef ctx, LLVMMetadataRef sp)
{
	LLVMValueRef v = LLVMMetadataAsValue(ctx, sp);
	unsigned n = LLVMGetMDNodeNumOperands(v);
	if (n < 5)
		return NULL;
	LLVMValueRef ops[16];
	if (n > 16)
		return NULL;
	LLVMGetMDNodeOperands(v, ops);
	return ops[4] ? LLVMValueAsMetadata(ops[4]) : NULL;
}

/* Replaces the definition of f by a declaration the linker resolves: a global symbol (hidden
 * unless it is an l7g_* function) with an extern BTF prototype, the definition's. */
static LLVMValueRef declare_instead(LLVMModuleRef m, LLVMDIBuilderRef di, LLVMValueRef f)
{
	LLVMContextRef ctx = LLVMGetModuleContext(m);
	size_t len;
	const char *name0 = LLVMGetValueName2(f, &len);
	char *name = strndup(name0, len);
	LLVMMetadataRef sp = LLVMGetSubprogram(f), ty = sp ? sp_type(ctx, sp) : NULL;
	LLVMValueRef d = LLVMAddFunction(m, "", LLVMGlobalGetValueType(f));
	LLVMReplaceAllUsesWith(f, d);
	LLVMDeleteFunction(f);
	LLVMSetValueName2(d, name, len);
	LLVMSetLinkage(d, LLVMExternalLinkage);
	if (!is_global_fn(name))
		LLVMSetVisibility(d, LLVMHiddenVisibility);
	if (ty) {
		LLVMMetadataRef file = LLVMDIScopeGetFile(sp);
		LLVMSetSubprogram(d, LLVMDIBuilderCreateFunction(di, file, name, len, name, len, file, 0, ty, 0, 0, 0,
								 LLVMDIFlagPrototyped, 1));
	}
	free(name);
	return d;
}

/* ---- BTF linkage, patched in an ELF object in memory ---- */

static Elf_Scn *find_section(Elf *e, const char *want, GElf_Shdr *sh)
{
	size_t shstrndx;
	if (elf_getshdrstrndx(e, &shstrndx))
		return NULL;
	for (Elf_Scn *s = NULL; (s = elf_nextscn(e, s));) {
		if (!gelf_getshdr(s, sh))
			continue;
		const char *n = elf_strptr(e, shstrndx, sh->sh_name);
		if (n && !strcmp(n, want))
			return s;
	}
	return NULL;
}

/* Sets the BTF linkage of the FUNC types of linkage `from` whose names `pick` accepts to `to`,
 * in place (the linkage is the vlen bits of the type's info word: nothing moves). */
static int patch_btf_linkage(char *obj, size_t n, int (*pick)(void *, const char *), void *arg, int from, int to)
{
	elf_version(EV_CURRENT);
	Elf *e = elf_memory(obj, n);
	GElf_Shdr sh;
	Elf_Scn *s = e ? find_section(e, ".BTF", &sh) : NULL;
	int rc = -1;
	if (!s || sh.sh_offset + sh.sh_size > n)
		goto out;
	char *raw = obj + sh.sh_offset;
	struct btf *btf = btf__new(raw, (__u32)sh.sh_size);
	if (!btf)
		goto out;
	const struct btf_header *hdr = (const struct btf_header *)raw;
	const char *first = (const char *)btf__type_by_id(btf, 1);
	for (__u32 id = 1; id < btf__type_cnt(btf); id++) {
		const struct btf_type *t = btf__type_by_id(btf, id);
		if (!btf_is_func(t) || btf_vlen(t) != from || !pick(arg, btf__name_by_offset(btf, t->name_off)))
			continue;
		struct btf_type *dst = (struct btf_type *)(raw + hdr->hdr_len + hdr->type_off + ((const char *)t - first));
		dst->info = (dst->info & ~0xffffu) | (unsigned)to;
	}
	btf__free(btf);
	rc = 0;
out:
	if (e)
		elf_end(e);
	return rc;
}

struct names {
	const char **v;
	int n;
};

static int pick_named(void *arg, const char *name)
{
	const struct names *ns = arg;
	for (int i = 0; i < ns->n; i++)
		if (!strcmp(ns->v[i], name))
			return 1;
	return 0;
}

/* The hidden functions of a joined object: static again, as the full pipeline makes them. */
static int pick_hidden(void *arg, const char *name)
{
	Elf *e = arg;
	GElf_Shdr sh;
	Elf_Scn *s = find_section(e, ".symtab", &sh);
	Elf_Data *d = s ? elf_getdata(s, NULL) : NULL;
	for (size_t i = 0; d && i < sh.sh_size / sizeof(Elf64_Sym); i++) {
		GElf_Sym sym;
		if (!gelf_getsym(d, (int)i, &sym) || GELF_ST_TYPE(sym.st_info) != STT_FUNC ||
		    GELF_ST_VISIBILITY(sym.st_other) != STV_HIDDEN || sym.st_shndx == SHN_UNDEF)
			continue;
		const char *n = elf_strptr(e, sh.sh_link, sym.st_name);
		if (n && !strcmp(n, name))
			return 1;
	}
	return 0;
}

/* ---- the bundle ---- */

struct unit {
	const char *name;
	size_t nlen;
	const unsigned char *refs;   /* nrefs x (u16 length, name) */
	unsigned nrefs;
	const unsigned char *attrs;  /* nattrs x (u32 index, u32 kind, u64 value) */
	unsigned nattrs;
	const unsigned char *obj;
	size_t size;
};

static unsigned rd16(const unsigned char *p)
{
	return (unsigned)p[0] | (unsigned)p[1] << 8;
}

static size_t rd32(const unsigned char *p)
{
	return (size_t)p[0] | (size_t)p[1] << 8 | (size_t)p[2] << 16 | (size_t)p[3] << 24;
}

/* The bundle's units, or -1 if it is malformed (it was made by this build: an internal error). */
static int bundle_units(const unsigned char *b, size_t n, struct unit **out)
{
	if (n < 12 || memcmp(b, BUNDLE_MAGIC, 8))
		return -1;
	size_t count = rd32(b + 8), at = 12;
	struct unit *u = calloc(count ? count : 1, sizeof(*u));
	for (size_t i = 0; i < count; i++) {
		if (at + 2 > n || at + 2 + rd16(b + at) + 2 > n)
			goto bad;
		u[i].nlen = rd16(b + at);
		u[i].name = (const char *)b + at + 2;
		at += 2 + u[i].nlen;
		u[i].nrefs = rd16(b + at);
		at += 2;
		u[i].refs = b + at;
		for (unsigned r = 0; r < u[i].nrefs; r++) {
			if (at + 2 > n || at + 2 + rd16(b + at) > n)
				goto bad;
			at += 2 + rd16(b + at);
		}
		if (at + 2 > n || at + 2 + 16 * (size_t)rd16(b + at) > n)
			goto bad;
		u[i].nattrs = rd16(b + at);
		u[i].attrs = b + at + 2;
		at += 2 + 16 * (size_t)u[i].nattrs;
		if (at + 4 > n || at + 4 + rd32(b + at) > n)
			goto bad;
		u[i].size = rd32(b + at);
		u[i].obj = b + at + 4;
		at += 4 + u[i].size;
	}
	*out = u;
	return (int)count;
bad:
	free(u);
	return -1;
}

static int unit_is(const struct unit *u, const char *name, size_t len)
{
	return u->nlen == len && !memcmp(u->name, name, len);
}

static int find_unit(const struct unit *u, int n, const char *name, size_t len)
{
	for (int i = 0; i < n; i++)
		if (unit_is(&u[i], name, len))
			return i;
	return -1;
}

static void put(FILE *f, const void *p, size_t n)
{
	fwrite(p, 1, n, f);
}

static void put16(FILE *f, size_t v)
{
	unsigned char b[2] = { (unsigned char)v, (unsigned char)(v >> 8) };
	put(f, b, 2);
}

static void put32(FILE *f, size_t v)
{
	unsigned char b[4] = { (unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16), (unsigned char)(v >> 24) };
	put(f, b, 4);
}

static uint64_t rd64(const unsigned char *p)
{
	return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32;
}

/* The enum and integer attributes of f (function, return, parameters): what -O2 inferred. */
static void put_attrs(FILE *out, LLVMValueRef f)
{
	unsigned np = LLVMCountParams(f), total = 0;
	LLVMAttributeRef a[64];
	for (int pass = 0; pass < 2; pass++)
		for (unsigned k = 0; k < np + 2; k++) {
			LLVMAttributeIndex idx = k == np + 1 ? (LLVMAttributeIndex)LLVMAttributeFunctionIndex : k;
			unsigned n = LLVMGetAttributeCountAtIndex(f, idx);
			if (n > 64)
				n = 64;
			LLVMGetAttributesAtIndex(f, idx, a);
			for (unsigned i = 0; i < n; i++) {
				if (!LLVMIsEnumAttribute(a[i]) || LLVMIsTypeAttribute(a[i]))
					continue;
				if (!pass) {
					total++;
					continue;
				}
				uint64_t v = LLVMGetEnumAttributeValue(a[i]);
				put32(out, idx);
				put32(out, LLVMGetEnumAttributeKind(a[i]));
				put32(out, (size_t)(v & 0xffffffffu));
				put32(out, (size_t)(v >> 32));
			}
			if (!pass && k == np + 1)
				put16(out, total);
		}
}

static void apply_attrs(LLVMContextRef ctx, LLVMValueRef f, const struct unit *u)
{
	for (unsigned i = 0; i < u->nattrs; i++) {
		const unsigned char *a = u->attrs + 16 * (size_t)i;
		LLVMAddAttributeAtIndex(f, (LLVMAttributeIndex)rd32(a), LLVMCreateEnumAttribute(ctx, (unsigned)rd32(a + 4), rd64(a + 8)));
	}
}

/* ---- the state: what the bitcode imports, and codegen's own functions ---- */

struct cg_fixed {
	char **imports;        /* names the stdlib bitcode declares and does not define */
	int nimports, nlib_defs;
	char **lib_defs;
	struct vset own;       /* functions codegen defined (the policy, wrappers) */
	/* compile time */
	struct unit *units;
	int nunits;
	unsigned char *present;    /* per unit: its definition was replaced by a declaration */
	LLVMDIBuilderRef di;
};

static struct cg_fixed *state(struct cg *g)
{
	if (!g->fixed)
		g->fixed = calloc(1, sizeof(*g->fixed));
	return g->fixed;
}

static const char *const map_names[] = {
#define L7_MAP(name, type, k, v, n) #name,
#include "l7/maps.def"
#undef L7_MAP
};

static int is_map(const char *name)
{
	for (size_t i = 0; i < sizeof(map_names) / sizeof(map_names[0]); i++)
		if (!strcmp(map_names[i], name))
			return 1;
	return 0;
}

static int listed(char **v, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(v[i], name))
			return 1;
	return 0;
}

void cg_fixed_before_link(struct cg *g)
{
	struct cg_fixed *fx = state(g);
	for (LLVMValueRef f = LLVMGetFirstFunction(g->mod); f; f = LLVMGetNextFunction(f))
		if (!LLVMIsDeclaration(f))
			vset_add(&fx->own, f);
}

static void note_symbol(struct cg_fixed *fx, LLVMValueRef v)
{
	const char *name = LLVMGetValueName(v);
	if (!strncmp(name, "llvm.", 5) || (LLVMIsAFunction(v) && LLVMGetIntrinsicID(v)))
		return;
	if (!LLVMIsDeclaration(v)) {
		if (!listed(fx->lib_defs, fx->nlib_defs, name)) {
			fx->lib_defs = realloc(fx->lib_defs, sizeof(char *) * (size_t)(fx->nlib_defs + 1));
			fx->lib_defs[fx->nlib_defs++] = strdup(name);
		}
	} else if (!is_map(name) && !listed(fx->imports, fx->nimports, name)) {
		fx->imports = realloc(fx->imports, sizeof(char *) * (size_t)(fx->nimports + 1));
		fx->imports[fx->nimports++] = strdup(name);
	}
}

void cg_fixed_note_bitcode(struct cg *g, LLVMModuleRef lib)
{
	struct cg_fixed *fx = state(g);
	for (LLVMValueRef f = LLVMGetFirstFunction(lib); f; f = LLVMGetNextFunction(f))
		note_symbol(fx, f);
	for (LLVMValueRef v = LLVMGetFirstGlobal(lib); v; v = LLVMGetNextGlobal(v))
		note_symbol(fx, v);
}

void cg_fixed_free(struct cg *g)
{
	struct cg_fixed *fx = g->fixed;
	if (!fx)
		return;
	for (int i = 0; i < fx->nimports; i++)
		free(fx->imports[i]);
	for (int i = 0; i < fx->nlib_defs; i++)
		free(fx->lib_defs[i]);
	free(fx->imports);
	free(fx->lib_defs);
	free(fx->own.k);
	free(fx->units);
	free(fx->present);
	if (fx->di)
		LLVMDisposeDIBuilder(fx->di);
	free(fx);
	g->fixed = NULL;
}

static void walk_free(struct walk *w)
{
	free(w->calls.k);
	free(w->seen_globals.k);
	free(w->inlined.k);
	free(w->refs.k);
}

/* Internal and always inlined, as internalise makes the machinery in the full pipeline. */
static void make_inlined(struct cg *g, LLVMValueRef f)
{
	unsigned always = LLVMGetEnumAttributeKindForName("alwaysinline", 12);
	unsigned noinline = LLVMGetEnumAttributeKindForName("noinline", 8);
	LLVMSetLinkage(f, LLVMInternalLinkage);
	LLVMRemoveEnumAttributeAtIndex(f, LLVMAttributeFunctionIndex, noinline);
	LLVMAddAttributeAtIndex(f, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(g->ctx, always, 0));
}

/* The global functions u calls, transitively (their bodies stay while u is optimised: what -O2
 * infers about them shapes u's code, as in the full pipeline). */
static void call_closure(struct walk *ws, LLVMValueRef *fs, int n, int u, struct vset *out)
{
	for (size_t i = 0; i < ws[u].calls.cap; i++) {
		LLVMValueRef c = ws[u].calls.k[i];
		if (!c || !vset_add(out, c))
			continue;
		for (int j = 0; j < n; j++)
			if (fs[j] == c)
				call_closure(ws, fs, n, j, out);
	}
}

struct fixed_unit_plan {
	char *name;
	char **refs, **keep;   /* referenced by relocation; called (bodies kept until the backend) */
	int nrefs, nkeep;
};

struct cg_fixed_plan {
	struct fixed_unit_plan *u;
	int n;
	FILE *out;
	int count;
};

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names of a set, sorted: the bundle is the same from build to build. */
static char **value_names(const struct vset *s, int *n)
{
	char **v = calloc(s->n + 1, sizeof(*v));
	*n = 0;
	for (size_t i = 0; i < s->cap; i++)
		if (s->k[i])
			v[(*n)++] = strdup(LLVMGetValueName(s->k[i]));
	qsort(v, (size_t)*n, sizeof(*v), by_name);
	return v;
}

/* Build time, after linking and before internalise: which units of the machinery are fixed. */
int cg_fixed_plan(struct cg *g, struct cg_fixed_plan **out)
{
	struct cg_fixed *fx = state(g);
	struct vset imports = { 0 };
	for (int i = 0; i < fx->nimports; i++) {
		if (listed(fx->lib_defs, fx->nlib_defs, fx->imports[i]))
			continue;
		LLVMValueRef v = LLVMGetNamedFunction(g->mod, fx->imports[i]);
		if (!v)
			v = LLVMGetNamedGlobal(g->mod, fx->imports[i]);
		if (v)
			vset_add(&imports, v);
	}
	/* the candidates: units of the machinery reaching no import, under a name of their own (a
	 * static function renamed on linking, name.N, might be another one in a policy's module) */
	int n = 0;
	for (LLVMValueRef f = LLVMGetFirstFunction(g->mod); f; f = LLVMGetNextFunction(f))
		n++;
	LLVMValueRef *fs = calloc((size_t)n + 1, sizeof(*fs));
	struct walk *ws = calloc((size_t)n + 1, sizeof(*ws));
	unsigned char *fixed = calloc((size_t)n + 1, 1);
	n = 0;
	for (LLVMValueRef f = LLVMGetFirstFunction(g->mod); f; f = LLVMGetNextFunction(f)) {
		if (vset_has(&fx->own, f) || !is_unit(f) || strchr(LLVMGetValueName(f), '.'))
			continue;
		struct walk *w = &ws[n];
		*w = (struct walk){ .imports = &imports, .root = f };
		walk_fn(w, f);
		int overlap = 0;   /* a function both inlined and referenced: kept out, to be safe */
		for (size_t i = 0; i < w->refs.cap; i++)
			if (w->refs.k[i] && vset_has(&w->inlined, w->refs.k[i]))
				overlap = 1;
		fs[n] = f;
		fixed[n++] = !w->tainted && !overlap;
	}
	/* ... and whose callees are fixed */
	for (int changed = 1; changed;) {
		changed = 0;
		for (int i = 0; i < n; i++)
			for (size_t k = 0; fixed[i] && k < ws[i].calls.cap; k++) {
				LLVMValueRef c = ws[i].calls.k[k];
				int j = 0;
				while (c && j < n && fs[j] != c)
					j++;
				if (c && (j == n || !fixed[j]))
					fixed[i] = 0, changed = 1;
			}
	}
	struct cg_fixed_plan *pl = calloc(1, sizeof(*pl));
	pl->u = calloc((size_t)n + 1, sizeof(*pl->u));
	for (int i = 0; i < n; i++) {
		if (!fixed[i])
			continue;
		struct fixed_unit_plan *u = &pl->u[pl->n++];
		struct vset keep = { 0 };
		call_closure(ws, fs, n, i, &keep);
		u->name = strdup(LLVMGetValueName(fs[i]));
		u->refs = value_names(&ws[i].refs, &u->nrefs);
		u->keep = value_names(&keep, &u->nkeep);
		free(keep.k);
	}
	for (int i = 0; i < n; i++)
		walk_free(&ws[i]);
	free(ws);
	free(fs);
	free(fixed);
	free(imports.k);
	*out = pl;
	return 0;
}

int cg_fixed_plan_units(const struct cg_fixed_plan *pl)
{
	return pl->n;
}

int cg_fixed_open(struct cg_fixed_plan *pl, const char *path)
{
	pl->out = fopen(path, "wb");
	if (!pl->out) {
		fprintf(stderr, "l7c: error: cannot write '%s'\n", path);
		return -1;
	}
	put(pl->out, BUNDLE_MAGIC, 8);
	put32(pl->out, 0);   /* the count, written at the end */
	return 0;
}

int cg_fixed_close(struct cg_fixed_plan *pl, const char *path, int rc)
{
	if (pl->out) {
		fseek(pl->out, 8, SEEK_SET);
		put32(pl->out, (size_t)pl->count);
		if (fclose(pl->out))
			rc = -1;
	}
	if (rc)
		fprintf(stderr, "l7c: error: writing the fixed functions to '%s' failed\n", path);
	for (int i = 0; i < pl->n; i++) {
		struct fixed_unit_plan *u = &pl->u[i];
		for (int k = 0; k < u->nrefs; k++)
			free(u->refs[k]);
		for (int k = 0; k < u->nkeep; k++)
			free(u->keep[k]);
		free(u->refs);
		free(u->keep);
		free(u->name);
	}
	free(pl->u);
	free(pl);
	return rc;
}

/* Build time, in a module built and linked as a policy's is (not a copy: LLVM's copies order
 * uses differently, and the backend's choices follow that order): unit k alone, the global
 * functions it calls as they are until the backend, what else it references declared,
 * everything else internal (gone after globaldce); compiled and added to the bundle. */
int cg_fixed_unit(struct cg *g, struct cg_fixed_plan *pl, int k)
{
	const struct fixed_unit_plan *u = &pl->u[k];
	LLVMModuleRef m = g->mod;
	LLVMDIBuilderRef di = LLVMCreateDIBuilderDisallowUnresolved(m);
	for (LLVMValueRef h = LLVMGetFirstFunction(m), next; h; h = next) {
		next = LLVMGetNextFunction(h);
		const char *hn = LLVMGetValueName(h);
		if (LLVMIsDeclaration(h))
			continue;
		if (!strcmp(hn, u->name)) {
			LLVMSetLinkage(h, LLVMExternalLinkage);
			if (!is_global_fn(hn))
				LLVMSetVisibility(h, LLVMHiddenVisibility);
		} else if (listed(u->keep, u->nkeep, hn)) {
			/* external, as in the full pipeline */
		} else if (listed(u->refs, u->nrefs, hn)) {
			declare_instead(m, di, h);
		} else if (!LLVMGetFirstUse(h) || cg_is_program(g, hn) || !strncmp(hn, "l7_policy_", 10)) {
			LLVMSetLinkage(h, LLVMInternalLinkage);   /* programs and the policy: unused */
		} else {
			make_inlined(g, h);
		}
	}
	for (LLVMValueRef v = LLVMGetFirstGlobal(m); v; v = LLVMGetNextGlobal(v)) {
		const char *vn = LLVMGetValueName(v);
		if (!strncmp(vn, "llvm.", 5) || LLVMIsDeclaration(v))
			continue;
		if (is_map(vn))
			LLVMSetInitializer(v, NULL);   /* defined by the policy's object */
		else
			LLVMSetLinkage(v, LLVMInternalLinkage);
	}
	char *obj = NULL;
	size_t size = 0;
	int rc = cg_optimise(g);
	LLVMValueRef self = LLVMGetNamedFunction(m, u->name);
	for (int i = 0; !rc && i < u->nkeep; i++) {
		LLVMValueRef h = LLVMGetNamedFunction(m, u->keep[i]);
		if (h && !LLVMIsDeclaration(h))
			declare_instead(m, di, h);
	}
	LLVMDIBuilderFinalize(di);
	LLVMDisposeDIBuilder(di);
	rc = rc || !self || LLVMIsDeclaration(self) ? -1 : cg_backend_object(g, &obj, &size);
	if (!rc) {   /* a callback is static in BTF: global, for the linker to find it */
		const char *me = u->name;
		struct names self_name = { &me, 1 };
		rc = is_global_fn(me) ? 0 : patch_btf_linkage(obj, size, pick_named, &self_name, BTF_FUNC_STATIC, BTF_FUNC_GLOBAL);
	}
	if (!rc) {
		FILE *out = pl->out;
		put16(out, strlen(u->name));
		put(out, u->name, strlen(u->name));
		put16(out, (size_t)u->nrefs);
		for (int i = 0; i < u->nrefs; i++) {
			put16(out, strlen(u->refs[i]));
			put(out, u->refs[i], strlen(u->refs[i]));
		}
		put_attrs(out, self);
		put32(out, size);
		put(out, obj, size);
		pl->count++;
	}
	free(obj);
	return rc;
}

/* Compile time, after internalise and before -O2: the bundle's functions become declarations,
 * and the functions they reference are exported to them (hidden). */
int cg_fixed_stub(struct cg *g, const unsigned char *bundle, size_t size)
{
	struct cg_fixed *fx = state(g);
	fx->nunits = bundle_units(bundle, size, &fx->units);
	if (fx->nunits < 0) {
		fprintf(stderr, "l7c: internal error: the embedded fixed functions are malformed\n");
		return -1;
	}
	fx->present = calloc((size_t)fx->nunits + 1, 1);
	fx->di = LLVMCreateDIBuilderDisallowUnresolved(g->mod);
	for (int i = 0; i < fx->nunits; i++) {
		char name[256];
		snprintf(name, sizeof(name), "%.*s", (int)fx->units[i].nlen, fx->units[i].name);
		LLVMValueRef f = LLVMGetNamedFunction(g->mod, name);
		if (!f || LLVMIsDeclaration(f))
			continue;
		apply_attrs(g->ctx, declare_instead(g->mod, fx->di, f), &fx->units[i]);
		fx->present[i] = 1;
	}
	for (int i = 0; i < fx->nunits; i++) {
		const unsigned char *r = fx->units[i].refs;
		for (unsigned k = 0; fx->present[i] && k < fx->units[i].nrefs; k++, r += 2 + rd16(r)) {
			char name[256];
			snprintf(name, sizeof(name), "%.*s", (int)rd16(r), (const char *)r + 2);
			LLVMValueRef f = LLVMGetNamedFunction(g->mod, name);
			if (!f || LLVMIsDeclaration(f))
				continue;
			LLVMSetLinkage(f, LLVMExternalLinkage);
			if (!is_global_fn(name))
				LLVMSetVisibility(f, LLVMHiddenVisibility);
		}
	}
	LLVMDIBuilderFinalize(fx->di);
	return 0;
}

/* A file descriptor holding n bytes, with a path libbpf can open. */
static int memfile(const char *what, const void *data, size_t n, char *path, size_t len)
{
	int fd = memfd_create(what, MFD_CLOEXEC);
	if (fd < 0)
		return -1;
	if (n && write(fd, data, n) != (ssize_t)n) {
		close(fd);
		return -1;
	}
	snprintf(path, len, "/proc/self/fd/%d", fd);
	return fd;
}

/* Names the hidden functions the policy's object defines: their BTF says global while the
 * objects are joined. */
static int pick_exported(void *arg, const char *name)
{
	return pick_hidden(arg, name);
}

/* After the backend: the policy's object *obj joined with the units it references, into
 * *obj (malloc'd). */
int cg_fixed_join(struct cg *g, char **obj, size_t *n)
{
	struct cg_fixed *fx = g->fixed;
	if (!fx || !fx->units)
		return 0;
	/* which units: those still referenced after -O2, the l7g_* ones (global: the full
	 * pipeline keeps them all), and what they reference */
	unsigned char *take = calloc((size_t)fx->nunits + 1, 1);
	for (int i = 0; i < fx->nunits; i++) {
		if (!fx->present[i])
			continue;
		char name[256];
		snprintf(name, sizeof(name), "%.*s", (int)fx->units[i].nlen, fx->units[i].name);
		LLVMValueRef f = LLVMGetNamedFunction(g->mod, name);
		take[i] = is_global_fn(name) || (f && LLVMGetFirstUse(f));
	}
	for (int more = 1; more;) {
		more = 0;
		for (int i = 0; i < fx->nunits; i++) {
			const unsigned char *r = fx->units[i].refs;
			for (unsigned k = 0; take[i] && k < fx->units[i].nrefs; k++, r += 2 + rd16(r)) {
				int j = find_unit(fx->units, fx->nunits, (const char *)r + 2, rd16(r));
				if (j >= 0 && !take[j])
					take[j] = more = 1;
			}
		}
	}
	int rc = -1, ofd = -1;
	char path[64];
	/* the exported callbacks of the policy's object: BTF linkage global for the linker */
	elf_version(EV_CURRENT);
	Elf *e = elf_memory(*obj, *n);
	if (!e || patch_btf_linkage(*obj, *n, pick_exported, e, BTF_FUNC_STATIC, BTF_FUNC_GLOBAL))
		goto out;
	elf_end(e);
	e = NULL;
	ofd = memfile("l7c-joined", NULL, 0, path, sizeof(path));
	if (ofd < 0)
		goto out;
	struct bpf_linker *l = bpf_linker__new(path, NULL);
	if (!l)
		goto out;
	int fd = memfile("l7c-policy", *obj, *n, path, sizeof(path));
	int err = fd < 0 ? -1 : bpf_linker__add_file(l, path, NULL);
	if (fd >= 0)
		close(fd);
	for (int i = 0; i < fx->nunits && !err; i++) {
		if (!take[i])
			continue;
		fd = memfile("l7c-fixed", fx->units[i].obj, fx->units[i].size, path, sizeof(path));
		err = fd < 0 ? -1 : bpf_linker__add_file(l, path, NULL);
		if (fd >= 0)
			close(fd);
	}
	err = err ? err : bpf_linker__finalize(l);
	bpf_linker__free(l);
	struct stat st;
	if (err || fstat(ofd, &st))
		goto out;
	char *joined = malloc((size_t)st.st_size + 1);
	if (pread(ofd, joined, (size_t)st.st_size, 0) != st.st_size) {
		free(joined);
		goto out;
	}
	/* the hidden functions: static in BTF again (verified in their callers' context) */
	e = elf_memory(joined, (size_t)st.st_size);
	if (!e || patch_btf_linkage(joined, (size_t)st.st_size, pick_hidden, e, BTF_FUNC_GLOBAL, BTF_FUNC_STATIC)) {
		free(joined);
		goto out;
	}
	free(*obj);
	*obj = joined;
	*n = (size_t)st.st_size;
	rc = 0;
out:
	if (e)
		elf_end(e);
	if (rc)
		fprintf(stderr, "l7c: error: joining the fixed machinery functions to the policy's object failed\n");
	if (ofd >= 0)
		close(ofd);
	free(take);
	return rc;
}
