#!/usr/bin/python3
"""Gateway send-path candidates, measured in one run as ratios (issue #17 item 1; a benchmark,
not a test). Every configuration runs at once on its own port; wrk visits them in an order that
rotates every round, at 1, 8 and 64 connections, a few seconds a point:

  direct      wrk straight to the backend (the bound)
  haproxy     HAProxy 2.6, nbthread = CPUs, the gateway test policy's rules
  l7run       today's gateway (tests/runtime/gw_test.l7): sk_skb redirects both ways, sent by
              the psock backlog kworker
  l7run-wmem  the same with tcp_wmem/tcp_rmem raised 16x in this namespace while it runs (the
              backlog re-schedules itself one jiffy later when its send gets -EAGAIN)
  sp-MODE     bench/sendpath/sp.c, a one-thread prototype per candidate send path (its header
              says what each MODE does); no policy runs in it

CPU per request as bench/perf.py counts it: proc (the proxy's threads) + BPF (bpf_stats) +
softirq+ and kworker+ (the machine's softirq, all kworkers' time, minus the direct run's of the
same round and connection count). Run it inside a network namespace of your own:

  nsenter --net=/run/netns/NS bench/sendpath.py --build build [--secs 3] [--rounds 2] [--json F]
"""
import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import perf  # noqa: E402  (task_ns, kworker_ns, machine, parse_wrk, bpf_progs, start, stop)

MODES = ["copy", "splice", "passcopy", "msgcopy", "msgsplice", "msgskb", "msgpass", "skb"]
CONFIGS = ["direct", "haproxy", "l7run", "l7run-wmem"] + ["sp-" + m for m in MODES]
PATH = "/a/bench"
WMEM = ("net.ipv4.tcp_wmem", "net.ipv4.tcp_rmem")


def sysctl(name, value=None):
    if value is None:
        return perf.sh(["sysctl", "-n", name]).strip()
    perf.sh(["sysctl", "-q", "-w", "%s=%s" % (name, value)])


def prog_ids_stats(ids):
    out = {}
    for i in ids:
        try:
            p = json.loads(perf.sh(["bpftool", "-j", "prog", "show", "id", str(i)]))
            out[p.get("name", str(i))] = (p.get("run_cnt", 0), p.get("run_time_ns", 0))
        except (subprocess.CalledProcessError, ValueError):
            pass
    return out


def sp_counts(ids):
    """sp's counters (map sp_count): msg runs, msg redirects, msg bytes, skb runs, skb redirects."""
    try:
        p = json.loads(perf.sh(["bpftool", "-j", "prog", "show", "id", str(ids[0])]))
        for m in p.get("map_ids", []):
            info = json.loads(perf.sh(["bpftool", "-j", "map", "show", "id", str(m)]))
            if info.get("name") == "sp_count":
                d = json.loads(perf.sh(["bpftool", "-j", "map", "dump", "id", str(m)]))
                d = [e.get("formatted", e) for e in d]      # -j gives raw bytes and the BTF form
                return [sum(int(v["value"]) for v in e["values"]) for e in sorted(d, key=lambda e: e["key"])]
    except (subprocess.CalledProcessError, ValueError, KeyError):
        pass
    return [0] * 5


class Cfg:
    def __init__(self, kind, port):
        self.kind, self.port, self.p, self.ids, self.pin = kind, port, None, [], None

    def pids(self):
        return [self.p.pid] if self.p else []

    def bpf(self):
        if self.pin:
            return perf.bpf_progs(self.pin, None)
        return prog_ids_stats(self.ids)


