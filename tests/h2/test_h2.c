/* The HTTP/2 building blocks (stdlib/bpf/h2.h, hpack.h, huffman.h), natively and in the
 * running kernel, on the vectors vectors.py writes (RFC 7541 Appendix C, Python hpack's
 * blocks, captures of curl / nghttp / h2load / grpcio, hostile cases):
 *   native/...  the native build against the expected results
 *   bpf/...     bpf/h2_kern.c in the kernel (BPF_PROG_TEST_RUN, XDP programs, state in maps)
 *             against the same expected results, and every result and every byte of state
 *             compared with the native build run on the same input; the verifier's
 *             processed instructions per program and ns per header block are printed.
 * The kernel tests need root (CAP_BPF) and fail rather than skip without it. */
#include <criterion/criterion.h>
#include <bpf/bpf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "h2.h"
#include "corpus.h"
#include "kobj.h"
#include "bpf/h2_kern.h"
#include "h2_reenc.h"

#ifndef H2_VECTORS
#define H2_VECTORS "h2vectors"
#endif
#ifndef H2_DATA
#define H2_DATA "data"
#endif
#ifndef L7_TEST_BPF_OBJ
#define L7_TEST_BPF_OBJ "h2_kern.bpf.o"
#endif

/* ---- results as text: the format vectors.py writes its expectations in --------------- */
static void esc(char **o, const __u8 *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		*o += p[i] >= 0x21 && p[i] <= 0x7e && p[i] != '\\' && p[i] != '|' ?
			      sprintf(*o, "%c", p[i]) : sprintf(*o, "\\x%02x", p[i]);
}

static const char *h2_err_name(__u32 c)
{
	switch (c) {
#define X(n, v) case v: return #n;
	L7_H2_ERRORS(X)
#undef X
	}
	return "?";
}

static const char *h2_slow_name(__u32 c)
{
	switch (c) {
#define X(n, v) case v: return #n;
	L7_H2_SLOW_REASONS(X)
#undef X
	}
	return "?";
}

static int rc_str(char *o, int rc)
{
	__u32 v = (__u32)-rc;

	if (rc >= 0)
		return sprintf(o, "ok");
	if (v & L7_H2_R_CONN)
		return sprintf(o, "conn:%s", h2_err_name(v & 0xff));
	if (v & L7_H2_R_STREAM)
		return sprintf(o, "stream:%s", h2_err_name(v & 0xff));
	if (v & L7_H2_R_SLOW)
		return sprintf(o, "slow:%s", h2_slow_name(v & 0xff));
	return sprintf(o, "rc%d", rc);
}

#include "wanted_names.h"
static const char t_wanted[L7_MAX_WANTED][L7_MAX_NAME] = T_WANTED_NAME;
static const char *const t_pseudo[] = {
#define X(n, v, s) s,
	L7_H2_PSEUDO(X)
#undef X
};

/* What a decoded block says, in vectors.py's summary() format. */
static void h2_summary(const struct l7_hpack *d, const struct l7_req *req, char *out)
{
	const struct l7_h2_msg *m = &d->msg;
	char *o = out;
#define SPAN(s) req->buf + (s).off, (s).len

	if (m->rc) {
		o += rc_str(o, m->rc);
		sprintf(o, "@%u", m->at);
		return;
	}
	o += sprintf(o, "ok");
	for (int p = 0; p < L7_H2_P_N; p++) {
		struct l7_span s = p == L7_H2_P_METHOD ? req->method_s :
				   p == L7_H2_P_SCHEME ? m->scheme :
				   p == L7_H2_P_AUTHORITY ? req->host :
				   p == L7_H2_P_PATH ? req->target :
				   p == L7_H2_P_STATUS ? m->status_s : m->protocol;

		if (!(m->pseudo & (1u << p)))
			continue;
		o += sprintf(o, " %s=", t_pseudo[p]);
		esc(&o, SPAN(s));
	}
	for (int i = 0; i < T_N_WANTED; i++) {
		if (!(req->hdr_present & (1u << i)))
			continue;
		o += sprintf(o, " %s=", t_wanted[i]);
		esc(&o, SPAN(req->hdr[i]));
		if (m->never & (1u << i))
			o += sprintf(o, "!");
	}
	/* a wanted header the block lacks reads "" (the request buffer is a per-CPU map that every
	 * stream shares: a value left by an earlier block would decide this one) */
	for (int i = 0; i < L7_MAX_WANTED; i++)
		if (!(req->hdr_present & (1u << i)) && req->hdr[i].len)
			o += sprintf(o, " stale:%d", i);
	o += sprintf(o, " n=%u never=%u", m->fields, m->n_never);
	if (m->flags & L7_H2_M_GRPC)
		o += sprintf(o, " grpc");
	if (m->flags & L7_H2_M_TE_TRAILERS)
		o += sprintf(o, " te");
	if (m->flags & L7_H2_M_CL)
		o += sprintf(o, " cl=%u", req->body_len);
	if (m->flags & L7_H2_M_GRPC_STATUS)
		o += sprintf(o, " grpc-status=%u", m->grpc_status);
	if (m->flags & L7_H2_M_UPDATE)
		o += sprintf(o, " update=%u", m->table_size);
	if (m->mode == L7_HPACK_REQUEST) {
		if (!(req->flags & L7_REQ_HTTP2))   /* request.protocol reads it: never in the expected texts */
			o += sprintf(o, " not-marked-http2");
		o += sprintf(o, " method=%u host=", req->method);
		esc(&o, SPAN(req->host));
		o += sprintf(o, " path=");
		esc(&o, SPAN(req->path));
		o += sprintf(o, " query=");
		esc(&o, SPAN(req->query));
	} else if (m->mode == L7_HPACK_RESPONSE) {
		o += sprintf(o, " status=%u", m->status);
	}
#undef SPAN
}

