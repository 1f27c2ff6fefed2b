#!/usr/bin/env python3
"""Split programs end to end (issue 6, tail-call splitting): examples/social_network.l7 compiled
three ways -- unsplit, split at the parse/decide point (--split=parse: one decide program), and
with the rules cut into a decide chain (--split=rules: the calibrated budget model finds no budget
at which cutting social_network's rules helps, its decide programs being the JWT check's) --
loaded by l7run in gateway mode and in mesh mode, and driven with the same real requests (valid
JWTs, invalid ones, a path no rule routes); every variant must answer exactly as the unsplit
one does, and the split ones must really be split (l7c --explain --format=json).
Then the chain is broken on purpose: emptying slot 0 of the PROG_ARRAY (bpftool, on the map
l7run pins) makes every request fail closed (503, connection closed, never forwarded), and
emptying a later slot fails closed exactly the requests that need that slot. The decide chain is
also reloaded (l7run --reload): the new version's chain is whole before it takes connections.

Usage: split_social.py L7C L7RUN POLICY ECHO_BACKEND MESH_ECHO
Every process started here is ended by pid; pins, the cgroup and temporary files are removed."""
import json, os, re, shutil, socket, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import rawhttp  # noqa: E402
from check import check, summary  # noqa: E402
from exampletests import relocated  # noqa: E402
from jwtgen import token  # noqa: E402
from procs import (CG_ROOT, cgroup_home, cgroup_join, cgroup_left, cgroup_run, l7run_stats, start, stop,  # noqa: E402
                   wait_port)

L7C, L7RUN, POLICY, ECHO, MESH_ECHO = sys.argv[1:6]
PID = os.getpid()
BASE = 26000 + (PID % 400) * 8          # below the ephemeral range, unique per run
SVC, UPS = BASE, [BASE + 1, BASE + 2, BASE + 3]
NAMES = ["user_service", "post_service", "timeline_service"]
CG = os.path.join(CG_ROOT, "l7split-test-%d" % PID)
WORK = tempfile.mkdtemp(prefix="l7c-split-")


def exchange(sock, path, auth):
    """One request on an open connection: (status, body), or (0, why) if the connection ended."""
    req = "GET %s HTTP/1.1\r\nHost: example\r\n" % path
    if auth:
        req += "Authorization: %s\r\n" % auth
    return rawhttp.exchange(sock, (req + "\r\n").encode())


def send(path, auth):
    s = socket.create_connection(("127.0.0.1", SVC), timeout=5)
    try:
        return exchange(s, path, auth)
    finally:
        s.close()


def cases(key):
    now = int(time.time())
    good = {"sub": "alice", "iss": "social-network", "aud": "frontend", "exp": now + 600}
    t = "Bearer " + token(key, good)
    return [
        ("valid token /user", "/user/42", t),
        ("valid token /post", "/post/7", t),
        ("valid token /timeline", "/timeline/home", "Bearer " + token(key, dict(good, sub="bob"))),
        ("valid token, no route", "/elsewhere", t),
        ("no token", "/user/42", None),
        ("expired", "/user/42", "Bearer " + token(key, dict(good, exp=now - 600))),
        ("bad signature", "/user/42", "Bearer " + token(key, good, flip=True)),
        ("alg none", "/user/42", "Bearer " + token(key, good, alg="none")),
        ("wrong issuer", "/post/7", "Bearer " + token(key, dict(good, iss="evil"))),
    ]


def answers(key):
    """What each case gets: status, the backend that answered, whether it saw x-processed-by.
    The same cases also go down one kept-alive connection."""
    out = []
    for what, path, auth in cases(key):
        st, body = send(path, auth)
        backend = next((n for n in NAMES if n in body), "") if st == 200 else ""
        out.append((what, st, backend, "x-processed-by" in body.lower()))
    s = socket.create_connection(("127.0.0.1", SVC), timeout=5)
    try:
        for what, path, auth in cases(key):
            st, body = exchange(s, path, auth)
            out.append(("keep-alive: " + what, st, next((n for n in NAMES if n in body), "") if st == 200 else "",
                        "x-processed-by" in body.lower()))
            if st == 0:   # closed (a variant that differs is reported): go on with a fresh one
                s.close()
                s = socket.create_connection(("127.0.0.1", SVC), timeout=5)
    finally:
        s.close()
    return out


