/* The HTTP/2 building blocks (stdlib/bpf/h2.h, hpack.h, huffman.h) compiled for BPF, one XDP
 * program each, run with BPF_PROG_TEST_RUN by test_h2.c: inputs and state live in maps (a
 * test_run packet is limited in size), and the loader compares every result with the native
 * build of the same headers. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "h2.h"
#include "h2_kern.h"
#include "bpf/test_maps.h"

/* The policy-side names hpack.h matches (the same table as the native tests: wanted.c). */
#include "wanted_names.h"
const __u32 l7_n_wanted = T_N_WANTED;
const __u8 l7_wanted_len[L7_MAX_WANTED] = T_WANTED_LEN;
const char l7_wanted_name[L7_MAX_WANTED][L7_MAX_NAME] = T_WANTED_NAME;

ARRAY1(t_in, struct t_in);
ARRAY1(t_out, struct t_out);
ARRAY1(t_huffst, struct l7_huff);
ARRAY1(t_hp, struct l7_hpack);
ARRAY1(t_req, struct l7_req);
ARRAY1(t_conn, struct l7_h2_conn);
ARRAY1(t_buf, struct t_buf);
ARRAY1(t_ev, struct l7_h2_ev);

SEC("xdp")
int t_huff(struct xdp_md *ctx __attribute__((unused)))
{
	GET(t_in, struct t_in, in);
	GET(t_out, struct t_out, out);
	GET(t_huffst, struct l7_huff, h);
	out->rc = l7_huff_decode(h, in->data, 0, in->len, out->data, 0, T_HUFF_MAX);
	return XDP_PASS;
}

/* The block in t_hp (len, conn, mode set by the loader) into t_req / t_hp.msg. */
SEC("xdp")
int t_hpack(struct xdp_md *ctx __attribute__((unused)))
{
	GET(t_out, struct t_out, out);
	GET(t_hp, struct l7_hpack, d);
	GET(t_req, struct l7_req, req);
	out->rc = l7_hpack_decode(d, req);
	return XDP_PASS;
}

/* One scan of t_buf[t_ev.next .. t_in.len) with the connection t_conn. */
SEC("xdp")
int t_h2_scan(struct xdp_md *ctx __attribute__((unused)))
{
	GET(t_in, struct t_in, in);
	GET(t_out, struct t_out, out);
	GET(t_hp, struct l7_hpack, d);
	GET(t_conn, struct l7_h2_conn, c);
	GET(t_buf, struct t_buf, buf);
	GET(t_ev, struct l7_h2_ev, ev);
	out->rc = l7_h2_scan(c, d, buf->b, in->len, ev);
	return XDP_PASS;
}

/* What a data-plane entry point will do: scan, and decode a request whose block completed. */
SEC("xdp")
int t_h2_req(struct xdp_md *ctx __attribute__((unused)))
{
	GET(t_in, struct t_in, in);
	GET(t_out, struct t_out, out);
	GET(t_hp, struct l7_hpack, d);
	GET(t_req, struct l7_req, req);
	GET(t_conn, struct l7_h2_conn, c);
	GET(t_buf, struct t_buf, buf);
	GET(t_ev, struct l7_h2_ev, ev);
	out->rc = l7_h2_scan(c, d, buf->b, in->len, ev);
	out->rc2 = 0;
	if (out->rc == L7_H2_EV_HEADERS)
		out->rc2 = l7_h2_decode(c, d, req, in->mode);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
