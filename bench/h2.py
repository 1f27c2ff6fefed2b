#!/usr/bin/python3
"""HTTP/2 and gRPC through l7c mesh mode, HAProxy and nginx (issue 14; not a test).

One policy, enforced the same way by each: h2c GETs routed by path (/a/ to nghttpd a, the rest
to nghttpd b, /admin denied 403), gRPC unary calls routed by service (l7.bench.Echo to grpcio
server g1, l7.bench.Other to g2) and the method Forbidden denied (PERMISSION_DENIED). Modes:
  direct   the client straight to the backend (nghttpd a / g1): the bound
  l7c      l7run --mesh --h2c a,b,g1,g2: every stream decided in the kernel, frames through l7run
  haproxy  HAProxy 2.6: `bind ... proto h2`, `server ... proto h2`, http-request rules
  nginx    nginx 1.22: `listen ... http2`, grpc_pass to every upstream (nghttpd included: h2c
           end to end, as for the others), locations for the routes, `return 403` for the denies
Points: h2load -c 1/8/64/128 -m M over /a/x and /b/y (alternating per stream), and a gRPC unary
load loop (bench/h2_grpc.py: P processes, one channel and one call in flight each, alternating
the two services). h2load runs with its default settings: its 2nd..Mth streams of a connection go
out before l7run's SETTINGS arrive and refer to HPACK's dynamic table, which the kernel now
tracks (docs/architecture.md). H2_TABLE0=1 adds --encoder-header-table-size=0, as the first
published run used, when the kernel refused those streams.

Per point and mode: answered requests/s (2xx responses, or calls that returned OK, per
second; the others are counted as non-2xx), p50/p99 latency over all (h2load's --log-file, the
loop's own clock), and the CPU per request of the enforcing component: l7run's
threads (schedstat) plus the run time of its BPF programs (l7run --bpf-stats: run_time_ns), HAProxy's
process, nginx's master and workers. Ratios to HAProxy and nginx from the same run.

Bounded: ROUNDS x 4 modes x 5 points x DUR seconds (default 3 x 3 s: about 4 minutes with the
start-ups); modes alternate within each round (the order rotating), medians over rounds.
Loopback only; ports derive from our pid; every process started here is ended by its pid; the
cgroup and pins are removed at exit. Needs root (mesh mode).

usage: bench/h2.py [BUILD_DIR]   (env: ROUNDS=3 DUR=3 STREAMS=10 GRPC_PROCS=4 H2_TABLE0=0 H2_MUT=0)"""
import atexit
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "common"))
from perf import NCPU, bpf_progs, children, task_ns, wait_port  # noqa: E402
import procs  # noqa: E402  (started processes ended by pid, the cgroup's join and removal)

B = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(HERE), "build")
L7C, L7RUN = os.path.join(B, "driver", "l7c"), os.path.join(B, "runtime", "l7run")
ROUNDS, DUR = int(os.environ.get("ROUNDS", "3")), float(os.environ.get("DUR", "3"))
STREAMS, GPROCS = int(os.environ.get("STREAMS", "10")), int(os.environ.get("GRPC_PROCS", "4"))
TABLE0 = os.environ.get("H2_TABLE0") == "1"   # h2load without the dynamic table (the first published run)
PY = "/usr/bin/python3"   # Debian's, where python3-grpcio is
PID = os.getpid()
BASE = 29000 + (PID % 150) * 10   # below the ephemeral range; bench/mesh.sh uses 28xxx
SVC, PH, PN, PA, PB, PG1, PG2 = (BASE + i for i in range(7))
CG = "/sys/fs/cgroup/unified/l7h2bench-%d" % PID
PIN = "/sys/fs/bpf/l7h2bench-%d" % PID
T = tempfile.mkdtemp(prefix="l7h2bench-")
MODES = ["direct", "l7c", "haproxy", "nginx"]
# H2_MUT=1: l7c against l7c-mut, the same policy plus one that edits every stream's request and
# response headers (l7run re-encodes each block): what header mutations on HTTP/2 cost
if os.environ.get("H2_MUT") == "1":
    MODES = ["l7c", "l7c-mut"]
