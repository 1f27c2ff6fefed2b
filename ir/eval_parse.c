/* The data plane's request parsers built natively for the evaluator: HTTP/1.1 (stdlib/bpf/http.h)
 * and HTTP/2 header blocks (stdlib/bpf/hpack.h, what mesh mode decodes each stream with). The
 * parsers read the header names to extract from the l7_wanted_* tables, which in the kernel
 * are constants of the compiled policy; here they are filled from the IR before each parse
 * (eval_tables.c defines them writable). */
#include "eval_tables.h"
#include "ir.h"

#include <stdbool.h>
#include <string.h>
#include <strings.h>

#include "http.h"
#include "hpack.h"


int ir_parse_request(const struct ir_program *p, struct l7_req *req, const void *bytes, unsigned len)
{
	ir_eval_set_wanted(p);
	memset(req, 0, sizeof(*req));
	unsigned n = len < L7_MAX_HEAD ? len : L7_MAX_HEAD;
	memcpy(req->buf, bytes, n);
	return l7_http_parse_head(req, len < L7_MAX_HEAD + 0u ? len : L7_MAX_HEAD);
}

/* ---- HTTP/2 requests written as text ----------------------------------------------------------
 * What a user writes for an HTTP/2 request is its HTTP/1.1 form with the version HTTP/2, and
 * that is what an HTTP/2 client sends for it (RFC 9113 8.3.1): the request line's method and
 * target become :method and :path (:authority for CONNECT), :scheme is http (h2c), the host
 * field becomes :authority, the other names go lowercase (8.2.1), values lose their
 * surrounding blanks as in HTTP/1.1. A line ":name: value" sets that pseudo-header itself
 * (then host stays a regular field when it is :authority). Each field is encoded as a literal
 * without indexing with a raw string (RFC 7541 6.2.2): no dynamic table, so the block means
 * the same to every decoder. */

struct h2_out {
	unsigned char *o;
	unsigned cap, n;
	bool full;
};

static void h2_int(struct h2_out *w, unsigned char first, unsigned bits, unsigned long v)
{
	unsigned long max = (1ul << bits) - 1;
	unsigned char b[12];
	unsigned k = 0;
	if (v < max) {
		b[k++] = (unsigned char)(first | v);
	} else {
		b[k++] = (unsigned char)(first | max);
		for (v -= max; v >= 128 && k < sizeof(b) - 1; v >>= 7)
			b[k++] = (unsigned char)(v % 128 + 128);
		b[k++] = (unsigned char)v;
	}
	if (w->n + k > w->cap) {
		w->full = true;
		return;
	}
	memcpy(w->o + w->n, b, k);
	w->n += k;
}

static void h2_str(struct h2_out *w, const char *s, size_t len, bool lower)
{
	h2_int(w, 0, 7, len);
	if (w->full || w->n + len > w->cap) {
		w->full = true;
		return;
	}
	for (size_t i = 0; i < len; i++)
		w->o[w->n + i] = (unsigned char)(lower && s[i] >= 'A' && s[i] <= 'Z' ? s[i] + 32 : s[i]);
	w->n += (unsigned)len;
}

static void h2_field(struct h2_out *w, const char *name, size_t nlen, const char *val, size_t vlen, bool lower)
{
	h2_int(w, 0x00, 4, 0);   /* literal without indexing, new name */
	h2_str(w, name, nlen, lower);
	h2_str(w, val, vlen, false);
}

static bool blank(char c)
{
	return c == ' ' || c == '\t';
}

/* "name: value" in [l, le): the colon after the name (a pseudo-header's name starts with
 * one), the value without its surrounding blanks. */
static bool split_field(const char *l, const char *le, const char **colon, const char **v, const char **ve)
{
	*colon = le - l > 1 ? memchr(l + 1, ':', (size_t)(le - l - 1)) : NULL;
	if (!*colon)
		return false;
	*v = *colon + 1, *ve = le;
	while (*v < *ve && blank(**v))
		(*v)++;
	while (*ve > *v && blank((*ve)[-1]))
		(*ve)--;
	return true;
}

/* The end of the line starting at s (before "\r\n" or "\n") and where the next one starts. */
static const char *line_end(const char *s, const char *end, const char **next)
{
	const char *nl = memchr(s, '\n', (size_t)(end - s));
	if (!nl) {
		*next = end;
		return end;
	}
	*next = nl + 1;
	return nl > s && nl[-1] == '\r' ? nl - 1 : nl;
}

