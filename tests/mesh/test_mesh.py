#!/usr/bin/env python3
"""Mesh mode end to end: real clients and two echo backends in a cgroup of their own, l7run
--mesh attaching the compiled policy to it. Needs root (CI runs as root); never skips.

usage: test_mesh.py L7C L7RUN [CHECK...]   (default: every check)"""
import errno
import fcntl
import hashlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import struct
import tempfile
import termios
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "runtime"))
from gw_client import Reader as FramedReader  # noqa: E402  (chunked framing, bytes per response)
from telemetry import UpstreamTally, samples  # noqa: E402  (tests/common, on the path through gw_client)
from policy import policy  # noqa: E402
from check import run_checks  # noqa: E402
CG_ROOT = "/sys/fs/cgroup/unified"
L7C, L7RUN = sys.argv[1], sys.argv[2]
ONLY = sys.argv[3:]
PID = os.getpid()
BASE = 20000 + (PID % 1000) * 10          # ports unique per run
SVC, PA, PB, METRICS = BASE, BASE + 1, BASE + 2, BASE + 3
POOL = 8
CG = os.path.join(CG_ROOT, "l7mesh-test-%d" % PID)
PIN = "/sys/fs/bpf/l7mesh-test-%d" % PID
TMP = tempfile.mkdtemp(prefix="l7mesh-")

POLICY = policy("mesh", SVC, [("a", PA), ("b", PB)], """\
  if (starts_with(request.path, "/admin")) {
    Deny(request, 403);
  } else if (starts_with(request.path, "/a")) {
    SetHeader(request, "x-l7-mesh", "a");
    Route(request, a);
  } else if (starts_with(request.path, "/b")) {
    Route(request, b);
  } else {
    Route(request, a);
  }
""")

procs = {}


def in_cgroup():
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


def wait_port(port, timeout=30.0):   # l7run verifies its programs first: seconds on a loaded machine
    end = time.time() + timeout
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("port %d never opened" % port)


def start_backend(name, port):
    start("backend" + name, [sys.executable, os.path.join(HERE, "echo.py"), name, str(port)])
    wait_port(port)


def connect():
    s = socket.create_connection(("127.0.0.1", SVC), 5)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.settimeout(5)
    return s


def req(path, method="GET", body=b"", extra=""):
    head = "%s %s HTTP/1.1\r\nHost: front\r\n%s" % (method, path, extra)
    if body or method == "POST":
        head += "Content-Length: %d\r\n" % len(body)
    return (head + "\r\n").encode() + body


class Reader:
    """Reads HTTP/1.1 responses (Content-Length framed) from a socket."""

    def __init__(self, s):
        self.s, self.buf = s, b""

    def more(self):
        d = self.s.recv(262144)
        if not d:
            raise EOFError("connection closed")
        self.buf += d

    def response(self, no_body=False):
        """no_body: the response to a HEAD request (no body, whatever its Content-Length)."""
        while b"\r\n\r\n" not in self.buf:
            self.more()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.decode().split("\r\n")
        status = int(lines[0].split()[1])
        hdrs = dict((l.split(":", 1)[0].lower(), l.split(":", 1)[1].strip()) for l in lines[1:])
        n = 0 if no_body else int(hdrs.get("content-length", 0))
        while len(self.buf) < n:
            self.more()
        body, self.buf = self.buf[:n], self.buf[n:]
        return status, hdrs, body.decode(errors="replace")


def field(body, name):
    for line in body.splitlines():
        if line.startswith(name + "="):
            return line[len(name) + 1:]
    return None


def curl(*args):
    r = subprocess.run(["curl", "-s", "-m", "5"] + list(args), capture_output=True, text=True, timeout=10)
    return r.stdout


def check(cond, what):
    if not cond:
        raise AssertionError(what)


# ---- checks --------------------------------------------------------------------------------

