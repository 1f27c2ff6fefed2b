#!/usr/bin/python3
"""HTTP/2 clients where the data plane does not serve HTTP/2 yet (issue 14): a connection that
starts with the HTTP/2 preface (RFC 9113 3.4) is refused cleanly, in mesh and in gateway mode:
l7run answers with its SETTINGS and GOAWAY(last stream 0, HTTP_1_1_REQUIRED) and closes, and
counts it (stat h2_refused) - no HTTP/1.1 answer the client cannot parse, no hang, nothing
forwarded (the backend sees no connection bytes of it). Real clients: curl
--http2-prior-knowledge, nghttp, grpcio, and a raw socket that reads the frames. HTTP/1.1 on the same
service goes on as before. Needs root; never skips.

usage: test_h2_refuse.py L7C L7RUN MODE   (MODE: mesh or gateway)"""
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
from h2frames import (PREFACE, DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, CONTINUATION,  # noqa: E402
                      fr, frames, block, answers)

L7C, L7RUN, MODE = sys.argv[1:4]
PID = os.getpid()
BASE = 22000 + (PID % 500) * 4   # ports unique per run (test_mesh.py: 20000-29999 step 10)
SVC, PA, METRICS = BASE, BASE + 1, BASE + 2
CG = os.path.join(CG_ROOT, "l7h2r-test-%d" % PID)
PIN = "/sys/fs/bpf/l7h2r-test-%d" % PID
TMP = tempfile.mkdtemp(prefix="l7h2r-")
PROTOCOL_ERROR, FRAME_SIZE_ERROR, HTTP_1_1_REQUIRED = 1, 6, 0xd

POLICY = policy("h2r", SVC, [("a", PA)], """\
  if (starts_with(request.path, "/admin")) {
    Deny(request, 403);
  } else {
    Route(request, a);
  }
""")

# The backend: logs every byte it receives (so a test can say nothing of an HTTP/2 client got
# through) and answers each request head with its path; keep-alive.
BACKEND = r"""
import socketserver, sys
LOG = open(sys.argv[2], "w")
class H(socketserver.BaseRequestHandler):
    def handle(self):
        buf = b""
        while True:
            d = self.request.recv(65536)
            if not d:
                return
            LOG.write(repr(d) + "\n"); LOG.flush()
            buf += d
            while b"\r\n\r\n" in buf:
                head, buf = buf.split(b"\r\n\r\n", 1)
                parts = head.split(b"\r\n")[0].split(b" ")
                body = b"path=" + (parts[1] if len(parts) > 1 else b"?") + b"\n"
                self.request.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % len(body) + body)
class S(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True
S(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""

def check(cond, what):
    if not cond:
        raise AssertionError(what)


def counters():
    return l7run_stats(L7RUN, PIN)


def local_answers(cls):
    """l7_local_responses_total{class=cls}: l7run's own answers, scraped"""
    text = subprocess.run(["curl", "-s", "-m", "5", "http://127.0.0.1:%d/metrics" % METRICS],
                          capture_output=True, text=True, timeout=10).stdout
    m = re.search(r'^l7_local_responses_total\{class="%s"\} (\d+)$' % cls, text, re.M)
    check(m, "l7_local_responses_total scraped: %r" % text[:200])
    return int(m.group(1))


def backend_log():
    with open(os.path.join(TMP, "backend.log")) as f:
        return f.read()


def read_all(s):
    """the frames s receives until the server closes it (recv times out after 5 s)"""
    got = b""
    while True:
        d = s.recv(65536)
        if not d:
            break
        got += d
    s.close()
    return frames(got)


def raw_h2(payload, bye=True):
    """Send the preface, our SETTINGS and payload on a new connection (then our GOAWAY: l7run
    closes on it); every frame until the server closes, and how long that took."""
    s = socket.create_connection(("127.0.0.1", SVC), 5)
    s.settimeout(5)
    s.sendall(PREFACE + fr(SETTINGS, 0, 0) + payload + (fr(GOAWAY, 0, 0, bytes(8)) if bye else b""))
    t0 = time.time()
    fs = read_all(s)
    return fs, time.time() - t0


# ---- checks --------------------------------------------------------------------------------

