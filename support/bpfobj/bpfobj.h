/* The parts of a BPF ELF object (as l7c emits it) that the budget model reads: functions and
 * their instructions, the symbols instructions refer to (relocations), and line info
 * (.BTF.ext). Reading the object instead of assembly text lets one backend run serve both. */
#ifndef L7_BPFOBJ_H
#define L7_BPFOBJ_H

#include <linux/bpf.h>
#include <stddef.h>

struct bpfobj_fn {
	char name[64], section[64];
	const struct bpf_insn *insns;   /* into the object's bytes */
	int n;                          /* instruction slots */
	int sec;                        /* ELF section index */
	unsigned long off;              /* byte offset in the section */
};

struct bpfobj {
	struct bpfobj_fn *fns;          /* in section, then address order */
	int nfns;
	void *priv;
};

/* Returns 0, or -1 if the bytes are not a BPF object libelf can read. */
int bpfobj_open(struct bpfobj *o, const char *data, size_t len);
void bpfobj_close(struct bpfobj *o);

/* The symbol the instruction at slot i of f refers to through a relocation (a map, a
 * callback's address, a called subprogram), or NULL. */
const char *bpfobj_reloc(const struct bpfobj *o, const struct bpfobj_fn *f, int i);
/* Whether a relocation fills instruction i of f (named or not: a datum in .rodata is not). */
int bpfobj_relocated(const struct bpfobj *o, const struct bpfobj_fn *f, int i);

/* The source line of slot i of f (line info, 0 if none) and its file's base name. */
unsigned bpfobj_line(const struct bpfobj *o, const struct bpfobj_fn *f, int i, const char **file);

/* The same with the file's path as the object names it and the column (0 if none). */
unsigned bpfobj_loc(const struct bpfobj *o, const struct bpfobj_fn *f, int i, const char **path, unsigned *col);

#endif