POINTS = [("h2 c1", 1), ("h2 c8", 8), ("h2 c64", 64), ("h2 c128", 128), ("grpc", None)]
CALLS = "/l7.bench.Echo/Unary,/l7.bench.Other/Unary"


def start(argv, name, in_cg=False, out=None):
    err = open(os.path.join(T, name + ".err"), "a")
    return procs.start(argv, cgroup=CG if in_cg else None, stdout=out or subprocess.DEVNULL, stderr=err)


stop = procs.stop


def client(argv, timeout):
    """A client in the cgroup (mesh mode serves only clients there; the others do not care)."""
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                          preexec_fn=lambda: procs.cgroup_join(CG))


def cleanup():
    procs.stop_all()
    procs.cgroup_remove(CG)
    shutil.rmtree(PIN, ignore_errors=True)
    shutil.rmtree(T, ignore_errors=True)


POLICY = """import "http.l7i";
service front = 127.0.0.1:%(svc)d;
upstream a = 127.0.0.1:%(a)d;
upstream b = 127.0.0.1:%(b)d;
upstream g1 = 127.0.0.1:%(g1)d;
upstream g2 = 127.0.0.1:%(g2)d;
policy h2bench (act (HttpRequest request) context ('.*->front')) {
  [Ingress]
  if (starts_with(request.path, "/admin")) {
    Deny(request, 403);
  } else if (request.grpc_method == "Forbidden") {
    DenyGrpc(request, 403, PERMISSION_DENIED);
  } else if (request.grpc_service == "l7.bench.Other") {
    Route(request, g2);
  } else if (request.grpc_service == "l7.bench.Echo") {
    Route(request, g1);
  } else if (starts_with(request.path, "/a/")) {
    Route(request, a);
  } else {
    Route(request, b);
  }
}
"""

MUTATE = """
policy h2mut (act (HttpRequest request) act (HttpResponse response) context ('.*->front')) {
  [Ingress]
  RemoveHeader(request, "user-agent");
  SetHeader(request, "x-forwarded-proto", "h2c");
  AddHeader(request, "x-tag", "bench");
  RemoveHeader(response, "server");
  SetHeader(response, "x-content-type-options", "nosniff");
}
"""

HAPROXY = """global
  nbthread %(n)d
defaults
  mode http
  timeout connect 5s
  timeout client 60s
  timeout server 60s
frontend f
  bind 127.0.0.1:%(ph)d proto h2
  http-request deny deny_status 403 if { path_beg /admin }
  http-request deny deny_status 403 if { path_end /Forbidden }
  use_backend g2 if { path_beg /l7.bench.Other/ }
  use_backend g1 if { path_beg /l7.bench.Echo/ }
  use_backend a if { path_beg /a/ }
  default_backend b
backend a
  server s 127.0.0.1:%(a)d proto h2
backend b
  server s 127.0.0.1:%(b)d proto h2
backend g1
  server s 127.0.0.1:%(g1)d proto h2
backend g2
  server s 127.0.0.1:%(g2)d proto h2
"""

NGINX = """daemon off; worker_processes %(n)d; pid %(t)s/nginx.pid; error_log %(t)s/nginx.err;
events { worker_connections 8192; }
http { access_log off; keepalive_requests 100000000; keepalive_timeout 300s;
  upstream a { server 127.0.0.1:%(a)d; keepalive 128; }
  upstream b { server 127.0.0.1:%(b)d; keepalive 128; }
  upstream g1 { server 127.0.0.1:%(g1)d; keepalive 128; }
  upstream g2 { server 127.0.0.1:%(g2)d; keepalive 128; }
  server { listen 127.0.0.1:%(pn)d http2;
    location /admin { return 403; }
    location ~ /Forbidden$ { return 403; }
    location /l7.bench.Other/ { grpc_pass grpc://g2; }
    location /l7.bench.Echo/ { grpc_pass grpc://g1; }
    location /a/ { grpc_pass grpc://a; }
    location / { grpc_pass grpc://b; } } }
"""

