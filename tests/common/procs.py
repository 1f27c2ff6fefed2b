"""Process and port helpers shared by the Python tests: every process started here is ended
by pid (never by name), and waits are bounded."""
import signal
import socket
import subprocess
import time

procs = []


def start(args, **kw):
    """Popen, remembered so that stop_all() ends it."""
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
    for p in reversed(procs):
        stop(p)


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