def start_all(args, tmp, backend):
    cfgs, port = {}, perf.BASE + 3
    obj = os.path.join(tmp, "gw.o")
    subprocess.run([os.path.join(args.build, "driver/l7c"), os.path.join(REPO, "tests/runtime/gw_test.l7"),
                    "-o", obj], check=True)
    spbin, spobj = os.path.join(tmp, "sp"), os.path.join(tmp, "sp.bpf.o")
    subprocess.run(["cc", "-O2", "-Wall", "-Wextra", "-o", spbin, os.path.join(HERE, "sendpath/sp.c"), "-lbpf"],
                   check=True)
    subprocess.run(["clang-19", "-target", "bpf", "-mcpu=v3", "-O2", "-g", "-I/usr/include/x86_64-linux-gnu",
                    "-c", os.path.join(HERE, "sendpath/sp.bpf.c"), "-o", spobj], check=True)
    saved = {k: sysctl(k) for k in WMEM} if "l7run-wmem" in CONFIGS else {}
    for kind in CONFIGS:
        c = Cfg(kind, backend if kind == "direct" else port)
        port += 1
        cfgs[kind] = c
        if kind == "direct":
            continue
        if kind == "haproxy":
            conf = os.path.join(tmp, "haproxy.cfg")
            with open(conf, "w") as f:
                f.write(perf.haproxy_conf({"haproxy": HAPROXY_RULES}, c.port, {"u0": backend, "u1": backend,
                                                                                 "u2": backend}))
            c.p = perf.start(["haproxy", "-db", "-f", conf], kind, os.path.join(tmp, kind + ".log"))
        elif kind.startswith("l7run"):
            c.pin = "/sys/fs/bpf/l7sendpath-%d-%d" % (os.getpid(), c.port)
            if kind == "l7run-wmem":
                big(saved)
            c.p = perf.start([os.path.join(args.build, "runtime/l7run"), "--bpf-stats", "--pin", c.pin,
                              "--listen", "127.0.0.1:%d" % c.port, "--upstream", "0=127.0.0.1:%d" % backend,
                              "--upstream", "1=127.0.0.1:%d" % backend, obj], kind, os.path.join(tmp, kind + ".log"))
        else:
            mode = kind[3:]
            out = os.path.join(tmp, kind + ".out")
            with open(out, "w") as o:
                c.p = subprocess.Popen([spbin, mode, str(c.port), str(backend), spobj], stdout=o,
                                       stderr=open(os.path.join(tmp, kind + ".log"), "w"))
            perf.procs.append((c.p, kind))
            for _ in range(100):
                with open(out) as o:
                    w = o.read().split()
                if w[:1] == ["ready"]:
                    c.ids = [int(x) for x in w[1:]]
                    break
                time.sleep(0.05)
        if not perf.wait_port(c.port):
            sys.exit("%s did not listen: %s" % (kind, perf.tail(os.path.join(tmp, kind + ".log"))))
        if kind == "l7run-wmem":
            warm(c)        # its pool sockets are made with the big buffers
            restore(saved)
    return cfgs, saved


def big(saved):
    for k in WMEM:
        lo, mid, hi = saved[k].split()
        sysctl(k, "%s %d %d" % (lo, int(mid) * 16, int(hi) * 16))


def restore(saved):
    for k, v in saved.items():
        sysctl(k, v)


def warm(c):
    subprocess.run(["timeout", "10", "wrk", "-t2", "-c64", "-d1s", "http://127.0.0.1:%d%s" % (c.port, PATH)],
                   capture_output=True)


# the gateway test policy's rules, in bench/perf.py's HAProxy configuration
HAPROXY_RULES = """  http-request deny deny_status 403 if { path_beg /deny }
  http-request set-header x-l7 yes if { path_beg /a } or { path_beg /b }
  use_backend u0 if { path_beg /a }
  use_backend u1 if { path_beg /b }"""


def measure(c, conns, secs, saved):
    if c.kind == "l7run-wmem":
        big(saved)
    c0, k0, w0, (b0, s0), q0 = c.bpf(), perf.task_ns(c.pids()), perf.kworker_ns(), perf.machine(), perf.kworker_ns(2)
    x0 = sp_counts(c.ids) if c.ids else None
    argv = ["timeout", str(secs + 15), "wrk", "-t%d" % min(2, conns), "-c%d" % conns, "-d%ds" % secs,
            "--latency", "http://127.0.0.1:%d%s" % (c.port, PATH)]
    r = perf.parse_wrk(subprocess.run(argv, capture_output=True, text=True).stdout)
    b1, s1 = perf.machine()
    q1, w1, k1, c1 = perf.kworker_ns(2), perf.kworker_ns(), perf.task_ns(c.pids()), c.bpf()
    if c.kind == "l7run-wmem":
        restore(saved)
    n = max(r["reqs"], 1)
    r["proc_us"] = (k1 - k0) / 1e3 / n
    r["bpf_us"] = sum(v[1] - c0.get(k, (0, 0))[1] for k, v in c1.items()) / 1e3 / n
    r["busy_us"] = (b1 - b0) / perf.HZ * 1e6 / n
    r["sirq_us"] = (s1 - s0) / perf.HZ * 1e6 / n
    r["kw_us"] = perf.kworker_delta(w0, w1) / 1e3 / n
    r["kw_runs"] = perf.kworker_delta(q0, q1) / n
    if x0:
        x1 = sp_counts(c.ids)
        r["per_req"] = [(b - a) / n for a, b in zip(x0, x1)]
    return r


