/* codegen_emit: the order of codegen's steps, and the LLVM plumbing around them. */
#include "cg.h"

#include <llvm-c/Analysis.h>
#include <llvm-c/BitReader.h>
#include <llvm-c/ErrorHandling.h>
#include <llvm-c/Linker.h>
#include <llvm-c/Target.h>
#include <llvm-c/Transforms/PassBuilder.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "l7/manifest.h"
#include "timers.h"

/* The stdlib bitcode, embedded at build time (stdlib/CMakeLists.txt). */
extern const unsigned char l7_dataplane_bc[], l7_policy_bc[];
extern const size_t l7_dataplane_bc_size, l7_policy_bc_size;

static int backend_failed;

/* Without a handler, a backend error calls exit(1) mid-emit and leaves an empty object. */
static void on_diagnostic(LLVMDiagnosticInfoRef info, void *ctx)
{
	(void)ctx;
	LLVMDiagnosticSeverity sev = LLVMGetDiagInfoSeverity(info);
	if (sev != LLVMDSError && sev != LLVMDSWarning)
		return;
	char *msg = LLVMGetDiagInfoDescription(info);
	static char last[512];   /* the backend repeats a message per instruction it hits: say it once */
	if (strncmp(last, msg, sizeof(last) - 1)) {
		fprintf(stderr, "l7c: %s: LLVM: %s\n", sev == LLVMDSError ? "error" : "warning", msg);
		snprintf(last, sizeof(last), "%s", msg);
	}
	LLVMDisposeMessage(msg);
	if (sev == LLVMDSError)
		backend_failed = 1;
}

/* Some backend errors are fatal (a jump past its 16-bit reach: "Branch target out of insn
 * range") and would abort; say what happened and exit as a failed compile instead. Nothing has
 * been written: objects are emitted into memory first. */
static void on_fatal(const char *reason)
{
	fprintf(stderr, "l7c: error: the BPF backend failed: %s%s\n", reason,
		strstr(reason, "insn range") ? " (a function past the 32K instructions a jump reaches: l7c's size "
					       "estimate of its rules fell short; --explain on fewer rules shows their sizes)"
					     : "");
	exit(2);
}

static int target_init(struct cg *g, int opt)
{
	LLVMInitializeBPFTargetInfo();
	LLVMInitializeBPFTarget();
	LLVMInitializeBPFTargetMC();
	LLVMInitializeBPFAsmPrinter();
	LLVMTargetRef t;
	char *err = NULL;
	if (LLVMGetTargetFromTriple("bpf", &t, &err)) {
		fprintf(stderr, "l7c: error: BPF target unavailable: %s\n", err);
		LLVMDisposeMessage(err);
		return -1;
	}
	g->tm = LLVMCreateTargetMachine(t, "bpf", "v3", "", opt >= 2 ? LLVMCodeGenLevelDefault : LLVMCodeGenLevelLess,
					LLVMRelocDefault, LLVMCodeModelDefault);
	LLVMSetTarget(g->mod, "bpf");
	LLVMTargetDataRef dl = LLVMCreateTargetDataLayout(g->tm);
	char *s = LLVMCopyStringRepOfTargetData(dl);
	LLVMSetDataLayout(g->mod, s);
	LLVMDisposeMessage(s);
	LLVMDisposeTargetData(dl);
	return 0;
}

/* Drops the debug records of local variables (llvm.dbg.value/declare/assign): BTF has no place
 * for them, and LLVM carried ~8,600 of them through every pass and the backend of every
 * compile (10% of its time). Types, subprograms and line locations stay: .BTF and .BTF.ext are
 * made of them, and the objects are byte for byte the same. In the intrinsic form of debug
 * info the records are calls, erased like any other instruction. */
static void strip_variables(LLVMModuleRef m)
{
	LLVMSetIsNewDbgInfoFormat(m, 0);
	for (LLVMValueRef f = LLVMGetFirstFunction(m); f; f = LLVMGetNextFunction(f))
		for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(f); bb; bb = LLVMGetNextBasicBlock(bb))
			for (LLVMValueRef i = LLVMGetFirstInstruction(bb), next; i; i = next) {
				next = LLVMGetNextInstruction(i);
				LLVMValueRef callee = LLVMIsACallInst(i) ? LLVMGetCalledValue(i) : NULL;
				size_t len;
				const char *name = callee ? LLVMGetValueName2(callee, &len) : NULL;
				if (name && len > 9 && !strncmp(name, "llvm.dbg.", 9))
					LLVMInstructionEraseFromParent(i);
			}
	LLVMSetIsNewDbgInfoFormat(m, 1);
}