/* ---- two builds of the same code ------------------------------------------------------- */
struct h2_ops {
	const char *name;
	int (*huff)(const __u8 *in, __u32 len, __u8 *out);
	int (*hpack)(struct l7_hpack *d, struct l7_req *req);
	int (*scan)(struct l7_h2_conn *c, struct l7_hpack *d, const __u8 *buf, __u32 len,
		    struct l7_h2_ev *ev);
};

static struct l7_huff nhuff;

static int native_huff(const __u8 *in, __u32 len, __u8 *out)
{
	return l7_huff_decode(&nhuff, in, 0, len, out, 0, T_HUFF_MAX);
}

static int native_hpack(struct l7_hpack *d, struct l7_req *req)
{
	return l7_hpack_decode(d, req);
}

static int native_scan(struct l7_h2_conn *c, struct l7_hpack *d, const __u8 *buf, __u32 len,
		       struct l7_h2_ev *ev)
{
	return l7_h2_scan(c, d, buf, len, ev);
}

static const struct h2_ops native_ops = { "native", native_huff, native_hpack, native_scan };

/* The kernel: programs of bpf/h2_kern.c, loaded once. */
static const char *const progs[] = { "t_huff", "t_hpack", "t_h2_scan", "t_h2_req" };
enum { P_HUFF, P_HPACK, P_SCAN, P_REQ, NPROG };
static struct {
	int in, out, huffst, hp, req, conn, buf, ev;
} K;
static const struct kobj_fd maps[] = {
	{ "t_in", &K.in }, { "t_out", &K.out }, { "t_huffst", &K.huffst }, { "t_hp", &K.hp },
	{ "t_req", &K.req }, { "t_conn", &K.conn }, { "t_buf", &K.buf }, { "t_ev", &K.ev }, { 0 },
};
static struct kobj KO = { .path = L7_TEST_BPF_OBJ, .progs = progs, .n = NPROG, .maps = maps };
static const __u32 zero;

static void put(int fd, const void *v)
{
	cr_assert_eq(bpf_map_update_elem(fd, &zero, v, BPF_ANY), 0);
}

static void get(int fd, void *v)
{
	cr_assert_eq(bpf_map_lookup_elem(fd, &zero, v), 0);
}

static struct t_in tin;
static struct t_out tout;
static struct l7_hpack nd;     /* the native build's copies, for the comparisons */
static struct l7_req nreq;
static struct l7_h2_conn nconn;
static struct l7_h2_ev nev;
static __u8 nout[T_HUFF_MAX + L7_BUF_SLACK];
static long compared;

static int bpf_huff(const __u8 *in, __u32 len, __u8 *out)
{
	int nrc = native_huff(in, len, nout);

	kobj_load(&KO);
	tin.len = len;
	memcpy(tin.data, in, len);
	put(K.in, &tin);
	kobj_run(&KO, P_HUFF, 1);
	get(K.out, &tout);
	cr_assert_eq(tout.rc, nrc, "huffman: kernel %d, native %d", tout.rc, nrc);
	if (nrc > 0)
		cr_assert(!memcmp(tout.data, nout, (size_t)nrc), "huffman: output differs");
	memcpy(out, tout.data, nrc > 0 ? (size_t)nrc : 0);
	compared++;
	return tout.rc;
}

static int bpf_hpack(struct l7_hpack *d, struct l7_req *req)
{
	int nrc;

	kobj_load(&KO);
	nd = *d;
	nreq = *req;
	nrc = native_hpack(&nd, &nreq);
	put(K.hp, d);
	put(K.req, req);
	kobj_run(&KO, P_HPACK, 1);
	get(K.out, &tout);
	get(K.hp, d);
	get(K.req, req);
	cr_assert_eq(tout.rc, nrc, "hpack: kernel %d, native %d", tout.rc, nrc);
	cr_assert(!memcmp(d, &nd, sizeof nd), "hpack: decoder state differs from native");
	cr_assert(!memcmp(req, &nreq, sizeof nreq), "hpack: request differs from native");
	compared++;
	return tout.rc;
}

static struct t_buf tbuf;

