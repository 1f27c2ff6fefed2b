#!/usr/bin/python3
"""Many HTTP/2 clients through mesh mode with a small --pool (issue 14, the c64 failures of
bench/h2.py). An HTTP/2 client's streams go on backend connections of its own, which l7run
opens when the client's first stream to an upstream needs one (runtime/mesh_h2.c): the pool
(--pool, at most 64 connections an upstream) bounds HTTP/1.1 clients only. h2load with 64 and
then 128 connections x 10 streams over two upstreams (nghttpd a and b, h2c): every request
answered 200, every one seen by its backend (nghttpd's log), no stream refused; once the clients
are gone the backends' connections are back to the pool's (none leaked). And a stream l7run
cannot open a connection for (its file descriptors used up: its limit lowered while the test
runs) is refused with REFUSED_STREAM (retryable) and counted, never answered 503; the same
connection's next stream is served once the limit is back.
Needs root; never skips.

usage: test_h2_pool.py L7C L7RUN"""
import os
import re
import resource
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "common"))
from check import run_checks  # noqa: E402
from policy import policy  # noqa: E402
from procs import CG_ROOT, cgroup_remove, l7run_stats, serving  # noqa: E402
from h2frames import PREFACE, DATA, HEADERS, RST_STREAM, SETTINGS, fr, frames, block, answers, read_until  # noqa: E402

L7C, L7RUN = sys.argv[1:3]
PID = os.getpid()
BASE = 27000 + (PID % 300) * 3   # test_h2_mesh.py: 24000-26999
SVC, PA, PB = BASE, BASE + 1, BASE + 2
CG = os.path.join(CG_ROOT, "l7h2p-test-%d" % PID)
PIN = "/sys/fs/bpf/l7h2p-test-%d" % PID
TMP = tempfile.mkdtemp(prefix="l7h2p-")
POOL = 2
REFUSED_STREAM = 7
L7 = []   # l7run's process

POLICY = policy("h2p", SVC, [("a", PA), ("b", PB)], """\
  if (starts_with(request.path, "/b/")) {
    Route(request, b);
  } else {
    Route(request, a);
  }
""")


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def backend_log(which):
    with open(os.path.join(TMP, "nghttpd-%s.log" % which)) as f:
        return f.read()


def backend_conns():
    """established connections to the backends, counted at l7run's ends (this netns)"""
    out = subprocess.run(["ss", "-Htn", "state", "established", "( dport = :%d or dport = :%d )" % (PA, PB)],
                         capture_output=True, text=True, timeout=5).stdout
    return len([ln for ln in out.splitlines() if ln.strip()])


def settle(want, secs=5.0):
    """the backends' connection count once it is `want`, or what it is after secs"""
    end = time.time() + secs
    n = backend_conns()
    while n != want and time.time() < end:
        time.sleep(0.1)
        n = backend_conns()
    return n


BASELINE = []


