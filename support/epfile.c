/* The --endpoints file and host names, for l7run and l7c --eval alike (epfile.h). */
#include "epfile.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

void l7_eps_add(struct l7_eps *s, const struct sockaddr_in *a, unsigned weight)
{
	for (int i = 0; i < s->n; i++)
		if (s->e[i].addr.sin_addr.s_addr == a->sin_addr.s_addr && s->e[i].addr.sin_port == a->sin_port) {
			s->e[i].weight = weight;   /* a line given twice: the last weight */
			return;
		}
	if (s->n == L7_EP_MAX) {
		s->truncated = 1;
		return;
	}
	s->e[s->n++] = (struct l7_ep){ *a, weight };
}

/* A.B.C.D:PORT (or localhost:PORT), port 1-65535. */
static int parse_addr(const char *s, size_t n, struct sockaddr_in *a)
{
	char buf[64];
	if (n >= sizeof buf || memchr(s, 0, n))
		return -1;
	memcpy(buf, s, n);
	buf[n] = 0;
	char *colon = strrchr(buf, ':'), *end;
	if (!colon || !colon[1])
		return -1;
	*colon = 0;
	long port = strtol(colon + 1, &end, 10);
	if (*end || colon[1] == '-' || colon[1] == '+' || port < 1 || port > 65535)
		return -1;
	memset(a, 0, sizeof *a);
	a->sin_family = AF_INET;
	a->sin_port = htons((uint16_t)port);
	return inet_pton(AF_INET, strcmp(buf, "localhost") ? buf : "127.0.0.1", &a->sin_addr) == 1 ? 0 : -1;
}

struct tok { const char *s; size_t n; };

static struct tok next_tok(const char **p, const char *end)
{
	const char *s = *p;
	while (s < end && (*s == ' ' || *s == '\t' || *s == '\r'))
		s++;
	const char *e = s;
	while (e < end && *e != ' ' && *e != '\t' && *e != '\r')
		e++;
	*p = e;
	return (struct tok){ s, (size_t)(e - s) };
}

static int fail(struct l7_epfile_err *err, const char *text, const char *line, unsigned lineno, struct tok at,
		const char *hint, const char *fmt, const char *arg, size_t argn)
{
	err->line = lineno;
	err->col = (unsigned)(at.s - line) + 1;
	err->start = (unsigned)(at.s - text);
	err->end = err->start + (unsigned)(at.n ? at.n : 1);
	snprintf(err->msg, sizeof err->msg, fmt, (int)(argn > 64 ? 64 : argn), arg);
	snprintf(err->hint, sizeof err->hint, "%s", hint);
	return -1;
}

int l7_epfile_parse(const char *text, size_t len, const char *set, struct l7_eps *out, struct l7_epfile_err *err)
{
	const char *p = text, *end = text + len;
	unsigned lineno = 0;

	out->n = out->truncated = 0;
	while (p < end) {
		const char *line = p, *eol = memchr(p, '\n', (size_t)(end - p));
		eol = eol ? eol : end;
		p = eol < end ? eol + 1 : end;
		lineno++;
		const char *hash = memchr(line, '#', (size_t)(eol - line)), *q = line;
		const char *stop = hash ? hash : eol;
		struct tok name = next_tok(&q, stop);
		if (!name.n)
			continue;
		struct tok addr = next_tok(&q, stop), kw = next_tok(&q, stop), wv = next_tok(&q, stop), extra = next_tok(&q, stop);
		struct sockaddr_in a;
		if (!addr.n)
			return fail(err, text, line, lineno, name, "a line is a set, an address and an optional weight: `api 10.0.0.7:8080 weight 2`",
				    "expected `NAME A.B.C.D:PORT [weight W]` after %.*s", name.s, name.n);
		if (parse_addr(addr.s, addr.n, &a))
			return fail(err, text, line, lineno, addr, "an IPv4 address and a port 1-65535: `10.0.0.7:8080`",
				    "expected `NAME A.B.C.D:PORT [weight W]`, not address %.*s", addr.s, addr.n);
		long w = 1;
		if (kw.n) {
			char num[8] = "", *e = NULL;
			if (wv.n && wv.n < sizeof num)
				memcpy(num, wv.s, wv.n);
			if (kw.n != 6 || memcmp(kw.s, "weight", 6))
				return fail(err, text, line, lineno, kw, "`weight W`, W 1-255, or nothing",
					    "after the address only `weight W` (1-255), not %.*s", kw.s, kw.n);
			if (!wv.n || !num[0] || (w = strtol(num, &e, 10), *e) || w < 1 || w > 255)
				return fail(err, text, line, lineno, wv.n ? wv : kw, "a weight is 1-255",
					    "after the address only `weight W` (1-255)%.*s", "", 0);
			if (extra.n)
				return fail(err, text, line, lineno, extra, "one endpoint a line",
					    "after the address only `weight W` (1-255), not %.*s", extra.s, extra.n);
		}
		if (name.n == strlen(set) && !memcmp(name.s, set, name.n))
			l7_eps_add(out, &a, (unsigned)w);
	}
	return 0;
}

char *l7_epfile_load(const char *path, size_t *len, char *err, size_t errlen)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return NULL;
	}
	char *buf = malloc(L7_EPFILE_MAX + 1);
	size_t n = buf ? fread(buf, 1, L7_EPFILE_MAX + 1, f) : 0;
	int bad = ferror(f);
	fclose(f);
	if (!buf || bad || n > L7_EPFILE_MAX) {
		snprintf(err, errlen, "%s: %s", path, !buf ? "out of memory" : bad ? "read error" : "larger than 1 MiB");
		free(buf);
		return NULL;
	}
	buf[n] = 0;
	*len = n;
	return buf;
}

int l7_ep_resolve(const char *host, unsigned port, struct l7_eps *out, char *err, size_t errlen)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM }, *res = NULL;
	int rc = getaddrinfo(host, NULL, &hints, &res);
	out->n = out->truncated = 0;
	if (rc) {
		snprintf(err, errlen, "%s: %s", host, gai_strerror(rc));
		return -1;
	}
	for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		struct sockaddr_in a = *(struct sockaddr_in *)ai->ai_addr;
		a.sin_port = htons((uint16_t)port);
		l7_eps_add(out, &a, 1);
	}
	freeaddrinfo(res);
	return 0;
}
