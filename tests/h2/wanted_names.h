/* The header names the h2 tests' "policy" reads (l7_wanted_*): every regular name the RFC 7541
 * examples, the generated blocks and the captures carry that a test checks, lower case.
 * One table for the native build (wanted.c) and the BPF object (bpf/h2_kern.c). */
#define T_N_WANTED 16
#define T_WANTED_NAME {                                                                      \
	"user-agent", "accept", "authorization", "content-type", "custom-key", "cache-control",    \
	"password", "date", "location", "content-encoding", "set-cookie", "grpc-timeout",         \
	"x-user", "cookie", "te", "grpc-message",                                                  \
}
#define T_WANTED_LEN { 10, 6, 13, 12, 10, 13, 8, 4, 8, 16, 10, 12, 6, 6, 2, 12 }
