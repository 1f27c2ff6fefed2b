#!/usr/bin/python3
"""l7run's telemetry, in gateway and in mesh mode, read the way its users read it:
  - counters: every counter of stdlib/include/l7/counters.def, and only those, in its order, is
    in the l7_stats map (max_entries), printed by `l7run --stats PIN` as `stat NAME VALUE`
    (never `(null)`; in mesh mode --stats printed only the reload lines) and exported as
    l7_dataplane_total{event="NAME"};
  - exposition: what `l7run --metrics PIN POLICY.o` prints and what the --metrics-listen
    endpoint serves (scraped with curl) parses with prometheus_client's text parser with HELP
    and TYPE for every family, has every family of counters.def and no other, and
    `promtool check metrics` finds no problem, lint included;
  - a killed upstream: every request to it gets 502 and counts under its own
    l7_upstream_responses_total{class="5xx"} (not as l7run's own answers, whose bytes it joins);
    l7run says once that it is down and once that it is up again.
usage: test_telemetry.py L7C L7RUN SOURCE_DIR   (root: BPF, cgroup2; never skips)"""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

L7C, L7RUN, SRC = sys.argv[1:4]
sys.path.insert(0, os.path.join(SRC, "tests", "common"))
import procs  # noqa: E402
from policy import policy  # noqa: E402
from rawhttp import Reader, connect  # noqa: E402
from telemetry import samples  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402  (python3-prometheus-client)

PID = os.getpid()
BASE = 21000 + (PID % 500) * 20
TMP = tempfile.mkdtemp(prefix="l7tel-")
CG = os.path.join(procs.CG_ROOT, "l7tel-%d" % PID)
N_DOWN = 7   # requests sent to the killed upstream
failures = []

COUNTERS_DEF = open(os.path.join(SRC, "stdlib", "include", "l7", "counters.def")).read()
STATS = re.findall(r'^L7_STAT\(\s*\w+,\s*(\w+),\s*(?:DP|RT),\s*"([^"]*)"\)', COUNTERS_DEF, re.M)
FAMILIES = dict(re.findall(r'^L7_METRIC\(\s*\w+,\s*(\w+),\s*(counter|gauge),', COUNTERS_DEF, re.M))


def source(svc, pa, pb):
    """The policy served on svc: /b to upstream b, the rest (but /admin) to a, counted in `seen`."""
    return policy("tel", svc, [("a", pa), ("b", pb)], """\
  if (starts_with(request.path, "/admin")) {
    Deny(request, 403);
  } else if (starts_with(request.path, "/b")) {
    Route(request, b);
  }
  Increment(seen);
  Route(request, a);
""", imports=["state.l7i"], using="Counter seen")


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def request(port, path):
    """(status, bytes of the response) of one GET on a fresh connection."""
    s = connect(port)
    try:
        s.sendall(("GET %s HTTP/1.1\r\nHost: t\r\n\r\n" % path).encode())
        st, n, _ = Reader(s).framed()
        return st, n
    finally:
        s.close()


def wait_for(cond, what, deadline=10.0):
    end = time.time() + deadline
    while time.time() < end:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError("waited %.0f s for: %s" % (deadline, what))


def stats(pin):
    r = subprocess.run([L7RUN, "--stats", pin], capture_output=True, text=True, timeout=20)
    check(r.returncode == 0, "--stats %s: exit %d %s" % (pin, r.returncode, r.stderr))
    return r.stdout


def t_counters(mode, pin, svc):
    """--stats names every counter of the table, in its order (`stat NAME VALUE`, three
    fields: what scripts read); the map has as many as the table."""
    out = stats(pin)
    check("(null)" not in out, "--stats prints (null): %r" % out)
    rows = [l.split() for l in out.splitlines() if l.startswith("stat ")]
    check(all(len(r) == 3 and r[2].isdigit() for r in rows), "--stats lines are `stat NAME VALUE`: %r" % out)
    check([r[1] for r in rows] == [n for n, _ in STATS], "--stats counters %s, counters.def %s" % (rows, STATS))
    m = json.loads(subprocess.run(["bpftool", "-j", "map", "show", "pinned", os.path.join(pin, "map_l7_stats")],
                                  capture_output=True, text=True, timeout=20).stdout)
    check(m["max_entries"] == len(STATS), "l7_stats has %d entries, counters.def %d" % (m["max_entries"], len(STATS)))
    got = {n: int(v) for _, n, v in rows}
    check(got["requests"] >= 3 and got["denied"] >= 1, "the traffic is counted: %s" % got)
    check(re.search(r"^prog l7_%s\S* +run_cnt" % ("mesh_msg_prog" if mode == "mesh" else "client_parser"), out, re.M),
          "--stats prints the programs of %s mode: %r" % (mode, out))
    socks = "l7_mesh_socks" if mode == "mesh" else "l7_clients"
    check(re.search(r"^sockets %s +\d+" % socks, out, re.M), "--stats counts the sockets of %s: %r" % (socks, out))
    if mode == "mesh":
        check(re.search(r"^pool upstream 0 idle \d+ busy \d+ orphan \d+ dead \d+$", out, re.M), "mesh pool line: %r" % out)
    check(re.search(r"^reload version 1 ", out, re.M), "the reload state: %r" % out)


