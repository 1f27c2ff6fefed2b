/* Unit tests of http.h beyond the corpus: every field of struct l7_req, flags, limits, the
 * slow-path cases, split delivery, and the chunked framer. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "corpus.h"
#include "http.h"
#include "walk.h"

static struct l7_req req;

static int parse_n(const void *s, size_t n)
{
	memset(&req, 0xa5, sizeof req);   /* parse must not depend on a clean struct */
	memcpy(req.buf, s, n < sizeof req.buf ? n : sizeof req.buf);
	return l7_http_parse_head(&req, (__u32)n);
}

static int parse(const char *s)
{
	return parse_n(s, strlen(s));
}

static int span_is(struct l7_span sp, const char *s)
{
	return sp.len == strlen(s) && !memcmp(req.buf + sp.off, s, sp.len);
}

#define SPAN_EQ(sp, s) cr_expect(span_is(sp, s), #sp " is \"%.*s\", want \"%s\"", (sp).len, \
				 (const char *)req.buf + (sp).off, s)

Test(http, fields)
{
	const char *s = "GET /a/b?x=1&y=2 HTTP/1.1\r\nHost: example.com:8080\r\n"
			"User: \x85" "admin\xa0\r\nx-USER:  alice smith \t\r\nAuthorization:Bearer abc\r\n"
			"Accept: */*\r\n\r\nNEXT";
	int rc = parse(s);

	cr_assert_eq(rc, (int)strlen(s) - 4);
	cr_expect_eq(req.head_len, (__u32)rc);
	cr_expect_eq(req.method, L7_M_GET);
	SPAN_EQ(req.method_s, "GET");
	SPAN_EQ(req.target, "/a/b?x=1&y=2");
	SPAN_EQ(req.path, "/a/b");
	SPAN_EQ(req.query, "x=1&y=2");
	SPAN_EQ(req.host, "example.com:8080");
	cr_expect_eq(req.n_headers, 5);
	cr_expect_eq(req.body_len, 0);
	cr_expect_eq(req.flags, 0);
	cr_expect_eq(req.hdr_present, 0x7);
	SPAN_EQ(req.hdr[TEST_WANT_USER], "\x85" "admin\xa0");   /* obs-text is not trimmed */
	SPAN_EQ(req.hdr[TEST_WANT_XUSER], "alice smith");
	SPAN_EQ(req.hdr[TEST_WANT_AUTH], "Bearer abc");
}

