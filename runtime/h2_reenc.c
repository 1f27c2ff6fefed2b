/* HTTP/2 request header blocks re-encoded for a backend (h2_reenc.h). The decoder is
 * stdlib/bpf/hpack.h with a hook at each complete field (L7_HPACK_HOOK_FIELD), where its state
 * says where the field's parts are: in the block (rep_off .. pos, the value from vstart) or in
 * the table's ring (the name at nt_off, an indexed field's value at vt_off). */
#include <stdlib.h>
#include <string.h>
#include <l7/h2.h>

static void h2_reenc_field(struct l7_hpack *d);
#define L7_HPACK_HOOK_FIELD(d, req) h2_reenc_field(d)
/* the names hpack.h classifies as wanted: none here (h2_refuse.c defines the table) */
#include "../stdlib/bpf/hpack.h"
#include "h2_reenc.h"
#include "h2_frames.h"

static void put(struct h2_reenc *r, const uint8_t *p, size_t n)
{
	if (r->bad)
		return;
	if (r->len + n > H2_REENC_MAX) {
		r->bad = 1;
		return;
	}
	if (r->len + n > r->cap) {
		size_t c = (r->len + n) * 2;
		uint8_t *o = realloc(r->out, c);
		if (!o) {
			r->bad = 1;
			return;
		}
		r->out = o;
		r->cap = c;
	}
	memcpy(r->out + r->len, p, n);
	r->len += n;
}

/* A prefix integer (RFC 7541 5.1): N-bit prefix, `first` the representation's bits above it. */
static void put_int(struct h2_reenc *r, uint32_t v, unsigned nbits, uint8_t first)
{
	uint8_t o[8];
	size_t n = 0;
	uint32_t max = (1u << nbits) - 1;

	if (v < max) {
		o[n++] = (uint8_t)(first | v);
	} else {
		o[n++] = (uint8_t)(first | max);
		for (v -= max; v >= 128; v >>= 7)
			o[n++] = (uint8_t)(0x80 | (v & 0x7f));
		o[n++] = (uint8_t)v;
	}
	put(r, o, n);
}

/* A raw string (H = 0) of the table's ring: [off, off + len), wrapping. */
static void put_ring(struct h2_reenc *r, uint32_t off, uint32_t len)
{
	uint32_t w = off & L7_HT_RING_MASK, n1 = L7_HPACK_TABLE_RING - w;

	put_int(r, len, 7, 0);
	if (n1 > len)
		n1 = len;
	put(r, r->d.tab.ring + w, n1);
	put(r, r->d.tab.ring, len - n1);
}

static void h2_reenc_field(struct l7_hpack *d)
{
	struct h2_reenc *r = (struct h2_reenc *)d;   /* d is its first member */
	const struct l7_hpack_st *st = &d->st;
	const uint8_t *b = d->blk;
	uint8_t never = st->rep == L7_HPACK_R_NEVER ? 0x10 : 0x00;

	if (st->want && (r->del >> (st->want - 1) & 1))
		return;   /* removed: what it inserted the decoder kept all the same */

	if (st->dyn & L7_HPACK_DYN_VALUE) {          /* indexed, dynamic: both from the entry */
		put_int(r, 0, 4, 0x00);
		put_ring(r, st->nt_off, st->ins_nlen);
		put_ring(r, st->vt_off, st->vt_len);
	} else if (st->dyn & L7_HPACK_DYN_NAME) {    /* the entry's name, the block's value */
		put_int(r, 0, 4, never);
		put_ring(r, st->nt_off, st->ins_nlen);
		put(r, b + st->vstart, st->pos - st->vstart);
	} else if (st->rep == L7_HPACK_R_INCREMENTAL) {   /* the same literal, not indexed */
		uint32_t i = 0;

		l7_hpack_int(b + st->rep_off, 0x3f, st->pos - st->rep_off, &i);
		if (i == 0) {
			put_int(r, 0, 4, 0x00);
			put(r, b + st->rep_off + 1, st->pos - st->rep_off - 1);
		} else {
			put_int(r, i, 4, 0x00);
			put(r, b + st->vstart, st->pos - st->vstart);
		}
	} else {                                     /* static, or a literal: as it came */
		put(r, b + st->rep_off, st->pos - st->rep_off);
	}
}

