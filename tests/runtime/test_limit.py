#!/usr/bin/python3
"""Token-bucket rate limits in the kernel, gateway and mesh mode: examples/rate_limit.l7 (its
service and upstream moved to ports of this run) driven by its own `// test:` lines, with real
requests from several client addresses (127.0.0.1, 127.0.0.2, ...): per user (a header), per
client address (`Limit(b, request.source)`: one client gets 503 after its burst while another
is unaffected), and one bucket for all.

usage: test_limit.py L7C L7RUN ECHO_BACKEND EXAMPLE.l7 [gateway|mesh]...   (default: both)
Every process started here is ended by pid; ports, pins and the cgroup derive from our pid and
are removed. Needs root (BPF, cgroup2); never skips."""
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from exampletests import check, parse, raw_request  # noqa: E402
from procs import CG_ROOT, cgroup_remove, serving  # noqa: E402
from rawhttp import request  # noqa: E402

L7C, L7RUN, ECHO, EXAMPLE = sys.argv[1:5]
MODES = sys.argv[5:] or ["gateway", "mesh"]
PID = os.getpid()
BASE = 24000 + (PID % 900) * 8          # below the ephemeral range


def moved(text):
    """The example with its services and upstreams on BASE, BASE+1, ...: {name: port}, text."""
    ports = {}

    def port(m):
        ports[m.group(2)] = BASE + len(ports)
        return "%s %s = 127.0.0.1:%d;" % (m.group(1), m.group(2), ports[m.group(2)])
    return ports, re.sub(r"^(service|upstream) (\w+) = 127\.0\.0\.1:\d+;", port, text, flags=re.M)


def run(mode, tmp, obj, ports, services, tests):
    front = [p for n, p in ports.items() if n in services][0]
    backends = [([sys.executable, ECHO, str(p), n], p) for n, p in ports.items() if n not in services]
    cg = os.path.join(CG_ROOT, "l7limit-test-%d" % PID)
    pin = "/sys/fs/bpf/l7limit-%d-%s" % (PID, mode)
    failures = []
    if mode == "mesh":
        os.mkdir(cg)
    log = open(os.path.join(tmp, mode + ".log"), "w")
    try:
        with serving(mode, L7RUN, obj, front, backends, log, cg, pin):
            for t in tests:
                count, src, method, path, headers, _, expect = parse(t)
                got = [request(front, raw_request(method, path, headers).encode(), src) for _ in range(count)]
                ok, why = check(expect, got)
                print("%s %-7s %s%s" % ("ok  " if ok else "FAIL", mode, t, "" if ok else "\n     " + why))
                if not ok:
                    failures.append("%s: %s: %s" % (mode, t, why))
    finally:
        log.close()
        if mode == "mesh" and not cgroup_remove(cg):
            failures.append("cgroup left behind: " + cg)
    if failures:
        print(open(log.name).read()[-2000:])
    return failures


def main():
    if os.geteuid() != 0:
        print("FAIL: needs root")
        return 1
    text = open(EXAMPLE).read()
    services = set(re.findall(r"^service (\w+) =", text, re.M))
    tests = re.findall(r"^// test: (.*)$", text, re.M)
    assert any(" from " in " " + t for t in tests), "the example sends from no second client address"
    assert "request.source" in text, "the example does not limit per client address"
    ports, policy = moved(text)
    tmp = tempfile.mkdtemp(prefix="l7limit-")
    pol, obj = os.path.join(tmp, os.path.basename(EXAMPLE)), os.path.join(tmp, "limit.o")
    with open(pol, "w") as f:
        f.write(policy)
    subprocess.run([L7C, pol, "-o", obj], check=True, timeout=120)
    failures = []
    for mode in MODES:
        # Buckets refill in real time (rate 1/s): on a loaded machine a slow run sees a token
        # come back and gets a 200 the test line does not expect. A fresh l7run (fresh buckets)
        # runs the lines again, up to three times; a limit that is not enforced fails them all.
        for attempt in range(3):
            t0 = time.time()
            got = run(mode, tmp, obj, ports, services, tests)
            print("%-7s %d test lines, %.2fs, attempt %d: %d failure(s)" % (mode, len(tests), time.time() - t0,
                                                                           attempt + 1, len(got)))
            if not got:
                break
        failures += got
    subprocess.run(["rm", "-rf", tmp])
    print("%d failure(s)" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
