#!/usr/bin/python3
"""A gRPC server and client without generated code (generic handlers, raw bytes), for the
captures of tests/h2/data/ (capture.py):
  grpc_peer.py server PORT      serves /l7.test.Echo/Unary (echo) and /l7.test.Echo/Sum
                                (client streaming: the total length), until killed
  grpc_peer.py client PORT      3 unary calls with metadata and a deadline, 1 client-streaming
                                call, one channel (one HTTP/2 connection)
"""
import sys
from concurrent import futures

import grpc

ident = (lambda b: b)


def server(port):
    def unary(req, ctx):
        ctx.set_trailing_metadata((("x-served-by", "grpc_peer"),))
        return req

    def total(it, ctx):
        return str(sum(len(m) for m in it)).encode()

    handler = grpc.method_handlers_generic_handler("l7.test.Echo", {
        "Unary": grpc.unary_unary_rpc_method_handler(unary, ident, ident),
        "Sum": grpc.stream_unary_rpc_method_handler(total, ident, ident),
    })
    s = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    s.add_generic_rpc_handlers((handler,))
    s.add_insecure_port("127.0.0.1:%d" % port)
    s.start()
    s.wait_for_termination()


def client(port):
    with grpc.insecure_channel("127.0.0.1:%d" % port) as ch:
        unary = ch.unary_unary("/l7.test.Echo/Unary", ident, ident)
        for i in range(3):
            r = unary(b"hello %d" % i, timeout=10,
                      metadata=(("authorization", "Bearer abc.def.ghi"), ("x-user", "alice")))
            assert r == b"hello %d" % i
        sm = ch.stream_unary("/l7.test.Echo/Sum", ident, ident)
        assert sm(iter([b"a" * 10, b"b" * 20]), timeout=10) == b"30"


if __name__ == "__main__":
    {"server": server, "client": client}[sys.argv[1]](int(sys.argv[2]))
