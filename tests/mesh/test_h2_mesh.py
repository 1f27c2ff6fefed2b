#!/usr/bin/python3
"""HTTP/2 (h2c, prior knowledge) through mesh mode, each stream decided in the kernel at its
HEADERS (issue 14; stdlib/bpf/mesh_h2.h, runtime/mesh_h2.c). Real clients and servers: curl
--http2-prior-knowledge, nghttp (several URIs on one connection), h2load, a grpcio client, and
raw frames; an h2c nghttpd and a grpcio server as the upstreams, in the cgroup. Allowed streams
reach their upstream (and the answer comes back on their own stream), a denied one gets l7run's
answer (403, or gRPC PERMISSION_DENIED trailers-only) while the connection's other streams go on;
blocks that refer to the client's HPACK dynamic table (nghttp and h2load as they come, raw
frames that insert with one stream and reference from another) are decided by what the table
says, denies included, and reach the backend re-encoded; a reference past the table is a
COMPRESSION_ERROR; the backend's log never shows a denied path; per-stream telemetry in l7run's
metrics and stats.
Needs root; never skips.

usage: test_h2_mesh.py L7C L7RUN"""
import hashlib
import os
import re
import socket
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "common"))
from check import run_checks  # noqa: E402
from policy import policy  # noqa: E402
from procs import CG_ROOT, cgroup_remove, l7run_stats, serving  # noqa: E402
from h2frames import (PREFACE, DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION,  # noqa: E402
                      fr, frames, block, answers, read_until, idx, lit_inc, update)

L7C, L7RUN = sys.argv[1:3]
PID = os.getpid()
BASE = 24000 + (PID % 500) * 6   # ports unique per run (test_h2_refuse.py: 22000-23999)
SVC, PA, PB, PG, METRICS, PH = BASE, BASE + 1, BASE + 2, BASE + 3, BASE + 4, BASE + 5
CG = os.path.join(CG_ROOT, "l7h2m-test-%d" % PID)
PIN = "/sys/fs/bpf/l7h2m-test-%d" % PID
TMP = tempfile.mkdtemp(prefix="l7h2m-")
REFUSED_STREAM = 7

# a: nghttpd serving docs/a, b: nghttpd serving docs/b, g: the gRPC server (all h2c, --h2c),
# h1: an HTTP/1.1 server
POLICY = policy("h2m", SVC, [("a", PA), ("b", PB), ("g", PG), ("h1", PH)], """\
  if (starts_with(request.path, "/admin")) {
    Deny(request, 403);
  } else if (request.grpc_method == "Forbidden") {
    DenyGrpc(request, 403, PERMISSION_DENIED);
  } else if (request.grpc_method == "Mutated") {
    SetHeader(request, "x-via", "l7c");
    Route(request, g);
  } else if (request.is_grpc) {
    Route(request, g);
  } else if (starts_with(request.path, "/h1/")) {
    Route(request, h1);
  } else if (starts_with(request.path, "/b/")) {
    Route(request, b);
  } else if (starts_with(request.path, "/a/m/")) {
    RemoveHeader(request, "x-secret");
    SetHeader(request, "x-forwarded-proto", "h2c");
    AddHeader(request, "X-Tag", "one");
    AddHeader(request, "x-tag", "two");
    RemoveHeader(response, "server");
    SetHeader(response, "x-content-type-options", "nosniff");
    Route(request, a);
  } else {
    Route(request, a);
  }
""", acts=("HttpRequest request", "HttpResponse response"))

GRPC_SERVER = r"""
import sys
from concurrent import futures
import grpc
ident = lambda b: b
def unary(req, ctx):
    return b"echo:" + req
def mutated(req, ctx):   # what reached it: the metadata the mesh added
    return b"via:" + ",".join(v for k, v in ctx.invocation_metadata() if k == "x-via").encode()
h = grpc.method_handlers_generic_handler("l7.test.Echo", {
    "Unary": grpc.unary_unary_rpc_method_handler(unary, ident, ident),
    "Mutated": grpc.unary_unary_rpc_method_handler(mutated, ident, ident),
    "Forbidden": grpc.unary_unary_rpc_method_handler(unary, ident, ident)})
s = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
s.add_generic_rpc_handlers((h,))
s.add_insecure_port("127.0.0.1:%s" % sys.argv[1])
s.start()
s.wait_for_termination()
"""

GRPC_CLIENT = r"""
import sys, grpc
ident = lambda b: b
out = []
with grpc.insecure_channel("127.0.0.1:%s" % sys.argv[1]) as ch:   # one channel: one connection
    for m in ("Unary", "Forbidden", "Unary", "Mutated"):
        try:
            out.append("OK " + ch.unary_unary("/l7.test.Echo/" + m, ident, ident)(b"hi-" + m.encode(), timeout=8).decode())
        except grpc.RpcError as e:
            out.append("%s %s" % (e.code().name, e.details()))
print("\n".join(out))
"""


GRPC_BIG = r"""
import hashlib, os, sys, grpc
ident = lambda b: b
msg = os.urandom(1 << 20)
with grpc.insecure_channel("127.0.0.1:%s" % sys.argv[1]) as ch:
    got = ch.unary_unary("/l7.test.Echo/Unary", ident, ident)(msg, timeout=20)
print(hashlib.sha256(b"echo:" + msg).hexdigest() == hashlib.sha256(got).hexdigest(), len(got))
"""


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def counters():
    return l7run_stats(L7RUN, PIN)


def metric(name, labels):
    text = subprocess.run(["curl", "-s", "-m", "5", "http://127.0.0.1:%d/metrics" % METRICS],
                          capture_output=True, text=True, timeout=10).stdout
    total = 0
    for m in re.finditer(r"^%s\{([^}]*)\} (\d+)$" % name, text, re.M):
        if all(('%s="%s"' % kv) in m.group(1) for kv in labels.items()):
            total += int(m.group(2))
    return total


