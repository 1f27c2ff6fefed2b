#!/usr/bin/env python3
"""A 10,000-rule policy the rule tables cannot hold (issue 6, tail-call splitting): every rule
tests a header value, alternating between two headers (`request.header("x-tenant") == "tN"`,
then x-team; requests carry both), so no two neighbouring rules can share a table and
l7_policy_decide cannot be one program. l7c must cut the first-match rule list into a chain of decide programs; the object
loads into the kernel (every program accepted, at most 33 in a chain), and real requests in
gateway and mesh mode get what the reference evaluator (`l7c --eval`) says for the first,
middle and last rules, for near misses and for a request no rule matches -- including a Deny of
a second policy after a Route remembered in an earlier program of the chain (deny wins) -- and
for heads of exactly 16 KiB (the limit) whose x-tenant line comes last, after ~75 other fields
(the parse half scans them all, the decide chain reads the header it found), and one byte more
(431).
With `compact` 1,000 such rules compare 40-byte values: unrolled they would not fit one
program (nor, chunked, the 512-byte stack), so l7c compares them with one bpf_strncmp call each
(the compact loop form, --explain's unroll_max 8) before it splits; the same answers.
With `table` as fifth argument the same 10,000 rules test one header (x-tenant) and the tables
pass makes them one lookup: no chain, one program per host, the same answers (issue 6: header
values in a hash map), and `l7run --metrics` counts each tenant rule's hits at its own line.
Emptying a middle slot of the chain fails closed exactly the requests that need it.
Prints the compile time, the chain and the verifier's numbers per program.

Usage: big_split.py L7C L7RUN ECHO_BACKEND MESH_ECHO [table | compact]"""
import json, os, re, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from check import check, summary  # noqa: E402
from procs import CG_ROOT, cgroup_left, cgroup_run, serving  # noqa: E402
from rawhttp import request  # noqa: E402

L7C, L7RUN, ECHO, MESH_ECHO = sys.argv[1:5]
TABLE = sys.argv[5:6] == ["table"]   # one header for all rules: a rule table, not a chain
COMPACT = sys.argv[5:6] == ["compact"]   # 1,000 rules on 40-byte values: compares call bpf_strncmp
N = 1000 if COMPACT else 10000
PAD = "-" + "p" * 36 if COMPACT else ""   # after every tenant value, in the policy and the requests
HEAD_LIMIT = 16384   # L7_MAX_HEAD: request line and header fields
PID = os.getpid()
BASE = 27000 + (PID % 400) * 4
SVC, UPS = BASE, [BASE + 1, BASE + 2]
CG = os.path.join(CG_ROOT, "l7bigsplit-%d" % PID)
WORK = tempfile.mkdtemp(prefix="l7c-bigsplit-")


def action(i):
    if i % 3 == 0:
        return "Route(request, a);"
    if i % 3 == 1:
        return "Deny(request, %d);" % (400 + i % 50)
    return 'SetHeader(request, "x-tenant-rule", "r%d");\n    Route(request, b);' % (i % 60)   # 64 mutations at most


def policy():
    rules = ["  %s (request.header(\"%s\") == \"t%d%s\") {\n    %s" % ("if" if i == 0 else "} else if",
                                                                     "x-team" if i % 2 and not TABLE else "x-tenant", i, PAD,
                                                                     action(i))
             for i in range(N)]
    return ("service front = 127.0.0.1:%d;\nupstream a = 127.0.0.1:%d;\nupstream b = 127.0.0.1:%d;\n"
            "policy tenants (act (HttpRequest request) context ('.*->front')) {\n%s\n  }\n}\n"
            "policy guard (act (HttpRequest request)) {\n  if (starts_with(request.path, \"/admin\")) {\n"
            "    Deny(request, 451);\n  }\n}\n" % (SVC, UPS[0], UPS[1], "\n".join(rules)))


def raw(path, tenant, size=0):
    """The request; with size, filler fields before x-tenant make the head exactly size bytes."""
    head = "GET %s HTTP/1.1\r\nHost: front\r\n" % path
    tail = ("x-tenant: %s%s\r\nx-team: %s%s\r\n" % (tenant, PAD, tenant, PAD) if tenant else "") + "\r\n"
    pad, i = "", 0
    while size and size > len(head) + len(pad) + len(tail):
        name = "x-pad-%03d: " % i
        room = size - len(head) - len(pad) - len(tail) - len(name) - 2
        pad += name + "p" * (room if room <= 400 else 200) + "\r\n"
        i += 1
    return (head + pad + tail).encode()


