/* Internal to ir/: the evaluator's copies of the policy's tables (eval_tables.c), filled from
 * a program before stdlib code built natively reads them. */
#ifndef L7_IR_EVAL_TABLES_H
#define L7_IR_EVAL_TABLES_H

#include "ir.h"

void ir_eval_set_wanted(const struct ir_program *p);   /* l7_wanted_*: for http.h's parser */
void ir_eval_set_jwt(const struct ir_program *p);      /* l7_jwt_cfg, l7_claim_*: for jwt.h */

#endif
