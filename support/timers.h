/* support: per-stage timers for l7c --time (stages: timers.def). A stage run more than once
 * (codegen in each round of the splitter) adds up. Every function takes NULL as "not timing". */
#ifndef L7_TIMERS_H
#define L7_TIMERS_H

#include <stdio.h>

enum l7_stage {
#define L7_STAGE(id, name, what) L7_T_##id,
#include "timers.def"
#undef L7_STAGE
	L7_T_N
};

struct l7_tick {
	double wall, cpu;
};

struct l7_timers {
	double wall[L7_T_N], cpu[L7_T_N];   /* seconds */
	int runs[L7_T_N];
	int rounds;                         /* compile rounds of the splitter */
	struct l7_tick start;               /* the whole run's start, for what no stage covers */
};

/* Now, for l7_timers_add's `since` (taken whether or not t is NULL: it is cheap). */
struct l7_tick l7_tick(void);
/* Adds the time from `since` to now to stage s; returns now, for the next stage. */
struct l7_tick l7_timers_add(struct l7_timers *t, enum l7_stage s, struct l7_tick since);
/* One line per stage that ran, the rest of the run since t->start, and the total, wall and CPU,
 * in milliseconds. */
void l7_timers_print(const struct l7_timers *t, FILE *out);

#endif
