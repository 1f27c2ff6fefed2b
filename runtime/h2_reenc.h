/* h2_reenc.h: an HTTP/2 client's request header blocks as l7run relays them to backends
 * (mesh_h2.c, issue 14). Each block is decoded with the client's dynamic table by
 * stdlib/bpf/hpack.h built natively (the code the kernel decided it with, so the same
 * fields and the same table), and re-encoded for a backend whose table it must not depend
 * on: indexed dynamic fields and dynamic names become literals without indexing, literals with
 * incremental indexing lose the indexing, never-indexed literals stay never indexed (RFC 7541
 * 7.1.3), size updates go; static indexes and every other representation are copied as they
 * came (Huffman strings too). Nothing the result holds touches a decoder's dynamic table. */
#ifndef L7RUN_H2_REENC_H
#define L7RUN_H2_REENC_H

#include <stddef.h>
#include <stdint.h>
#include <l7/h2.h>

#define H2_REENC_MAX (1u << 18)   /* bytes of a re-encoded block (the kernel decodes at most
                                   * L7_HPACK_MAX_STEPS steps of 16 bytes: far less) */

struct h2_reenc {
	struct l7_hpack d;         /* first: the decoder's hook finds the rest from it */
	struct l7_req req;
	uint32_t conn;             /* the client's HPACK state (L7_H2_C_HP_*) as the kernel has it */
	uint8_t *out;              /* the last block re-encoded */
	size_t len, cap;
	int bad;                   /* it outgrew H2_REENC_MAX (or memory) */
	uint32_t del;              /* the next block: its fields whose name is wanted name i
	                            * (h2_reenc_want) for a bit i are not re-encoded */
};

struct h2_reenc *h2_reenc_new(void);
void h2_reenc_free(struct h2_reenc *r);
/* The client acknowledged our SETTINGS (HEADER_TABLE_SIZE 0): as h2.h does at that frame. */
void h2_reenc_acked(struct h2_reenc *r);
/* The block blk[0, n) in `mode` (enum l7_hpack_mode): decoded (the table kept), and
 * re-encoded into r->out. Returns the decoder's result (hpack.h); *need: the block as it came
 * would mean something else to a decoder with another table (it came while the client's
 * table was not known empty, refers to it, or resizes it), so a backend gets r->out. */
int h2_reenc_block(struct h2_reenc *r, const uint8_t *blk, size_t n, uint32_t mode, int *need);
/* The same for a block as the frames f[0, end) carry it (HEADERS and its CONTINUATIONs,
 * padding and priority taken off); -1 past L7_H2_BLOCK_MAX bytes (never decoded). */
int h2_reenc_frames_in(struct h2_reenc *r, const uint8_t *f, size_t end, int *need);
/* r->out as frames of stream sid (HEADERS, then CONTINUATION past 16,384 bytes), END_STREAM
 * when end_stream: a malloc'd buffer in *buf, its length returned (0: no memory). */
size_t h2_reenc_frames(const struct h2_reenc *r, uint32_t sid, int end_stream, char **buf);

/* Header mutations (l7/abi.h struct l7_decision) on a block: the names the decoder classifies
 * as wanted (the l7_wanted_* tables hpack.h reads; at most L7_MAX_WANTED, lower case), so that
 * r->del removes every field of the names it names, however the field came (Huffman, indexed,
 * a table reference); n = 0 before a block no mutation applies to. */
void h2_reenc_want(uint32_t n, const char *const *names);   /* (h2_refuse.c: the tables' owner) */
/* After the decode: a field appended to r->out as a literal without indexing, its name in
 * lower case (RFC 9113 8.2.1; names are case-insensitive, HTTP/1.1 keeps them as written). */
void h2_reenc_add(struct h2_reenc *r, const char *name, size_t nlen, const char *value, size_t vlen);

#endif
