#!/usr/bin/python3
"""l7c --eval --endpoints FILE (and --resolve) against the kernel (issue 15, --eval with
run-time endpoints): the endpoint --eval names for a request is the one l7run's kernel data
plane sends it to, real traffic through l7run --endpoints FILE in gateway mode (echo backends
that say who they are), for
  - the Ketama ring of the "users" set (x-user hashed): 60 keys, each where --eval says;
  - the weighted turns of the "api" set: the backends a run of requests reaches are the turns
    --eval prints, rotated (the set's counter goes on across changes);
  - both again after the file changes (an endpoint out, one in, weights changed): the ring after
    the change, the new turns;
  - a set the file leaves empty: --eval says 503 and why, the kernel answers that 503;
  - a host name (--resolve: "localhost:PORT"), resolved as l7run resolves it.
Run by ctest:  test_endpoints_eval.py L7C L7RUN POLICY.l7 ECHO_BACKEND.py
Every process started here is ended by pid; ports derive from our pid; pins and files go."""
import os
import re
import subprocess
import sys
import tempfile

L7C, L7RUN, POLICY, ECHO = sys.argv[1:5]
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "common"))
from cases import case, failures, wait_log  # noqa: E402
from procs import start, stop, stop_all, wait_port  # noqa: E402
from rawhttp import request  # noqa: E402

BASE = 13000 + (os.getpid() % 500) * 10
FRONT = BASE
B = [BASE + 2 + i for i in range(6)]   # backend ports
TMP = tempfile.mkdtemp(prefix="l7epe-")
EPFILE = os.path.join(TMP, "endpoints")


def wire(path, user=None):
    return ("GET %s HTTP/1.1\r\nHost: t\r\n%sConnection: close\r\n\r\n" %
            (path, "x-user: %s\r\n" % user if user else "")).encode()


def kernel(path, user=None):
    """(status, backend port or None, body) of one request through l7run."""
    st, body = request(FRONT, wire(path, user))
    m = re.search(r"^backend=b(\d+)$", body, re.M)
    return st, int(m.group(1)) if m else None, body