/* Links one embedded bitcode module into ours, with its debug info (less its variables):
 * bpf_loop callbacks stay functions, and BTF needs their prototypes. */
static int link_bitcode(struct cg *g, const char *name, const unsigned char *bc, size_t size)
{
	LLVMMemoryBufferRef buf = LLVMCreateMemoryBufferWithMemoryRange((const char *)bc, size, name, 0);
	LLVMModuleRef lib;
	if (LLVMParseBitcodeInContext2(g->ctx, buf, &lib)) {
		fprintf(stderr, "l7c: error: embedded bitcode '%s' is unreadable\n", name);
		return -1;
	}
	strip_variables(lib);
	if (g->fixed)
		cg_fixed_note_bitcode(g, lib);
	LLVMSetDataLayout(lib, LLVMGetDataLayoutStr(g->mod));
	if (LLVMLinkModules2(g->mod, lib)) {
		fprintf(stderr, "l7c: error: linking '%s' failed\n", name);
		return -1;
	}
	return 0;
}

/* Only programs, maps, the license and the manifest stay global; the machinery, the policy and
 * the tables become internal so they inline and fold (a global function would be verified by
 * the kernel on its own, and rejected for its packet-pointer arguments). The exception is the
 * machinery's own l7g_* functions, whose arguments are the context and map memory: verified
 * once instead of once per path that reaches them (mutate.h). JWT verification is two of them
 * (jwt.h: l7g_jwt_hot, l7g_jwt_cold, called in turn; as one, its frame pushed the mesh SK_MSG
 * program past the 512-byte combined stack). */
static int internalise(struct cg *g)
{
	int missing = 0;
	for (LLVMValueRef f = LLVMGetFirstFunction(g->mod); f; f = LLVMGetNextFunction(f)) {
		const char *name = LLVMGetValueName(f);
		if (LLVMIsDeclaration(f)) {
			if (LLVMGetIntrinsicID(f) == 0 && strncmp(name, "llvm.", 5) != 0) {
				fprintf(stderr, "l7c: error: '%s' is used but the stdlib does not define it\n", name);
				missing++;
			}
			continue;
		}
		if (cg_is_program(g, name))
			continue;
		if (!strncmp(name, "l7g_", 4))
			continue;   /* a global function of the machinery: verified once by the kernel */
		LLVMSetLinkage(f, LLVMInternalLinkage);
		unsigned kind = LLVMGetEnumAttributeKindForName("alwaysinline", 12);
		unsigned noinline = LLVMGetEnumAttributeKindForName("noinline", 8);
		if (g->split->nchunks > 1 && !strncmp(name, CODEGEN_CHUNK_PREFIX, strlen(CODEGEN_CHUNK_PREFIX))) {
			/* rule chunks of a decide chain are optimised on their own (compile time grows
			 * faster than a function's size); see inline_chunks */
			LLVMAddAttributeAtIndex(f, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(g->ctx, noinline, 0));
			continue;
		}
		LLVMRemoveEnumAttributeAtIndex(f, LLVMAttributeFunctionIndex, noinline);
		LLVMAddAttributeAtIndex(f, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(g->ctx, kind, 0));
	}
	for (LLVMValueRef v = LLVMGetFirstGlobal(g->mod); v; v = LLVMGetNextGlobal(v)) {
		const char *sec = LLVMGetSection(v);
		/* llvm.<type>:<access> globals are CO-RE relocations (preserve_access_index in
		 * stdlib/bpf): the BPF backend turns them into .BTF.ext records, libbpf patches them */
		if (LLVMIsDeclaration(v) && strncmp(LLVMGetValueName(v), "llvm.", 5) != 0) {
			fprintf(stderr, "l7c: error: global '%s' is used but nothing defines it\n", LLVMGetValueName(v));
			missing++;
			continue;
		}
		/* the license and the manifest are found by their sections, and stay local: libbpf's
		 * static linker wants BTF for every global symbol (fixed.c) */
		if (sec && !strcmp(sec, ".maps"))
			continue;
		if (!strncmp(LLVMGetValueName(v), "llvm.", 5))
			continue;
		LLVMSetLinkage(v, LLVMInternalLinkage);
	}
	return missing ? -1 : 0;
}

/* llvm.compiler.used, not llvm.used: the latter marks sections SHF_GNU_RETAIN, which splits
 * .maps into one section per map and libbpf then sees only one of them. */
