/* l7run's own HTTP answers (403, 404, 429, 502, ...), the same in both modes. */
#include <stdio.h>
#include <string.h>
#include "base.h"
#include "l7/h2.h"

static const char *reason(int status)
{
	switch (status) {
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 413: return "Content Too Large";
	case 414: return "URI Too Long";
	case 429: return "Too Many Requests";
	case 431: return "Request Header Fields Too Large";
	case 501: return "Not Implemented";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	default: return "Error";
	}
}

/* A short text/plain answer in buf (>= 256 bytes, more for a reason); its length. head_only:
 * the request was HEAD, whose response has no body (RFC 9110 9.3.2) but the same
 * content-length. */
int http_answer_why(char *buf, size_t cap, int status, int close_conn, int head_only, const char *why)
{
	char body[512];
	int bl = snprintf(body, sizeof body, "%d %s%s%s\n", status, reason(status), why ? ": " : "", why ? why : "");
	if (bl >= (int)sizeof body)
		bl = (int)sizeof body - 1;
	int n = snprintf(buf, cap, "HTTP/1.1 %d %s\r\ncontent-type: text/plain\r\ncontent-length: %d\r\n%s\r\n%s",
			 status, reason(status), bl, close_conn ? "connection: close\r\n" : "", head_only ? "" : body);
	return n < (int)cap ? n : (int)cap - 1;
}

int http_answer(char *buf, size_t cap, int status, int close_conn, int head_only)
{
	return http_answer_why(buf, cap, status, close_conn, head_only, NULL);
}

/* The HTTP/2 connection preface (RFC 9113 3.4) starts with a request line no HTTP/1.1 request
 * has ("PRI * HTTP/2.0", then an empty line): the parsers of both modes refuse its head
 * (PRI is no method they classify; they may do so before the line is whole), and l7run
 * answers it as this says: 1 the preface, 0 not, -1 the start of it (wait for more). */
int h2_preface_at(const char *in, size_t n)
{
	static const char pri[] = "PRI * HTTP/2.0\r\n\r\n";
	size_t k = n < sizeof pri - 1 ? n : sizeof pri - 1;

	if (memcmp(in, pri, k))
		return 0;
	return k == sizeof pri - 1 ? 1 : -1;
}

/* HTTP/2 is not served by the data plane yet (issue 14): the server's preface (an empty
 * SETTINGS: a client must see it before anything else, 3.4), then GOAWAY with last stream 0
 * (no stream was processed: every request may be retried, 6.8) and HTTP_1_1_REQUIRED (7: "use
 * HTTP/1.1 instead"), which curl and nghttp report as such instead of a framing error. */
int h2_refusal(char *buf, size_t cap)
{
	static const char why[] = "HTTP/2 is not served here yet";
	const unsigned glen = 8 + sizeof why - 1;
	const unsigned char fr[] = {
		0, 0, 0, L7_H2_SETTINGS, 0, 0, 0, 0, 0,
		0, 0, (unsigned char)glen, L7_H2_GOAWAY, 0, 0, 0, 0, 0,
		0, 0, 0, 0, 0, 0, 0, L7_H2_HTTP_1_1_REQUIRED,
	};
	size_t n = sizeof fr + sizeof why - 1;

	if (cap < n)
		return 0;
	memcpy(buf, fr, sizeof fr);
	memcpy(buf + sizeof fr, why, sizeof why - 1);
	return (int)n;
}
