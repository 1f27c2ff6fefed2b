#!/usr/bin/env python3
"""End-to-end tests of gateway mode: real backends on loopback, l7run, a compiled policy.
Run by ctest:  test_gateway.py L7C L7RUN POLICY.l7
Every process started here is ended by pid; ports derive from our pid; pins are removed."""
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gw_client import Reader, connect, get, req, wait_port  # noqa: E402
from telemetry import UpstreamTally, samples  # noqa: E402  (tests/common, on the path through gw_client)

L7C, L7RUN, POLICY = sys.argv[1:4]
HERE = os.path.dirname(os.path.abspath(__file__))
BASE = 20000 + (os.getpid() % 1200) * 10   # below the ephemeral range (32768-)
FRONT, B1, B2, FRONT_DOWN, DEAD, METRICS = BASE, BASE + 1, BASE + 2, BASE + 3, BASE + 4, BASE + 5
procs = []
pins = []
failures = []
GW_PID = 0   # the l7run serving FRONT
IDLE_MAX = 32   # what l7run keeps idle per upstream at most: L7_IDLE_SLOTS (its --pool-idle, 8, grows
                # to that while new clients find no idle socket, as these rounds of 200 at once do)


def start(args, **kw):
    p = subprocess.Popen(args, **kw)
    procs.append(p)
    return p


def stop(p):
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def l7run(obj, listen, up1, pin, log, *extra):
    pins.append(pin)
    p = start([L7RUN, "--pin", pin, "--listen", "127.0.0.1:%d" % listen, "--upstream", "0=127.0.0.1:%d" % B1,
               "--upstream", "1=127.0.0.1:%d" % up1, *extra, obj], stdout=log, stderr=log)
    if not wait_port(listen, 30):
        log.flush()
        sys.stdout.write(open(log.name).read()[-2000:])
        raise SystemExit("l7run did not come up on port %d" % listen)
    return p


def stats(pin):
    out = subprocess.run([L7RUN, "--stats", pin], capture_output=True, text=True, timeout=10).stdout
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"sockets (\S+)\s+(\d+)", out)}


def counters(pin):
    out = subprocess.run([L7RUN, "--stats", pin], capture_output=True, text=True, timeout=10).stdout
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^stat (\S+)\s+(\d+)", out, re.M)}


def case(fn):
    t = time.time()
    try:
        fn()
        print("PASS %-28s %.2fs" % (fn.__name__, time.time() - t), flush=True)
    except Exception as e:  # noqa: BLE001 - report and go on
        failures.append(fn.__name__)
        print("FAIL %-28s %r" % (fn.__name__, e), flush=True)


def t_routing():
    st, _, b = get(FRONT, "/a/route")
    assert st == 200 and "backend=one" in b and "target=/a/route" in b, b
    st, _, b = get(FRONT, "/b/route")
    assert st == 200 and "backend=two" in b, b


def t_deny():
    st, h, b = get(FRONT, "/deny/x")
    assert st == 403, (st, b)
    # the connection stays usable after a deny
    s = connect(FRONT)
    r = Reader(s)
    s.sendall(req("/deny"))
    assert r.response()[0] == 403
    s.sendall(req("/a/after"))
    st, _, b = r.response()
    assert st == 200 and "target=/a/after" in b
    s.close()


def t_header_added():
    s = connect(FRONT)
    r = Reader(s)
    for i in range(3):   # first via l7run (pool miss), then the kernel path
        s.sendall(req("/b/h%d" % i))
        st, _, b = r.response()
        assert st == 200 and "header=x-l7: yes" in b, b
    s.close()


def t_keepalive_1000():
    s = connect(FRONT)
    r = Reader(s)
    for i in range(1000):
        s.sendall(req("/a/%d" % i))
        st, _, b = r.response()
        assert st == 200 and "target=/a/%d\n" % i in b, (i, b)
    s.close()


