#!/usr/bin/env python3
"""Regex routes (matches()) in the kernel: a policy routing by regexes over the path, the
method, the query and a header is compiled, loaded by l7run in gateway mode and in mesh mode,
and driven with real requests over loopback: matching paths reach the expected backend (with
the header the rule sets), paths that match nothing get the default 404, denied ones their
status -- including paths of 4 KiB and ~8 KiB, which the DFA reads to the end (or gives up on
at the first byte that cannot match).

usage: test_regex.py L7C L7RUN MESH_ECHO [gateway|mesh]...   (default: both)
Every process started here is ended by pid; ports, pins and the cgroup derive from our pid and
are removed. Needs root (BPF, cgroup2); never skips."""
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from policy import policy  # noqa: E402
from procs import CG_ROOT, cgroup_home, cgroup_join, cgroup_remove, start, stop_all, wait_port  # noqa: E402
from rawhttp import Reader, connect as connect_to  # noqa: E402

L7C, L7RUN, ECHO = sys.argv[1:4]
MODES = sys.argv[4:] or ["gateway", "mesh"]
PID = os.getpid()
BASE = 23000 + (PID % 900) * 8          # below the ephemeral range
FRONT, ONE, TWO = BASE, BASE + 1, BASE + 2
CG = os.path.join(CG_ROOT, "l7regex-test-%d" % PID)

POLICY = policy("regex_routes", FRONT, [("one", ONE), ("two", TWO)], r"""
  if (matches(request.path, "/admin(/.*)?")) {
    Deny(request, 403);
  } else if (matches(request.path, "/api/v[0-9]+/users/[0-9]{1,6}") && matches(request.method, "GET|HEAD")) {
    SetHeader(request, "x-re", "user");
    Route(request, one);
  } else if (matches(request.path, "/static/[a-z0-9_/-]+\\.(css|js|png)")) {
    Route(request, two);
  } else if (matches(request.header("x-tenant"), "[a-z]{3,8}-[0-9]{2}")) {
    SetHeader(request, "x-re", "tenant");
    Route(request, two);
  } else if (matches(request.path, "/long/(ab)*z")) {
    Route(request, one);
  } else if (matches(request.query, "(.*&)?debug=1(&.*)?")) {
    Deny(request, 451);
  }
"""[1:])

LONG4K = "/long/" + "ab" * 2045 + "z"            # 4,097 bytes: matches after reading it all
LONG8K = "/long/" + "ab" * 3990 + "z"            # 7,987 bytes (the request line limit is 8 KiB)
# (path, extra header lines, method) -> (status, backend, x-re header)
CASES = [
    ("/api/v1/users/42", "", "GET", 200, "one", "user"),
    ("/api/v12/users/123456", "", "HEAD", 200, "one", "user"),
    ("/api/v1/users/42", "", "POST", 404, None, None),             # method does not match
    ("/api/v1/users/1234567", "", "GET", 404, None, None),         # {1,6}
    ("/api/v/users/1", "", "GET", 404, None, None),
    ("/api/v1/users/42/", "", "GET", 404, None, None),             # the whole path must match
    ("/static/css/site.css", "", "GET", 200, "two", None),
    ("/static/a_b-c/x.png", "", "GET", 200, "two", None),
    ("/static/Site.css", "", "GET", 404, None, None),              # [a-z0-9_/-] only
    ("/static/x.cssx", "", "GET", 404, None, None),
    ("/admin", "", "GET", 403, None, None),
    ("/admin/users", "", "GET", 403, None, None),
    ("/administrator", "", "GET", 404, None, None),
    ("/other", "X-Tenant: acme-07\r\n", "GET", 200, "two", "tenant"),
    ("/other", "X-Tenant: ac-07\r\n", "GET", 404, None, None),
    ("/other", "X-Tenant: acme-07x\r\n", "GET", 404, None, None),
    ("/q?a=1&debug=1", "", "GET", 451, None, None),
    ("/q?debug=1", "", "GET", 451, None, None),
    ("/q?debug=10", "", "GET", 404, None, None),
    ("/", "", "GET", 404, None, None),
    (LONG4K, "", "GET", 200, "one", None),
    (LONG4K[:-1] + "y", "", "GET", 404, None, None),               # read to the end, no match
    ("/x" + "a" * 4094, "", "GET", 404, None, None),               # dead after two bytes
    (LONG8K, "", "GET", 200, "one", None),
    ("/long/" + "ab" * 3990 + "az", "", "GET", 404, None, None),
]