static int bpf_scan(struct l7_h2_conn *c, struct l7_hpack *d, const __u8 *buf, __u32 len,
		    struct l7_h2_ev *ev)
{
	int nrc;

	kobj_load(&KO);
	nconn = *c;
	nd = *d;
	nev = *ev;
	nrc = native_scan(&nconn, &nd, buf, len, &nev);
	memcpy(tbuf.b, buf, sizeof tbuf.b);
	tin.len = len;
	put(K.in, &tin);
	put(K.buf, &tbuf);
	put(K.conn, c);
	put(K.hp, d);
	put(K.ev, ev);
	kobj_run(&KO, P_SCAN, 1);
	get(K.out, &tout);
	get(K.conn, c);
	get(K.hp, d);
	get(K.ev, ev);
	cr_assert_eq(tout.rc, nrc, "scan: kernel %d, native %d", tout.rc, nrc);
	cr_assert(!memcmp(c, &nconn, sizeof nconn), "scan: connection state differs from native");
	cr_assert(!memcmp(ev, &nev, sizeof nev), "scan: event differs from native");
	cr_assert(!memcmp(d, &nd, sizeof nd), "scan: header block differs from native");
	compared++;
	return tout.rc;
}

static const struct h2_ops bpf_ops = { "bpf", bpf_huff, bpf_hpack, bpf_scan };

/* ---- the vectors --------------------------------------------------------------------------- */
static void load(const char *file, struct tsv *t)
{
	char path[4096];

	snprintf(path, sizeof path, "%s/%s", H2_VECTORS, file);
	cr_assert_eq(tsv_load(path, t), 0, "%s: run vectors.py first (the h2.vectors test)", path);
}

static long hex(const char *s, __u8 *out, size_t cap)
{
	return strcmp(s, "-") ? hex_decode(s, out, cap) : 0;
}

static void run_huffman(const struct h2_ops *B)
{
	static __u8 in[T_HUFF_MAX], want[T_HUFF_MAX], out[T_HUFF_MAX + L7_BUF_SLACK];
	struct tsv t;
	int n = 0, bad = 0;

	load("huff.tsv", &t);
	for (int r = 0; r < t.nrows; r++) {
		long il = hex(tsv_get(&t, r, 1), in, sizeof in);
		const char *w = tsv_get(&t, r, 2);
		int rc;

		cr_assert_geq(il, 0);
		rc = B->huff(in, (__u32)il, out);
		if (!strcmp(w, "err")) {
			cr_expect_eq(rc, -1, "%s %s: decoding error expected, got %d", B->name,
				     tsv_get(&t, r, 0), rc);
			bad++;
		} else {
			long wl = hex(w, want, sizeof want);

			cr_expect_eq(rc, wl, "%s %s: length %d, want %ld", B->name,
				     tsv_get(&t, r, 0), rc, wl);
			if (rc == wl)
				cr_expect(!memcmp(out, want, (size_t)wl), "%s %s: bytes differ",
					  B->name, tsv_get(&t, r, 0));
		}
		n++;
	}
	/* the output bound: never past dcap, and told so */
	memset(in, 0x1f, 100);   /* 100 x 'a' */
	cr_expect_eq(l7_huff_decode(&nhuff, in, 0, 100, out, 0, 99), -2);
	cr_expect_eq(l7_huff_decode(&nhuff, in, 0, 100, out, 0, 100), 100);
	printf("%s huffman: %d strings (%d hostile), every code of RFC 7541 Appendix B\n", B->name,
	       n, bad);
	fflush(stdout);
	tsv_free(&t);
}

static struct l7_hpack hd;
static struct l7_req hreq;

static void run_blocks(const struct h2_ops *B)
{
	struct tsv t;
	char got[65536], seq[64] = "";
	__u32 conn = 0;
	int n = 0, fails = 0;

	load("blocks.tsv", &t);
	memset(&hreq, 0x5a, sizeof hreq);
	for (int r = 0; r < t.nrows; r++) {
		long c = atol(tsv_get(&t, r, 3));
		long bl;
		int rc;

		memset(hd.blk, 0xa5, sizeof hd.blk);
		bl = hex(tsv_get(&t, r, 4), hd.blk, L7_H2_BLOCK_MAX + 64);
		cr_assert_geq(bl, 0, "%s", tsv_get(&t, r, 1));
		/* conn -1: the state (and the table) the previous block of the same sequence left */
		if (c >= 0 || strcmp(seq, tsv_get(&t, r, 0))) {
			conn = c >= 0 ? (__u32)c : 0;
			memset(&hd.tab, 0, sizeof hd.tab);
		}
		snprintf(seq, sizeof seq, "%s", tsv_get(&t, r, 0));
		hd.len = (__u32)bl;
		hd.mode = (__u32)atoi(tsv_get(&t, r, 2));
		hd.conn = conn;
		rc = B->hpack(&hd, &hreq);
		conn = hd.conn;
		cr_assert_eq(rc, hd.msg.rc);
		h2_summary(&hd, &hreq, got);
		if (strcmp(got, tsv_get(&t, r, 5))) {
			cr_expect_fail("%s block %s:\n  got  %s\n  want %s", B->name, tsv_get(&t, r, 1),
				       got, tsv_get(&t, r, 5));
			fails++;
		}
		n++;
	}
	printf("%s hpack: %d header blocks (RFC 7541 Appendix C, Python hpack, hostile), %d differ\n",
	       B->name, n, fails);
	fflush(stdout);
	tsv_free(&t);
}