def exposition(text, where):
    """Parsed by prometheus_client and promtool: every family with HELP and TYPE, those of
    counters.def and no other, every counter of the table an event of l7_dataplane_total."""
    fams = {}
    for f in text_string_to_metric_families(text):
        name = f.name + "_total" if f.type == "counter" and f.name + "_total" in FAMILIES else f.name
        check(name not in fams, "%s: family %s twice" % (where, name))
        fams[name] = f
        check(f.documentation, "%s: %s has no HELP" % (where, name))
        check(f.type == FAMILIES.get(name), "%s: %s has TYPE %s, counters.def says %s" % (where, name, f.type, FAMILIES.get(name)))
    check(set(fams) == set(FAMILIES), "%s: families %s, counters.def %s" % (where, sorted(fams), sorted(FAMILIES)))
    events = [s.labels["event"] for s in fams["l7_dataplane_total"].samples]
    check(events == [n for n, _ in STATS], "%s: l7_dataplane_total events %s" % (where, events))
    check(any(s.labels.get("decision") == "deny" and s.value >= 1 for s in fams["l7_rule_hits_total"].samples),
          "%s: the deny rule's hits" % where)
    r = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=30)
    check(r.returncode == 0 and not (r.stdout + r.stderr).strip(),
          "%s: promtool check metrics: exit %d %r" % (where, r.returncode, r.stdout + r.stderr))


def t_exposition(pin, obj, metrics_port):
    r = subprocess.run([L7RUN, "--metrics", pin, obj], capture_output=True, text=True, timeout=20)
    check(r.returncode == 0, "--metrics: exit %d %s" % (r.returncode, r.stderr))
    exposition(r.stdout, "--metrics PIN")
    r = subprocess.run(["curl", "-sS", "-m", "5", "-D", "-", "http://127.0.0.1:%d/metrics" % metrics_port],
                       capture_output=True, timeout=10)   # bytes: the head's CRLFs as sent
    head, _, body = r.stdout.decode().partition("\r\n\r\n")
    check(head.startswith("HTTP/1.1 200") and "text/plain; version=0.0.4" in head, "scrape: %r" % head)
    exposition(body, "--metrics-listen")


def scrape(metrics_port):
    return samples(subprocess.run(["curl", "-sS", "-m", "5", "http://127.0.0.1:%d/metrics" % metrics_port],
                                  capture_output=True, text=True, timeout=10).stdout)


def log_lines(log, what):
    return [l for l in open(log.name).read().splitlines() if what in l]


