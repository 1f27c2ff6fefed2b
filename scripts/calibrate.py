#!/usr/bin/python3
"""Calibrates l7c's verifier budget model (driver/budget.c, driver/calib.h) against the running
kernel: compiles a corpus of policies (every example, social_network split four ways, one rule
of 100 Limits, and bench/scaling.py's RBAC and routes policies at 10..10,000 rules), loads every program with
`l7c --explain --verify` (root), and writes what the verifier processed as a table l7c reads.

The verifier is deterministic for a given program and kernel, so the table keeps, per program:
  e NAME CODE PROCESSED      the program as loaded (its instructions' hash): its exact count
  c NAME MACHINERY COST RATE a machinery configuration (the hash of the machinery's source
                             lines the program holds): COST + RATE * the policy's own walk
  f NAME FEATURES COST RATE  the same for the configurations whose programs reach the same
                             functions (the features the policy selected)
  m NAME MACHINERY MODEL PROCESSED  any configuration: the configuration of the nearest structural
                             estimate MODEL, scaled: PROCESSED * estimate / MODEL, but at least
                             the structural estimate
  p NAME - RATIO RATE        the program's median count / structural estimate, and RATE
RATE is one per program name: the processed instructions per instruction of the policy's own
walk, fitted across the corpus's configurations that hold policies of different sizes (pooled
least squares of the deviations from each configuration's mean); COST is each configuration's
mean count less RATE times its mean walk; RATIO (informative) the median of count / structural estimate.
The first line names the kernel release: l7c uses a table only on that kernel (built) or its
major.minor (shipped, driver/calibration/).

Usage: calibrate.py L7C OUT.tsv [--raw RAW.jsonl | --from RAW.jsonl] [--loo]
  --raw   also writes every measured program (one JSON object a line)
  --from  fits the programs of an earlier --raw file instead of measuring
  --loo   prints the model's error per program with each corpus policy left out of the fit
          (what a policy l7c was not calibrated on can expect), and writes nothing else."""
import json, math, os, statistics, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, os.path.join(ROOT, "tests", "common"))
import scaling  # noqa: E402

SIZES = (10, 100, 1000, 10000)   # bench/scaling.py's
MAX_RATE = 50   # processed per instruction of the policy's walk: the mesh program walks its own 25-55 times


def limits_policy():
    """One rule of 100 keyed Limits: its longest jump is past its reach once patched, and l7c
    cuts it (tests/kernel/explain.sh)."""
    return ("service s = 127.0.0.1:1;\nupstream a = 127.0.0.1:2;\nTokenBucket b { rate = 1000; }\n"
            "policy p (act (HttpRequest request) using (TokenBucket b)) {\n  if (starts_with(request.path, \"/x\")) {\n" +
            "".join("    Limit(b, request.header(\"x-u%d\"));\n" % (i % 12) for i in range(100)) +
            "    Route(request, a);\n  }\n}\n")


def corpus(d):
    """(label, l7c arguments) of every policy measured."""
    ex = os.path.join(ROOT, "examples")
    out = [(f, [os.path.join(ex, f)]) for f in sorted(os.listdir(ex)) if f.endswith(".l7")]
    sn = os.path.join(ex, "social_network.l7")
    out += [("social_network.l7 --budget=100000", ["--budget=100000", sn]),
            ("social_network.l7 --budget=80000", ["--budget=80000", sn]),
            ("social_network.l7 --split=rules", ["--split=rules", sn]),
            ("social_network.l7 --split=parse", ["--split=parse", sn])]
    f = os.path.join(d, "limits100.l7")
    open(f, "w").write(limits_policy())
    out.append(("one rule of 100 Limits", [f]))
    for n in SIZES:
        for series, text in (("rbac", scaling.rbac_policy(n)), ("routes", scaling.routes_policy(n))):
            f = os.path.join(d, "%s%d.l7" % (series, n))
            open(f, "w").write(text)
            out.append(("scaling %s %d" % (series, n), [f]))
    return out


def measure(l7c, label, args, table="none", verify=True):
    """The programs of one policy as the structural model and the kernel see them (verify=False:
    only the programs, as l7c splits them with `table`)."""
    env = dict(os.environ, L7C_CALIBRATION=table)
    r = subprocess.run([l7c, "--explain", "--format=json"] + (["--verify"] if verify else []) + args, capture_output=True,
                       text=True, env=env)
    if r.returncode:
        sys.exit("calibrate: %s: l7c --explain --verify failed: %s" % (label, r.stderr.strip()[-400:]))
    d = json.loads(r.stdout)
    rows = []
    for p in d["programs"]:
        if p["subprogram"]:
            continue
        if verify and (p["verifier"] != "accepted" or p["processed"] <= 0):
            sys.exit("calibrate: %s: %s: %s" % (label, p["name"], p["verifier"]))
        rows.append(dict(policy=label, name=p["name"], code=p["code"], machinery=p["machinery"], features=p["features"], walk=p["policy_walk"],
                         model=p["model_estimate"], processed=p["processed"]))
    return rows


def kind(name):
    """A decide program's kind without its index (driver/calib.c calib_kind_len)."""
    return name[:name.index("_decide_") + 8] if "_decide_" in name else name


