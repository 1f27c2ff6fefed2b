#!/usr/bin/python3
"""HTTP/2 clients where the data plane does not serve HTTP/2 yet (issue 14): a connection that
starts with the HTTP/2 preface (RFC 9113 3.4) is refused cleanly, in mesh and in gateway mode:
l7run answers with its SETTINGS and GOAWAY(last stream 0, HTTP_1_1_REQUIRED) and closes, and
counts it (stat h2_refused) - no HTTP/1.1 answer the client cannot parse, no hang, nothing
forwarded (the backend sees no connection bytes of it). Real clients: curl
--http2-prior-knowledge, nghttp, and a raw socket that reads the frames. HTTP/1.1 on the same
service goes on as before. Needs root; never skips.

usage: test_h2_refuse.py L7C L7RUN MODE   (MODE: mesh or gateway)"""
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "common"))
from policy import policy  # noqa: E402

L7C, L7RUN, MODE = sys.argv[1:4]
PID = os.getpid()
BASE = 22000 + (PID % 500) * 4   # ports unique per run (test_mesh.py: 20000-29999 step 10)
SVC, PA, METRICS = BASE, BASE + 1, BASE + 2
CG_ROOT = "/sys/fs/cgroup/unified"
CG = os.path.join(CG_ROOT, "l7h2r-test-%d" % PID)
PIN = "/sys/fs/bpf/l7h2r-test-%d" % PID
TMP = tempfile.mkdtemp(prefix="l7h2r-")
HOME_CG = open("/proc/self/cgroup").read().split("0::", 1)[1].split("\n")[0]
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
GOAWAY, SETTINGS, HTTP_1_1_REQUIRED = 7, 4, 0xd

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
class H(socketserver.BaseRequestHandler):
    def handle(self):
        buf = b""
        while True:
            d = self.request.recv(65536)
            if not d:
                return
            sys.stdout.write(repr(d) + "\n"); sys.stdout.flush()
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

procs = {}


def in_cgroup():
    if MODE == "mesh":
        with open(os.path.join(CG, "cgroup.procs"), "w") as f:
            f.write("%d\n" % os.getpid())


def start(name, argv, **kw):
    procs[name] = subprocess.Popen(argv, preexec_fn=in_cgroup, **kw)
    return procs[name]


def stop(name):
    p = procs.pop(name, None)
    if p and p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def wait_port(port, timeout=10.0):
    end = time.time() + timeout
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("port %d never opened" % port)


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def counters():
    out = subprocess.run([L7RUN, "--stats", PIN], capture_output=True, text=True, timeout=10).stdout
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^stat (\S+)\s+(\d+)", out, re.M)}


def backend_log():
    with open(os.path.join(TMP, "backend.log")) as f:
        return f.read()


def frames(data):
    out = []
    while len(data) >= 9:
        n = int.from_bytes(data[:3], "big")
        out.append((data[3], data[4], int.from_bytes(data[5:9], "big") & 0x7fffffff, data[9:9 + n]))
        data = data[9 + n:]
    return out


def raw_h2(payload):
    """Send payload on a new connection; everything until the server closes (bounded)."""
    s = socket.create_connection(("127.0.0.1", SVC), 5)
    s.settimeout(5)
    s.sendall(payload)
    got = b""
    t0 = time.time()
    while True:
        d = s.recv(65536)
        if not d:
            break
        got += d
    s.close()
    return got, time.time() - t0


# ---- checks --------------------------------------------------------------------------------

def t_raw():
    """preface + SETTINGS + a HEADERS for /a: SETTINGS then GOAWAY(0, HTTP_1_1_REQUIRED), closed"""
    before = counters().get("h2_refused", 0)
    hdrs = bytes([0x82, 0x86, 0x04, 0x02]) + b"/a" + bytes([0x01, 0x01]) + b"x"   # GET http /a x
    req = PREFACE + struct.pack(">I", 0)[1:] + bytes([SETTINGS, 0]) + struct.pack(">I", 0) + \
        struct.pack(">I", len(hdrs))[1:] + bytes([1, 5]) + struct.pack(">I", 1) + hdrs
    got, took = raw_h2(req)
    fr = frames(got)
    check([f[0] for f in fr] == [SETTINGS, GOAWAY], "SETTINGS then GOAWAY: %r" % got[:80])
    check(fr[0][1] == 0 and fr[0][2] == 0, "our SETTINGS on stream 0, not an ACK")
    last, code = struct.unpack(">II", fr[1][3][:8])
    check(fr[1][2] == 0 and last == 0 and code == HTTP_1_1_REQUIRED,
          "GOAWAY last stream 0, HTTP_1_1_REQUIRED: %r" % (fr[1],))
    check(b"HTTP/1.1" not in got, "no HTTP/1.1 answer to an HTTP/2 client")
    check(took < 3, "closed promptly (%.1f s)" % took)
    check(counters().get("h2_refused", 0) == before + 1, "counted as h2_refused")


