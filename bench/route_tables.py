#!/usr/bin/env python3
"""Route tables against if/else chains: what the tables pass buys at run time (issue 6).

Generates N-route policies (N = 100 and 1,000; method + exact path or prefix, eight upstreams,
every seventh rule a Deny) twice: as written, which the tables pass makes one lookup and one
rule per decision, and with a `request.method != "TRACE"` guard on every other rule, which keeps
the same answers but breaks every run, so the rules stay an if/else chain (at 1,000 a tail-call
chain). Each carries `// test:` lines for its last routes (the chain's worst case), and
bench/examples.py measures them: verifier processed instructions, compile time and the data
plane's BPF time per request in gateway and mesh mode.

  sudo bench/route_tables.py [--build DIR] [--requests N]    (prints a Markdown table)"""
import argparse, os, shutil, subprocess, sys, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
METHODS = ["GET", "POST", "PUT", "DELETE"]


def policy(n, chain):
    lines = ["service front = 127.0.0.1:8080;"] + ["upstream u%d = 127.0.0.1:%d;" % (i, 9001 + i) for i in range(8)]
    lines.append("policy routes (act (HttpRequest request) context ('.*->front')) {")
    tests = []
    for i in range(n):
        path = "/svc%d/" % i if i % 3 == 0 else "/svc%d/op" % i
        cond = ('starts_with(request.path, "%s")' if i % 3 == 0 else 'request.path == "%s"') % path
        method = METHODS[i % 4] if i % 2 else None
        if method:
            cond = 'request.method == "%s" && %s' % (method, cond)
        if chain and i % 2 == 0:
            cond = 'request.method != "TRACE" && ' + cond
        action = "Deny(request, 403);" if i % 7 == 0 else "Route(request, u%d);" % (i % 8)
        lines.append("  %s (%s) { %s" % ("if" if i == 0 else "} else if", cond, action))
        if i % 7 and i >= n - 12:
            tests.append("// test: %s %s -> 200 u%d" % (method or "GET", path + ("x" if i % 3 == 0 else ""), i % 8))
    lines.append("  }\n}")
    return "\n".join(tests[-4:]) + "\n" + "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(os.path.dirname(HERE), "build"))
    ap.add_argument("--requests", type=int, default=2000)
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="l7c-routetables-")
    try:
        files = []
        for n in (100, 1000):
            for chain in (True, False):
                f = os.path.join(work, "routes%d_%s.l7" % (n, "chain" if chain else "table"))
                open(f, "w").write(policy(n, chain))
                files.append(f)
        return subprocess.run([sys.executable, os.path.join(HERE, "examples.py"), "--build", a.build, "--only",
                               ",".join(files), "--requests", str(a.requests), "--out", "-"]).returncode
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