def t_upstream_down(mode, svc, pb, backend_b, metrics_port, log):
    """Kill b: N requests to it, N 502s, all charged to b; one 'down' line; back: one 'up'."""
    down, up = "upstream b (127.0.0.1:%d) is down" % pb, "upstream b (127.0.0.1:%d) is up again" % pb
    check(request(svc, "/b/before")[0] == 200, "b serves before")
    procs.stop(backend_b)

    def no_live_connection():   # l7run has seen every connection to b close
        out = subprocess.run(["ss", "-Htn", "state", "established", "state", "close-wait", "dport", "= :%d" % pb],
                             capture_output=True, text=True).stdout
        return not out.strip()
    wait_for(no_live_connection, "l7run's connections to b closed")
    if mode == "mesh":   # its refill finds b gone (in gateway mode the first request does)
        wait_for(lambda: log_lines(log, down), "l7run saying b is down")
    before = scrape(metrics_port)
    sizes = []
    for i in range(N_DOWN):
        st, n = request(svc, "/b/down%d" % i)
        check(st == 502, "request %d to the killed upstream: %d" % (i, st))
        sizes.append(n)
    after = scrape(metrics_port)
    key = 'l7_upstream_responses_total{upstream="b",class="5xx"}'
    local = 'l7_local_responses_total{class="5xx"}'
    check(after[key] - before[key] == N_DOWN, "b's 5xx grew by %d for %d 502s" % (after[key] - before[key], N_DOWN))
    check(after[local] == before[local], "l7run's own 5xx grew by %d" % (after[local] - before[local]))
    grew = after["l7_local_response_bytes_total"] - before["l7_local_response_bytes_total"]
    check(grew == sum(sizes), "l7run's answer bytes grew by %d, the 502s were %d" % (grew, sum(sizes)))
    check(request(svc, "/a/meanwhile")[0] == 200, "a serves while b is down")
    b = procs.start([sys.executable, os.path.join(SRC, "tests", "mesh", "echo.py"), "B", str(pb)],
                    cgroup=CG if mode == "mesh" else None, stdout=subprocess.DEVNULL, stderr=log)
    procs.wait_port(pb, 10)

    def b_serves():
        return request(svc, "/b/back")[0] == 200
    wait_for(b_serves, "b serving again")
    wait_for(lambda: log_lines(log, up), "l7run saying b is up again")
    check(len(log_lines(log, down)) == 1 and len(log_lines(log, up)) == 1,
          "one line each way: %s" % (log_lines(log, "upstream b"),))
    return b


def run(mode, obj_for):
    base = BASE + (10 if mode == "mesh" else 0)
    svc, pa, pb, mport = base, base + 1, base + 2, base + 3
    obj = obj_for(svc, pa, pb)
    pin = "/sys/fs/bpf/l7tel-%d-%s" % (PID, mode)
    log = open(os.path.join(TMP, "l7run-%s.log" % mode), "w")
    echo = os.path.join(SRC, "tests", "mesh", "echo.py")
    b = procs.start([sys.executable, echo, "B", str(pb)], cgroup=CG if mode == "mesh" else None,
                    stdout=subprocess.DEVNULL, stderr=log)
    procs.wait_port(pb, 10)
    try:
        with procs.serving(mode, L7RUN, obj, svc, [([sys.executable, echo, "A", str(pa)], pa)], log, CG, pin,
                           extra=("--metrics-listen", "127.0.0.1:%d" % mport)) as l7:
            if mode == "mesh":
                time.sleep(0.3)   # b's pool fills too
            for path, want in (("/a/1", 200), ("/b/1", 200), ("/admin/x", 403), ("/a/2", 200)):
                st = request(svc, path)[0]
                check(st == want, "%s %s: %d, expected %d" % (mode, path, st, want))
            for name, fn in (("counters", lambda: t_counters(mode, pin, svc)),
                             ("exposition", lambda: t_exposition(pin, obj, mport)),
                             ("upstream_down", lambda: t_upstream_down(mode, svc, pb, b, mport, log))):
                t = time.time()
                try:
                    got = fn()
                    b = got or b
                    print("PASS %-8s %-14s %.2fs" % (mode, name, time.time() - t), flush=True)
                except Exception as e:  # noqa: BLE001 - report every check
                    failures.append((mode, name))
                    print("FAIL %-8s %-14s %s" % (mode, name, e), flush=True)
            procs.stop(l7, signal.SIGTERM)
            check(l7.returncode == 0, "l7run %s exit %s" % (mode, l7.returncode))
    finally:
        procs.stop(b)
        log.close()
        if any(m == mode for m, _ in failures):
            sys.stdout.write(open(log.name).read()[-3000:])
    check(not os.path.exists(pin), "pins left in " + pin)


def main():
    if os.geteuid() != 0:
        print("FAIL: needs root")
        return 1
    os.mkdir(CG)

    def obj_for(svc, pa, pb):
        src = os.path.join(TMP, "tel-%d.l7" % svc)
        with open(src, "w") as f:
            f.write(source(svc, pa, pb))
        obj = src[:-3] + ".o"
        subprocess.run([L7C, src, "-o", obj], check=True, timeout=60)
        return obj
    try:
        for mode in ("gateway", "mesh"):
            try:
                run(mode, obj_for)
            except Exception as e:  # noqa: BLE001
                failures.append((mode, "run"))
                print("FAIL %-8s %s" % (mode, e), flush=True)
    finally:
        procs.stop_all()
        check(procs.cgroup_remove(CG), "cgroup %s removed" % CG)
        subprocess.run(["rm", "-rf", TMP])
    print("%d failed" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
