#!/usr/bin/python3
"""Generated policies that mix every declaration, predicate and action docs/language.md lists
(tests/common/featuregen.py) at 50, 100, 150 and 200 rules (issue 12: a 132-rule mix compiled
with exit 0 into six decide programs of 31.5K-32.4K instructions that the kernel refused, "insn
N cannot be patched due to 16-bit range"). For each size:
  - `l7c --explain --verify` exits 0: every program is loaded and attached as l7run would, and
    each program's worst against the kernel's limits (--explain's "limits") is within them;
  - `l7c` writes the same object (exit 0);
  - l7run serves it in gateway and in mesh mode, and one request written for each kind of rule
    (and the default, RBAC's 403 and its admin pass) gets what `l7c --eval` says: the status,
    the backend (for a hashed set, the endpoint) and the request header lines the policy adds
    and removes.
Prints per size the compile and verify time, the programs and the verifier's numbers.

Usage: feature_mix.py L7C L7RUN ECHO_BACKEND MESH_ECHO KEY_FILE [SIZES...]"""
import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from check import check, summary  # noqa: E402
from procs import CG_ROOT, cgroup_left, cgroup_run, serving  # noqa: E402
from rawhttp import request  # noqa: E402
import featuregen  # noqa: E402

L7C, L7RUN, ECHO, MESH_ECHO, KEY = sys.argv[1:6]
SIZES = [int(n) for n in sys.argv[6:]] or [50, 100, 150, 200]
PID = os.getpid()
BASE = 25000 + (PID % 900) * 8          # 25000..32199: below the ephemeral range
SVC, UPS, POOL, FB = BASE, [BASE + 1, BASE + 2, BASE + 3], [BASE + 4, BASE + 5], BASE + 6
CG = os.path.join(CG_ROOT, "l7featuremix-%d" % PID)
WORK = tempfile.mkdtemp(prefix="l7c-featuremix-")
# backend name per port: what `l7c --eval` calls the upstream (pool#i: the endpoint of the set)
NAMES = dict([(p, "u%d" % i) for i, p in enumerate(UPS)] + [(p, "pool%d" % i) for i, p in enumerate(POOL)] + [(FB, "proxy")])


def evaluate(src, raw):
    """(status, backend name or None, [added request lines], [removed request names]) by l7c --eval."""
    f = os.path.join(WORK, "req.http")
    open(f, "wb").write(raw)
    out = subprocess.run([L7C, "--eval=" + f, src], capture_output=True, text=True, timeout=60).stdout
    v = re.search(r"^verdict: (forward|deny|fallback|refuse) (\S+)", out, re.M)
    if not v:
        return None
    adds = re.findall(r"^request-add: (\S+): (\S+)$", out, re.M)
    removes = re.findall(r"^request-remove: (\S+)$", out, re.M)
    if v.group(1) == "deny" or v.group(1) == "refuse":
        return int(v.group(2)), None, adds, removes
    ep = re.search(r"^endpoint: (\w+)#(\d+) ", out, re.M)
    return 200, ("%s%s" % (ep.group(1), ep.group(2)) if ep else v.group(2)), adds, removes


def cases(rules):
    """(what, raw request): one rule of each kind (the first), the last rule, and the rest of
    the file's policies."""
    picked, seen = [], set()
    for r in rules:
        if r.k not in seen or r is rules[-1]:
            seen.add(r.k)
            picked.append(("rule %d (kind %d, %s)" % (r.i, r.k, r.prefix), r.request()))
    picked += [("no rule of the mix: the default route", b"GET /nothing HTTP/1.1\r\nHost: front\r\n\r\n"),
               ("RBAC: /private/ without x-role admin", b"GET /private/a HTTP/1.1\r\nHost: front\r\n\r\n"),
               ("RBAC: /private/ as admin", b"GET /private/a HTTP/1.1\r\nHost: front\r\nx-role: admin\r\n\r\n"),
               ("hygiene: a /static/ path", b"GET /static/app.css HTTP/1.1\r\nHost: front\r\nx-internal: s\r\n\r\n")]
    return picked


