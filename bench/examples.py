#!/usr/bin/env python3
"""What each example policy costs: the verifier's work and the data plane's time per request.

For every examples/*.l7 (or --only NAMES):
  - `l7c --explain --verify --format=json`: per program instructions, estimated and actual
    verifier-processed instructions, stack; and l7c's compile time (wall clock, median of 3);
  - gateway mode (`l7run --bpf-stats`) and mesh mode (`l7run --mesh`, in a cgroup of our own):
    nginx backends on every upstream address, then a bounded number of keep-alive requests
    taken from the example's `// test:` lines that expect 200 (cycled; JWT headers signed as
    tests/examples/run_examples.py does). Data-plane ns per request = the programs' run_time_ns
    delta (BPF run-time statistics) / requests answered, in total and per program.
Prints a Markdown table and writes it (with machine, kernel, commit, load and the command) to
docs/examples-cost.md.

  sudo bench/examples.py [--build DIR] [--only a.l7,b.l7] [--requests N] [--quick]
                         [--out FILE | --out -] [--json FILE] [--deadline SECS] [--no-mesh]

Addresses: each example is compiled a second time from a copy whose service/upstream ports are
replaced by ports derived from our pid (mesh mode takes its addresses from the policy), so runs
never collide with other users of 8080/9xxx. Everything started here is ended by pid; pins and
the cgroup (a unique child of /sys/fs/cgroup/unified) are removed. Loopback only."""
import argparse, ctypes, json, os, platform, re, select, shutil, signal, socket
import statistics, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "common"))
from exampletests import jwt_setup, parse as parse_test, raw_request, token  # noqa: E402
from procs import CG_ROOT, cgroup_join, wait_port  # noqa: E402
from rawhttp import read_chunked  # noqa: E402

PID = os.getpid()
PORTS = (10000, 12000)             # below the tests' 12000+ ranges and the ephemeral range (32768-)
ADDR = re.compile(r"(\d+\.\d+\.\d+\.\d+):(\d+)")


# ---- the client (run as a child: in mesh mode it must live in the cgroup) ----------------------

def read_response(s, buf):
    """One HTTP/1.1 response from socket s (buf: bytes already read). Returns (status, close, rest)."""
    while b"\r\n\r\n" not in buf:
        d = s.recv(65536)
        if not d:
            raise EOFError
        buf += d
    head, _, buf = buf.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    hdr = {}
    for l in lines[1:]:
        k, _, v = l.partition(":")
        hdr[k.strip().lower()] = v.strip().lower()
    close = hdr.get("connection") == "close"
    if "content-length" in hdr:
        n = int(hdr["content-length"])
        while len(buf) < n:
            d = s.recv(65536)
            if not d:
                raise EOFError
            buf += d
        return status, close, buf[n:]
    if hdr.get("transfer-encoding") == "chunked":
        got = read_chunked(s, buf)
        if got is None:
            raise EOFError
        return status, close, got[1]
    if close:   # body until EOF
        while s.recv(65536):
            pass
    return status, True, b""


def client():
    """stdin: one JSON line {host, port, reqs: [{src, raw}], warm, secs}; then 'go N' per round.
    stdout: 'warm' after the warm-up, then per round one JSON line with its statuses."""
    spec = json.loads(sys.stdin.readline())
    reqs = [(r["src"], r["raw"].encode("latin-1")) for r in spec["reqs"]]
    conns = {}
    end = time.time() + spec["secs"]
    sent = 0

    def one(res):
        nonlocal sent
        src, raw = reqs[sent % len(reqs)]
        sent += 1
        c = conns.get(src)
        try:
            if c is None:
                s = socket.socket()
                if src:
                    s.bind((src, 0))
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                s.settimeout(5)
                s.connect((spec["host"], spec["port"]))
                c = conns[src] = [s, b""]
            c[0].sendall(raw)
            status, close, c[1] = read_response(c[0], c[1])
            if close:
                c[0].close()
                del conns[src]
            res["answered"] += 1
            res["statuses"][str(status)] = res["statuses"].get(str(status), 0) + 1
        except (OSError, EOFError, ValueError, IndexError):
            if c:
                c[0].close()
                conns.pop(src, None)
            res["errors"] += 1

    new = lambda: {"statuses": {}, "errors": 0, "answered": 0}
    warm = new()
    for _ in range(spec["warm"]):
        one(warm)
    print("warm", flush=True)
    for line in sys.stdin:
        if not line.startswith("go "):
            break
        res = new()
        for _ in range(int(line.split()[1])):
            if time.time() > end:
                res["stopped_early"] = True
                break
            one(res)
        print(json.dumps(res), flush=True)