int ir_h2_block(const void *text, unsigned len, unsigned char *blk, unsigned cap, unsigned *head_len)
{
	const char *s = text, *end = s + len, *next;
	const char *le = line_end(s, end, &next);
	/* METHOD SP TARGET SP HTTP/2 */
	const char *sp1 = memchr(s, ' ', (size_t)(le - s));
	const char *sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t)(le - sp1 - 1)) : NULL;
	if (!sp2 || sp1 == s || sp2 == sp1 + 1)
		return 0;
	size_t vlen = (size_t)(le - sp2 - 1);
	if (vlen != 6 || memcmp(sp2 + 1, "HTTP/2", 6))   /* RFC 9110's name; "HTTP/2.0" is HTTP/1.x's bad version */
		return 0;
	/* the pseudo-headers first, then the other fields in their order */
	enum { P_METHOD, P_SCHEME, P_PATH, P_AUTHORITY, P_N };
	static const char *const pname[P_N] = { ":method", ":scheme", ":path", ":authority" };
	const char *pv[P_N] = { s, "http", sp1 + 1, NULL };
	size_t pl[P_N] = { (size_t)(sp1 - s), 4, (size_t)(sp2 - sp1 - 1), 0 };
	bool connect = pl[P_METHOD] == 7 && !memcmp(s, "CONNECT", 7), explicit_auth = false;
	if (connect) {   /* RFC 9113 8.5: the target is the authority; no :scheme, no :path */
		pv[P_AUTHORITY] = pv[P_PATH], pl[P_AUTHORITY] = pl[P_PATH];
		pv[P_SCHEME] = pv[P_PATH] = NULL;
	}
	/* pass 1: pseudo-header lines and host; pass 2: the regular fields */
	const char *host = NULL;
	size_t hostl = 0;
	const char *body = NULL;
	for (const char *l = next; l < end; l = next) {
		le = line_end(l, end, &next);
		if (le == l) {
			body = next;
			break;
		}
		const char *colon, *v, *ve;
		if (!split_field(l, le, &colon, &v, &ve))
			return -1;
		if (*l == ':') {
			int k = 0;
			while (k < P_N && !((size_t)(colon - l) == strlen(pname[k]) && !memcmp(l, pname[k], strlen(pname[k]))))
				k++;
			if (k < P_N) {
				pv[k] = v, pl[k] = (size_t)(ve - v);
				explicit_auth |= k == P_AUTHORITY;
			}
		} else if (colon - l == 4 && !strncasecmp(l, "host", 4) && !host) {
			host = v, hostl = (size_t)(ve - v);
		}
	}
	if (!body)
		return -2;   /* no end of the head */
	*head_len = (unsigned)(body - s);
	struct h2_out w = { .o = blk, .cap = cap };
	if (host && !explicit_auth && !connect)
		pv[P_AUTHORITY] = host, pl[P_AUTHORITY] = hostl;
	for (int k = 0; k < P_N; k++)
		if (pv[k])
			h2_field(&w, pname[k], strlen(pname[k]), pv[k], pl[k], false);
	for (const char *l = next = s; l < body; l = next) {   /* other pseudo-headers, then fields */
		le = line_end(l, end, &next);
		if (l == s || le == l)
			continue;
		const char *colon, *v, *ve;
		split_field(l, le, &colon, &v, &ve);
		bool pseudo = *l == ':', known = false;
		for (int k = 0; pseudo && k < P_N; k++)
			known |= (size_t)(colon - l) == strlen(pname[k]) && !memcmp(l, pname[k], strlen(pname[k]));
		if (pseudo && !known)
			h2_field(&w, l, (size_t)(colon - l), v, (size_t)(ve - v), false);
	}
	for (const char *l = next = s; l < body; l = next) {
		le = line_end(l, end, &next);
		if (l == s || le == l || *l == ':')
			continue;
		const char *colon, *v, *ve;
		split_field(l, le, &colon, &v, &ve);
		if (l + 4 == colon && !strncasecmp(l, "host", 4) && v == host && !explicit_auth && !connect)
			continue;   /* it became :authority */
		h2_field(&w, l, (size_t)(colon - l), v, (size_t)(ve - v), true);
	}
	return w.full ? -1 : (int)w.n;
}

int ir_parse_request_h2(const struct ir_program *p, struct l7_req *req, const void *blk, unsigned len,
			unsigned *msg_flags)
{
	static struct l7_hpack d;   /* 32 KiB: as the kernel's, not on the stack */
	ir_eval_set_wanted(p);
	memset(req, 0, sizeof(*req));
	memset(&d, 0, sizeof(d));
	*msg_flags = 0;
	if (len > L7_H2_BLOCK_MAX)
		return L7_H2_SLOW(L7_H2_SLOW_BLOCK_SIZE);
	memcpy(d.blk, blk, len);
	d.len = len;
	d.mode = L7_HPACK_REQUEST;
	/* a client's blocks before it acknowledged l7run's SETTINGS_HEADER_TABLE_SIZE 0: the
	 * state the kernel decides them in (a dynamic reference is refused, not an error) */
	d.conn = L7_H2_C_HP_PENDING;
	int rc = l7_hpack_decode(&d, req);
	*msg_flags = d.msg.flags;
	return rc;
}