/* l7run's re-encoding (runtime/h2_reenc.c) of every block of blocks.tsv, the table kept as
 * run_blocks keeps it: the result is what hpack.h says of the block, and what it re-encodes
 * decodes, by a decoder that keeps no table, to the same fields (their names, values,
 * never-indexed marks and count: the summary, but the size update it drops) using only
 * static indexes and literals that do not index. */
static struct h2_reenc *re;
static struct l7_hpack rd;
static struct l7_req rreq;

/* 1 if the block holds only indexed static fields and literals without indexing or never
 * indexed with a static or literal name */
static int table_free(const __u8 *b, size_t n)
{
	for (size_t p = 0; p < n;) {
		__u32 v = 0, k, len;

		if (b[p] & 0x80) {
			k = l7_hpack_int(b + p, 0x7f, (__u32)(n - p), &v);
			if (!k || v > L7_HPACK_STATIC)
				return 0;
			p += k;
			continue;
		}
		if ((b[p] & 0xe0) == 0x20 || (b[p] & 0x40))
			return 0;   /* a size update, a literal that indexes */
		k = l7_hpack_int(b + p, 0x0f, (__u32)(n - p), &v);
		if (!k || v > L7_HPACK_STATIC)
			return 0;
		p += k;
		for (int s = v ? 1 : 0; s < 2; s++) {
			k = l7_hpack_int(b + p, 0x7f, (__u32)(n - p), &len);
			if (!k)
				return 0;
			p += k + len;
		}
	}
	return 1;
}

static void run_reenc(void)
{
	struct tsv t;
	char got[65536], want[65536], seq[64] = "";
	static __u8 blk[L7_H2_BLOCK_MAX + 64];
	int n = 0, redone = 0;
	char path[4096];
	FILE *out;

	load("blocks.tsv", &t);
	if (!re)
		re = h2_reenc_new();
	cr_assert(re);
	/* for vectors.py --check-reenc: Python's decoder reads every field, the summary some */
	snprintf(path, sizeof path, "%s/reenc.tsv", H2_VECTORS);
	out = fopen(path, "w");
	cr_assert(out, "%s", path);
	for (int r = 0; r < t.nrows; r++) {
		long c = atol(tsv_get(&t, r, 3));
		long bl = hex(tsv_get(&t, r, 4), blk, sizeof blk);
		int need, rc;
		char *u;

		if (c >= 0 || strcmp(seq, tsv_get(&t, r, 0))) {
			re->conn = c >= 0 ? (__u32)c : 0;
			memset(&re->d.tab, 0, sizeof re->d.tab);
		}
		snprintf(seq, sizeof seq, "%s", tsv_get(&t, r, 0));
		memset(&re->req, 0x5a, sizeof re->req);
		rc = h2_reenc_block(re, blk, (size_t)bl, (__u32)atoi(tsv_get(&t, r, 2)), &need);
		cr_assert_eq(rc, re->d.msg.rc);
		h2_summary(&re->d, &re->req, got);
		cr_assert_str_eq(got, tsv_get(&t, r, 5), "%s: decoded with the hook", tsv_get(&t, r, 1));
		if (rc)
			continue;
		cr_assert(!re->bad, "%s: re-encoded", tsv_get(&t, r, 1));
		cr_assert(table_free(re->out, re->len), "%s: the re-encoded block uses no table",
			  tsv_get(&t, r, 1));
		memcpy(rd.blk, re->out, re->len);
		rd.len = (__u32)re->len;
		rd.mode = re->d.mode;
		rd.conn = L7_H2_C_HP_UNKNOWN;   /* any table reference would fail it */
		memset(&rreq, 0x5a, sizeof rreq);
		cr_assert_eq(l7_hpack_decode(&rd, &rreq), 0, "%s: the re-encoded block decodes",
			     tsv_get(&t, r, 1));
		h2_summary(&rd, &rreq, got);
		snprintf(want, sizeof want, "%s", tsv_get(&t, r, 5));
		if ((u = strstr(want, " update=")))   /* dropped: the backend's table is not the client's */
			memmove(u, strchr(u + 1, ' '), strlen(strchr(u + 1, ' ')) + 1);
		cr_assert_str_eq(got, want, "%s: re-encoded, decoded without a table",
				 tsv_get(&t, r, 1));
		fprintf(out, "%d\t%s\t", r, tsv_get(&t, r, 1));
		for (size_t i = 0; i < re->len; i++)
			fprintf(out, "%02x", re->out[i]);
		fprintf(out, "\n");
		redone += need;
		n++;
	}
	fclose(out);
	printf("native reenc: %d blocks re-encoded and decoded without a table to the same fields "
	       "(%d needed it)\n", n, redone);
	fflush(stdout);
	tsv_free(&t);
}

