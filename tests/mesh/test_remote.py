#!/usr/bin/python3
"""Mesh mode with an upstream on another node (issue 15 item 1), across network namespaces the
test makes: node A (l7run --mesh in a child cgroup, a client in that cgroup, a local backend)
and node B (a backend only, not in any mesh), joined by a veth pair with addresses of their own
(10.77.X.1/24 and 10.77.X.2/24, X from this run's pid). The client's SK_MSG decides every
request, local or remote: deny, a header added and the route by path hold for both; a remote
request is redirected into l7run's pooled connection to B (egress), its response comes back
through l7run's relay into the client, in order with the local ones when pipelined. Needs root
(CI runs as root); never skips.

usage: test_remote.py L7C L7RUN [CHECK...]   (default: every check)"""
import hashlib
import os
import subprocess
import sys
import tempfile
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
BASE = 21000 + (PID % 1000) * 10          # ports unique per run (and each node is a netns of its own)
SVC, PA, PB = BASE, BASE + 1, BASE + 2
NET = 1 + PID % 250
ADDR_A, ADDR_B = "10.77.%d.1" % NET, "10.77.%d.2" % NET
NS_A, NS_B = "l7rm-a-%d" % PID, "l7rm-b-%d" % PID
VETH_A, VETH_B = "l7ra%d" % (PID % 100000), "l7rb%d" % (PID % 100000)
POOL = 4
CG = os.path.join(procs.CG_ROOT, "l7rmesh-%d" % PID)
PIN = "/sys/fs/bpf/l7rmesh-%d" % PID
TMP = tempfile.mkdtemp(prefix="l7rmesh-")
HOME_CG = procs.cgroup_home()
HOME_NS = os.open("/proc/self/ns/net", os.O_RDONLY)

if os.environ.get("L7_TEST_LOCAL_R"):   # debugging: node B's upstream on node A instead
    ADDR_B = "127.0.0.1"
POLICY = policy("remote", SVC, [("a", PA), ("r", "%s:%d" % (ADDR_B, PB))], """\
  if (starts_with(request.path, "/a/secret") || starts_with(request.path, "/r/secret")) {
    Deny(request, 403);
  } else if (starts_with(request.path, "/r")) {
    SetHeader(request, "x-l7-node", "remote");
    Route(request, r);
  } else {
    SetHeader(request, "x-l7-node", "local");
    Route(request, a);
  }
""")


def make_nodes():
    nodes.make((NS_A, NS_B))
    nodes.join(NS_A, VETH_A, ADDR_A, NS_B, VETH_B, ADDR_B)


named = {}


def start(name, argv, ns, cgroup=False, **kw):
    named[name] = nodes.start(argv, ns, cgroup=CG if cgroup else None, **kw)
    return named[name]


def wait_port(host, port, timeout=30.0):   # l7run verifies its programs first: seconds on a loaded machine
    if not procs.wait_port(port, timeout, host):
        raise RuntimeError("%s:%d never opened" % (host, port))


def start_remote():
    start("backendB", ["/usr/bin/python3", os.path.join(HERE, "echo.py"), "B", str(PB), ADDR_B],
          NS_A if ADDR_B == "127.0.0.1" else NS_B, cgroup=ADDR_B == "127.0.0.1")
    wait_port(ADDR_B, PB)   # from node A, over the veth


def connect():
    return raw_connect(SVC)


def req(path, method="GET", body=b""):
    head = "%s %s HTTP/1.1\r\nHost: front\r\n" % (method, path)
    if body or method == "POST":
        head += "Content-Length: %d\r\n" % len(body)
    return (head + "\r\n").encode() + body


def field(body, name):
    for line in body.splitlines():
        if line.startswith(name + "="):
            return line[len(name) + 1:]
    return None


