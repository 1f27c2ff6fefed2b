// SPDX-License-Identifier: GPL-2.0
/* The send-path prototype's programs (bench/sendpath.py, issue #17 item 1): an SK_MSG program
 * that redirects what l7run-like user space writes into one socket straight out of another
 * (tcp_bpf_sendmsg_redir, inline in the writer's sendmsg), and an sk_skb verdict that redirects
 * what a socket receives out of another (sk_psock_skb_redirect: the psock backlog kworker).
 * Neither runs a policy: what they measure is the send path, the policy's cost is the same on
 * every path and is added from today's programs' bpf_stats. */
#include <linux/bpf.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_SOCKHASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, __u64);
} sp_socks SEC(".maps");

struct {                      /* sockets the verdict runs on */
	__uint(type, BPF_MAP_TYPE_SOCKHASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, __u64);
} sp_rsocks SEC(".maps");

struct {                      /* targets of the verdict's redirects (no programs of their own) */
	__uint(type, BPF_MAP_TYPE_SOCKHASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, __u64);
} sp_targets SEC(".maps");

struct {                      /* a socket's ports -> the sp_socks key of its redirect target */
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, __u64);
} sp_redir SEC(".maps");

struct {                      /* the same for the verdict: a socket's SK_MSG also runs on what
                               * the backlog sends out of it, so each program has its own */
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, __u64);
} sp_rredir SEC(".maps");

#include "sp.h"   /* struct sp_drop, shared with sp.c */

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sp_drop);
} sp_drop SEC(".maps");

struct {                      /* 0 msg runs, 1 msg redirects, 2 msg bytes, 3 skb runs, 4 skb redirects */
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 5);
	__type(key, __u32);
	__type(value, __u64);
} sp_count SEC(".maps");

/* A connection on loopback is named by its two ports: local << 16 | remote, host order (the
 * remote port is network order in the context, in its low or high half depending on the field). */
static __always_inline __u32 ports(__u32 local, __u32 remote)
{
	remote = remote >> 16 ? bpf_ntohl(remote) : bpf_ntohs((__u16)remote);
	return local << 16 | (remote & 0xffff);
}

static __always_inline void count(__u32 i, __u64 n)
{
	__u64 *v = bpf_map_lookup_elem(&sp_count, &i);
	if (v)
		*v += n;
}

SEC("sk_msg")
int sp_msg(struct sk_msg_md *msg)
{
	__u32 port = ports(msg->local_port, msg->remote_port);
	__u64 *to = bpf_map_lookup_elem(&sp_redir, &port);

	__u32 zero = 0;
	struct sp_drop *d = bpf_map_lookup_elem(&sp_drop, &zero);

	count(0, 1);
	count(2, msg->size);
	if (d && d->pass == ~0U) {
		__u64 k = d->discard;
		/* a verdict covers the next apply_bytes bytes, later writes' too, and the sk_msg's
		 * apply_bytes stays what the last run set: say this run's length */
		bpf_msg_apply_bytes(msg, msg->size);
		return k ? bpf_msg_redirect_hash(msg, &sp_socks, &k, BPF_F_INGRESS) : SK_DROP;
	}
	if (d && d->span_n) {
		__u32 i = d->span_i;
		if (i >= SP_SPAN || i >= d->span_n)
			return SK_DROP;
		d->span_i = i + 1;
		d->span_size[i] = msg->size;
		if (!bpf_msg_pull_data(msg, 0, 1, 0) && msg->data + 1 <= msg->data_end)
			d->span_first[i] = *(__u8 *)msg->data;
		bpf_msg_apply_bytes(msg, d->span_len[i]);
		if (d->span_redir & (1u << i)) {
			__u64 k = d->span_to;
			return bpf_msg_redirect_hash(msg, &sp_socks, &k, 0);
		}
		return SK_PASS;
	}
	if (d && d->pass) {
		__u32 n = d->pass;
		d->pass = ~0U;        /* this run passes n bytes; the program's next runs drop */
		bpf_msg_apply_bytes(msg, n);
		return SK_PASS;
	}
	if (!to)
		return SK_PASS;
	count(1, 1);
	return bpf_msg_redirect_hash(msg, &sp_socks, to, 0);
}

SEC("sk_skb/stream_verdict")
int sp_verdict(struct __sk_buff *skb)
{
	__u32 port = ports(skb->local_port, skb->remote_port);
	__u64 *to = bpf_map_lookup_elem(&sp_rredir, &port);

	count(3, 1);
	if (!to || !skb->len)
		return SK_PASS;
	count(4, 1);
	return bpf_sk_redirect_hash(skb, &sp_targets, to, 0);
}

char LICENSE[] SEC("license") = "GPL";
