/* base.h: what every layer of l7run uses and that holds no state: clocks, socket cookies,
 * l7run's own HTTP answers (answer.c). Defined in base.c and answer.c. */
#ifndef L7RUN_BASE_H
#define L7RUN_BASE_H

#include <stddef.h>
#include <stdint.h>

uint64_t now_ms(void);   /* CLOCK_MONOTONIC */
uint64_t now_us(void);
uint64_t sock_cookie(int fd);   /* SO_COOKIE, 0 if none */

/* A log line said at most every 10 s: rate_note() counts a time it happens and returns how
 * many times since it was last said when it is to be said now, else 0. */
struct rate_note {
	uint64_t at;             /* ms: said last */
	unsigned long long n;
};
unsigned long long rate_note(struct rate_note *r);

/* a watched file (--identities, --endpoints) is as it was: same inode, size and mtime */
struct stat;
int same_file(const struct stat *a, const struct stat *b);

/* answer.c: l7run's own HTTP answers; why: a reason for the body (NULL: the status alone) */
int http_answer(char *buf, size_t cap, int status, int close_conn, int head_only);
int http_answer_why(char *buf, size_t cap, int status, int close_conn, int head_only, const char *why);
/* an HTTP/2 client (1: its preface starts in[0..n); -1: may be, n is short), and the frames
 * that refuse it (stat h2_refused) */
int h2_preface_at(const char *in, size_t n);
int h2_refusal(char *buf, size_t cap);

#endif
