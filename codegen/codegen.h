/* codegen: Parse-Match-Action IR -> LLVM IR (through the LLVM C API) -> BPF ELF object.
 *
 *   1. tables      header names the parser extracts, header mutations, the manifest, license
 *   2. maps        BTF-defined maps of l7/maps.def
 *   3. policy      l7_policy_decide(): the rules as control flow, with .l7 line info
 *   4. programs    one wrapper per entry of l7/progs.def, calling the machinery (and, for a
 *                  split host program, one per decide program of its tail-call chain)
 *   5. link        the stdlib bitcode (machinery + comparisons), internalise, inline; the
 *                  machinery functions no policy symbol reaches become declarations (fixed.c)
 *   6. optimise    LLVM's -O1/-O2 pipeline for BPF CPU v3
 *   7. emit        LLVM IR text, BPF assembly or the ELF object, joined to the fixed
 *                  functions' objects (compiled at build time) by libbpf's static linker
 */
#ifndef L7_CODEGEN_H
#define L7_CODEGEN_H

#include <stddef.h>

struct ir_program;
struct l7_diags;
struct l7_timers;

enum codegen_output { CG_EMIT_LLVM, CG_EMIT_ASM, CG_EMIT_OBJ };

#define CODEGEN_MAX_CHUNKS 33   /* decide programs one chain holds (l7/abi.h L7_MAX_TAILS) */

/* The loop form of a compare with a constant, chosen by its verifier cost: up to unroll_max
 * bytes it is unrolled (fastest, ~5 instructions a byte on every verifier path through the
 * rule), longer it is one bpf_strncmp call (~30, whatever the length). split.c lowers the
 * line to CODEGEN_UNROLL_COMPACT before it splits a program. */
#define CODEGEN_UNROLL_MAX     64
#define CODEGEN_UNROLL_COMPACT 8

/* How the programs that hold the policy are split (driver/split.c decides it from the verifier
 * budget model; docs/architecture.md). A split host ends its parse half with a tail call into
 * a chain of decide programs; decide program k runs rule chunk k. */
/* The function of rule chunk k: "<prefix>k" (a static subprogram, or inlined into its decide
 * programs when it checks a JWT). */
#define CODEGEN_CHUNK_PREFIX "l7_policy_chunk_"

/* Which mode's programs an object holds (l7c --mode): both (the default: one object for
 * `l7run` and `l7run --mesh`), or one mode's, which compiles in about half the time (each
 * mode's programs inline their own copy of the machinery) for a node agent that knows its
 * mode. A mode's programs are the same instructions in both objects when the plan is. */
enum codegen_mode { CG_MODE_BOTH, CG_MODE_GATEWAY, CG_MODE_MESH };

struct codegen_split {
	enum codegen_mode mode;    /* the programs the object holds */
	int unroll_max;            /* compares with longer constants call bpf_strncmp (0: the default,
	                            * CODEGEN_UNROLL_MAX) */
	int gw, mesh;              /* split the gateway client parser / the mesh SK_MSG program */
	int nchunks;               /* rule chunks = decide programs per chain (1: the whole policy) */
	int chunk_first[CODEGEN_MAX_CHUNKS];   /* first rule of each chunk, as an index into the
	                                        * rules of all policies in file order */
};

struct codegen_opts {
	int opt_level;              /* 1 or 2 */
	enum codegen_output output;
	const char *out_path;       /* "-" for stdout; NULL: into *out_buf (malloc'd), *out_len */
	char **out_buf;
	size_t *out_len;
	const struct codegen_split *split;   /* NULL: nothing split */
	struct l7_diags *diags;     /* errors in the policy, at its .l7 lines (NULL: to stderr) */
	struct l7_timers *timers;   /* NULL: not timed (l7c --time) */
	/* the machinery functions no policy symbol reaches (codegen/fixed.c): NULL, or the bundle
	 * made at build time (l7c embeds it), joined to the object instead of compiled again; used
	 * for objects at -O2 only, the other outputs run the full pipeline */
	const unsigned char *fixed;
	size_t fixed_size;
	/* build time: write the bundle of fixed functions to this path instead of an object */
	const char *fixed_out;
};

/* Returns 0 on success; on failure says why (a policy past the data plane's tables through
 * o->diags, at its .l7 line; anything else "l7c: error: ..." on stderr) and returns -1. */
int codegen_emit(const struct ir_program *p, const struct codegen_opts *o);

struct ir_rule;
/* An upper estimate of the BPF instructions rule r becomes (its tests, actions and decision),
 * so that rule chunks can be cut before anything is compiled: a function far over the 32K-insn
 * reach of a CPU v3 jump cannot be emitted at all. */
int codegen_rule_size(const struct ir_program *p, const struct ir_rule *r, int unroll_max);

#endif