def t_routing():
    check(field(curl("http://127.0.0.1:%d/a/x" % SVC), "backend") == "A", "/a/x -> A")
    check(field(curl("http://127.0.0.1:%d/b/y" % SVC), "backend") == "B", "/b/y -> B")
    check(field(curl("http://127.0.0.1:%d/other" % SVC), "backend") == "A", "default -> A")


def t_deny():
    out = curl("-i", "http://127.0.0.1:%d/admin/x" % SVC)
    check(out.startswith("HTTP/1.1 403"), "deny gets 403: %r" % out[:40])
    s = connect()
    r = Reader(s)
    s.sendall(req("/admin"))
    check(r.response()[0] == 403, "403 on a keep-alive connection")
    s.sendall(req("/b/after"))
    st, _, body = r.response()
    check(st == 200 and field(body, "backend") == "B", "connection usable after a deny")
    s.close()


def t_header():
    check(field(curl("http://127.0.0.1:%d/a/h" % SVC), "h:x-l7-mesh") == "a", "header added for /a")
    check(field(curl("http://127.0.0.1:%d/b/h" % SVC), "h:x-l7-mesh") is None, "no header for /b")


def t_keepalive():
    s = connect()
    r = Reader(s)
    for i in range(5000):
        up = "ab"[i % 3 == 0]
        s.sendall(req("/%s/%d" % (up, i)))
        st, _, body = r.response()
        check(st == 200 and field(body, "backend") == up.upper() and field(body, "path") == "/%s/%d" % (up, i),
              "request %d routed to %s" % (i, up))
    s.close()


def t_pipeline():
    s = connect()
    r = Reader(s)
    paths = ["/a/1", "/b/2", "/b/3", "/admin/4", "/a/5", "/b/6", "/a/7", "/a/8"]
    s.sendall(b"".join(req(p) for p in paths))
    for p in paths:
        st, _, body = r.response()
        if p.startswith("/admin"):
            check(st == 403, "pipelined deny in place")
        else:
            check(st == 200 and field(body, "path") == p, "pipelined response for %s in order (got %s)"
                  % (p, field(body, "path")))
    s.close()


def t_small_writes():
    s = connect()
    r = Reader(s)
    for path in ("/b/split", "/a/split"):
        data = req(path, extra="X-Pad: %s\r\n" % ("p" * 100))
        for i in range(0, len(data), 3):
            s.sendall(data[i:i + 3])
            time.sleep(0.001)
        st, _, body = r.response()
        check(st == 200 and field(body, "path") == path, "3-byte writes of %s" % path)
    s.close()


def t_post():
    blob = os.urandom(200 * 1024)
    want = hashlib.sha256(blob).hexdigest()
    fn = os.path.join(TMP, "blob")
    with open(fn, "wb") as f:
        f.write(blob)
    for expect in ([], ["-H", "Expect:"]):
        body = curl("--data-binary", "@" + fn, *expect, "http://127.0.0.1:%d/b/post" % SVC)
        check(field(body, "len") == "%d sha256=%s" % (len(blob), want), "curl POST 200 KiB %s" % expect)
    s = connect()
    r = Reader(s)
    s.sendall(req("/a/post", "POST", blob) + req("/b/after-post"))   # body and next request in one write
    st, _, body = r.response()
    check(st == 200 and field(body, "len") == "%d sha256=%s" % (len(blob), want), "raw POST checksum")
    st, _, body = r.response()
    check(st == 200 and field(body, "path") == "/b/after-post", "request after a body")
    s.close()


def t_restart():
    stop("backendA")
    statuses = set()
    end = time.time() + 5
    while time.time() < end and not statuses & {502, 503}:
        out = curl("-o", "/dev/null", "-w", "%{http_code}", "http://127.0.0.1:%d/a/down" % SVC)
        statuses.add(int(out or 0))
    check(statuses & {502, 503}, "backend down gives 502/503 (got %s)" % statuses)
    check(field(curl("http://127.0.0.1:%d/b/up" % SVC), "backend") == "B", "other upstream unaffected")
    start_backend("A", PA)
    end = time.time() + 5
    ok = False
    while time.time() < end and not ok:
        ok = field(curl("http://127.0.0.1:%d/a/back" % SVC), "backend") == "A"
        time.sleep(0.05)
    check(ok, "pool refilled after the backend came back")


