#!/usr/bin/python3
"""l7run's command line:
  - `--help` (and -h) prints to stdout and exits 0, listing every option of runtime/options.def
    (the table getopt_long is built from) with its argument, and every counter of counters.def
    with what it counts; every option is accepted by the parser, and no source file of runtime/
    matches an option string the table lacks (watch.c: or l7c's, which it runs); a usage error goes to stderr with exit 2;
  - `l7run --mesh ... POLICY.o -- CMD [ARGS]` runs CMD inside the cgroup once the programs are
    attached: a curl run so gets its answer through the kernel (the mesh counters move, and
    nothing is relayed from outside the cgroup), and l7run exits with CMD's status;
  - SIGTERM and SIGINT go on to CMD, and l7run exits with its status when it ends (128 + the
    signal that killed it), having cleaned up (pins, the cgroup it created).
usage: test_cli.py L7C L7RUN SOURCE_DIR   (root: BPF, cgroup2; never skips)"""
import glob
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

L7C, L7RUN, SRC = sys.argv[1:4]
sys.path.insert(0, os.path.join(SRC, "tests", "common"))
import procs  # noqa: E402
from policy import policy  # noqa: E402

PID = os.getpid()
BASE = 22000 + (PID % 500) * 10
SVC, PA = BASE, BASE + 1
TMP = tempfile.mkdtemp(prefix="l7cli-")
failures = []

OPTIONS_DEF = open(os.path.join(SRC, "runtime", "options.def")).read()
OPTIONS = re.findall(r'^L7_OPT\(\s*\w+,\s*"([\w-]+)",\s*(?:\'(\w)\'|0),\s*(?:NULL|"([^"]*)")', OPTIONS_DEF, re.M)

POLICY = policy("cli", SVC, [("a", PA)], """\
  if (starts_with(request.path, "/admin")) {
    Deny(request, 403);
  }
  SetHeader(request, "x-l7-cli", "yes");
  Route(request, a);
""")


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def l7run(*args, timeout=30):
    return subprocess.run([L7RUN, *args], capture_output=True, text=True, timeout=timeout)


def t_help():
    check(len(OPTIONS) >= 20, "options.def read: %s" % OPTIONS)
    r = l7run("--help")
    check(r.returncode == 0 and r.stdout and not r.stderr, "--help: exit %d, stderr %r" % (r.returncode, r.stderr))
    check(l7run("-h").stdout == r.stdout, "-h prints the same")
    for name, letter, arg in OPTIONS:
        spec = ("-%s, " % letter if letter else "") + "--" + name + (" " + arg if arg else "")
        check(re.search(r"^ +%s(\s|$)" % re.escape(spec), r.stdout, re.M), "--help lists %r:\n%s" % (spec, r.stdout))
    for word in ("--mesh", "--cgroup", "--create-cgroup", "--pool", "-- CMD"):
        check(word in r.stdout, "--help mentions %s" % word)
    # and what each counter of --stats counts, from the same table as --stats and --metrics
    counters = re.findall(r'^L7_STAT\(\s*\w+,\s*(\w+),\s*(?:DP|RT),\s*"([^"]*)"\)',
                          open(os.path.join(SRC, "stdlib", "include", "l7", "counters.def")).read(), re.M)
    check(len(counters) >= 16, "counters.def read: %s" % counters)
    for name, what in counters:
        check(re.search(r"^  %s +%s$" % (name, re.escape(what)), r.stdout, re.M), "--help says what %s counts" % name)


