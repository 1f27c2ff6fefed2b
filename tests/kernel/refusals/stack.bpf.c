/* A stream parser whose own stack (320 bytes) and its subprogram's (288) are each within the
 * kernel's 512 bytes but not together: the kernel refuses the call chain ("combined stack
 * size"), which LLVM cannot see (it checks one function at a time). */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

static __attribute__((noinline)) int l7_deep(struct __sk_buff *skb, int n)
{
	volatile char buf[288];
	for (int i = 0; i < 288; i += 32)
		buf[i] = (char)(n + i);
	if (bpf_skb_load_bytes(skb, 0, (void *)buf, 16))
		return 0;
	return buf[n & 255] + (int)skb->len;   /* STACK CALLEE */
}

SEC("sk_skb/stream_parser")
int l7_client_parser(struct __sk_buff *skb)
{
	volatile char head[320];
	for (int i = 0; i < 320; i += 32)
		head[i] = (char)i;
	return l7_deep(skb, head[skb->len & 255]);   /* STACK CALLER */
}

char _license[] SEC("license") = "GPL";