def count(pinned):
    out = subprocess.run(["bpftool", "-j", "map", "dump", "pinned", os.path.join(PIN, pinned)],
                         capture_output=True, text=True, timeout=20).stdout
    return len(json.loads(out or "[]"))


def nfds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def t_churn():
    base_socks, base_conns = count("l7_mesh_socks"), count("l7_mesh_conns")
    base_fds = nfds(procs["l7run"].pid)
    for i in range(1000):
        s = connect()
        r = Reader(s)
        s.sendall(req("/%s/churn%d" % ("ab"[i % 2], i)))
        check(r.response()[0] == 200, "churn request %d" % i)
        s.close()
    end = time.time() + 10
    while time.time() < end:
        now = (count("l7_mesh_socks"), count("l7_mesh_conns"), nfds(procs["l7run"].pid))
        if now == (base_socks, base_conns, base_fds):
            break
        time.sleep(0.2)
    check(now == (base_socks, base_conns, base_fds), "after 1,000 connections: socks/conns/fds %s, baseline %s"
          % (now, (base_socks, base_conns, base_fds)))


def t_churn_last_slot():
    """POOL - 1 keep-alive clients hold their upstream-a slots; 500 short connections share the
    last one. A client that closed gives its slot back at its FIN (nothing owed), not when the
    socket is finally closed after l7run's end: before, the next client found none (503)."""
    held = []
    for i in range(POOL - 1):
        s = connect()
        r = Reader(s)
        s.sendall(req("/a/hold%d" % i))
        check(r.response()[0] == 200, "holding client %d" % i)
        held.append(s)
    bad = []
    for i in range(500):
        s = connect()
        r = Reader(s)
        s.sendall(req("/a/last%d" % i))
        st = r.response()[0]
        if st != 200:
            bad.append((i, st))
        s.close()
    check(not bad, "500 connections through the last free slot: %d not 200 %s" % (len(bad), bad[:5]))
    # every slot held: the next client gets 503 and l7run says the pool ran out
    last = connect()
    rl = Reader(last)
    last.sendall(req("/a/hold-last"))
    check(rl.response()[0] == 200, "the client that takes the last slot")
    extra = connect()
    rx = Reader(extra)
    extra.sendall(req("/a/one-too-many"))
    check(rx.response()[0] == 503, "a client past --pool gets 503")
    end = time.time() + 2
    while time.time() < end and "pool exhausted" not in open(os.path.join(TMP, "l7run.log")).read():
        time.sleep(0.05)
    check("pool exhausted" in open(os.path.join(TMP, "l7run.log")).read(), "l7run logs that the pool ran out")
    for s in held + [last, extra]:
        s.close()


def t_head():
    """HEAD then GET on one keep-alive connection: the HEAD response ends with its head even
    though its Content-Length is not 0 (one write each, then pipelined in one write)."""
    s = connect()
    r = Reader(s)
    for up in "ab":
        s.sendall(req("/%s/h?size=5000" % up, "HEAD"))
        st, hdrs, body = r.response(no_body=True)
        check(st == 200 and hdrs.get("content-length") == "5000" and body == "", "HEAD /%s: head only" % up)
        s.sendall(req("/%s/after-head" % up))
        st, _, body = r.response()
        check(st == 200 and field(body, "path") == "/%s/after-head" % up, "GET after HEAD on /%s" % up)
    s.sendall(req("/a/h1", "HEAD") + req("/a/g1") + req("/a/h2", "HEAD") + req("/a/h3", "HEAD") + req("/a/g2"))
    for p, head in (("/a/h1", 1), ("/a/g1", 0), ("/a/h2", 1), ("/a/h3", 1), ("/a/g2", 0)):
        st, hdrs, body = r.response(no_body=bool(head))
        check(st == 200 and (body == "" if head else field(body, "path") == p), "pipelined %s" % p)
        if head:
            check(int(hdrs.get("content-length", 0)) > 0, "HEAD %s has the GET's length" % p)
    # a HEAD the policy denies: l7run's 403 has a Content-Length but no body, so the GET
    # pipelined behind it is read as the next response, not as the 403's body
    s.sendall(req("/admin/h", "HEAD") + req("/a/after-denied-head"))
    st, hdrs, body = r.response(no_body=True)
    check(st == 403 and int(hdrs.get("content-length", 0)) > 0, "denied HEAD: 403, head only")
    st, _, body = r.response()
    check(st == 200 and field(body, "path") == "/a/after-denied-head", "GET after a denied HEAD")
    s.close()