def t_pipelined_mixed():
    s = connect(FRONT)
    r = Reader(s)
    paths = ["/a/1", "/b/2", "/deny", "/a/3", "/b/4", "/b/5", "/a/6"]
    for rnd in range(20):
        s.sendall(b"".join(req(p) for p in paths))   # one write: several messages per segment
        for p in paths:
            st, _, b = r.response()
            if p == "/deny":
                assert st == 403, (rnd, p, st, b)   # no bypass through the 2nd-message offset
            else:
                want = "backend=one" if p.startswith("/a") else "backend=two"
                assert st == 200 and want in b and "target=%s\n" % p in b, (rnd, p, b)
    s.close()


def t_split_writes():
    s = connect(FRONT)
    r = Reader(s)
    data = req("/b/split", b"X-Pad: " + b"p" * 300 + b"\r\n")
    for i in range(0, len(data), 7):
        s.sendall(data[i:i + 7])
        time.sleep(0.002)
    st, _, b = r.response()
    assert st == 200 and "target=/b/split" in b and "x-l7: yes" in b, b
    s.sendall(data)   # and a whole one after it on the same connection
    assert r.response()[0] == 200
    s.close()


def t_headers_16k():
    big = b"".join(b"X-H%d: %s\r\n" % (i, b"v" * 990) for i in range(16))   # ~16,000 bytes
    s = connect(FRONT)
    r = Reader(s)
    s.sendall(req("/a/big", big))
    st, _, b = r.response()
    assert st == 200 and "X-H15: " in b and "x-l7: yes" in b, (st, b[:200])
    s.sendall(req("/a/big", big + b"X-More: " + b"m" * 1000 + b"\r\n"))   # over 16 KiB
    st, h, _ = r.response()
    assert st == 431, st
    s.close()


def t_malformed_400():
    s = connect(FRONT)
    r = Reader(s)
    s.sendall(b"GET /a HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!")
    st, h, _ = r.response()
    assert st == 400 and h.get("connection") == "close", st
    s.settimeout(3)
    assert s.recv(100) == b""   # closed, never forwarded
    s.close()


def close_wait(port):
    out = subprocess.run(["ss", "-Htan", "state", "close-wait"], capture_output=True, text=True).stdout
    return [l for l in out.splitlines() if ":%d " % port in l or ":%d\n" % port in l or
            re.search(r":(%d|%d|%d)\b" % (port, B1, B2), l)]


def pool_sockets(pid):
    """{backend port: connections l7run (pid) holds to it}: its pool, as the kernel sees it."""
    out = subprocess.run(["ss", "-Htnp", "state", "established"], capture_output=True, text=True).stdout
    n = {}
    for line in out.splitlines():
        m = re.search(r"\s\S+:(\d+)\s+users:\(.*pid=%d," % pid, line)
        if m and int(m.group(1)) in (B1, B2):
            n[int(m.group(1))] = n.get(int(m.group(1)), 0) + 1
    return n