def backend_log(which):
    with open(os.path.join(TMP, "nghttpd-%s.log" % which)) as f:
        return f.read()


def curl(path, *extra):
    r = subprocess.run(["curl", "-s", "-m", "5", "--http2-prior-knowledge", "-w", "\n%{http_version} %{http_code}",
                        *extra, "http://127.0.0.1:%d%s" % (SVC, path)], capture_output=True, text=True, timeout=10)
    return r.returncode, r.stdout


def raw_h2(payload, want_streams):
    """The preface, SETTINGS (and the ACK of ours: the first block after it must then begin
    with a table size update to 0, RFC 7541 4.2), payload; frames until every stream in
    want_streams has ended (END_STREAM or RST_STREAM), or 5 s."""
    s = socket.create_connection(("127.0.0.1", SVC), 5)
    s.settimeout(5)
    s.sendall(PREFACE + fr(SETTINGS, 0, 0) + fr(SETTINGS, 1, 0) + payload)
    got, ended = b"", set()
    deadline = time.time() + 5
    while not set(want_streams) <= ended and time.time() < deadline:
        try:
            d = s.recv(65536)
        except socket.timeout:
            break
        if not d:
            break
        got += d
        ended = {sid for t, fl, sid, _ in frames(got) if (t in (HEADERS, DATA) and fl & 1) or t == RST_STREAM}
    s.close()
    return frames(got)


# ---- checks --------------------------------------------------------------------------------

def t_curl():
    """an allowed GET reaches nghttpd (a) and its body comes back over HTTP/2; /b/ goes to b"""
    before = counters()
    rc, out = curl("/a/hello.txt")
    check(rc == 0 and out == "hello from a\n\n2 200", "curl /a: %d %r" % (rc, out))
    rc, out = curl("/b/hello.txt")
    check(rc == 0 and out == "hello from b\n\n2 200", "curl /b (upstream b): %d %r" % (rc, out))
    after = counters()
    check(after.get("requests", 0) - before.get("requests", 0) == 2 and
          after.get("forwarded", 0) - before.get("forwarded", 0) == 2,
          "two streams decided and forwarded by the kernel: %r -> %r" % (before, after))
    check("/a/hello.txt" in backend_log("a") and "/b/hello.txt" in backend_log("b"), "each upstream saw its request")


def t_curl_deny():
    before = counters().get("denied", 0)
    rc, out = curl("/admin/secret")
    check(rc == 0 and out == "403 denied by policy\n\n2 403", "curl /admin: an HTTP/2 403: %d %r" % (rc, out))
    check(counters().get("denied", 0) == before + 1, "counted as denied")


def t_h1_upstream():
    """a stream routed to an upstream not named by --h2c (HTTP/1.1 only) gets 505, not frames
    it cannot read; HTTP/1.1 clients still reach it"""
    rc, out = curl("/h1/x")
    check(rc == 0 and out == "505 the upstream speaks HTTP/1.1 only\n\n2 505", "HTTP/2 to h1: %d %r" % (rc, out))
    r = subprocess.run(["curl", "-s", "-m", "5", "-o", "/dev/null", "-w", "%{http_code}",
                        "http://127.0.0.1:%d/h1/" % SVC], capture_output=True, text=True, timeout=10)
    check(r.stdout == "200", "HTTP/1.1 to h1: %r" % r.stdout)


def t_nghttp():
    """one connection, allowed and denied streams interleaved: each gets its own answer. nghttp
    with an encoder table of size 0 (its default indexes into the table before our SETTINGS
    arrive: its later streams are refused, t_nghttp_default)"""
    urls = ["http://127.0.0.1:%d%s" % (SVC, p) for p in ("/a/hello.txt", "/admin/x", "/b/hello.txt", "/a/big.bin")]
    r = subprocess.run(["nghttp", "-nv", "-t", "5", "--encoder-header-table-size=0", *urls],
                       capture_output=True, text=True, timeout=15)
    st = re.findall(r"recv \(stream_id=(\d+)\) :status: (\d+)", r.stdout)
    check(r.returncode == 0 and dict(st) == {"13": "200", "15": "403", "17": "200", "19": "200"},
          "nghttp: 200 403 200 200 on streams 13..19: %r\n%s" % (st, r.stdout[-1500:]))
    check(r.stdout.count("recv GOAWAY") == 0, "no GOAWAY")


def t_nghttp_default():
    """nghttp as it comes: its requests after the first go out before our SETTINGS arrive and
    refer to the dynamic table entries the first one added; each is decided by what they say
    (routed by path to a or b, /admin denied) and served, the backends reading them
    re-encoded (h2_reencoded)"""
    before = counters().get("h2_reencoded", 0)
    urls = ["http://127.0.0.1:%d%s" % (SVC, p) for p in ("/a/hello.txt", "/a/n2", "/b/hello.txt", "/admin/n4", "/a/n5")]
    r = subprocess.run(["nghttp", "-nv", "-t", "5", *urls], capture_output=True, text=True, timeout=15)
    st = re.findall(r"recv \(stream_id=(\d+)\) :status: (\d+)", r.stdout)
    check(r.returncode == 0 and dict(st) == {"13": "200", "15": "404", "17": "200", "19": "403", "21": "404"},
          "nghttp: 200 404 200(b) 403 404 on streams 13..21: %r\n%s" % (st, r.stdout[-1500:]))
    sent, ours = (re.search(r"send HEADERS frame <[^>]*stream_id=15>", r.stdout),
                  re.search(r"recv SETTINGS frame <length=\d+, flags=0x00", r.stdout))
    check(sent and ours and sent.start() < ours.start(), "(nghttp sent stream 15 before our SETTINGS reached it)")
    check("/a/n2" in backend_log("a") and "/a/n5" in backend_log("a") and "/b/hello.txt" in backend_log("b") and
          "/a/n2" not in backend_log("b"), "each upstream saw its streams")
    check("/admin/n4" not in backend_log("a") + backend_log("b"), "the denied one reached no backend")
    check(counters().get("h2_reencoded", 0) >= before + 4, "re-encoded: %r" % counters())