def note(what):
    if os.environ.get("L7_TEST_VERBOSE"):
        print("     " + what, flush=True)


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def dump_state():
    """On a failure with L7_TEST_VERBOSE: the client and slot counters (debugging)."""
    import json
    import struct
    out = subprocess.run(["bpftool", "-j", "map", "dump", "pinned", PIN + "/l7_mesh_conns"], capture_output=True,
                         text=True).stdout
    for e in json.loads(out or "[]"):
        v = bytes(int(x, 16) for x in e["value"])
        role, index, gen, body = struct.unpack_from("<IIII", v)
        body_left, req_seq, resp_done, pass_seq = struct.unpack_from("<QQQQ", v, 16)
        redir_dec, redir_done = struct.unpack_from("<QQ", v, 160)
        print("     conn role %d index %d gen %d body %d left %d req_seq %d resp_done %d pass_seq %d dec %d done %d"
              % (role, index, gen, body, body_left, req_seq, resp_done, pass_seq, redir_dec, redir_done))
    for slot in (0, 1, 64, 65):
        out = subprocess.run(["bpftool", "-j", "map", "lookup", "pinned", PIN + "/l7_mesh_pool", "key"] +
                             [str(b) for b in struct.pack("<I", slot)], capture_output=True, text=True).stdout
        v = bytes(int(x, 16) for x in json.loads(out)["value"])
        state, gen = struct.unpack_from("<II", v)
        req_cnt, resp_cnt, no_body = struct.unpack_from("<QQQ", v, 40)
        print("     slot %d state %d gen %d req %d resp %d no_body %x" % (slot, state, gen, req_cnt, resp_cnt, no_body))


def stats():
    return procs.l7run_stats(L7RUN, PIN)


# ---- checks --------------------------------------------------------------------------------

def t_decisions():
    """Deny, a header added and the route by path: the client's SK_MSG decides them for the
    remote upstream as for the local one."""
    s = connect()
    r = Reader(s)
    for path, status, backend, node in (("/a/x", 200, "A", "local"), ("/r/x", 200, "B", "remote"),
                                        ("/a/secret", 403, None, None), ("/r/secret", 403, None, None),
                                        ("/r/y?z=1", 200, "B", "remote"), ("/other", 200, "A", "local")):
        note(path)
        s.sendall(req(path))
        st, _, body = r.response()
        check(st == status, "%s: status %d, want %d" % (path, st, status))
        if backend:
            check(field(body, "backend") == backend, "%s: went to %s, want %s" % (path, field(body, "backend"), backend))
            check(field(body, "path") == path, "%s: the backend saw %s" % (path, field(body, "path")))
            check(field(body, "h:x-l7-node") == node, "%s: x-l7-node %s, want %s" % (path, field(body, "h:x-l7-node"), node))
    # a body and a HEAD to the remote endpoint: framed both ways
    for n in (1000, 20000, 100000):
        note("post %d" % n)
        body = os.urandom(n)
        s.sendall(req("/r/post", "POST", body))
        st, _, text = r.response()
        check(st == 200 and field(text, "len") == "%d sha256=%s" % (n, hashlib.sha256(body).hexdigest()),
              "a %d-byte POST to the remote endpoint arrives whole (%d, %s)" % (n, st, field(text, "len")))
    note("head")
    s.sendall(req("/r/head", "HEAD") + req("/r/after"))
    st, h, _ = r.response(head_only=True)
    check(st == 200 and int(h.get("content-length", 0)) > 0, "HEAD to the remote endpoint: its head only")
    st, _, text = r.response()
    check(st == 200 and field(text, "path") == "/r/after", "the request after a HEAD: %s" % field(text, "path"))
    note("chunked")
    s.sendall(req("/r/big?size=3000000&chunked=65536"))
    st, _, data = r.framed()
    check(st == 200 and data == b"x" * 3000000, "a chunked 3 MB response from the remote endpoint (%d, %d bytes)"
          % (st, len(data)))
    s.close()