def t_preface_alone():
    """only the preface, in two writes: refused the same way"""
    s = socket.create_connection(("127.0.0.1", SVC), 5)
    s.settimeout(5)
    s.sendall(PREFACE[:10])
    time.sleep(0.1)
    s.sendall(PREFACE[10:])
    got = b""
    while True:
        d = s.recv(65536)
        if not d:
            break
        got += d
    s.close()
    check([f[0] for f in frames(got)] == [SETTINGS, GOAWAY], "refused: %r" % got[:80])


def t_curl():
    before = counters().get("h2_refused", 0)
    t0 = time.time()
    r = subprocess.run(["curl", "-s", "-m", "5", "-o", "/dev/null", "-w", "%{http_code}", "--http2-prior-knowledge",
                        "http://127.0.0.1:%d/a" % SVC], capture_output=True, text=True, timeout=10)
    check(time.time() - t0 < 4, "curl did not wait for its timeout")
    check(r.returncode not in (0, 28, 52), "curl fails with an HTTP/2 error, not a timeout or an empty reply: %d"
          % r.returncode)
    check(counters().get("h2_refused", 0) == before + 1, "curl's connection counted as h2_refused")


def t_nghttp():
    r = subprocess.run(["nghttp", "-v", "-t", "5", "http://127.0.0.1:%d/a" % SVC, "http://127.0.0.1:%d/b" % SVC],
                       capture_output=True, text=True, timeout=10)
    check(re.search(r"recv GOAWAY frame <.*\n.*error_code=HTTP_1_1_REQUIRED", r.stdout),
          "nghttp sees GOAWAY HTTP_1_1_REQUIRED: %r" % r.stdout[-600:])


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


CHECKS = [("raw", t_raw), ("preface_split", t_preface_alone), ("curl", t_curl), ("nghttp", t_nghttp),
          ("http1", t_http1_still), ("upgrade", t_upgrade), ("backend", t_backend_saw_nothing)]


def main():
    if os.geteuid() != 0:
        print("FAIL: needs root")
        return 1
    if MODE == "mesh":
        os.mkdir(CG)
    failed = 0
    try:
        pol = os.path.join(TMP, "h2r.l7")
        with open(pol, "w") as f:
            f.write(POLICY)
        obj = os.path.join(TMP, "h2r.o")
        subprocess.run([L7C, pol, "-o", obj], check=True, timeout=120)
        start("backend", [sys.executable, "-c", BACKEND, str(PA)],
              stdout=open(os.path.join(TMP, "backend.log"), "w"), stderr=subprocess.STDOUT)
        wait_port(PA)
        log = open(os.path.join(TMP, "l7run.log"), "w")
        if MODE == "mesh":
            argv = [L7RUN, "--mesh", "--cgroup", CG, "--pool", "4", "--pin", PIN, obj]
        else:
            argv = [L7RUN, "--pin", PIN, "--listen", "127.0.0.1:%d" % SVC, "--upstream", "0=127.0.0.1:%d" % PA, obj]
        start("l7run", argv, stderr=log, stdout=log)
        wait_port(SVC)
        time.sleep(0.3)
        in_cgroup()   # mesh: this process and its children are the cgroup's clients
        for name, fn in CHECKS:
            t0 = time.time()
            try:
                fn()
                print("ok   %-14s %.2fs" % (name, time.time() - t0))
            except Exception as e:  # report every check, then fail
                failed += 1
                print("FAIL %-14s %s" % (name, e))
            sys.stdout.flush()
    finally:
        if MODE == "mesh":
            with open(os.path.join(CG_ROOT + HOME_CG, "cgroup.procs"), "w") as f:
                f.write("%d\n" % os.getpid())
        for name in list(procs):
            stop(name)
        if failed:
            print(open(os.path.join(TMP, "l7run.log")).read()[-3000:])
        if MODE == "mesh":
            for _ in range(50):
                try:
                    os.rmdir(CG)
                    break
                except OSError:
                    time.sleep(0.1)
        subprocess.run(["rm", "-rf", TMP, PIN])
    check(not os.path.exists(CG), "cgroup removed")
    print("%d check(s) failed" % failed if failed else "all %s h2 refusal checks passed" % MODE)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