def t_parser_takes_the_table():
    """Every option of the table is one the parser takes (--help last: it wins after parsing),
    and no option is parsed outside it."""
    values = {"SECONDS": "1", "IDX=PATH": "0=/dev/null", "N": "4", "BYTES": "4096", "FILE|-": "-"}
    for name, letter, arg in OPTIONS:
        args = ["--" + name] + ([values.get(arg, "127.0.0.1:1")] if arg else [])
        r = l7run(*args, "--help")
        check(r.returncode == 0 and not r.stderr, "%s accepted: exit %d %r" % (args, r.returncode, r.stderr))
        if letter:
            r = l7run("-" + letter, *args[1:], "--help")
            check(r.returncode == 0, "-%s accepted: exit %d %r" % (letter, r.returncode, r.stderr))
    table = {"--" + n for n, _, _ in OPTIONS}
    # watch.c runs l7c: what it passes on are l7c's options (driver/l7c.c's table), not l7run's
    l7c_table = {"--" + n for n in re.findall(r'^\s*\{ "([\w-]+)", ', open(os.path.join(SRC, "driver", "l7c.c")).read(), re.M)}
    check("--mode" in l7c_table, "driver/l7c.c's option table read: %s" % sorted(l7c_table))
    for path in glob.glob(os.path.join(SRC, "runtime", "*.[ch]")):
        ours = table | (l7c_table if os.path.basename(path) == "watch.c" else set())
        for opt in re.findall(r'"(--[a-z][a-z-]+)', open(path).read()):
            check(opt in ours, "%s parses or names %s, which options.def lacks" % (os.path.basename(path), opt))


def t_usage_errors():
    for args, says in ((["--no-such-option"], "--no-such-option"), ([], "no POLICY.o"),
                       (["--mesh", "x.o"], "--cgroup"), (["--mesh", "--cgroup", "/x", "--listen", "1.2.3.4:5", "x.o"], "--listen"),
                       (["--cgroup", "/x", "x.o"], "--cgroup"), (["--metrics", "/x"], "POLICY.o"),
                       (["--drain-timeout", "soon", "x.o"], "--drain-timeout")):
        r = l7run(*args)
        check(r.returncode == 2 and not r.stdout and says in r.stderr and "usage:" in r.stderr,
              "%s: exit %d, stdout %r, stderr %r" % (args, r.returncode, r.stdout[:80], r.stderr[:300]))


def stat_lines(text):
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^stat (\S+) +(\d+)", text, re.M)}


def t_run_cmd(obj, cg):
    """A curl run as CMD is a mesh client: the kernel forwards its request (header inserted);
    l7run exits with CMD's status, its pins gone."""
    pin = "/sys/fs/bpf/l7cli-%d-cmd" % PID
    out, stats = os.path.join(TMP, "curl.out"), os.path.join(TMP, "stats.out")
    script = ("curl -sS -m 5 http://127.0.0.1:%d/a/cmd > %s; curl -sS -m 5 -o /dev/null -w '%%{http_code}' "
              "http://127.0.0.1:%d/admin/x >> %s; %s --stats %s > %s; exit 3") % (SVC, out, SVC, out, L7RUN, pin, stats)
    t = time.time()
    r = subprocess.run([L7RUN, "--mesh", "--cgroup", cg, "--pool", "2", "--pin", pin, obj, "--", "/bin/sh", "-c", script],
                       capture_output=True, text=True, timeout=60)
    check(r.returncode == 3, "l7run exits with CMD's status 3, not %d: %s" % (r.returncode, r.stderr[-1000:]))
    got = open(out).read()
    check("backend=A" in got and "h:x-l7-cli=yes" in got and got.endswith("403"),
          "CMD's curl got its answers through the policy: %r" % got)
    st = stat_lines(open(stats).read())
    check(st.get("forwarded", 0) >= 1 and st.get("header_inserts", 0) >= 1 and st.get("denied", 0) >= 1,
          "the kernel forwarded CMD's request: %s" % st)
    check(st.get("outside_clients", -1) == 0, "CMD ran inside the cgroup (nothing relayed): %s" % st)
    check("outside the cgroup" not in r.stderr, "no outside client: %r" % r.stderr)
    check(not os.path.exists(pin), "pins removed")
    print("     -- CMD: l7run up, CMD run, cleaned up in %.2f s" % (time.time() - t))