Test(http, methods_and_forms)
{
	static const struct { const char *line; int rc; __u32 method; const char *path, *query, *host; } c[] = {
		{ "GET / HTTP/1.1", 1, L7_M_GET, "/", "", "h" },
		{ "HEAD /x HTTP/1.1", 1, L7_M_HEAD, "/x", "", "h" },
		{ "POST /x? HTTP/1.1", 1, L7_M_POST, "/x", "", "h" },
		{ "PUT /x?a?b HTTP/1.1", 1, L7_M_PUT, "/x", "a?b", "h" },
		{ "DELETE /x HTTP/1.1", 1, L7_M_DELETE, "/x", "", "h" },
		{ "OPTIONS * HTTP/1.1", 1, L7_M_OPTIONS, "*", "", "h" },
		{ "TRACE / HTTP/1.1", 1, L7_M_TRACE, "/", "", "h" },
		{ "PATCH /p HTTP/1.1", 1, L7_M_PATCH, "/p", "", "h" },
		{ "PURGE /p HTTP/1.1", 1, L7_M_OTHER, "/p", "", "h" },
		{ "M-SEARCH * HTTP/1.1", 1, L7_M_OTHER, "*", "", "h" },
		{ "PROPPATCH /p HTTP/1.1", 1, L7_M_OTHER, "/p", "", "h" },
		{ "UNSUBSCRIBE /p HTTP/1.1", 1, L7_M_OTHER, "/p", "", "h" },
		{ "MKCALENDAR /p HTTP/1.1", 1, L7_M_OTHER, "/p", "", "h" },
		{ "CONNECT a.b:443 HTTP/1.1", 1, L7_M_CONNECT, "", "", "a.b:443" },
		{ "CONNECT [::1]:443 HTTP/1.1", 1, L7_M_CONNECT, "", "", "[::1]:443" },
		{ "GET http://Example.org:81/p/q?z HTTP/1.1", 1, L7_M_GET, "/p/q", "z", "Example.org:81" },
		{ "GET HTTPS://e.org HTTP/1.1", 1, L7_M_GET, "", "", "e.org" },
		{ "GET http://e.org?q HTTP/1.1", 1, L7_M_GET, "", "q", "e.org" },
		{ "GET /{a|b}^`\"<> HTTP/1.1", 1, L7_M_GET, "/{a|b}^`\"<>", "", "h" },
		{ "get / HTTP/1.1", -L7_E_UNSUPPORTED, 0, 0, 0, 0 },   /* methods are case-sensitive */
		{ "FOO / HTTP/1.1", -L7_E_UNSUPPORTED, 0, 0, 0, 0 },
		{ "PROPPATCHX / HTTP/1.1", -L7_E_UNSUPPORTED, 0, 0, 0, 0 },
		{ "GE(T / HTTP/1.1", -L7_E_BAD, 0, 0, 0, 0 },
		{ " GET / HTTP/1.1", -L7_E_BAD, 0, 0, 0, 0 },
		{ "GET  / HTTP/1.1", -L7_E_BAD, 0, 0, 0, 0 },
		{ "GET / HTTP/1.1 ", -L7_E_BAD, 0, 0, 0, 0 },
		{ "GET /  HTTP/1.1", -L7_E_BAD, 0, 0, 0, 0 },
		{ "GET / HTTP/1.2", -L7_E_BAD, 0, 0, 0, 0 },
		{ "GET / HTTP/2.0", -L7_E_BAD, 0, 0, 0, 0 },
		{ "GET / http/1.1", -L7_E_BAD, 0, 0, 0, 0 },
		{ "GET / HTTP/1.10", -L7_E_BAD, 0, 0, 0, 0 },
		{ "GET /a#b HTTP/1.1", -L7_E_BAD, 0, 0, 0, 0 },
		{ "GET /a\\b HTTP/1.1", -L7_E_BAD, 0, 0, 0, 0 },
		{ "GET /\x80 HTTP/1.1", -L7_E_BAD, 0, 0, 0, 0 },
		{ "GET /\x7f HTTP/1.1", -L7_E_BAD, 0, 0, 0, 0 },
		{ "GET /\t HTTP/1.1", -L7_E_BAD, 0, 0, 0, 0 },
		{ "GET * HTTP/1.1", -L7_E_BAD, 0, 0, 0, 0 },
		{ "OPTIONS *x HTTP/1.1", -L7_E_BAD, 0, 0, 0, 0 },
		{ "GET a.b:80 HTTP/1.1", -L7_E_BAD, 0, 0, 0, 0 },
		{ "GET ftp://x/ HTTP/1.1", -L7_E_BAD, 0, 0, 0, 0 },
		{ "GET http:// HTTP/1.1", -L7_E_BAD, 0, 0, 0, 0 },
		{ "GET http:///x HTTP/1.1", -L7_E_BAD, 0, 0, 0, 0 },
		{ "GET http://u:p@e.org/ HTTP/1.1", -L7_E_BAD, 0, 0, 0, 0 },
		{ "CONNECT a.b HTTP/1.1", -L7_E_BAD, 0, 0, 0, 0 },
		{ "CONNECT a.b: HTTP/1.1", -L7_E_BAD, 0, 0, 0, 0 },
		{ "CONNECT :443 HTTP/1.1", -L7_E_BAD, 0, 0, 0, 0 },
		{ "CONNECT a.b:123456 HTTP/1.1", -L7_E_BAD, 0, 0, 0, 0 },
		{ "CONNECT / HTTP/1.1", -L7_E_BAD, 0, 0, 0, 0 },
		{ "CONNECT http://a.b:80 HTTP/1.1", -L7_E_BAD, 0, 0, 0, 0 },
		{ "CONNECT u@a.b:80 HTTP/1.1", -L7_E_BAD, 0, 0, 0, 0 },
	};
	char buf[256];

	for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
		int n = snprintf(buf, sizeof buf, "%s\r\nHost: h\r\n\r\n", c[i].line), rc = parse(buf);
		if (c[i].rc < 0) {
			cr_expect_eq(rc, c[i].rc, "\"%s\": %d, want %d", c[i].line, rc, c[i].rc);
			continue;
		}
		cr_expect_eq(rc, n, "\"%s\": %d", c[i].line, rc);
		if (rc != n)
			continue;
		cr_expect_eq(req.method, c[i].method, "\"%s\" method", c[i].line);
		cr_expect(span_is(req.path, c[i].path), "\"%s\" path %.*s", c[i].line, req.path.len,
			  req.buf + req.path.off);
		cr_expect(span_is(req.query, c[i].query), "\"%s\" query", c[i].line);
		cr_expect(span_is(req.host, c[i].host), "\"%s\" host %.*s", c[i].line, req.host.len,
			  req.buf + req.host.off);
	}
}