# ---- helpers -----------------------------------------------------------------------------------

class Run:
    """Processes, pins and cgroups of one measurement, ended and removed in reverse order."""

    def __init__(self):
        self.procs, self.pins, self.cgroups, self.stats_fd = [], [], [], -1

    def start(self, args, cgroup=None, **kw):
        pre = (lambda: cgroup_join(cgroup)) if cgroup else None
        p = subprocess.Popen(args, preexec_fn=pre, **kw)
        self.procs.append(p)
        return p

    def close(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in reversed(self.procs):
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs.clear()
        for pin in self.pins:
            shutil.rmtree(pin, ignore_errors=True)
        for cg in self.cgroups:
            for _ in range(50):   # a process leaves its cgroup a moment after it was reaped
                try:
                    os.rmdir(cg)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.1)
            else:
                print("examples: could not remove cgroup %s" % cg, file=sys.stderr)
        self.pins.clear()
        self.cgroups.clear()
        if self.stats_fd >= 0:
            os.close(self.stats_fd)
            self.stats_fd = -1


def enable_bpf_stats():
    """BPF_ENABLE_STATS(BPF_STATS_RUN_TIME): run-time statistics while the returned fd is open
    (reference counted by the kernel, unlike writing the kernel.bpf_stats_enabled sysctl)."""
    nr = {"x86_64": 321, "aarch64": 280}.get(platform.machine())
    if nr is None:
        return -1
    libc = ctypes.CDLL(None, use_errno=True)
    attr = ctypes.create_string_buffer(16)   # union bpf_attr { .enable_stats.type = 0 }
    return libc.syscall(nr, 32, attr, 4)


def ok_requests(path, text, ir):
    """The raw requests of the `// test:` lines that expect 200 (first), with their source address."""
    key, iss, aud = jwt_setup(path, text, ir)
    out = []
    for line in re.findall(r"^// test: (.*)$", text, re.M):
        t = parse_test(line)
        if not t or not t[6].startswith("200"):
            continue
        _, src, method, p, hs, jwt, _ = t
        if jwt:
            if jwt[0] != "jwt":   # an expired/bad token expecting 200 is not a case to repeat
                continue
            hs.append(("Authorization", "Bearer " + token("jwt", jwt[1], key, iss, aud)))
        out.append({"src": src, "raw": raw_request(method, p, hs), "line": line.strip()})
    return out


def free_port(ip, start):
    """The first port from start (wrapping within PORTS) that ip can listen on now."""
    for i in range(PORTS[1] - PORTS[0]):
        port = PORTS[0] + (start - PORTS[0] + i) % (PORTS[1] - PORTS[0])
        s = socket.socket()
        try:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((ip, port))
            s.listen(1)
            return port
        except OSError:
            continue
        finally:
            s.close()
    raise RuntimeError("no free port")


def relocated(path, work):
    """A copy of the policy whose service/upstream/fallback addresses use our ports (mesh mode
    reads addresses from the policy). Returns (copy, services [(ip, port)], backends [(ip, port)])."""
    text = open(path).read()
    mapping, services, backends = {}, [], []
    nxt = PORTS[0] + (PID * 37) % (PORTS[1] - PORTS[0])   # spread parallel runs over the range
    out, decl = [], None

    def sub(a):
        nonlocal nxt
        orig = (a.group(1), int(a.group(2)))
        if orig not in mapping:
            nxt = free_port(a.group(1), nxt)
            mapping[orig] = (a.group(1), nxt)
            nxt += 1
            (services if decl == "service" else backends).append(mapping[orig])
        return "%s:%d" % mapping[orig]

    for line in text.split("\n"):   # a declaration runs from its keyword to its ';'
        m = re.match(r"\s*(service|upstream|fallback)\b", line)
        if m and not decl:
            decl = m.group(1)
        if decl and not line.lstrip().startswith("//"):
            line = ADDR.sub(sub, line)
        if decl and ";" in line.split("//")[0]:
            decl = None
        # key files are found relative to the policy: make them absolute for the copy
        line = re.sub(r'(key_file\s*=\s*")([^"/][^"]*)"',
                      lambda k: k.group(1) + os.path.join(os.path.dirname(os.path.abspath(path)), k.group(2)) + '"', line)
        out.append(line)
    copy = os.path.join(work, os.path.basename(path))
    with open(copy, "w") as f:
        f.write("\n".join(out))
    return copy, services, backends


