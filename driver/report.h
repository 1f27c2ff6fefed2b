/* The l7c --explain report: one model, filled once (explain.c from the object's budget model
 * and the IR; verify.c from the kernel, with --verify) and rendered three ways (text, JSON,
 * HTML: explain.c), so that the formats cannot say different things. */
#ifndef L7_REPORT_H
#define L7_REPORT_H

#include <stdbool.h>

#include "budget.h"
#include "split.h"
#include "bpfobj/vlog.h"

struct ir_program;
struct ir_rule;

enum rp_kind { RP_PROGRAM, RP_CHUNK, RP_GLOBAL, RP_CALLBACK };
enum rp_verdict { RP_UNVERIFIED, RP_ACCEPTED, RP_REJECTED };

struct rp_prog {                  /* a function of the object */
	const struct budget_func *f;
	enum rp_kind kind;
	const char *where;            /* its ELF section, or what kind of subprogram it is */
	int tails;                    /* the tail calls it takes to reach it (0: a host) */
	long used;                    /* processed, else the estimate; -1 for a subprogram */
	double budget_pct;            /* used, of the budget */
	/* --verify */
	long processed;               /* the verifier's count, -1 if not loaded on its own */
	double verify_ms;
	enum rp_verdict verdict;
	char reason[160];             /* rejected: the verifier's error line and where (.l7 line) */
	struct vlog_explained *why;   /* rejected: where and why, explained (NULL: no log) */
	const char *attach_as;        /* how l7run attaches it (NULL: it is not attached) */
	char attach_to[96];           /* the map, or the cgroup */
	int attach_errno;             /* 0 attached; the kernel's errno; -1 not tried */
	char attach_why[200];         /* refused: what that errno means here */
};

struct rp_rule {
	const struct ir_rule *r;
	const char *policy;
	char program[256];            /* the program(s) its code runs in, or "(folded away)" */
	int insns;                    /* instructions of its .l7 lines */
	double share;                 /* of its program's instructions, % */
	char decision[96];            /* "forward web", "deny 403", "fallback proxy", "allow", ... */
	bool mutates;                 /* has header mutations */
	bool audit;                   /* audits a deny it does not enforce (Audit(request)) */
	int table, table_rules;       /* the rule table it stands for (-1) and the rules it holds */
};

struct rp_limit {                 /* a kernel limit (limits.def) and the object's worst against it */
	const char *id, *unit, *what, *kernel;
	long limit, worst;
	const char *program;          /* where the worst is */
};

#define RP_MAX_NOTES 16

struct report {
	const struct ir_program *p;
	struct split_build sb;        /* the object as l7c builds it, and its budget model */
	long budget;
	bool verified;                /* --verify ran (loaded and attached) */
	char verify_error[256];       /* --verify could not run: why */
	struct rp_prog progs[BUDGET_MAX_FUNCS];
	int nprogs, nprograms;        /* functions, and those that are programs */
	struct rp_rule *rules;
	int nrules;
	char (*slow)[320];            /* what goes to the slow path, one line each */
	int nslow;
	char notes[RP_MAX_NOTES][512];   /* warnings */
	int nnotes;
	struct rp_limit limits[8];
	int nlimits;
	double est_err;               /* --verify: the model's mean absolute error, over est_n */
	int est_n;
	int rejected, attach_refused; /* --verify: programs the kernel refused to load, to attach */
	int loaded, attached;
};

/* verify.c: loads every program of r->sb.obj into the kernel, each on its own (its verifier
 * count and verdict; a refused one's log explained and written to log_dir, NULL: $TMPDIR) but
 * over one set of maps, fills the tail-call slots and attaches each
 * program as l7run would (sock_ops to a child cgroup of cgroup_root it makes and removes), then
 * undoes it all. Returns 0 (refusals are in r), or -1 when it cannot run at all
 * (r->verify_error says why). */
int verify_object(struct report *r, const char *cgroup_root, const char *log_dir);

#endif