/* L7_REQ_CONNHDR: the head has a Connection field, whatever it says (gateway mode cuts it) */
Test(http, flags)
{
	static const struct { const char *head; __u32 flags; } c[] = {
		{ "GET / HTTP/1.1\r\nHost: h\r\n", 0 },
		{ "GET / HTTP/1.0\r\n", L7_REQ_HTTP10 | L7_REQ_CLOSE },
		{ "GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n", L7_REQ_HTTP10 | L7_REQ_CONNHDR },
		{ "GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n", L7_REQ_HTTP10 | L7_REQ_CLOSE | L7_REQ_CONNHDR },
		{ "GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n", L7_REQ_CLOSE | L7_REQ_CONNHDR },
		{ "GET / HTTP/1.1\r\nHost: h\r\nConnection: foo,CLOSE \r\n", L7_REQ_CLOSE | L7_REQ_CONNHDR },
		{ "GET / HTTP/1.1\r\nHost: h\r\nConnection: closed\r\n", L7_REQ_CONNHDR },
		{ "GET / HTTP/1.1\r\nHost: h\r\nConnection: keep-alive, Upgrade\r\nUpgrade: websocket\r\n",
		  L7_REQ_UPGRADE | L7_REQ_CONNHDR },
		{ "GET / HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\n", 0 },
		{ "GET / HTTP/1.1\r\nHost: h\r\nConnection: upgrade\r\n", L7_REQ_CONNHDR },
		{ "CONNECT h:1 HTTP/1.1\r\nHost: h:1\r\n", L7_REQ_UPGRADE },
		{ "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n", L7_REQ_CHUNKED },
		{ "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding:  CHUNKED\t\r\n", L7_REQ_CHUNKED },
		{ "POST / HTTP/1.1\r\nHost: h\r\nExpect: 100-Continue\r\nContent-Length: 3\r\n",
		  L7_REQ_EXPECT },
	};
	char buf[512];

	for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
		int n = snprintf(buf, sizeof buf, "%s\r\n", c[i].head), rc = parse(buf);
		cr_expect_eq(rc, n, "\"%s\": rc %d", c[i].head, rc);
		cr_expect_eq(req.flags, c[i].flags, "\"%s\": flags %#x, want %#x", c[i].head, req.flags,
			     c[i].flags);
	}
}

