"""Process, port and cgroup helpers shared by the Python tests: every process started here is
ended by pid (never by name), waits are bounded, cgroups are unique children of CG_ROOT that the
test itself made."""
import os
import re
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


def l7run_stats(l7run, pin):
    """`l7run --stats PIN`'s counters: {name: value} of its `stat NAME VALUE` lines."""
    out = subprocess.run([l7run, "--stats", pin], capture_output=True, text=True, timeout=10).stdout
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^stat (\S+)\s+(\d+)", out, re.M)}
