#!/usr/bin/env python3
"""Smoke test of bench/examples.py --quick on two examples: real traffic in gateway and mesh mode
must give a positive data-plane time per request, counted by our own programs (each request ran
the client parser / the mesh SK_MSG program at least once), every request answered 200, and the
verifier numbers in the table must agree with a separate `l7c --explain --verify` run.

usage: examples_cost.py BUILD_DIR SRC_DIR"""
import json, os, subprocess, sys, tempfile

BUILD, SRC = sys.argv[1], sys.argv[2]
EXAMPLES = ["route.l7", "meshlib_login.l7"]
L7C = os.path.join(BUILD, "driver", "l7c")
tmp = tempfile.mkdtemp(prefix="l7excost-test-")
out_json, out_md = os.path.join(tmp, "r.json"), os.path.join(tmp, "r.md")
failures = []


def check(cond, what):
    print("%s %s" % ("ok  " if cond else "FAIL", what))
    if not cond:
        failures.append(what)


try:
    r = subprocess.run([sys.executable, os.path.join(SRC, "bench", "examples.py"), "--quick", "--build", BUILD,
                        "--only", ",".join(EXAMPLES), "--json", out_json, "--out", out_md, "--deadline", "150"],
                       capture_output=True, text=True, timeout=170)
    print(r.stdout + r.stderr)
    check(r.returncode == 0, "bench/examples.py exits 0")
    res = {x["example"]: x for x in json.load(open(out_json))["results"]}
    md = open(out_md).read()
    for ex in EXAMPLES:
        x = res[ex]
        check(not x["notes"], "%s: no notes (%s)" % (ex, x["notes"]))
        check(("| %s |" % ex) in md, "%s: a row in the Markdown table" % ex)
        check(x.get("compile_ms", 0) > 0, "%s: compile time measured" % ex)
        for mode, prog in (("gateway", "l7_client_parser"), ("mesh", "l7_mesh_msg_prog")):
            m = x.get(mode)
            if not m:
                check(False, "%s %s: measured" % (ex, mode))
                continue
            n = m["answered"]
            check(n == 300 and m["errors"] == 0 and m["statuses"] == {"200": 300},
                  "%s %s: 300 requests answered 200 (%s, %d errors)" % (ex, mode, m["statuses"], m["errors"]))
            check(0 < m["ns_per_request"] < 1e6, "%s %s: %.0f ns per request" % (ex, mode, m["ns_per_request"]))
            cnt = m["progs"].get(prog, (0, 0))[0]
            check(cnt >= n, "%s %s: %s ran %d times for %d requests" % (ex, mode, prog, cnt, n))
            mean = sum(t for _, t in m["progs"].values()) / n if n else 0
            check(len(m["rounds"]) == 3 and m["ns_per_request"] in m["rounds"] and
                  min(m["rounds"]) - 1 <= mean <= max(m["rounds"]) + 1,
                  "%s %s: median of 3 rounds %s, per-program times add up to %.0f" % (ex, mode, m["rounds"], mean))
        # the verifier's numbers against a run of our own
        d = json.loads(subprocess.run([L7C, "--explain", "--verify", "--format=json", os.path.join(SRC, "examples", ex)],
                                      capture_output=True, text=True, timeout=300).stdout)
        mine = {p["name"]: p["processed"] for p in d["programs"] if not p["subprogram"]}
        theirs = {p["name"]: p["processed"] for p in x["programs"]}
        check(set(mine) == set(theirs) and len(mine) >= 2, "%s: the same programs (%s)" % (ex, sorted(theirs)))
        for name, v in mine.items():
            t = theirs.get(name, -1)
            check(v > 0 and t > 0 and 0.5 <= t / v <= 2, "%s %s: processed %d in the table, %d by l7c" % (ex, name, t, v))
        row = [l for l in md.split("\n") if l.startswith("| %s |" % ex)][0].split("|")
        sk = [p["processed"] for p in x["programs"] if p["name"] == "l7_mesh_msg_prog"]
        check(sk and row[4].strip() == "{:,}".format(sk[0]), "%s: the mesh SK_MSG column shows %s" % (ex, row[4]))
finally:
    subprocess.run(["rm", "-rf", tmp])
print("examples_cost: %d failures" % len(failures))
sys.exit(1 if failures else 0)
