#!/usr/bin/env python3
"""Header mutations end to end, in gateway mode and in mesh mode: SetHeader replaces, AddHeader
adds, RemoveHeader removes (every copy), on requests and on responses; bodies and the framing
of keep-alive and pipelined streams survive the bytes they add and cut. Needs root (BPF, bpffs,
cgroup2 at /sys/fs/cgroup/unified for mesh mode); never skips.

usage: test_mutation.py L7C L7RUN gateway|mesh [CHECK...]   (default: every check)
Every process started here is ended by pid; ports, pins and the cgroup derive from our pid and
are removed."""
import hashlib
import os
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import procs  # noqa: E402
from policy import policy  # noqa: E402
from procs import CG_ROOT  # noqa: E402
from rawhttp import Reader as HttpReader, connect as connect_to  # noqa: E402

L7C, L7RUN, MODE = sys.argv[1:4]
ONLY = sys.argv[4:]
HERE = os.path.dirname(os.path.abspath(__file__))
PID = os.getpid()
BASE = 23000 + (PID % 900) * 10 + (5 if MODE == "mesh" else 0)   # below the ephemeral range
SVC, BE = BASE, BASE + 1
PIN = "/sys/fs/bpf/l7mut-%s-%d" % (MODE, PID)
CG = os.path.join(CG_ROOT, "l7mut-test-%d" % PID)
TMP = tempfile.mkdtemp(prefix="l7mut-")
BLOG = os.path.join(TMP, "backend.log")

POLICY = policy("edit", SVC, [("echo", BE)], """\
  if (starts_with(request.path, "/deny")) {
    Deny(request, 403);
  }
  if (starts_with(request.path, "/c/")) {   // the most lines one request can lose
%s
    Route(request, echo);
  }
  SetHeader(request, "x-set", "new");
  AddHeader(request, "x-add", "added");
  RemoveHeader(request, "x-rm");
  RemoveHeader(request, "x-rm-too");
  if (starts_with(request.path, "/r")) {
    SetHeader(response, "x-frame-options", "DENY");
    RemoveHeader(response, "server");
    AddHeader(response, "x-l7", "resp");
  }
  Route(request, echo);
""" % "\n".join('    RemoveHeader(request, "x-c%d");' % i for i in range(8)),
                acts=("HttpRequest request", "HttpResponse response"))

failures = []


def start(argv, **kw):
    """Backend and l7run: in mesh mode inside the cgroup l7run attaches to."""
    return procs.start(argv, cgroup=CG if MODE == "mesh" else None, **kw)


def wait_port(port, timeout=20.0):
    if not procs.wait_port(port, timeout):
        raise RuntimeError("port %d never opened" % port)


def connect():
    return connect_to(SVC)


def req(path, extra=b"", method=b"GET", body=None):
    h = method + b" " + path.encode() + b" HTTP/1.1\r\nHost: front\r\n" + extra
    if body is not None:
        h += b"Content-Length: %d\r\n" % len(body)
    return h + b"\r\n" + (body or b"")


CLIENT_FIELDS = b"X-Set: old\r\nX-Add: orig\r\nX-Rm: secret\r\nX-Other: o\r\nX-Rm-Too: gone\r\n"


class Reader(HttpReader):
    """Responses as (status, [(name, value)] in the order sent, body bytes): large bodies come
    in large reads."""

    def __init__(self, s):
        super().__init__(s, 262144)


def values(fields, name):
    return [v for k, v in fields if k == name]


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def backend_saw(body):
    """(target, [raw field lines], 'len sha') the backend reported; the body must be intact."""
    payload, sep, tail = body.rpartition(b"\nsha=")
    check(sep and tail.strip() == hashlib.sha256(payload).hexdigest().encode(),
          "response body damaged (%d bytes): %r" % (len(body), body[:120]))
    target, lines, got = None, [], None
    for l in payload.split(b"\n"):
        if l.startswith(b"target="):
            target = l[7:].decode()
        elif l.startswith(b"line="):
            lines.append(l[5:])
        elif l.startswith(b"body="):
            got = l[5:].decode()
    return target, lines, got