def h2load(*args):
    r = subprocess.run(["h2load", *args], capture_output=True, text=True, timeout=60)
    m = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed", r.stdout)
    s = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", r.stdout)
    check(m and s, "h2load ran: %r %r" % (r.stdout[-600:], r.stderr[-300:]))
    return int(m.group(4)), int(m.group(5)), int(s.group(1)), r.stdout


def t_h2load():
    """2,000 requests, 50 streams at a time on each of 2 connections, with an encoder table of
    size 0 and as h2load comes (its first 50 streams of a connection go out before our
    SETTINGS, the 2nd-50th referring to the first one's table entries): every one answered
    200, the two paths each by its own upstream"""
    ok, failed, c2xx, out = h2load("-n", "2000", "-c", "2", "-m", "50", "--encoder-header-table-size=0",
                                   "http://127.0.0.1:%d/a/hello.txt" % SVC)
    check(ok == 2000 and c2xx == 2000, "h2load, table size 0: %r" % out[-700:])
    na, nb = backend_log("a").count(":path: /a/hello.txt"), backend_log("b").count(":path: /b/hello.txt")
    before = counters().get("h2_reencoded", 0)
    ok, failed, c2xx, out = h2load("-n", "2000", "-c", "2", "-m", "50", "http://127.0.0.1:%d/a/hello.txt" % SVC,
                                   "http://127.0.0.1:%d/b/hello.txt" % SVC)
    check(ok == 2000 and failed == 0 and c2xx == 2000, "h2load as it comes: %r" % out[-700:])
    da = backend_log("a").count(":path: /a/hello.txt") - na
    db = backend_log("b").count(":path: /b/hello.txt") - nb
    check(da == 1000 and db == 1000, "1,000 streams to each upstream: a %d, b %d" % (da, db))
    check(counters().get("h2_reencoded", 0) - before >= 2 * 49, "the streams before our SETTINGS re-encoded: %r" % counters())


def t_streams_1000():
    """1,000 concurrent streams on one connection, split across two upstreams by path: all
    answered 200, each upstream got its share"""
    na, nb = backend_log("a").count(":path: /a/hello.txt"), backend_log("b").count(":path: /b/hello.txt")
    ok, failed, c2xx, out = h2load("-n", "1000", "-c", "1", "-m", "1000", "--encoder-header-table-size=0",
                                   "http://127.0.0.1:%d/a/hello.txt" % SVC, "http://127.0.0.1:%d/b/hello.txt" % SVC)
    check(ok == 1000 and c2xx == 1000, "1,000 streams: %r" % out[-700:])
    da = backend_log("a").count(":path: /a/hello.txt") - na
    db = backend_log("b").count(":path: /b/hello.txt") - nb
    check(da == 500 and db == 500, "500 streams to each upstream: a %d, b %d" % (da, db))


def t_grpc():
    """a grpcio client, one channel: a call routed to the gRPC server, one denied with
    PERMISSION_DENIED (trailers-only from l7run), the next call on the same connection, and
    one whose decision adds x-via (the server answers with the x-via metadata it got)"""
    r = subprocess.run([sys.executable, "-c", GRPC_CLIENT, str(SVC)], capture_output=True, text=True, timeout=40)
    lines = r.stdout.strip().split("\n")
    check(lines == ["OK echo:hi-Unary", "PERMISSION_DENIED denied by policy", "OK echo:hi-Unary", "OK via:l7c"],
          "grpc: %r %r" % (r.stdout, r.stderr[-500:]))


def t_large():
    """1 MiB bodies both ways, checksummed: a download through nghttpd (curl, and nghttp with
    64 KiB windows: flow control end to end), a 1 MiB gRPC message echoed by the gRPC server"""
    want = hashlib.sha256(open(os.path.join(TMP, "docs", "a", "a", "big.bin"), "rb").read()).hexdigest()
    out = os.path.join(TMP, "got.bin")
    rc, st = curl("/a/big.bin", "-o", out)
    check(rc == 0 and st.endswith("2 200") and hashlib.sha256(open(out, "rb").read()).hexdigest() == want,
          "curl: 1 MiB intact: %d %r" % (rc, st))
    r = subprocess.run(["nghttp", "-ns", "-t", "10", "-w", "16", "-W", "16",
                        "http://127.0.0.1:%d/a/big.bin" % SVC], capture_output=True, text=True, timeout=20)
    check(r.returncode == 0 and re.search(r" 200 +1M /a/big.bin", r.stdout), "nghttp, 64 KiB windows: %r" % r.stdout[-400:])
    r = subprocess.run([sys.executable, "-c", GRPC_BIG, str(SVC)], capture_output=True, text=True, timeout=40)
    check(r.stdout.strip() == "True %d" % ((1 << 20) + 5), "grpc: 1 MiB echoed intact: %r %r" % (r.stdout, r.stderr[-300:]))


