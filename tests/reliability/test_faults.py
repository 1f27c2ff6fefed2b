#!/usr/bin/env python3
"""Faults under load, gateway mode:
  backend_killed   the backend is killed while 8 clients send requests: every request ends
                   in 200, 502/503 or a close within the timeout (no hang); once the backend
                   is back, the pool recovers and requests succeed again;
  vanish           clients that vanish mid-request (half a head, half a body, a reset) leave
                   no l7_clients entry and no CLOSE_WAIT, and a pool socket that carried half
                   a body is never reused (the next request's bytes would become that body);
  l7run_restart    l7run is stopped (SIGTERM) under load and started again with the same pin
                   directory: old clients see errors or closes, new connections work, and
                   after the final stop no pin and none of its maps are left.

usage: test_faults.py L7C L7RUN"""
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import relcommon as rc  # noqa: E402

L7C, L7RUN = sys.argv[1:3]
FRONT, BACK = rc.BASE + 7, rc.BASE + 8
REQ = b"GET /f HTTP/1.1\r\nHost: t\r\n\r\n"
failures = []


class Load:
    """n threads, each: new connection, one request, read the answer (5 s timeout)."""

    def __init__(self, n, port=FRONT):
        self.stop, self.port = False, port
        self.res = {"200": 0, "5xx": 0, "closed": 0, "refused": 0, "hang": 0, "other": 0}
        self.lock = threading.Lock()
        self.ts = [threading.Thread(target=self.run) for _ in range(n)]
        for t in self.ts:
            t.start()

    def note(self, k):
        with self.lock:
            self.res[k] += 1

    def run(self):
        while not self.stop:
            try:
                s = socket.create_connection(("127.0.0.1", self.port), timeout=5)
            except OSError:
                self.note("refused")
                time.sleep(0.01)
                continue
            try:
                s.sendall(REQ)
                buf = b""
                while True:
                    d = s.recv(65536)
                    if not d:
                        self.note("closed")
                        break
                    buf += d
                    got, _ = rc.parse_responses(buf)
                    if got:
                        self.note("200" if got[0] == 200 else "5xx" if got[0] in (502, 503) else "other")
                        break
            except socket.timeout:
                self.note("hang")
            except OSError:
                self.note("closed")
            finally:
                s.close()

    def end(self):
        self.stop = True
        for t in self.ts:
            t.join()
        return self.res


def case(fn, *a):
    t = time.time()
    try:
        fn(*a)
        print("PASS %-16s %.1fs" % (fn.__name__, time.time() - t), flush=True)
    except Exception as e:  # noqa: BLE001
        failures.append(fn.__name__)
        print("FAIL %-16s %r" % (fn.__name__, e), flush=True)


def get_ok(port=FRONT):
    sts, _ = rc.exchange(port, REQ, want=1, idle=2.0)
    return sts[:1] == [200]


def backend_killed(tmp, backend):
    load = Load(8)
    time.sleep(1.0)
    os.kill(backend[0].pid, signal.SIGKILL)   # ours, by pid
    backend[0].wait()
    time.sleep(1.5)
    mid = dict(load.res)
    backend[0] = rc.start_backend(BACK, os.path.join(tmp, "rec"))
    time.sleep(1.0)
    before = load.res["200"]
    time.sleep(1.0)
    res = load.end()
    print("  load while killed/restarted: %s (at kill+1.5s: %s)" % (res, mid))
    assert res["hang"] == 0 and res["other"] == 0, res
    assert res["5xx"] + res["closed"] > 0, "the kill was not noticed: %r" % res
    assert res["200"] > before, "no success after the backend came back"
    assert all(get_ok() for _ in range(20)), "requests fail after recovery"