def named(lines, name):
    return [l.partition(b":")[2].strip() for l in lines if l.partition(b":")[0].strip().lower() == name]


def check_request(path, status, fields, body, sent_body=b""):
    """What the backend saw of a request sent with CLIENT_FIELDS."""
    check(status == 200, "%s: status %d %r" % (path, status, body[:200]))
    target, lines, got = backend_saw(body)
    check(target == path, "response out of order: for %s got %s" % (path, target))
    check(named(lines, b"x-set") == [b"new"], "%s: x-set replaced exactly once: %s" % (path, lines))
    check(named(lines, b"x-add") == [b"orig", b"added"], "%s: x-add added next to the original: %s" % (path, lines))
    check(not named(lines, b"x-rm") and not named(lines, b"x-rm-too"), "%s: x-rm removed: %s" % (path, lines))
    check(named(lines, b"x-other") == [b"o"] and named(lines, b"host") == [b"front"], "%s: others kept: %s" % (path, lines))
    check(got == "%d %s" % (len(sent_body), hashlib.sha256(sent_body).hexdigest()), "%s: request body %s" % (path, got))
    check(lines[-1].lower().startswith(b"x-add: added") or lines[-1].lower().startswith(b"x-set:") or
          lines[-1].lower().startswith(b"content-length"), "%s: added lines at the end of the head: %s" % (path, lines))
    response_edited = path.startswith("/r")
    if response_edited:
        check(values(fields, "x-frame-options") == ["DENY"], "%s: x-frame-options replaced: %s" % (path, fields))
        check(not values(fields, "server"), "%s: both Server lines removed: %s" % (path, fields))
        check(values(fields, "x-l7") == ["resp"] and values(fields, "x-keep") == ["k"], "%s: %s" % (path, fields))
    else:
        check(values(fields, "server") == ["one", "two"] and values(fields, "x-frame-options") == ["SAMEORIGIN"]
              and not values(fields, "x-l7"), "%s: response untouched: %s" % (path, fields))


# ---- checks ----------------------------------------------------------------------------

def t_keepalive():
    """Request and response edits over one keep-alive connection (in gateway mode the first
    request is a pool miss through l7run, the rest take the kernel path)."""
    s = connect()
    r = Reader(s)
    for i in range(60):
        path = "/r/ka%d" % i if i % 2 else "/p/ka%d" % i
        s.sendall(req(path, CLIENT_FIELDS))
        check_request(path, *r.message())
    s.close()


def t_absent():
    """Nothing to remove or replace: only the added lines."""
    s = connect()
    r = Reader(s)
    for i in range(3):
        s.sendall(req("/p/bare%d" % i))
        st, fields, body = r.message()
        _, lines, _ = backend_saw(body)
        check(st == 200 and named(lines, b"x-set") == [b"new"] and named(lines, b"x-add") == [b"added"] and
              len(lines) == 3, "bare request: %s" % lines)
    s.close()


def t_duplicate_refused():
    """A removed (or replaced) name sent twice: refused, never forwarded with one copy left."""
    for dup in (b"X-Rm: a\r\nX-Rm: b\r\n", b"X-Set: a\r\nx-set: b\r\n"):
        tag = "/p/dup%d" % len(dup)
        s = connect()
        r = Reader(s)
        s.sendall(req(tag, dup))
        st, _, _ = r.message()
        check(st == 501, "duplicate %r: status %d, want 501" % (dup, st))
        try:
            check(s.recv(100) == b"", "closed after the refusal")
        except ConnectionResetError:
            pass
        s.close()
        time.sleep(0.1)
        seen = open(BLOG, "rb").read() if os.path.exists(BLOG) else b""
        check(tag.encode() not in seen, "the backend got the refused request %s" % tag)