/* The frames of one direction, chunk by chunk as they were received: scan, decode each
 * completed header block (as a request or trailers, or a response until a final status
 * came, then trailers), in the format of vectors.py's Oracle. */
#define MAXSTREAMS 64
static __u8 sbuf[L7_H2_BUF + L7_BUF_SLACK];
static struct l7_hpack sd;
static struct l7_req sreq;

static void transcript(const struct h2_ops *B, int client, __u8 **chunks, size_t *clen, int nch,
		       char *out)
{
	struct l7_h2_conn c;
	struct l7_h2_ev ev;
	__u32 len = 0, base = 0, final[MAXSTREAMS], nfinal = 0, frames = 0;
	char *o = out;
	int stop = 0;

	l7_h2_conn_init(&c, (client ? L7_H2_C_CLIENT : 0) | L7_H2_C_HP_PENDING);
	c.stop = 0;   /* only header blocks and errors */
	memset(&sd.tab, 0, sizeof sd.tab);   /* the connection's table: initial */
	memset(&ev, 0, sizeof ev);
	memset(sbuf, 0, sizeof sbuf);
	memset(&sreq, 0x5a, sizeof sreq);
	*o = 0;
	for (int k = 0; k < nch && !stop; k++) {
		size_t done = 0;

		while (done < clen[k] && !stop) {
			size_t n = clen[k] - done;

			if (len == L7_H2_BUF || (ev.next > L7_H2_BUF / 2 && len + n > L7_H2_BUF)) {
				/* make room: what was walked goes, offsets stay absolute */
				memmove(sbuf, sbuf + ev.next, len - ev.next);
				memset(sbuf + len - ev.next, 0, ev.next);
				base += ev.next;
				len -= ev.next;
				ev.next = 0;
			}
			if (n > L7_H2_BUF - len)
				n = L7_H2_BUF - len;
			memcpy(sbuf + len, chunks[k] + done, n);
			len += (__u32)n;
			done += n;
			for (;;) {
				int rc = B->scan(&c, &sd, sbuf, len, &ev);

				frames += ev.frames;
				if (rc == L7_H2_EV_MORE)
					break;
				if (rc == L7_H2_EV_LIMIT || rc == L7_H2_EV_FRAME)
					continue;
				if (rc < 0) {
					o += rc_str(o, rc);
					o += sprintf(o, "@%u", base + ev.off);
					stop = 1;
					break;
				}
				cr_assert_eq(rc, L7_H2_EV_HEADERS);
				{
					__u32 sid = ev.f.stream, fin = 0, mode;
					char s[65536];

					for (__u32 i = 0; i < nfinal; i++)
						fin |= final[i] == sid;
					mode = fin ? L7_HPACK_TRAILERS :
					       client ? L7_HPACK_REQUEST : L7_HPACK_RESPONSE;
					sd.mode = mode;
					sd.conn = c.flags & L7_H2_C_HPACK;
					B->hpack(&sd, &sreq);
					c.flags = (c.flags & ~L7_H2_C_HPACK) | (sd.conn & L7_H2_C_HPACK);
					h2_summary(&sd, &sreq, s);
					o += sprintf(o, "%u:%s || ", sid, s);
					if (!fin && nfinal < MAXSTREAMS &&
					    (client || sd.msg.rc || sd.msg.status >= 200))
						final[nfinal++] = sid;
					if (sd.msg.rc < 0 && ((__u32)-sd.msg.rc & L7_H2_R_CONN)) {
						o -= 4;
						*o = 0;
						stop = 1;
						break;
					}
				}
			}
		}
	}
	if (!stop)
		sprintf(o, "frames=%u", frames);
}

/* The same stream cut into chunks of `size` bytes: a frame split anywhere (the header, the
 * fixed fields, a fragment, a DATA payload passed through unread) gives the same transcript. */
static void transcript_cut(const struct h2_ops *B, int client, __u8 *data, size_t len,
			   size_t size, char *out)
{
	size_t n = (len + size - 1) / size;
	__u8 **chunks = malloc(sizeof *chunks * (n + 1));
	size_t *clen = malloc(sizeof *clen * (n + 1));

	for (size_t i = 0; i < n; i++) {
		chunks[i] = data + i * size;
		clen[i] = len - i * size < size ? len - i * size : size;
	}
	transcript(B, client, chunks, clen, (int)n, out);
	free(chunks);
	free(clen);
}

