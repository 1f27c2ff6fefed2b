/* support: the --endpoints file (`NAME A.B.C.D:PORT [weight W]` lines, `#` comments), read by
 * l7run (runtime/endpoints.c: the sets it fills at run time) and by l7c --eval (the endpoint
 * a request would get): one parser, so both accept the same files and say the same errors.
 * Also the resolution of a host name as l7run does it (getaddrinfo, IPv4, weight 1). */
#ifndef L7_EPFILE_H
#define L7_EPFILE_H

#include <stddef.h>
#include <netinet/in.h>

#define L7_EP_MAX 64                 /* endpoints one source may give (a set uses L7_RT_SLOTS) */

struct l7_ep {
	struct sockaddr_in addr;     /* network order, AF_INET */
	unsigned weight;             /* 1-255 */
};

struct l7_eps {                      /* the endpoints of one set, in the order first given */
	struct l7_ep e[L7_EP_MAX];
	int n;
	int truncated;               /* more than L7_EP_MAX were given: the first are kept */
};

struct l7_epfile_err {               /* where the file does not parse and why */
	unsigned line, col;          /* 1-based */
	unsigned start, end;         /* byte offsets of what is wrong, for a caret */
	char msg[192];
	char hint[96];
};

/* Adds an endpoint to s; one given twice keeps its place and takes the last weight. */
void l7_eps_add(struct l7_eps *s, const struct sockaddr_in *a, unsigned weight);

/* The endpoints of set `set` in text (len bytes; set "": check the whole text only). 0, or -1
 * and the first error in *err. */
int l7_epfile_parse(const char *text, size_t len, const char *set, struct l7_eps *out, struct l7_epfile_err *err);

/* The whole file, malloc'd and NUL-terminated (*len bytes); NULL and why (strerror, or too
 * large: L7_EPFILE_MAX) in err. */
#define L7_EPFILE_MAX (1u << 20)
char *l7_epfile_load(const char *path, size_t *len, char *err, size_t errlen);

/* The addresses `host` resolves to now (getaddrinfo, IPv4), each at port, weight 1; -1 and
 * why ("HOST: reason") if it does not resolve. */
int l7_ep_resolve(const char *host, unsigned port, struct l7_eps *out, char *err, size_t errlen);

#endif