def t_raw():
    """a GET and a POST whose body is still coming: each stream answered 505 (the POST's then
    reset with NO_ERROR: RFC 9113 8.1), SETTINGS and PING acknowledged; gateway mode: SETTINGS
    then GOAWAY(0, HTTP_1_1_REQUIRED)"""
    before = counters().get("h2_refused", 0)
    fs, took = raw_h2(fr(HEADERS, 5, 1, block(b"/a")) + fr(PING, 0, 0, b"12345678") +
                      fr(HEADERS, 4, 3, block(b"/b", [(b"content-length", b"4")])) + fr(DATA, 0, 3, b"bo"),
                      bye=MODE == "mesh")
    check(took < 3, "closed promptly (%.1f s)" % took)
    check(counters().get("h2_refused", 0) == before + 1, "counted as h2_refused once")
    check(fs and fs[0][:3] == (SETTINGS, 0, 0) and not fs[0][3], "our SETTINGS first: %r" % fs[:1])
    if MODE == "gateway":   # what came in the preface's write is answered, then GOAWAY
        check(fs[-1][0] == GOAWAY and struct.unpack(">II", fs[-1][3][:8]) == (3, HTTP_1_1_REQUIRED),
              "GOAWAY last stream 3, HTTP_1_1_REQUIRED last: %r" % (fs[-1:],))
    check((SETTINGS, 1, 0, b"") in fs, "SETTINGS acknowledged")
    check((PING, 1, 0, b"12345678") in fs, "PING acknowledged with its data")
    a = answers(fs)
    check(sorted(a) == [1, 3], "both streams answered: %r" % fs)
    for sid in (1, 3):
        h, body, rst, _ = a[sid]
        check(h.get(":status") == "505" and body == b"505 HTTP/2 is not served here yet\n" and
              h.get("content-length") == str(len(body)), "stream %d: 505 with its body: %r" % (sid, a[sid]))
    check(a[1][2] is None and a[3][2] == 0, "only the unfinished POST reset (NO_ERROR): %r" % a)


def t_grpc_raw():
    """a gRPC call (content-type application/grpc): trailers-only, grpc-status of 505 (l7/grpc.h)"""
    fs, _ = raw_h2(fr(HEADERS, 4, 1, block(b"/l7.test.Echo/Unary", [(b"content-type", b"application/grpc"),
                                                                     (b"te", b"trailers")])))
    a = answers(fs)
    h, body, rst, flags = a[1]
    check(h == {":status": "200", "content-type": "application/grpc", "grpc-status": "2",
                "grpc-message": "HTTP/2 is not served here yet"} and flags & 1 and not body,
          "trailers-only, UNKNOWN: %r" % (a,))
    check(rst == 0, "the call's stream reset NO_ERROR after the answer (the client had not ended it)")


def t_hostile():
    """framing errors end the connection with the RFC's code; a CONTINUATION flood costs bounded
    work and is answered once its block ends (mesh mode: gateway's l7run reads only what came
    with the preface)"""
    if MODE == "gateway":
        return
    def goaway_code(fs):
        g = [f for f in fs if f[0] == GOAWAY]
        return struct.unpack(">II", g[-1][3][:8])[1] if g else None
    fs, _ = raw_h2(fr(HEADERS, 5, 2, block()), bye=False)
    check(goaway_code(fs) == PROTOCOL_ERROR, "even stream id: GOAWAY PROTOCOL_ERROR: %r" % fs)
    fs, _ = raw_h2(fr(HEADERS, 5, 5, block()) + fr(HEADERS, 5, 3, block()), bye=False)
    check(goaway_code(fs) == PROTOCOL_ERROR and 5 in answers(fs) and 3 not in answers(fs),
          "a stream id going back: GOAWAY PROTOCOL_ERROR: %r" % fs)
    fs, _ = raw_h2(fr(DATA, 0, 1, b"x" * 16385), bye=False)
    check(goaway_code(fs) == FRAME_SIZE_ERROR, "a frame past 16,384: GOAWAY FRAME_SIZE_ERROR: %r" % fs)
    fs, _ = raw_h2(fr(PING, 0, 0, b"1234"), bye=False)
    check(goaway_code(fs) == FRAME_SIZE_ERROR, "a 4-byte PING: FRAME_SIZE_ERROR")
    fs, _ = raw_h2(fr(HEADERS, 1, 1, block()) + fr(DATA, 0, 1, b"x"), bye=False)
    check(goaway_code(fs) == PROTOCOL_ERROR and not answers(fs), "a frame inside a header block: PROTOCOL_ERROR")
    fs, took = raw_h2(fr(HEADERS, 1, 1, block()) + fr(CONTINUATION, 0, 1, b"\x00\x01a\x01b") * 5000 +
                      fr(CONTINUATION, 4, 1, b""))
    check(list(answers(fs)) == [1] and answers(fs)[1][0].get(":status") == "505" and took < 3,
          "5,000 CONTINUATION frames: one answer, %.1f s" % took)
    fs, _ = raw_h2(fr(HEADERS, 5, 1, b"\xff\xff\xff\xff\xff\xff\x0f"))   # HPACK integer overflow
    check(answers(fs)[1][0].get(":status") == "505", "a block that does not decode: the plain answer")


