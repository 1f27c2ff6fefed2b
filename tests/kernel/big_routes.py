#!/usr/bin/env python3
"""A routing table of 2,000 rules in one policy (tests/common/routegen.py): method + exact path
or prefix, each rule with its own action (Route to one of six echo backends, every 7th a Deny
with a status), including the cases a lookup table can get wrong: prefixes covering later exact
paths and prefixes, nested prefixes either way round, one path with several methods,
method-less rules before and after method rules, exact paths past 64 bytes that share their
first 64 bytes. The object loads (every program accepted), and real requests in gateway and
mesh mode get what the reference evaluator says -- status, and for a 200 the backend that
answered: the first, middle and last rules, every special case, near misses (another method,
the path a byte longer or shorter) and ~200 random rule paths.

The oracle is `l7c --eval --passes=none` (the policy as written, first match over every rule);
`l7c --eval` after the default passes must agree with it (a pass that changes a decision is a
bug of its own). Prints the compile time, each program's verifier count and the chains.

Usage: big_routes.py L7C L7RUN ECHO_BACKEND MESH_ECHO   (ROUTES_SEED=N: the random picks)"""
import json, os, random, re, subprocess, sys, tempfile, time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from check import check, summary  # noqa: E402
from procs import CG_ROOT, cgroup_left, cgroup_run, serving  # noqa: E402
from rawhttp import request  # noqa: E402
import routegen  # noqa: E402

L7C, L7RUN, ECHO, MESH_ECHO = sys.argv[1:5]
N, NUP, NRANDOM = 2000, 6, 200
PID = os.getpid()
BASE = 28700 + (PID % 500) * 8          # 28700..32699: below the ephemeral range (32768-)
SVC, UPS = BASE, [BASE + 1 + k for k in range(NUP)]
CG = os.path.join(CG_ROOT, "l7bigroutes-%d" % PID)
WORK = tempfile.mkdtemp(prefix="l7c-bigroutes-")
SEED = int(os.environ.get("ROUTES_SEED", PID))


def raw(method, path):
    return ("%s %s HTTP/1.1\r\nHost: front\r\n\r\n" % (method, path)).encode()


def evaluate(src, method, path, passes):
    """(status, backend or None, rule) by l7c --eval; passes: None for the default passes."""
    fd, f = tempfile.mkstemp(suffix=".http", dir=WORK)
    os.write(fd, raw(method, path))
    os.close(fd)
    args = [L7C, "--eval=" + f, src] + (["--passes=" + passes] if passes else [])
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    os.unlink(f)
    m = re.search(r"^verdict: (forward|deny) (\S+)", out, re.M)
    if not m:
        return (-1, out.strip().replace("\n", "; "), None)
    rule = re.search(r"^rule: (\d+)", out, re.M)
    rule = int(rule.group(1)) if rule else None
    return (200, m.group(2), rule) if m.group(1) == "forward" else (int(m.group(2)), None, rule)


