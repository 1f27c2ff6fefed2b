/* alog.h: the access log's kernel half. At each request's decision, one record (l7/dataplane.h
 * struct l7_log_rec) into the l7_log ring buffer, which l7run drains into JSON lines
 * (runtime/alog.c, --access-log). A full buffer never blocks the data plane: the record is
 * dropped and counted (access_log_dropped). The maps of l7/maps.def must be declared first.
 *
 * A global function, like l7g_upstat: verified once, not once per path reaching a call. */
#ifndef L7_BPF_ALOG_H
#define L7_BPF_ALOG_H

#include "compat.h"
#include "l7/dataplane.h"

#define L7_LOG_VW(verdict, why, mode, status) \
	((__u32)(verdict) | (__u32)(why) << 4 | (__u32)(mode) << 8 | (__u32)(status) << 12)

#define L7_LOG_RA(rule, audit) (((__u32)(rule) & 0xffff) | (__u32)(audit) << 16)

static __always_inline int l7_log_on(void)
{
	__u32 zero = 0;
	struct l7_config *cfg = bpf_map_lookup_elem(&l7_config, &zero);

	return cfg && (cfg->flags & L7_CFG_LOG);
}

static __always_inline void l7_log_dropped(__u32 k)
{
	__u64 *v = bpf_map_lookup_elem(&l7_stats, &k);

	if (v)
		__sync_fetch_and_add(v, 1);
}

/* vw: L7_LOG_VW; port: the client's port | backend slot << 16; ra: L7_LOG_RA(rule, audit) as
 * in the decision; seq: 0, or the request's number for its response record (l7g_log_resp) */
__attribute__((noinline)) int l7g_log(__u64 conn, __u32 vw, __u32 port, __u32 ra, __u32 seq)
{
	__u32 zero = 0;
	struct l7_config *cfg = bpf_map_lookup_elem(&l7_config, &zero);
	struct l7_req *req;
	struct l7_log_rec *r;

	if (!cfg || !(cfg->flags & L7_CFG_LOG))
		return 0;
	if (cfg->log_sample > 1 && bpf_get_prandom_u32() % cfg->log_sample)
		return 0;
	req = bpf_map_lookup_elem(&l7_scratch, &zero);
	if (!req)
		return 0;
	r = bpf_ringbuf_reserve(&l7_log, sizeof(*r), 0);
	if (!r) {
		l7_log_dropped(L7_STAT_LOG_DROPPED);
		return 0;
	}
	r->ts_ns = bpf_ktime_get_ns();
	r->conn = conn;
	r->src_ip4 = req->src_ip4;
	r->src_port = port & 0xffff;
	r->dst_port = req->dst_port;
	r->service = req->service;
	struct l7_ident_key ik = { 32, req->src_ip4 };
	__u32 *id = bpf_map_lookup_elem(&l7_idents, &ik);
	r->caller = id ? *id : L7_LOG_NO_CALLER;
	r->mode = vw >> 8 & 15;
	r->verdict = vw & 15;
	r->why = vw >> 4 & 15;
	r->status = vw >> 12;
	r->upstream = port >> 16;
	r->rule = ra & 0xffff;
	r->audit = ra >> 16;
	r->seq = seq;
	r->head_len = req->head_len;
	r->body_len = req->body_len;
	r->flags = req->flags;
	r->jwt_err = (__u16)req->jwt_err;
	/* fixed-size copies at masked offsets (the buffer's slack keeps them inside req->buf) */
	_Static_assert(L7_LOG_PATH <= L7_BUF_SLACK, "the copies stay inside req->buf");
	r->method_len = (__u16)req->method_s.len;
	r->target_len = (__u16)req->target.len;
	r->host_len = (__u16)req->host.len;
	__builtin_memcpy(r->method, &req->buf[req->method_s.off & (L7_MAX_HEAD - 1)], L7_LOG_METHOD);
	__builtin_memcpy(r->target, &req->buf[req->target.off & (L7_MAX_HEAD - 1)], L7_LOG_PATH);
	__builtin_memcpy(r->host, &req->buf[req->host.off & (L7_MAX_HEAD - 1)], L7_LOG_HOST);
	bpf_ringbuf_submit(r, 0);
	return 0;
}

/* The end of the response to request `seq` of client connection `conn` (as l7g_log had them):
 * its final status and bytes. Sampled out requests have no record: l7run drops the response's. */
__attribute__((noinline)) int l7g_log_resp(__u64 conn, __u32 seq, __u32 status, __u32 bytes)
{
	struct l7_log_resp *r;

	if (!seq || !l7_log_on())
		return 0;
	r = bpf_ringbuf_reserve(&l7_log, sizeof(*r), 0);
	if (!r) {   /* its request's line goes without (access_log_no_response) */
		l7_log_dropped(L7_STAT_LOG_RESP_DROPPED);
		return 0;
	}
	r->ts_ns = bpf_ktime_get_ns();
	r->conn = conn;
	r->seq = seq;
	r->status = status;
	r->bytes = bytes;
	r->grpc_status = 0;
	r->pad = 0;
	bpf_ringbuf_submit(r, 0);
	return 0;
}

#endif