def nginx_conf(work, backends):
    conf = os.path.join(work, "nginx.conf")
    listens = "".join("listen %s:%d; " % b for b in backends)
    with open(conf, "w") as f:
        f.write("daemon off; master_process off; pid %s/nginx.pid; error_log %s/nginx.err;\n"
                "events { worker_connections 4096; }\n"
                "http { access_log off; keepalive_requests 100000000; keepalive_timeout 300s;\n"
                "  client_body_temp_path %s;\n"
                "  server { %s location / { return 200 \"ok\\n\"; } } }\n" % (work, work, work, listens))
    return conf


def gw_stats(l7run, pin):
    out = subprocess.run([l7run, "--stats", pin], capture_output=True, text=True, timeout=20).stdout
    return {m.group(1): (int(m.group(2)), int(m.group(3)))
            for m in re.finditer(r"^prog (\S+)\s+run_cnt (\d+) run_time_ns (\d+)", out, re.M)}


def mesh_prog_ids(pin):
    """Our mesh programs: those that use our l7_mesh_socks (sock_ops enrolls into it, SK_MSG
    redirects through it); names alone could be another user's l7run."""
    m = json.loads(subprocess.run(["bpftool", "-j", "map", "show", "pinned", pin + "/l7_mesh_socks"],
                                  capture_output=True, text=True, timeout=20).stdout)
    progs = json.loads(subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True,
                                      timeout=20).stdout)
    return [p["id"] for p in progs if m["id"] in p.get("map_ids", [])]


def mesh_stats(ids):
    out = {}
    for i in ids:
        p = json.loads(subprocess.run(["bpftool", "-j", "prog", "show", "id", str(i)], capture_output=True,
                                      text=True, timeout=20).stdout)
        out[p.get("name", str(i))] = (p.get("run_cnt", 0), p.get("run_time_ns", 0))
    return out


