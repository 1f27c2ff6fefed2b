#!/usr/bin/python3
"""Audit mode, gateway and mesh, with real traffic through l7run (issue 16 item 2):
  - Audit(request): a request the rule would deny reaches the backend (its echo names the
    path), is counted in l7_audit_denies_total{rule,line} at the rule's line and in
    l7_dataplane_total{event="audited"} / --stats `audited`; a Deny next to it still denies;
  - l7run --audit, the same object (no recompile): the Deny's requests reach the backend too,
    each counted at the Deny's line, nothing denied; an ALLOW policy's 403 is audited as
    rule="0" (and a request no policy routes still gets 404);
  - what the kernel did agrees with `l7c --eval` (and --eval-audit): verdict and audit lines;
  - the exposition parses (prometheus_client) and `promtool check metrics` passes.
usage: test_audit.py L7C L7RUN SOURCE_DIR   (root: BPF, cgroup2; never skips)"""
import os
import re
import subprocess
import sys
import tempfile
import time

L7C, L7RUN, SRC = sys.argv[1:4]
sys.path.insert(0, os.path.join(SRC, "tests", "common"))
import procs  # noqa: E402
from rawhttp import Reader, connect  # noqa: E402
from telemetry import samples  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

PID = os.getpid()
BASE = 23000 + (PID % 400) * 20
TMP = tempfile.mkdtemp(prefix="l7audit-")
CG = os.path.join(procs.CG_ROOT, "l7audit-%d" % PID)
ECHO = os.path.join(SRC, "tests", "mesh", "echo.py")
failures = []

# line numbers matter: the metrics and --eval name them
POLICY = """import "http.l7i";
service front = 127.0.0.1:%d;
upstream app = 127.0.0.1:%d;
policy guard (
  act (HttpRequest request)
) {
  if (starts_with(request.path, "/admin")) {
    Deny(request, 403);
  } else if (starts_with(request.path, "/secret")) {
    Audit(request);
  }
}
policy staff (
  act (HttpRequest request)
  context ('.*->front')
) {
  if (!starts_with(request.path, "/staff")) {
    Allow(request);
  }
}
policy routes (
  act (HttpRequest request)
) {
  if (!starts_with(request.path, "/nowhere")) {
    Route(request, app);
  }
}
"""
LINE_DENY, LINE_AUDIT = 8, 10


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def get(port, path):
    """(status, body) of one GET on a fresh connection."""
    s = connect(port)
    try:
        s.sendall(("GET %s HTTP/1.1\r\nHost: t\r\n\r\n" % path).encode())
        st, _, body = Reader(s).framed()
        return st, body.decode(errors="replace") if isinstance(body, bytes) else str(body)
    finally:
        s.close()


def evaluate(src, path, audit):
    req = os.path.join(TMP, "req")
    with open(req, "wb") as f:
        f.write(("GET %s HTTP/1.1\r\nHost: t\r\n\r\n" % path).encode())
    r = subprocess.run([L7C, "--eval=" + req] + (["--eval-audit"] if audit else []) + [src],
                       capture_output=True, text=True, timeout=60)
    check(r.returncode == 0, "l7c --eval: %s" % r.stderr)
    return r.stdout


def scrape(port):
    return subprocess.run(["curl", "-sS", "-m", "5", "http://127.0.0.1:%d/metrics" % port],
                          capture_output=True, text=True, timeout=10).stdout


def exposition(text, where):
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    check("l7_audit_denies" in fams and fams["l7_audit_denies"].type == "counter", "%s: l7_audit_denies_total family" % where)
    r = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=30)
    check(r.returncode == 0 and not (r.stdout + r.stderr).strip(),
          "%s: promtool check metrics: exit %d %r" % (where, r.returncode, r.stdout + r.stderr))


def audits(text):
    """{(rule, line): value} of l7_audit_denies_total"""
    return {(m.group(1), int(m.group(2))): int(m.group(3))
            for m in re.finditer(r'^l7_audit_denies_total\{rule="(\d+)",line="(\d+)"\} (\d+)$', text, re.M)}