Test(http, field_errors)
{
	static const struct { const char *fields; int rc; } c[] = {
		{ "", -L7_E_BAD },                                          /* 1.1 without Host */
		{ "Host: a\r\nHost: a\r\n", -L7_E_BAD },
		{ "Host: a\r\nhost: b\r\n", -L7_E_BAD },
		{ "Host: a b\r\n", -L7_E_BAD },
		{ "Host: a/b\r\n", -L7_E_BAD },
		{ "Host: u@a\r\n", -L7_E_BAD },
		{ "Host: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n", -L7_E_BAD },
		{ "Host: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 1\r\n", -L7_E_BAD },
		{ "Host: a\r\nContent-Length: 1\r\nContent-Length: 1\r\n", -L7_E_BAD },
		{ "Host: a\r\nContent-Length: 1, 1\r\n", -L7_E_BAD },
		{ "Host: a\r\nContent-Length: +1\r\n", -L7_E_BAD },
		{ "Host: a\r\nContent-Length: 0x10\r\n", -L7_E_BAD },
		{ "Host: a\r\nContent-Length: 1 2\r\n", -L7_E_BAD },
		{ "Host: a\r\nContent-Length:\r\n", -L7_E_BAD },
		{ "Host: a\r\nContent-Length: 4294967296\r\n", -L7_E_UNSUPPORTED },
		{ "Host: a\r\nContent-Length: 00000000000000000001\r\n", -L7_E_UNSUPPORTED },
		{ "Host: a\r\nTransfer-Encoding: gzip, chunked\r\n", -L7_E_BAD },
		{ "Host: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n", -L7_E_BAD },
		{ "Host: a\r\nTransfer-Encoding: chunked, \r\n", -L7_E_BAD },
		{ "Host: a\r\nTransfer-Encoding: \"chunked\"\r\n", -L7_E_BAD },
		{ "Host: a\r\nX: a\r\n b\r\n", -L7_E_BAD },                    /* obs-fold */
		{ "Host: a\r\nX: a\r\n\tb\r\n", -L7_E_BAD },
		{ " Host: a\r\n", -L7_E_BAD },
		{ "Host: a\r\nX : a\r\n", -L7_E_BAD },
		{ "Host: a\r\nX\t: a\r\n", -L7_E_BAD },
		{ "Host: a\r\n: a\r\n", -L7_E_BAD },
		{ "Host: a\r\nX a\r\n", -L7_E_BAD },
		{ "Host: a\r\nX\r\n", -L7_E_BAD },
		{ "Host: a\r\nX\"Y: a\r\n", -L7_E_BAD },
		{ "Host: a\r\nX\x80: a\r\n", -L7_E_BAD },
		{ "Host: a\r\nX: a\nY: b\r\n", -L7_E_BAD },                   /* bare LF */
		{ "Host: a\r\nX: a\rY: b\r\n", -L7_E_BAD },                   /* bare CR */
		{ "Host: a\nX: b\r\n", -L7_E_BAD },
		{ "Host: a\r\nX: \x01\r\n", -L7_E_BAD },
		{ "Host: a\r\nX: a\x7f\r\n", -L7_E_BAD },
		{ "Host: a\r\nX: \x0b" "a\r\n", -L7_E_BAD },
		{ "Host: a\r\nExpect: 200-ok\r\n", -L7_E_UNSUPPORTED },
		{ "Host: a\r\nUser: 1\r\nUser: 2\r\n", -L7_E_UNSUPPORTED },    /* wanted twice */
		{ "Host: a\r\nX-User: a" "                                " "\r\n", -L7_E_UNSUPPORTED },
		{ "Host: a\r\nX-User:" "                                " "a\r\n", -L7_E_UNSUPPORTED },
		{ "Host: a\r\nConnection: a,b,c,d,e,f,g,h,close\r\n", -L7_E_UNSUPPORTED },
		{ "Host: a\r\nConnection: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n",
		  -L7_E_UNSUPPORTED },
	};
	char buf[512];

	for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
		int rc;

		snprintf(buf, sizeof buf, "GET / HTTP/1.1\r\n%s\r\n", c[i].fields);
		rc = parse(buf);
		cr_expect_eq(rc, c[i].rc, "\"%s\": %d, want %d", c[i].fields, rc, c[i].rc);
	}
	/* HTTP/1.0: no Host needed, but Transfer-Encoding is faulty framing (RFC 9112 6.1) */
	cr_expect_gt(parse("GET / HTTP/1.0\r\n\r\n"), 0);
	cr_expect_eq(parse("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"), -L7_E_BAD);
	cr_expect_eq(parse("GET / HTTP/1.0\r\nHost: a\r\nHost: a\r\n\r\n"), -L7_E_BAD);
}