GRPC_CALL = r"""
import sys, time, grpc
t0 = time.time()
with grpc.insecure_channel("127.0.0.1:%s" % sys.argv[1]) as ch:
    try:
        ch.unary_unary("/l7.test.Echo/Unary", lambda b: b, lambda b: b)(b"hi", timeout=8)
        print("OK", time.time() - t0)
    except grpc.RpcError as e:
        print(e.code().name, "%.2f" % (time.time() - t0), e.details())
"""


def t_grpc():
    """a grpcio client: the call fails at once with grpc-status UNKNOWN (505's) and our message.
    Gateway mode: not run; there the call is retried on new connections until its deadline
    (a GOAWAY with last stream 0 says nothing was processed), docs/architecture.md says so"""
    if MODE == "gateway":
        return
    before = counters().get("h2_refused", 0)
    r = subprocess.run([sys.executable, "-c", GRPC_CALL, str(SVC)], capture_output=True, text=True, timeout=20)
    out = r.stdout.split(" ", 2)
    check(out[0] == "UNKNOWN" and float(out[1]) < 5 and "HTTP/2 is not served here yet" in out[2],
          "grpc: %r %r" % (r.stdout, r.stderr[-300:]))
    check(counters().get("h2_refused", 0) > before, "grpc's connection counted as h2_refused")


def t_preface_alone():
    """only the preface, in two writes: refused the same way"""
    s = socket.create_connection(("127.0.0.1", SVC), 5)
    s.settimeout(5)
    s.sendall(PREFACE[:10])
    time.sleep(0.1)
    s.sendall(PREFACE[10:])
    if MODE == "mesh":
        s.sendall(fr(SETTINGS, 0, 0) + fr(HEADERS, 5, 1, block()) + fr(GOAWAY, 0, 0, bytes(8)))
    fs = read_all(s)
    if MODE == "gateway":
        check([f[0] for f in fs] == [SETTINGS, GOAWAY], "refused: %r" % fs)
    else:
        check(answers(fs)[1][0].get(":status") == "505", "answered 505: %r" % fs)


def t_curl():
    before = counters().get("h2_refused", 0)
    t0 = time.time()
    r = subprocess.run(["curl", "-s", "-m", "5", "-w", "%{http_version} %{http_code}", "--http2-prior-knowledge",
                        "http://127.0.0.1:%d/a" % SVC], capture_output=True, text=True, timeout=10)
    check(time.time() - t0 < 4, "curl did not wait for its timeout")
    if MODE == "mesh":
        check(r.returncode == 0 and r.stdout == "505 HTTP/2 is not served here yet\n2 505",
              "curl gets an HTTP/2 505: %d %r" % (r.returncode, r.stdout))
    else:   # its request came with the preface (505), or after it (GOAWAY HTTP_1_1_REQUIRED)
        check((r.returncode == 0 and r.stdout.endswith("\n2 505")) or r.returncode not in (0, 28, 52),
              "curl gets a 505 or fails with an HTTP/2 error, not a timeout or an empty reply: %d %r"
              % (r.returncode, r.stdout))
    check(counters().get("h2_refused", 0) == before + 1, "curl's connection counted as h2_refused")