static void run_streams(const struct h2_ops *B)
{
	struct tsv t;
	static char got[1 << 20];
	int n = 0, fails = 0, caps = 0, cuts = 0;

	load("streams.tsv", &t);
	for (int r = 0; r < t.nrows; r++) {
		const char *src = tsv_get(&t, r, 2);
		__u8 *chunks[4096];
		size_t clen[4096];
		int nch = 0, client = !strcmp(tsv_get(&t, r, 1), "c");

		if (!strncmp(src, "hex:", 4)) {
			size_t hl = strlen(src + 4) / 2;

			chunks[0] = malloc(hl + 1);
			clen[0] = (size_t)hex_decode(src + 4, chunks[0], hl + 1);
			nch = 1;
		} else {
			/* cap:FILE:DIR - the capture's chunks of that direction */
			char path[4096], file[256], dir;
			size_t fl;
			char *text, *line, *save = NULL;

			cr_assert_eq(sscanf(src, "cap:%255[^:]:%c", file, &dir), 2, "%s", src);
			snprintf(path, sizeof path, "%s/%s", H2_DATA, file);
			text = (char *)read_file(path, &fl);
			cr_assert_not_null(text, "%s", path);
			for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
				if (line[0] != dir || line[1] != ' ')
					continue;
				cr_assert_lt(nch, 4096);
				clen[nch] = strlen(line + 2) / 2;
				chunks[nch] = malloc(clen[nch] + 1);
				cr_assert_eq((long)clen[nch], hex_decode(line + 2, chunks[nch], clen[nch] + 1));
				nch++;
			}
			free(text);
			caps++;
		}
		transcript(B, client, chunks, clen, nch, got);
		if (strcmp(got, tsv_get(&t, r, 3))) {
			cr_expect_fail("%s stream %s:\n  got  %s\n  want %s", B->name,
				       tsv_get(&t, r, 0), got, tsv_get(&t, r, 3));
			fails++;
		}
		/* natively, every stream also arrives 1, 2, 7 and 100 bytes at a time (in the
		 * kernel each scan copies the maps: the captures' own chunks do it there) */
		for (size_t k = 0; B == &native_ops && nch == 1 && k < 4; k++) {
			static const size_t sizes[] = { 1, 2, 7, 100 };

			transcript_cut(B, client, chunks[0], clen[0], sizes[k], got);
			if (strcmp(got, tsv_get(&t, r, 3))) {
				cr_expect_fail("%s stream %s, %zu bytes at a time:\n  got  %s\n  want %s",
					       B->name, tsv_get(&t, r, 0), sizes[k], got,
					       tsv_get(&t, r, 3));
				fails++;
			}
			cuts++;
		}
		for (int k = 0; k < nch; k++)
			free(chunks[k]);
		n++;
	}
	printf("%s h2: %d frame streams (%d directions of real captures, %d hostile; %d more cut "
	       "in pieces), %d differ\n", B->name, n, caps, n - caps, cuts, fails);
	fflush(stdout);
	tsv_free(&t);
}

/* The scan's events with the default stop set (every frame type but DATA): a server's
 * SETTINGS, PING, WINDOW_UPDATE, a response, a DATA frame cut by the end of the bytes (its
 * rest passes unread on the next call), an extension frame, RST_STREAM, GOAWAY. */
static void run_events(const struct h2_ops *B)
{
	static __u8 s[8192];
	size_t n = 0, cut;
	struct l7_h2_conn c;
	struct l7_h2_ev ev = { 0 };
	char got[512], *o = got;
#define FRAME(t, fl, sid, ...) do {                                                            \
		static const __u8 pl[] = { __VA_ARGS__ };                                      \
		__u32 l_ = sizeof pl - 1;                                                     \
		s[n++] = 0; s[n++] = (__u8)(l_ >> 8); s[n++] = (__u8)l_;                      \
		s[n++] = t; s[n++] = fl; s[n++] = 0; s[n++] = 0; s[n++] = 0; s[n++] = sid;     \
		memcpy(s + n, pl, l_); n += l_;                                                \
	} while (0)

	FRAME(4, 0, 0, 0, 5, 0, 0, 0x40, 0, 0);                 /* SETTINGS_MAX_FRAME_SIZE 16384 */
	FRAME(6, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 0);              /* PING */
	FRAME(8, 0, 0, 0, 0, 3, 0xe8, 0);                       /* WINDOW_UPDATE 1000 */
	FRAME(1, 4, 1, 0x88, 0);                                /* HEADERS :status 200 */
	s[n++] = 0; s[n++] = 0x13; s[n++] = 0x88;               /* DATA, 5,000 bytes */
	s[n++] = 0; s[n++] = 1; s[n++] = 0; s[n++] = 0; s[n++] = 0; s[n++] = 1;
	memset(s + n, 'd', 5000);
	n += 5000;
	cut = n - 1000;
	FRAME(0x10, 0, 0, 'x', 0);                              /* an extension type: ignored */
	FRAME(3, 0, 1, 0, 0, 0, 8, 0);                          /* RST_STREAM CANCEL */
	FRAME(7, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 'b', 'y', 'e', 0);  /* GOAWAY 1 NO_ERROR */