def t_pipelined():
    """Pipelined requests alternating between node A and node B, in writes of 32, 16, 8, 3 and
    1 requests: the responses come back in the order of the requests; then the same writes all
    to node A's local backend. More than 8 a write, each with a header added, is what lost the
    9th on an ingress redirect before l7g_msg_edit made the edited head one scatterlist element
    again."""
    ways = [w for w in os.environ.get("L7_TEST_ONE_UP", "ar a").split()]
    for per_write, way in [(int(x), w) for w in ways for x in os.environ.get("L7_TEST_PER_WRITE", "32 16 8 3 1").split()]:
        s = connect()
        r = Reader(s)
        paths = ["/%s/p%d" % (way if len(way) == 1 else way[i % 2 if i % 5 else 1], i) for i in range(64)]
        data = [req(p) for p in paths]
        for i in range(0, len(data), per_write):
            s.sendall(b"".join(data[i:i + per_write]))
        for p in paths:
            note("%d a write: %s" % (per_write, p))
            st, _, body = r.response()
            check(st == 200 and field(body, "path") == p, "%d a write: got %s (%d), want %s"
                  % (per_write, field(body, "path"), st, p))
            check(field(body, "backend") == ("B" if p.startswith("/r") else "A"), "%s went to %s" % (p, field(body, "backend")))
        s.close()