ARGS = dict(svc=SVC, ph=PH, pn=PN, a=PA, b=PB, g1=PG1, g2=PG2, n=NCPU, t=T)


class Mode:
    """One enforcing component: started for one round's points, then stopped."""

    def __init__(self, kind):
        self.kind, self.p, self.bpf = kind, None, None
        self.h2port = {"direct": PA, "l7c": SVC, "l7c-mut": SVC, "haproxy": PH, "nginx": PN}[kind]
        self.gport = {"direct": PG1}.get(kind, self.h2port)

    def pids(self):
        if not self.p:
            return []
        return [self.p.pid] + (children(self.p.pid) if self.kind == "nginx" else [])

    def start(self):
        if self.kind.startswith("l7c"):
            self.p = start([L7RUN, "--mesh", "--cgroup", CG, "--pool", "64", "--h2c", "a,b,g1,g2",
                            "--bpf-stats", "--pin", PIN, os.path.join(T, self.kind.replace("l7c", "h2bench") + ".o")], "l7run")
            self.bpf = (PIN, "l7_mesh_socks")
        elif self.kind == "haproxy":
            self.p = start(["haproxy", "-db", "-f", os.path.join(T, "haproxy.cfg")], "haproxy")
        elif self.kind == "nginx":
            self.p = start(["nginx", "-c", os.path.join(T, "nginx.conf"), "-e", os.path.join(T, "nginx.err")], "nginx")
        if not wait_port(self.h2port, 20):
            raise RuntimeError("%s did not listen: %s" % (self.kind, open(os.path.join(T, self.kind + ".err")).read()[-500:]
                                                          if os.path.exists(os.path.join(T, self.kind + ".err")) else ""))
        if self.kind.startswith("l7c"):
            for _ in range(50):   # the pool is open once the map is pinned
                if os.path.exists(os.path.join(PIN, "l7_mesh_socks")):
                    break
                time.sleep(0.05)
            time.sleep(0.3)

    def stop(self):
        if self.p:
            stop(self.p)
            self.p = None
        shutil.rmtree(PIN, ignore_errors=True)

    def cost(self):
        """(on-CPU ns of the component's threads, run_time_ns of its BPF programs)"""
        progs = bpf_progs(*self.bpf) if self.bpf else {}
        return task_ns(self.pids()), sum(v[1] for v in progs.values())

    def sanity(self):
        """The policy is enforced: routes by path and by gRPC service, and both denies."""
        prox = self.kind != "direct"
        out = []
        for path, want in (("/a/x", "a 200 2"), ("/b/y", ("b" if prox else "a") + " 200 2"),
                           ("/admin/z", "403 2" if prox else "404 2")):
            r = client(["curl", "-s", "-m", "5", "--http2-prior-knowledge", "-w", " %{http_code} %{http_version}",
                        "http://127.0.0.1:%d%s" % (self.h2port, path)], 10).stdout.split()
            got = " ".join(r[:1] + r[-2:]) if want.endswith("200 2") else " ".join(r[-2:])
            if got != want:
                out.append("%s: %r (wanted %s)" % (path, r, want))
        for c, want in (("/l7.bench.Echo/Unary", "OK g1:x"),
                        ("/l7.bench.Other/Unary", "OK g2:x" if prox else "OK g1:x"),
                        ("/l7.bench.Echo/Forbidden", "PERMISSION_DENIED" if prox else "OK g1:x")):
            r = client([PY, os.path.join(HERE, "h2_grpc.py"), "call", str(self.gport), c], 20).stdout.strip()
            if not r.startswith(want):
                out.append("%s: %r (wanted %s)" % (c, r, want))
        return out


