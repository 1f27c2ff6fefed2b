/* A stream parser reading past the end of its context (struct __sk_buff): a refusal vmsg.def
 * has no sentence for ("invalid bpf_context access"), so the diagnostic must quote the
 * verifier's line as it is. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("sk_skb/stream_parser")
int l7_client_parser(struct __sk_buff *skb)
{
	return *(volatile int *)((char *)skb + 1000);   /* PAST THE CONTEXT */
}

char _license[] SEC("license") = "GPL";