def empty_slot(map_path, slot):
    subprocess.run(["bpftool", "map", "delete", "pinned", map_path, "key"] + [str(b) for b in slot.to_bytes(4, "little")],
                   check=True)


def broken_chain(mode, pin, array, key, chunks):
    """Empty slots of the chain: requests fail closed, never forwarded."""
    now = int(time.time())
    good = "Bearer " + token(key, {"sub": "alice", "iss": "social-network", "aud": "frontend", "exp": now + 600})
    if chunks > 1:
        # slot 1 holds the chunk after the JWT check: a request the JWT rule denies is decided in
        # chunk 0 and still gets its 401; one that needs chunk 1 to route fails closed
        empty_slot(os.path.join(pin, array), 1)
        check(send("/user/42", None)[0] == 401, "%s: slot 1 empty: a request denied in chunk 0 still gets 401" % mode)
        st, body = send("/user/42", good)
        check(st == 503 and "user_service" not in body, "%s: slot 1 empty: a request that needs it fails closed (%d)" % (mode, st))
    empty_slot(os.path.join(pin, array), 0)
    s = socket.create_connection(("127.0.0.1", SVC), timeout=5)
    st, body = exchange(s, "/user/42", good)
    check(st == 503 and "user_service" not in body, "%s: slot 0 empty: a valid request fails closed (%d)" % (mode, st))
    st2, _ = exchange(s, "/post/7", good)
    check(st2 == 0, "%s: slot 0 empty: the connection is closed after the refusal" % mode)
    s.close()
    check(send("/user/42", None)[0] == 503, "%s: slot 0 empty: an unauthenticated request fails closed too" % mode)


def reload(pidfile, pin, mode, key, before):
    """The same split object again: a new version, its own chain filled before it is published."""
    r = subprocess.run([L7RUN, "--reload", pidfile, "--pin", pin], capture_output=True, text=True, timeout=120)
    check(r.returncode == 0, "%s chain: l7run --reload (%s)" % (mode, (r.stdout + r.stderr).strip()[-200:]))
    after = answers(key)
    check(after == before, "%s chain: after the reload, the same answers" % mode)


def run_gateway(obj, key, variant):
    pin = "/sys/fs/bpf/l7c-split-gw-%d-%s" % (PID, variant)
    log = open(os.path.join(WORK, "gw-%s.log" % variant), "w")
    args = [L7RUN, "--pin", pin, "--listen", "0=127.0.0.1:%d" % SVC]
    backends = []
    for i, name in enumerate(NAMES):
        backends.append(start([sys.executable, ECHO, str(UPS[i]), name], stdout=subprocess.DEVNULL, stderr=log))
        wait_port(UPS[i], 10)
        args += ["--upstream", "%d=127.0.0.1:%d" % (i, UPS[i])]
    pidfile = os.path.join(WORK, "gw-%s.pid" % variant)
    l7run = start(args + ["--pidfile", pidfile, obj], stdout=log, stderr=log)
    try:
        if not wait_port(SVC, 20):
            raise RuntimeError("l7run did not come up:\n" + open(log.name).read()[-1500:])
        got = answers(key)
        if variant == "chain":
            reload(pidfile, pin, "gateway", key, got)
        if variant != "unsplit":
            st = l7run_stats(L7RUN, pin)
            check(st.get("tail_call_failures", -1) == 0, "gateway %s: no chain failures while the chain is whole" % variant)
            broken_chain("gateway " + variant, pin, "map_l7_tail_gw", key, CHUNKS[variant])
            check(l7run_stats(L7RUN, pin).get("tail_call_failures", 0) >= 2,
                  "gateway %s: l7run --stats counts the refusals" % variant)
        return got
    finally:
        stop(l7run)
        for b in backends:
            stop(b)
        shutil.rmtree(pin, ignore_errors=True)


