/* Regular expressions compiled at compile time to a minimal DFA (ir/regex.c). The header is
 * not called regex.h: ir/ is an include directory, and <regex.h> must still find the C library.
 *
 * The syntax is a POSIX-ERE-like subset (docs/language.md, "Regular expressions"); matching is
 * always of the whole value. re_compile parses, builds a Thompson NFA, runs the subset
 * construction over byte classes (the 256 byte values grouped into classes no transition tells
 * apart), minimises (Moore), and merges classes again. What comes out is small enough to be a
 * table in the BPF object: at most RE_MAX_STATES states and RE_MAX_TABLE transitions.
 *
 * The DFA: state 0 is the dead state (no accepting state is reachable from it: a match can stop
 * there), `start` the initial state, next[state * nclasses + cls[byte]] the successor. */
#ifndef L7_IR_REGEX_DFA_H
#define L7_IR_REGEX_DFA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#define RE_MAX_STATES  256     /* of the minimal DFA, the dead state included */
#define RE_MAX_TABLE   16384   /* states x classes of one regex */
#define RE_MAX_TOTAL   65536   /* states x classes of all regexes of one policy file (ir/lower.c) */
#define RE_MAX_SOURCE  4096    /* bytes of regex text */
#define RE_MAX_REPEAT  1000    /* largest count of {m,n} */
#define RE_MAX_NFA     20000   /* NFA states while building (counted repetition copies its operand) */
#define RE_MAX_SUBSET  8192    /* DFA states before minimisation */
#define RE_MAX_WORK    40000000L /* NFA states visited while building (~0.3 s): compile time stays bounded */

struct re_dfa {
	int nstates, nclasses, start;
	unsigned char cls[256];      /* byte -> class */
	unsigned short *next;        /* nstates * nclasses */
	unsigned char *accept;       /* per state */
};

/* Where and why a regex was refused: pos/len index the regex text (for a caret). */
struct re_error {
	size_t pos, len;
	char msg[192];
};

/* 0 and a DFA in out (free with re_free), or -1 and err. */
int re_compile(const char *re, size_t len, struct re_dfa *out, struct re_error *err);
void re_free(struct re_dfa *d);

/* The state after reading s from state `from` (0: dead). */
int re_run(const struct re_dfa *d, int from, const unsigned char *s, size_t n);
bool re_match(const struct re_dfa *d, const unsigned char *s, size_t n);

/* Some string the DFA accepts, chosen at random (*seed advances), preferring printable bytes;
 * at most cap bytes. Returns its length, or -1 when the DFA accepts nothing that short. */
int re_example(const struct re_dfa *d, unsigned long long *seed, unsigned char *buf, size_t cap);

/* Compact text: classes as byte ranges, then each state's transitions to live states. */
void re_dump(const struct re_dfa *d, FILE *out, const char *indent);

#endif
