/* Unit tests of mesh_resp.h, the mesh backend's response-head scan: it frames what the kernel
 * forwards to a client (status, Content-Length, chunked), so a head it reads differently from
 * the client is a desync. The scan goes a line at a time through 64-byte windows: lines and
 * names that cross a window, and heads that end at every length, are the cases here. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "mesh_resp.h"

static struct l7_req r;

static int scan_n(const char *s, size_t n, __u32 rmask, struct l7_mesh_rscan **hs)
{
	memset(&r, 0xa5, sizeof r);   /* the scan must not depend on a clean buffer */
	memcpy(r.buf, s, n);
	return l7_mesh_scan_response(&r, (__u32)n, hs, rmask);
}

static int scan(const char *s, struct l7_mesh_rscan **hs)
{
	return scan_n(s, strlen(s), 0, hs);
}

Test(mesh_resp, nginx_head)
{
	const char *s = "HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\nDate: Wed, 02 Dec 2026 08:00:00 GMT\r\n"
			"Content-Type: application/octet-stream\r\nContent-Length: 2\r\n"
			"Connection: keep-alive\r\n\r\na\n";
	struct l7_mesh_rscan *hs;
	int h = scan(s, &hs);
	cr_assert_eq(h, (int)(strlen(s) - 2));
	cr_expect_eq(hs->status, 200);
	cr_expect(hs->has_clen);
	cr_expect_eq(hs->clen, 2);
	cr_expect(!hs->chunked);
}

/* every prefix of a complete head is "need more"; the whole is the head */
Test(mesh_resp, every_prefix)
{
	char s[512];
	int n = snprintf(s, sizeof s, "HTTP/1.1 404 Not Found\r\nX-Long: %0100d\r\nContent-Length:  17 \t\r\n\r\n", 7);
	struct l7_mesh_rscan *hs;
	for (int i = 1; i < n; i++)
		cr_assert_eq(scan_n(s, (size_t)i, 0, &hs), 0, "prefix of %d bytes", i);
	cr_assert_eq(scan_n(s, (size_t)n, 0, &hs), n);
	cr_expect_eq(hs->status, 404);
	cr_expect_eq(hs->clen, 17);
}

/* a name whose ':' lies in the window after the one its line starts in, at every offset */
Test(mesh_resp, colon_past_a_window)
{
	for (int pad = 40; pad < 140; pad++) {
		char s[512];
		int n = snprintf(s, sizeof s, "HTTP/1.1 200 OK\r\nX-%0*d: v\r\ncontent-LENGTH: 5\r\n\r\n", pad, 0);
		struct l7_mesh_rscan *hs;
		cr_assert_eq(scan_n(s, (size_t)n, 0, &hs), n, "pad %d", pad);
		cr_assert_eq(hs->clen, 5, "pad %d", pad);
		/* the same line with no ':' is not a field line, whatever the next line holds */
		n = snprintf(s, sizeof s, "HTTP/1.1 200 OK\r\nX-%0*d v\r\nA: b\r\n\r\n", pad, 0);
		cr_assert_eq(scan_n(s, (size_t)n, 0, &hs), -1, "pad %d", pad);
	}
}

Test(mesh_resp, chunked)
{
	struct l7_mesh_rscan *hs;
	cr_assert_gt(scan("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", &hs), 0);
	cr_expect(hs->chunked);
	cr_expect_eq(scan("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", &hs), -1);
	cr_expect_eq(scan("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", &hs), -1);
}

Test(mesh_resp, unframeable)
{
	struct l7_mesh_rscan *hs;
	cr_expect_eq(scan("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n", &hs), -1);
	cr_expect_eq(scan("HTTP/1.1 200 OK\r\nContent-Length: 1 2\r\n\r\n", &hs), -1);
	cr_expect_eq(scan("HTTP/1.1 200 OK\r\nContent-Length: \r\n\r\n", &hs), -1);
	cr_expect_eq(scan("HTTP/1.1 200 OK\r\nContent-Length: 0x10\r\n\r\n", &hs), -1);
	cr_expect_eq(scan("HTTP/1.1 200 OK\r\nContent-Length: 1234567890123456\r\n\r\n", &hs), -1);
	cr_expect_eq(scan("HTTP/1.1 200 OK\nContent-Length: 2\r\n\r\n", &hs), -1);   /* bare LF */
	cr_expect_eq(scan("HTTP/1.1 200 OK\r\nA: b\n\r\n", &hs), -1);
	cr_expect_eq(scan("HTTP/1.1 2x0 OK\r\n\r\n", &hs), -1);
	char big[L7_RS_MAXHEAD + 64];
	int n = snprintf(big, sizeof big, "HTTP/1.1 200 OK\r\nX: ");
	memset(big + n, 'a', sizeof big - (size_t)n);
	cr_expect_eq(scan_n(big, sizeof big, 0, &hs), -1);   /* no end within L7_RS_MAXHEAD */
	cr_expect_eq(scan_n(big, L7_RS_MAXHEAD - 1, 0, &hs), 0);
}

Test(mesh_resp, status_and_colons)
{
	struct l7_mesh_rscan *hs;
	cr_assert_gt(scan("HTTP/1.0 101 Switching: Protocols\r\nUpgrade: x\r\n\r\n", &hs), 0);
	cr_expect_eq(hs->status, 101);
	cr_expect(!hs->has_clen);
	/* the first ':' ends the name; a value may hold more */
	cr_assert_gt(scan("HTTP/1.1 200 OK\r\nLocation: http://a:1/\r\nContent-Length:0\r\n\r\n", &hs), 0);
	cr_expect_eq(hs->clen, 0);
	cr_expect(hs->has_clen);
}

/* the lines of the names a response mutation removes, adjacent ones merged */
Test(mesh_resp, cut_lines)
{
	const char *s = "HTTP/1.1 200 OK\r\nServer: a\r\nSet-Cookie: b\r\nDate: c\r\nserver: d\r\n\r\n";
	struct l7_mesh_rscan *hs;
	cr_assert_eq(scan_n(s, strlen(s), 3, &hs), (int)strlen(s));
	cr_assert_eq(hs->n_cut, 2);
	cr_expect_eq(hs->cut[0].off, 17);
	cr_expect_eq(hs->cut[0].len, strlen("Server: a\r\nSet-Cookie: b\r\n"));
	cr_expect_eq(hs->cut[1].off, strstr(s, "server: d") - s);
	cr_expect_eq(hs->cut[1].len, strlen("server: d\r\n"));
	cr_assert_eq(scan_n(s, strlen(s), 2, &hs), (int)strlen(s));   /* set-cookie only */
	cr_assert_eq(hs->n_cut, 1);
	cr_expect_eq(hs->cut[0].off, strstr(s, "Set-Cookie") - s);
}
