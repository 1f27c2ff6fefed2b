#!/usr/bin/env python3
"""A 10,000-rule RBAC policy (issue: rule tables) compiles, loads into the kernel and decides
correctly for its first, middle and last rule and for a request no rule allows; prints the
compile time and the verifier's processed instructions.
Usage: big_rbac.py L7C L7RUN ECHO_BACKEND"""
import json, os, shutil, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from procs import start, stop_all, wait_port  # noqa: E402
from rawhttp import request  # noqa: E402

L7C, L7RUN, ECHO = sys.argv[1:4]
N = 10000
BASE = 24000 + (os.getpid() % 800) * 4
METHODS = ["GET", "POST", "PUT", "DELETE"]


def rule(i):   # every third rule a prefix, the others exact paths
    m = METHODS[i % 4]
    if i % 3 == 0:
        return m, "/svc%d/" % i, True
    return m, "/svc%d/op" % i, False


def send(port, method, path):
    return request(port, ("%s %s HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n" % (method, path)).encode())[0]


work = tempfile.mkdtemp(prefix="l7c-big-")
src, obj = os.path.join(work, "big.l7"), os.path.join(work, "big.o")
pin = "/sys/fs/bpf/l7c-big-%d" % os.getpid()
body = []
for i in range(N):
    m, p, prefix = rule(i)
    cond = 'starts_with(request.path, "%s")' % p if prefix else 'request.path == "%s"' % p
    body.append('  %s (request.method == "%s" && %s) {\n    Allow(request);' % ("if" if i == 0 else "} else if", m, cond))
open(src, "w").write('service front = 127.0.0.1:%d;\nupstream app = 127.0.0.1:%d;\n'
                     'policy rbac (act (HttpRequest request) context (\'.*->front\')) {\n%s\n  }\n}\n'
                     'policy route (act (HttpRequest request)) { Route(request, app); }\n'
                     % (BASE, BASE + 1, "\n".join(body)))
failed = 0
try:
    t0 = time.time()
    subprocess.run([L7C, src, "-o", obj], check=True)
    compile_s = time.time() - t0
    ex = json.loads(subprocess.run([L7C, "--explain", "--verify", "--format=json", src], check=True,
                                   capture_output=True, text=True).stdout)
    worst = max((p for p in ex["programs"] if not p["subprogram"]), key=lambda p: p["processed"])
    print("%d rules: compile %.2f s; verifier: %s" % (N, compile_s, ", ".join(
        "%s %d" % (p["name"], p["processed"]) for p in ex["programs"] if not p["subprogram"])))
    assert all(p["verifier"] == "accepted" for p in ex["programs"] if not p["subprogram"]), ex["programs"]
    start([sys.executable, ECHO, str(BASE + 1), "app"], stdout=subprocess.DEVNULL)
    start([L7RUN, "--pin", pin, obj], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(BASE, 10)
    cases = []
    for i in (0, 1, N // 2, N // 2 + 1, N - 1):
        m, p, prefix = rule(i)
        cases.append((m, p + ("deeper/x" if prefix else ""), 200, "rule %d" % (i + 1)))
        cases.append(("OPTIONS", p, 403, "rule %d's path, a method no rule allows" % (i + 1)))
    m, p, prefix = rule(N // 2)
    assert not prefix
    cases.append((m, p + "x", 403, "an exact path plus one byte"))
    cases.append(("GET", "/nowhere", 403, "no rule"))
    for m, p, want, what in cases:
        got = send(BASE, m, p)
        ok = got == want
        failed += not ok
        print("%s %s %s -> %d (%s)" % ("PASS" if ok else "FAIL", m, p, got, what))
finally:
    stop_all()
    shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(pin, ignore_errors=True)
print("big_rbac: %d passed, %d failed" % (12 - failed, failed))
sys.exit(1 if failed else 0)