def pct(xs, f):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(f * len(xs)))] if xs else 0


def h2load(port, conns):
    logf = os.path.join(T, "h2load.log")
    if os.path.exists(logf):
        os.unlink(logf)
    r = client(["h2load", "-c", str(conns), "-m", str(STREAMS), "-t", "1", "-D", "%dms" % (DUR * 1000), "--warm-up-time", "500ms",
                *(["--encoder-header-table-size=0"] if TABLE0 else []), "--log-file", logf,
                "http://127.0.0.1:%d/a/x" % port, "http://127.0.0.1:%d/b/y" % port], DUR + 60)
    if not os.path.exists(logf):
        raise RuntimeError("h2load -c %d: %s %s" % (conns, r.stdout[-300:], r.stderr[-300:]))
    lat, codes = [], {}
    with open(logf) as f:
        for line in f:
            w = line.split()
            if len(w) >= 3:
                lat.append(int(w[2]))
                if not w[1].startswith("2"):
                    codes[w[1]] = codes.get(w[1], 0) + 1
    n, bad = len(lat), sum(codes.values())
    return {"reqs": n, "rps": (n - bad) / DUR, "p50": pct(lat, 0.5), "p99": pct(lat, 0.99), "bad": bad,
            "out": json.dumps(codes)}


def grpc_load(port):
    r = client([PY, os.path.join(HERE, "h2_grpc.py"), "load", str(port), str(GPROCS), str(DUR), CALLS], DUR + 60)
    j = json.loads(r.stdout.strip().split("\n")[-1])
    return {"reqs": j["calls"], "rps": j["ok"] / DUR, "p50": j["lat_us"][0], "p99": j["lat_us"][1],
            "bad": j["calls"] - j["ok"], "out": json.dumps(j["codes"])}


def measure(m, point, conns):
    k0, b0 = m.cost()
    r = h2load(m.h2port, conns) if conns else grpc_load(m.gport)
    k1, b1 = m.cost()
    n = max(r["reqs"], 1)
    r["proc_us"] = (k1 - k0) / 1e3 / n   # per request sent, answered or not
    r["bpf_us"] = (b1 - b0) / 1e3 / n
    r["cpu_us"] = r["proc_us"] + r["bpf_us"]
    return r