def t_raw_streams():
    """raw frames on one connection: an allowed GET, a denied one, a POST with a body to a
    denied path (its DATA dropped, the window given back), a PING (acknowledged by l7run) and
    one more allowed GET"""
    fs = raw_h2(fr(HEADERS, 5, 1, b"\x20" + block(b"/a/hello.txt")) +
                fr(HEADERS, 5, 3, block(b"/admin/y")) +
                fr(HEADERS, 4, 5, bytes([0x83, 0x86, 0x04, 8]) + b"/admin/p" + bytes([0x01, 1]) + b"x") +
                fr(DATA, 1, 5, b"secret-body") +
                fr(PING, 0, 0, b"pingpong") +
                fr(HEADERS, 5, 9, block(b"/a/hello.txt")), [1, 3, 5, 9])
    a = answers(fs)
    check(a.get(1, [{}])[0].get(":status") == "200" and a[1][1] == b"hello from a\n", "stream 1 served: %r" % a.get(1))
    check(a.get(3, [{}])[0].get(":status") == "403" and a[3][1] == b"403 denied by policy\n", "stream 3 denied: %r" % a.get(3))
    check(a.get(5, [{}])[0].get(":status") == "403" and a[5][2] == 0, "stream 5 denied, reset NO_ERROR: %r" % a.get(5))
    check(a.get(9, [{}])[0].get(":status") == "200", "stream 9 served after all that: %r" % a.get(9))
    check((PING, 1, 0, b"pingpong") in fs, "PING acknowledged by l7run")
    check((SETTINGS, 1, 0, b"") in fs, "the client's SETTINGS acknowledged: %r" % fs[:4])
    check(any(t == SETTINGS and not fl and sid == 0 and p == b"\x00\x01\x00\x00\x00\x00" for t, fl, sid, p in fs),
          "l7run's SETTINGS: HEADER_TABLE_SIZE 0")
    check(any(t == WINDOW_UPDATE and sid == 0 and struct.unpack(">I", p)[0] == 11 for t, _, sid, p in fs),
          "the dropped body's 11 bytes given back (connection WINDOW_UPDATE)")
    log = backend_log("a")
    check("/admin" not in log and "secret-body" not in log, "nothing of a denied stream reached the backend")


def h2_conn(payload, want, ack=True):
    """a raw connection: the preface, SETTINGS (and the ACK of ours if ack), payload; the frames
    until every stream in want has ended or the connection closes (5 s)"""
    s = socket.create_connection(("127.0.0.1", SVC), 5)
    s.settimeout(5)
    s.sendall(PREFACE + fr(SETTINGS, 0, 0) + (fr(SETTINGS, 1, 0) if ack else b"") + payload)
    got = read_until(s, done=lambda g: set(want) <= {sid for t, fl, sid, _ in frames(g)
                                                        if (t in (HEADERS, DATA) and fl & 1) or t == RST_STREAM})
    return s, got


def t_raw_dynamic():
    """before our SETTINGS are acknowledged a block may refer to the client's dynamic table:
    the kernel keeps it, so what a referenced entry says decides the stream, whichever stream
    inserted it (a denied one's inserts count too), and the backend gets the block re-encoded
    (its own table never held the entry: a block passed on as it came would be a decoding
    error there); once acknowledged (the table known empty), such a reference is a
    COMPRESSION_ERROR of the connection (RFC 7541 2.3.3)"""
    G = bytes([0x82, 0x86, 0x01, 1]) + b"x"   # GET http :authority x
    s, got = h2_conn(
        fr(HEADERS, 5, 1, G + lit_inc(4, b"/a/dyn-x")) +            # allowed; inserts 62 = :path /a/dyn-x
        fr(HEADERS, 5, 3, G + idx(62)) +                            # /a/dyn-x again, from the table
        fr(HEADERS, 5, 5, G + lit_inc(4, b"/admin/secret")) +       # denied; still inserts it (62)
        fr(HEADERS, 5, 7, G + idx(62)) +                            # /admin/secret from the table: denied
        fr(HEADERS, 5, 9, G + idx(63)) +                            # /a/dyn-x, now 63
        fr(HEADERS, 5, 11, G + lit_inc(4, b"/b/hello.txt", True)) +  # Huffman, inserted: routed to b
        fr(HEADERS, 5, 13, G + idx(62)) +                           # /b/hello.txt from the table: b
        fr(HEADERS, 5, 15, G + lit_inc(b":path", b"/a/nv") + idx(65)) +  # :path twice: malformed
        # an allowed path, and :path /admin/m inserted as a second one: malformed, refused,
        # and what it inserted is the client's table all the same
        fr(HEADERS, 5, 17, G + bytes([0x04, 5]) + b"/a/ok" + lit_inc(4, b"/admin/m")) +
        fr(HEADERS, 5, 19, G + idx(62)),                            # /admin/m from the table: denied
        [1, 3, 5, 7, 9, 11, 13, 15, 17, 19], ack=False)
    a = answers(frames(got))
    st = {sid: a.get(sid, [{}])[0].get(":status") for sid in (1, 3, 5, 7, 9, 11, 13)}
    check(st == {1: "404", 3: "404", 5: "403", 7: "403", 9: "404", 11: "200", 13: "200"},
          "each stream decided by what the table says: %r" % st)
    check(a[13][1] == b"hello from b\n", "stream 13 (its path only in the table) routed to b: %r" % a[13])
    check(a.get(15, [{}, b"", None])[2] == PROTOCOL_ERROR, "stream 15 (:path inserted, then :path 65) malformed: %r" % a.get(15))
    check(a.get(17, [{}, b"", None])[2] == PROTOCOL_ERROR and a.get(19, [{}])[0].get(":status") == "403",
          "stream 17 (/a/ok and an inserted :path /admin/m) malformed, stream 19 (62: /admin/m) denied: %r %r" %
          (a.get(17), a.get(19)))
    log = backend_log("a")
    check(log.count("/a/dyn-x") == 3 and "/admin" not in log + backend_log("b") and "/a/ok" not in log,
          "a saw /a/dyn-x three times (decoded as the client meant), nothing of /admin reached a backend")
    s.sendall(fr(SETTINGS, 1, 0) + fr(HEADERS, 5, 17, update(0) + G + idx(62)))
    got = read_until(s, got)
    s.close()
    g = [f for f in frames(got) if f[0] == GOAWAY]
    check(g and struct.unpack(">II", g[-1][3][:8])[1] == COMPRESSION_ERROR, "after the ACK: GOAWAY COMPRESSION_ERROR: %r" % g)


