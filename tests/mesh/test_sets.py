#!/usr/bin/python3
"""Run-time endpoint sets in mesh mode (issue 15 items 2-3, mesh side), across three "nodes"
the test makes: network namespaces A, B and C, A joined to B and to C by veth pairs with
addresses of their own (10.88.X.0/24 and 10.89.X.0/24, X from this run's pid). On node A:
l7run --mesh --endpoints FILE in a child cgroup, the client (this process, in that cgroup) and
local backends; on B and C: backends only, in no mesh. Two sets of the file: "api" (weighted
turns) and "users" (the Ketama ring of the x-user header), whose endpoints are local (an
enrolled socket on A) or remote (l7run's pooled connection to B or C).
  - a set with no endpoint answers 503 naming it;
  - deny, a header added and the route by path hold for local and remote endpoints alike;
  - an endpoint moved from B to C by rewriting the file while clients send: no request fails,
    C gets requests, B none, and l7run's connections to B close (its pool drained);
  - a killed endpoint leaves its set within 1 s (no failure after that) and serves again once
    it is back;
  - taking one of four endpoints out of the ring moves only the keys that were on it, and
    putting it back restores every key;
  - after 1,000 connections the client entries, l7run's fds and the pool are back at baseline;
  - a DNS-named upstream (a second l7run, in a mount namespace of its own whose /etc/hosts the
    test writes) follows its name from B to C under requests, with no failure.
Needs root (CI runs as root); never skips.

usage: test_sets.py L7C L7RUN [CHECK...]   (default: every check)"""
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "common"))
import nodes  # noqa: E402  (netns nodes joined by veths)
import procs  # noqa: E402  (start/stop by pid, ports, cgroups, --stats)
from policy import policy  # noqa: E402
from rawhttp import Reader, connect as raw_connect  # noqa: E402
from check import run_checks  # noqa: E402

L7C, L7RUN = sys.argv[1], sys.argv[2]
ONLY = sys.argv[3:]
PID = os.getpid()
BASE = 12000 + (PID % 1000) * 10          # ports unique per run (each node is a netns of its own)
SVC, PA1, PA2, PB1, PB2, PC1, PC2, SVC2, PD = (BASE + i for i in range(9))
NET = 1 + PID % 250
ADDR_AB, ADDR_B = "10.88.%d.1" % NET, "10.88.%d.2" % NET
ADDR_AC, ADDR_C = "10.89.%d.1" % NET, "10.89.%d.2" % NET
NS = {n: "l7s%s-%d" % (n.lower(), PID) for n in "ABC"}
POOL = 4
CG = os.path.join(procs.CG_ROOT, "l7sets-%d" % PID)
CG2 = os.path.join(procs.CG_ROOT, "l7sets-dns-%d" % PID)
PIN = "/sys/fs/bpf/l7sets-%d" % PID
PIN2 = PIN + "-dns"
TMP = tempfile.mkdtemp(prefix="l7sets-")
EPFILE = os.path.join(TMP, "endpoints")
HOME_CG = procs.cgroup_home()
HOME_NS = os.open("/proc/self/ns/net", os.O_RDONLY)
# where each backend listens: (node, address, port)
WHERE = {"A1": ("A", "127.0.0.1", PA1), "A2": ("A", "127.0.0.1", PA2), "B1": ("B", ADDR_B, PB1),
         "B2": ("B", ADDR_B, PB2), "C1": ("C", ADDR_C, PC1), "C2": ("C", ADDR_C, PC2),
         "DB": ("B", ADDR_B, PD), "DC": ("C", ADDR_C, PD)}   # the DNS name's, one port on B and C
NAME = "web.l7sets.test"
POLICY_DNS = policy("named", SVC2, [("web", '"%s:%d"' % (NAME, PD))], "  Route(request, web);\n")

POLICY = policy("sets", SVC, [("api", 'endpoints("api")'), ("users", 'endpoints("users") balance hash(header "x-user")')],
                """\
  if (starts_with(request.path, "/secret")) {
    Deny(request, 403);
  } else if (starts_with(request.path, "/users/")) {
    SetHeader(request, "x-l7-set", "users");
    Route(request, users);
  } else {
    SetHeader(request, "x-l7-set", "api");
    Route(request, api);
  }
""")