def t_keepalive():
    """2,000 keep-alive requests across nodes on 4 connections, 0 failures, and the kernel sent
    them itself (the client's SK_MSG redirect into the pool connection, not l7run's slow path)."""
    before = stats()
    conns = [connect() for _ in range(4)]
    readers = [Reader(s) for s in conns]
    n, depth, bad = 2000, 4, 0
    t0 = time.time()
    for i in range(0, n, depth * len(conns)):
        for c, s in enumerate(conns):
            s.sendall(b"".join(req("/r/k%d" % (i + c * depth + j)) for j in range(depth)))
        for c, r in enumerate(readers):
            for j in range(depth):
                st, _, body = r.response()
                if st != 200 or field(body, "path") != "/r/k%d" % (i + c * depth + j):
                    bad += 1
        check(time.time() - t0 < 60, "2,000 requests took over 60 s")
    for s in conns:
        s.close()
    after = stats()
    fwd = after.get("forwarded", 0) - before.get("forwarded", 0)
    passed = after.get("passed_to_l7run", 0) - before.get("passed_to_l7run", 0)
    check(bad == 0, "%d of %d requests across nodes failed" % (bad, n))
    check(fwd >= n and passed < n // 100, "the kernel forwarded %d of %d itself, %d went to l7run" % (fwd, n, passed))
    print("     2,000 requests across nodes: %.2f s" % (time.time() - t0))


def t_refill():
    """The remote backend restarts: its requests fail while it is down (502/503, never hang),
    then its pool refills and it serves again; the local upstream is not affected."""
    procs.stop(named.pop("backendB"))
    time.sleep(0.3)
    s = connect()
    r = Reader(s)
    s.sendall(req("/r/down"))
    st, _, _ = r.response()
    check(st in (502, 503), "a request to the stopped remote backend: %d" % st)
    s.close()
    s = connect()
    r = Reader(s)
    s.sendall(req("/a/while-down"))
    st, _, body = r.response()
    check(st == 200 and field(body, "backend") == "A", "the local upstream serves while the remote one is down")
    s.close()
    start_remote()
    end, ok = time.time() + 10, 0
    while time.time() < end and ok < 50:
        s = connect()
        r = Reader(s)
        s.sendall(req("/r/back"))
        st, _, body = r.response()
        s.close()
        if st == 200 and field(body, "backend") == "B":
            ok += 1
        else:
            ok = 0
            time.sleep(0.1)
    check(ok >= 50, "the remote backend serves again after its restart (%d in a row)" % ok)


def t_orphan():
    """Clients that leave with a large remote response owed (every pool connection of the remote
    upstream, twice over): what still comes is dropped, not delivered to the next client, and
    the pool serves the next clients."""
    for _ in range(2 * POOL):
        s = connect()
        s.sendall(req("/r/gone?size=2000000"))
        s.recv(100)
        s.close()
    time.sleep(0.5)
    for i in range(4 * POOL):
        s = connect()
        r = Reader(s)
        s.sendall(req("/r/next%d" % i))
        st, _, body = r.response()
        s.close()
        check(st == 200 and field(body, "path") == "/r/next%d" % i, "after orphaned slots: %d, %s"
              % (st, field(body, "path")))


def t_reload():
    """A reload (the same object, a new version): a connection opened before keeps its version's
    remote pool, new ones get the new version's (its own relay pairs), both reach node B."""
    old = connect()
    ro = Reader(old)
    old.sendall(req("/r/before"))
    st, _, body = ro.response()
    check(st == 200 and field(body, "backend") == "B", "before the reload: %d" % st)
    r = subprocess.run([L7RUN, "--reload", str(named["l7run"].pid), "--pin", PIN], capture_output=True, text=True,
                       timeout=150)
    check(r.returncode == 0 and "version 2 serving" in r.stdout, "l7run --reload: %d %s"
          % (r.returncode, (r.stdout + r.stderr).strip()[-300:]))
    for i in range(20):
        s = connect()
        rn = Reader(s)
        s.sendall(req("/r/new%d" % i) + req("/a/new%d" % i))
        st, _, body = rn.response()
        st2, _, body2 = rn.response()
        s.close()
        check(st == 200 and field(body, "path") == "/r/new%d" % i and field(body, "backend") == "B",
              "after the reload, a new connection to B: %d %s" % (st, field(body, "path")))
        check(st2 == 200 and field(body2, "backend") == "A", "after the reload, the same connection to A: %d" % st2)
    old.sendall(req("/r/after"))
    st, _, body = ro.response()
    check(st == 200 and field(body, "path") == "/r/after", "the connection from before the reload: %d" % st)
    old.close()


CHECKS = [("decisions", t_decisions), ("pipelined", t_pipelined), ("keepalive", t_keepalive), ("orphan", t_orphan),
          ("reload", t_reload), ("refill", t_refill)]


def main():
    if os.geteuid() != 0:
        print("FAIL: needs root")
        return 1
    failed = 0
    os.mkdir(CG)
    try:
        make_nodes()
        pol = os.path.join(TMP, "remote.l7")
        with open(pol, "w") as f:
            f.write(POLICY)
        obj = os.path.join(TMP, "remote.o")
        subprocess.run([L7C, pol, "-o", obj], check=True, timeout=120)
        fd = os.open("/run/netns/" + NS_A, os.O_RDONLY)
        nodes.setns(fd)   # this process is node A's client from here on
        os.close(fd)
        start_remote()
        start("backendA", ["/usr/bin/python3", os.path.join(HERE, "echo.py"), "A", str(PA)], NS_A, cgroup=True)
        wait_port("127.0.0.1", PA)
        log = open(os.path.join(TMP, "l7run.log"), "w")
        start("l7run", [L7RUN] + (["-v"] if os.environ.get("L7_TEST_VERBOSE") else []) + ["--mesh", "--cgroup", CG, "--pool", str(POOL), "--pin", PIN, obj], NS_A,
              cgroup=False, stderr=log)
        wait_port("127.0.0.1", SVC, 30)
        time.sleep(0.3)    # pools filled
        procs.cgroup_join(CG)   # the client's sockets are the mesh's
        failed += run_checks(CHECKS, ONLY, "%-10s", dump_state if os.environ.get("L7_TEST_VERBOSE") else None)
    finally:
        procs.cgroup_join(HOME_CG)
        procs.stop_all()
        nodes.setns(HOME_NS)
        if failed:
            print(open(os.path.join(TMP, "l7run.log")).read()[-(1 << 20 if os.environ.get("L7_TEST_VERBOSE") else 4000):])
        procs.cgroup_remove(CG)
        nodes.remove((NS_A, NS_B))
        subprocess.run(["rm", "-rf", TMP, PIN])
    left = [x for x in (CG, PIN, "/run/netns/" + NS_A, "/run/netns/" + NS_B) if os.path.exists(x)]
    if left:
        failed += 1
        print("FAIL cleanup: %s left" % ", ".join(left))
    print("%d check(s) failed" % failed if failed else "all remote mesh checks passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