void h2_reenc_add(struct h2_reenc *r, const char *name, size_t nlen, const char *value, size_t vlen)
{
	uint8_t low[256];

	if (nlen > sizeof low) {
		r->bad = 1;
		return;
	}
	for (size_t i = 0; i < nlen; i++)
		low[i] = (uint8_t)(name[i] >= 'A' && name[i] <= 'Z' ? name[i] - 'A' + 'a' : name[i]);
	put_int(r, 0, 4, 0x00);
	put_int(r, (uint32_t)nlen, 7, 0);
	put(r, low, nlen);
	put_int(r, (uint32_t)vlen, 7, 0);
	put(r, (const uint8_t *)value, vlen);
}

struct h2_reenc *h2_reenc_new(void)
{
	struct h2_reenc *r = calloc(1, sizeof *r);

	if (r)
		r->conn = L7_H2_C_HP_PENDING;   /* l7run's SETTINGS go first (mesh_h2.c) */
	return r;
}

void h2_reenc_free(struct h2_reenc *r)
{
	if (r)
		free(r->out);
	free(r);
}

void h2_reenc_acked(struct h2_reenc *r)
{
	r->conn = l7_hpack_acked(r->conn);
}

/* The block in r->d.blk[0, r->d.len). */
static int decode(struct h2_reenc *r, uint32_t mode, int *need)
{
	uint32_t before = r->conn;
	int rc;

	r->len = 0;
	r->bad = 0;
	r->d.mode = mode;
	r->d.conn = r->conn;
	rc = l7_hpack_decode(&r->d, &r->req);
	r->conn = r->d.conn;
	*need = !(before & L7_H2_C_HP_ZERO) || (r->d.msg.flags & (L7_H2_M_DYNAMIC | L7_H2_M_UPDATE));
	return rc;
}

int h2_reenc_block(struct h2_reenc *r, const uint8_t *blk, size_t n, uint32_t mode, int *need)
{
	*need = 1;
	if (n > L7_H2_BLOCK_MAX) {   /* as the kernel: never decoded, what it inserts is missed */
		if (!(r->conn & L7_H2_C_HP_ZERO))
			r->conn |= L7_H2_C_HP_UNKNOWN;
		return L7_H2_SLOW(L7_H2_SLOW_BLOCK_SIZE);
	}
	memcpy(r->d.blk, blk, n);
	r->d.len = (uint32_t)n;
	return decode(r, mode, need);
}

int h2_reenc_frames_in(struct h2_reenc *r, const uint8_t *f, size_t end, int *need)
{
	size_t n = 0;

	for (size_t at = 0; at + 9 <= end;) {
		uint32_t len = (uint32_t)f[at] << 16 | (uint32_t)f[at + 1] << 8 | f[at + 2], skip = 0, pad = 0;

		if (f[at + 3] == L7_H2_HEADERS) {
			if (f[at + 4] & L7_H2_F_PADDED && len) {
				pad = f[at + 9];
				skip = 1;
			}
			if (f[at + 4] & L7_H2_F_PRIORITY)
				skip += 5;
		}
		if (skip + pad > len || n + len - skip - pad > L7_H2_BLOCK_MAX) {
			/* never decoded: what it inserts is missed (the kernel refused it whole) */
			if (!(r->conn & L7_H2_C_HP_ZERO))
				r->conn |= L7_H2_C_HP_UNKNOWN;
			*need = 1;
			return -1;
		}
		memcpy(r->d.blk + n, f + at + 9 + skip, len - skip - pad);
		n += len - skip - pad;
		at += 9 + (size_t)len;
	}
	r->d.len = (uint32_t)n;
	return decode(r, L7_HPACK_REQUEST, need);
}

size_t h2_reenc_frames(const struct h2_reenc *r, uint32_t sid, int end_stream, char **buf)
{
	size_t nf = r->len / L7_H2_MAX_FRAME + 1, n = 0;
	char *o = malloc(r->len + 9 * nf);

	*buf = o;
	if (!o)
		return 0;
	for (size_t at = 0, i = 0; i < nf; i++) {
		size_t k = r->len - at > L7_H2_MAX_FRAME ? L7_H2_MAX_FRAME : r->len - at;
		uint8_t fl = (uint8_t)(i + 1 == nf ? L7_H2_F_END_HEADERS : 0);

		if (i == 0 && end_stream)
			fl |= L7_H2_F_END_STREAM;
		n += h2_frame(o + n, (uint32_t)k, i ? L7_H2_CONTINUATION : L7_H2_HEADERS, fl, sid);
		memcpy(o + n, r->out + at, k);
		n += k;
		at += k;
	}
	return n;
}
