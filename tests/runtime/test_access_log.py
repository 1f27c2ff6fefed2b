#!/usr/bin/python3
"""The access log (issue 16 item 3), gateway and mesh, with real traffic through l7run:
  - `l7run --access-log FILE`: one JSON line per request, each parsed by python's json; the
    fields of each: mode, client, identity, service, method, target, host, protocol, decision
    (allow / deny / audit), the deciding rule's line (the policy's own line numbers), status of
    a deny, upstream and endpoint of a forward, bytes_in (the request's bytes), and why a deny
    denied; requests sent by curl too;
  - the response side of forwarded requests, joined to the request's line: the backend's real
    status (200, 201, 404; also on keep-alive connections, several requests each), bytes_out
    equal to the response's bytes on the wire, a duration >= 0 from kernel clocks;
  - a request the parser refuses (a head over 16 KiB: 431; a bad request line: 400) is a line
    with its error class; a JWT deny says why the token failed (missing, expired, bad
    signature, wrong audience), a valid token's request is allowed with no such field;
  - NoLog(request): that rule's requests are not in the log;
  - `--access-log-sample 4`: about a quarter of 400 requests is logged;
  - a full ring buffer (`--access-log-buffer 4096`, pipelined requests): every request is either
    a line or counted in l7_access_log_dropped_total (and some were dropped); the exposition
    passes `promtool check metrics`.
usage: test_access_log.py L7C L7RUN SOURCE_DIR   (root: BPF, cgroup2; never skips)"""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

L7C, L7RUN, SRC = sys.argv[1:4]
sys.path.insert(0, os.path.join(SRC, "tests", "common"))
import jwtgen  # noqa: E402
import procs  # noqa: E402
from rawhttp import Reader, connect  # noqa: E402
from telemetry import samples  # noqa: E402

PID = os.getpid()
BASE = 25000 + (PID % 400) * 20
TMP = tempfile.mkdtemp(prefix="l7alog-")
CG = os.path.join(procs.CG_ROOT, "l7alog-%d" % PID)
ECHO = os.path.join(SRC, "tests", "mesh", "echo.py")
failures = []
KEY = b"access-log-test-key-0123456789ab"
KEYFILE = os.path.join(TMP, "jwt.key")

POLICY = """import "http.l7i";
service front = 127.0.0.1:%d;
upstream app = 127.0.0.1:%d;
identity local = [127.0.0.0/8];
policy guard (
  act (HttpRequest request)
) {
  if (starts_with(request.path, "/admin")) {
    Deny(request, 403);
  } else if (starts_with(request.path, "/secret")) {
    Audit(request);
  } else if (starts_with(request.path, "/quiet")) {
    NoLog(request);
  }
}
policy routes (
  act (HttpRequest request)
) {
  if (!starts_with(request.path, "/nowhere")) {
    Route(request, app);
  }
}
Jwt auth { key_file = "%s"; issuer = "t"; audience = "t"; }
policy tokens (
  act (HttpRequest request)
  using (Jwt auth)
) {
  if (starts_with(request.path, "/jwt") && !auth.valid) {
    Deny(request, 401);
  }
}
"""
LINE = {"deny": 9, "route": 20}


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def req_bytes(path, host="t"):
    return ("GET %s HTTP/1.1\r\nHost: %s\r\nX-Pad: %s\r\n\r\n" % (path, host, "p" * (len(path) % 7))).encode()


def get(port, path):
    """(status, the response's bytes on the wire)"""
    s = connect(port)
    try:
        s.sendall(req_bytes(path))
        st, wire, _ = Reader(s).framed()
        return st, wire
    finally:
        s.close()


def keepalive(s, paths):
    """The requests one after the other on connection s; their statuses."""
    rd, out = Reader(s), []
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for p in paths:
        s.sendall(req_bytes(p))
        out.append(rd.framed()[0])
    return out


def log_lines(path, want, deadline=5.0):
    """The log's lines, each parsed by json, once there are `want` (or the deadline passed)."""
    end = time.time() + deadline
    while True:
        text = open(path).read() if os.path.exists(path) else ""
        lines = [json.loads(l) for l in text.splitlines()]
        if len(lines) >= want or time.time() > end:
            return lines
        time.sleep(0.05)