def t_churn_200x5():
    """1,000 connections, 200 at a time, one request each: no client is left in l7_clients or
    in CLOSE_WAIT, and the pool leaks nothing. Its size depends on timing, not on a leak: a
    round's clients arrive while l7run is still reaping the last round's (it closes a client
    once it has been quiet for 20 ms), whose pool sockets are still bound, so on a loaded
    machine the pool grows past the 200 a round needs (405 and 538 seen). So the test waits
    (bounded) for l7run to have reaped every client, and then as many clients at once as the
    pool has sockets to each backend, less the IDLE_MAX l7run keeps idle per upstream, must all
    be served from it, without a single new pool socket: one lost to the pool (neither idle nor
    bound) would show there."""
    base = stats(pins[0])

    def churn(rnd, n_a, n_b):
        socks = [connect(FRONT) for _ in range(n_a + n_b)]
        for i, s in enumerate(socks):
            s.sendall(req("/a/c%d" % i if i < n_a else "/b/c%d" % i))
        for i, s in enumerate(socks):
            st, _, b = Reader(s).response()
            assert st == 200, (rnd, i, st)
        for s in socks:
            s.close()

    def reaped():
        end = time.time() + 10
        while time.time() < end:
            now = stats(pins[0])
            if now.get("l7_clients") == base.get("l7_clients") and not close_wait(FRONT):
                return now
            time.sleep(0.05)
        now = stats(pins[0])
        assert now.get("l7_clients") == base.get("l7_clients"), ("clients left", base, now)
        cw = close_wait(FRONT)
        assert not cw, cw
        return now

    for rnd in range(5):
        churn(rnd, 100, 100)
    pool = reaped()["l7_upstreams"]
    per = pool_sockets(GW_PID)
    assert sum(per.values()) == pool and pool <= base.get("l7_upstreams", 0) + 5 * 200, (base, pool, per)
    # l7run keeps up to IDLE_MAX sockets per upstream idle for the kernel to give new clients, and
    # opens new ones when a round takes them: a round leaves it those
    churn(5, per.get(B1, 0) - IDLE_MAX, per.get(B2, 0) - IDLE_MAX)
    again = reaped()["l7_upstreams"]
    print("     churn: %d pool sockets after 1,000 connections %s, %d after a round that used them all"
          % (pool, per, again))
    assert again == pool and pool_sockets(GW_PID) == per, \
        "a round of %s clients opened %d new pool sockets: some were lost to the pool" % (per, again - pool)


def scrape(path="/metrics", method="GET"):
    s = socket.create_connection(("127.0.0.1", METRICS), timeout=5)
    s.sendall(("%s %s HTTP/1.1\r\nHost: prometheus\r\n\r\n" % (method, path)).encode())
    data = b""
    while True:
        d = s.recv(65536)
        if not d:
            break
        data += d
    s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), head.decode(), body.decode()


def t_metrics_http():
    def denied():
        st, head, body = scrape()
        assert st == 200 and "text/plain; version=0.0.4" in head, head
        m = re.search(r'l7_rule_hits_total\{[^}]*decision="deny"[^}]*\} (\d+)', body)
        r = re.search(r'l7_dataplane_total\{event="requests"\} (\d+)', body)
        assert m and r, body[:500]
        return int(m.group(1)), int(r.group(1))
    d0, r0 = denied()
    for _ in range(3):
        assert get(FRONT, "/deny/m")[0] == 403
    d1, r1 = denied()
    assert d1 - d0 == 3 and r1 - r0 >= 3, (d0, d1, r0, r1)
    assert scrape("/other")[0] == 404
    assert scrape("/metrics", "POST")[0] == 405
    # a scraper that connects and sends nothing holds the metrics thread, never the data plane
    stall = socket.create_connection(("127.0.0.1", METRICS), timeout=5)
    t = time.time()
    assert get(FRONT, "/a/while-stalled")[0] == 200 and time.time() - t < 1.0
    assert denied()[0] == d1   # answered once the stalled one timed out (2 s)
    stall.close()


INSERTED = len(b"x-l7: yes\r\n")   # gw_test.l7 sets this header on every routed request