def t_raw_table_edges():
    """the table's edges on the wire: entries evicted by a later insert (a 100-byte table
    holds one of these), a size update that empties it, a reference past it, a size update
    past the limit (each a COMPRESSION_ERROR), and the table of one connection not another's"""
    G = bytes([0x82, 0x86, 0x01, 1]) + b"x"
    s, got = h2_conn(fr(HEADERS, 5, 1, update(100) + G + lit_inc(4, b"/a/e1-" + b"1" * 20)) +
                     fr(HEADERS, 5, 3, G + lit_inc(4, b"/b/e2-" + b"2" * 20)) +   # evicts e1
                     fr(HEADERS, 5, 5, G + idx(62)) +
                     fr(HEADERS, 5, 7, G + idx(63)), [1, 3, 5], ack=False)
    got = read_until(s, got)
    s.close()
    a, fs = answers(frames(got)), frames(got)
    check(a.get(5, [{}])[0].get(":status") == "404" and "/b/e2-" in backend_log("b"), "62 is e2, on b: %r" % a.get(5))
    g = [struct.unpack(">II", p[:8]) for t, _, _, p in fs if t == GOAWAY]
    check(g == [(5, COMPRESSION_ERROR)], "63 (e1, evicted) is past the table: %r" % g)
    check(backend_log("a").count("/a/e1-") == 1, "e1 forwarded once, never read from the table")
    for name, payload in (("size update 0 empties it", fr(HEADERS, 5, 1, G + lit_inc(4, b"/a/u0")) +
                           fr(HEADERS, 5, 3, update(0) + G + idx(62))),
                          ("past the table", fr(HEADERS, 5, 1, G + lit_inc(4, b"/a/p1")) + fr(HEADERS, 5, 3, G + idx(63))),
                          ("a size update above 4,096", fr(HEADERS, 5, 1, update(4097) + G + lit_inc(4, b"/a/u1"))),
                          ("another connection's entry", fr(HEADERS, 5, 1, G + idx(62)))):
        s, got = h2_conn(payload, [1], ack=False)
        got = read_until(s, got)
        s.close()
        g = [struct.unpack(">II", p[:8])[1] for t, _, _, p in frames(got) if t == GOAWAY]
        check(g == [COMPRESSION_ERROR], "%s: GOAWAY COMPRESSION_ERROR: %r" % (name, frames(got)[-3:]))


def lit(n, v):
    return bytes([0, len(n)]) + n + bytes([len(v)]) + v


GET, AUTH = bytes([0x82, 0x86]), bytes([0x01, 1]) + b"x"


def path(p):
    return bytes([0x04, len(p)]) + p


PROTOCOL_ERROR, FRAME_SIZE_ERROR, COMPRESSION_ERROR, ENHANCE_YOUR_CALM = 1, 6, 9, 11
# (name, frames after the preface and SETTINGS, ("rst", code): stream 1 refused and stream 3
# after it served, or ("goaway", code)); RFC 9113 8.2.1-8.3.1 (malformed: a stream error),
# 4.2, 6.1/6.2, 5.1.1, RFC 7541 5.1/5.2 (decoding errors: the connection's), 10.5
HOSTILE = [
    ("uppercase name", fr(HEADERS, 5, 1, GET + path(b"/a/h-up") + AUTH + lit(b"X-Up", b"1")), ("rst", PROTOCOL_ERROR)),
    ("connection-specific", fr(HEADERS, 5, 1, GET + path(b"/a/h-conn") + AUTH + lit(b"connection", b"close")),
     ("rst", PROTOCOL_ERROR)),
    ("te other than trailers", fr(HEADERS, 5, 1, GET + path(b"/a/h-te") + AUTH + lit(b"te", b"gzip")),
     ("rst", PROTOCOL_ERROR)),
    ("no :path", fr(HEADERS, 5, 1, GET + AUTH), ("rst", PROTOCOL_ERROR)),
    ("empty :path", fr(HEADERS, 5, 1, GET + bytes([0x04, 0]) + AUTH), ("rst", PROTOCOL_ERROR)),
    ("pseudo after regular", fr(HEADERS, 5, 1, GET + AUTH + lit(b"x-a", b"1") + path(b"/a/h-after")),
     ("rst", PROTOCOL_ERROR)),
    (":path twice", fr(HEADERS, 5, 1, GET + path(b"/a/h-two") + path(b"/a/h-two2") + AUTH), ("rst", PROTOCOL_ERROR)),
    ("content-length > DATA", fr(HEADERS, 4, 1, bytes([0x83, 0x86]) + path(b"/a/h-cl") + AUTH +
                                 lit(b"content-length", b"3")) + fr(DATA, 1, 1, b"h-cl-body"), ("rst", PROTOCOL_ERROR)),
    ("content-length < DATA", fr(HEADERS, 4, 1, bytes([0x83, 0x86]) + path(b"/a/h-cl2") + AUTH +
                                 lit(b"content-length", b"30")) + fr(DATA, 1, 1, b"h-cl2-body"), ("rst", PROTOCOL_ERROR)),
    ("frame past 16,384", fr(HEADERS, 5, 1, GET + path(b"/a/h-big") + AUTH + lit(b"x-big", b"v") + b"\0" * 16400),
     ("goaway", FRAME_SIZE_ERROR)),
    ("padding past the frame", fr(HEADERS, 5 | 8, 1, bytes([200]) + GET + path(b"/a/h-pad") + AUTH),
     ("goaway", PROTOCOL_ERROR)),
    ("HPACK integer overflow", fr(HEADERS, 5, 1, GET + b"\x7f\xff\xff\xff\xff\xff\x0f"), ("goaway", COMPRESSION_ERROR)),
    ("Huffman EOS", fr(HEADERS, 5, 1, GET + AUTH + bytes([0x04, 0x84, 0xff, 0xff, 0xff, 0xff])),
     ("goaway", COMPRESSION_ERROR)),
    ("CONTINUATION flood", fr(HEADERS, 1, 1, GET + path(b"/a/h-flood")) + fr(CONTINUATION, 0, 1, lit(b"x-c", b"1")) * 9 +
     fr(CONTINUATION, 4, 1, AUTH), ("goaway", ENHANCE_YOUR_CALM)),
    ("even stream id", fr(HEADERS, 5, 2, GET + path(b"/a/h-even") + AUTH), ("goaway", PROTOCOL_ERROR)),
    ("DATA on an idle stream", fr(DATA, 1, 1, b"h-idle"), ("goaway", PROTOCOL_ERROR)),
    ("SETTINGS flood", fr(SETTINGS, 0, 0) * 300, ("goaway", ENHANCE_YOUR_CALM)),
    ("rapid reset", b"".join(fr(HEADERS, 4, i, bytes([0x83, 0x86]) + path(b"/a/h-rr") + AUTH) + fr(RST_STREAM, 0, i, bytes(4))
                             for i in range(5, 5 + 2 * 300, 2)), ("goaway", ENHANCE_YOUR_CALM)),
]


