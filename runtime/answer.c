/* l7run's own HTTP answers (403, 404, 429, 502, ...), the same in both modes. */
#include <stdio.h>
#include "base.h"

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