def t_bodies():
    """POST bodies with edited heads, then a request after them on the same connection."""
    s = connect()
    r = Reader(s)
    for n in (1, 1000, 65536, 300000):
        blob = os.urandom(n)
        path = "/r/post%d" % n
        s.sendall(req(path, CLIENT_FIELDS, b"POST", blob))
        check_request(path, *r.message(), sent_body=blob)
        s.sendall(req("/p/after%d" % n, CLIENT_FIELDS))
        check_request("/p/after%d" % n, *r.message())
    s.close()


def t_pipelined():
    """Several requests in one write, cut and added lines moving every byte after them: each is
    framed and answered in order, bodies intact. Gateway mode: on the kernel path (two requests
    first bind the pool socket; a pipelined batch handled by l7run, a pool miss and the requests
    behind it, was seen to leave the next batch unparsed about once in 40 runs with or without
    mutations: reported, not this test's subject)."""
    s = connect()
    r = Reader(s)
    for i in range(2):
        s.sendall(req("/p/warm%d" % i, CLIENT_FIELDS))
        check_request("/p/warm%d" % i, *r.message())
    for rnd in range(15):
        reqs = []
        for i in range(6):
            path = "/%s/pl%d-%d" % ("rp"[i % 2], rnd, i)
            blob = os.urandom(i * 37) if i % 3 == 1 else None
            reqs.append((path, blob))
        s.sendall(b"".join(req(p, CLIENT_FIELDS, b"POST" if b is not None else b"GET", b) for p, b in reqs))
        for path, blob in reqs:
            check_request(path, *r.message(), sent_body=blob or b"")
    s.close()


def t_large_responses():
    """Edited response heads before large bodies (many messages each), over keep-alive."""
    s = connect()
    r = Reader(s)
    for i, n in enumerate((10, 70000, 1000, 400000, 5)):
        path = "/%s/big%d?size=%d" % ("rp"[i % 2], i, n)
        s.sendall(req(path, CLIENT_FIELDS))
        st, fields, body = r.message()
        check_request(path, st, fields, body)
        check(len(body) > n, "%s: body of %d bytes" % (path, len(body)))
    s.close()


def t_small_writes():
    """A head arriving a few bytes at a time is edited whole."""
    s = connect()
    r = Reader(s)
    for path in ("/r/split", "/p/split"):
        data = req(path, CLIENT_FIELDS + b"X-Pad: " + b"p" * 100 + b"\r\n")
        for i in range(0, len(data), 5):
            s.sendall(data[i:i + 5])
            time.sleep(0.001)
        check_request(path, *r.message())
    s.close()


def t_deny():
    """A deny answered in between keeps the connection and the order."""
    s = connect()
    r = Reader(s)
    s.sendall(req("/r/before", CLIENT_FIELDS) + req("/deny/x", CLIENT_FIELDS) + req("/r/after", CLIENT_FIELDS))
    check_request("/r/before", *r.message())
    st, fields, _ = r.message()
    check(st == 403, "deny: %d" % st)
    check_request("/r/after", *r.message())
    s.close()


def t_eight_cuts():
    """Eight lines cut from one head (the limit), between lines that stay; pipelined too."""
    extra = b"".join(b"X-C%d: c%d\r\nX-Stay%d: s\r\n" % (i, i, i) for i in range(8))
    s = connect()
    r = Reader(s)
    for rnd in range(3):
        paths = ["/c/eight%d-%d" % (rnd, i) for i in range(4)]
        s.sendall(b"".join(req(p, extra) for p in paths))
        for p in paths:
            st, _, body = r.message()
            target, lines, _ = backend_saw(body)
            check(st == 200 and target == p, "%s: %d %s" % (p, st, target))
            check(not any(l.lower().startswith(b"x-c") for l in lines), "%s: an x-cN line left: %s" % (p, lines))
            check([l for l in lines if l.lower().startswith(b"x-stay")] == [b"X-Stay%d: s" % i for i in range(8)],
                  "%s: the lines between changed: %s" % (p, lines))
    s.close()