#undef FRAME
	l7_h2_conn_init(&c, L7_H2_C_HP_PENDING);
	memset(sbuf, 0, sizeof sbuf);
	memset(&sd, 0, sizeof sd);
	memcpy(sbuf, s, cut);
	for (int round = 0; round < 2; round++) {
		__u32 len = round ? (__u32)n : (__u32)cut;

		if (round)
			memcpy(sbuf + cut, s + cut, n - cut);
		for (;;) {
			int rc = B->scan(&c, &sd, sbuf, len, &ev);

			if (rc == L7_H2_EV_MORE) {
				o += sprintf(o, "more@%u/%u ", ev.next, c.skip);
				break;
			}
			cr_assert(rc == L7_H2_EV_FRAME || rc == L7_H2_EV_HEADERS, "rc %d", rc);
			o += sprintf(o, "%s%u:%u", rc == L7_H2_EV_HEADERS ? "H" : "F", ev.f.type, ev.f.stream);
			if (ev.f.type == L7_H2_SETTINGS)
				o += sprintf(o, "(%u,%d)", ev.f.value, (int)ev.f.value2);
			else if (ev.f.type == L7_H2_PING)
				o += sprintf(o, "(%llx)", (unsigned long long)ev.f.opaque);
			else if (ev.f.type == L7_H2_WINDOW_UPDATE || ev.f.type == L7_H2_RST_STREAM)
				o += sprintf(o, "(%u)", ev.f.value);
			else if (ev.f.type == L7_H2_GOAWAY)
				o += sprintf(o, "(%u,%u)", ev.f.value2, ev.f.value);
			o += sprintf(o, " ");
		}
	}
	cr_expect_str_eq(got, "F4:0(1,-1) F6:0(807060504030201) F8:0(1000) H1:1 more@4064/1000 "
			      "F16:0 F3:1(8) F7:0(1,0) more@5107/0 ",
			 "%s: events: %s", B->name, got);
	cr_expect_eq(c.frames, 8);
}

/* ---- the tests ----------------------------------------------------------------------------- */
Test(native, huffman) { run_huffman(&native_ops); }
Test(native, hpack_blocks) { run_blocks(&native_ops); }
Test(native, reenc) { run_reenc(); }
Test(native, frame_streams) { run_streams(&native_ops); }
Test(native, scan_events) { run_events(&native_ops); }

Test(native, static_table)
{
	struct tsv t;

	load("static.tsv", &t);
	cr_assert_eq(t.nrows, L7_HPACK_STATIC);
	for (int r = 0; r < t.nrows; r++) {
		int i = atoi(tsv_get(&t, r, 0));
		const char *v = tsv_get(&t, r, 2);

		if (!strcmp(v, "-"))
			v = "";
		cr_expect_str_eq(l7_hpack_sname[i], tsv_get(&t, r, 1), "static name %d", i);
		cr_expect_str_eq(l7_hpack_sval[i], v, "static value %d", i);
		cr_expect_eq(l7_hpack_snlen[i], strlen(tsv_get(&t, r, 1)));
		cr_expect_eq(l7_hpack_svlen[i], strlen(v));
	}
	tsv_free(&t);
}

