#!/usr/bin/python3
"""Upstreams whose endpoints l7run finds at run time (issue 15 items 2-3), with real traffic
through the kernel in gateway mode: echo backends on loopback ports, the sets of l7run's
--endpoints file (endpoints.l7: "api" by weighted turns, "users" by the Ketama ring of the
x-user header) and a DNS name (a policy written here: "localhost:PORT").
  - the file's weights give the turns; an edit while clients send keep-alive and fresh
    requests fails none, the new endpoint gets requests, the removed one stops getting them;
  - removing one of four endpoints of the ring moves only the keys that were on it (about a
    quarter), and adding it back restores every key;
  - a set with no endpoint answers 503 naming it (and counts no_endpoint);
  - a reload (SIGHUP) fills the new version's tables from the file as it is (a bad file
    refuses it);
  - a killed backend is ejected (logged, l7_endpoint_ejections_total, --stats), the others take
    the requests, and once it is restarted it gets requests again;
  - a name resolves (localhost) and a name that does not leaves its set empty (503).
Mesh mode's run-time sets: tests/mesh/test_sets.py.
Run by ctest:  test_endpoints.py L7C L7RUN POLICY.l7 ECHO_BACKEND.py
Every process started here is ended by pid; ports derive from our pid; pins and files go."""
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

L7C, L7RUN, POLICY, ECHO = sys.argv[1:5]
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "common"))
from cases import case, failures, wait_log  # noqa: E402
from procs import start, stop, stop_all, wait_port  # noqa: E402
from rawhttp import connect, exchange, request  # noqa: E402

BASE = 30000 - (os.getpid() % 500) * 12
FRONT, METRICS = BASE, BASE + 1
B = [BASE + 2 + i for i in range(6)]   # backend ports


def get(path, user=None, keep=None):
    """One GET through l7run: (status, backend port or None, body)."""
    data = "GET %s HTTP/1.1\r\nHost: t\r\n%s%s\r\n" % (
        path, "x-user: %s\r\n" % user if user else "", "" if keep else "Connection: close\r\n")
    st, body = exchange(keep, data.encode()) if keep else request(FRONT, data.encode())
    port = None
    for line in body.splitlines():
        if line.startswith("backend=b"):
            port = int(line[len("backend=b"):])
    return st, port, body


