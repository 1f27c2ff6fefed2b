#!/usr/bin/python3
"""gRPC pieces of bench/h2.py (ghz is not packaged): an echo server and a bounded unary load
loop, both grpcio with generic handlers (no .proto to build).

  h2_grpc.py server NAME PORT
      serves every /SERVICE/METHOD unary call with NAME + ":" + request (so a reply says which
      upstream answered) until SIGTERM.
  h2_grpc.py load PORT PROCS SECS CALL[,CALL...]
      PROCS processes, each with one channel (one HTTP/2 connection) and one call in flight,
      cycle through the CALLs (/SERVICE/METHOD) for SECS seconds; prints one JSON line:
      {"calls": N, "ok": N, "codes": {CODE: N}, "lat_us": [p50, p99], "secs": S}.
  h2_grpc.py call PORT CALL
      one call: prints "OK reply" or "CODE details" (the sanity check)."""
import json
import multiprocessing
import sys
import time


def ident(b):
    return b


def server(name, port):
    from concurrent import futures
    import grpc

    def unary(req, _ctx):
        return name.encode() + b":" + req

    class Any(grpc.GenericRpcHandler):
        def service(self, _details):
            return grpc.unary_unary_rpc_method_handler(unary, ident, ident)

    s = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    s.add_generic_rpc_handlers((Any(),))
    s.add_insecure_port("127.0.0.1:%s" % port)
    s.start()
    s.wait_for_termination()


def worker(port, secs, calls, q):
    import grpc
    lat, codes, ok = [], {}, 0
    with grpc.insecure_channel("127.0.0.1:%s" % port) as ch:
        stubs = [ch.unary_unary(c, ident, ident) for c in calls]
        try:   # connected before the clock starts
            grpc.channel_ready_future(ch).result(timeout=5)
        except grpc.FutureTimeoutError:
            q.put((0, [], {"CONNECT": 1}))
            return
        end = time.monotonic() + secs
        i = 0
        while True:
            t0 = time.monotonic()
            if t0 >= end:
                break
            try:
                stubs[i % len(stubs)](b"x", timeout=5)
                ok += 1
            except grpc.RpcError as e:
                codes[e.code().name] = codes.get(e.code().name, 0) + 1
            lat.append(time.monotonic() - t0)
            i += 1
    q.put((ok, lat, codes))


def load(port, nprocs, secs, calls):
    q = multiprocessing.Queue()
    ps = [multiprocessing.Process(target=worker, args=(port, secs, calls, q)) for _ in range(nprocs)]
    t0 = time.monotonic()
    for p in ps:
        p.start()
    got = [q.get(timeout=secs + 30) for _ in ps]
    for p in ps:
        p.join(10)
    lat = sorted(x for _, l, _ in got for x in l)
    codes = {}
    for _, _, c in got:
        for k, v in c.items():
            codes[k] = codes.get(k, 0) + v
    pct = (lambda f: round(lat[min(len(lat) - 1, int(f * len(lat)))] * 1e6)) if lat else (lambda f: 0)
    print(json.dumps({"calls": len(lat), "ok": sum(o for o, _, _ in got), "codes": codes,
                      "lat_us": [pct(0.5), pct(0.99)], "secs": secs, "wall": time.monotonic() - t0}))


def call(port, c):
    import grpc
    with grpc.insecure_channel("127.0.0.1:%s" % port) as ch:
        try:
            print("OK " + ch.unary_unary(c, ident, ident)(b"x", timeout=5).decode())
        except grpc.RpcError as e:
            print("%s %s" % (e.code().name, e.details()))


if __name__ == "__main__":
    what = sys.argv[1]
    if what == "server":
        server(sys.argv[2], sys.argv[3])
    elif what == "load":
        load(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5].split(","))
    elif what == "call":
        call(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
