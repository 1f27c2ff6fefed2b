#!/usr/bin/env python3
"""l7c's compile time (issue 18): every example, and bench/scaling.py's RBAC and routes series
at 1,000 and 10,000 rules; per l7c binary given, per --mode; wall and CPU seconds, the median
of --runs runs (default 5).

  bench/compile_time.py [--runs N] [--modes both,gateway,mesh] [--sizes 1000,10000] L7C [L7C_BEFORE]

With two binaries (e.g. main's build and this branch's) their runs alternate, round by round,
so that a loaded machine weighs on both alike, and the table gives their CPU times' ratio (the
number to read on a shared machine: wall time there is mostly waiting for a core). Prints a
Markdown table. Every policy is compiled into a temporary directory; nothing is loaded."""
import argparse, os, resource, statistics, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.argv, argv = sys.argv[:1], sys.argv   # scaling.py reads its own arguments at import
import scaling  # noqa: E402
sys.argv = argv

ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
ap.add_argument("l7c", nargs="+", help="the l7c binaries: the one measured, then optionally the one compared with")
ap.add_argument("--runs", type=int, default=5)
ap.add_argument("--modes", default="both")
ap.add_argument("--sizes", default="1000,10000")
ap.add_argument("--only", default="", help="comma-separated example names (default all)")
a = ap.parse_args()
a.l7c = [os.path.abspath(x) for x in a.l7c]
examples = os.path.join(os.path.dirname(HERE), "examples")


def one(l7c, src, mode, out):
    """(wall, cpu) seconds of one compile; cpu is the child's user + system time"""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.monotonic()
    flag = [] if mode == "both" else ["--mode=" + mode]   # both: the default, also of an l7c without --mode
    r = subprocess.run([l7c] + flag + [src, "-o", out], cwd=os.path.dirname(src), capture_output=True, text=True)
    wall = time.monotonic() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode:
        sys.exit("%s --mode=%s %s: exit %d\n%s" % (l7c, mode, src, r.returncode, r.stderr))
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


with tempfile.TemporaryDirectory() as d:
    cases = []
    only = set(x for x in a.only.split(",") if x)
    for f in sorted(os.listdir(examples)):
        if f.endswith(".l7") and (not only or f[:-3] in only):
            cases.append((f[:-3], os.path.join(examples, f)))
    for n in [int(x) for x in a.sizes.split(",") if x]:
        for series, gen in (("rbac", scaling.rbac_policy), ("routes", scaling.routes_policy)):
            src = os.path.join(d, "%s_%d.l7" % (series, n))
            with open(src, "w") as f:
                f.write(gen(n))
            cases.append(("%s %d rules" % (series, n), src))
    modes = a.modes.split(",")
    head = "| policy | mode | wall s | CPU s |" + (" before: wall s | CPU s | CPU ratio |" if len(a.l7c) > 1 else "")
    print(head)
    print("|" + "|".join(["---"] * (head.count("|") - 1)) + "|")
    for name, src in cases:
        for mode in modes:
            times = [[] for _ in a.l7c]
            for _ in range(a.runs):
                for i, l7c in enumerate(a.l7c):
                    if i and mode != "both":
                        continue   # the binary compared with may not know --mode
                    times[i].append(one(l7c, src, mode, os.path.join(d, "p.o")))
            med = [(statistics.median(w for w, _ in t), statistics.median(c for _, c in t)) if t else None for t in times]
            row = "| %s | %s | %.3f | %.3f |" % (name, mode, med[0][0], med[0][1])
            if len(a.l7c) > 1:
                row += " %.3f | %.3f | %.2f |" % (med[1][0], med[1][1], med[0][1] / med[1][1]) if med[1] else " - | - | - |"
            print(row, flush=True)
