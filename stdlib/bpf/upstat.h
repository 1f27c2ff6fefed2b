/* upstat.h: telemetry per upstream (l7_upstat, l7/dataplane.h): responses by status class and
 * the bytes on the upstream connection, counted where they pass (gateway.h: the pool socket's
 * SK_MSG for requests, its parser and verdict for responses; mesh.h: the request's redirect
 * and l7run's writes on its pool ends, the backend's SK_MSG for responses). The maps of
 * l7/maps.def must be declared first (gateway.h does). */
#ifndef L7_BPF_UPSTAT_H
#define L7_BPF_UPSTAT_H

#include "compat.h"
#include "l7/dataplane.h"

/* Count for upstream `up`: one response of `status` (0: none), `req` request bytes, `resp`
 * response bytes. Atomic adds on this CPU's value: no other CPU writes it, but a softirq
 * (sk_skb) can interrupt a process-context SK_MSG run on the same CPU, and an exact count
 * must not lose that update.
 *
 * A global function, like l7g_msg_edit: verified once, not once per path reaching a call
 * (the mesh SK_MSG program reaches its calls on hundreds of paths). */
__attribute__((noinline)) int l7g_upstat(__u32 up, __u32 status, __u32 req, __u32 resp)
{
	__u32 key = up;
	struct l7_upstat *v;

	if (key >= L7_MAX_UPSTREAMS)
		return 0;   /* the local row is l7run's */
	v = bpf_map_lookup_elem(&l7_upstat, &key);
	if (!v)
		return 0;
	if (status) {
		/* status[0..5], req_bytes, resp_bytes: eight u64, so a masked index stays inside */
		_Static_assert(sizeof(*v) == 8 * sizeof(__u64), "struct l7_upstat is eight counters");
		__u32 cls = status - 100 < 500 ? status / 100 : 0;
		__sync_fetch_and_add(&((__u64 *)v)[l7_mask(cls, 7)], 1);
	}
	if (req)
		__sync_fetch_and_add(&v->req_bytes, req);
	if (resp)
		__sync_fetch_and_add(&v->resp_bytes, resp);
	return 0;
}

#endif
