/* Per-stage timers: wall clock (what the user waits) and process CPU time (what the stage
 * costs: steadier on a loaded machine). */
#include "timers.h"

#include <time.h>

static double seconds(clockid_t clock)
{
	struct timespec ts;
	clock_gettime(clock, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

struct l7_tick l7_tick(void)
{
	return (struct l7_tick){ seconds(CLOCK_MONOTONIC), seconds(CLOCK_PROCESS_CPUTIME_ID) };
}

struct l7_tick l7_timers_add(struct l7_timers *t, enum l7_stage s, struct l7_tick since)
{
	struct l7_tick now = l7_tick();
	if (t) {
		t->wall[s] += now.wall - since.wall;
		t->cpu[s] += now.cpu - since.cpu;
		t->runs[s]++;
	}
	return now;
}

void l7_timers_print(const struct l7_timers *t, FILE *out)
{
	static const char *const names[] = {
#define L7_STAGE(id, name, what) name,
#include "timers.def"
#undef L7_STAGE
	};
	double wall = 0, cpu = 0;
	fprintf(out, "%-14s %9s %9s\n", "stage", "wall ms", "cpu ms");
	for (int s = 0; s < L7_T_N; s++) {
		if (!t->runs[s])
			continue;
		wall += t->wall[s];
		cpu += t->cpu[s];
		fprintf(out, "%-14s %9.1f %9.1f", names[s], t->wall[s] * 1e3, t->cpu[s] * 1e3);
		if (t->runs[s] > 1)
			fprintf(out, "   (%d runs)", t->runs[s]);
		fputc('\n', out);
	}
	struct l7_tick now = l7_tick();
	if (t->start.wall > 0 && now.wall - t->start.wall > wall) {   /* start-up, reading, writing */
		fprintf(out, "%-14s %9.1f %9.1f\n", "other", (now.wall - t->start.wall - wall) * 1e3,
			(now.cpu - t->start.cpu - cpu) * 1e3);
		wall = now.wall - t->start.wall;
		cpu = now.cpu - t->start.cpu;
	}
	fprintf(out, "%-14s %9.1f %9.1f", "total", wall * 1e3, cpu * 1e3);
	if (t->rounds > 1)
		fprintf(out, "   (%d compile rounds)", t->rounds);
	fputc('\n', out);
}