Test(http, values_and_wanted)
{
	const char *s = "GET / HTTP/1.1\r\nHost:\t h \t\r\nUSER:\r\nauthorization:    \r\n"
			"Content-Type:" "                               " "a" "                               " "\r\n"
			"Content-Length: 0012\r\n\r\n";
	cr_assert_eq(parse(s), (int)strlen(s));
	SPAN_EQ(req.host, "h");
	cr_expect_eq(req.hdr_present, 0xd);
	SPAN_EQ(req.hdr[TEST_WANT_USER], "");
	SPAN_EQ(req.hdr[TEST_WANT_AUTH], "");
	SPAN_EQ(req.hdr[TEST_WANT_CTYPE], "a");
	cr_expect_eq(req.body_len, 12);
	cr_expect_eq(l7_http_msg_end(&req), strlen(s) + 12);
	/* a 33-byte name cannot be wanted and is just counted */
	cr_expect_gt(parse("GET / HTTP/1.1\r\nHost: h\r\nabcdefghijklmnopqrstuvwxyz0123456: v\r\n\r\n"), 0);
	cr_expect_eq(req.n_headers, 2);
	/* an empty Host is allowed (RFC 9110 7.2) */
	cr_expect_gt(parse("GET / HTTP/1.1\r\nHost:\r\n\r\n"), 0);
	cr_expect_eq(req.host.len, 0);
}

Test(http, pipelined_and_leading_crlf)
{
	const char *s = "\r\n\r\nPOST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello"
			"GET /b HTTP/1.1\r\nHost: h\r\n\r\n";
	int rc = parse(s);
	size_t end;

	cr_assert_gt(rc, 0);
	SPAN_EQ(req.target, "/a");
	end = l7_http_msg_end(&req);
	cr_assert_lt(end, strlen(s));
	cr_assert_gt(parse(s + end), 0);
	SPAN_EQ(req.target, "/b");
	cr_expect_eq(parse("\n\nGET / HTTP/1.1\r\nHost: h\r\n\r\n"), -L7_E_BAD);
	cr_expect_eq(parse("\r\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n"), -L7_E_BAD);
}

/* A head of exactly n bytes: padding in one field. */
static size_t make_head(char *b, size_t n, int nfields)
{
	size_t len = (size_t)sprintf(b, "GET / HTTP/1.1\r\nHost: h\r\n");

	for (int i = 0; i < nfields; i++)
		len += (size_t)sprintf(b + len, "F%d: v\r\n", i);
	len += (size_t)sprintf(b + len, "Pad: ");
	while (len < n - 4)
		b[len++] = 'x';
	memcpy(b + len, "\r\n\r\n", 4);
	return len + 4;
}

Test(http, limits)
{
	static char b[L7_MAX_HEAD * 2];
	size_t n;

	n = make_head(b, L7_MAX_HEAD, 0);
	cr_expect_eq(parse_n(b, n), L7_MAX_HEAD, "a head of exactly L7_MAX_HEAD");
	n = make_head(b, L7_MAX_HEAD + 1, 0);
	cr_expect_eq(parse_n(b, n), -L7_E_TOO_LARGE);
	cr_expect_eq(parse_n(b, L7_MAX_HEAD - 100), 0, "need more below the limit");
	n = make_head(b, 2000, L7_MAX_HEADERS - 2);
	cr_expect_gt(parse_n(b, n), 0, "L7_MAX_HEADERS fields");
	cr_expect_eq(req.n_headers, L7_MAX_HEADERS);
	n = make_head(b, 2000, L7_MAX_HEADERS - 1);
	cr_expect_eq(parse_n(b, n), -L7_E_TOO_LARGE, "one field too many");

	/* request line: 414 past L7_HTTP_MAX_LINE, also while still incomplete */
	memset(b, 'a', sizeof b);
	memcpy(b, "GET /", 5);
	cr_expect_eq(parse_n(b, L7_HTTP_MAX_LINE + 100), -L7_E_URI_TOO_LONG);
	cr_expect_eq(parse_n(b, L7_HTTP_MAX_LINE - 100), 0);
	n = (size_t)sprintf(b + L7_HTTP_MAX_LINE - 100, " HTTP/1.1\r\nHost: h\r\n\r\n");
	cr_expect_gt(parse_n(b, L7_HTTP_MAX_LINE - 100 + n), 0);
	cr_expect_eq(req.target.len, L7_HTTP_MAX_LINE - 104);
	/* many empty lines before the request line are bounded too */
	for (size_t i = 0; i < sizeof b; i += 2)
		memcpy(b + i, "\r\n", 2);
	cr_expect_lt(parse_n(b, sizeof b), 0);
}

