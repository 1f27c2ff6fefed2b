/* stdlib/bpf/jwt.h compiled for BPF, driven by BPF_PROG_TEST_RUN from test_jwt_bpf.c: the
 * request vector comes in t_req (prepared by the native parser), the configuration and the
 * time in t_in; the maps jwt.h uses are defined here under their l7/maps.def names. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <l7/dataplane.h>
#include "jwt_kern.h"
#include "bpf/test_maps.h"

#define MAP(name, mtype, kt, vt, n)                                \
	struct {                                                   \
		__uint(type, mtype);                               \
		__uint(max_entries, n);                            \
		__type(key, kt);                                   \
		__type(value, vt);                                 \
	} name SEC(".maps")

MAP(l7_jwt_keys, BPF_MAP_TYPE_ARRAY, __u32, struct l7_jwt_key, L7_MAX_JWT);
MAP(l7_jwt_cache, BPF_MAP_TYPE_LRU_HASH, struct l7_jwt_cache_key, struct l7_jwt_cached, L7_JWT_CACHE_ENTRIES);
MAP(l7_jwt_clock, BPF_MAP_TYPE_ARRAY, __u32, __s64, 1);
MAP(l7_jwt_work, BPF_MAP_TYPE_PERCPU_ARRAY, __u32, __u8[L7_JWT_WORK], 1);
MAP(l7_stats, BPF_MAP_TYPE_PERCPU_ARRAY, __u32, __u64, L7_STAT_MAX);
MAP(t_req, BPF_MAP_TYPE_ARRAY, __u32, struct l7_req, 1);
MAP(t_in, BPF_MAP_TYPE_ARRAY, __u32, struct t_jwt_in, 1);
MAP(t_out, BPF_MAP_TYPE_ARRAY, __u32, struct t_jwt_out, 1);

static __s64 t_now(void);
#define L7_JWT_NOW() t_now()
#include "jwt.h"
#include "../jwt_tables.h"

static __always_inline __s64 t_now(void)
{
	__u32 zero = 0;
	struct t_jwt_in *in = bpf_map_lookup_elem(&t_in, &zero);
	return in && in->now ? in->now : l7_jwt_now_real();
}


static __always_inline void t_report(struct t_jwt_out *out, struct l7_req *req, long rc)
{
	out->rc = rc;
	out->jwt_done = req->jwt_done;
	out->jwt_ok = req->jwt_ok;
	for (int i = 0; i < L7_MAX_CLAIMS; i++)
		out->claim[i] = req->claim[i];
}

/* What the generated policy runs: l7_jwt_check with a fresh request. */
SEC("xdp")
int t_jwt_check(struct xdp_md *ctx __attribute__((unused)))
{
	GET(t_in, struct t_jwt_in, in);
	GET(t_out, struct t_jwt_out, out);
	GET(t_req, struct l7_req, req);
	req->jwt_done = req->jwt_ok = 0;
	t_report(out, req, l7_jwt_check(req, in->cfg));
	return XDP_PASS;
}

/* The same with a constant configuration, as the generated policy calls it: the verifier
 * cost a policy pays per jwt_valid(NAME). */
SEC("xdp")
int t_jwt_check0(struct xdp_md *ctx __attribute__((unused)))
{
	GET(t_out, struct t_jwt_out, out);
	GET(t_req, struct l7_req, req);
	req->jwt_done = req->jwt_ok = 0;
	t_report(out, req, l7_jwt_check(req, 0));
	return XDP_PASS;
}

/* The reason code, without (cold) and with the cache. */
SEC("xdp")
int t_jwt_cold(struct xdp_md *ctx __attribute__((unused)))
{
	GET(t_in, struct t_jwt_in, in);
	GET(t_out, struct t_jwt_out, out);
	GET(t_req, struct l7_req, req);
	t_report(out, req, l7__jwt_verify(req, in->cfg, L7_JWT_NO_LOOKUP));
	return XDP_PASS;
}

SEC("xdp")
int t_jwt_cached(struct xdp_md *ctx __attribute__((unused)))
{
	GET(t_in, struct t_jwt_in, in);
	GET(t_out, struct t_jwt_out, out);
	GET(t_req, struct l7_req, req);
	t_report(out, req, l7__jwt_verify(req, in->cfg, 0));
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
