/* The stdlib/bpf building blocks compiled for BPF, one XDP program each, driven by
 * BPF_PROG_TEST_RUN from test_bpf.c: inputs come from the t_in map (test_run packets are
 * limited), results go to t_out / t_req, and the loader compares them with the native
 * build of the same headers. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "base64url.h"
#include "hmac.h"
#include "http.h"
#include "xxhash.h"
#include "stdlib_kern.h"
#include "bpf/test_maps.h"

/* The policy-side symbols http.h reads; same names as the native tests (wanted.c). */
const __u32 l7_n_wanted = 4;
const __u8 l7_wanted_len[L7_MAX_WANTED] = { 4, 6, 13, 12 };
const char l7_wanted_name[L7_MAX_WANTED][L7_MAX_NAME] = {
	"user", "x-user", "authorization", "content-type",
};

ARRAY1(t_in, struct t_in);
ARRAY1(t_out, struct t_out);
ARRAY1(t_sha, struct l7_sha256);
ARRAY1(t_req, struct l7_req);
ARRAY1(t_chunk, struct l7_chunked);

SEC("xdp")
int t_sha256(struct xdp_md *ctx __attribute__((unused)))
{
	GET(t_in, struct t_in, in);
	GET(t_out, struct t_out, out);
	GET(t_sha, struct l7_sha256, sha);
	out->rc = l7_sha256(sha, in->data, 0, in->len, out->dig);
	return XDP_PASS;
}

SEC("xdp")
int t_sha256_stream(struct xdp_md *ctx __attribute__((unused)))
{
	GET(t_in, struct t_in, in);
	GET(t_out, struct t_out, out);
	GET(t_sha, struct l7_sha256, sha);
	if (in->op == T_SHA_INIT) {
		l7_sha256_init(sha);
		out->rc = 0;
	} else if (in->op == T_SHA_UPDATE) {
		out->rc = l7_sha256_update(sha, in->data, 0, in->len);
	} else {
		out->rc = l7_sha256_final(sha, in->data, 0, in->len, out->dig);
	}
	return XDP_PASS;
}

SEC("xdp")
int t_hmac(struct xdp_md *ctx __attribute__((unused)))
{
	GET(t_in, struct t_in, in);
	GET(t_out, struct t_out, out);
	GET(t_sha, struct l7_sha256, sha);
	out->rc = l7_hmac_sha256_setkey(sha, in->key, 0, in->klen);
	if (!out->rc)
		out->rc = l7_hmac_sha256(sha, in->data, 0, in->len, out->dig);
	return XDP_PASS;
}

SEC("xdp")
int t_b64dec(struct xdp_md *ctx __attribute__((unused)))
{
	GET(t_in, struct t_in, in);
	GET(t_out, struct t_out, out);
	out->rc = l7_b64url_decode(in->data, 0, in->len, out->data, 0, in->klen);
	return XDP_PASS;
}

SEC("xdp")
int t_b64enc(struct xdp_md *ctx __attribute__((unused)))
{
	GET(t_in, struct t_in, in);
	GET(t_out, struct t_out, out);
	out->rc = l7_b64url_encode(in->data, 0, in->len, out->data, 0, in->klen);
	return XDP_PASS;
}

SEC("xdp")
int t_xxh32(struct xdp_md *ctx __attribute__((unused)))
{
	GET(t_in, struct t_in, in);
	GET(t_out, struct t_out, out);
	out->h = l7_xxh32(in->data, 0, in->len, in->seed32);
	out->rc = 0;
	return XDP_PASS;
}

SEC("xdp")
int t_xxh64(struct xdp_md *ctx __attribute__((unused)))
{
	GET(t_in, struct t_in, in);
	GET(t_out, struct t_out, out);
	out->h = l7_xxh64(in->data, 0, in->len, in->seed64);
	out->rc = 0;
	return XDP_PASS;
}

SEC("xdp")
int t_http(struct xdp_md *ctx __attribute__((unused)))
{
	GET(t_in, struct t_in, in);
	GET(t_out, struct t_out, out);
	GET(t_req, struct l7_req, req);
	out->rc = l7_http_parse_head(req, in->len);
	return XDP_PASS;
}

SEC("xdp")
int t_chunked(struct xdp_md *ctx __attribute__((unused)))
{
	GET(t_in, struct t_in, in);
	GET(t_out, struct t_out, out);
	GET(t_req, struct l7_req, req);
	GET(t_chunk, struct l7_chunked, st);
	out->rc = l7_http_chunked(st, req->buf, in->klen, in->len);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