def field(body, name):
    for line in body.splitlines():
        if line.startswith(name + "="):
            return line[len(name) + 1:]
    return None


def connect():
    return connect_to(FRONT)


def check_cases(mode):
    """Every case on one kept-alive connection (denies keep it open), twice; HEAD requests on
    connections of their own (a deny answers HEAD with a body)."""
    failures = []
    s = connect()
    r = Reader(s)
    for rnd in range(2):   # the second round runs on warm pool connections
        for path, extra, method, want, backend, xre in CASES:
            data = ("%s %s HTTP/1.1\r\nHost: front\r\n%s\r\n" % (method, path, extra)).encode()
            if method == "HEAD":
                h = connect()
                h.sendall(data)
                st, _, body = Reader(h).response(head_only=True)
                h.close()
            else:
                s.sendall(data)
                st, _, body = r.response()
            got_backend = field(body, "backend") if st == 200 and method != "HEAD" else None
            ok = st == want and (method == "HEAD" or got_backend == backend)
            if ok and st == 200 and method != "HEAD":
                ok = field(body, "path") == path and field(body, "h:x-re") == xre
            if not ok:
                failures.append("%s round %d: %s %s%s -> %d %s (want %d %s x-re=%s): %r" % (
                    mode, rnd, method, path[:40], "..." if len(path) > 40 else "", st, got_backend, want, backend,
                    xre, body[:120]))
    s.close()
    return failures


def run_gateway(tmp, obj):
    pin = "/sys/fs/bpf/l7regex-%d-gw" % PID
    log = open(os.path.join(tmp, "gateway.log"), "w")
    try:
        for name, port in (("one", ONE), ("two", TWO)):
            start([sys.executable, ECHO, name, str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            assert wait_port(port, 20), "backend %s did not start" % name
        gw = start([L7RUN, "--pin", pin, obj], stdout=log, stderr=log)
        assert wait_port(FRONT, 20), "l7run did not come up"
        failures = check_cases("gateway")
        gw.send_signal(signal.SIGTERM)
        gw.wait(timeout=10)
        if gw.returncode != 0:
            failures.append("l7run exited %s" % gw.returncode)
        if os.path.exists(pin):
            failures.append("pin left behind: " + pin)
        return failures
    finally:
        stop_all()
        log.close()
        subprocess.run(["rm", "-rf", pin])


def run_mesh(tmp, obj):
    home_cg = cgroup_home()
    pin = "/sys/fs/bpf/l7regex-%d-mesh" % PID
    os.mkdir(CG)
    log = open(os.path.join(tmp, "mesh.log"), "w")
    try:
        for name, port in (("one", ONE), ("two", TWO)):
            start([sys.executable, ECHO, name, str(port)], cgroup=CG, stdout=subprocess.DEVNULL,
                  stderr=subprocess.DEVNULL)
            assert wait_port(port, 20), "backend %s did not start" % name
        start([L7RUN, "--mesh", "--cgroup", CG, "--pool", "4", "--pin", pin, obj], stdout=log, stderr=log)
        assert wait_port(FRONT, 20), "l7run --mesh did not come up"
        time.sleep(0.3)   # pool filled
        cgroup_join(CG)   # this process is the client
        return check_cases("mesh")
    finally:
        cgroup_join(home_cg)
        stop_all()
        log.close()
        cgroup_remove(CG)
        subprocess.run(["rm", "-rf", pin])


def main():
    if os.geteuid() != 0:
        print("FAIL: needs root")
        return 1
    tmp = tempfile.mkdtemp(prefix="l7regex-")
    pol, obj = os.path.join(tmp, "regex.l7"), os.path.join(tmp, "regex.o")
    with open(pol, "w") as f:
        f.write(POLICY)
    subprocess.run([L7C, pol, "-o", obj], check=True, timeout=120)
    failures = []
    for mode in MODES:
        t = time.time()
        got = (run_gateway if mode == "gateway" else run_mesh)(tmp, obj)
        print("%s %-8s %d requests, %.2fs" % ("FAIL" if got else "ok  ", mode, 2 * len(CASES), time.time() - t))
        for f in got:
            print("  " + f)
        if got:
            logf = os.path.join(tmp, mode + ".log")
            print(open(logf).read()[-2000:] if os.path.exists(logf) else "")
        failures += got
    if os.path.exists(CG):
        failures.append("cgroup left behind: " + CG)
    subprocess.run(["rm", "-rf", tmp])
    print("%d failure(s)" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