Test(native, preface)
{
	static const char pre[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
	__u8 b[64] = { 0 };

	memcpy(b, pre, 24);
	cr_expect_eq(l7_h2_preface(b, 24), 24);
	for (__u32 n = 0; n < 24; n++)
		cr_expect_eq(l7_h2_preface(b, n), 0, "a prefix of %u bytes", n);
	memcpy(b, "GET / HTTP/1.1\r\n\r\n", 18);
	cr_expect_eq(l7_h2_preface(b, 18), -1);
	cr_expect_eq(l7_h2_preface(b, 1), -1);
	memcpy(b, "PRI * HTTP/1.1\r\n", 16);
	cr_expect_eq(l7_h2_preface(b, 10), 0);
	cr_expect_eq(l7_h2_preface(b, 13), -1);
}

Test(bpf, verifier)
{
	kobj_load(&KO);
	for (int i = 0; i < NPROG; i++) {
		printf("verifier: %-10s processed %ld insns, %ld us\n", progs[i], KO.insns[i],
		       KO.usec[i]);
		cr_expect_gt(KO.insns[i], 0);
	}
	fflush(stdout);
}

Test(bpf, huffman) { run_huffman(&bpf_ops); }
Test(bpf, scan_events) { run_events(&bpf_ops); }

Test(bpf, hpack_blocks)
{
	run_blocks(&bpf_ops);
	printf("bpf hpack: %ld kernel runs identical to native (results, decoder state, request)\n",
	       compared);
}

Test(bpf, frame_streams)
{
	run_streams(&bpf_ops);
	printf("bpf h2: %ld kernel runs identical to native (results, connection, event, block)\n",
	       compared);
}

/* The combined entry point (scan + decode a request: what a data-plane program will run) on
 * every capture's client direction, against the two-step path of the transcript. */
Test(bpf, scan_and_decode)
{
	static const char *const caps[] = { "grpc.h2cap", "h2load.h2cap", "curl.h2cap",
					    "curl_post.h2cap", "nghttp.h2cap" };
	int blocks = 0;

	kobj_load(&KO);
	for (size_t k = 0; k < sizeof caps / sizeof caps[0]; k++) {
		char path[4096], *text, *line, *save = NULL;
		size_t fl;
		struct l7_h2_conn c;
		struct l7_h2_ev ev = { 0 };

		snprintf(path, sizeof path, "%s/%s", H2_DATA, caps[k]);
		text = (char *)read_file(path, &fl);
		cr_assert_not_null(text);
		memset(&tbuf, 0, sizeof tbuf);
		tin.len = 0;
		for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
			if (line[0] == 'c' && line[1] == ' ')
				tin.len += (__u32)hex_decode(line + 2, tbuf.b + tin.len,
							     L7_H2_BUF - tin.len);
		free(text);
		l7_h2_conn_init(&c, L7_H2_C_CLIENT | L7_H2_C_HP_PENDING);
		c.stop = 0;
		nconn = c;
		memset(&nd, 0, sizeof nd);
		memset(&nreq, 0x5a, sizeof nreq);
		put(K.conn, &c);
		put(K.hp, &nd);
		put(K.req, &nreq);
		put(K.ev, &ev);
		put(K.buf, &tbuf);
		tin.mode = L7_HPACK_REQUEST;
		put(K.in, &tin);
		nev = ev;
		for (int i = 0; i < 100; i++) {
			int nrc = l7_h2_scan(&nconn, &nd, tbuf.b, tin.len, &nev), nrc2 = 0;

			if (nrc == L7_H2_EV_HEADERS)
				nrc2 = l7_h2_decode(&nconn, &nd, &nreq, L7_HPACK_REQUEST);
			kobj_run(&KO, P_REQ, 1);
			get(K.out, &tout);
			cr_assert_eq(tout.rc, nrc, "%s: scan %d, native %d", caps[k], tout.rc, nrc);
			cr_assert_eq(tout.rc2, nrc2, "%s: decode %d, native %d", caps[k], tout.rc2, nrc2);
			get(K.conn, &c);
			get(K.hp, &hd);
			get(K.req, &hreq);
			cr_assert(!memcmp(&c, &nconn, sizeof c), "%s: connection differs", caps[k]);
			cr_assert(!memcmp(&hd, &nd, sizeof hd), "%s: decoder differs", caps[k]);
			cr_assert(!memcmp(&hreq, &nreq, sizeof hreq), "%s: request differs", caps[k]);
			blocks += nrc == L7_H2_EV_HEADERS;
			if (nrc <= 0)
				break;
		}
	}
	cr_expect_geq(blocks, 12);
	printf("bpf t_h2_req: %d request blocks of 5 captures scanned and decoded in one program, "
	       "identical to native\n", blocks);
}

static double native_ns(struct l7_hpack *d, struct l7_req *req, int reps)
{
	struct timespec a, b;
	struct l7_hpack *w = malloc(sizeof *w);

	clock_gettime(CLOCK_MONOTONIC, &a);
	for (int i = 0; i < reps; i++) {
		memcpy(w, d, offsetof(struct l7_hpack, blk) + d->len);
		l7_hpack_decode(w, req);
	}
	clock_gettime(CLOCK_MONOTONIC, &b);
	free(w);
	return ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / reps;
}

/* ns per header block: BPF_PROG_TEST_RUN's average over repeated runs of typical blocks
 * (each run decodes the block from the start: the state is reset by the decoder itself). */
Test(bpf, timing)
{
	struct tsv t;

	load("timing.tsv", &t);
	kobj_load(&KO);
	for (int r = 0; r < t.nrows; r++) {
		long bl;
		__u32 ns;

		memset(&hd, 0, sizeof hd);
		bl = hex(tsv_get(&t, r, 3), hd.blk, L7_H2_BLOCK_MAX);
		hd.len = (__u32)bl;
		hd.mode = (__u32)atoi(tsv_get(&t, r, 1));
		hd.conn = (__u32)atoi(tsv_get(&t, r, 2));
		memset(&hreq, 0, sizeof hreq);
		put(K.hp, &hd);
		put(K.req, &hreq);
		ns = kobj_run(&KO, P_HPACK, 2000);
		get(K.out, &tout);
		cr_expect_eq(tout.rc, 0, "%s decodes", tsv_get(&t, r, 0));
		get(K.hp, &nd);
		printf("bpf hpack: %-28s %4ld bytes, %2u fields, %2u Huffman strings: %5u ns in the "
		       "kernel, %6.0f ns native\n", tsv_get(&t, r, 0), bl, nd.msg.fields,
		       nd.msg.n_huff, ns, native_ns(&hd, &hreq, 20000));
	}
	fflush(stdout);
	tsv_free(&t);
}