def expected(src, path, tenant, size=0):
    f = os.path.join(WORK, "req.http")
    open(f, "wb").write(raw(path, tenant, size))
    out = subprocess.run([L7C, "--eval=" + f, src], check=True, capture_output=True, text=True).stdout
    m = re.search(r"^verdict: (forward|deny|refuse) (\S+)", out, re.M)
    hdr = re.search(r"^set-header: x-tenant-rule: (\S+)", out, re.M)
    if m.group(1) == "forward":
        return 200, m.group(2), hdr.group(1) if hdr else None
    return int(m.group(2)), None, None


def tenant_line(src, tenant):
    """The line of the tenant rule a request with this x-tenant matches (l7c --eval), or None."""
    f = os.path.join(WORK, "req.http")
    open(f, "wb").write(raw("/x", tenant))
    out = subprocess.run([L7C, "--eval=" + f, src], check=True, capture_output=True, text=True).stdout
    m = re.search(r"^rule: \d+ \(line (\d+)\)", out, re.M)
    return int(m.group(1)) if m else None


def rule_hits(pin, obj, policy):
    """l7_rule_hits_total of one policy, by .l7 line."""
    text = subprocess.run([L7RUN, "--metrics", pin, obj], capture_output=True, text=True, timeout=30).stdout
    hits = {}
    for line, n in re.findall(r'l7_rule_hits_total\{rule="\d+",line="(\d+)",policy="%s"[^}]*\} (\d+)' % policy, text):
        hits[int(line)] = hits.get(int(line), 0) + int(n)
    return hits


def send(path, tenant, size=0):
    st, body = request(SVC, raw(path, tenant, size))
    return st, body.lower()


def drive(mode, cases, pin, array, chunk_of, obj=None, hits_want=None):
    for path, tenant, size, want in cases:
        st, body = send(path, tenant, size)
        m = re.search(r"backend=(\w+)", body)
        ok = st == want[0] and (st != 200 or (m and m.group(1) == want[1])) and \
            (want[2] is None or re.search(r"x-tenant-rule[:=] ?%s\n" % want[2], body))
        check(ok, "%s: %s x-tenant=%s head %s -> %d (l7c --eval: %s)" % (mode, path, tenant, size or "short", st, want))
    if not chunk_of:   # a table: no chain to break; every rule it holds counted at its own line
        got = dict((k, v) for k, v in rule_hits(pin, obj, "tenants").items() if v)
        check(got == hits_want, "%s: rule hits by line = the requests each tenant rule decided (%d lines, %d hits; "
              "got %d lines, %d hits)" % (mode, len(hits_want), sum(hits_want.values()), len(got), sum(got.values())))
        return
    # empty a middle slot: a deny decided before it still answers, a request that needs it
    # (every Route: the guard policy runs in the last program) fails closed
    mid = chunk_of // 2
    subprocess.run(["bpftool", "map", "delete", "pinned", os.path.join(pin, array), "key"] +
                   [str(b) for b in mid.to_bytes(4, "little")], check=True)
    st, _ = send("/x", "t1")
    check(st == 401, "%s: slot %d empty: rule 2's Deny, decided in program 0, still answers (%d)" % (mode, mid, st))
    st, body = send("/x", "t0")
    check(st == 503 and "backend" not in body, "%s: slot %d empty: a routed request fails closed (%d)" % (mode, mid, st))