/* Code inlined from the comparisons (stdlib/bpf/policy.c) reports the .l7 line that called
 * it, not policy.c's own lines: a reader following a policy line to its instructions sees all
 * of them. The machinery keeps its lines (they are what one debugs there). */
static void attribute_comparisons_to_policy(struct cg *g)
{
	for (LLVMValueRef f = LLVMGetFirstFunction(g->mod); f; f = LLVMGetNextFunction(f))
		for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(f); bb; bb = LLVMGetNextBasicBlock(bb))
			for (LLVMValueRef i = LLVMGetFirstInstruction(bb); i; i = LLVMGetNextInstruction(i)) {
				LLVMMetadataRef loc = LLVMInstructionGetDebugLoc(i);
				if (!loc)
					continue;
				unsigned n;
				const char *file = LLVMDIFileGetFilename(LLVMDIScopeGetFile(LLVMDILocationGetScope(loc)), &n);
				if (n < 8 || strncmp(file + n - 8, "policy.c", 8) || (n > 8 && file[n - 9] != '/'))
					continue;
				for (LLVMMetadataRef at = LLVMDILocationGetInlinedAt(loc); at; at = LLVMDILocationGetInlinedAt(at))
					if (LLVMDIScopeGetFile(LLVMDILocationGetScope(at)) == g->file) {
						LLVMInstructionSetDebugLoc(i, at);
						break;
					}
			}
}

static void add_used(struct cg *g)
{
	LLVMTypeRef aty = LLVMArrayType2(g->ptr, (uint64_t)g->nused);
	LLVMValueRef used = LLVMAddGlobal(g->mod, aty, "llvm.compiler.used");
	LLVMSetInitializer(used, LLVMConstArray2(g->ptr, g->used, (uint64_t)g->nused));
	LLVMSetLinkage(used, LLVMAppendingLinkage);
	LLVMSetSection(used, "llvm.metadata");
}

/* Runs an LLVM pass pipeline over the module; `what` names it in the error. BPF has no vector
 * registers: the vectorisers find nothing to do, and looking took 5% of -O2's time (the
 * objects are byte for byte the same without them). */
static int run_passes(struct cg *g, const char *pipeline, const char *what)
{
	LLVMPassBuilderOptionsRef o = LLVMCreatePassBuilderOptions();
	LLVMPassBuilderOptionsSetLoopVectorization(o, 0);
	LLVMPassBuilderOptionsSetSLPVectorization(o, 0);
	LLVMErrorRef err = LLVMRunPasses(g->mod, pipeline, g->tm, o);
	LLVMDisposePassBuilderOptions(o);
	if (err) {
		char *m = LLVMGetErrorMessage(err);
		fprintf(stderr, "l7c: error: %s failed: %s\n", what, m);
		LLVMDisposeErrorMessage(m);
		return -1;
	}
	return 0;
}

/* An object of one mode (--mode) drops the other mode's machinery before it is optimised: its
 * entry points went internal with nothing calling them (globaldce), and so did the global
 * l7g_* functions only they called, which internalise keeps global (deleted here, until none
 * is left unused). */
static int drop_other_mode(struct cg *g)
{
	if (g->split->mode == CG_MODE_BOTH)
		return 0;
	if (run_passes(g, "globaldce", "dropping the other mode's programs"))
		return -1;
	for (int dropped = 1; dropped;) {
		dropped = 0;
		for (LLVMValueRef f = LLVMGetFirstFunction(g->mod), next; f; f = next) {
			next = LLVMGetNextFunction(f);
			if (!LLVMIsDeclaration(f) && !LLVMGetFirstUse(f) && !strncmp(LLVMGetValueName(f), "l7g_", 4)) {
				LLVMDeleteFunction(f);
				dropped = 1;
			}
		}
	}
	return run_passes(g, "globaldce", "dropping the other mode's programs");
}

/* Every function nounwind, as clang makes BPF functions: without it the backend writes an
 * .eh_frame (with relocations libbpf's static linker refuses) that nothing reads. */
static void mark_nounwind(struct cg *g)
{
	unsigned kind = LLVMGetEnumAttributeKindForName("nounwind", 8);
	for (LLVMValueRef f = LLVMGetFirstFunction(g->mod); f; f = LLVMGetNextFunction(f))
		if (!LLVMIsDeclaration(f))
			LLVMAddAttributeAtIndex(f, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(g->ctx, kind, 0));
}