def sanity(c):
    """Two keep-alive requests on one connection, each answered by the backend."""
    try:
        s = socket.create_connection(("127.0.0.1", c.port), 3)
        s.settimeout(3)
        got = b""
        for _ in range(2):
            s.sendall(b"GET %s HTTP/1.1\r\nHost: bench\r\n\r\n" % PATH.encode())
            while got.count(b"hello from nginx") < _ + 1:
                b = s.recv(65536)
                if not b:
                    return False, got[:200]
                got += b
        s.close()
        return got.startswith(b"HTTP/1.1 200"), got[:80]
    except OSError as e:
        return False, str(e)


def summarize(rows):
    """{conns: {kind: medians}} with softirq+/kworker+ against direct's run of the same round."""
    out = {}
    for conns, runs in rows.items():
        d = runs["direct"]
        o = out[conns] = {}
        for kind, rs in runs.items():
            med = lambda f: statistics.median(f(r, b) for r, b in zip(rs, d))
            s = {k: med(lambda r, b, k=k: r[k]) for k in ("rps", "p50", "p99", "proc_us", "bpf_us")}
            s["sirq_plus"] = med(lambda r, b: r["sirq_us"] - b["sirq_us"])
            s["kw_plus"] = med(lambda r, b: r["kw_us"] - b["kw_us"])
            s["kw_runs_plus"] = med(lambda r, b: r["kw_runs"] - b["kw_runs"])
            s["busy_plus"] = med(lambda r, b: r["busy_us"] - b["busy_us"])
            s["errors"] = sum(r["errors"] + r["non2xx"] for r in rs)
            s["component_us"] = 0.0 if kind == "direct" else \
                s["proc_us"] + s["bpf_us"] + max(s["sirq_plus"], 0) + max(s["kw_plus"], 0)
            if rs[0].get("per_req"):
                s["per_req"] = [statistics.median(r["per_req"][i] for r in rs) for i in range(5)]
            o[kind] = s
    return out


# per request, what each prototype's programs must do (sp_count: msg runs, msg redirects, msg
# bytes, skb runs, skb redirects): index -> count
EXPECT = {"sp-passcopy": {3: 1, 4: 0}, "sp-msgcopy": {1: 1, 4: 0},
          "sp-msgsplice": {1: 1, 4: 0},   # splice's MSG_SPLICE_PAGES sends run SK_MSG
          "sp-msgskb": {1: 1, 4: 1}, "sp-msgpass": {0: 1, 1: 0, 4: 1}, "sp-skb": {1: 0, 4: 2}}


def check(summary):
    bad = []
    for conns, o in summary.items():
        for kind, v in o.items():
            if v["errors"] or v["rps"] <= 0:
                bad.append("%s at %d connections: %.0f req/s, %d errors" % (kind, conns, v["rps"], v["errors"]))
            for i, want in EXPECT.get(kind, {}).items():
                got = v.get("per_req", [0] * 5)[i]
                if abs(got - want) > 0.05:
                    bad.append("%s at %d connections: counter %d is %.2f a request, not %d" % (kind, conns, i, got, want))
    return bad


def dropprobe(spbin, spobj):
    """An SK_MSG that passes the first n bytes of a 30-byte write (n = 0: none) and would drop the
    rest and the next write (what a deny in a write that held earlier requests would do), then
    passes again. With SK_DROP: the peer gets exactly n, send's count is n (the dropping run sets
    its apply_bytes; a write dropped whole fails with EACCES), and every later write fails with
    EACCES without the program running: a drop poisons the socket (tcp_bpf_send_verdict returns
    before it resets psock->eval). Redirecting those bytes into a discard socket's receive queue
    instead (BPF_F_INGRESS) keeps the socket whole: every write is sent in full count, the peer
    gets exactly the passed bytes and the last write, the discard socket the rest, and the
    program runs on each write (docs/architecture.md)."""
    bad = []
    for how in ("drop", "discard"):
        for n in (0, 1, 10, 29):
            out = subprocess.run([spbin, "dropprobe", spobj, str(n), how], capture_output=True, text=True).stdout.split()
            kv = dict(w.split("=", 1) for w in out if "=" in w)
            print("dropprobe %s pass %d: %s" % (how, n, " ".join(w for w in out if "=" in w)))
            if how == "drop":
                want = {"send": str(n) if n else "-1", "then": "-1", "after": "-1", "received": str(n),
                        "discarded": "0", "msg_runs": "2" if n else "1"}
            else:
                want = {"send": "30", "then": "4", "after": "4", "received": str(n + 4), "intact": "1",
                        "discarded": str(30 - n + 4)}
            if any(kv.get(k) != v for k, v in want.items()):
                bad.append("dropprobe %s pass %d: %s (want %s)" % (how, n, " ".join(out), want))
    return bad