def write(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.rename(tmp, path)   # atomic: l7run never reads half a file


def backend(port):
    p = start([sys.executable, ECHO, str(port), "b%d" % port], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert wait_port(port, 10), "backend %d did not start" % port
    return p


def ep_lines(name, ports, weights=None):
    return "".join("%s 127.0.0.1:%d%s\n" % (name, p, " weight %d" % weights[i] if weights and weights[i] != 1 else "")
                   for i, p in enumerate(ports))


def metrics():
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % METRICS, timeout=5) as r:
        return r.read().decode()


def main():
    tmp = tempfile.mkdtemp(prefix="l7ep-")
    obj, epfile = os.path.join(tmp, "p.o"), os.path.join(tmp, "endpoints")
    logpath = os.path.join(tmp, "l7run.log")
    pin = "/sys/fs/bpf/l7ep-%d" % os.getpid()
    subprocess.run([L7C, POLICY, "-o", obj], check=True)
    backs = {p: backend(p) for p in B[:4]}
    log = open(logpath, "w")
    try:
        write(epfile, ep_lines("api", B[:2], [1, 2]) + ep_lines("users", B[:4]))
        l7 = start([L7RUN, "--pin", pin, "--listen", "127.0.0.1:%d" % FRONT, "--metrics-listen",
                    "127.0.0.1:%d" % METRICS, "--endpoints", epfile, obj], stdout=log, stderr=log)
        try:
            assert wait_port(FRONT, 30), "l7run did not come up"

            def weights_give_the_turns():
                got = [get("/x")[:2] for _ in range(30)]
                assert all(st == 200 for st, _ in got), got
                n = {p: sum(1 for _, q in got if q == p) for p in B[:2]}
                assert n == {B[0]: 10, B[1]: 20}, n   # weights 1:2, smooth turns over 30 requests
            case(weights_give_the_turns)

            def file_change_under_load():
                stop_at = [False]
                results = []   # (status, port, t)

                def client(keep):
                    s = connect(FRONT) if keep else None
                    while not stop_at[0]:
                        st, port, _ = get("/load", keep=s)
                        results.append((st, port, time.time()))
                        if st != 200 and keep:
                            s.close()
                            s = connect(FRONT)
                    if s:
                        s.close()
                threads = [threading.Thread(target=client, args=(k,)) for k in (True, True, False, False)]
                for t in threads:
                    t.start()
                time.sleep(1.0)
                since = os.path.getsize(logpath)
                t_change = time.time()
                write(epfile, ep_lines("api", [B[1], B[2]]) + ep_lines("users", B[:4]))   # B0 out, B2 in
                assert wait_log(logpath, "upstream api: 2 endpoints in force", since), "the change was not applied"
                t_applied = time.time()
                time.sleep(1.5)
                stop_at[0] = True
                for t in threads:
                    t.join(10)
                bad = [r for r in results if r[0] != 200]
                assert not bad, "%d of %d requests failed: %r" % (len(bad), len(results), bad[:5])
                after = [p for st, p, t in results if t > t_applied + 0.05]
                assert after and B[2] in after, "the new endpoint got no request: %r" % after[:20]
                assert B[0] not in after, "the removed endpoint still got %d requests" % after.count(B[0])
                before = [p for st, p, t in results if t < t_change]
                assert B[0] in before and B[2] not in before, "before the change: %r" % before[:20]
                print("  %d requests, none failed; after the change: %d to B1, %d to B2" %
                      (len(results), after.count(B[1]), after.count(B[2])), flush=True)
            case(file_change_under_load)

            def ring_moves_only_the_removed_keys():
                keys = ["user-%d" % i for i in range(400)]

                def where():
                    out = {}
                    for k in keys:
                        st, port, _ = get("/users/me", user=k)
                        assert st == 200, (k, st)
                        out[k] = port
                    return out
                first = where()
                assert set(first.values()) == set(B[:4]), set(first.values())
                since = os.path.getsize(logpath)
                write(epfile, ep_lines("api", [B[1], B[2]]) + ep_lines("users", B[:3]))   # B3 out
                assert wait_log(logpath, "upstream users: 3 endpoints in force", since), "the removal was not applied"
                second = where()
                moved = [k for k in keys if first[k] != second[k]]
                assert all(first[k] == B[3] for k in moved), "a key not on the removed endpoint moved"
                assert all(second[k] != B[3] for k in keys), "a key still goes to the removed endpoint"
                share = len(moved) / len(keys)
                assert 0.12 < share < 0.40, "%.2f of the keys moved (1 of 4 endpoints removed)" % share
                since = os.path.getsize(logpath)
                write(epfile, ep_lines("api", [B[1], B[2]]) + ep_lines("users", B[:4]))   # back
                assert wait_log(logpath, "upstream users: 4 endpoints in force", since), "the return was not applied"
                third = where()
                assert third == first, "%d keys are not where they were" % sum(third[k] != first[k] for k in keys)
                print("  %.1f%% of 400 keys moved, all from the removed endpoint; all back after it returned" %
                      (100 * share), flush=True)
            case(ring_moves_only_the_removed_keys)

            def empty_set_answers_503():
                since = os.path.getsize(logpath)
                write(epfile, ep_lines("api", [B[1], B[2]]))   # no users
                assert wait_log(logpath, "upstream users: 0 endpoints in force", since), "not applied"
                st, _, body = get("/users/me", user="a")
                assert st == 503 and "upstream users has no endpoint" in body, (st, body)
                st, port, _ = get("/x")
                assert st == 200 and port in (B[1], B[2]), (st, port)
                out = subprocess.run([L7RUN, "--stats", pin], capture_output=True, text=True, timeout=30).stdout
                n = [int(line.split()[2]) for line in out.splitlines() if line.startswith("stat no_endpoint ")]
                assert n and n[0] >= 1, out
            case(empty_set_answers_503)

            def bad_file_keeps_what_is_in_force():
                since = os.path.getsize(logpath)
                write(epfile, ep_lines("api", [B[0]]) + "api 127.0.0.1:%d weight 999\n" % B[1])
                assert wait_log(logpath, "ignored, the endpoints in force stay", since), "a bad file was not refused"
                where = "%s:2:%d: after the address only `weight W` (1-255)" % (epfile, len("api 127.0.0.1:%d weight " % B[1]) + 1)
                assert wait_log(logpath, where, since, 1), "the parser's file:line:col is not said"   # l7c --eval's too
                ports = {get("/x")[1] for _ in range(6)}
                assert ports == {B[1], B[2]}, ports
            case(bad_file_keeps_what_is_in_force)

            def reload_keeps_the_endpoints():
                since = os.path.getsize(logpath)
                l7.send_signal(signal.SIGHUP)   # the file is still the bad one: the reload is refused
                assert wait_log(logpath, "endpoints: %s does not parse" % epfile, since, 30), "a bad file let a reload through"
                time.sleep(1.1)
                write(epfile, ep_lines("api", [B[1], B[2]]))
                time.sleep(1.5)
                since = os.path.getsize(logpath)
                l7.send_signal(signal.SIGHUP)   # the same object again: version 2 fills its tables itself
                assert wait_log(logpath, "reload: version 2", since, 30), "no reload"
                ports = {get("/x")[1] for _ in range(8)}
                assert ports == {B[1], B[2]}, ports
                st, _, body = get("/users/me", user="a")
                assert st == 503 and "upstream users has no endpoint" in body, (st, body)
            case(reload_keeps_the_endpoints)

            def killed_backend_is_ejected_and_returns():
                write(epfile, ep_lines("api", B[1:4]))
                time.sleep(1.5)
                since = os.path.getsize(logpath)   # before the kill: the idle pool's refill may eject it first
                stop(backs.pop(B[3]))
                got = [get("/x")[:2] for _ in range(40)]
                bad = [g for g in got if g[0] != 200]
                assert wait_log(logpath, "127.0.0.1:%d ejected" % B[3], since, 1), "not ejected"
                assert len(bad) <= 3 and all(st == 502 for st, _ in bad), "requests failed: %r" % bad
                assert {p for st, p in got if st == 200} == {B[1], B[2]}, got
                m = metrics()
                line = 'l7_endpoint_ejections_total{upstream="api",endpoint="127.0.0.1:%d"}' % B[3]
                assert line in m and int(m.split(line)[1].split()[0]) >= 1, m[-800:]
                out = subprocess.run([L7RUN, "--stats", pin], capture_output=True, text=True, timeout=30).stdout
                assert any(line.startswith("stat endpoint_ejections ") and int(line.split()[2]) >= 1
                           for line in out.splitlines()), out
                backs[B[3]] = backend(B[3])
                end, seen = time.time() + 40, False
                while time.time() < end and not seen:
                    st, port, _ = get("/x")
                    seen = st == 200 and port == B[3]
                    time.sleep(0.05)
                assert seen, "the restarted endpoint got no request again"
                print("  %d of 40 requests got 502 before the ejection; back after its restart" % len(bad), flush=True)
            case(killed_backend_is_ejected_and_returns)
        finally:
            stop(l7)
        assert l7.returncode == 0, "l7run exited with %s" % l7.returncode
        assert not os.path.exists(pin), "pins left in " + pin

        def a_name_resolves():
            src = os.path.join(tmp, "dns.l7")
            with open(src, "w") as f:
                f.write('import "http.l7i";\nservice frontend = 127.0.0.1:8080;\n'
                        'upstream local = "localhost:%d";\nupstream none = "no-such-host.invalid:80";\n'
                        'policy p (act (HttpRequest request)) {\n'
                        '  if (request.path == "/none") { Route(request, none); }\n'
                        '  Route(request, local);\n}\n' % B[0])
            dobj = os.path.join(tmp, "dns.o")
            subprocess.run([L7C, src, "-I", os.path.join(HERE, "..", "..", "stdlib"), "-o", dobj], check=True)
            since = os.path.getsize(logpath)
            p = start([L7RUN, "--pin", pin + "d", "--listen", "127.0.0.1:%d" % FRONT, "--resolve-every", "1", dobj],
                      stdout=log, stderr=log)
            try:
                assert wait_port(FRONT, 30), "l7run did not come up"
                st, port, _ = get("/x")
                assert st == 200 and port == B[0], (st, port)
                st, _, body = get("/none")
                assert st == 503 and "upstream none has no endpoint" in body, (st, body)
                assert wait_log(logpath, "no-such-host.invalid", since, 1), "the failed resolution was not said"
            finally:
                stop(p)
            assert p.returncode == 0, "l7run exited with %s" % p.returncode
        case(a_name_resolves)
    finally:
        stop_all()
        log.close()
        if failures:
            sys.stdout.write(open(logpath).read()[-4000:])
        for f in os.listdir(tmp):
            os.unlink(os.path.join(tmp, f))
        os.rmdir(tmp)
    if failures:
        print("FAILED:", " ".join(failures))
        return 1
    print("all run-time endpoint cases passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