def evaluate(path, user=None, policy=POLICY, extra=("--endpoints", EPFILE)):
    """l7c --eval's output for the same bytes."""
    req = os.path.join(TMP, "req.http")
    with open(req, "wb") as f:
        f.write(wire(path, user))
    r = subprocess.run([L7C, "--eval=" + req, *extra, policy], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    return r.stdout


def eval_port(out):
    m = re.search(r"^endpoint: \w+#\d+ 127\.0\.0\.1:(\d+) \(slot \d+, ketama", out, re.M)
    assert m, out
    return int(m.group(1))


def eval_turns(out):
    m = re.search(r"^turns:(( \w+#\d+ 127\.0\.0\.1:\d+)+)$", out, re.M)
    assert m, out
    return [int(t.rsplit(":", 1)[1]) for t in m.group(1).split()[1::2]]


def write(text):
    tmp = EPFILE + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.rename(tmp, EPFILE)   # atomic: l7run never reads half a file


def lines(name, ports, weights=None):
    return "".join("%s 127.0.0.1:%d%s\n" % (name, p, " weight %d" % weights[i] if weights else "")
                   for i, p in enumerate(ports))


def backend(port):
    p = start([sys.executable, ECHO, str(port), "b%d" % port], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert wait_port(port, 10), "backend %d did not start" % port
    return p


def ring_agrees(keys):
    wrong, seen = [], set()
    for k in keys:
        want = eval_port(evaluate("/users/me", k))
        st, got, _ = kernel("/users/me", k)
        assert st == 200, (k, st)
        seen.add(got)
        if got != want:
            wrong.append((k, want, got))
    assert not wrong, "%d of %d keys not where --eval says: %r" % (len(wrong), len(keys), wrong[:5])
    return seen


def turns_agree():
    turns = eval_turns(evaluate("/x"))
    got = []
    for _ in range(2 * len(turns) + 1):
        st, port, _ = kernel("/x")
        assert st == 200, st
        got.append(port)
    n = len(turns)
    ok = [o for o in range(n) if all(got[i] == turns[(o + i) % n] for i in range(len(got)))]
    assert ok, "the kernel's turns %r are not --eval's %r rotated" % (got, turns)
    return turns


def main():
    obj, logpath = os.path.join(TMP, "p.o"), os.path.join(TMP, "l7run.log")
    pin = "/sys/fs/bpf/l7epe-%d" % os.getpid()
    subprocess.run([L7C, POLICY, "-o", obj], check=True)
    for p in B[:5]:
        backend(p)
    log = open(logpath, "w")
    keys = ["user-%d" % i for i in range(60)]
    try:
        write(lines("api", B[:2], [1, 2]) + lines("users", B[:4]))
        l7 = start([L7RUN, "--pin", pin, "--listen", "127.0.0.1:%d" % FRONT, "--endpoints", EPFILE, obj],
                   stdout=log, stderr=log)
        try:
            assert wait_port(FRONT, 30), "l7run did not come up"

            def ring_as_eval_says():
                seen = ring_agrees(keys)
                assert seen == set(B[:4]), seen   # the keys spread over the whole set
            case(ring_as_eval_says)

            def turns_as_eval_says():
                turns = turns_agree()
                assert sorted(turns) == sorted([B[0], B[1], B[1]]), turns   # weights 1, 2
            case(turns_as_eval_says)

            def after_the_file_changes():
                since = os.path.getsize(logpath)
                # users: B1 out, B4 in (a slot of its own in l7run, the 4th line here); api reweighted, B2 added
                write(lines("api", B[:3], [2, 1, 3]) + lines("users", [B[0], B[2], B[3], B[4]]))
                assert wait_log(logpath, "upstream users: 4 endpoints in force", since), "the change was not applied"
                assert wait_log(logpath, "upstream api: 3 endpoints in force", since), "the change was not applied"
                seen = ring_agrees(keys)
                assert seen == {B[0], B[2], B[3], B[4]}, seen
                turns = turns_agree()
                assert sorted(turns) == sorted([B[0]] * 2 + [B[1]] + [B[2]] * 3), turns
            case(after_the_file_changes)

            def empty_set_is_503_in_both():
                since = os.path.getsize(logpath)
                write(lines("api", B[:2]))
                assert wait_log(logpath, "upstream users: 0 endpoints in force", since), "not applied"
                out = evaluate("/users/me", "a")
                assert "verdict: deny 503 (upstream users has no endpoint)" in out, out
                assert re.search(r'^endpoint: none: set "users" of .* has no endpoint', out, re.M), out
                st, _, body = kernel("/users/me", "a")
                assert st == 503 and "upstream users has no endpoint" in body, (st, body)
            case(empty_set_is_503_in_both)

            def unknown_without_the_file():
                out = evaluate("/users/me", "a", extra=())
                assert 'set "users" is not known' in out and "--endpoints FILE" in out, out
            case(unknown_without_the_file)
        finally:
            stop(l7)
        assert l7.returncode == 0, "l7run exited with %s" % l7.returncode

        def a_name_as_resolved():
            src = os.path.join(TMP, "dns.l7")
            with open(src, "w") as f:
                f.write('import "http.l7i";\nservice frontend = 127.0.0.1:8080;\n'
                        'upstream local = "localhost:%d" balance hash(header "x-user");\n'
                        'policy p (act (HttpRequest request)) {\n  Route(request, local);\n}\n' % B[3])
            dobj = os.path.join(TMP, "dns.o")
            inc = ["-I", os.path.join(HERE, "..", "..", "stdlib")]
            subprocess.run([L7C, src, *inc, "-o", dobj], check=True)
            out = evaluate("/users/me", "k", policy=src, extra=("--resolve", *inc))
            assert eval_port(out) == B[3] and '"localhost" resolves to now' in out, out
            out = evaluate("/users/me", "k", policy=src, extra=tuple(inc))
            assert "--resolve resolves it now" in out, out
            p = start([L7RUN, "--pin", pin + "d", "--listen", "127.0.0.1:%d" % FRONT, dobj], stdout=log, stderr=log)
            try:
                assert wait_port(FRONT, 30), "l7run did not come up"
                st, port, _ = kernel("/users/me", "k")
                assert st == 200 and port == B[3], (st, port)
            finally:
                stop(p)
            assert p.returncode == 0, "l7run exited with %s" % p.returncode
        case(a_name_as_resolved)
        assert not os.path.exists(pin), "pins left in " + pin
    finally:
        stop_all()
        log.close()
        if failures:
            sys.stdout.write(open(logpath).read()[-4000:])
        for f in os.listdir(TMP):
            os.unlink(os.path.join(TMP, f))
        os.rmdir(TMP)
    if failures:
        print("FAILED:", " ".join(failures))
        return 1
    print("all --eval vs kernel cases passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