def serving(mode, obj, svc, pa, name, extra):
    pin = "/sys/fs/bpf/l7alog-%d-%s-%s" % (PID, mode, name)
    log = open(os.path.join(TMP, "l7run-%s-%s.log" % (mode, name)), "w")
    return procs.serving(mode, L7RUN, obj, svc, [([sys.executable, ECHO, "APP", str(pa)], pa)], log, CG, pin,
                         extra=extra), log


def t_fields(mode, obj, svc, pa):
    path = os.path.join(TMP, "fields-%s.json" % mode)
    ctx, log = serving(mode, obj, svc, pa, "fields", ("--access-log", path))
    cases = [("/ok/1", 200, "allow"), ("/secret/x", 200, "audit"), ("/admin/y", 403, "deny"),
             ("/quiet/z", 200, None), ("/nowhere", 404, "deny"), ("/ok/2?a=b", 200, "allow"),
             ("/ok/made?status=201", 201, "allow"), ("/ok/gone?status=404", 404, "allow")]
    wire = {}
    with ctx:
        for p, want, _ in cases:
            st, wire[p] = get(svc, p)
            check(st == want, "%s %s: %d, expected %d" % (mode, p, st, want))
        r = subprocess.run(["curl", "-s", "-m", "5", "-o", "/dev/null", "-w", "%{http_code}",
                            "http://127.0.0.1:%d/ok/curl" % svc], capture_output=True, text=True, timeout=10)
        check(r.stdout == "200", "curl: %r" % r.stdout)
        logged = [c for c in cases if c[2]]
        lines = log_lines(path, len(logged) + 1)
    check(len(lines) == len(logged) + 1, "%s: %d lines for %d logged requests: %s" % (mode, len(lines), len(logged) + 1, lines))
    for (p, want, decision), l in zip(logged, lines):
        what = "%s %s: %s" % (mode, p, l)
        check(l["target"] == p and l["method"] == "GET" and l["host"] == "t" and l["protocol"] == "HTTP/1.1", what)
        check(l["mode"] == mode and l["client"] == "127.0.0.1" and l["identity"] == "local" and l["service"] == "front", what)
        check(re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$", l["time"]), what)
        check(l["decision"] == decision and l["bytes_in"] == len(req_bytes(p)), what)
        if decision == "deny":
            check(l["status"] == want and l["upstream"] is None and l["by"] == "l7run", what)
            if want == 403:
                check(l["line"] == LINE["deny"] and l["why"] == "rule %d (line %d)" % (l["rule"], LINE["deny"]), what)
            else:
                check(l["rule"] == 0 and l["why"] == "no policy routes it", what)
        else:
            check(l["upstream"] == "app" and l["endpoint"] == "127.0.0.1:%d" % pa, what)
            check(l["line"] == LINE["route"], what)
            # the response's record, joined: the backend's status, its bytes, kernel clocks
            check(l["status"] == want and l["bytes_out"] == wire[p], what + " (response: %d bytes)" % wire[p])
            check(isinstance(l["duration_ms"], float) and 0 <= l["duration_ms"] < 5000, what)
        if decision == "audit":
            check(l["audit_line"] == 11, what)
        if mode == "mesh":
            check(isinstance(l["client_port"], int) and l["client_port"] > 0, what)
    check(lines[-1]["target"] == "/ok/curl" and lines[-1]["decision"] == "allow", "%s curl line: %s" % (mode, lines[-1]))
    check(lines[-1]["status"] == 200 and lines[-1]["bytes_out"] > 0, "%s curl line: %s" % (mode, lines[-1]))


def t_keepalive(mode, obj, svc, pa):
    """Several requests on each of three connections, interleaved: each line gets its own
    response (status and bytes), joined by connection and request number."""
    path = os.path.join(TMP, "keepalive-%s.json" % mode)
    ctx, log = serving(mode, obj, svc, pa, "keepalive", ("--access-log", path))
    paths = ["/ok/k%d?status=%d&size=%d" % (i, (200, 201, 404)[i % 3], 10 * i + 1) for i in range(12)]
    want = {}
    with ctx:
        socks = [connect(svc) for _ in range(3)]
        rds = [Reader(s) for s in socks]
        for i, p in enumerate(paths):
            socks[i % 3].sendall(req_bytes(p))
            st, w, body = rds[i % 3].framed()
            check(st == (200, 201, 404)[i % 3] and len(body) == 10 * i + 1, "%s %s: %d" % (mode, p, st))
            want[p] = (st, w)
        for s in socks:
            s.close()
        lines = log_lines(path, len(paths))
    check(len(lines) == len(paths), "%s: %d lines for %d requests" % (mode, len(lines), len(paths)))
    for l in lines:
        check((l["status"], l["bytes_out"]) == want[l["target"]], "%s: %s, response %s" % (mode, l, want[l["target"]]))
    check(len({l["conn"] for l in lines}) == 3, "%s: three connections" % mode)


def t_errors(mode, obj, svc, pa):
    path = os.path.join(TMP, "errors-%s.json" % mode)
    ctx, log = serving(mode, obj, svc, pa, "errors", ("--access-log", path))
    now = int(time.time())
    good = {"iss": "t", "aud": "t", "exp": now + 600}
    cases = [  # path, Authorization, status, the line's "jwt"
        ("/jwt/none", None, 401, "missing"),
        ("/jwt/old", jwtgen.token(KEY, dict(good, exp=now - 600)), 401, "expired"),
        ("/jwt/forged", jwtgen.token(KEY, good, flip=True), 401, "bad signature"),
        ("/jwt/aud", jwtgen.token(KEY, dict(good, aud="other")), 401, "wrong audience"),
        ("/jwt/good", jwtgen.token(KEY, good), 200, None)]
    with ctx:
        for p, tok, want, _ in cases:
            s = connect(svc)
            auth = "Authorization: Bearer %s\r\n" % tok if tok else ""
            s.sendall(("GET %s HTTP/1.1\r\nHost: t\r\n%s\r\n" % (p, auth)).encode())
            st = Reader(s).framed()[0]
            s.close()
            check(st == want, "%s %s: %d, expected %d" % (mode, p, st, want))
        refusals = [(b"GET /ok/big HTTP/1.1\r\nHost: t\r\nX-Big: " + b"a" * 20000 + b"\r\n\r\n", 431, "head_too_large"),
                    (b"GET /ok/bad HTTP/1.1 x\r\nHost: t\r\n\r\n", 400, "bad_request")]
        for data, want, _ in refusals:
            s = connect(svc)
            s.sendall(data)
            st = Reader(s).framed()[0]
            s.close()
            check(st == want, "%s refusal: %d, expected %d" % (mode, st, want))
        lines = log_lines(path, len(cases) + len(refusals))
    check(len(lines) == len(cases) + len(refusals), "%s: %d lines: %s" % (mode, len(lines), lines))
    for (p, _, want, why), l in zip(cases, lines):
        what = "%s %s: %s" % (mode, p, l)
        check(l["target"] == p and l["status"] == want and l.get("jwt") == why, what)
        check(l["decision"] == ("deny" if why else "allow"), what)
    for (_, want, err), l in zip(refusals, lines[len(cases):]):
        what = "%s refusal: %s" % (mode, l)
        check(l["decision"] == "refused" and l["status"] == want and l["error"] == err and l["target"] is None, what)
        check(l["client"] == "127.0.0.1" and l["service"] == "front" and l["why"], what)


def t_sample(mode, obj, svc, pa):
    path = os.path.join(TMP, "sample-%s.json" % mode)
    ctx, log = serving(mode, obj, svc, pa, "sample", ("--access-log", path, "--access-log-sample", "4"))
    n = 400
    with ctx:
        for i in range(0, n, 100):
            s = connect(svc)
            sts = keepalive(s, ["/ok/%d" % k for k in range(i, i + 100)])
            s.close()
            check(sts == [200] * 100, "%s: statuses %s" % (mode, sts))
        time.sleep(0.5)
        lines = log_lines(path, n, 0.5)
    # binomial(400, 1/4): mean 100, sd 8.7; 50..150 is beyond 5 sd either way
    check(50 <= len(lines) <= 150, "%s: 1 in 4 sampled: %d lines of %d requests" % (mode, len(lines), n))
    check(len({l["target"] for l in lines}) == len(lines), "%s: each line a request of its own" % mode)


def t_drops(mode, obj, svc, pa):
    path = os.path.join(TMP, "drops-%s.json" % mode)
    mport = svc + 5
    ctx, log = serving(mode, obj, svc, pa, "drops", ("--access-log", path, "--access-log-buffer", "4096",
                                                      "--metrics-listen", "127.0.0.1:%d" % mport))
    n = 300
    with ctx as l7:
        # the connection's first request (gateway: l7run forwards it, a pool miss), then l7run
        # stopped: the kernel forwards the rest by itself and nobody reads the 4 KiB buffer
        s = connect(svc)
        check(keepalive(s, ["/ok/0"]) == [200], "%s: the first request" % mode)
        log_lines(path, 1)
        os.kill(l7.pid, signal.SIGSTOP)
        try:
            sts = keepalive(s, ["/ok/%d" % k for k in range(1, n)])
        finally:
            os.kill(l7.pid, signal.SIGCONT)
        s.close()
        check(sts == [200] * (n - 1), "%s: statuses %s" % (mode, sts))
        time.sleep(0.5)
        text = subprocess.run(["curl", "-sS", "-m", "5", "http://127.0.0.1:%d/metrics" % mport],
                              capture_output=True, text=True, timeout=10).stdout
    # after l7run stopped: a request whose response's record was dropped is written then
    lines = log_lines(path, n, 0.5)
    s = samples(text)
    no_resp = [l for l in lines if l["bytes_out"] is None]
    check(all(l["status"] is None and l["duration_ms"] is None for l in no_resp), "%s: nulls" % mode)
    dropped = s.get("l7_access_log_dropped_total", -1)
    check(dropped == s.get('l7_dataplane_total{event="access_log_dropped"}'), "%s: the two counts agree" % mode)
    check(dropped > 0, "%s: a 4 KiB ring buffer under %d pipelined requests dropped none (%d lines)" % (mode, n, len(lines)))
    check(len(lines) + dropped == n, "%s: %d lines + %d dropped != %d requests" % (mode, len(lines), dropped, n))
    r = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=30)
    check(r.returncode == 0 and not (r.stdout + r.stderr).strip(), "promtool: %r" % (r.stdout + r.stderr))
    print("     %s: %d requests, %d lines, %d dropped" % (mode, n, len(lines), dropped), flush=True)