def vanish(pin):
    end = time.time() + 10   # clients of the previous case finish draining first
    while time.time() < end and rc.stats(L7RUN, pin).get("l7_clients"):
        time.sleep(0.1)
    base = rc.stats(L7RUN, pin).get("l7_clients")
    for i in range(60):
        s = socket.create_connection(("127.0.0.1", FRONT), timeout=5)
        k = i % 3
        if k == 0:
            s.sendall(b"GET /f HTTP/1.1\r\nHo")
        elif k == 1:
            s.sendall(b"POST /f HTTP/1.1\r\nHost: t\r\nContent-Length: 1000\r\n\r\nHALF-BODY")
            time.sleep(0.01)
        else:
            s.sendall(b"POST /f HTTP/1.1\r\nHost: t\r\nContent-Length: 1000\r\n\r\nHALF")
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()
        # a clean request afterwards must get its own answer, not become someone's body
        sts, _ = rc.exchange(FRONT, b"GET /after%d HTTP/1.1\r\nHost: t\r\n\r\n" % i, want=1, idle=3.0)
        assert sts[:1] == [200], (i, sts)
    end = time.time() + 10
    while time.time() < end:
        if rc.stats(L7RUN, pin).get("l7_clients") == base and not rc.close_wait([FRONT, BACK]):
            break
        time.sleep(0.2)
    assert rc.stats(L7RUN, pin).get("l7_clients") == base, "l7_clients %s -> %s" % (base, rc.stats(L7RUN, pin))
    assert not rc.close_wait([FRONT, BACK]), rc.close_wait([FRONT, BACK])


def map_ids(pin):
    out = subprocess.run(["bpftool", "-j", "map", "show", "pinned", os.path.join(pin, "map_l7_clients")],
                         capture_output=True, text=True).stdout
    return [json.loads(out)["id"]] if out.strip().startswith("{") else []


def map_exists(mid):
    return subprocess.run(["bpftool", "map", "show", "id", str(mid)], capture_output=True).returncode == 0


def l7run_restart(obj, pin, log, gw):
    ids = map_ids(pin)
    assert ids, "no pinned l7_clients map"
    load = Load(8)
    time.sleep(1.0)
    rc.stop(gw[0])
    assert gw[0].returncode == 0, "l7run exit %s" % gw[0].returncode
    time.sleep(0.3)
    gw[0] = rc.l7run_gateway(L7RUN, obj, FRONT, BACK, pin, log)
    time.sleep(1.5)
    res = load.end()
    print("  load across the restart: %s" % res)
    assert res["hang"] == 0 and res["other"] == 0, res
    assert all(get_ok() for _ in range(20)), "new connections fail after the restart"
    end = time.time() + 5
    while time.time() < end and any(map_exists(i) for i in ids):
        time.sleep(0.1)
    assert not any(map_exists(i) for i in ids), "maps of the stopped l7run still exist: %r" % ids
    ids2 = map_ids(pin)
    rc.stop(gw[0])
    assert not os.path.exists(pin), "pin directory left behind"
    end = time.time() + 5
    while time.time() < end and any(map_exists(i) for i in ids2):
        time.sleep(0.1)
    assert not any(map_exists(i) for i in ids2), "maps left after the final stop: %r" % ids2


def main():
    tmp = rc.tmpdir("l7rel-faults-")
    pin = "/sys/fs/bpf/l7rel-f-%d" % rc.PID
    log = open(os.path.join(tmp, "l7run.log"), "w")
    try:
        obj = rc.compile_policy(L7C, os.path.join(rc.HERE, "routeall.l7"), os.path.join(tmp, "p.o"))
        backend = [rc.start_backend(BACK, os.path.join(tmp, "rec"))]
        gw = [rc.l7run_gateway(L7RUN, obj, FRONT, BACK, pin, log)]
        assert get_ok()
        case(backend_killed, tmp, backend)
        case(vanish, pin)
        case(l7run_restart, obj, pin, log, gw)
    finally:
        rc.stop_all()
        log.close()
        if failures:
            sys.stdout.write(open(os.path.join(tmp, "l7run.log")).read()[-2500:])
        os.system("rm -rf %s %s" % (tmp, pin))
    print("%d failed" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