static int optimise(struct cg *g, int level)
{
	mark_nounwind(g);
	return run_passes(g, level >= 2 ? "default<O2>" : "default<O1>", "optimisation");
}

/* After optimisation: each decide program calls its rule chunk, optimised on its own. A chunk
 * that checks a JWT is inlined there now: as a BPF subprogram its frame would add to the
 * decide program's and JWT's callbacks', past the 512-byte combined stack (inlined, the backend
 * shares stack slots of disjoint lifetimes). The others stay static subprograms: one copy
 * serves both chains, which halves the backend's work for large rule sets. */
static int inline_chunks(struct cg *g)
{
	if (g->split->nchunks <= 1)
		return 0;
	unsigned noinline = LLVMGetEnumAttributeKindForName("noinline", 8);
	unsigned always = LLVMGetEnumAttributeKindForName("alwaysinline", 12);
	size_t np = strlen(CODEGEN_CHUNK_PREFIX);
	int any = 0;
	for (LLVMValueRef f = LLVMGetFirstFunction(g->mod); f; f = LLVMGetNextFunction(f)) {
		const char *name = LLVMGetValueName(f);
		int k = atoi(name + np);
		if (strncmp(name, CODEGEN_CHUNK_PREFIX, np) || k < 0 || k >= CODEGEN_MAX_CHUNKS || !g->chunk_inline[k])
			continue;
		LLVMRemoveEnumAttributeAtIndex(f, LLVMAttributeFunctionIndex, noinline);
		LLVMAddAttributeAtIndex(f, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(g->ctx, always, 0));
		any = 1;
	}
	return any ? run_passes(g, "always-inline,globaldce", "inlining rule chunks") : 0;
}

static int write_out(const struct codegen_opts *o, const char *data, size_t n)
{
	const char *path = o->out_path;
	if (!path) {
		*o->out_buf = malloc(n + 1);
		memcpy(*o->out_buf, data, n);
		(*o->out_buf)[n] = 0;
		*o->out_len = n;
		return 0;
	}
	FILE *f = strcmp(path, "-") ? fopen(path, "wb") : stdout;
	if (!f) {
		fprintf(stderr, "l7c: error: cannot write '%s'\n", path);
		return -1;
	}
	size_t w = fwrite(data, 1, n, f);
	int rc = (f == stdout ? fflush(f) : fclose(f)) || w != n ? -1 : 0;
	if (rc)
		fprintf(stderr, "l7c: error: writing '%s' failed\n", path);
	return rc;
}

static int backend(struct cg *g, LLVMCodeGenFileType type, char **out, size_t *n)
{
	LLVMMemoryBufferRef buf;
	char *err = NULL;
	backend_failed = 0;
	LLVMInstallFatalErrorHandler(on_fatal);
	int failed = LLVMTargetMachineEmitToMemoryBuffer(g->tm, g->mod, type, &err, &buf);
	LLVMResetFatalErrorHandler();
	if (failed || backend_failed) {
		fprintf(stderr, "l7c: error: BPF code generation failed%s%s\n", err ? ": " : "", err ? err : "");
		LLVMDisposeMessage(err);
		return -1;
	}
	*n = LLVMGetBufferSize(buf);
	*out = malloc(*n + 1);
	memcpy(*out, LLVMGetBufferStart(buf), *n);
	LLVMDisposeMemoryBuffer(buf);
	return 0;
}

int cg_optimise(struct cg *g)
{
	return optimise(g, 2);
}

int cg_backend_object(struct cg *g, char **obj, size_t *n)
{
	return backend(g, LLVMObjectFile, obj, n);
}

static int emit(struct cg *g, const struct codegen_opts *o)
{
	if (o->output == CG_EMIT_LLVM) {
		char *s = LLVMPrintModuleToString(g->mod);
		int rc = write_out(o, s, strlen(s));
		LLVMDisposeMessage(s);
		return rc;
	}
	char *out;
	size_t n;
	if (backend(g, o->output == CG_EMIT_ASM ? LLVMAssemblyFile : LLVMObjectFile, &out, &n) ||
	    (g->fixed && cg_fixed_join(g, &out, &n)))
		return -1;
	int rc = write_out(o, out, n);
	free(out);
	return rc;
}

/* Build time (o->fixed_out): what to do with the linked module instead of compiling it. */
struct fixed_job {
	struct cg_fixed_plan *plan;
	int unit;   /* -1: make the plan */
};