def main():
    src, obj = os.path.join(WORK, "tenants.l7"), os.path.join(WORK, "tenants.o")
    open(src, "w").write(policy())
    t0 = time.time()
    r = subprocess.run([L7C, "--explain", "--verify", "--format=json", src, "-o", obj], capture_output=True, text=True)
    secs = time.time() - t0
    if r.returncode:
        print(r.stderr)
        check(False, "l7c --explain --verify compiles the policy")
        return 1
    ex = json.loads(r.stdout)
    progs = [p for p in ex["programs"] if not p["subprogram"]]
    chains = dict((c["host"], c["programs"]) for c in ex["chains"])
    print("%d rules: compiled, explained and verified in %.0f s; %d programs; chains: %s" %
          (N, secs, len(progs), dict((h, len(p)) for h, p in chains.items())))
    for p in progs:
        print("  %-22s insns %6d  estimated %7d  processed %7d  %s" % (p["name"], p["insns"], p["estimated_processed"],
                                                                      p["processed"], p["verifier"]))
    check(all(p["verifier"] == "accepted" for p in progs), "every program accepted by the kernel")
    nchunks = len(chains.get("l7_client_parser", []))
    placed = dict((r["id"], r["program"]) for r in ex["rules"])
    check(ex["unroll_max"] == (8 if COMPACT else 64), "compares unrolled up to %d bytes" % ex["unroll_max"])
    if TABLE:
        tables = ex["tables"]
        check(not chains and len(tables) == 1 and tables[0]["rules"] == N and len(placed) == tables[0]["decisions"] + 1,
              "one table of %d rules and one rule per decision (+ the guard policy's), no chain: %s" % (N, tables))
    else:
        check(1 < nchunks <= 33 and len(chains.get("l7_mesh_msg_prog", [])) == nchunks,
              "both hosts split into a decide chain of %d programs (at most 33)" % nchunks)
        check(placed[1].startswith("l7_gw_decide_0") and placed[N].startswith("l7_gw_decide_%d" % (nchunks - 1)),
              "--explain places rule 1 in the first decide program, rule %d in the last (%s, %s)" % (N, placed[1], placed[N]))

    picks = [0, 1, 2, N // 2 - 1, N // 2, N // 2 + 1, N - 3, N - 2, N - 1]
    cases = [("/x", "t%d" % i, 0) for i in picks]
    cases += [("/x", "t%d" % N, 0), ("/x", "t", 0), ("/x", "t10x", 0), ("/x", None, 0),   # no rule
              ("/admin/x", "t0", 0), ("/admin/x", "t%d" % (N - 1), 0)]                    # deny wins
    cases += [("/x", "t%d" % i, HEAD_LIMIT) for i in (0, 1, N // 2 + 1, N - 1)]            # 16 KiB heads
    cases += [("/x", "t0", HEAD_LIMIT + 1)]
    check(all(len(raw(p, t, z)) == z for p, t, z in cases if z), "the long heads are exactly their sizes")
    cases = [(p, t, z, expected(src, p, t, z)) for p, t, z in cases]
    want = dict(((p, t, z), w) for p, t, z, w in cases)
    check(want[("/x", "t0", 0)][:2] == (200, "a") and want[("/x", "t%d" % N, 0)][0] == 404 and
          want[("/admin/x", "t0", 0)][0] == 451 and want[("/x", "t0", HEAD_LIMIT)][:2] == (200, "a") and
          want[("/x", "t0", HEAD_LIMIT + 1)][0] == 431,
          "the reference evaluator's answers are the policy's (%s)" % [want[("/x", "t0", 0)], want[("/x", "t%d" % N, 0)]])

    hits_want = {}   # per tenant rule line: the requests (any path, a head the parser takes) it matched
    for p, t, z, w in cases:
        line = tenant_line(src, t) if t and w[0] != 431 else None
        if line:
            hits_want[line] = hits_want.get(line, 0) + 1
    with cgroup_run(CG, WORK):
        for mode in ("gateway", "mesh"):
            pin = "/sys/fs/bpf/l7c-bigsplit-%d-%s" % (PID, mode)
            log = open(os.path.join(WORK, mode + ".log"), "w")
            backends = [([sys.executable, MESH_ECHO, name, str(port)] if mode == "mesh" else
                         [sys.executable, ECHO, str(port), name], port) for name, port in zip(("a", "b"), UPS)]
            with serving(mode, L7RUN, obj, SVC, backends, log, CG, pin):
                drive(mode, cases, pin, "l7_tail_mesh" if mode == "mesh" else "map_l7_tail_gw", 0 if TABLE else nchunks,
                      obj, hits_want)
    return summary("big_split") or cgroup_left(CG)


sys.exit(main())
