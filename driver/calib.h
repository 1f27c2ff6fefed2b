/* The verifier calibration: what the running kernel's verifier processed for programs l7c
 * made, measured by scripts/calibrate.py (`cmake --build build --target calibrate`, or the
 * kernel.calibrate test) and read by the budget model (budget.c). Three levels, tried in order:
 *   exact    a program the kernel has verified, by its instructions: its processed count
 *   config   a machinery configuration (the machinery's source lines a program holds), by program
 *            name: its cost, plus the policy's own walk at a per-program rate
 *   features the same for the configurations whose programs reach the same functions (callbacks,
 *            global functions: the features the policy selected)
 *   program  by program name only: the configuration whose structural estimate is the nearest,
 *            its count scaled by the ratio of the estimates, at least the structural estimate
 * The table is text (docs in scripts/calibrate.py); which one is used, in this order: the path
 * in L7C_CALIBRATION ("none": no table), the build's (built by the calibrate step, if its
 * kernel release is the running one), the shipped one for the running kernel's major.minor
 * (driver/calibration/, embedded). */
#ifndef L7_CALIB_H
#define L7_CALIB_H

#include <stddef.h>
#include <stdint.h>

enum calib_level { CALIB_NONE, CALIB_PROGRAM, CALIB_FEATURES, CALIB_CONFIG, CALIB_EXACT };

struct calib_row {
	char kind;            /* 'e' exact, 'c' config, 'f' features, 'm' a configuration's
	                       * estimate and count, 'p' program */
	char name[64];
	uint64_t key;         /* exact: the code hash; config: the machinery signature; features:
	                       * the functions reached */
	double a, b;          /* exact: processed, -; config, features: cost, rate; m: structural
	                       * estimate, processed; program: ratio, rate */
};

struct calib {
	const char *source;   /* "built", "shipped", "file" (L7C_CALIBRATION) or "none" */
	char path[256];       /* where it was read from ("(embedded)" for the shipped table) */
	char release[64];     /* the kernel release it was measured on ("" if none) */
	char running[80];     /* the running kernel's release */
	char note[512];       /* why a table was not used, "" if it was or none was looked for */
	struct calib_row *rows;
	int nrows;
};

/* The calibration for the running kernel, loaded once (never NULL: source "none" if no table
 * applies). */
const struct calib *calib_get(void);

/* The row of the given kind for a program, NULL if none. */
const struct calib_row *calib_find(const struct calib *c, char kind, const char *name, uint64_t key);

/* The 'm' row of a program's kind whose structural estimate is the nearest to `model`. */
const struct calib_row *calib_nearest(const struct calib *c, const char *name, double model);

const char *calib_level_name(enum calib_level l);

/* How much of a program's name names its kind: all of it, but a decide program's index
 * ("l7_gw_decide_3": "l7_gw_decide_"), as each link of a chain holds the same machinery. */
size_t calib_kind_len(const char *name);

#endif