def fit(rows):
    """The table's rows: [(kind, name, key, a, b)]; config and program rows by the program's kind."""
    out, names = [], sorted(set(kind(r["name"]) for r in rows))
    for name in names:
        mine = [r for r in rows if kind(r["name"]) == name]
        groups = {}
        for r in mine:
            groups.setdefault(r["machinery"], []).append(r)
        sxy = sxx = 0.0
        for g in groups.values():
            mw = statistics.mean(r["walk"] for r in g)
            mp = statistics.mean(r["processed"] for r in g)
            for r in g:
                sxy += (r["walk"] - mw) * (r["processed"] - mp)
                sxx += (r["walk"] - mw) ** 2
        # at most MAX_RATE: a slope fitted on a few programs of nearly one size is noise
        rate = min(MAX_RATE, max(0.0, sxy / sxx)) if sxx > 0 else 1.0
        ratio = statistics.median(r["processed"] / max(r["model"], 1) for r in mine)
        out.append(("p", name, "-", ratio, rate))
        for key, g in sorted(groups.items()):
            cost = statistics.mean(r["processed"] for r in g) - rate * statistics.mean(r["walk"] for r in g)
            out.append(("c", name, key, cost, rate))
        for key, g in sorted(groups.items()):   # the nearest by the structural estimate
            out.append(("m", name, key, statistics.mean(r["model"] for r in g), statistics.mean(r["processed"] for r in g)))
        feats = {}
        for r in mine:
            feats.setdefault(r["features"], []).append(r)
        for key, g in sorted(feats.items()):
            cost = statistics.mean(r["processed"] for r in g) - rate * statistics.mean(r["walk"] for r in g)
            out.append(("f", name, key, cost, rate))
        seen = {}
        for r in mine:
            seen.setdefault((r["name"], r["code"]), r["processed"])
        out += [("e", n, code, p, 0) for (n, code), p in sorted(seen.items())]
    return out


def predict(table, r):
    """What l7c (budget.c calibrate) estimates for a measured program from the table."""
    t = dict(((k, n, key), (a, b)) for k, n, key, a, b in table)
    if ("e", r["name"], r["code"]) in t:
        return t[("e", r["name"], r["code"])][0], "exact"
    if ("c", kind(r["name"]), r["machinery"]) in t:
        a, b = t[("c", kind(r["name"]), r["machinery"])]
        return a + b * r["walk"], "config"
    if ("f", kind(r["name"]), r["features"]) in t:
        a, b = t[("f", kind(r["name"]), r["features"])]
        return a + b * r["walk"], "features"
    near = [(abs(math.log(max(r["model"], 1) / max(a, 1))), a, b) for k, n, key, a, b in table if k == "m" and n == kind(r["name"])]
    if near:
        _, a, b = min(near)
        return max(b * r["model"] / max(a, 1), r["model"]), "program"
    return r["model"], "none"


def write(path, rows):
    with open(path + ".tmp", "w") as f:
        f.write("# l7c verifier calibration (scripts/calibrate.py): %d programs of %d policies, %s\n" %
                (len(rows), len(set(r["policy"] for r in rows)), time.strftime("%Y-%m-%d", time.gmtime())))
        f.write("release %s\n" % os.uname().release)
        for k, name, key, a, b in fit(rows):
            f.write("%s %s %s %.10g %.6g\n" % (k, name, key, a, b))
    os.replace(path + ".tmp", path)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    l7c, out = sys.argv[1], sys.argv[2]
    raw = sys.argv[sys.argv.index("--raw") + 1] if "--raw" in sys.argv else None
    rows, t0 = [], time.time()
    if "--from" in sys.argv:   # a --raw file of an earlier run: fit again without measuring
        rows = [json.loads(l) for l in open(sys.argv[sys.argv.index("--from") + 1])]
    else:
        with tempfile.TemporaryDirectory() as d:
            policies = corpus(d)
            for label, args in policies:
                rows += measure(l7c, label, args)
                print("calibrate: %s (%.0f s)" % (label, time.time() - t0), file=sys.stderr, flush=True)
            # with the table, the splitter may cut a policy otherwise: measure the programs it
            # makes then too, until it makes none the table does not hold
            for _ in range(3):
                write(os.path.join(d, "table.tsv"), rows)
                known = set((r["name"], r["code"]) for r in rows)
                new = [(label, args) for label, args in policies
                       if any((x["name"], x["code"]) not in known for x in measure(l7c, label, args, os.path.join(d, "table.tsv"), False))]
                for label, args in new:
                    rows += measure(l7c, label, args, os.path.join(d, "table.tsv"))
                    print("calibrate: %s as split with the table (%.0f s)" % (label, time.time() - t0), file=sys.stderr, flush=True)
                if not new:
                    break
    if raw:
        with open(raw, "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
    if "--loo" in sys.argv:
        errs = []
        for pol in sorted(set(r["policy"] for r in rows)):
            table = fit([r for r in rows if r["policy"] != pol])
            for r in rows:
                if r["policy"] == pol:
                    est, how = predict(table, r)
                    e = (est - r["processed"]) / r["processed"]
                    errs.append(abs(e))
                    print("%-36s %-22s %8d %8d %+6.1f%% %s" % (pol, r["name"], est, r["processed"], 100 * e, how))
        print("left-out error over %d programs: mean %.1f%%, max %.1f%%" % (len(errs), 100 * statistics.mean(errs), 100 * max(errs)))
        return
    write(out, rows)
    print("calibrate: %s: %d programs of kernel %s in %.0f s" % (out, len(rows), os.uname().release, time.time() - t0), file=sys.stderr)


if __name__ == "__main__":
    main()