def make_nodes():
    """A joined to B and to C (B and C see only A)."""
    nodes.make(NS.values())
    for far, near_addr, far_addr in (("B", ADDR_AB, ADDR_B), ("C", ADDR_AC, ADDR_C)):
        va, vf = "l7s%s%d" % (far.lower(), PID % 100000), "l7s%sx%d" % (far.lower(), PID % 100000)
        nodes.join(NS["A"], va, near_addr, NS[far], vf, far_addr)


named = {}


def start(name, argv, ns, cgroup=False, **kw):
    named[name] = nodes.start(argv, ns, cgroup=CG if cgroup else None, **kw)
    return named[name]


def start_backend(name):
    node, addr, port = WHERE[name]
    start(name, ["/usr/bin/python3", os.path.join(HERE, "echo.py"), name, str(port), addr], NS[node], cgroup=node == "A",
          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if not procs.wait_port(port, 10, addr):   # from node A (over the veth for B and C)
        raise RuntimeError("backend %s never opened" % name)


def write_endpoints(sets):
    """The --endpoints file: {set: [backend names]}, replaced atomically (rename)."""
    tmp = EPFILE + ".tmp"
    with open(tmp, "w") as f:
        for s, names in sets.items():
            for n in names:
                f.write("%s %s:%d\n" % (s, WHERE[n][1], WHERE[n][2]))
    os.rename(tmp, EPFILE)


def req(path, user=None):
    return ("GET %s HTTP/1.1\r\nHost: front\r\n%s\r\n" % (path, "x-user: %s\r\n" % user if user else "")).encode()


def field(body, name):
    for line in body.splitlines():
        if line.startswith(name + "="):
            return line[len(name) + 1:]
    return None


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def get(path, user=None, s=None):
    """(status, backend, body) of one request: on connection s, else a fresh one."""
    own = s is None
    s = s or raw_connect(SVC)
    try:
        s.sendall(req(path, user))
        st, _, body = Reader(s).response()
        return st, field(body, "backend"), body
    finally:
        if own:
            s.close()


def wait_until(cond, timeout, what):
    end = time.time() + timeout
    while time.time() < end:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError("not within %.0f s: %s" % (timeout, what))


def established(node, port):
    """TCP connections established to the backend port on node (l7run's pool to it)."""
    out = subprocess.run(["nsenter", "--net=/run/netns/" + NS[node], "--", "ss", "-Htn", "state", "established",
                          "( sport = :%d )" % port], capture_output=True, text=True, timeout=10).stdout
    return len([x for x in out.splitlines() if x.strip()])


class Load:
    """Clients sending GETs to the api set until stopped: two on keep-alive connections, one
    with a fresh connection a request. Every answer is checked (200, its own path, a backend
    of `allowed`); what failed is kept with the time it was sent, and when each backend was
    last seen."""

    def __init__(self, allowed):
        self.allowed, self.stop, self.n = set(allowed), False, 0
        self.failed, self.seen, self.lock = [], {}, threading.Lock()
        self.threads = [threading.Thread(target=self.run, args=(i,)) for i in range(3)]
        for t in self.threads:
            t.start()

    def run(self, i):
        s, k = None, 0
        while not self.stop:
            k += 1
            path = "/load/%d/%d" % (i, k)
            sent = time.time()
            try:
                if s is None and i < 2:
                    s = raw_connect(SVC)
                st, be, body = get(path, s=s if i < 2 else None)
                ok = st == 200 and field(body, "path") == path and be in self.allowed
                why = "%s: %d from %s%s" % (path, st, be, "" if st == 200 else " " + body.strip()[:60])
            except (OSError, EOFError) as e:
                ok, why = False, "%s: %s" % (path, e)
                if s is not None:
                    s.close()
                s = None
            with self.lock:
                self.n += 1
                if ok:
                    self.seen[be] = time.time()
                else:
                    self.failed.append((sent, why))
        if s is not None:
            s.close()

    def end(self):
        self.stop = True
        for t in self.threads:
            t.join(30)
        return self


# ---- checks --------------------------------------------------------------------------------

def t_empty():
    """A set with no endpoint (users: none in the file) answers 503 naming the set; the deny
    before it still denies."""
    st, _, body = get("/users/x", "u1")
    check(st == 503 and "upstream users has no endpoint" in body, "an empty set: %d %r" % (st, body[:120]))
    st, _, _ = get("/secret")
    check(st == 403, "the deny: %d" % st)


def t_decisions():
    """api = A1 (local) and B1 (remote): both get requests, each with the header the rule adds
    and its own path, on fresh and keep-alive connections; the deny holds."""
    seen = {}
    s = raw_connect(SVC)
    for i in range(40):
        path = "/d/%d" % i
        st, be, body = get(path, s=s if i % 2 else None)
        check(st == 200 and field(body, "path") == path, "%s: %d, path %s" % (path, st, field(body, "path")))
        check(be in ("A1", "B1"), "%s went to %s" % (path, be))
        check(field(body, "h:x-l7-set") == "api", "%s at %s: x-l7-set %s" % (path, be, field(body, "h:x-l7-set")))
        seen[be] = seen.get(be, 0) + 1
        st, _, _ = get("/secret/%d" % i, s=s if i % 2 else None)
        check(st == 403, "/secret/%d: %d" % (i, st))
    s.close()
    check(set(seen) == {"A1", "B1"}, "both endpoints served: %s" % seen)
    return seen


def t_move():
    """B1 -> C1 by rewriting the file while clients send: no request fails, C1 takes B1's share,
    B1 gets none once the change applied, and l7run's pool connections to B1 close."""
    check(established("B", PB1) >= POOL, "l7run's pool to B1 before the move: %d" % established("B", PB1))
    load = Load(("A1", "B1", "C1"))
    time.sleep(1.0)
    write_endpoints({"api": ["A1", "C1"]})
    t0 = time.time()
    try:
        wait_until(lambda: "C1" in load.seen, 5, "C1 serves after the move")
        wait_until(lambda: time.time() - load.seen.get("B1", 0) > 1.0, 6, "B1 gets no request after the move")
        wait_until(lambda: established("B", PB1) == 0, 5, "l7run's connections to B1 close (%d open)" % established("B", PB1))
        time.sleep(0.5)
    finally:
        load.end()
    check(not load.failed, "%d of %d requests failed during the move: %s" % (len(load.failed), load.n, load.failed[:5]))
    check(load.seen.get("B1", 0) < t0 + 2.5, "B1 served %.1f s after the move" % (load.seen.get("B1", 0) - t0))
    return "%d requests, 0 failed; B1 last %.2f s after the rewrite" % (load.n, load.seen.get("B1", t0) - t0)


def t_kill():
    """api = A1, C1: C1 killed under load leaves the set within 1 s (no failure after that, all
    to A1), and serves again once it is restarted."""
    load = Load(("A1", "C1"))
    time.sleep(0.5)
    procs.stop(named.pop("C1"))
    t_kill = time.time()
    try:
        time.sleep(2.5)
        last_c1 = load.seen.get("C1", 0) - t_kill
        late = [(round(f[0] - t_kill, 2), f[1]) for f in load.failed if f[0] > t_kill + 1.0]
        check(not late, "requests sent more than 1 s after the kill failed: %s" % late[:5])
        check(last_c1 < 1.0, "C1 still answered %.2f s after its kill" % last_c1)
        start_backend("C1")
        t_back = time.time()
        wait_until(lambda: load.seen.get("C1", 0) > t_back, 15, "C1 serves again after its restart")
        back = load.seen["C1"] - t_back
        time.sleep(1.0)
    finally:
        load.end()
    late = [(round(f[0] - t_kill, 2), f[1]) for f in load.failed if f[0] > t_kill + 1.0]
    check(not late, "requests sent more than 1 s after the kill failed: %s" % late[:5])
    early = [f for f in load.failed if f[0] <= t_kill + 1.0]
    return "%d requests, %d failed in the 1st s after the kill (%s), C1 back %.2f s after its restart" % (
        load.n, len(early), ", ".join("%.3f %s" % (f[0] - t_kill, f[1]) for f in early[:8]), back)


KEYS = ["user%d" % i for i in range(200)]


def ring():
    """{key: backend, or the status when it failed} of every key through the users set."""
    out = {}
    s = raw_connect(SVC)
    for k in KEYS:
        st, be, _ = get("/users/k", k, s=s)
        out[k] = be if st == 200 else st
    s.close()
    return out


def t_ketama():
    """users = A1, A2, B2, C2: taking B2 out moves exactly the keys that were on it, putting
    it back restores every key."""
    four = ["A1", "A2", "B2", "C2"]
    write_endpoints({"api": ["A1", "C1"], "users": four})
    wait_until(lambda: set(ring().values()) == set(four), 8, "every endpoint of users on the ring")
    before = ring()
    check(ring() == before, "the ring is stable")
    write_endpoints({"api": ["A1", "C1"], "users": ["A1", "A2", "C2"]})
    wait_until(lambda: "B2" not in ring().values(), 8, "B2 off the ring")
    without = ring()
    on_b2 = [k for k in KEYS if before[k] == "B2"]
    moved = [k for k in KEYS if without[k] != before[k]]
    check(sorted(moved) == sorted(on_b2), "only B2's keys moved: %d moved, %d were on B2, e.g. %s"
          % (len(moved), len(on_b2), [(k, before[k], without[k]) for k in moved if k not in on_b2][:3]))
    check(0 < len(on_b2) < len(KEYS) // 2, "B2 held %d of %d keys" % (len(on_b2), len(KEYS)))
    write_endpoints({"api": ["A1", "C1"], "users": four})
    wait_until(lambda: "B2" in ring().values(), 8, "B2 back on the ring")
    after = ring()
    check(after == before, "every key back where it was: %d differ" % sum(after[k] != before[k] for k in KEYS))
    return "%d of %d keys moved, all of them B2's" % (len(moved), len(KEYS))


def conns_entries():
    out = subprocess.run(["bpftool", "-j", "map", "dump", "pinned", PIN + "/l7_mesh_conns"], capture_output=True,
                         text=True, timeout=30).stdout
    return len(json.loads(out or "[]"))


def pool_states():
    out = subprocess.run([L7RUN, "--stats", PIN], capture_output=True, text=True, timeout=10).stdout
    return sorted(line for line in out.splitlines() if line.startswith("pool") or line.startswith("sockets"))


def t_leaks():
    """1,000 connections, one request each, to both sets: the client entries of l7_mesh_conns,
    l7run's open fds and the pool's slots are back at their baseline."""
    pid = named["l7run"].pid

    def fds():
        return len(os.listdir("/proc/%d/fd" % pid))
    time.sleep(0.3)
    base = (conns_entries(), fds(), pool_states())
    for i in range(1000):
        st, be, _ = get("/leak/%d" % i if i % 2 else "/users/leak", None if i % 2 else "u%d" % i)
        check(st == 200, "connection %d: %d" % (i, st))
    time.sleep(1.0)
    now = (conns_entries(), fds(), pool_states())
    check(now[0] <= base[0], "l7_mesh_conns entries %d, baseline %d" % (now[0], base[0]))
    check(now[1] <= base[1], "l7run fds %d, baseline %d" % (now[1], base[1]))
    check(now[2] == base[2], "pool %s, baseline %s" % (now[2], base[2]))
    return "conns %d, fds %d" % (now[0], now[1])


def t_dns():
    """`upstream web = "web.l7sets.test:PD"`, resolved every second by a second l7run: the
    name moves from B to C (its /etc/hosts rewritten) while requests go on, none fails, and
    l7run's connections to B close."""
    hosts = os.path.join(TMP, "hosts")
    with open(hosts, "w") as f:
        f.write("127.0.0.1 localhost\n%s %s\n" % (ADDR_B, NAME))
    pol, obj = os.path.join(TMP, "named.l7"), os.path.join(TMP, "named.o")
    with open(pol, "w") as f:
        f.write(POLICY_DNS)
    subprocess.run([L7C, pol, "-o", obj], check=True, timeout=120)
    log = open(os.path.join(TMP, "l7run-dns.log"), "w")
    # its own mount namespace: the bind mount of the test's hosts file is seen by it alone
    named["l7run-dns"] = procs.start(
        ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
         'mount --bind "$0" /etc/hosts && exec "$@"', hosts, L7RUN, "--mesh", "--cgroup", CG2, "--create-cgroup",
         "--pool", "2", "--pin", PIN2, "--resolve-every", "1", obj], stderr=log)
    check(procs.wait_port(SVC2, 30), "the second l7run serves")
    time.sleep(0.3)
    procs.cgroup_join(CG2)
    try:
        seen, failed = {}, []
        s = raw_connect(SVC2)
        moved_at = None
        for i in range(100000):
            path = "/n/%d" % i
            st, be, body = get(path, s=s if i % 2 else None)
            if st != 200 or field(body, "path") != path:
                failed.append("%s: %d" % (path, st))
            seen[str(be)] = time.time()
            if i == 200:
                with open(hosts, "w") as f:   # in place: the bind mount holds this inode
                    f.write("127.0.0.1 localhost\n%s %s\n" % (ADDR_C, NAME))
                moved_at = time.time()
            if moved_at and "DC" in seen and time.time() - seen.get("DB", 0) > 1.0 and established("B", PD) == 0:
                break
            check(not moved_at or time.time() - moved_at < 15, "the name's move applied within 15 s: %s, %d to B open"
                  % (sorted(seen), established("B", PD)))
        s.close()
    finally:
        procs.cgroup_join(CG)
        procs.stop(named.pop("l7run-dns"))
        log.close()
        if os.environ.get("L7_TEST_VERBOSE"):
            print(open(log.name).read()[-3000:])
    check(not failed, "%d requests failed while the name moved: %s" % (len(failed), failed[:5]))
    check("DB" in seen and "DC" in seen, "served by the name's old and new address: %s" % sorted(seen))
    return "%d requests, 0 failed; on C %.2f s after the change" % (i + 1, seen["DC"] - moved_at)


CHECKS = [("empty", t_empty), ("decisions", t_decisions), ("move", t_move), ("kill", t_kill), ("ketama", t_ketama),
          ("leaks", t_leaks), ("dns", t_dns)]


def main():
    if os.geteuid() != 0:
        print("FAIL: needs root")
        return 1
    failed = 0
    os.mkdir(CG)
    log_path = os.path.join(TMP, "l7run.log")
    try:
        make_nodes()
        pol = os.path.join(TMP, "sets.l7")
        with open(pol, "w") as f:
            f.write(POLICY)
        obj = os.path.join(TMP, "sets.o")
        subprocess.run([L7C, pol, "-o", obj], check=True, timeout=120)
        write_endpoints({"api": ["A1", "B1"]})
        fd = os.open("/run/netns/" + NS["A"], os.O_RDONLY)
        nodes.setns(fd)   # this process is node A's client from here on
        os.close(fd)
        for b in WHERE:
            start_backend(b)
        log = open(log_path, "w")
        start("l7run", [L7RUN] + (["-v"] if os.environ.get("L7_TEST_VERBOSE") else []) +
              ["--mesh", "--cgroup", CG, "--pool", str(POOL), "--pin", PIN, "--endpoints", EPFILE, obj], NS["A"],
              stderr=log)
        if not procs.wait_port(SVC, 30):
            raise RuntimeError("l7run did not come up")
        time.sleep(0.3)    # pools filled
        procs.cgroup_join(CG)   # the client's sockets are the mesh's
        failed += run_checks(CHECKS, ONLY, "%-10s")
    except Exception:
        failed += 1
        raise
    finally:
        procs.cgroup_join(HOME_CG)
        procs.stop_all()
        nodes.setns(HOME_NS)
        if failed and os.path.exists(log_path):
            print(open(log_path).read()[-(1 << 20 if os.environ.get("L7_TEST_VERBOSE") else 4000):])
        procs.cgroup_remove(CG)
        procs.cgroup_remove(CG2)
        nodes.remove(NS.values())
        subprocess.run(["rm", "-rf", TMP, PIN, PIN2])
    left = [x for x in [CG, CG2, PIN, PIN2] + ["/run/netns/" + ns for ns in NS.values()] if os.path.exists(x)]
    if left:
        failed += 1
        print("FAIL cleanup: %s left" % ", ".join(left))
    print("%d check(s) failed" % failed if failed else "all mesh endpoint set checks passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