def signalled(args, sig, want, ready):
    """Start l7run with CMD, wait until CMD has written `ready`, send sig to l7run: it must exit
    with `want` (CMD's status)."""
    p = procs.start([L7RUN, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    end = time.time() + 60
    while time.time() < end and not os.path.exists(ready) and p.poll() is None:
        time.sleep(0.05)
    check(os.path.exists(ready), "CMD started: %s" % (p.poll(),))
    p.send_signal(sig)
    try:
        rc = p.wait(10)
    except subprocess.TimeoutExpired:
        procs.stop(p)
        raise AssertionError("l7run still running 10 s after %s" % sig)
    err = p.stderr.read()
    check(rc == want, "after %s l7run exits %d, expected %d: %s" % (sig, rc, want, err[-500:]))


def t_signals(obj, gw_obj):
    """SIGTERM reaches CMD, which exits 5 on it: l7run exits 5 (mesh, a cgroup it created and
    removes); a CMD killed by SIGINT: 130 (gateway mode)."""
    cg = os.path.join(procs.CG_ROOT, "l7cli-%d-sig" % PID)
    pin = "/sys/fs/bpf/l7cli-%d-sig" % PID
    ready = os.path.join(TMP, "ready-term")
    trap = "trap 'exit 5' TERM; touch %s; while :; do sleep 0.05; done" % ready
    signalled(["--mesh", "--cgroup", cg, "--create-cgroup", "--pool", "2", "--pin", pin, obj, "--", "/bin/sh", "-c", trap],
              signal.SIGTERM, 5, ready)
    check(not os.path.exists(cg), "the cgroup l7run created is removed")
    check(not os.path.exists(pin), "mesh pins removed")
    ready = os.path.join(TMP, "ready-int")
    pin = "/sys/fs/bpf/l7cli-%d-gw" % PID
    signalled(["--pin", pin, "--listen", "127.0.0.1:%d" % (BASE + 5), gw_obj, "--", "/bin/sh", "-c",
               "touch %s; exec sleep 60" % ready], signal.SIGINT, 128 + signal.SIGINT, ready)
    check(not os.path.exists(pin), "gateway pins removed")


def t_wrong_mode(src, cg):
    """An object of one mode's programs (l7c --mode) given to l7run in the other mode: exit 1,
    a message naming --mode, no pins left."""
    for mode, args in (("mesh", ["--listen", "127.0.0.1:%d" % (BASE + 6)]),
                       ("gateway", ["--mesh", "--cgroup", cg, "--pool", "2"])):
        obj = os.path.join(TMP, "cli-%s.o" % mode)
        subprocess.run([L7C, "--mode=" + mode, src, "-o", obj], check=True, timeout=60)
        pin = "/sys/fs/bpf/l7cli-%d-%s" % (PID, mode)
        r = l7run("--pin", pin, *args, obj)
        check(r.returncode == 1 and "--mode=%s" % mode in r.stderr,
              "a --mode=%s object in the other mode: exit %d, %r" % (mode, r.returncode, r.stderr[-400:]))
        check(not os.path.exists(pin), "no pins left by the refused %s object" % mode)


def main():
    if os.geteuid() != 0:
        print("FAIL: needs root")
        return 1
    src = os.path.join(TMP, "cli.l7")
    with open(src, "w") as f:
        f.write(POLICY)
    obj = os.path.join(TMP, "cli.o")
    subprocess.run([L7C, src, "-o", obj], check=True, timeout=60)
    cg = os.path.join(procs.CG_ROOT, "l7cli-%d" % PID)
    os.mkdir(cg)
    try:
        procs.start([sys.executable, os.path.join(SRC, "tests", "mesh", "echo.py"), "A", str(PA)], cgroup=cg,
                    stdout=subprocess.DEVNULL)
        procs.wait_port(PA, 10)
        for name, fn in (("help", t_help), ("parser_takes_the_table", t_parser_takes_the_table),
                         ("usage_errors", t_usage_errors), ("run_cmd", lambda: t_run_cmd(obj, cg)),
                         ("signals", lambda: t_signals(obj, obj)), ("wrong_mode", lambda: t_wrong_mode(src, cg))):
            t = time.time()
            try:
                fn()
                print("PASS %-24s %.2fs" % (name, time.time() - t), flush=True)
            except Exception as e:  # noqa: BLE001 - report every check
                failures.append(name)
                print("FAIL %-24s %s" % (name, e), flush=True)
    finally:
        procs.stop_all()
        if not procs.cgroup_remove(cg):
            failures.append("cgroup %s left" % cg)
        subprocess.run(["rm", "-rf", TMP])
    print("%d failed" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
