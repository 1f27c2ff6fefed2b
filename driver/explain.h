/* l7c --explain: the verifier budget of each program and where each rule landed. */
#ifndef L7_EXPLAIN_H
#define L7_EXPLAIN_H

struct ir_program;

enum explain_format { EXPLAIN_TEXT, EXPLAIN_JSON, EXPLAIN_HTML };

struct explain_opts {
	int opt_level;
	enum explain_format format;
	int verify;          /* load into the kernel for the verifier's real numbers */
	long budget;         /* processed-instruction budget per program */
	int split;           /* enum split_mode (split.h) */
	const char *out_path;   /* also write the object explained there (NULL: don't) */
};

/* Prints the report to stdout. Returns 0; 1 when the policy cannot fit the chain of tail calls;
 * 2 when code generation failed. */
int explain(const struct ir_program *p, const struct explain_opts *o);

#endif
