/* gRPC status codes (grpc/doc/statuscodes.md) and the one mapping from the HTTP status of an
 * answer l7c or l7run writes itself (a Deny, a refusal, 503 for an empty set) to the gRPC
 * status of the trailers-only response a gRPC client gets instead. Every stage that writes or
 * names a gRPC status (language, evaluator, data plane, l7run, access log) reads this header.
 * Plain C, fixed-width types only: it compiles for the host and for BPF. */
#ifndef L7_GRPC_H
#define L7_GRPC_H

#include <linux/types.h>

/* X(NAME, code) */
#define L7_GRPC_STATUSES(X)                                                                    \
	X(OK, 0) X(CANCELLED, 1) X(UNKNOWN, 2) X(INVALID_ARGUMENT, 3) X(DEADLINE_EXCEEDED, 4)    \
	X(NOT_FOUND, 5) X(ALREADY_EXISTS, 6) X(PERMISSION_DENIED, 7) X(RESOURCE_EXHAUSTED, 8)   \
	X(FAILED_PRECONDITION, 9) X(ABORTED, 10) X(OUT_OF_RANGE, 11) X(UNIMPLEMENTED, 12)       \
	X(INTERNAL, 13) X(UNAVAILABLE, 14) X(DATA_LOSS, 15) X(UNAUTHENTICATED, 16)
enum l7_grpc_status {
#define L7__X(n, v) L7_GRPC_##n = v,
	L7_GRPC_STATUSES(L7__X)
#undef L7__X
};

/* Its name ("PERMISSION_DENIED"), or NULL past the table. */
static inline const char *l7_grpc_status_name(unsigned code)
{
	static const char *const names[] = {
#define L7__X(n, v) [v] = #n,
		L7_GRPC_STATUSES(L7__X)
#undef L7__X
	};
	return code < sizeof(names) / sizeof(names[0]) ? names[code] : 0;
}

/* The gRPC status of our own answer with HTTP status `http` when the policy names none:
 * gRPC's HTTP-to-gRPC mapping (doc/http-grpc-status-mapping.md), except that 429 (a rate
 * limit) is RESOURCE_EXHAUSTED, as Envoy's rate-limit filter answers gRPC callers. */
static inline __u8 l7_grpc_status_of_http(__u16 http)
{
	switch (http) {
	case 400: return L7_GRPC_INTERNAL;
	case 401: return L7_GRPC_UNAUTHENTICATED;
	case 403: return L7_GRPC_PERMISSION_DENIED;
	case 404: return L7_GRPC_UNIMPLEMENTED;
	case 413: case 414: case 431: case 429: return L7_GRPC_RESOURCE_EXHAUSTED;
	case 502: case 503: case 504: return L7_GRPC_UNAVAILABLE;
	default: return L7_GRPC_UNKNOWN;
	}
}

/* A decision's gRPC status (l7_decision.grpc, ir_rule.grpc): 1 + the status the policy named,
 * or 0 for the one of its HTTP status. */
static inline __u8 l7_grpc_status_of(__u32 named, __u16 http)
{
	return named ? (__u8)(named - 1) : l7_grpc_status_of_http(http);
}

#endif
