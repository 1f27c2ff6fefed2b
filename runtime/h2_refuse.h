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
/* Takes the client's bytes in[0..n), the first call's from the preface on (an unfinished frame
 * is kept for the next call), and sends what answers them through send(ctx, ...). 0, or -1
 * when the connection is to be closed once what was sent is delivered (a GOAWAY was the last
 * thing sent, or the client's came). */
int h2_refuser_take(struct h2_refuser *r, const char *in, size_t n, h2_send_fn send, void *ctx);
/* Ends the connection: GOAWAY with the last stream answered and HTTP_1_1_REQUIRED (for a
 * connection whose further bytes l7run would not see: gateway mode). */
void h2_refuser_goaway(struct h2_refuser *r, h2_send_fn send, void *ctx);

#endif
