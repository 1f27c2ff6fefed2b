/* support: clang-style diagnostics, "file:line:col: error: message", the source line and a
 * caret, for every stage (the front end, the IR's passes, codegen). All of them in one run:
 * a stage reports and goes on; the caller looks at the counts. */
#ifndef L7_DIAG_H
#define L7_DIAG_H

#include <stdbool.h>
#include <stdio.h>

#include "source.h"

enum l7_severity { L7_NOTE, L7_WARNING, L7_ERROR };

struct l7_diags {
	FILE *out;                 /* NULL: stderr */
	bool color;
	int errors, warnings;
};

/* Prints "file:line:col: error: message", the source line and a caret under loc; without a
 * source, "l7c: error: message". */
void l7_diag(struct l7_diags *d, enum l7_severity sev, struct l7_loc loc, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* A note on what to write instead, for the diagnostic just printed at loc: "file:line:col:
 * note: hint", without a second copy of the source line. */
void l7_hint(struct l7_diags *d, struct l7_loc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* An error at loc for something already declared at prev ("... declared twice"), and the
 * note pointing there: "previous <what> is here". */
void l7_diag_again(struct l7_diags *d, struct l7_loc loc, struct l7_loc prev, const char *what, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

#endif