Test(http, bytes_past_len_are_ignored)
{
	const char *s = "GET / HTTP/1.1\r\nHost: h\r\n\r\n";
	size_t n = strlen(s);

	for (size_t cut = 0; cut < n; cut++) {
		memset(&req, 0, sizeof req);
		memset(req.buf, '\r', sizeof req.buf);   /* junk that would end lines */
		memcpy(req.buf, s, cut);
		cr_expect_eq(l7_http_parse_head(&req, (__u32)cut), 0, "prefix %zu", cut);
	}
}

/* Every corpus input, delivered in every prefix: a prefix shorter than the head never
 * parses, and never fails differently from the whole. */
static void prefixes(const char *index)
{
	struct tsv t;
	long checked = 0;

	cr_assert_eq(tsv_load(index, &t), 0);
	for (int r = 0; r < t.nrows; r++) {
		size_t len;
		unsigned char *d = corpus_read(tsv_get(&t, r, 1), &len);
		int full;

		cr_assert_not_null(d);
		full = parse_n(d, len);
		for (size_t p = 0; p < len && p < (full > 0 ? (size_t)full : len); p++) {
			int rc = parse_n(d, p);
			if (full > 0)
				cr_expect_eq(rc, 0, "%s: prefix %zu gives %d", tsv_get(&t, r, 0), p, rc);
			else
				cr_expect(rc == 0 || rc == full, "%s: prefix %zu gives %d, whole %d",
					  tsv_get(&t, r, 0), p, rc, full);
			checked++;
		}
		free(d);
	}
	printf("%s: %ld prefixes checked\n", index, checked);
	tsv_free(&t);
}

Test(corpus, split_delivery_http)
{
	prefixes("http/index.tsv");
}

Test(corpus, split_delivery_smuggling)
{
	prefixes("smuggling/index.tsv");
}

static int chunk_all(const char *body)
{
	struct l7_chunked st = { 0 };

	memcpy(req.buf, body, strlen(body));
	return l7_http_chunked(&st, req.buf, 0, (__u32)strlen(body));
}