def fullprobe(spbin, spobj):
    """l7run's write into pool socket P0 whose SK_MSG redirects it egress out of pool socket P1,
    P1's peer not reading (sp-msgskb's request path when an upstream is slow), or passes it on P0,
    P0's peer not reading (sp-msgpass): send's count is exactly what the peer gets, in order,
    nothing elsewhere; but the program judged every byte of the write, the ones send did not
    take too (msg bytes > sent: a write of 1000 bytes that fails with EAGAIN after a redirect,
    the rest of a long one on both paths). So a request the program decided may be sent only
    in part, and what l7run writes again is not a new request (docs/architecture.md)."""
    bad = []
    for how, size in (("nonblock", 1000), ("nonblock", 16384), ("block", 100000), ("pass", 16384)):
        out = subprocess.run([spbin, "fullprobe", spobj, how, str(size)], capture_output=True, text=True).stdout.split()
        kv = dict(w.split("=", 1) for w in out if "=" in w)
        print("fullprobe %s %d: %s" % (how, size, " ".join(w for w in out if "=" in w)))
        try:
            sent, got, seen = int(kv["sent"]), int(kv["received"]), int(kv["msg_bytes"])
        except (KeyError, ValueError):
            bad.append("fullprobe %s %d: %s" % (how, size, " ".join(out)))
            continue
        if not 0 < sent == got or kv.get("intact") != "1" or kv.get("astray") != "0" or seen <= sent:
            bad.append("fullprobe %s %d: %s" % (how, size, " ".join(out)))
    return bad


def spanprobe(spbin, spobj):
    """Framing by apply_bytes across writes (the gateway's request side, docs/architecture.md):
    writes "AAAAAAbbbb", "bbbbbbCCCCdd", "ddEE" into P0 whose SK_MSG passes each request with
    apply_bytes = its length (16, 8, 2), or redirects requests 1 and 3 egress out of P1. The
    kernel runs the program again exactly where a request starts, also inside a write, with the
    message starting there: at A (10 bytes), C (the 6 after the body's rest) and E (2 after the
    2 the second verdict still covered); the bytes a verdict covers in later writes go where it
    sent their request's start."""
    bad = []
    runs = {"runs": "3", "run0": "A:10", "run1": "C:6", "run2": "E:2", "sent": "26"}
    for how, p0, p1 in (("pass", "AAAAAAbbbbbbbbbbCCCCddddEE", "-"), ("redirect", "CCCCdddd", "AAAAAAbbbbbbbbbbEE")):
        out = subprocess.run([spbin, "spanprobe", spobj, how], capture_output=True, text=True).stdout.split()
        kv = dict(w.split("=", 1) for w in out if "=" in w)
        print("spanprobe %s: %s" % (how, " ".join(w for w in out if "=" in w)))
        want = dict(runs, p0=p0, p1=p1)
        if any(kv.get(k) != v for k, v in want.items()):
            bad.append("spanprobe %s: %s (want %s)" % (how, " ".join(out), want))
    return bad