def t_uneditable():
    """A response head with more separate lines to cut than an edit holds is never sent as it
    is: the connection ends without it (gateway: closed, mesh: reset); others go on."""
    s = connect()
    r = Reader(s)
    s.sendall(req("/r/many", CLIENT_FIELDS))
    got = b""
    try:
        while True:
            d = s.recv(65536)
            if not d:
                break
            got += d
    except (ConnectionResetError, socket.timeout):
        pass
    check(b"Server:" not in got and b"server:" not in got.lower(), "unedited head reached the client: %r" % got[:200])
    check(not got.startswith(b"HTTP/1.1 200"), "a response came: %r" % got[:200])
    s.close()
    s = connect()
    r = Reader(s)
    s.sendall(req("/r/after-it", CLIENT_FIELDS))
    check_request("/r/after-it", *r.message())
    s.close()


CHECKS = [t_keepalive, t_absent, t_duplicate_refused, t_bodies, t_pipelined, t_large_responses, t_small_writes,
          t_deny, t_eight_cuts, t_uneditable]


def main():
    if os.geteuid() != 0:
        print("FAIL: needs root")
        return 1
    home_cg = None
    pol = os.path.join(TMP, "mut.l7")
    with open(pol, "w") as f:
        f.write(POLICY)
    obj = os.path.join(TMP, "mut.o")
    subprocess.run([L7C, pol, "-o", obj], check=True, timeout=120)
    log = open(os.path.join(TMP, "l7run.log"), "w")
    try:
        if MODE == "mesh":
            home_cg = procs.cgroup_home()
            os.mkdir(CG)
        start([sys.executable, os.path.join(HERE, "mut_backend.py"), str(BE), BLOG])
        wait_port(BE)
        if MODE == "mesh":
            start([L7RUN, "--mesh", "--cgroup", CG, "--pool", "4", "--pin", PIN, obj], stdout=log, stderr=log)
        else:
            start([L7RUN, "--pin", PIN, obj], stdout=log, stderr=log)
        wait_port(SVC)
        time.sleep(0.3)   # the mesh pool filled
        if MODE == "mesh":
            procs.cgroup_join(CG)   # this process is the client
        for fn in CHECKS:
            if ONLY and fn.__name__[2:] not in ONLY:
                continue
            t0 = time.time()
            try:
                fn()
                print("ok   %-20s %.2fs" % (fn.__name__, time.time() - t0), flush=True)
            except Exception as e:  # noqa: BLE001 - report every check, then fail
                failures.append(fn.__name__)
                print("FAIL %-20s %s" % (fn.__name__, e), flush=True)
                if os.path.exists(BLOG):
                    print("     the backend's last requests:", open(BLOG, "rb").read()[-400:])
        if MODE == "gateway" and not ONLY:
            st = procs.l7run_stats(L7RUN, PIN)
            # the kernel path did the work: requests forwarded by the client verdict, heads
            # edited by SK_MSG (the pool's and the client sockets')
            print("     stats: %s" % st)
            if st.get("forwarded", 0) < 60 or st.get("header_inserts", 0) < 120:
                failures.append("kernel-path")
                print("FAIL kernel path: %s" % st)
    finally:
        if home_cg is not None:
            procs.cgroup_join(home_cg)
        procs.stop_all()
        log.close()
        if failures:
            print(open(os.path.join(TMP, "l7run.log")).read()[-3000:])
        if MODE == "mesh":
            procs.cgroup_remove(CG)
        subprocess.run(["rm", "-rf", TMP, PIN])
    if MODE == "mesh" and os.path.exists(CG):
        failures.append("cgroup-left")
    if os.path.exists(PIN):
        failures.append("pin-left")
    print("%d check(s) failed: %s" % (len(failures), failures) if failures else "all %s mutation checks passed" % MODE)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