def drive(run, host, port, reqs, a, cgroup, snapshot, secs):
    """Warm-up, then a.rounds rounds of requests between snapshots of the programs' statistics.
    ns_per_request is the median over rounds (a preempted or interrupted round on this shared
    machine skews one round, not the result); statuses and per-program deltas are totals."""
    cl = run.start([sys.executable, os.path.abspath(__file__), "--client"], cgroup=cgroup,
                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    spec = {"host": host, "port": port, "reqs": [{"src": r["src"], "raw": r["raw"]} for r in reqs],
            "warm": max(2 * len(reqs), 20), "secs": secs}
    end = time.time() + secs + 15

    def say(text):
        cl.stdin.write(text + "\n")
        cl.stdin.flush()

    def line():
        r, _, _ = select.select([cl.stdout], [], [], max(0, end - time.time()))
        if not r:
            raise RuntimeError("client timed out")
        return cl.stdout.readline()

    say(json.dumps(spec))
    if line().strip() != "warm":
        raise RuntimeError("client failed in the warm-up")
    total = {"statuses": {}, "errors": 0, "answered": 0, "progs": {}, "rounds": []}
    for i in range(a.rounds):
        before = snapshot()
        say("go %d" % (a.requests // a.rounds + (i < a.requests % a.rounds)))
        res = json.loads(line() or "null")
        after = snapshot()
        d = {k: (after[k][0] - before.get(k, (0, 0))[0], after[k][1] - before.get(k, (0, 0))[1]) for k in after}
        for k, (c, t) in d.items():
            o = total["progs"].get(k, (0, 0))
            total["progs"][k] = (o[0] + c, o[1] + t)
        for k, v in res["statuses"].items():
            total["statuses"][k] = total["statuses"].get(k, 0) + v
        total["errors"] += res["errors"]
        total["answered"] += res["answered"]
        if res["answered"]:
            total["rounds"].append(sum(t for _, t in d.values()) / res["answered"])
        if res.get("stopped_early"):
            total["stopped_early"] = True
            break
    say("end")
    cl.wait(timeout=10)
    total["ns_per_request"] = statistics.median(total["rounds"]) if total["rounds"] else 0.0
    return total


def measure(mode, a, l7run, obj, work, services, backends, reqs, deadline):
    run, log = Run(), None
    try:
        pin = "/sys/fs/bpf/l7excost-%d-%s" % (PID, mode)
        run.pins.append(pin)
        cg = None
        if mode == "mesh":
            cg = os.path.join(CG_ROOT, "l7excost-%d" % PID)
            os.mkdir(cg)
            run.cgroups.append(cg)
            run.stats_fd = enable_bpf_stats()
            if run.stats_fd < 0:
                raise RuntimeError("cannot enable BPF run-time statistics")
        log = open(os.path.join(work, mode + ".log"), "w")
        run.start(["nginx", "-e", os.path.join(work, "nginx.err"), "-c", nginx_conf(work, backends)],
                  cgroup=cg, stdout=log, stderr=log)
        for b in backends:
            if not wait_port(b[1], 10, b[0]):
                raise RuntimeError("nginx did not come up")
        if mode == "mesh":
            run.start([l7run, "--mesh", "--cgroup", cg, "--pool", "8", "--pin", pin, obj], stdout=log, stderr=log)
        else:
            run.start([l7run, "--bpf-stats", "--pin", pin, obj], stdout=log, stderr=log)
        host, port = services[0]
        if not wait_port(port, min(120, deadline - time.time()), host):
            raise RuntimeError("l7run did not come up: " + open(log.name).read()[-400:])
        if mode == "mesh":
            time.sleep(0.3)   # the pool fills after the listener opens
            ids = mesh_prog_ids(pin)
            if not ids:
                raise RuntimeError("mesh programs not found")
            snap = lambda: mesh_stats(ids)
        else:
            snap = lambda: gw_stats(l7run, pin)
        return drive(run, host, port, reqs, a, cg, snap, max(10, min(120, deadline - time.time())))
    finally:
        run.close()
        if log:
            log.close()


def explain(l7c, path):
    r = subprocess.run([l7c, "--explain", "--verify", "--format=json", path], capture_output=True, text=True,
                       timeout=400, cwd=os.path.dirname(path))
    d = json.loads(r.stdout)
    return [p for p in d["programs"] if not p["subprogram"]]


def compile_ms(l7c, path, work, runs):
    ts = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([l7c, path, "-o", os.path.join(work, "timed.o")], check=True, capture_output=True, timeout=300)
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts)


def one_example(a, l7c, l7run, path, deadline):
    name = os.path.basename(path)
    res = {"example": name, "notes": []}
    work = tempfile.mkdtemp(prefix="l7excost-")
    try:
        res["programs"] = explain(l7c, path)
        res["compile_ms"] = compile_ms(l7c, path, work, a.compile_runs)
        text = open(path).read()
        ir = subprocess.run([l7c, "--emit=ir", "--passes=none", path], capture_output=True, text=True, timeout=60).stdout
        reqs = ok_requests(path, text, ir)
        if not reqs:
            res["notes"].append("no `// test:` line expects 200: no traffic")
            return res
        copy, services, backends = relocated(path, work)
        obj = os.path.join(work, "p.o")
        subprocess.run([l7c, "-I", os.path.dirname(path), copy, "-o", obj], check=True, capture_output=True, timeout=300)
        res["requests"] = [r["line"] for r in reqs]
        for mode in ["gateway"] + ([] if a.no_mesh else ["mesh"]):
            if time.time() > deadline - 20:
                res["notes"].append("%s: skipped, out of time" % mode)
                continue
            try:
                res[mode] = measure(mode, a, l7run, obj, work, services, backends, reqs, deadline)
            except Exception as e:  # noqa: BLE001 - one mode failing is reported, the table goes on
                res["notes"].append("%s: %s" % (mode, e))
    except Exception as e:  # noqa: BLE001
        res["notes"].append("%s" % e)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return res


# ---- report ------------------------------------------------------------------------------------

def fmt(n):
    return "{:,}".format(n) if isinstance(n, int) and n >= 0 else "-"


def ok_col(m):
    if not m:
        return "-"
    st = m["statuses"]
    other = ", ".join("%s×%s" % (k, v) for k, v in sorted(st.items()) if k != "200")
    return "%d/%d%s%s" % (st.get("200", 0), m["answered"] + m["errors"], " (%s)" % other if other else "",
                          ", %d errors" % m["errors"] if m["errors"] else "")


def ns_col(m):
    """The median over rounds, and the rounds' range: how much the shared machine moved it."""
    if not m or not m["rounds"]:
        return "-"
    return "%.0f (%.0f–%.0f)" % (m["ns_per_request"], min(m["rounds"]), max(m["rounds"]))


def table(results):
    rows = ["| example | programs | max processed (program) | mesh SK_MSG processed | compile ms | "
            "gateway ns/req | mesh ns/req | gateway 200s | mesh 200s |",
            "|---|---:|---|---:|---:|---:|---:|---|---|"]
    for r in results:
        ps = r.get("programs", [])
        top = max(ps, key=lambda p: p["processed"]) if ps else None
        msg = [p["processed"] for p in ps if "mesh_msg" in p["name"]]
        rej = [p["name"] for p in ps if p["verifier"] != "accepted"]
        rows.append("| %s | %d | %s | %s | %s | %s | %s | %s | %s |" % (
            r["example"], len(ps), "%s (%s)" % (fmt(top["processed"]), top["name"]) if top else "-",
            fmt(max(msg)) if msg else "-", "%.0f" % r["compile_ms"] if "compile_ms" in r else "-",
            ns_col(r.get("gateway")), ns_col(r.get("mesh")), ok_col(r.get("gateway")), ok_col(r.get("mesh"))))
        if rej:
            r["notes"].append("verifier rejected " + ", ".join(rej))
    return "\n".join(rows)


def detail(results):
    rows = ["| example | program | insns | est. processed | processed | stack | gateway ns/req (runs/req) | "
            "mesh ns/req (runs/req) |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        for p in r.get("programs", []):
            cells = []
            for mode in ("gateway", "mesh"):
                m = r.get(mode)
                d = m["progs"].get(p["name"][:15]) or m["progs"].get(p["name"]) if m else None   # bpftool: 15-char names
                cells.append("%.0f (%.2f)" % (d[1] / m["answered"], d[0] / m["answered"]) if d and m["answered"] else "-")
            rows.append("| %s | %s | %s | %s | %s | %d | %s | %s |" % (
                r["example"], p["name"], fmt(p["insns"]), fmt(p["estimated_processed"]), fmt(p["processed"]),
                p["stack"], cells[0], cells[1]))
    return "\n".join(rows)


def machine(commit, load0, load1, cmd, elapsed, a):
    cpu = re.search(r"model name\s*:\s*(.*)", open("/proc/cpuinfo").read())
    return ("- Machine: %s, %d cores; kernel %s; nginx backend (1 process) answering `ok`\n"
            "- Commit: %s; generated %s in %.0f s\n"
            "- Command: `%s`\n"
            "- Load average (1/5/15 min) at the start: %s; at the end: %s (the machine is shared: other "
            "sessions build and test at the same time, which inflates ns/request and compile times)\n"
            "- Requests per mode: %d keep-alive requests after a warm-up, cycling the example's `// test:` "
            "lines that expect 200\n" % (
                cpu.group(1) if cpu else platform.processor(), os.cpu_count(), platform.release(), commit,
                time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), elapsed, cmd, load0, load1, a.requests))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--client", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--only", default="", help="comma-separated example file names")
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--quick", action="store_true", help="300 requests, one compile, no doc unless --out")
    ap.add_argument("--out", help="Markdown file ('-': none; default docs/examples-cost.md, none with --quick)")
    ap.add_argument("--json", help="also write the raw results here")
    ap.add_argument("--deadline", type=float, default=540, help="seconds for the whole run")
    ap.add_argument("--no-mesh", action="store_true")
    a = ap.parse_args()
    if a.client:
        return client()
    t_start = time.time()
    deadline = t_start + a.deadline
    a.compile_runs, a.rounds = 3, 5
    if a.quick:
        a.compile_runs, a.rounds = 1, 3
        if a.requests == 2000:
            a.requests = 300
    out = a.out if a.out else ("-" if a.quick else os.path.join(REPO, "docs", "examples-cost.md"))
    l7c, l7run = os.path.join(a.build, "driver", "l7c"), os.path.join(a.build, "runtime", "l7run")
    for f in (l7c, l7run):
        if not os.access(f, os.X_OK):
            sys.exit("examples: %s missing: build first (scripts/build.sh)" % f)
    for t in ("nginx", "bpftool"):
        if not shutil.which(t):
            sys.exit("examples: %s missing: run scripts/install-deps.sh" % t)
    if os.geteuid() != 0:
        sys.exit("examples: needs root (BPF, cgroups)")
    if not os.path.ismount("/sys/fs/bpf"):
        subprocess.run(["mount", "-t", "bpf", "bpf", "/sys/fs/bpf"], check=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))   # runs the finally blocks: clean up

    exdir = os.path.join(REPO, "examples")
    names = sorted(f for f in os.listdir(exdir) if f.endswith(".l7"))
    if a.only:
        names = [n for n in a.only.split(",") if n]
    load0 = " ".join(open("/proc/loadavg").read().split()[:3])
    results = []
    for n in names:
        if time.time() > deadline - 30:
            results.append({"example": n, "notes": ["skipped: out of time (--deadline)"]})
            continue
        r = one_example(a, l7c, l7run, os.path.join(exdir, n), deadline)
        results.append(r)
        print("examples: %s done (%.0f s so far)%s" % (n, time.time() - t_start,
                                                       "; " + "; ".join(r["notes"]) if r["notes"] else ""), file=sys.stderr)
    load1 = " ".join(open("/proc/loadavg").read().split()[:3])
    tab = table(results)
    notes = ["- %s: %s" % (r["example"], "; ".join(r["notes"])) for r in results if r["notes"]]
    print(tab)
    if notes:
        print("\n" + "\n".join(notes))
    commit = subprocess.run(["git", "-C", REPO, "describe", "--always", "--dirty"], capture_output=True,
                            text=True).stdout.strip() or "?"
    cmd = "sudo bench/examples.py" + "".join(" " + x for x in sys.argv[1:])
    if out != "-":
        with open(out, "w") as f:
            f.write("# What each example costs: verifier and data plane\n\n"
                    "Generated by `bench/examples.py` (see docs/performance.md, *Per-example cost*); rerun "
                    "it to refresh this page.\n\n" + machine(commit, load0, load1, cmd, time.time() - t_start, a) +
                    "\n*processed*: instructions the kernel verifier processed (`l7c --explain --verify`); "
                    "*max processed*: the program of the object with the most; *mesh SK_MSG*: the mesh "
                    "mode's per-message program. *compile ms*: `l7c POLICY -o FILE`, wall clock, median of %d. "
                    "*ns/req*: the run_time_ns (BPF run-time statistics) of all the mode's programs during "
                    "a round of requests / requests answered in it, median of %d rounds (in brackets: the "
                    "lowest and highest round) — the data plane's "
                    "own CPU time per request, request and response together (the per-program table below "
                    "gives totals over all rounds). *200s*: answers with status 200 / requests sent "
                    "(other statuses in brackets: e.g. a rate limit answering 429 in the kernel).\n\n"
                    % (a.compile_runs, a.rounds) + tab + "\n\n" + ("\n".join(notes) + "\n\n" if notes else "") +
                    "## Per program\n\n*ns/req*: the program's run time per request; *runs/req*: how "
                    "often it ran per request.\n\n" + detail(results) + "\n")
        print("examples: wrote %s" % out, file=sys.stderr)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"results": results, "load": [load0, load1], "commit": commit}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