def table(summary):
    lines = []
    for conns, o in summary.items():
        h, dr = o["haproxy"], o["direct"]
        lines.append("\n%d connection%s (wrk -t%d -c%d)\n" % (conns, "s" if conns > 1 else "", min(2, conns), conns))
        lines.append("| config | req/s | ÷ HAProxy | ÷ direct | p50 ms | p99 ms | proc | BPF | softirq+ | kworker+ "
                     "| kworker runs+ | µs/req | ÷ HAProxy |")
        lines.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for kind in CONFIGS:
            s = o[kind]
            lines.append("| %s | %.0f | %.2f | %.2f | %.3f | %.3f | %.1f | %.1f | %.1f | %.1f | %.2f | %.1f | %s |%s" % (
                kind, s["rps"], s["rps"] / max(h["rps"], 1), s["rps"] / max(dr["rps"], 1), s["p50"], s["p99"],
                s["proc_us"], s["bpf_us"], s["sirq_plus"], s["kw_plus"], s["kw_runs_plus"], s["component_us"],
                "%.2f" % (s["component_us"] / h["component_us"]) if kind != "direct" and h["component_us"] > 0 else "–",
                " errors %d" % s["errors"] if s["errors"] else ""))
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", required=True)
    ap.add_argument("--secs", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--conns", default="1,8,64")
    ap.add_argument("--only", default="", help="comma-separated configs (direct and haproxy always run)")
    ap.add_argument("--body", type=int, default=0, help="response body of this many bytes (default: 17)")
    ap.add_argument("--json")
    ap.add_argument("--check", action="store_true",
                    help="exit 1 unless every configuration answered without errors and each prototype's programs "
                         "ran as its path says (the ctest kernel.sendpath_check)")
    args = ap.parse_args()
    if args.only:
        keep = set(args.only.split(",")) | {"direct", "haproxy"}
        CONFIGS[:] = [k for k in CONFIGS if k in keep]
    tmp = tempfile.mkdtemp(prefix="l7sendpath.")
    saved, cfgs = None, {}
    try:
        backend = perf.BASE + 1
        with open(os.path.join(tmp, "nginx.conf"), "w") as f:
            f.write("""daemon off; worker_processes 1; pid %(t)s/nginx.pid; error_log %(t)s/nginx.err;
events { worker_connections 4096; }
http { access_log off; keepalive_requests 1000000; keepalive_timeout 60s;
  server { listen 127.0.0.1:%(p)d; location / { %(loc)s } } }
""" % {"t": tmp, "p": backend, "loc": 'return 200 "hello from nginx\\n";' if not args.body else "root %s/www;" % tmp})
        if args.body:   # a file of that many bytes at PATH, readable by nginx's worker user
            os.chmod(tmp, 0o755)
            os.makedirs(os.path.join(tmp, "www", os.path.dirname(PATH[1:])), 0o755)
            with open(os.path.join(tmp, "www", PATH[1:]), "w") as f:
                f.write(("hello from nginx\n" + "x" * args.body)[:max(args.body, 17)])
        perf.start(["nginx", "-c", os.path.join(tmp, "nginx.conf")], "nginx")
        perf.wait_port(backend)
        cfgs, saved = start_all(args, tmp, backend)
        for c in cfgs.values():
            ok, why = sanity(c)
            if not ok:
                sys.exit("%s fails its sanity check: %s" % (c.kind, why))
            if c.kind != "l7run-wmem":
                warm(c)
        conns = [int(x) for x in args.conns.split(",")]
        rows = {n: {k: [] for k in CONFIGS} for n in conns}
        t0 = time.time()
        for rnd in range(args.rounds):
            for n in conns:
                order = CONFIGS[rnd % len(CONFIGS):] + CONFIGS[:rnd % len(CONFIGS)]
                for kind in order:
                    rows[n][kind].append(measure(cfgs[kind], n, args.secs, saved))
            print("round %d done (%.0f s)" % (rnd + 1, time.time() - t0), file=sys.stderr)
        s = summarize(rows)
        print("%s, %d rounds x %d s, load %s" % (time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), args.rounds,
                                                 args.secs, open("/proc/loadavg").read().split()[:3]))
        print(table(s))
        for n, o in s.items():
            for kind, v in o.items():
                if v.get("per_req"):
                    print("%s c%d per request: msg runs %.2f, msg redirects %.2f, msg bytes %.0f, skb runs %.2f, "
                          "skb redirects %.2f" % ((kind, n) + tuple(v["per_req"])))
        if args.check:
            spbin, spobj = os.path.join(tmp, "sp"), os.path.join(tmp, "sp.bpf.o")
            bad = check(s) + dropprobe(spbin, spobj) + fullprobe(spbin, spobj) + spanprobe(spbin, spobj)
            for b in bad:
                print("check: " + b, file=sys.stderr)
            if bad:
                sys.exit(1)
            print("check ok")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"when": time.time(), "summary": s, "rows": rows}, f, indent=1)
    finally:
        if saved:
            restore(saved)
        for p, _ in list(perf.procs):
            perf.stop(p)
        for c in cfgs.values():
            if c.pin:
                shutil.rmtree(c.pin, ignore_errors=True)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
