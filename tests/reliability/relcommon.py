"""Shared helpers of the reliability suite: processes ended by pid, ports derived from our pid
(below the ephemeral range), pins removed, the recording backend's byte counts, a raw client
that collects everything a connection answers."""
import glob
import os
import re
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "common"))
import rawhttp  # noqa: E402
from procs import (CG_ROOT, cgroup_home, cgroup_join, cgroup_remove, procs, start, stop,  # noqa: E402,F401
                   stop_all, wait_port)

PID = os.getpid()
BASE = 26000 + (PID % 670) * 10      # 26000..32699: below the ephemeral range (32768-)

def compile_policy(l7c, src, out, subst=None):
    """Compile src (a path, or policy text when subst is given: text % subst)."""
    if subst is not None:
        path = out + ".l7"
        with open(path, "w") as f:
            f.write(src % subst)
        src = path
    subprocess.run([l7c, src, "-o", out], check=True, timeout=120)
    return out


def start_backend(port, d, name="rec"):
    p = start([sys.executable, os.path.join(HERE, "rec_backend.py"), str(port), d, name])
    if not wait_port(port):
        raise RuntimeError("backend on %d did not come up" % port)
    return p


def backend_bytes(d):
    """Total bytes the recording backend has received so far, and the files."""
    files = sorted(glob.glob(os.path.join(d, "c*.bin")))
    return sum(os.path.getsize(f) for f in files), files


def backend_snapshot(d):
    return {f: os.path.getsize(f) for f in glob.glob(os.path.join(d, "c*.bin"))}


def backend_delta(d, snap):
    """Bytes received since snap, per connection file: list of byte strings."""
    out = []
    for f in sorted(glob.glob(os.path.join(d, "c*.bin"))):
        old = snap.get(f, 0)
        if os.path.getsize(f) > old:
            with open(f, "rb") as fh:
                fh.seek(old)
                out.append(fh.read())
    return out


def settle(d, quiet=0.05, limit=2.0):
    """Wait until the backend has received nothing new for `quiet` seconds."""
    end = time.time() + limit
    last = backend_bytes(d)[0]
    t = time.time()
    while time.time() < end:
        time.sleep(0.01)
        now = backend_bytes(d)[0]
        if now != last:
            last, t = now, time.time()
        elif time.time() - t >= quiet:
            break


def l7run_gateway(l7run, obj, listen, upstream, pin, log, extra=()):
    p = start([l7run, "--pin", pin, "--listen", "127.0.0.1:%d" % listen,
               "--upstream", "0=127.0.0.1:%d" % upstream] + list(extra) + [obj], stdout=log, stderr=log)
    if not wait_port(listen, 30):
        raise RuntimeError("l7run did not come up on %d" % listen)
    return p


def stats(l7run, pin):
    out = subprocess.run([l7run, "--stats", pin], capture_output=True, text=True, timeout=10).stdout
    d = {m.group(1): int(m.group(2)) for m in re.finditer(r"sockets (\S+)\s+(\d+)", out)}
    d.update({"stat_" + m.group(1): int(m.group(2)) for m in re.finditer(r"stat (\S+)\s+(\d+)", out)})
    return d


def parse_responses(buf):
    """Statuses of the complete responses in buf (Content-Length framed)."""
    got, rest = rawhttp.parse_responses(buf)
    return [st for st, _ in got], rest


def exchange(port, data, want=None, idle=0.5, limit=5.0, connect_timeout=5.0):
    """Send data on a fresh connection; collect responses until `want` responses arrived,
    the peer closed, or nothing came for `idle` seconds. Returns (statuses, closed)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=connect_timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buf, closed, statuses = b"", False, []
    try:
        try:
            s.sendall(data)
        except OSError:
            closed = True
        end = time.time() + limit
        s.settimeout(idle)
        while not closed and time.time() < end:
            if want is not None and len(statuses) >= want:
                break
            try:
                d = s.recv(65536)
            except socket.timeout:
                break
            except OSError:
                closed = True
                break
            if not d:
                closed = True
                break
            buf += d
            got, buf = parse_responses(buf)
            statuses += got
            buf = b"" if got and got[-1] == -1 else buf
    finally:
        s.close()
    return statuses, closed


def close_wait(ports):
    out = subprocess.run(["ss", "-Htan", "state", "close-wait"], capture_output=True, text=True).stdout
    return [l for l in out.splitlines() if any(re.search(r":%d\b" % p, l) for p in ports)]


def fd_count(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def tmpdir(prefix):
    return tempfile.mkdtemp(prefix=prefix)
