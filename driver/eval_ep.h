/* l7c --eval over run-time endpoints: the tables l7run would build for the policy's upstreams
 * of `endpoints("SET")` (from --endpoints FILE, read by l7run's own parser) and of host names
 * (--resolve: getaddrinfo now, as l7run does), and what the decision's endpoint is. */
#ifndef L7_EVAL_EP_H
#define L7_EVAL_EP_H

#include <stdbool.h>
#include <stdio.h>

struct ir_program;
struct ir_decision;
struct l7_diags;
struct eval_eps;

/* NULL and *rc set when the file cannot be read (2) or does not parse (1, a diagnostic at
 * file:line:col); file NULL and !resolve: nothing known (every run-time set is unknown). */
struct eval_eps *eval_eps_new(const struct ir_program *ir, const char *file, bool resolve, struct l7_diags *d, int *rc);
void eval_eps_free(struct eval_eps *e);

/* An ir_eval_env.lb_tab (ctx: the eval_eps). */
const struct l7_lb_tab *eval_eps_tab(void *ctx, int upstream);

/* The lines that say where a decision for a run-time upstream goes: the endpoint (Ketama),
 * the turns (round robin), why there is none, or which set is not known and how to tell. */
void eval_eps_print(const struct eval_eps *e, const struct ir_program *ir, const struct ir_decision *dec, FILE *out);

#endif
