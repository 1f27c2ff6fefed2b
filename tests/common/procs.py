"""Process, port and cgroup helpers shared by the Python tests: every process started here is
ended by pid (never by name), waits are bounded, cgroups are unique children of CG_ROOT that the
test itself made."""
import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import time

CG_ROOT = "/sys/fs/cgroup/unified"
procs = []


def start(args, cgroup=None, **kw):
    """Popen, remembered so that stop_all() ends it; with cgroup (a directory under CG_ROOT) the
    child moves itself into it before exec, so its sockets are the cgroup's from the start."""
    if cgroup:
        kw["preexec_fn"] = lambda: cgroup_join(cgroup)
    p = subprocess.Popen(args, **kw)
    procs.append(p)
    return p


def stop(p, sig=signal.SIGTERM):
    """Ends p: sig, then SIGKILL after 5 s."""
    if p.poll() is None:
        p.send_signal(sig)
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def stop_all():
    """Ends every process start() made, the last started first (l7run before its backends)."""
    for p in reversed(procs):
        stop(p)
    procs.clear()


def wait_port(port, deadline=10.0, host="127.0.0.1"):
    """True once something accepts on host:port, False after deadline seconds."""
    end = time.time() + deadline
    while time.time() < end:
        try:
            socket.create_connection((host, port), timeout=0.5).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


def cgroup_home():
    """The cgroup (v2) this process is in, as a directory under CG_ROOT, to come back to."""
    with open("/proc/self/cgroup") as f:
        return CG_ROOT + f.read().split("0::", 1)[1].split("\n")[0]


def cgroup_join(path):
    """Moves the calling process into cgroup path (mesh mode: its sockets become clients)."""
    with open(os.path.join(path, "cgroup.procs"), "w") as f:
        f.write("%d\n" % os.getpid())


def cgroup_remove(path, tries=50):
    """rmdir path, retried every 0.1 s: a process leaves a cgroup only once it is reaped.
    False if it is still there."""
    for _ in range(tries):
        try:
            os.rmdir(path)
            return True
        except FileNotFoundError:
            return True
        except OSError:
            time.sleep(0.1)
    return False


@contextlib.contextmanager
def cgroup_run(cg, work):
    """A test's run with its cgroup cg (made here) and scratch directory work: when the run ends,
    however it ends, every process start() made is ended, cg removed and work deleted."""
    os.mkdir(cg)
    try:
        yield cg
    finally:
        stop_all()
        cgroup_remove(cg)
        shutil.rmtree(work, ignore_errors=True)


def cgroup_left(cg):
    """The exit status a test adds for its cgroup: 1 if cg is still there (a process kept it)."""
    return 1 if os.path.exists(cg) else 0


def l7run_stats(l7run, pin):
    """`l7run --stats PIN`'s counters: {name: value} of its `stat NAME VALUE` lines."""
    out = subprocess.run([l7run, "--stats", pin], capture_output=True, text=True, timeout=10).stdout
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^stat (\S+)\s+(\d+)", out, re.M)}


@contextlib.contextmanager
def serving(mode, l7run, obj, svc, backends, log, cg, pin, up_timeout=60, extra=()):
    """l7run serving obj in `mode` ("gateway", or "mesh" on cgroup cg, which this process then
    joins as the client) on service port svc, after the backends, (argv, port) pairs, are up (in
    cg for mesh); extra: more options for l7run. Yields l7run's process; then stops it and the
    backends, leaves cg and removes the pin directory."""
    mesh = mode == "mesh"
    started = [start(argv, cgroup=cg if mesh else None, stdout=subprocess.DEVNULL, stderr=log) for argv, _ in backends]
    for _, port in backends:
        wait_port(port, 10)
    args = ([l7run, "--mesh", "--cgroup", cg, "--pool", "4"] if mesh else [l7run]) + ["--pin", pin, *extra, obj]
    l7 = start(args, stdout=log, stderr=log)
    home = cgroup_home()
    try:
        if not wait_port(svc, up_timeout):
            raise RuntimeError("l7run did not come up:\n" + open(log.name).read()[-2000:])
        if mesh:
            time.sleep(0.3)   # the pool fills
            cgroup_join(cg)
        yield l7
    finally:
        if mesh:
            cgroup_join(home)
        stop(l7)
        for b in started:
            stop(b)
        shutil.rmtree(pin, ignore_errors=True)
