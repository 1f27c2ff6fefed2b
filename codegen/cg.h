/* Internal to codegen/: the state shared by its steps. */
#ifndef L7_CG_H
#define L7_CG_H

#include <llvm-c/Core.h>
#include <llvm-c/DebugInfo.h>
#include <llvm-c/TargetMachine.h>

#include "codegen.h"
#include "diag.h"
#include "ir.h"

struct cg {
	const struct ir_program *p;
	struct l7_diags *d;                  /* never NULL */
	const struct codegen_split *split;   /* never NULL (all zero: nothing split) */
	LLVMContextRef ctx;
	LLVMModuleRef mod;
	LLVMBuilderRef b;
	LLVMTargetMachineRef tm;
	LLVMTypeRef i1, i8, i16, i32, i64, ptr;
	/* debug info: the .l7 file is the compile unit, so line info points at policy lines */
	LLVMDIBuilderRef di;
	LLVMMetadataRef cu, file;
	LLVMMetadataRef di_int, di_u64, di_ptr;
	unsigned dbg_kind;
	/* load balancing: per upstream, its ring points and slot table (tables.c), made on use */
	LLVMValueRef *lb_tab;
	/* rule chunks of split programs to inline into their decide programs after optimisation
	 * (the others stay subprograms, one copy for the gateway's and the mesh's chain) */
	unsigned char chunk_inline[CODEGEN_MAX_CHUNKS];
	/* globals that must survive optimisation although nothing references them */
	LLVMValueRef *used;
	int nused;
	/* the machinery functions compiled at build time (fixed.c); NULL: none */
	struct cg_fixed *fixed;
};

/* debuginfo.c */
void cg_di_init(struct cg *g);
LLVMMetadataRef cg_di_function(struct cg *g, LLVMValueRef fn, const char *name, unsigned line,
			       const char *const *param_names, int nparams);
void cg_di_at(struct cg *g, LLVMMetadataRef scope, unsigned line, unsigned col);   /* col 0: none */
void cg_di_map(struct cg *g, LLVMValueRef var, const char *name, unsigned type, unsigned max_entries,
	       unsigned key_size, unsigned value_size, unsigned flags);

/* tables.c: header-vector names, mutations, the manifest, license, maps, program wrappers */
int cg_tables(struct cg *g);
void cg_maps(struct cg *g);
void cg_programs(struct cg *g);
void cg_balance_tables(struct cg *g, int upstream, LLVMValueRef *points, LLVMValueRef *slots);
int cg_is_program(const struct cg *g, const char *name);

/* policy.c: l7_policy_decide, and for split programs l7_policy_step and its rule chunks
 * CODEGEN_CHUNK_PREFIX<k> (BPF subprograms when there are several: each is optimised, and
 * verified, on its own) */
void cg_policy(struct cg *g);

/* fixed.c: the machinery functions no policy symbol reaches, compiled at build time. Build
 * time: cg_fixed_before_link, cg_fixed_note_bitcode per bitcode before it is linked, then
 * cg_fixed_plan; per fixed unit, in a module of its own, cg_fixed_unit into the bundle. Compile time: cg_fixed_stub before -O2, cg_fixed_join after the backend. */
void cg_fixed_before_link(struct cg *g);
void cg_fixed_note_bitcode(struct cg *g, LLVMModuleRef lib);
struct cg_fixed_plan;
int cg_fixed_plan(struct cg *g, struct cg_fixed_plan **out);
int cg_fixed_plan_units(const struct cg_fixed_plan *pl);
int cg_fixed_open(struct cg_fixed_plan *pl, const char *path);
int cg_fixed_unit(struct cg *g, struct cg_fixed_plan *pl, int k);
int cg_fixed_close(struct cg_fixed_plan *pl, const char *path, int rc);
int cg_fixed_stub(struct cg *g, const unsigned char *bundle, size_t size);
int cg_fixed_join(struct cg *g, char **obj, size_t *n);
void cg_fixed_free(struct cg *g);

/* module.c: g->mod through -O2; through the backend into an object (malloc'd) */
int cg_optimise(struct cg *g);
int cg_backend_object(struct cg *g, char **obj, size_t *n);

/* helpers */
LLVMValueRef cg_const_global(struct cg *g, const char *name, LLVMValueRef init, int internal);
LLVMValueRef cg_string(struct cg *g, const char *s, size_t n);
void cg_keep(struct cg *g, LLVMValueRef v);

#endif