def serve_and_check(mode, obj, want):
    pin = "/sys/fs/bpf/l7c-featuremix-%d-%s" % (PID, mode)
    log = open(os.path.join(WORK, mode + ".log"), "w")
    backends = [([sys.executable, MESH_ECHO, NAMES[p], str(p)] if mode == "mesh" else [sys.executable, ECHO, str(p), NAMES[p]], p)
                for p in UPS + POOL + [FB]]
    with serving(mode, L7RUN, obj, SVC, backends, log, CG, pin):
        for what, raw, (status, backend, adds, removes) in want:
            st, body = request(SVC, raw)
            low = body.lower()
            got = re.search(r"backend=(\w+)", low)
            ok = st == status and (status != 200 or (got and got.group(1) == backend))
            ok = ok and all(re.search(r"%s[:=] ?%s\n" % (re.escape(n.lower()), re.escape(v.lower())), low)
                            for n, v in adds) if status == 200 else ok
            ok = ok and not any(re.search(r"(^|\n)(header=|h:)%s[:=]" % re.escape(n.lower()), low)
                                for n in removes if n.lower() not in [a[0].lower() for a in adds]) if status == 200 else ok
            check(ok, "%s: %s -> %d %s (l7c --eval: %d %s, adds %s, removes %s)" %
                  (mode, what, st, got.group(1) if got else "-", status, backend, adds, removes))


def one_size(n):
    rules = featuregen.rules(n, SVC)
    src, obj = os.path.join(WORK, "mix%d.l7" % n), os.path.join(WORK, "mix%d.o" % n)
    open(src, "w").write(featuregen.policy(rules, SVC, UPS, POOL, FB, KEY))
    t0 = time.time()
    r = subprocess.run([L7C, "--explain", "--verify", "--format=json", src, "-o", obj], capture_output=True, text=True,
                       timeout=900)
    secs = time.time() - t0
    if not check(r.returncode == 0, "%d rules: l7c --explain --verify exits 0 (%d, %.0f s)" % (n, r.returncode, secs)):
        print(r.stderr[-3000:])
        if not r.stdout:
            return
    ex = json.loads(r.stdout)
    progs = [p for p in ex["programs"] if not p["subprogram"]]
    chains = dict((c["host"], len(c["programs"])) for c in ex["chains"])
    print("%d rules (%d in the IR): compiled, explained and verified in %.0f s; %d programs; chains %s" %
          (n, len(ex["rules"]), secs, len(progs), chains))
    for p in progs:
        if p["insns"] > 1000:
            print("  %-22s insns %6d (patched est. %6d)  estimated %7d  processed %7d  stack %3d  %s" %
                  (p["name"], p["insns"], p.get("patched", -1), p["estimated_processed"], p["processed"],
                   p.get("chain_stack", -1), p["verifier"]))
    check(all(p["verifier"] == "accepted" for p in progs), "%d rules: every program accepted by the kernel" % n)
    attach = [p for p in progs if p.get("attach")]
    check("verify" in ex and ex["verify"]["attach_refused"] == 0 and all(p["attach"]["attached"] for p in attach) and
          len(attach) == len(progs), "%d rules: every program attached as l7run would (%d, %s)" %
          (n, len(attach), [(p["name"], p.get("attach") and p["attach"]["error"]) for p in progs
                                                       if not (p.get("attach") or {}).get("attached")]))
    over = [l for l in ex.get("limits", []) if l["worst"] > l["limit"]]
    check("limits" in ex and not over, "%d rules: within every kernel limit (%s)" % (n, ", ".join("%s %d/%d %s" % (l["id"], l["worst"], l["limit"], l["program"])
                                                                               for l in ex.get("limits", []))))
    plain = subprocess.run([L7C, src, "-o", obj + ".plain"], capture_output=True, text=True, timeout=900)
    check(plain.returncode == 0 and os.path.getsize(obj + ".plain") > 0, "%d rules: l7c writes the object (exit %d)" %
          (n, plain.returncode))
    if not os.path.exists(obj):
        return
    want = [(what, raw, evaluate(src, raw)) for what, raw in cases(rules)]
    check(all(w[2] for w in want), "%d rules: l7c --eval decides every request" % n)
    kinds = set(w[2][0] for w in want if w[2])
    check({200, 403}.issubset(kinds), "%d rules: the requests are routed and denied (%s)" % (n, sorted(kinds)))
    for mode in ("gateway", "mesh"):
        try:
            serve_and_check(mode, obj, [w for w in want if w[2]])
        except RuntimeError as e:   # l7run refused the object
            check(False, "%d rules: l7run serves it in %s mode: %s" % (n, mode, str(e)[-300:]))


def main():
    with cgroup_run(CG, WORK):
        for n in SIZES:
            t0 = time.time()
            one_size(n)
            print("%d rules: %.0f s in all" % (n, time.time() - t0))
    return summary("feature_mix") or cgroup_left(CG)


sys.exit(main())
