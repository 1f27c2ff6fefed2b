/* codegen: Parse-Match-Action IR -> LLVM IR (through the LLVM C API) -> BPF ELF object.
 *
 *   1. tables      header names the parser extracts, header mutations, l7.config, license
 *   2. maps        BTF-defined maps of l7/maps.def
 *   3. policy      l7_policy_decide(): the rules as control flow, with .l7 line info
 *   4. programs    one wrapper per entry of l7/progs.def, calling the machinery
 *   5. link        the stdlib bitcode (machinery + comparisons), internalise, inline
 *   6. optimise    LLVM's -O1/-O2 pipeline for BPF CPU v3
 *   7. emit        LLVM IR text, BPF assembly or the ELF object
 */
#ifndef L7_CODEGEN_H
#define L7_CODEGEN_H

#include <stddef.h>

struct ir_program;

enum codegen_output { CG_EMIT_LLVM, CG_EMIT_ASM, CG_EMIT_OBJ };

struct codegen_opts {
	int opt_level;              /* 1 or 2 */
	enum codegen_output output;
	const char *out_path;       /* "-" for stdout; NULL: into *out_buf (malloc'd), *out_len */
	char **out_buf;
	size_t *out_len;
};

/* Returns 0 on success; on failure prints "l7c: error: ..." to stderr and returns -1. */
int codegen_emit(const struct ir_program *p, const struct codegen_opts *o);

#endif