def t_chunked():
    """A chunked request body (framed by l7run, sent whole) reaches the backend intact, with
    the policy applied to its head; the connection closes after its response."""
    blob = os.urandom(100000)
    body = b"".join(b"%x;ext=1\r\n" % len(blob[i:i + 30000]) + blob[i:i + 30000] + b"\r\n"
                    for i in range(0, len(blob), 30000)) + b"0\r\n\r\n"
    for path, up in (("/a/chunked", "A"), ("/b/chunked", "B")):
        s = connect()
        r = Reader(s)
        data = req(path, "PUT", extra="Transfer-Encoding: chunked\r\n") + body
        for i in range(0, len(data), 7000):   # in pieces: l7run holds it until the last chunk
            s.sendall(data[i:i + 7000])
        st, _, got = r.response()
        check(st == 200 and field(got, "backend") == up and field(got, "len") == "%d sha256=%s"
              % (len(blob), hashlib.sha256(blob).hexdigest()), "chunked PUT %s: %r" % (path, got[:80]))
        check(up != "A" or field(got, "h:x-l7-mesh") == "a", "header inserted before a chunked body")
        try:
            check(s.recv(100) == b"", "closed after the chunked request's response")
        except ConnectionResetError:
            pass
        s.close()
    s = connect()
    r = Reader(s)
    s.sendall(req("/admin/x", "PUT", extra="Transfer-Encoding: chunked\r\n") + b"5\r\nhello\r\n0\r\n\r\n")
    check(r.response()[0] == 403, "a denied chunked request gets its status")
    s.close()
    s = connect()
    r = Reader(s)
    s.sendall(req("/b/bad", "PUT", extra="Transfer-Encoding: chunked\r\n") + b"5\r\nhelloXX0\r\n\r\n")
    check(r.response()[0] == 400, "chunk data without its CRLF: 400")
    s.close()


QMAX = 4 << 20     # L7_MESH_CLIENT_QMAX


def test_sock_mem():
    """Bytes the kernel holds for this run's TCP sockets (every socket to or from one of its
    ports: clients, l7run's pool, backends): receive + send allocations from ss's skmem.
    Machine-wide counters (/proc/net/sockstat) also see the tests running next to this one."""
    ports = (SVC, PA, PB)
    flt = " or ".join("sport = :%d or dport = :%d" % (p, p) for p in ports)
    out = subprocess.run(["ss", "-Htnm", "( %s )" % flt], capture_output=True, text=True).stdout
    total = 0
    for m in re.finditer(r"skmem:\(([^)]*)\)", out):
        f = {re.match(r"[a-z]+", x).group(0): int(re.sub(r"^[a-z]+", "", x)) for x in m.group(1).split(",")}
        total += f.get("r", 0) + f.get("t", 0) + f.get("w", 0)
    return total


def queued(s):
    """Bytes in the socket's receive queue, the sockmap ingress list included (FIONREAD)."""
    return struct.unpack("i", fcntl.ioctl(s.fileno(), termios.FIONREAD, b"\0" * 4))[0]


