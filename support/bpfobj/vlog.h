/* A program the kernel refused, explained from its verifier log: the failing instruction mapped
 * through the object's line info to the .l7 line (policy code) or the machinery's C function and
 * file:line, the verifier's reason in one sentence (vmsg.def), and the full log in a file.
 * One explanation for `l7c --explain --verify` (driver/verify.c) and for l7run's load (runtime/load.c). */
#ifndef L7_VLOG_H
#define L7_VLOG_H

#include <stddef.h>
#include <stdio.h>

struct vlog_where {
	char file[256];               /* as the object's line info names it; "" if unknown */
	unsigned line, col;           /* col 0: unknown */
	char func[64];                /* the C function holding the line (read from the source,
	                               * when it is there), else "" */
	char bpf_func[64];            /* the BPF function (program, callback, subprogram) */
	char text[256];               /* the line itself, when the file is there */
};

struct vlog_explained {
	char error[256];              /* the log's error line, verbatim */
	const char *cause, *hint;     /* vmsg.def's sentence and advice; cause NULL: not in the table */
	char insn[160];               /* the failing instruction as the log prints it ("" if none) */
	long insn_idx;                /* its index in the loaded program, -1 if none */
	struct vlog_where at;         /* where the failing instruction comes from */
	struct vlog_where policy;     /* the last .l7 line on the failing path (file "" if none) */
	char chain[256];              /* a stack refusal: the deepest call chain and its frames */
	long processed;               /* the verifier's count, -1 if the log does not say */
	char log_path[512];           /* the full log ("" if it could not be written) */
};

/* Explains log (the verifier's, level 1 or 2) of program prog of the BPF object obj (len bytes,
 * as it was given to libbpf). Always fills x (an empty log: error says so). */
void vlog_explain(const char *log, const void *obj, size_t len, const char *prog, struct vlog_explained *x);

/* Writes log to DIR/STEM-PROG.verifier.log (dir NULL or not there: $TMPDIR, else /tmp) and its path into
 * x->log_path; returns 0, or -1 (log_path empty). */
int vlog_write(const char *log, const char *dir, const char *stem, const char *prog, struct vlog_explained *x);

/* The clang-style diagnostic: "FILE:LINE:COL: error: the kernel refused program PROG: CAUSE",
 * then notes (the machinery function, the hint, the verifier's own words, the log's path). */
void vlog_print(FILE *out, const struct vlog_explained *x, const char *prog);

/* The same in one line (l7run's error), into buf. */
void vlog_line(char *buf, size_t n, const struct vlog_explained *x, const char *prog);

#endif
