/* probe.h: what the running kernel can do for l7run (probe.def), found out at start. */
#ifndef L7RUN_PROBE_H
#define L7RUN_PROBE_H

#include <stdio.h>

enum { PM_GW = 1, PM_MESH = 2 };                  /* modes a probe matters to */
enum { PN_ALWAYS, PN_SPLIT, PN_WARN };            /* what its absence means */

enum probe_id {
#define L7_PROBE(id, modes, need, what, advice) PROBE_##id,
#include "probe.def"
#undef L7_PROBE
	PROBE_N
};

/* The answers, filled once per process for the modes asked (the kernel does not change under a
 * running l7run). ok: 1 present, 0 missing, -1 not probed. */
struct kernel_probe {
	int modes_done;
	int warned;                  /* modes whose PN_WARN lines were said */
	int ok[PROBE_N];
	char detail[PROBE_N][160];   /* why it is missing: the errno or what was seen */
};

/* Probe what `modes` need (results kept in kp; cheap, a few ms of loopback traffic). */
void probe_kernel(struct kernel_probe *kp, int modes);

/* 0 when the kernel has everything an object of this mode needs (split: its policy program is
 * a tail-call chain); else -1 with err naming each missing piece and what to do. Warnings
 * (PN_WARN) go to stderr, once. */
int probe_require(struct kernel_probe *kp, int mode, int split, char *err, size_t errlen);

/* `l7run --probe`: one line per probe of `modes`; 0 if nothing required is missing. */
int probe_print(FILE *out, struct kernel_probe *kp, int modes);

#endif
