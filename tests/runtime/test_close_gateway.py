#!/usr/bin/env python3
"""Gateway mode treats Connection and Keep-Alive as hop-by-hop (RFC 9110 7.6.1; issue #17: short
connections in the kernel). A backend that closes its side after a request saying
`Connection: close` (as nginx does) records the head of every request it gets; through l7run:
- `Connection: close`, `Connection: keep-alive, close`, `Keep-Alive: timeout=5`: the backend
  sees none of those lines, the client's response says `Connection: close` (exactly once) when
  its request asked to close, and l7run closes the connection promptly after it;
- HTTP/1.0 and Upgrade requests reach the backend as they came; 9 Connection lines (more than
  one edit cuts) never reach it;
- a deny rule still answers 403 and nothing reaches the backend;
- 60 requests of curl and of one Python http.client connection object, each saying
  `Connection: close`: all answered, the client never reuses a connection the proxy closes,
  nearly all forwarded in the kernel (`forwarded`, few `pool_miss`), and the backend's pool
  connections survive (far fewer accepted than requests).
Run by ctest:  test_close_gateway.py L7C L7RUN POLICY.l7
Every process started here is ended by pid; ports derive from our pid; pins are removed."""
import http.client
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from procs import l7run_stats, start, stop, stop_all, wait_port  # noqa: E402
import rawhttp  # noqa: E402

L7C, L7RUN, POLICY = sys.argv[1:4]
BASE = 23000 + (os.getpid() % 1000) * 10   # below the ephemeral range (32768-)
FRONT, B1, B2 = BASE, BASE + 1, BASE + 2
N = 60
heads = []          # every request head the backends got, as bytes
accepted = [0]      # connections the backends accepted
lock = threading.Lock()


def backend(port):
    """Answers each request 200 with its target; closes after one that asks to close (HTTP/1.1
    Connection: close, HTTP/1.0 without keep-alive), as nginx does."""
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", port))
    ls.listen(256)

    def serve(c):
        with c:
            for lines, _, _ in rawhttp.requests(c):
                with lock:
                    heads.append(b"\r\n".join(lines))
                target, ver = lines[0].split(b" ")[1], lines[0].split(b" ")[2]
                conn = b",".join(v.split(b":", 1)[1].strip().lower() for v in lines[1:]
                                 if v.lower().startswith(b"connection:"))
                close = b"close" in conn or (ver == b"HTTP/1.0" and b"keep-alive" not in conn)
                body = b"target=" + target + b"\n"
                c.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n%s\r\n%s" %
                          (len(body), b"connection: close\r\n" if close else b"", body))
                if close:
                    return

    def loop():
        while True:
            c, _ = ls.accept()
            with lock:
                accepted[0] += 1
            threading.Thread(target=serve, args=(c,), daemon=True).start()
    threading.Thread(target=loop, daemon=True).start()


def exchange(raw, reqs=1):
    """Send raw on a fresh connection; (responses' heads, seconds until the proxy closed after
    the last response, or None if it stayed open for 2 s)."""
    s = socket.create_connection(("127.0.0.1", FRONT), timeout=5)
    with s:
        s.sendall(raw)
        data, got, t_last = b"", [], None
        s.settimeout(2)
        while True:
            try:
                d = s.recv(65536)
            except socket.timeout:
                return got, None
            if not d:
                return got, (time.time() - t_last if t_last else None)
            data += d
            while b"\r\n\r\n" in data:
                h, rest = data.split(b"\r\n\r\n", 1)
                cl = [int(x.split(b":")[1]) for x in h.lower().split(b"\r\n") if x.startswith(b"content-length:")]
                n = cl[0] if cl else 0
                if len(rest) < n:
                    break
                got.append(h)
                data = rest[n:]
                t_last = time.time()
            if len(got) == reqs and b"connection: close" not in got[-1].lower():
                return got, None   # keep-alive: not waiting for a close


def conn_lines(head):
    return [x for x in head.lower().split(b"\r\n")[1:] if x.startswith(b"connection:")]


def seen(path):
    """The head the backends got for target path (None: none got it)."""
    with lock:
        hs = [h for h in heads if h.split(b" ")[1] == path.encode()]
    return hs[-1] if hs else None


