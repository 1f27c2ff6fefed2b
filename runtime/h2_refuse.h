/* h2_refuse.h: l7run's answers to an HTTP/2 client while HTTP/2 is not served (h2_refuse.c). */
#ifndef L7RUN_H2_REFUSE_H
#define L7RUN_H2_REFUSE_H

#include <stddef.h>

/* status: the :status of an answer these bytes are (for the local responses' telemetry), 0
 * for the connection's own frames */
typedef void (*h2_send_fn)(void *ctx, const void *p, size_t n, int status);
struct h2_refuser;

struct h2_refuser *h2_refuser_new(void);
void h2_refuser_free(struct h2_refuser *r);
/* Takes the client's bytes in[0..n) from the first one on (the preface), whole frames at a
 * time, and sends what answers them through send(ctx, ...): the bytes consumed (the rest is
 * an unfinished frame: call again with more), or -1 when the connection is to be closed once
 * what was sent is delivered (a GOAWAY was the last thing sent, or the client's came). */
long h2_refuser_feed(struct h2_refuser *r, const char *in, size_t n, h2_send_fn send, void *ctx);

#endif