def cases(rs):
    """[(method, path, what)]: what each request is there for."""
    out = []
    other = lambda m: routegen.METHODS[(routegen.METHODS.index(m) + 1) % 4] if m else "GET"   # noqa: E731

    def hit(i, what, rnd=None):
        r = rs[i]
        m = r.method or (rnd.choice(routegen.METHODS) if rnd else "POST")
        out.append((m, r.path + ("deeper/x%d" % i if r.prefix else ""), "%s (rule %d)" % (what, i + 1)))

    for i, what in ((0, "first rule"), (1, "second rule"), (N // 2 - 1, "a middle rule"), (N - 2, "last rule but one"),
                    (N - 1, "last rule")):
        hit(i, what)
    for i, r in sorted(routegen.specials(N, NUP).items()):
        ms = [r.method] if r.method else ["GET", "DELETE"]
        for m in ms + [other(r.method)]:
            out.append((m, r.path + ("x" if r.prefix else ""), "special rule %d %s, %s" % (i + 1, r.cond(), m)))
        out.append((ms[0], r.path[:-1], "special rule %d, path a byte shorter" % (i + 1)))
        out.append((ms[0], r.path + "x/deeper/y", "special rule %d, a longer path" % (i + 1)))
    L = routegen.LONG
    out += [("GET", L, "the long prefix's path without its /"), ("DELETE", L, "LONG, covered by the 64-byte DELETE prefix"),
            ("GET", L[:63], "63 bytes of LONG"), ("GET", L[:65], "65 bytes of LONG"),
            ("GET", L + "/on", "LONG/on: only the long prefix"), ("GET", L + "/three", "LONG/three"),
            ("DELETE", L + "/one", "DELETE LONG/one: the 64-byte prefix"),
            ("GET", "/nowhere", "no rule"), ("GET", "/", "no rule, the root"), ("GET", "/r", "no rule, /r")]
    rnd = random.Random(SEED)
    for i in (1, 2, N // 2 - 1, N - 1) + tuple(rnd.randrange(N) for _ in range(6)):   # near misses
        r = rs[i]
        if r.method:
            out.append((other(r.method), r.path, "rule %d's path, another method" % (i + 1)))
        if not r.prefix:
            out.append((r.method or "GET", r.path + "x", "rule %d's exact path plus a byte" % (i + 1)))
        out.append((r.method or "GET", r.path[:-1], "rule %d's path less a byte" % (i + 1)))
    for _ in range(NRANDOM):
        hit(rnd.randrange(N), "random", rnd)
    seen, uniq = set(), []
    for m, p, w in out:
        if (m, p) not in seen:
            seen.add((m, p))
            uniq.append((m, p, w))
    return uniq


def drive(mode, todo):
    for m, p, what, want in todo:
        st, body = request(SVC, raw(m, p))
        b = re.search(r"backend=(\w+)", body)
        got = (st, b.group(1) if st == 200 and b else None)
        check(got == want[:2], "%s: %s %s -> %s, l7c --eval: %s (rule %s; %s)" % (mode, m, p, got, want[:2], want[2], what))


def main():
    rs = routegen.rules(N, NUP)
    src, obj = os.path.join(WORK, "big.l7"), os.path.join(WORK, "big.o")
    open(src, "w").write(routegen.policy(rs, SVC, UPS))
    print("seed %d (ROUTES_SEED)" % SEED)
    t0 = time.time()
    r = subprocess.run([L7C, src, "-o", obj], capture_output=True, text=True)
    compile_s = time.time() - t0
    if not check(r.returncode == 0, "l7c compiles %d route rules in %.1f s" % (N, compile_s)):
        print(r.stderr[-3000:])
        return summary("big_routes")
    t0 = time.time()
    r = subprocess.run([L7C, "--explain", "--verify", "--format=json", src], capture_output=True, text=True)
    if not check(r.returncode == 0, "l7c --explain --verify (%.0f s)" % (time.time() - t0)):
        print(r.stderr[-3000:])
        return summary("big_routes")
    ex = json.loads(r.stdout)
    progs = [p for p in ex["programs"] if not p["subprogram"]]
    chains = dict((c["host"], c["programs"]) for c in ex["chains"])
    print("%d rules: compile %.2f s; %d programs; decide chains: %s" % (
        N, compile_s, len(progs), ", ".join("%s %d" % (h, len(p)) for h, p in chains.items()) or "none (unsplit)"))
    for p in progs:
        print("  %-22s insns %6d  estimated %7d  processed %7d  %s" % (p["name"], p["insns"], p["estimated_processed"],
                                                                      p["processed"], p["verifier"]))
    print("rule tables: %s" % ("; ".join("%d rules (lines %d-%d, %d decisions)" % (
        t["rules"], t["first_line"], t["last_line"], t["decisions"]) for t in ex.get("tables", [])) or "none"))
    byname = dict((p["name"], p) for p in progs)
    for host, mode in (("l7_client_parser", "gateway"), ("l7_mesh_msg_prog", "mesh")):
        run = [byname[host]] + [byname[c] for c in chains.get(host, [])]
        print("%s: %s and %d decide programs: processed sum %d, max %d" % (
            mode, host, len(run) - 1, sum(p["processed"] for p in run), max(p["processed"] for p in run)))
    check(all(p["verifier"] == "accepted" for p in progs), "every program accepted by the kernel")

    todo = cases(rs)
    with ThreadPoolExecutor(2) as pool:
        ref = list(pool.map(lambda c: evaluate(src, c[0], c[1], "none"), todo))
        opt = list(pool.map(lambda c: evaluate(src, c[0], c[1], None), todo))
    bad = [(c, a, b) for c, a, b in zip(todo, ref, opt) if a[:2] != b[:2]]
    check(not bad, "l7c --eval after the passes agrees with --passes=none on all %d requests%s" % (
        len(todo), "".join("\n    %s %s: %s vs %s" % (c[0], c[1], b, a) for c, a, b in bad)))
    check(all(a[0] > 0 for a in ref), "the evaluator decides every request")
    todo = [(m, p, w, e) for (m, p, w), e in zip(todo, ref)]
    tally = {}
    for *_, e in todo:
        tally[e[1] or e[0]] = tally.get(e[1] or e[0], 0) + 1
    print("%d requests; expected answers: %s" % (len(todo), ", ".join("%s %d" % kv for kv in sorted(tally.items(), key=str))))
    check(len([k for k in tally if str(k).startswith("u")]) == NUP and 404 in tally and len(tally) >= NUP + 3,
          "the requests reach every backend, the default 404 and denies")

    with cgroup_run(CG, WORK):
        for mode in ("gateway", "mesh"):
            pin = "/sys/fs/bpf/l7c-bigroutes-%d-%s" % (PID, mode)
            log = open(os.path.join(WORK, mode + ".log"), "w")
            backends = [([sys.executable, MESH_ECHO, "u%d" % k, str(port)] if mode == "mesh" else
                         [sys.executable, ECHO, str(port), "u%d" % k], port) for k, port in enumerate(UPS)]
            with serving(mode, L7RUN, obj, SVC, backends, log, CG, pin, up_timeout=90):
                t0 = time.time()
                drive(mode, todo)
                print("%s: %d requests in %.1f s" % (mode, len(todo), time.time() - t0))
    return summary("big_routes") or cgroup_left(CG)


sys.exit(main())