def main():
    if os.geteuid() != 0:
        sys.exit("bench/h2.py: needs root (mesh mode)")
    atexit.register(cleanup)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    os.mkdir(CG)
    for w in ("a", "b"):   # each nghttpd serves both paths, its body naming it (the route shows)
        for p in ("a/x", "b/y"):
            os.makedirs(os.path.join(T, "docs", w, os.path.dirname(p)), exist_ok=True)
            with open(os.path.join(T, "docs", w, p), "w") as f:
                f.write(w + "\n")
    with open(os.path.join(T, "h2bench.l7"), "w") as f:
        f.write(POLICY % ARGS)
    with open(os.path.join(T, "haproxy.cfg"), "w") as f:
        f.write(HAPROXY % ARGS)
    with open(os.path.join(T, "nginx.conf"), "w") as f:
        f.write(NGINX % ARGS)
    with open(os.path.join(T, "h2bench-mut.l7"), "w") as f:
        f.write(POLICY % ARGS + MUTATE)
    for name in ("h2bench", "h2bench-mut") if "l7c-mut" in MODES else ("h2bench",):
        subprocess.run([L7C, "--mode=mesh", os.path.join(T, name + ".l7"), "-o", os.path.join(T, name + ".o")],
                       check=True, timeout=300)
    # the backends, in the cgroup before l7run starts (its pool connects to them)
    for w, port in (("a", PA), ("b", PB)):
        start(["nghttpd", "--no-tls", "-a", "127.0.0.1", "-d", os.path.join(T, "docs", w), str(port)],
              "nghttpd-" + w, in_cg=True)
    for w, port in (("g1", PG1), ("g2", PG2)):
        start([PY, os.path.join(HERE, "h2_grpc.py"), "server", w, str(port)], w, in_cg=True)
    for port in (PA, PB, PG1, PG2):
        if not wait_port(port, 20):
            raise RuntimeError("backend on %d did not come up" % port)

    load0 = open("/proc/loadavg").read().split()[:3]
    res = {}   # (point, mode) -> [run...]
    failed = {}
    t0 = time.time()
    for rnd in range(ROUNDS):
        order = MODES[rnd % len(MODES):] + MODES[:rnd % len(MODES)]
        print("round %d: %s" % (rnd + 1, " ".join(order)), flush=True)
        for kind in order:
            if kind in failed:
                continue
            m = Mode(kind)
            try:
                m.start()
                bad = m.sanity()
                if bad:
                    failed[kind] = "sanity: " + "; ".join(bad)
                    continue
                for point, conns in POINTS:
                    r = measure(m, point, conns)
                    res.setdefault((point, kind), []).append(r)
                    print("  %-8s %-7s %9.0f req/s  p50 %6d us  p99 %7d us  cpu %6.2f us/req (bpf %.2f)  non-2xx %d %s"
                          % (kind, point, r["rps"], r["p50"], r["p99"], r["cpu_us"], r["bpf_us"], r["bad"],
                             r["out"] if r["bad"] else ""), flush=True)
            except Exception as e:  # noqa: BLE001 - a mode that cannot run is reported, the others go on
                failed[kind] = str(e)[-400:]
            finally:
                m.stop()
    report(res, failed, time.time() - t0)
    print("load average (1, 5, 15 min) at the start %s, at the end %s" % (" ".join(load0),
                                                                        " ".join(open("/proc/loadavg").read().split()[:3])))
    return 1 if failed else 0


def med(runs, key):
    return statistics.median(r[key] for r in runs)


def report(res, failed, secs):
    print("\nmedians over %d rounds of %g s (h2load -m %d%s; gRPC: %d processes), %.0f s:"
          % (ROUNDS, DUR, STREAMS, " --encoder-header-table-size=0" if TABLE0 else "", GPROCS, secs))
    print("| point | mode | req/s | p50 us | p99 us | CPU us/req (process + BPF) | non-2xx |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for point, _ in POINTS:
        for kind in MODES:
            runs = res.get((point, kind))
            if not runs:
                continue
            cpu = "-" if kind == "direct" else "%.2f (%.2f + %.2f)" % (med(runs, "cpu_us"), med(runs, "proc_us"),
                                                                       med(runs, "bpf_us"))
            print("| %s | %s | %.0f | %.0f | %.0f | %s | %d |" % (point, kind, med(runs, "rps"), med(runs, "p50"),
                                                                med(runs, "p99"), cpu, sum(r["bad"] for r in runs)))
    # the ratio in each round (the peers measured minutes apart at most), then the median over
    # rounds: on a machine others load, a round's modes share its load better than medians do
    print("\nl7c mesh mode as a ratio to each peer, the median of the rounds' ratios (req/s: higher is better, "
          "CPU/req: lower is better):")
    print("| point | req/s vs HAProxy | req/s vs nginx | CPU/req vs HAProxy | CPU/req vs nginx |")
    print("|---|---:|---:|---:|---:|")
    for point, _ in POINTS:
        l7 = res.get((point, "l7c"))
        if not l7:
            continue
        cells = []
        for key in ("rps", "cpu_us"):
            for peer in ("haproxy", "nginx"):
                rs = [a[key] / b[key] for a, b in zip(l7, res.get((point, peer), [])) if b[key]]
                cells.append("%.2fx" % statistics.median(rs) if rs else "-")
        print("| %s | %s |" % (point, " | ".join(cells)))
    for kind, why in failed.items():
        print("FAILED %s: %s" % (kind, why))


if __name__ == "__main__":
    sys.exit(main())