def t_upstream_metrics():
    """Per upstream: responses by status class, request bytes as sent (the inserted header
    line included), response bytes as received; l7run's own answers apart. The scrape's deltas
    must equal the sums of what this client sent and read, exactly: on the kernel path and
    l7run's (first request: pool miss; a pipelined switch of upstream: order; a chunked
    request body: held by l7run), with bodies streamed in pieces (10,000-byte POST, chunked
    responses) and an interim 103."""
    tally = UpstreamTally()

    def upstream(path):
        return "one" if path.startswith("/a") else "two"

    def count_request(path, data):
        tally.request(upstream(path), len(data) + INSERTED)

    def read(r, path, statuses, local=False, no_body=False):
        bodies = []
        for want_st in statuses:
            st, n, body = r.framed(no_body)
            assert st == want_st, (path, st, want_st, body[:200])
            tally.response(None if local else upstream(path), st, n)
            bodies.append(body)
        return bodies[-1]

    before = samples(scrape()[2])
    s = connect(FRONT)
    r = Reader(s)
    post = b"p" * 10000
    for path, method, extra, body, statuses in (
            ("/a/t?size=1000", b"GET", b"", b"", [200]),
            ("/a/t?status=404&size=10", b"GET", b"", b"", [404]),
            ("/b/t?status=500&size=0", b"GET", b"", b"", [500]),
            ("/b/post", b"POST", b"Content-Length: 10000\r\n", post, [200]),
            ("/a/stream?chunked=1000&size=5000", b"GET", b"", b"", [200]),
            ("/b/early?interim=1&size=20", b"GET", b"", b"", [103, 200]),
            ("/a/head?size=700", b"HEAD", b"", b"", [200])):
        data = req(path, extra, method) + body
        s.sendall(data)
        count_request(path, data)
        got = read(r, path, statuses, no_body=method == b"HEAD")
        if method == b"POST":
            assert b"body_len=10000" in got, got[:300]
        if "chunked" in path:
            assert got == b"x" * 5000, len(got)
    # a pipelined pair in one write, switching upstream (the second waits for the first)
    pair = [("/a/p1?size=100", [200]), ("/b/p2?status=302&size=3", [302])]
    data = b"".join(req(p) for p, _ in pair)
    s.sendall(data)
    for p, sts in pair:
        count_request(p, req(p))
        read(r, p, sts)
    # l7run's own answer: a deny, on the same connection
    s.sendall(req("/deny/t"))
    read(r, "/deny/t", [403], local=True)
    s.close()
    # a chunked request body, in pieces (l7run holds it, then sends it whole); chunked reply
    s = connect(FRONT)
    r = Reader(s)
    chunks = b"".join(b"%x\r\n" % n + b"c" * n + b"\r\n" for n in (3000, 1, 4095)) + b"0\r\n\r\n"
    data = req("/a/chunked-in?chunked=64", b"Transfer-Encoding: chunked\r\n", b"PUT") + chunks
    for i in range(0, len(data), 1500):
        s.sendall(data[i:i + 1500])
        time.sleep(0.005)
    count_request("/a/chunked-in", data)
    got = read(r, "/a/chunked-in", [200])
    assert b"body_len=7096" in got and b"header=x-l7: yes" in got, got[:300]
    s.close()
    # a malformed request: l7run's 400
    s = connect(FRONT)
    r = Reader(s)
    s.sendall(b"GET /a HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!")
    read(r, "/bad", [400], local=True)
    s.close()

    keys, got = tally.deltas(before, samples(scrape()[2]))
    want = tally.want
    assert len(keys) == 2 * 5 + 2 * 2 + 5 + 1, keys   # classes and bytes of "one" and "two", local
    for k in keys:
        assert got[k] == want.get(k, 0), (k, got[k], want.get(k, 0), got, want)
    assert set(want) <= set(keys), set(want) - set(keys)


def t_denied_head():
    """l7run's answer to a HEAD has no body (RFC 9110 9.3.2): the request pipelined behind it
    is answered next, not swallowed as the 403's body."""
    s = connect(FRONT)
    s.sendall(req("/deny/h", method=b"HEAD") + req("/a/after"))
    data = b""
    while data.count(b"HTTP/1.1 ") < 2 or not data.endswith(b"\n"):
        d = s.recv(65536)
        if not d:
            break
        data += d
        if b"target=/a/after" in data:
            break
    s.close()
    first, _, rest = data.partition(b"\r\n\r\n")
    assert first.startswith(b"HTTP/1.1 403") and b"content-length:" in first.lower(), data[:200]
    assert rest.startswith(b"HTTP/1.1 200"), "the 403 to a HEAD carried a body: %r" % data[:300]


def curl(path, *extra):
    r = subprocess.run(["curl", "-s", "-m", "5", "-w", "\n%{http_code}", *extra, "http://127.0.0.1:%d%s" % (FRONT, path)],
                       capture_output=True, text=True, timeout=10)
    body, _, code = r.stdout.rpartition("\n")
    return int(code or 0), body