def main():
    tmp = tempfile.mkdtemp(prefix="l7cg-")
    obj = os.path.join(tmp, "gw.o")
    pin = "/sys/fs/bpf/l7cg-%d" % os.getpid()
    subprocess.run([L7C, POLICY, "-o", obj], check=True, timeout=120)
    log = open(os.path.join(tmp, "l7run.log"), "w")
    ok, fails = False, []

    def check(cond, what):
        if not cond:
            fails.append(what)
            print("FAIL:", what)

    try:
        backend(B1)
        backend(B2)
        gw = start([L7RUN, "--pin", pin, "--listen", "127.0.0.1:%d" % FRONT, "--upstream", "0=127.0.0.1:%d" % B1,
                    "--upstream", "1=127.0.0.1:%d" % B2, obj], stdout=log, stderr=log)
        assert wait_port(FRONT, 30), "l7run did not come up"
        for i in range(4):   # warm-up: the idle pool fills
            exchange(b"GET /a/warm%d HTTP/1.1\r\nHost: t\r\n\r\n" % i)
        time.sleep(0.3)

        # the hop-by-hop lines never reach the backend; a closing request's response says so
        for name, extra, closes in (("close", b"Connection: close\r\n", True),
                                    ("kaclose", b"Connection: keep-alive, close\r\n", True),
                                    ("katime", b"Keep-Alive: timeout=5\r\nConnection: keep-alive\r\n", False),
                                    ("two", b"Connection: keep-alive\r\nX-A: 1\r\nConnection: close\r\n", True)):
            path = "/a/" + name
            got, after = exchange(b"GET %s HTTP/1.1\r\nHost: t\r\n%sUser-Agent: t\r\n\r\n" % (path.encode(), extra))
            h = seen(path)
            check(h is not None and not conn_lines(h) and b"keep-alive:" not in h.lower() and
                  b"\r\nuser-agent: t" in h.lower() and b"\r\nx-l7: yes" in h.lower(),
                  "%s: the backend got %r" % (name, h))
            check(len(got) == 1 and got[0].startswith(b"HTTP/1.1 200"), "%s: response %r" % (name, got))
            if closes:
                check(got and conn_lines(got[0]) == [b"connection: close"], "%s: response head %r" % (name, got))
                check(after is not None and after < 1.0, "%s: closed %s s after the response" % (name, after))
            else:
                check(got and not conn_lines(got[0]), "%s: response head %r" % (name, got))
        # HTTP/1.0 and Upgrade: as they came
        got, _ = exchange(b"GET /a/ten HTTP/1.0\r\nHost: t\r\nConnection: close\r\n\r\n")
        h = seen("/a/ten")
        check(h is not None and conn_lines(h) == [b"connection: close"], "HTTP/1.0: the backend got %r" % h)
        got, _ = exchange(b"GET /a/up HTTP/1.1\r\nHost: t\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
        h = seen("/a/up")
        check(h is not None and conn_lines(h) == [b"connection: upgrade"] and b"\r\nupgrade: websocket" in h.lower(),
              "Upgrade: the backend got %r" % h)
        # more lines than one edit cuts: never forwarded with them (the request is dropped and
        # the client closed)
        got, after = exchange(b"GET /a/many HTTP/1.1\r\nHost: t\r\n" + b"Connection: keep-alive\r\n" * 9 + b"\r\n")
        check(seen("/a/many") is None and not any(g.startswith(b"HTTP/1.1 200") for g in got),
              "9 Connection lines: backend got %r, client %r" % (seen("/a/many"), got))
        # a deny rule holds
        got, after = exchange(b"GET /deny/x HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        check(got and got[0].startswith(b"HTTP/1.1 403") and seen("/deny/x") is None, "deny: %r" % got)

        # real clients, one request per connection, Connection: close
        time.sleep(0.3)
        before, acc0 = l7run_stats(L7RUN, pin), accepted[0]
        t0 = time.time()
        bad = []
        for i in range(N // 2):
            r = subprocess.run(["curl", "-s", "-m", "5", "-H", "Connection: close", "-D", "-",
                                "http://127.0.0.1:%d/a/curl%d" % (FRONT, i)], capture_output=True, timeout=10)
            if b"target=/a/curl%d\n" % i not in r.stdout or b"connection: close" not in r.stdout.lower():
                bad.append(r.stdout[:200])
        hc = http.client.HTTPConnection("127.0.0.1", FRONT, timeout=5)   # one object: reconnects only if told
        for i in range(N // 2):
            try:
                hc.request("GET", "/a/py%d" % i, headers={"Connection": "close"})
                resp = hc.getresponse()
                body = resp.read()
                if body != b"target=/a/py%d\n" % i or not resp.will_close:
                    bad.append(body)
            except (OSError, http.client.HTTPException) as e:
                bad.append(repr(e))
                hc.close()
        dt = time.time() - t0
        after = l7run_stats(L7RUN, pin)
        d = {k: after.get(k, 0) - before.get(k, 0) for k in ("requests", "forwarded", "pool_miss", "passed_to_l7run")}
        acc = accepted[0] - acc0
        print("%d requests in %.2f s: %s, backend connections accepted %d" % (N, dt, d, acc))
        check(not bad, "%d bad answers, first %r" % (len(bad), bad[:1]))
        check(d["requests"] == N, "requests %s" % d)
        check(d["forwarded"] >= N - 4 and d["pool_miss"] <= 4, "not forwarded in the kernel: %s" % d)
        check(acc <= N // 2, "the backend accepted %d connections for %d requests: the pool did not survive" % (acc, N))
        stop(gw)
        check(gw.returncode == 0, "l7run exit %s" % gw.returncode)
        check(not os.path.exists(pin), "pin left behind: " + pin)
        ok = not fails
    finally:
        stop_all()
        log.close()
        if not ok:
            sys.stdout.write(open(os.path.join(tmp, "l7run.log")).read()[-int(os.environ.get("LOGTAIL", 3000)):])
        shutil.rmtree(tmp, ignore_errors=True)
    print("PASS close gateway" if ok else "FAIL close gateway: %d checks" % len(fails))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