def t_hostile():
    """hostile HTTP/2, each on a connection of its own: refused with the RFC's code (a
    malformed request on its stream, the connection going on; a framing, decoding or flood
    error with GOAWAY), nothing of it forwarded, l7run still serving"""
    for name, payload, (kind, code) in HOSTILE:
        s = socket.create_connection(("127.0.0.1", SVC), 5)
        s.settimeout(2)
        s.sendall(PREFACE + fr(SETTINGS, 0, 0) + payload + fr(HEADERS, 5, 3 if kind == "rst" else 1001, block(b"/a/hello.txt")))
        got = read_until(s, done=lambda g: kind == "rst" and any(t == DATA and sid == 3 and fl & 1
                                                                for t, fl, sid, _ in frames(g)))
        s.close()
        fs = frames(got)
        if kind == "rst":
            rst = [struct.unpack(">I", p)[0] for t, _, sid, p in fs if t == RST_STREAM and sid == 1]
            check(rst[:1] == [code] and answers(fs).get(3, [{}])[0].get(":status") == "200",
                  "%s: stream 1 RST_STREAM %d, stream 3 served: %r" % (name, code, fs[-6:]))
        else:
            g = [struct.unpack(">II", p[:8])[1] for t, _, _, p in fs if t == GOAWAY]
            check(g == [code], "%s: GOAWAY %d: %r" % (name, code, fs[-4:]))
    log = backend_log("a")
    check(not re.search(r"h-(up|conn|te|after|two|big|pad|flood|even|idle)", log),
          "nothing of a refused stream reached the backend")
    for p in (b"/a/h-cl", b"/a/h-cl2"):
        # decided and allowed, so the head went on; the body that breaks it did not: l7run
        # cancelled the stream (nghttpd, had it seen the body, would have reset it itself)
        conn = re.findall(r"\[id=(\d+)\] \[[ 0-9.]+\] recv \(stream_id=1\) :path: %s\n" % p.decode(), log)
        check(conn and re.search(r"\[id=%s\] \[[ 0-9.]+\] recv RST_STREAM frame <length=4, flags=0x00, stream_id=1>"
                                 r"\s+\(error_code=CANCEL" % conn[-1], log) and
              not re.search(r"\[id=%s\] \[[ 0-9.]+\] send RST_STREAM" % conn[-1], log),
              "%s: l7run refused the body that breaks content-length, the backend never judged it" % p.decode())
    rc, out = curl("/a/hello.txt")
    check(rc == 0 and out.endswith("2 200"), "still serving: %r" % out)


def fields_seen(which, path):
    """[(name, value)] of the request header block nghttpd `which` logged for the stream whose
    :path was `path`, in the order it decoded them"""
    log = backend_log(which)
    m = re.search(r"\[id=(\d+)\] \[[ 0-9.]+\] recv \(stream_id=(\d+)\) :path: %s\n" % re.escape(path), log)
    check(m, "%s reached %s" % (path, which))
    return re.findall(r"\[id=%s\] \[[ 0-9.]+\] recv \(stream_id=%s\) ([^:\n]+|:[a-z]+): (.*)\n" % (m.group(1), m.group(2)), log)