def t_slow_reader():
    """A client asks for 8 x 16 MiB and never reads: what the kernel queues for it stays under
    the bound, its connection is reset, other clients go on."""
    other = connect()
    ro = Reader(other)
    other.sendall(req("/b/warm"))
    check(ro.response()[0] == 200, "second client works before")
    mem0 = test_sock_mem()
    s = connect()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    s.sendall(b"".join(req("/a/big?size=%d" % (16 << 20)) for _ in range(8)))
    peak_q = peak_mem = 0
    end = time.time() + 4
    reset = False
    while time.time() < end:
        try:
            peak_q = max(peak_q, queued(s))
        except OSError:
            pass
        peak_mem = max(peak_mem, test_sock_mem() - mem0)
        state = subprocess.run(["ss", "-Htn", "state", "established", "sport", "= :%d" % s.getsockname()[1]],
                               capture_output=True, text=True).stdout.strip()
        if not state:
            reset = True
        other.sendall(req("/b/during"))
        st, _, body = ro.response()
        check(st == 200 and field(body, "path") == "/b/during", "another client unaffected")
        time.sleep(0.05)
    print("     slow reader: queued at most %d bytes (bound %d), socket memory +%d KiB, reset %s"
          % (peak_q, QMAX, peak_mem // 1024, reset))
    check(peak_q <= QMAX, "queued %d bytes for a client that does not read (bound %d)" % (peak_q, QMAX))
    # the client's queue, plus what its backend still owes it, discarded at l7run's end of the
    # pool connection (bounded by the same QMAX: before, 10-20 MiB piled up there under load),
    # plus 1 MiB for the other client and socket buffers; without the bounds: 128 MiB
    check(peak_mem <= 2 * QMAX + (1 << 20), "socket memory grew by %d KiB (bound 2 x %d KiB + 1 MiB)"
          % (peak_mem // 1024, QMAX // 1024))
    check(reset, "the connection of a client past the bound is closed")
    got, err = 0, None
    s.settimeout(2)
    try:
        while True:
            d = s.recv(1 << 20)
            if not d:
                break
            got += len(d)
    except OSError as e:
        err = e.errno
    check(err in (None, errno.ECONNRESET) and got <= QMAX, "reset after at most the bound (%d bytes, %s)"
          % (got, err))
    s.close()
    other.sendall(req("/a/after"))
    st, _, body = ro.response()
    check(st == 200 and field(body, "path") == "/a/after", "the upstream of the slow reader still serves")
    other.close()
    time.sleep(0.3)
    check(test_sock_mem() - mem0 < (1 << 20), "memory released after the reset (%d bytes left)" % (test_sock_mem() - mem0))


def outside(args):
    """Run args from the cgroup this test started in: a client outside the mesh."""
    def leave():
        with open(os.path.join(CG_ROOT + HOME_CG, "cgroup.procs"), "w") as f:
            f.write("%d\n" % os.getpid())
    return subprocess.run(args, preexec_fn=leave, capture_output=True, text=True, timeout=20)


def t_outside():
    """A client outside the cgroup: its sockets are not the mesh's, so no program sees its
    requests. It is answered at once (l7run relays it through a connection of its own inside the
    cgroup: the policy judges it like any client), never left hanging, and a Deny still denies."""
    def outside_count():
        m = re.search(r'l7_dataplane_total\{event="outside_clients"\} (\d+)', curl("http://127.0.0.1:%d/metrics" % METRICS))
        return int(m.group(1)) if m else -1
    before = outside_count()
    for path, want, backend in (("/a/outside", "200", "A"), ("/admin/outside", "403", None), ("/b/outside", "200", "B")):
        t = time.time()
        r = outside(["curl", "-s", "-m", "5", "-w", "\n%{http_code}", "http://127.0.0.1:%d%s" % (SVC, path)])
        dt = time.time() - t
        body, _, code = r.stdout.rpartition("\n")
        check(code == want and dt < 1.0, "outside client %s: %r after %.2f s (want %s within 1 s)" % (path, code, dt, want))
        check(backend is None or (field(body, "backend") == backend and field(body, "path") == path),
              "outside client %s routed to %s: %r" % (path, backend, body[:200]))
        check(path != "/a/outside" or field(body, "h:x-l7-mesh") == "a", "the policy's header on an outside request")
    # two requests on one kept-alive connection, to both upstreams
    r = outside(["curl", "-s", "-m", "5", "http://127.0.0.1:%d/b/ka1" % SVC, "http://127.0.0.1:%d/a/ka2" % SVC])
    check(r.stdout.count("backend=B") == 1 and r.stdout.count("backend=A") == 1, "keep-alive outside: %r" % r.stdout[:300])
    check(outside_count() - before == 4, "outside connections counted: %d" % (outside_count() - before))
    check("from outside the cgroup" in open(os.path.join(TMP, "l7run.log")).read(), "l7run says so")


def t_metrics():
    """GET /metrics over HTTP: the rule that routes /b counts the requests sent to it."""
    def hits():
        text = curl("http://127.0.0.1:%d/metrics" % METRICS)
        m = re.search(r'l7_rule_hits_total\{[^}]*decision="forward",target="b"\} (\d+)', text)
        check(m and 'l7_dataplane_total{event="requests"}' in text, "metrics served: %r" % text[:300])
        return int(m.group(1))
    before = hits()
    for i in range(5):
        check(field(curl("http://127.0.0.1:%d/b/m%d" % (SVC, i)), "backend") == "B", "/b -> B")
    check(hits() - before == 5, "5 requests counted for the /b rule")
    check(curl("-o", "/dev/null", "-w", "%{http_code}", "http://127.0.0.1:%d/other" % METRICS) == "404",
          "404 off /metrics")


def t_upstream_metrics():
    """Per upstream: responses by status class, request bytes as sent (the header the policy
    inserts for /a included), response bytes as received; l7run's own answers apart. The
    scrape's deltas must equal the sums of what this client sent and read, exactly: requests
    redirected by SK_MSG and written by l7run (a pipelined switch of upstream, a chunked body),
    responses framed over many sendmsg calls (a 10,000-byte POST's answer, chunked bodies of one
    write per chunk), an interim 103, a HEAD."""
    inserted = len(b"x-l7-mesh: a\r\n")
    tally = UpstreamTally()

    def upstream(path):
        return "b" if path.startswith("/b") else "a"

    def count_request(path, data):
        tally.request(upstream(path), len(data) + (inserted if path.startswith("/a") else 0))

    def read(r, path, statuses, local=False, no_body=False):
        body = b""
        for want_st in statuses:
            st, n, body = r.framed(no_body)
            check(st == want_st, "%s: status %d, expected %d" % (path, st, want_st))
            tally.response(None if local else upstream(path), st, n)
        return body

    def scrape():
        return samples(curl("http://127.0.0.1:%d/metrics" % METRICS))

    before = scrape()
    s = connect()
    r = FramedReader(s)
    post = os.urandom(10000)
    for path, method, body, statuses in (
            ("/a/t?size=1000", "GET", b"", [200]),
            ("/a/t?status=404&size=10", "GET", b"", [404]),
            ("/b/t?status=500&size=0", "GET", b"", [500]),
            ("/b/post", "POST", post, [200]),
            ("/a/stream?chunked=1000&size=5000", "GET", b"", [200]),
            ("/b/early?interim=1&size=20", "GET", b"", [103, 200]),
            ("/b/head?size=700", "HEAD", b"", [200])):
        data = req(path, method, body)
        s.sendall(data)
        count_request(path, data)
        got = read(r, path, statuses, no_body=method == "HEAD")
        if method == "POST":
            check(b"len=10000 sha256=" + hashlib.sha256(post).hexdigest().encode() in got, "POST body arrived")
        if "chunked" in path:
            check(got == b"x" * 5000, "chunked body of %d bytes" % len(got))
    # a pipelined pair in one write, switching upstream (the second goes through l7run)
    pair = [("/a/p1?size=100", [200]), ("/b/p2?status=302&size=3", [302])]
    s.sendall(b"".join(req(p) for p, _ in pair))
    for p, sts in pair:
        count_request(p, req(p))
        read(r, p, sts)
    s.sendall(req("/admin/t"))   # l7run's own answer
    read(r, "/admin/t", [403], local=True)
    s.close()
    # a chunked request body in pieces (l7run frames it and sends it whole, then closes)
    s = connect()
    r = FramedReader(s)
    chunks = b"".join(b"%x\r\n" % n + b"c" * n + b"\r\n" for n in (3000, 1, 4095)) + b"0\r\n\r\n"
    data = req("/a/chunked-in", "PUT", extra="Transfer-Encoding: chunked\r\n") + chunks
    for i in range(0, len(data), 1500):
        s.sendall(data[i:i + 1500])
        time.sleep(0.005)
    count_request("/a/chunked-in", data)
    got = read(r, "/a/chunked-in", [200])
    check(b"len=7096 " in got and b"h:x-l7-mesh=a" in got, "chunked PUT arrived: %r" % got[:200])
    s.close()
    s = connect()   # a malformed request: l7run's 400
    r = FramedReader(s)
    s.sendall(b"GET /a HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!")
    read(r, "/bad", [400], local=True)
    s.close()

    keys, got = tally.deltas(before, scrape())
    want = tally.want
    check(len(keys) == 2 * 5 + 2 * 2 + 5 + 1, "metric lines: %s" % keys)
    bad = {k: (got[k], want.get(k, 0)) for k in keys if got[k] != want.get(k, 0)}
    check(not bad and set(want) <= set(keys), "counted != sent/received (got, want): %s" % bad)


CHECKS = [("routing", t_routing), ("deny", t_deny), ("header", t_header), ("keepalive", t_keepalive),
          ("pipeline", t_pipeline), ("small_writes", t_small_writes), ("post", t_post),
          ("restart", t_restart), ("churn", t_churn), ("churn_last_slot", t_churn_last_slot), ("slow_reader", t_slow_reader),
          ("head", t_head), ("chunked", t_chunked), ("outside", t_outside), ("metrics", t_metrics),
          ("upstream_metrics", t_upstream_metrics)]


HOME_CG = open("/proc/self/cgroup").read().split("0::", 1)[1].split("\n")[0]   # where this test started


def main():
    if os.geteuid() != 0:
        print("FAIL: needs root")
        return 1
    home_cg = HOME_CG
    os.mkdir(CG)
    failed = 0
    try:
        pol = os.path.join(TMP, "mesh.l7")
        with open(pol, "w") as f:
            f.write(POLICY)
        obj = os.path.join(TMP, "mesh.o")
        # L7C_MODE=mesh (ctest mesh.end_to_end_one_mode): an object of the mesh programs alone
        mode = ["--mode=" + os.environ["L7C_MODE"]] if os.environ.get("L7C_MODE") else []
        subprocess.run([L7C] + mode + [pol, "-o", obj], check=True, timeout=60)
        start_backend("A", PA)
        start_backend("B", PB)
        log = open(os.path.join(TMP, "l7run.log"), "w")
        start("l7run", [L7RUN, "--mesh", "--cgroup", CG, "--pool", str(POOL), "--pin", PIN, "--metrics-listen",
                        "127.0.0.1:%d" % METRICS, obj], stderr=log)
        wait_port(SVC)
        time.sleep(0.3)    # pool filled
        in_cgroup()        # this process is the raw-socket client; curl inherits the cgroup
        failed += run_checks(CHECKS, ONLY, "%-13s")
    finally:
        with open(os.path.join(CG_ROOT + home_cg, "cgroup.procs"), "w") as f:
            f.write("%d\n" % os.getpid())
        for name in list(procs):
            stop(name)
        if failed:
            print(open(os.path.join(TMP, "l7run.log")).read()[-3000:])
        for _ in range(50):
            try:
                os.rmdir(CG)
                break
            except OSError:
                time.sleep(0.1)
        subprocess.run(["rm", "-rf", TMP, PIN])
    check(not os.path.exists(CG), "cgroup removed")
    print("%d check(s) failed" % failed if failed else "all mesh checks passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