def one_run(mode, src, obj, audit, base):
    svc, pa, mport = base, base + 1, base + 2
    pin = "/sys/fs/bpf/l7audit-%d-%s-%d" % (PID, mode, audit)
    log = open(os.path.join(TMP, "l7run-%s-%d.log" % (mode, audit)), "w")
    extra = ("--metrics-listen", "127.0.0.1:%d" % mport) + (("--audit",) if audit else ())
    try:
        with procs.serving(mode, L7RUN, obj, svc, [([sys.executable, ECHO, "APP", str(pa)], pa)], log, CG, pin,
                           extra=extra):
            # path -> (status without --audit, status with it, the backend sees it)
            cases = [("/ok", 200, 200), ("/secret/a", 200, 200), ("/secret/b", 200, 200), ("/admin/x", 403, 200),
                     ("/staff/y", 403, 200), ("/nowhere", 404, 404)]
            for path, plain, audited in cases:
                want = audited if audit else plain
                st, body = get(svc, path)
                check(st == want, "%s audit=%d %s: %d, expected %d" % (mode, audit, path, st, want))
                if want == 200:
                    check("path=%s" % path in body, "%s %s: the backend saw it: %r" % (mode, path, body[:200]))
                ev = evaluate(src, path, audit)
                check(("verdict: forward app" in ev) == (want == 200), "%s: l7c --eval says %r" % (path, ev))
            time.sleep(0.2)
            text = scrape(mport)
            exposition(text, "%s audit=%d" % (mode, audit))
            got = audits(text)
            want = {("2", LINE_AUDIT): 2}
            if audit:
                want.update({("1", LINE_DENY): 1, ("0", 0): 1})
            check(got == want, "%s audit=%d: l7_audit_denies_total %s, expected %s" % (mode, audit, got, want))
            s = samples(text)
            check(s['l7_dataplane_total{event="audited"}'] == (4 if audit else 2),
                  "%s: audited %s" % (mode, s['l7_dataplane_total{event="audited"}']))
            st = procs.l7run_stats(L7RUN, pin)
            check(st["audited"] == (4 if audit else 2) and st["denied"] == (1 if audit else 3),
                  "%s audit=%d: --stats audited %d denied %d" % (mode, audit, st["audited"], st["denied"]))
    finally:
        log.close()
        if any(m == mode for m, _ in failures):
            sys.stdout.write(open(log.name).read()[-2000:])


def main():
    if os.geteuid() != 0:
        print("FAIL: needs root")
        return 1
    os.mkdir(CG)
    try:
        # the evaluator: what the kernel must do
        src = os.path.join(TMP, "eval.l7")
        with open(src, "w") as f:
            f.write(POLICY % (BASE, BASE + 1))
        ev = evaluate(src, "/secret/a", False)
        check("audit: would deny (line %d, rule 2)" % LINE_AUDIT in ev and "verdict: forward app" in ev, "--eval: %r" % ev)
        ev = evaluate(src, "/admin/x", True)
        check("audit: would deny (line %d, rule 1)" % LINE_DENY in ev and "verdict: forward app" in ev, "--eval-audit: %r" % ev)
        ex = subprocess.run([L7C, "--explain", src, "-o", os.path.join(TMP, "x.o")], capture_output=True, text=True, timeout=60)
        check(re.search(r"^2\s+%d\s+guard .*audit \(a deny not enforced\)" % LINE_AUDIT, ex.stdout, re.M), "--explain shows the audit rule: %r" % ex.stdout)
        for i, mode in enumerate(("gateway", "mesh")):
            base = BASE + 4 + i * 6
            src = os.path.join(TMP, "audit-%s.l7" % mode)
            with open(src, "w") as f:
                f.write(POLICY % (base, base + 1))
            obj = src[:-3] + ".o"
            subprocess.run([L7C, src, "-o", obj], check=True, timeout=120)
            for audit in (0, 1):   # one object, both ways
                name = "%s audit=%d" % (mode, audit)
                t = time.time()
                try:
                    one_run(mode, src, obj, audit, base)
                    print("PASS %-18s %.2fs" % (name, time.time() - t), flush=True)
                except Exception as e:  # noqa: BLE001 - report every check
                    failures.append((mode, audit))
                    print("FAIL %-18s %s" % (name, e), flush=True)
    except Exception as e:  # noqa: BLE001
        failures.append(("setup", 0))
        print("FAIL setup: %s" % e, flush=True)
    finally:
        procs.stop_all()
        check(procs.cgroup_remove(CG), "cgroup %s removed" % CG)
        subprocess.run(["rm", "-rf", TMP])
    print("%d failed" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