Test(http, chunked)
{
	static const struct { const char *body; int rc; } c[] = {
		{ "0\r\n\r\n", 5 },
		{ "000\r\n\r\n", 7 },
		{ "5\r\nhello\r\n0\r\n\r\nGET", 15 },
		{ "a\r\n0123456789\r\nA\r\n0123456789\r\n0\r\n\r\n", 35 },
		{ "5;a=b;c;d=\"x;\\\"y\"\r\nhello\r\n0;z\r\n\r\n", 33 },
		{ "0\r\nX: y\r\nZ:\r\n\r\n", 15 },
		{ "5\r\nhel", 0 },
		{ "5\r\nhello\r\n", 0 },
		{ "0\r\nX: y\r\n", 0 },
		{ "", 0 },
		{ "\r\n0\r\n\r\n", -L7_E_BAD },
		{ " 5\r\nhello\r\n0\r\n\r\n", -L7_E_BAD },
		{ "5 \r\nhello\r\n0\r\n\r\n", -L7_E_BAD },
		{ "5\nhello\r\n0\r\n\r\n", -L7_E_BAD },
		{ "5\rhello\r\n0\r\n\r\n", -L7_E_BAD },
		{ "5\r\nhelloX\r\n0\r\n\r\n", -L7_E_BAD },
		{ "5\r\nhello\n0\r\n\r\n", -L7_E_BAD },
		{ "-5\r\nhello\r\n0\r\n\r\n", -L7_E_BAD },
		{ "0x5\r\nhello\r\n0\r\n\r\n", -L7_E_BAD },
		{ "5a\r\nhello\r\n", 0 },
		{ "5;\r\nhello\r\n0\r\n\r\n", -L7_E_BAD },
		{ "5;a=\r\nhello\r\n0\r\n\r\n", -L7_E_BAD },
		{ "5;a=\"b\r\nhello\r\n0\r\n\r\n", -L7_E_BAD },
		{ "5 ;a\r\nhello\r\n0\r\n\r\n", -L7_E_BAD },
		{ "1000000000000000\r\n", -L7_E_BAD },
		{ "0\r\n X: y\r\n\r\n", -L7_E_BAD },
		{ "0\r\nX y\r\n\r\n", -L7_E_BAD },
		{ "0\r\nX: \x01\r\n\r\n", -L7_E_BAD },
		{ "0\r\n\r\r\n", -L7_E_BAD },
		/* trailers that frame, route or control the connection (any case) */
		{ "0\r\nContent-Length: 5\r\n\r\n", -L7_E_BAD },
		{ "0\r\nX: 1\r\ntransfer-ENCODING: chunked\r\n\r\n", -L7_E_BAD },
		{ "0\r\nHost: evil\r\n\r\n", -L7_E_BAD },
		{ "0\r\nconnection: close\r\n\r\n", -L7_E_BAD },
		{ "0\r\nUpgrade: h2c\r\n\r\n", -L7_E_BAD },
		{ "0\r\nExpect: 100-continue\r\n\r\n", -L7_E_BAD },
		{ "0\r\nHosts: x\r\nContent-Lengths: 1\r\nX-Host: y\r\n\r\n", 46 },
	};

	for (size_t i = 0; i < sizeof c / sizeof c[0]; i++)
		cr_expect_eq(chunk_all(c[i].body), c[i].rc, "\"%s\": %d, want %d", c[i].body,
			     chunk_all(c[i].body), c[i].rc);
}

Test(http, trailers)
{
	/* the trailer section alone, as the data planes frame it after a last chunk */
	static const struct { const char *t; int rc; } c[] = {
		{ "\r\n", 2 },
		{ "\r\nGET / HTTP/1.1\r\n", 2 },
		{ "x-sum: 1\r\n\r\n", 12 },
		{ "X:POST / HTTP/1.1\r\n\r\n", 21 },   /* garden-server-39: a field, no request */
		{ "x-sum: 1\r\n", 0 },
		{ "x-sum: 1\r\n\r", 0 },
		{ "Content-Length: 0\r\n\r\n", -L7_E_BAD },
		{ "x-sum : 1\r\n\r\n", -L7_E_BAD },
		{ "x-sum: 1\n\r\n", -L7_E_BAD },
	};
	struct l7_chunked st;

	for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
		memcpy(req.buf, c[i].t, strlen(c[i].t));
		int rc = l7_http_trailers(&st, req.buf, 0, (__u32)strlen(c[i].t));
		cr_expect_eq(rc, c[i].rc, "\"%s\": %d, want %d", c[i].t, rc, c[i].rc);
	}
	/* from an offset: the length of the section, not where it ends */
	memcpy(req.buf, "0\r\nT: 1\r\n\r\n", 11);
	cr_expect_eq(l7_http_trailers(&st, req.buf, 3, 11), 8);
}

Test(http, chunked_resumes_byte_by_byte)
{
	const char *b = "5;e=\"q\"\r\nhello\r\n1a\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nT: 1\r\n\r\nX";
	size_t n = strlen(b), i;
	struct l7_chunked st = { 0 };
	int rc = 0;

	memcpy(req.buf, b, n);
	for (i = 0; i < n; i++) {
		rc = l7_http_chunked(&st, req.buf, (__u32)i, (__u32)i + 1);
		if (rc)
			break;
	}
	cr_expect_eq(rc, (int)n - 1);
	cr_expect_eq(rc, chunk_all(b));
}
