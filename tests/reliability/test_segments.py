#!/usr/bin/python3
"""Pipelined requests however TCP splits them: the same answers, in order, in bounded time.

usage: test_segments.py L7C L7RUN MODE    (MODE: gateway | mesh)

A client sends a pipeline of two or three requests in pieces, one send() each (TCP_NODELAY and
a pause between them: mesh mode's SK_MSG runs once per sendmsg, gateway mode's parser once per
segment it receives). For every split point of each pipeline (two writes), every split point
with a second one a few bytes on (three writes), and one byte a write: each request must be
answered as it is when sent whole, in order, within ANSWER_S seconds: the upstream the policy
routes it to, the header it inserts, the body and trailer fields as sent, the denied one 403.
The pipelines: plain GETs to two upstreams; empty lines (RFC 9112 2.2) between requests, which
must not reach a backend (the echo backend takes one for a bad request); Content-Length
bodies; a denied request in the middle; a chunked body with a trailer field. Then trailer
fields whole: accepted and forwarded, or refused (framing fields, malformed) with 400 and
nothing forwarded. Mesh mode: no held head is left behind (l7_mesh_hold) once the clients are
gone. One l7run serves all of it; never skips (root, cgroup2, bpffs)."""
import hashlib
import os
import shutil
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import relcommon as rc  # noqa: E402
from policy import policy  # noqa: E402  (tests/common, on the path through relcommon)
from procs import serving  # noqa: E402
from rawhttp import Reader, connect  # noqa: E402

L7C, L7RUN, MODE = sys.argv[1:4]
SVC, PA, PB = rc.BASE, rc.BASE + 1, rc.BASE + 2
TMP = rc.tmpdir("l7seg-")
CG = os.path.join(rc.CG_ROOT, "l7seg-%d" % rc.PID)
PIN = "/sys/fs/bpf/l7seg-%d" % rc.PID
ECHO = os.path.join(rc.HERE, "..", "runtime", "echo_backend.py")
ANSWER_S = 3.0       # every response of a connection within this (the bug left one unanswered > 6 s)
PAUSE_S = 0.002      # between the writes of one connection
SECOND_CUTS = (3, 11)   # three writes: the second cut this many bytes after the first

POLICY = policy("seg", SVC, [("a", PA), ("b", PB)], """\
  if (starts_with(request.path, "/admin")) {
    Deny(request, 403);
  } else if (starts_with(request.path, "/b")) {
    Route(request, b);
  } else {
    SetHeader(request, "x-seg", "a");
    Route(request, a);
  }
""")


class Req:
    """One request of a pipeline and what its answer must say."""

    def __init__(self, path, method="GET", body=b"", chunked=None, trailers=()):
        self.path, self.method, self.body, self.trailers = path, method, body, list(trailers)
        head = "%s %s HTTP/1.1\r\nHost: front\r\n" % (method, path)
        if chunked:
            head += "Transfer-Encoding: chunked\r\n\r\n"
            data = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunked)
            self.body = b"".join(chunked)
            self.wire = head.encode() + data + b"0\r\n" + b"".join(t + b"\r\n" for t in self.trailers) + b"\r\n"
        else:
            if body:
                head += "Content-Length: %d\r\n" % len(body)
            self.wire = (head + "\r\n").encode() + body

    def check(self, status, body):
        """None if (status, body) is this request's answer, else what is wrong."""
        if self.path.startswith("/admin"):
            return None if status == 403 else "status %d, want 403" % status
        lines = body.split(b"\n")
        want = [b"backend=" + (b"B" if self.path.startswith("/b") else b"A"), b"target=" + self.path.encode(),
                b"method=" + self.method.encode(), b"body_len=%d" % len(self.body),
                b"body_sha256=" + hashlib.sha256(self.body).hexdigest().encode()]
        want += [b"trailer=" + t for t in self.trailers]
        miss = [w for w in want if w not in lines]
        seg = b"header=x-seg: a" in lines
        if status != 200 or miss or seg != (not self.path.startswith("/b")):
            return "status %d, missing %r, x-seg %s" % (status, miss, seg)
        return None


CRLF = Req.__new__(Req)   # an empty line between requests: sent, never answered
CRLF.wire = b"\r\n"

PIPELINES = {
    "two GETs": [Req("/a/1"), Req("/b/2")],
    "three GETs, empty lines between": [Req("/a/1"), CRLF, Req("/b/2"), CRLF, CRLF, Req("/a/3")],
    "Content-Length bodies": [Req("/a/1", "POST", b"first body, 17 b."), Req("/b/2"), Req("/b/3", "POST", b"nine byte")],
    "a denied request": [Req("/a/1"), Req("/admin/2"), Req("/b/3")],
    "a chunked body with a trailer": [Req("/b/1"), Req("/a/2", "POST", chunked=[b"hello", b" world"],
                                                           trailers=[b"x-sum: 11"])],
}


def run(pieces, reqs):
    """Send the pieces, one write each, and read the answers. None, or what went wrong."""
    s = connect(SVC, timeout=ANSWER_S)
    try:
        for i, p in enumerate(pieces):
            if i:
                time.sleep(PAUSE_S)
            s.sendall(p)
        r, end = Reader(s), time.time() + ANSWER_S
        for i, q in enumerate(reqs):
            s.settimeout(max(0.01, end - time.time()))
            try:
                status, _, body = r.message()
            except socket.timeout:
                return "request %d (%s) unanswered after %.0f s" % (i + 1, q.path, ANSWER_S)
            except (EOFError, OSError) as e:
                return "request %d (%s): %s" % (i + 1, q.path, type(e).__name__)
            why = q.check(status, body)
            if why:
                return "request %d (%s): %s" % (i + 1, q.path, why)
        return None
    finally:
        s.close()


