#!/usr/bin/env python3
"""JWT end to end: examples/social_network.l7 compiled by l7c, run by l7run (gateway mode) with
echo backends, driven with real HTTP over loopback. Valid tokens are routed (and tagged), bad
ones get 401 from the policy; a repeated token is answered from l7_jwt_cache (l7run --stats
counts jwt_cache_hits); a cached token still expires; --jwt-key overrides the policy's key file and
a key longer than 64 bytes works (l7run hashes it). Tokens are made here with Python's hmac.

Usage: test_e2e.py L7C L7RUN POLICY ECHO_BACKEND
Every process started here is ended by pid; the pin directory is removed by l7run."""
import os, re, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from jwtgen import token  # noqa: E402
from procs import l7run_stats, start, stop, stop_all, wait_port  # noqa: E402
from rawhttp import request  # noqa: E402

L7C, L7RUN, POLICY, ECHO = sys.argv[1:5]
BASE = 23000 + (os.getpid() % 500) * 8   # below the ephemeral range
failures = []


def send(port, path, auth):
    req = "GET %s HTTP/1.1\r\nHost: example\r\n" % path
    if auth is not None:
        req += "Authorization: %s\r\n" % auth
    return request(port, (req + "\r\n").encode())


def expect(what, got, status, backend=None):
    ok = got[0] == status and (backend is None or backend in got[1])
    print("%s %s: %d%s" % ("PASS" if ok else "FAIL", what, got[0], "" if ok else " body " + got[1][:200]))
    if not ok:
        failures.append(what)


def run(obj, key, extra_args, phase):
    work = tempfile.mkdtemp(prefix="l7c-jwt-")
    pin = "/sys/fs/bpf/l7c-jwt-%d-%s" % (os.getpid(), phase)
    front = BASE
    log = open(os.path.join(work, "log"), "w")
    args = [L7RUN, "--pin", pin, "--listen", "0=127.0.0.1:%d" % front] + extra_args
    backends = []
    for i, name in enumerate(["user_service", "post_service", "timeline_service"]):
        port = BASE + 2 + i
        backends.append(start([sys.executable, ECHO, str(port), name], stdout=subprocess.DEVNULL, stderr=log))
        wait_port(port, 10)
        args += ["--upstream", "%d=127.0.0.1:%d" % (i, port)]
    l7run = start(args + [obj], stdout=log, stderr=log)
    try:
        if not wait_port(front, 20):
            raise RuntimeError("l7run did not come up:\n" + open(log.name).read()[-1500:])
        now = int(time.time())
        good = {"sub": "alice", "iss": "social-network", "aud": "frontend", "exp": now + 600}
        t = token(key, good)
        for i in range(5):
            expect("%s: valid token, request %d" % (phase, i + 1), send(front, "/user/42", "Bearer " + t),
                   200, "user_service")
        got = send(front, "/post/7", "bearer " + t)
        expect("%s: scheme in lower case" % phase, got, 200, "post_service")
        if "x-processed-by" not in got[1].lower():
            failures.append("%s: x-processed-by at the backend" % phase)
        st = l7run_stats(L7RUN, pin)
        hits = st.get("jwt_cache_hits", -1)
        print("%s stats after 6 requests with one token: %s" % (phase, st))
        if hits != 5 or st.get("jwt_verifications") != 1:
            failures.append("%s: cache: jwt_cache_hits %s (want 5), jwt_verifications %s (want 1)" % (phase, hits, st.get("jwt_verifications")))
        else:
            print("PASS %s: repeated token answered from the cache (jwt_cache_hits 5, one HMAC)" % phase)
        bad = [
            ("no Authorization", None),
            ("expired", "Bearer " + token(key, dict(good, exp=now - 600))),
            ("not yet valid", "Bearer " + token(key, dict(good, nbf=now + 600))),
            ("bad signature", "Bearer " + token(key, good, flip=True)),
            ("other key", "Bearer " + token(b"not-the-key", good)),
            ("alg none", "Bearer " + token(key, good, alg="none")),
            ("alg HS512 label", "Bearer " + token(key, good, alg="HS512")),
            ("wrong iss", "Bearer " + token(key, dict(good, iss="evil"))),
            ("wrong aud", "Bearer " + token(key, dict(good, aud=["a", "b"]))),
            ("no exp", "Bearer " + token(key, {k: v for k, v in good.items() if k != "exp"})),
            ("Basic scheme", "Basic " + t),
            ("malformed base64", "Bearer " + t.replace(".", ".*", 1)),
            ("two parts", "Bearer " + t.rsplit(".", 1)[0]),
            ("oversized", "Bearer " + token(key, dict(good, pad="x" * 4000))),
        ]
        for what, auth in bad:
            expect("%s: %s" % (phase, what), send(front, "/user/42", auth), 401)
        expect("%s: aud array containing frontend" % phase,
               send(front, "/timeline/x", "Bearer " + token(key, dict(good, aud=["x", "frontend"]))), 200,
               "timeline_service")
        # a cached token still expires: exp = now + 1, leeway 5
        short = token(key, dict(good, exp=int(time.time()) + 1))
        expect("%s: short-lived token, fresh" % phase, send(front, "/user/1", "Bearer " + short), 200)
        expect("%s: short-lived token, cached" % phase, send(front, "/user/1", "Bearer " + short), 200)
        time.sleep(max(0, int(time.time()) + 1 + 5 - time.time()) + 1.1)
        expect("%s: short-lived token after exp + leeway (from the cache)" % phase,
               send(front, "/user/1", "Bearer " + short), 401)
        st = l7run_stats(L7RUN, pin)
        print("%s stats at the end: %s" % (phase, st))
    finally:
        stop(l7run)
        for b in backends:
            stop(b)
        if os.path.isdir(pin):   # pins l7run did not remove (maps other code pins)
            for f in os.listdir(pin):
                os.unlink(os.path.join(pin, f))
            os.rmdir(pin)


def main():
    work = tempfile.mkdtemp(prefix="l7c-jwt-")
    obj = os.path.join(work, "social.o")
    subprocess.run([L7C, POLICY, "-o", obj], check=True)
    text = open(POLICY).read()
    keyfile = re.search(r'key_file = "([^"]+)"', text).group(1)
    key = open(os.path.join(os.path.dirname(POLICY), keyfile), "rb").read()
    key = key[:-1] if key.endswith(b"\n") else key
    try:
        run(obj, key, [], "policy-key")
        # --jwt-key with a 100-byte key and a trailing newline
        long_key = bytes((i * 7 + 1) & 0xff for i in range(100))
        kpath = os.path.join(work, "long.key")
        open(kpath, "wb").write(long_key + b"\n")
        run(obj, long_key, ["--jwt-key", "0=" + kpath], "long-key")
    finally:
        stop_all()
    print("jwt e2e: %d failure(s)" % len(failures))
    for f in failures:
        print("  " + f)
    sys.exit(1 if failures else 0)


main()