def load(conns, streams, n):
    """h2load: n requests over conns connections, `streams` at a time each, alternating /a/ and
    /b/; every one 200 and seen by its backend, nothing refused, no connection left over"""
    if not BASELINE:
        BASELINE.append(settle(2 * POOL))
    before = l7run_stats(L7RUN, PIN)
    na, nb = backend_log("a").count(":path: /a/hello.txt"), backend_log("b").count(":path: /b/hello.txt")
    r = subprocess.run(["h2load", "-n", str(n), "-c", str(conns), "-m", str(streams),
                        "http://127.0.0.1:%d/a/hello.txt" % SVC, "http://127.0.0.1:%d/b/hello.txt" % SVC],
                       capture_output=True, text=True, timeout=120)
    m = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored",
                  r.stdout)
    s = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", r.stdout)
    check(m and s, "h2load ran: %r %r" % (r.stdout[-600:], r.stderr[-300:]))
    ok, failed, errored, c2xx, c5xx = int(m.group(4)), int(m.group(5)), int(m.group(6)), int(s.group(1)), int(s.group(4))
    after = l7run_stats(L7RUN, PIN)
    delta = {k: after.get(k, 0) - before.get(k, 0) for k in ("forwarded", "pool_miss", "h2_streams_refused")}
    check(ok == n and failed == 0 and errored == 0 and c2xx == n,
          "c%d: %d requests answered 200: %d succeeded, %d failed, %d errored, %d 5xx; %r" %
          (conns, n, ok, failed, errored, c5xx, delta))
    time.sleep(0.2)   # nghttpd's log is written as it goes
    da = backend_log("a").count(":path: /a/hello.txt") - na
    db = backend_log("b").count(":path: /b/hello.txt") - nb
    check(da == n // 2 and db == n // 2, "every request reached its backend: a %d, b %d of %d each" % (da, db, n // 2))
    check(delta["forwarded"] == n and delta["pool_miss"] == 0 and delta["h2_streams_refused"] == 0,
          "every stream decided and forwarded, none missed a connection or was refused: %r" % delta)
    left = settle(BASELINE[0])
    check(left == BASELINE[0], "backend connections back to the pool's %d once the clients left: %d" % (BASELINE[0], left))
    return "%d ok, %r" % (ok, delta)


def ended(sid):
    return lambda g: any(s == sid and (t == RST_STREAM or (t in (HEADERS, DATA) and fl & 1)) for t, fl, s, _ in frames(g))


def t_refused():
    pid = L7[0].pid
    soft, hard = resource.prlimit(pid, resource.RLIMIT_NOFILE)
    used = {int(n) for n in os.listdir("/proc/%d/fd" % pid)}
    # the lowest limit that leaves l7run one free descriptor: the client's connection takes it
    lim = next(n for n in range(1, hard) if n - len([f for f in used if f < n]) == 1)
    before = l7run_stats(L7RUN, PIN).get("h2_streams_refused", 0)
    resource.prlimit(pid, resource.RLIMIT_NOFILE, (lim, hard))
    try:
        s = socket.create_connection(("127.0.0.1", SVC), 5)
        s.settimeout(5)
        s.sendall(PREFACE + fr(SETTINGS, 0, 0) + fr(HEADERS, 5, 1, block(b"/a/hello.txt")))
        got = read_until(s, done=ended(1))
    finally:
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (soft, hard))
    a = answers(frames(got)).get(1, [{}, b"", None])
    check(a[2] == REFUSED_STREAM and not a[0], "stream 1 refused, REFUSED_STREAM, no answer: %r" % (a,))
    after = l7run_stats(L7RUN, PIN).get("h2_streams_refused", 0)
    check(after == before + 1, "counted in h2_streams_refused: %d -> %d" % (before, after))
    s.sendall(fr(HEADERS, 5, 3, block(b"/a/hello.txt")))
    got = read_until(s, done=ended(3))
    s.close()
    a = answers(frames(got)).get(3, [{}, b"", None])
    check(a[0].get(":status") == "200" and a[1] == b"hello from a\n", "stream 3 served with the limit back: %r" % (a,))
    return "limit %d (of %d)" % (lim, soft)


def t_c64():
    return load(64, 10, 6400)


def t_c128():
    return load(128, 10, 12800)


CHECKS = [("refused", t_refused), ("c64", t_c64), ("c128", t_c128)]


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
        pol = os.path.join(TMP, "h2p.l7")
        with open(pol, "w") as f:
            f.write(POLICY)
        obj = os.path.join(TMP, "h2p.o")
        subprocess.run([L7C, pol, "-o", obj], check=True, timeout=120)
        backends = [(["sh", "-c", 'exec nghttpd --no-tls -v -a 127.0.0.1 --max-concurrent-streams=2000 -d "$1" "$2" > "$3"',
                      "nghttpd", os.path.join(TMP, "docs", w), str(p), os.path.join(TMP, "nghttpd-%s.log" % w)], p)
                    for w, p in (("a", PA), ("b", PB))]
        with serving("mesh", L7RUN, obj, SVC, backends, log, CG, PIN, extra=("--pool", str(POOL), "--h2c", "a,b")) as l7:
            L7.append(l7)
            failed += run_checks(CHECKS, (), "%-7s")
    finally:
        log.close()
        if failed:
            print(open(log.name).read()[-3000:])
        if not cgroup_remove(CG):
            failed += 1
            print("FAIL cgroup left behind: " + CG)
        subprocess.run(["rm", "-rf", TMP, PIN])
    print("%d check(s) failed" % failed if failed else "all HTTP/2 pool checks passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
