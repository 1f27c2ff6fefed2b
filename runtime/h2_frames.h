/* h2_frames.h: the HTTP/2 frames l7run writes itself (RFC 9113 6), for the refusal
 * (h2_refuse.c) and the mesh relay (mesh_h2.c). Each writes into o and returns the bytes. */
#ifndef L7RUN_H2_FRAMES_H
#define L7RUN_H2_FRAMES_H

#include <stddef.h>
#include <stdint.h>

#define H2_ANSWER_MAX 512   /* bytes h2_answer writes at most */

size_t h2_frame(char *o, uint32_t len, uint8_t type, uint8_t flags, uint32_t stream);
size_t h2_goaway(char *o, uint32_t last, uint32_t code);
size_t h2_rst(char *o, uint32_t stream, uint32_t code);
size_t h2_window_update(char *o, uint32_t stream, uint32_t inc);
/* A SETTINGS frame of n (id, value) pairs. */
size_t h2_settings(char *o, const uint16_t *ids, const uint32_t *vals, int n);
/* l7run's answer to stream s: HEADERS `:status` + a DATA text ("<status> <why>\n"), or for a
 * gRPC call a trailers-only response (`:status 200`, grpc-status, grpc-message = why); then
 * RST_STREAM(NO_ERROR) unless the client had ended its side (end_stream), RFC 9113 8.1.
 * Literals without indexing: the client's decoder table is never touched. *data: the DATA
 * payload bytes written (flow-controlled), 0 for the gRPC form. */
size_t h2_answer(char *o, uint32_t s, int status, int grpc, unsigned grpc_status, const char *why,
		 int end_stream, size_t *data);

#endif