def t_short_connections():
    """One request per connection (separate curl runs, Connection: close or not): each is a new
    client whose first request is decided and forwarded in the kernel, on an idle pool
    connection l7run keeps for it (l7_idle), never a pool miss for l7run to forward once the
    pool is warm; a denied one is still l7run's 403; the responses are each request's own."""
    try:
        short_connections()
    finally:
        # l7run reaps them (20 ms after each went quiet; earlier cases' within 3 s):
        # t_churn_200x5 counts clients from here
        end = time.time() + 5
        while stats(pins[0]).get("l7_clients", 0) and time.time() < end:
            time.sleep(0.02)


def short_connections():
    for i in range(4):   # warm-up: l7run fills the idle slots of both upstreams (from its loop)
        curl("/a/warm%d" % i)
        curl("/b/warm%d" % i)
    time.sleep(0.3)
    before = counters(pins[0])
    n = 40
    for i in range(n):
        path = ("/a/s%d" if i % 2 else "/b/s%d") % i
        st, body = curl(path, *(["-H", "Connection: close"] if i % 4 < 2 else []))
        want = "backend=one" if path.startswith("/a") else "backend=two"
        assert st == 200 and want in body and "target=%s\n" % path in body and "x-l7: yes" in body, (i, st, body)
    st, _ = curl("/deny/s", "-H", "Connection: close")
    assert st == 403, st
    after = counters(pins[0])
    d = {k: after.get(k, 0) - before.get(k, 0) for k in set(after) | {"pool_claims"}}
    print("     short connections: %s" % {k: d[k] for k in ("requests", "forwarded", "pool_claims", "pool_miss",
                                                             "passed_to_l7run")})
    assert d["requests"] == n + 1 and d["pool_miss"] == 0, d
    assert d["forwarded"] == n and d["pool_claims"] == n and d["passed_to_l7run"] == 1, d


def t_down_backend_502():
    t = time.time()
    st, _, b = get(FRONT_DOWN, "/b/down")
    dt = time.time() - t
    assert st == 502 and dt < 1.0, (st, dt)
    st, _, b = get(FRONT_DOWN, "/a/up")   # the other upstream still works
    assert st == 200, st


def main():
    tmp = tempfile.mkdtemp(prefix="l7rt-")
    obj = os.path.join(tmp, "gw.o")
    subprocess.run([L7C, POLICY, "-o", obj], check=True, timeout=60)
    log = open(os.path.join(tmp, "l7run.log"), "w")
    try:
        for port, name in ((B1, "one"), (B2, "two")):
            start([sys.executable, os.path.join(HERE, "echo_backend.py"), str(port), name], stdout=subprocess.DEVNULL)
            assert wait_port(port)
        gw = l7run(obj, FRONT, B2, "/sys/fs/bpf/l7rt-%d-a" % os.getpid(), log, "--metrics-listen",
                   "127.0.0.1:%d" % METRICS)
        global GW_PID
        GW_PID = gw.pid
        gw_down = l7run(obj, FRONT_DOWN, DEAD, "/sys/fs/bpf/l7rt-%d-b" % os.getpid(), log)
        for fn in (t_routing, t_deny, t_header_added, t_keepalive_1000, t_pipelined_mixed, t_split_writes,
                   t_headers_16k, t_malformed_400, t_short_connections, t_churn_200x5, t_down_backend_502, t_metrics_http,
                   t_upstream_metrics, t_denied_head):
            case(fn)
        for p in (gw, gw_down):
            stop(p)
            assert p.returncode == 0, "l7run exit %s" % p.returncode
        for pin in pins:
            assert not os.path.exists(pin), "pin left behind: " + pin
    finally:
        for p in procs:
            stop(p)
        log.close()
        if failures:
            sys.stdout.write(open(os.path.join(tmp, "l7run.log")).read()[-3000:])
    print("%d failed" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
