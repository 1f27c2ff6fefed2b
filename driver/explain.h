/* l7c --explain: the verifier budget of each program, where each rule landed and, with
 * --verify, what the running kernel says when the object is loaded and attached. */
#ifndef L7_EXPLAIN_H
#define L7_EXPLAIN_H

struct ir_program;
struct l7_timers;

enum explain_format { EXPLAIN_TEXT, EXPLAIN_JSON, EXPLAIN_HTML };

struct explain_opts {
	int opt_level;
	enum explain_format format;
	int verify;              /* load and attach in the kernel, for its numbers and its verdicts */
	const char *cgroup_root; /* --verify: where to make the child cgroup for sock_ops (NULL: the
	                          * cgroup2 mount) */
	long budget;             /* processed-instruction budget per program */
	int split;               /* enum split_mode (split.h) */
	const char *out_path;    /* also write the object explained there (NULL: don't) */
	struct l7_timers *timers;   /* NULL: not timed (l7c --time) */
	int full_machinery;      /* l7c --machinery=full (split_build) */
};

/* Prints the report to stdout. Returns 0; 1 when the policy cannot fit the kernel's limits or
 * the kernel refused to load or attach a program (--verify; then out_path is not written, and
 * an older file there is removed); 2 when code generation failed or --verify could not run. */
int explain(const struct ir_program *p, const struct explain_opts *o);

#endif
