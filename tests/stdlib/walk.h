/* Walk a byte stream of pipelined requests the way the data plane frames it: head parse,
 * then Content-Length or chunked body, then the next request; data after a request that
 * closes the connection is an error; an Upgrade/CONNECT head ends the HTTP stream. */
#ifndef L7_TEST_WALK_H
#define L7_TEST_WALK_H

#include <stddef.h>
#include <l7/abi.h>

#define WALK_MAX 16
#define WALK_E_AFTER_CLOSE (-100)  /* bytes after Connection: close / HTTP/1.0 */

struct walk_req {
	char method[64];
	char target[512];
	unsigned n_headers;
	unsigned flags;
};

struct walk {
	int nreq;            /* heads parsed */
	struct walk_req req[WALK_MAX];
	int err;             /* 0, -L7_E_* (head or chunked body) or WALK_E_AFTER_CLOSE */
	int err_req;         /* 1-based request the error belongs to */
	int body_err;        /* the error came from the chunked framer */
	int incomplete;      /* stream ended inside a head or a body */
	int complete;        /* requests whose head and body are complete */
	int upgraded;        /* stopped at an Upgrade/CONNECT head */
};

void walk_stream(const unsigned char *data, size_t len, struct walk *w);
const char *walk_errname(int err);

/* Wanted header names the native tests compile in (wanted.c). */
#define TEST_WANT_USER 0
#define TEST_WANT_XUSER 1
#define TEST_WANT_AUTH 2
#define TEST_WANT_CTYPE 3

#endif