def t_mutations():
    """a decision with header mutations (issue 14): the backend gets the block without the
    field of a removed name (Huffman-coded and inserted into the client's table; then as a
    reference to that entry on the next stream) and with the added ones, lower-cased, in the
    policy's order, after the client's; a SetHeader replaces the client's field; the client
    gets the response's edits (server gone, x-content-type-options added). A name the policy
    reads sent twice is refused (REFUSED_STREAM, as for any stream: which would it judge?),
    never forwarded. curl and h2load through the same policy"""
    G = bytes([0x82, 0x86, 0x01, 1]) + b"x"
    s, got = h2_conn(
        fr(HEADERS, 5, 1, G + path(b"/a/m/hello.txt?s=1") + lit(b"x-keep", b"1") +
           lit_inc(b"x-secret", b"two", True) + lit(b"x-forwarded-proto", b"https")) +
        fr(HEADERS, 5, 3, G + path(b"/a/m/hello.txt?s=3") + idx(62) + lit(b"x-keep", b"3")) +
        fr(HEADERS, 5, 5, G + path(b"/a/hello.txt?s=5") + idx(62)) +   # no mutation: as it came
        fr(HEADERS, 5, 7, G + path(b"/a/m/hello.txt?s=7") + lit(b"x-secret", b"one") + idx(62)),
        [1, 3, 5, 7], ack=False)
    s.close()
    a = answers(frames(got))
    for sid in (1, 3):
        st = a.get(sid, [{}, b""])
        check(st[0].get(":status") == "200" and st[1] == b"hello from a/m\n", "stream %d served: %r" % (sid, st))
        check("server" not in st[0] and st[0].get("x-content-type-options") == "nosniff",
              "stream %d: the response's edits: %r" % (sid, st[0]))
    check(a.get(5, [{}])[0].get("server", "").startswith("nghttpd"), "stream 5 (no mutation): server kept: %r" % a.get(5))
    check(a.get(7, [{}, b"", None])[2] == REFUSED_STREAM and "?s=7" not in backend_log("a"),
          "stream 7 (x-secret twice) refused: %r" % a.get(7))
    regular = lambda f: [kv for kv in f if not kv[0].startswith(":")]
    check(regular(fields_seen("a", "/a/m/hello.txt?s=1")) == [("x-keep", "1"), ("x-forwarded-proto", "h2c"),
                                                              ("x-tag", "one"), ("x-tag", "two")],
          "stream 1: what the backend saw: %r" % fields_seen("a", "/a/m/hello.txt?s=1"))
    check(regular(fields_seen("a", "/a/m/hello.txt?s=3")) == [("x-keep", "3"), ("x-forwarded-proto", "h2c"),
                                                              ("x-tag", "one"), ("x-tag", "two")],
          "stream 3 (x-secret a table reference): %r" % fields_seen("a", "/a/m/hello.txt?s=3"))
    check(regular(fields_seen("a", "/a/hello.txt?s=5")) == [("x-secret", "two")], "stream 5: the client's field as it meant it")
    rc, out = curl("/a/m/hello.txt?c=1", "-D", "-", "-H", "X-Secret: s")
    check(rc == 0 and out.endswith("2 200") and "x-content-type-options: nosniff" in out and "\nserver:" not in out.lower(),
          "curl: the response's edits: %d %r" % (rc, out))
    check(regular(fields_seen("a", "/a/m/hello.txt?c=1"))[-3:] == [("x-forwarded-proto", "h2c"), ("x-tag", "one"), ("x-tag", "two")] and
          not [kv for kv in fields_seen("a", "/a/m/hello.txt?c=1") if kv[0] == "x-secret"], "curl: %r" % fields_seen("a", "/a/m/hello.txt?c=1"))
    n = backend_log("a").count("recv (stream_id=")
    ok, failed, c2xx, out = h2load("-n", "400", "-c", "2", "-m", "20", "-H", "x-secret: h", "http://127.0.0.1:%d/a/m/hello.txt" % SVC)
    check(ok == 400 and c2xx == 400, "h2load through the mutating policy: %r" % out[-500:])
    log = backend_log("a")
    check(log.count(") x-tag: one\n") >= 400 + 3 and ") x-secret: h\n" not in log and n < log.count("recv (stream_id="),
          "h2load's 400 streams mutated")


def access_log():
    """the access log's JSON lines so far"""
    import json
    with open(os.path.join(TMP, "access.log")) as f:
        return [json.loads(line) for line in f if line.strip()]


def t_access_log():
    """the access log (--access-log) per HTTP/2 stream, as for HTTP/1.1: a forwarded stream's
    line has the upstream's status and the bytes of its response (written when the response
    ends), a denied one the deny's status; protocol HTTP/2, the stream's id; a gRPC call's
    line its grpc-status from the trailers"""
    rc, out = curl("/a/hello.txt?log=1")
    rc2, out2 = curl("/admin/log2")
    check(rc == 0 and out.endswith("2 200") and rc2 == 0 and out2.endswith("2 403"), "served: %r %r" % (out, out2))
    r = subprocess.run([sys.executable, "-c", GRPC_CLIENT, str(SVC)], capture_output=True, text=True, timeout=40)
    check(r.stdout.startswith("OK echo:hi-Unary"), "grpc: %r" % r.stdout)
    deadline, lines = time.time() + 5, []
    while time.time() < deadline:
        lines = access_log()
        if [x for x in lines if x.get("target") == "/l7.test.Echo/Mutated"]:
            break
        time.sleep(0.1)
    by = {x.get("target"): x for x in lines}
    a, d = by.get("/a/hello.txt?log=1"), by.get("/admin/log2")
    check(a and a["protocol"] == "HTTP/2" and a["decision"] == "allow" and a["upstream"] == "a" and a["status"] == 200 and
          a["bytes_out"] and a["bytes_out"] > len("hello from a\n") and a["stream"] % 2 == 1 and a["duration_ms"] is not None,
          "the forwarded stream's line: %r" % a)
    check(d and d["protocol"] == "HTTP/2" and d["decision"] == "deny" and d["status"] == 403, "the denied stream's line: %r" % d)
    g = by.get("/l7.test.Echo/Unary")
    check(g and g["status"] == 200 and g.get("grpc_status") == 0 and g["upstream"] == "g", "the gRPC call's line: %r" % g)