static int build(const struct ir_program *p, const struct codegen_opts *o, struct fixed_job *job)
{
	static const struct codegen_split none = { 0 };
	struct l7_diags to_stderr = { .out = stderr };
	struct cg g = { .p = p, .split = o->split ? o->split : &none, .d = o->diags ? o->diags : &to_stderr };
	if ((g.split->gw || g.split->mesh) && (g.split->nchunks < 1 || g.split->nchunks > CODEGEN_MAX_CHUNKS ||
					       (g.split->nchunks > 1 && (!g.split->gw || !g.split->mesh)))) {
		fprintf(stderr, "l7c: internal error: split plan with %d chunks\n", g.split->nchunks);
		return -1;
	}
	int rc = -1;
	struct l7_tick t = l7_tick();
	g.ctx = LLVMContextCreate();
	LLVMContextSetDiagnosticHandler(g.ctx, on_diagnostic, NULL);
	g.mod = LLVMModuleCreateWithNameInContext(p->source_path, g.ctx);
	g.b = LLVMCreateBuilderInContext(g.ctx);
	g.i1 = LLVMInt1TypeInContext(g.ctx);
	g.i8 = LLVMInt8TypeInContext(g.ctx);
	g.i16 = LLVMInt16TypeInContext(g.ctx);
	g.i32 = LLVMInt32TypeInContext(g.ctx);
	g.i64 = LLVMInt64TypeInContext(g.ctx);
	g.ptr = LLVMPointerTypeInContext(g.ctx, 0);
	if (target_init(&g, o->opt_level))
		goto out;
	cg_di_init(&g);

	if (cg_tables(&g))
		goto out;
	cg_maps(&g);
	cg_policy(&g);
	cg_programs(&g);
	LLVMDIBuilderFinalize(g.di);
	t = l7_timers_add(o->timers, L7_T_CODEGEN, t);

	if (job && job->unit < 0)
		cg_fixed_before_link(&g);
	if (link_bitcode(&g, "policy.bc", l7_policy_bc, l7_policy_bc_size) ||
	    link_bitcode(&g, "dataplane.bc", l7_dataplane_bc, l7_dataplane_bc_size))
		goto out;
	if (job) {
		rc = job->unit < 0 ? cg_fixed_plan(&g, &job->plan) : cg_fixed_unit(&g, job->plan, job->unit);
		goto out;
	}
	if (internalise(&g))
		goto out;
	add_used(&g);

	char *msg = NULL;
	if (LLVMVerifyModule(g.mod, LLVMReturnStatusAction, &msg)) {
		fprintf(stderr, "l7c: internal error: generated module is invalid:\n%s\n", msg);
		LLVMDisposeMessage(msg);
		goto out;
	}
	LLVMDisposeMessage(msg);
	t = l7_timers_add(o->timers, L7_T_LINK, t);
	if (drop_other_mode(&g))
		goto out;
	if (o->fixed && o->output == CG_EMIT_OBJ && o->opt_level >= 2 &&
	    (cg_fixed_stub(&g, o->fixed, o->fixed_size) || run_passes(&g, "globaldce", "dropping the fixed functions")))
		goto out;
	if (optimise(&g, o->opt_level) || inline_chunks(&g))
		goto out;
	attribute_comparisons_to_policy(&g);
	t = l7_timers_add(o->timers, L7_T_OPTIMISE, t);
	if (emit(&g, o))
		goto out;
	l7_timers_add(o->timers, L7_T_EMIT, t);
	rc = 0;
out:
	cg_fixed_free(&g);
	free(g.used);
	free(g.lb_tab);
	if (g.di)
		LLVMDisposeDIBuilder(g.di);
	LLVMDisposeBuilder(g.b);
	LLVMDisposeModule(g.mod);
	if (g.tm)
		LLVMDisposeTargetMachine(g.tm);
	LLVMContextDispose(g.ctx);
	return rc;
}

/* The bundle of fixed functions (fixed.c): the plan from one linked module, then each unit in
 * a module of its own. */
static int fixed_bundle(const struct ir_program *p, const struct codegen_opts *o)
{
	struct fixed_job job = { .unit = -1 };
	if (build(p, o, &job))
		return -1;
	int rc = cg_fixed_open(job.plan, o->fixed_out);
	for (int k = 0; !rc && k < cg_fixed_plan_units(job.plan); k++) {
		job.unit = k;
		rc = build(p, o, &job);
	}
	return cg_fixed_close(job.plan, o->fixed_out, rc);
}

int codegen_emit(const struct ir_program *p, const struct codegen_opts *o)
{
	return o->fixed_out ? fixed_bundle(p, o) : build(p, o, NULL);
}
