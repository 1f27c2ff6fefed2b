/* Debug info: DWARF from the DIBuilder, which the BPF backend turns into .BTF (map
 * definitions, function prototypes) and .BTF.ext (line info back to the .l7 source). */
#include "cg.h"

#include <limits.h>
#include <linux/bpf.h>
#include <stdlib.h>
#include <string.h>

void cg_di_init(struct cg *g)
{
	g->di = LLVMCreateDIBuilder(g->mod);
	/* The backend reads source lines from the file the DIFile names: give it an absolute path. */
	char abs[PATH_MAX];
	const char *path = g->p->source_path;
	if (!realpath(path, abs))
		snprintf(abs, sizeof(abs), "%s", path);
	char *slash = strrchr(abs, '/');
	const char *dir = "/", *base = abs;
	if (slash) {
		*slash = 0;
		dir = abs[0] ? abs : "/";
		base = slash + 1;
	}
	g->file = LLVMDIBuilderCreateFile(g->di, base, strlen(base), dir, strlen(dir));
	g->cu = LLVMDIBuilderCreateCompileUnit(g->di, LLVMDWARFSourceLanguageC11, g->file, "l7c", 3, 1, "", 0, 0, "", 0,
					       LLVMDWARFEmissionFull, 0, 0, 0, "", 0, "", 0);
	g->di_int = LLVMDIBuilderCreateBasicType(g->di, "int", 3, 32, 5 /* DW_ATE_signed */, LLVMDIFlagZero);
	g->di_u64 = LLVMDIBuilderCreateBasicType(g->di, "unsigned long long", 18, 64, 7 /* DW_ATE_unsigned */, LLVMDIFlagZero);
	g->di_ptr = LLVMDIBuilderCreatePointerType(g->di, NULL, 64, 0, 0, "", 0);
	g->dbg_kind = LLVMGetMDKindIDInContext(g->ctx, "dbg", 3);
	LLVMAddModuleFlag(g->mod, LLVMModuleFlagBehaviorWarning, "Debug Info Version", 18,
			  LLVMValueAsMetadata(LLVMConstInt(g->i32, LLVMDebugMetadataVersion(), 0)));
	LLVMAddModuleFlag(g->mod, LLVMModuleFlagBehaviorWarning, "CodeView", 8,
			  LLVMValueAsMetadata(LLVMConstInt(g->i32, 1, 0)));
}

/* A DISubprogram with named pointer parameters: the kernel rejects BTF whose function
 * prototypes have unnamed parameters. */
LLVMMetadataRef cg_di_function(struct cg *g, LLVMValueRef fn, const char *name, unsigned line,
			       const char *const *param_names, int nparams)
{
	LLVMMetadataRef types[8] = { g->di_int };
	for (int i = 0; i < nparams; i++)
		types[i + 1] = g->di_ptr;
	LLVMMetadataRef sty = LLVMDIBuilderCreateSubroutineType(g->di, g->file, types, (unsigned)nparams + 1, LLVMDIFlagZero);
	/* local to the unit (BTF_FUNC_STATIC) when the function is: the kernel verifies a global
	 * BPF function on its own, with typed arguments only, and a static one in its caller's
	 * context (the rule chunks of split programs are static subprograms) */
	int local = LLVMGetLinkage(fn) == LLVMInternalLinkage;
	LLVMMetadataRef sp = LLVMDIBuilderCreateFunction(g->di, g->file, name, strlen(name), name, strlen(name), g->file,
							 line, sty, local, 1, line, LLVMDIFlagPrototyped, 1);
	LLVMSetSubprogram(fn, sp);
	for (int i = 0; i < nparams; i++)
		LLVMDIBuilderCreateParameterVariable(g->di, sp, param_names[i], strlen(param_names[i]), (unsigned)i + 1,
						     g->file, line, g->di_ptr, 1, LLVMDIFlagZero);
	return sp;
}

void cg_di_at(struct cg *g, LLVMMetadataRef scope, unsigned line, unsigned col)
{
	LLVMSetCurrentDebugLocation2(g->b, LLVMDIBuilderCreateDebugLocation(g->ctx, line ? line : 1, col, scope, NULL));
}

/* libbpf's BTF map definition: struct { int (*type)[T]; int (*max_entries)[N]; K *key; V *value;
 * [int (*map_flags)[F];] } */
static LLVMMetadataRef int_array_ptr(struct cg *g, unsigned n)
{
	LLVMMetadataRef sub = LLVMDIBuilderGetOrCreateSubrange(g->di, 0, n);
	LLVMMetadataRef arr = LLVMDIBuilderCreateArrayType(g->di, (uint64_t)n * 32, 32, g->di_int, &sub, 1);
	return LLVMDIBuilderCreatePointerType(g->di, arr, 64, 0, 0, "", 0);
}