def t_telemetry():
    """per stream: upstream responses by class, l7run's own answers, the kernel's counters; the
    bytes l7run sent upstream a and relayed from it (its preface, SETTINGS, the request's HEADERS;
    the response's HEADERS and 13-byte DATA): counted by l7run, the connection being outside the
    data plane"""
    ok = metric("l7_upstream_responses_total", {"class": "2xx"})
    loc = metric("l7_local_responses_total", {"class": "4xx"})
    req, resp = metric("l7_upstream_request_bytes_total", {"upstream": "a"}), metric("l7_upstream_response_bytes_total", {"upstream": "a"})
    rc, _ = curl("/a/hello.txt")
    rc2, _ = curl("/admin/z")
    check(rc == 0 and rc2 == 0, "both answered")
    check(metric("l7_upstream_responses_total", {"class": "2xx"}) == ok + 1, "the 200 counted for its upstream")
    check(metric("l7_local_responses_total", {"class": "4xx"}) == loc + 1, "the 403 counted as l7run's answer")
    dreq = metric("l7_upstream_request_bytes_total", {"upstream": "a"}) - req
    dresp = metric("l7_upstream_response_bytes_total", {"upstream": "a"}) - resp
    check(24 + 9 + 30 < dreq < 400 and 9 + 9 + 13 < dresp < 400, "bytes to and from a counted: %d, %d" % (dreq, dresp))


def listener_pid(port):
    """the pid of the process (of this test's) listening on port"""
    out = subprocess.run(["ss", "-Hltnp", "sport = :%d" % port], capture_output=True, text=True, timeout=5).stdout
    m = re.search(r"pid=(\d+)", out)
    return int(m.group(1)) if m else None


def t_backend_lost():
    """the upstream of a connection's streams goes away: the client's connection ends with
    GOAWAY INTERNAL_ERROR at once instead of its streams hanging (last: upstream b stays down)"""
    s = socket.create_connection(("127.0.0.1", SVC), 5)
    s.settimeout(3)
    s.sendall(PREFACE + fr(SETTINGS, 0, 0) + fr(HEADERS, 5, 1, block(b"/b/hello.txt")))
    got = b""
    while not any(t == DATA and sid == 1 and fl & 1 for t, fl, sid, _ in frames(got)):
        d = s.recv(65536)
        check(d, "served before the backend goes: %r" % frames(got))
        got += d
    pid = listener_pid(PB)
    check(pid, "nghttpd b's pid")
    os.kill(pid, 15)
    t0 = time.time()
    got = read_until(s, got)
    s.close()
    g = [struct.unpack(">II", p[:8]) for t, _, _, p in frames(got) if t == GOAWAY]
    check(g == [(1, 2)] and time.time() - t0 < 2.5, "GOAWAY(last 1, INTERNAL_ERROR) promptly: %r" % g)


def t_http1_still():
    r = subprocess.run(["curl", "-s", "-m", "5", "-o", "/dev/null", "-w", "%{http_code}",
                        "http://127.0.0.1:%d/admin" % SVC], capture_output=True, text=True, timeout=10)
    check(r.stdout == "403", "HTTP/1.1 deny as before: %r" % r.stdout)


CHECKS = [("curl", t_curl), ("curl_deny", t_curl_deny), ("h1_upstream", t_h1_upstream), ("nghttp", t_nghttp), ("nghttp_default", t_nghttp_default),
          ("h2load", t_h2load), ("streams_1000", t_streams_1000), ("grpc", t_grpc), ("large", t_large), ("raw_streams", t_raw_streams), ("mutations", t_mutations), ("access_log", t_access_log), ("raw_dynamic", t_raw_dynamic), ("raw_table_edges", t_raw_table_edges), ("hostile", t_hostile), ("telemetry", t_telemetry),
          ("http1", t_http1_still), ("backend_lost", t_backend_lost)]


def main():
    if os.geteuid() != 0:
        print("FAIL: needs root")
        return 1
    failed = 0
    os.mkdir(CG)
    log = open(os.path.join(TMP, "l7run.log"), "w")
    try:
        for which in ("a", "b"):
            d = os.path.join(TMP, "docs", which)
            os.makedirs(os.path.join(d, which))
            with open(os.path.join(d, which, "hello.txt"), "w") as f:
                f.write("hello from %s\n" % which)
            with open(os.path.join(d, which, "big.bin"), "wb") as f:
                f.write(os.urandom(1 << 20))
        os.makedirs(os.path.join(TMP, "docs", "a", "a", "m"))
        with open(os.path.join(TMP, "docs", "a", "a", "m", "hello.txt"), "w") as f:
            f.write("hello from a/m\n")
        os.makedirs(os.path.join(TMP, "h1"))
        pol = os.path.join(TMP, "h2m.l7")
        with open(pol, "w") as f:
            f.write(POLICY)
        obj = os.path.join(TMP, "h2m.o")
        subprocess.run([L7C, pol, "-o", obj], check=True, timeout=120)
        backends = [(["sh", "-c", 'exec nghttpd --no-tls -v -a 127.0.0.1 --max-concurrent-streams=2000 -d "$1" "$2" > "$3"',
                      "nghttpd",
                      os.path.join(TMP, "docs", w), str(p), os.path.join(TMP, "nghttpd-%s.log" % w)], p)
                    for w, p in (("a", PA), ("b", PB))]
        backends.append(([sys.executable, "-c", GRPC_SERVER, str(PG)], PG))
        backends.append(([sys.executable, "-m", "http.server", "-b", "127.0.0.1", "-d", TMP, str(PH)], PH))
        with serving("mesh", L7RUN, obj, SVC, backends, log, CG, PIN,
                     extra=("--metrics-listen", "127.0.0.1:%d" % METRICS, "--pool", "16", "--h2c", "a,b,g",
                            "--access-log", os.path.join(TMP, "access.log"))):
            failed += run_checks(CHECKS, (), "%-15s")
    finally:
        log.close()
        if failed:
            print(open(log.name).read()[-3000:])
        if not cgroup_remove(CG):
            failed += 1
            print("FAIL cgroup left behind: " + CG)
        subprocess.run(["rm", "-rf", TMP, PIN])
    print("%d check(s) failed" % failed if failed else "all HTTP/2 mesh checks passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