def run_mesh(obj, key, variant):
    pin = "/sys/fs/bpf/l7c-split-mesh-%d-%s" % (PID, variant)
    log = open(os.path.join(WORK, "mesh-%s.log" % variant), "w")
    backends = [start([sys.executable, MESH_ECHO, name, str(UPS[i])], cgroup=CG, stdout=subprocess.DEVNULL,
                      stderr=log) for i, name in enumerate(NAMES)]
    for port in UPS:
        wait_port(port, 10)
    pidfile = os.path.join(WORK, "mesh-%s.pid" % variant)
    l7run = start([L7RUN, "--mesh", "--cgroup", CG, "--pool", "4", "--pin", pin, "--pidfile", pidfile, obj],
                  stdout=log, stderr=log)
    home = cgroup_home()
    try:
        if not wait_port(SVC, 20):
            raise RuntimeError("l7run --mesh did not come up:\n" + open(log.name).read()[-1500:])
        time.sleep(0.3)   # the pool fills
        cgroup_join(CG)   # our sockets are the clients
        got = answers(key)
        if variant == "chain":
            reload(pidfile, pin, "mesh", key, got)
        if variant != "unsplit":
            broken_chain("mesh " + variant, pin, "l7_tail_mesh", key, CHUNKS[variant])
        return got
    finally:
        cgroup_join(home)
        stop(l7run)
        for b in backends:
            stop(b)
        shutil.rmtree(pin, ignore_errors=True)


VARIANTS = [("unsplit", []), ("parse", ["--split=parse"]), ("chain", ["--split=rules"])]
CHUNKS = {}


def main():
    # the example with this run's ports and an absolute key path
    text, key = relocated(POLICY, {8080: SVC, 9101: UPS[0], 9102: UPS[1], 9103: UPS[2]})
    src = os.path.join(WORK, "social.l7")
    open(src, "w").write(text)
    objs = {}
    for variant, flags in VARIANTS:
        obj = os.path.join(WORK, variant + ".o")
        t0 = time.time()
        subprocess.run([L7C] + flags + [src, "-o", obj], check=True)
        ex = json.loads(subprocess.run([L7C, "--explain", "--format=json"] + flags + [src], check=True,
                                       capture_output=True, text=True).stdout)
        hosts = sorted(c["host"] for c in ex["chains"])
        CHUNKS[variant] = max((c["tail_calls"] for c in ex["chains"]), default=0)
        print("%s: compiled in %.1f s; chains %s" % (variant, time.time() - t0,
                                                    [(c["host"], c["programs"]) for c in ex["chains"]]))
        if variant == "unsplit":
            check(hosts == [], "unsplit: no chain")
        else:
            check(hosts == ["l7_client_parser", "l7_mesh_msg_prog"], "%s: both hosts split (%s)" % (variant, hosts))
            want = "== 1" if variant == "parse" else "> 1"
            check(eval("%d %s" % (CHUNKS[variant], want)), "%s: %d decide program(s) per chain" % (variant, CHUNKS[variant]))
        objs[variant] = obj
    with cgroup_run(CG, WORK):
        for mode, run in (("gateway", run_gateway), ("mesh", run_mesh)):
            ref = None
            for variant, _ in VARIANTS:
                got = run(objs[variant], key, variant)
                if ref is None:
                    ref = got
                    sane = dict((w, (s, b)) for w, s, b, _ in got)
                    check(sane["valid token /user"] == (200, "user_service") and sane["no token"][0] == 401 and
                          sane["valid token, no route"][0] == 404 and sane["bad signature"][0] == 401,
                          "%s unsplit: the policy's answers (%s)" % (mode, sane))
                    continue
                for a, b in zip(ref, got):
                    check(a == b, "%s %s: %s: %s (unsplit: %s)" % (mode, variant, a[0], b[1:], a[1:]))
    return summary("split_social") or cgroup_left(CG)


sys.exit(main())
