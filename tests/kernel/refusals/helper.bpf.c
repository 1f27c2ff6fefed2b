/* A stream parser that calls a helper only SK_MSG programs may call: the kernel refuses it
 * ("program of this type cannot use helper"), and l7run must say so at this file's line. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("sk_skb/stream_parser")
int l7_client_parser(struct __sk_buff *skb)
{
	if (skb->len > 4)
		bpf_msg_apply_bytes((void *)skb, 4);   /* REFUSED HERE */
	return (int)skb->len;
}

char _license[] SEC("license") = "GPL";