def t_nghttp():
    """two requests on one connection (nghttp sends both before its ACK): both answered"""
    before = local_answers("5xx")
    r = subprocess.run(["nghttp", "-v", "-t", "5", "http://127.0.0.1:%d/a" % SVC, "http://127.0.0.1:%d/b" % SVC],
                       capture_output=True, text=True, timeout=10)
    if MODE == "mesh":
        check(r.stdout.count(":status: 505") == 2 and r.returncode == 0, "nghttp: two 505s: %r" % r.stdout[-800:])
        check(local_answers("5xx") - before == 2, "both counted as l7run's own 5xx answers")
    else:
        check(re.search(r"recv GOAWAY frame <.*\n.*error_code=HTTP_1_1_REQUIRED", r.stdout),
              "nghttp sees GOAWAY HTTP_1_1_REQUIRED: %r" % r.stdout[-600:])
        check(r.stdout.count(":status: 505") in (0, 2), "no stream left half answered")


def t_http1_still():
    r = subprocess.run(["curl", "-s", "-m", "5", "http://127.0.0.1:%d/a/after" % SVC],
                       capture_output=True, text=True, timeout=10)
    check("path=/a/after" in r.stdout, "HTTP/1.1 served: %r" % r.stdout[:200])
    r = subprocess.run(["curl", "-s", "-m", "5", "-o", "/dev/null", "-w", "%{http_code}",
                        "http://127.0.0.1:%d/admin" % SVC], capture_output=True, text=True, timeout=10)
    check(r.stdout == "403", "HTTP/1.1 deny: %r" % r.stdout)


def t_upgrade():
    """h2c Upgrade (RFC 7540 3.2) is an HTTP/1.1 request like any other: forwarded; this backend,
    as any HTTP/1.1-only one, ignores the Upgrade and the answer is HTTP/1.1"""
    r = subprocess.run(["curl", "-s", "-m", "5", "--http2", "-w", "\n%{http_version} %{http_code}",
                        "http://127.0.0.1:%d/a/upgrade" % SVC], capture_output=True, text=True, timeout=10)
    check(r.stdout.endswith("\n1.1 200") and "path=/a/upgrade" in r.stdout, "answered in HTTP/1.1: %r" % r.stdout)


def t_backend_saw_nothing():
    log = backend_log()
    check("/a/after" in log and "/a/upgrade" in log, "the backend's log has the HTTP/1.1 requests: %r" % log[-300:])
    check("PRI" not in log and "SM" not in log and "/a " not in log and "/b " not in log,
          "nothing of an HTTP/2 client reached the backend: %r" % log[-500:])


CHECKS = [("raw", t_raw), ("grpc_raw", t_grpc_raw), ("hostile", t_hostile), ("preface_split", t_preface_alone),
          ("curl", t_curl), ("nghttp", t_nghttp), ("grpc", t_grpc),
          ("http1", t_http1_still), ("upgrade", t_upgrade), ("backend", t_backend_saw_nothing)]


def main():
    if os.geteuid() != 0:
        print("FAIL: needs root")
        return 1
    failed = 0
    if MODE == "mesh":
        os.mkdir(CG)
    log = open(os.path.join(TMP, "l7run.log"), "w")
    try:
        pol = os.path.join(TMP, "h2r.l7")
        with open(pol, "w") as f:
            f.write(POLICY)
        obj = os.path.join(TMP, "h2r.o")
        subprocess.run([L7C, pol, "-o", obj], check=True, timeout=120)
        backend = ([sys.executable, "-c", BACKEND, str(PA), os.path.join(TMP, "backend.log")], PA)
        with serving(MODE, L7RUN, obj, SVC, [backend], log, CG, PIN,
                     extra=("--metrics-listen", "127.0.0.1:%d" % METRICS)):
            failed += run_checks(CHECKS, (), "%-14s")
    finally:
        log.close()
        if failed:
            print(open(log.name).read()[-3000:])
        if MODE == "mesh" and not cgroup_remove(CG):
            failed += 1
            print("FAIL cgroup left behind: " + CG)
        subprocess.run(["rm", "-rf", TMP, PIN])
    print("%d check(s) failed" % failed if failed else "all %s h2 refusal checks passed" % MODE)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