def splits(data):
    """Every way to cut data in two, in three with the second cut SECOND_CUTS bytes on, and
    one byte a write."""
    for c in range(1, len(data)):
        yield [data[:c], data[c:]]
    for k in SECOND_CUTS:
        for c in range(1, len(data) - k):
            yield [data[:c], data[c:c + k], data[c + k:]]
    yield [data[i:i + 1] for i in range(len(data))]


def t_pipelines():
    fails, n, t0 = [], 0, time.time()
    for name, reqs in PIPELINES.items():
        data = b"".join(q.wire for q in reqs)
        answered = [q for q in reqs if q is not CRLF]
        why = run([data], answered)
        rc_assert(why is None, "%s, one write: %s" % (name, why))
        bad = []
        for pieces in splits(data):
            n += 1
            why = run(pieces, answered)
            if why:
                bad.append(([len(p) for p in pieces][:4], why))
        print("  %-34s %3d bytes, %4d segmentations, %d failed %s" % (name, len(data), len(list(splits(data))),
                                                                  len(bad), bad[:3]), flush=True)
        fails += [(name, b) for b in bad]
    print("  %d connections in %.1f s" % (n, time.time() - t0))
    rc_assert(not fails, "%d segmentations failed, first %r" % (len(fails), fails[:3]))


def t_trailers():
    """Trailer fields in one write: valid ones reach the backend after the body; framing fields
    and malformed lines get 400 and the connection closed, with nothing forwarded (the backend's
    count of requests read moves only by the one that asks for it)."""
    good = Req("/a/t", "POST", chunked=[b"abc"], trailers=[b"x-checksum: 900150983cd24fb0", b"x-e:", b"X-Two: a b\tc"])
    rc_assert(run([good.wire], [good]) is None, "valid trailer fields forwarded")
    long = Req("/a/t", "POST", chunked=[b"abc"], trailers=[b"x-long: " + b"v" * 3000])
    rc_assert(run([long.wire], [long]) is None, "a 3,000-byte trailer field forwarded")
    before = seq_of_a()
    for t in (b"Content-Length: 3", b"transfer-encoding: chunked", b"Host: evil", b"Connection: close",
              b"x-t : v", b" folded", b"x-t: a\rb", b"x-t", b": v", b"x-long: " + b"v" * 5000):
        bad = Req("/a/refused", "POST", chunked=[b"abc"], trailers=[b"x-ok: 1", t])
        sts, closed = rc.exchange(SVC, bad.wire, want=2, idle=1.0, limit=ANSWER_S)   # until the close
        rc_assert(sts[:1] == [400] and closed, "trailer %r: 400 and closed, got %r closed %s" % (t[:40], sts, closed))
    after = seq_of_a()
    rc_assert(after == before + 1, "none of the refused requests reached the backend (seq %d -> %d)" % (before, after))


def seq_of_a():
    """The echo backend A's count of requests read, through a request of its own."""
    s = connect(SVC, timeout=ANSWER_S)
    try:
        q = Req("/a/seq")
        s.sendall(q.wire)
        status, _, body = Reader(s).message()
        rc_assert(q.check(status, body) is None, "GET /a/seq: %s" % q.check(status, body))
        return int(body.split(b"seq=")[1].split(b"\n")[0])
    finally:
        s.close()


def held_entries():
    out = subprocess.run(["bpftool", "-j", "map", "dump", "pinned", os.path.join(PIN, "l7_mesh_hold")],
                         capture_output=True, text=True, timeout=20)
    rc_assert(out.returncode == 0, "l7_mesh_hold is pinned: %s" % out.stderr.strip())
    return out.stdout.count('"key"')


def rc_assert(cond, what):
    if not cond:
        raise AssertionError(what)


def main():
    if os.geteuid() != 0:
        print("FAIL: needs root (BPF, cgroups)")
        return 1
    obj = rc.compile_policy(L7C, POLICY, os.path.join(TMP, "seg.o"), subst=())
    if MODE == "mesh":
        os.makedirs(CG)
    backends = [([sys.executable, ECHO, str(PA), "A"], PA), ([sys.executable, ECHO, str(PB), "B"], PB)]
    log = open(os.path.join(TMP, "l7run.log"), "w+")
    failed = 0
    try:
        with serving(MODE, L7RUN, obj, SVC, backends, log, CG, PIN):
            for t in (t_pipelines, t_trailers):
                try:
                    t()
                    print("ok   %s %s" % (MODE, t.__name__), flush=True)
                except AssertionError as e:
                    failed += 1
                    print("FAIL %s %s: %s" % (MODE, t.__name__, e), flush=True)
            if MODE == "mesh":
                end = time.time() + 5
                while held_entries() and time.time() < end:
                    time.sleep(0.1)
                n = held_entries()
                print("%s %s: %d held heads left" % ("ok  " if not n else "FAIL", MODE, n))
                failed += n != 0
    finally:
        rc.stop_all()
        if MODE == "mesh":
            rc.cgroup_remove(CG)
        log.flush()
        if failed:
            print(open(log.name).read()[-3000:])
        shutil.rmtree(TMP, ignore_errors=True)
    print("%s: %s" % (MODE, "FAIL" if failed else "PASS"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
