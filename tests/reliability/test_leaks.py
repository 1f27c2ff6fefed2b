#!/usr/bin/env python3
"""Leaks: 10,000 client connections (32 at a time) through l7run, a quarter each: a full
request/response, connect-and-close, half a head then close, a reset (SO_LINGER 0) after
half a body. Afterwards l7_clients (SOCKHASH entries), l7run's open fds (/proc/PID/fd, pool
sockets aside) and l7_upstreams must be back at the baseline, and no socket of ours is in
CLOSE_WAIT (ss). REL_SOAK=1 runs 100,000.

usage: test_leaks.py L7C L7RUN"""
import os
import socket
import struct
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import relcommon as rc  # noqa: E402

L7C, L7RUN = sys.argv[1:3]
FRONT, BACK = rc.BASE + 5, rc.BASE + 6
TOTAL = 100000 if os.environ.get("REL_SOAK") else 10000
CONC = 32
IDLE_SLOTS = 32   # L7_IDLE_SLOTS (l7/dataplane.h): routeall.l7 has one upstream
REQ = b"GET /leak HTTP/1.1\r\nHost: t\r\n\r\n"


def one(i):
    s = socket.create_connection(("127.0.0.1", FRONT), timeout=5)
    try:
        k = i % 4
        if k == 0:
            s.sendall(REQ)
            sts, _ = read_one(s)
            assert sts == 200, sts
        elif k == 2:
            s.sendall(b"GET /leak HTTP/1.1\r\nHo")
        elif k == 3:
            s.sendall(b"POST /leak HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\nhalf")
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    finally:
        s.close()


def read_one(s):
    buf = b""
    while True:
        d = s.recv(65536)
        if not d:
            return None, buf
        buf += d
        got, rest = rc.parse_responses(buf)
        if got:
            return got[0], rest


def load(n):
    errors = []
    idx = iter(range(n))
    lock = threading.Lock()

    def worker():
        while True:
            with lock:
                i = next(idx, None)
            if i is None:
                return
            try:
                one(i)
            except Exception as e:  # noqa: BLE001
                errors.append((i, repr(e)))
    ts = [threading.Thread(target=worker) for _ in range(CONC)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return errors


def state(pid, pin):
    st = rc.stats(L7RUN, pin)
    return st.get("l7_clients"), st.get("l7_upstreams"), rc.fd_count(pid)


def settled(pid, pin):
    """State once the last clients finished draining (nothing changes for 0.5 s)."""
    prev, t, end = None, time.time(), time.time() + 10
    while time.time() < end:
        cur = state(pid, pin)
        if cur != prev:
            prev, t = cur, time.time()
        elif time.time() - t >= 0.5:
            break
        time.sleep(0.1)
    return prev


def main():
    tmp = rc.tmpdir("l7rel-leaks-")
    pin = "/sys/fs/bpf/l7rel-l-%d" % rc.PID
    log = open(os.path.join(tmp, "l7run.log"), "w")
    ok = False
    try:
        obj = rc.compile_policy(L7C, os.path.join(rc.HERE, "routeall.l7"), os.path.join(tmp, "p.o"))
        rc.start_backend(BACK, os.path.join(tmp, "rec"))
        gw = rc.l7run_gateway(L7RUN, obj, FRONT, BACK, pin, log)
        assert not load(CONC * 8), "warm-up failed"
        base = settled(gw.pid, pin)
        t = time.time()
        errors = load(TOTAL)
        dt = time.time() - t
        assert not errors, "%d client errors, first %r" % (len(errors), errors[:3])
        end = time.time() + 15
        while time.time() < end:
            now = state(gw.pid, pin)
            if now[0] == base[0] and now[2] - now[1] <= base[2] - base[1] and not rc.close_wait([FRONT, BACK]):
                break
            time.sleep(0.2)
        now = state(gw.pid, pin)
        print("baseline clients/pool/fds %s, after %d connections in %.1fs: %s" % (base, TOTAL, dt, now))
        assert now[0] == base[0], "l7_clients %s -> %s" % (base[0], now[0])
        # fds: every client fd is gone; pool sockets (one fd each) may differ but stay bounded
        assert now[2] - now[1] <= base[2] - base[1], "fds besides pool sockets %d -> %d" % (base[2] - base[1], now[2] - now[1])
        # idle pool sockets: clients keep theirs while they drain (20 ms grace), so the pool
        # can exceed the client concurrency, but it must stay bounded; and pool misses grow the
        # idle target up to every kernel slot of the upstream (L7_IDLE_SLOTS, gateway_pool.c)
        bound = 8 * CONC + IDLE_SLOTS
        assert now[1] <= bound, "pool sockets %d > %d" % (now[1], bound)
        cw = rc.close_wait([FRONT, BACK])
        assert not cw, cw
        st = rc.stats(L7RUN, pin)
        assert st.get("l7_clients", 0) == base[0]
        rc.stop(gw)
        assert gw.returncode == 0, gw.returncode
        assert not os.path.exists(pin), "pin left behind"
        ok = True
    finally:
        rc.stop_all()
        log.close()
        if not ok:
            sys.stdout.write(open(os.path.join(tmp, "l7run.log")).read()[-2000:])
        os.system("rm -rf %s %s" % (tmp, pin))
    print("leaks: ok" if ok else "leaks: FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
