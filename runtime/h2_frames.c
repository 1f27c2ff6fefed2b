/* The frames l7run writes itself (h2_frames.h). */
#include <stdio.h>
#include <string.h>
#include "h2_frames.h"
#include "l7/h2.h"

size_t h2_frame(char *o, uint32_t len, uint8_t type, uint8_t flags, uint32_t stream)
{
	o[0] = (char)(len >> 16);
	o[1] = (char)(len >> 8);
	o[2] = (char)len;
	o[3] = (char)type;
	o[4] = (char)flags;
	o[5] = (char)(stream >> 24 & 0x7f);
	o[6] = (char)(stream >> 16);
	o[7] = (char)(stream >> 8);
	o[8] = (char)stream;
	return 9;
}

static size_t be32(char *o, uint32_t v)
{
	o[0] = (char)(v >> 24);
	o[1] = (char)(v >> 16);
	o[2] = (char)(v >> 8);
	o[3] = (char)v;
	return 4;
}

size_t h2_goaway(char *o, uint32_t last, uint32_t code)
{
	size_t n = h2_frame(o, 8, L7_H2_GOAWAY, 0, 0);

	n += be32(o + n, last & 0x7fffffff);
	return n + be32(o + n, code);
}

size_t h2_rst(char *o, uint32_t stream, uint32_t code)
{
	size_t n = h2_frame(o, 4, L7_H2_RST_STREAM, 0, stream);

	return n + be32(o + n, code);
}

size_t h2_window_update(char *o, uint32_t stream, uint32_t inc)
{
	size_t n = h2_frame(o, 4, L7_H2_WINDOW_UPDATE, 0, stream);

	return n + be32(o + n, inc & 0x7fffffff);
}

size_t h2_settings(char *o, const uint16_t *ids, const uint32_t *vals, int n)
{
	size_t k = h2_frame(o, (uint32_t)(6 * n), L7_H2_SETTINGS, 0, 0);

	for (int i = 0; i < n; i++) {
		o[k++] = (char)(ids[i] >> 8);
		o[k++] = (char)ids[i];
		k += be32(o + k, vals[i]);
	}
	return k;
}

/* HPACK literal without indexing (RFC 7541 6.2.2), raw strings shorter than 127 bytes: a
 * name from the static table (idx > 0) or a literal one (name) */
static size_t lit(char *o, unsigned idx, const char *name, const char *val)
{
	size_t n = 0, vl = strlen(val);

	if (vl > 126)
		vl = 126;
	if (idx < 15) {
		o[n++] = (char)idx;
	} else {
		o[n++] = 0x0f;
		o[n++] = (char)(idx - 15);
	}
	if (!idx) {
		size_t nl = strlen(name);
		o[n++] = (char)nl;
		memcpy(o + n, name, nl);
		n += nl;
	}
	o[n++] = (char)vl;
	memcpy(o + n, val, vl);
	return n + vl;
}

size_t h2_answer(char *o, uint32_t s, int status, int grpc, unsigned grpc_status, const char *why,
		 int end_stream, size_t *data)
{
	char blk[320], num[16];
	size_t b = 0, n = 0;

	*data = 0;
	if (grpc) {
		blk[b++] = (char)0x88;   /* :status 200, static index 8 */
		b += lit(blk + b, 31, NULL, "application/grpc");
		snprintf(num, sizeof num, "%u", grpc_status);
		b += lit(blk + b, 0, "grpc-status", num);
		b += lit(blk + b, 0, "grpc-message", why);
		n += h2_frame(o, (uint32_t)b, L7_H2_HEADERS, L7_H2_F_END_HEADERS | L7_H2_F_END_STREAM, s);
		memcpy(o + n, blk, b);
		n += b;
	} else {
		char body[160];
		int bl = snprintf(body, sizeof body, "%d %.120s\n", status, why);
		snprintf(num, sizeof num, "%d", status);
		b += lit(blk + b, 8, NULL, num);   /* :status */
		b += lit(blk + b, 31, NULL, "text/plain");
		snprintf(num, sizeof num, "%d", bl);
		b += lit(blk + b, 28, NULL, num);   /* content-length */
		n += h2_frame(o, (uint32_t)b, L7_H2_HEADERS, L7_H2_F_END_HEADERS, s);
		memcpy(o + n, blk, b);
		n += b;
		n += h2_frame(o + n, (uint32_t)bl, L7_H2_DATA, L7_H2_F_END_STREAM, s);
		memcpy(o + n, body, (size_t)bl);
		n += (size_t)bl;
		*data = (size_t)bl;
	}
	if (!end_stream)
		n += h2_rst(o + n, s, L7_H2_NO_ERROR);
	return n;
}