def main():
    if os.geteuid() != 0:
        print("FAIL: needs root")
        return 1
    with open(KEYFILE, "wb") as f:
        f.write(KEY)
    os.mkdir(CG)
    try:
        for i, mode in enumerate(("gateway", "mesh")):
            base = BASE + i * 10
            src = os.path.join(TMP, "alog-%s.l7" % mode)
            with open(src, "w") as f:
                f.write(POLICY % (base, base + 1, KEYFILE))
            obj = src[:-3] + ".o"
            # the default budget: this policy's mesh SK_MSG program (JWT after five rules) once took
            # the verifier past its 1M steps while the model estimated 574K (issue 18, jwt.h's
            # l7g_jwt_hot/l7g_jwt_cold); kernel.jwt_rules checks the family
            subprocess.run([L7C, src, "-o", obj], check=True, timeout=120)
            for name, fn in (("fields", t_fields), ("keepalive", t_keepalive), ("errors", t_errors), ("sample", t_sample),
                         ("drops", t_drops)):
                t = time.time()
                try:
                    fn(mode, obj, base, base + 1)
                    print("PASS %-8s %-8s %.2fs" % (mode, name, time.time() - t), flush=True)
                except Exception as e:  # noqa: BLE001 - report every check
                    failures.append((mode, name))
                    print("FAIL %-8s %-8s %s" % (mode, name, e), flush=True)
    finally:
        procs.stop_all()
        check(procs.cgroup_remove(CG), "cgroup %s removed" % CG)
        subprocess.run(["rm", "-rf", TMP])
    print("%d failed" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
