#!/usr/bin/python3
"""An HTTP/2 client's HPACK dynamic table in mesh mode (issue 14): `h2load -n 20000 -c 2 -m 50`
direct to nghttpd, and through mesh mode with an older build (OLD: l7c and l7run of another
checkout, e.g. main before the table was kept) and this one (NEW), each with the client's
encoder table at 0 (--encoder-header-table-size=0) and as h2load comes (default: its first
50 streams of a connection go out before our SETTINGS and refer to the table), in one run,
rounds alternating. Per case: the median rate, every round's rate, failures, and l7run's CPU
time for the 20,000 requests (what a loaded machine disturbs least). Needs root; run it in a
network namespace of your own (its ports are 26000-26799).

usage: bench/hpack_dynamic.py OLD_L7C OLD_L7RUN NEW_L7C NEW_L7RUN ROUNDS"""
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "common"))
from policy import policy  # noqa: E402
from procs import CG_ROOT, cgroup_remove, serving, start, stop, wait_port  # noqa: E402

OLD_C, OLD_R, NEW_C, NEW_R, ROUNDS = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
PID = os.getpid()
SVC, PA = 26000 + PID % 400 * 2, 26001 + PID % 400 * 2
CG = os.path.join(CG_ROOT, "l7hpack-bench-%d" % PID)
PIN = "/sys/fs/bpf/l7hpack-bench-%d" % PID
TMP = tempfile.mkdtemp(prefix="l7hpack-bench-")
POL = policy("h2b", SVC, [("a", PA)], """\
  if (starts_with(request.path, "/admin")) {
    Deny(request, 403);
  } else {
    Route(request, a);
  }
""")
os.makedirs(os.path.join(TMP, "docs", "a"))
open(os.path.join(TMP, "docs", "a", "hello.txt"), "w").write("hello\n")
open(os.path.join(TMP, "h2b.l7"), "w").write(POL)
objs = {}
for tag, c in (("old", OLD_C), ("new", NEW_C)):
    objs[tag] = os.path.join(TMP, tag + ".o")
    subprocess.run([c, os.path.join(TMP, "h2b.l7"), "-o", objs[tag]], check=True)
NGHTTPD = ["nghttpd", "--no-tls", "-a", "127.0.0.1", "--max-concurrent-streams=2000", "-d", os.path.join(TMP, "docs"), str(PA)]


def cpu_ms(pid):
    if not pid:
        return 0
    f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) * 1000 // os.sysconf("SC_CLK_TCK")


def h2load(port, *extra, pid=None):
    c0 = cpu_ms(pid)
    r = subprocess.run(["h2load", "-n", "20000", "-c", "2", "-m", "50", *extra, "http://127.0.0.1:%d/a/hello.txt" % port],
                       capture_output=True, text=True, timeout=120)
    m = re.search(r"finished in [\d.]+m?s, ([\d.]+) req/s", r.stdout)
    f = re.search(r"requests: \d+ total, \d+ started, \d+ done, (\d+) succeeded, (\d+) failed, (\d+) errored", r.stdout)
    return "%8.0f req/s  %5s ok %5s failed %5s errored  l7run %5d ms CPU" % (
        float(m.group(1)), f.group(1), f.group(2), f.group(3), cpu_ms(pid) - c0)


res = {}
os.mkdir(CG)
log = open(os.path.join(TMP, "log"), "w")
try:
    for rnd in range(ROUNDS):
        p = start(NGHTTPD, stdout=subprocess.DEVNULL, stderr=log)
        wait_port(PA, 10)
        res.setdefault("direct (default)", []).append(h2load(PA))
        stop(p)
        time.sleep(0.3)
        for tag, r in (("old", OLD_R), ("new", NEW_R)):
            with serving("mesh", r, objs[tag], SVC, [(NGHTTPD, PA)], log, CG, PIN + tag, extra=("--h2c", "a", "--pool", "8")) as l7:
                res.setdefault("%s mesh, --encoder-header-table-size=0" % tag, []).append(
                    h2load(SVC, "--encoder-header-table-size=0", pid=l7.pid))
                res.setdefault("%s mesh, default" % tag, []).append(h2load(SVC, pid=l7.pid))
            time.sleep(0.3)
finally:
    log.close()
    cgroup_remove(CG)
for k, v in res.items():
    rates = sorted(float(x.split()[0]) for x in v)
    cpus = sorted(int(x.split()[-3]) for x in v)
    print("%-45s median %8.0f req/s  of %s; l7run CPU median %d ms" % (k, rates[len(rates) // 2], " ".join("%.0f" % r for r in rates),
                                                                     cpus[len(cpus) // 2]))
    for x in v:
        print("   ", x)
subprocess.run(["rm", "-rf", TMP])
