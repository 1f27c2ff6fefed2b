#!/usr/bin/python3
"""l7run's kernel feature probe (runtime/probe.def, probe.c).

Checked:
  - `l7run --probe` lists every probe probe.def declares, each "ok" on this kernel (a probe
    that fails here is a kernel this project cannot serve on: a failure, never a skip), exit 0;
  - a kernel that lacks a piece is named before anything serves (L7RUN_PROBE_FAIL makes the
    probe report it missing): a split object whose tail calls this kernel would not run is
    refused at start with the probe's name and advice, exit 1, no port opened — in gateway mode
    (verdict_tail_call) and mesh mode (msg_tail_call); the same policy unsplit still serves there;
    a missing required piece (msg_ingress) refuses every mesh object; an optional one
    (btf_psock) is a warning and the object serves;
  - on this kernel, a split object (decide chain) attaches and answers in both modes.

usage: test_probe.py L7C L7RUN ECHO_BACKEND MESH_ECHO"""
import os
import re
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "common"))
import procs  # noqa: E402
from check import check, summary  # noqa: E402
from policy import policy  # noqa: E402

L7C, L7RUN, ECHO, MESH_ECHO = sys.argv[1:5]
PID = os.getpid()
BASE = 20000 + (PID % 2000) * 3   # below the ephemeral range
FRONT, API, WEB = BASE, BASE + 1, BASE + 2
TMP = tempfile.mkdtemp(prefix="l7probe-")
PROBE_DEF = os.path.join(HERE, "..", "..", "runtime", "probe.def")

POLICY = policy("edge", FRONT, [("api", API), ("web", WEB)], """\
  if (starts_with(request.path, "/admin")) {
    Deny(request, 403);
  } else if (starts_with(request.path, "/api/")) {
    Route(request, api);
  }
  Route(request, web);
""", service="frontend")


def compile_policy(name, *flags):
    src = os.path.join(TMP, "p.l7")
    with open(src, "w") as f:
        f.write(POLICY)
    out = os.path.join(TMP, name + ".o")
    r = subprocess.run([L7C, *flags, src, "-o", out], capture_output=True, text=True, timeout=120)
    if r.returncode:
        raise RuntimeError("l7c %s: %s" % (" ".join(flags), r.stderr))
    return out


def status(path):
    """The status of GET path on the service, 0 if nothing answered."""
    try:
        s = socket.create_connection(("127.0.0.1", FRONT), timeout=5)
        s.sendall(("GET %s HTTP/1.1\r\nHost: t\r\n\r\n" % path).encode())
        line = s.recv(200).split(b"\r\n")[0]
        s.close()
        m = re.match(rb"HTTP/1\.1 (\d+)", line)
        return int(m.group(1)) if m else 0
    except OSError:
        return 0


def run_start(mode, obj, fail):
    """l7run started on obj with L7RUN_PROBE_FAIL=fail: (exit status or None if it serves, log)."""
    log = os.path.join(TMP, "l7run-%s.log" % mode)
    env = dict(os.environ, L7RUN_PROBE_FAIL=fail)
    cg = os.path.join(procs.CG_ROOT, "l7probe-%d" % PID)
    args = [L7RUN, "--pin", "/sys/fs/bpf/l7probe-%d" % PID, obj]
    if mode == "mesh":
        os.makedirs(cg, exist_ok=True)
        args = [L7RUN, "--mesh", "--cgroup", cg, "--pool", "2", "--pin", "/sys/fs/bpf/l7probe-%d" % PID, obj]
    with open(log, "w") as lf:
        p = procs.start(args, env=env, stdout=lf, stderr=lf)
        end, listening = time.time() + 30, False
        while p.poll() is None and not listening and time.time() < end:
            listening = procs.wait_port(FRONT, 0.1)
        rc = p.poll()
        procs.stop(p)
    if mode == "mesh":
        procs.cgroup_remove(cg)
    return rc, listening, open(log).read()


def serves(mode, obj):
    """GET /api/x and /admin answered by the kernel data plane of l7run serving obj."""
    cg = os.path.join(procs.CG_ROOT, "l7probe-s-%d" % PID)
    if mode == "mesh":
        os.makedirs(cg, exist_ok=True)
    backends = ([[MESH_ECHO, "api", str(API)], API], [[MESH_ECHO, "web", str(WEB)], WEB]) if mode == "mesh" else \
               ([[sys.executable, ECHO, str(API), "api"], API], [[sys.executable, ECHO, str(WEB), "web"], WEB])
    got = None
    with open(os.path.join(TMP, "serve-%s.log" % mode), "w") as log:
        with procs.serving(mode, L7RUN, obj, FRONT, backends, log, cg, "/sys/fs/bpf/l7probe-s-%d" % PID):
            got = (status("/api/x"), status("/admin"))
    if mode == "mesh":
        procs.cgroup_remove(cg)
    return got


def main():
    # every probe of probe.def, ok on this kernel
    ids = re.findall(r"^L7_PROBE\((\w+),", open(PROBE_DEF).read(), re.M)
    r = subprocess.run([L7RUN, "--probe"], capture_output=True, text=True, timeout=30)
    lines = {l.split()[0]: l for l in r.stdout.splitlines() if l.strip()}
    check(r.returncode == 0, "l7run --probe exits 0 on this kernel (%d)" % r.returncode)
    check(len(ids) >= 10 and sorted(lines) == sorted(ids), "--probe lists every probe of probe.def (%d)" % len(ids))
    for i in ids:
        check(i in lines and lines[i].split()[1] == "ok", "probe %s: %s" % (i, lines.get(i, "missing line").strip()))

    split = compile_policy("split", "--budget=1000")
    whole = compile_policy("whole")
    for mode, probe in (("gateway", "verdict_tail_call"), ("mesh", "msg_tail_call")):
        rc, listening, log = run_start(mode, split, probe)
        check(rc == 1 and not listening, "%s: a split object is refused at start when %s is missing (exit %s)"
              % (mode, probe, rc))
        check("probe %s" % probe in log and "not split" in log,
              "%s: the refusal names the probe and what to do: %s" % (mode, log.strip().splitlines()[-1:] or ""))
        rc, listening, log = run_start(mode, whole, probe)
        check(rc is None and listening, "%s: the unsplit object serves without %s" % (mode, probe))
    rc, listening, log = run_start("mesh", whole, "msg_ingress")
    check(rc == 1 and "probe msg_ingress" in log, "mesh: a missing required piece refuses every object (exit %s)" % rc)
    rc, listening, log = run_start("mesh", whole, "btf_psock")
    check(rc is None and listening and "warning: this kernel lacks kernel BTF" in log,
          "mesh: a missing optional piece is a warning, and the object serves")

    for mode in ("gateway", "mesh"):
        got = serves(mode, split)
        check(got == (200, 403), "%s: the split object attaches and answers (/api/x, /admin: %s)" % (mode, got))
    return summary("test_probe")


if __name__ == "__main__":
    try:
        sys.exit(main())
    finally:
        procs.stop_all()