static LLVMMetadataRef sized_type_ptr(struct cg *g, unsigned size)
{
	LLVMMetadataRef t;
	if (size == 4)
		t = LLVMDIBuilderCreateBasicType(g->di, "unsigned int", 12, 32, 8, LLVMDIFlagZero);
	else if (size == 8)
		t = g->di_u64;
	else {
		LLVMMetadataRef u8 = LLVMDIBuilderCreateBasicType(g->di, "unsigned char", 13, 8, 8, LLVMDIFlagZero);
		LLVMMetadataRef sub = LLVMDIBuilderGetOrCreateSubrange(g->di, 0, size);
		t = LLVMDIBuilderCreateArrayType(g->di, (uint64_t)size * 8, 8, u8, &sub, 1);
	}
	return LLVMDIBuilderCreatePointerType(g->di, t, 64, 0, 0, "", 0);
}

/* An LPM trie's key must be a struct in BTF (the kernel refuses anything else, and libbpf then
 * retries without BTF): struct { unsigned int prefixlen; unsigned char data[size - 4]; }. */
static LLVMMetadataRef lpm_key_ptr(struct cg *g, unsigned size)
{
	LLVMMetadataRef u32 = LLVMDIBuilderCreateBasicType(g->di, "unsigned int", 12, 32, 8, LLVMDIFlagZero);
	LLVMMetadataRef u8 = LLVMDIBuilderCreateBasicType(g->di, "unsigned char", 13, 8, 8, LLVMDIFlagZero);
	LLVMMetadataRef sub = LLVMDIBuilderGetOrCreateSubrange(g->di, 0, size - 4);
	LLVMMetadataRef data = LLVMDIBuilderCreateArrayType(g->di, (uint64_t)(size - 4) * 8, 8, u8, &sub, 1);
	LLVMMetadataRef members[2] = {
		LLVMDIBuilderCreateMemberType(g->di, g->file, "prefixlen", 9, g->file, 0, 32, 32, 0, LLVMDIFlagZero, u32),
		LLVMDIBuilderCreateMemberType(g->di, g->file, "data", 4, g->file, 0, (uint64_t)(size - 4) * 8, 8, 32,
					      LLVMDIFlagZero, data),
	};
	LLVMMetadataRef st = LLVMDIBuilderCreateStructType(g->di, g->file, "l7_lpm_key", 10, g->file, 0,
							   (uint64_t)size * 8, 32, LLVMDIFlagZero, NULL, members, 2, 0,
							   NULL, "", 0);
	return LLVMDIBuilderCreatePointerType(g->di, st, 64, 0, 0, "", 0);
}

void cg_di_map(struct cg *g, LLVMValueRef var, const char *name, unsigned type, unsigned max_entries,
	       unsigned key_size, unsigned value_size, unsigned flags)
{
	struct { const char *n; LLVMMetadataRef t; } m[5] = {
		{ "type", int_array_ptr(g, type) },
		{ "max_entries", int_array_ptr(g, max_entries) },
		{ "key", type == BPF_MAP_TYPE_LPM_TRIE ? lpm_key_ptr(g, key_size) : sized_type_ptr(g, key_size) },
		{ "value", sized_type_ptr(g, value_size) },
		{ "map_flags", flags ? int_array_ptr(g, flags) : NULL },
	};
	unsigned n = flags ? 5 : 4;
	if (type == BPF_MAP_TYPE_RINGBUF)   /* no key or value: libbpf refuses sizes for one */
		n = 2;
	LLVMMetadataRef members[5];
	for (unsigned i = 0; i < n; i++)
		members[i] = LLVMDIBuilderCreateMemberType(g->di, g->file, m[i].n, strlen(m[i].n), g->file, 0, 64, 64,
							   (uint64_t)i * 64, LLVMDIFlagZero, m[i].t);
	LLVMMetadataRef st = LLVMDIBuilderCreateStructType(g->di, g->file, "", 0, g->file, 0, (uint64_t)n * 64, 64,
							   LLVMDIFlagZero, NULL, members, n, 0, NULL, "", 0);
	LLVMMetadataRef expr = LLVMDIBuilderCreateExpression(g->di, NULL, 0);
	LLVMMetadataRef gv = LLVMDIBuilderCreateGlobalVariableExpression(g->di, g->cu, name, strlen(name), name,
									 strlen(name), g->file, 0, st, 0, expr, NULL, 64);
	LLVMGlobalSetMetadata(var, g->dbg_kind, gv);
}
