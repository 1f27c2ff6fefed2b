#!/usr/bin/python3
"""Active health checks and retries of idempotent requests (issue 15 item 3), with real traffic
through the kernel in gateway mode. The policy is written here with our ports:
  api  = endpoints("api") health "/healthz" every 200ms timeout 150ms unhealthy 2 healthy 2 host "api.test"
  plain = endpoints("plain")                      (no checks; retries 1, the default)
  lit0 = [up, down] retries 0                     (a set compiled in, no retries)
  lit1 = [up, down]                               (a set compiled in, retries 1, the default)
  - a backend that answers 503 on /healthz leaves the set within period x threshold (+ slack):
    no request of a load reaches it after that, and once it answers 200 again it is back and
    gets requests; l7_endpoint_healthy says 0 then 1, l7_health_checks_total counts by result;
  - an endpoint that is down stays out of the new version's set after a reload (SIGHUP), and
    comes back to it;
  - an answer without a status line fails a check (bad_response);
  - a backend that stops listening leaves the set the same way (connect failures), and is
    back once it listens again;
  - a set with one endpoint down: GET/HEAD/PUT/DELETE/OPTIONS all succeed (retried on the
    other endpoint, counted in l7_upstream_retries_total); POST is never retried (502,
    retries_not_idempotent); retries 0 gives 502 for a GET too; in a set compiled in, the refused
    connect also ejects the endpoint (runtime_lit_health), so it happens once there;
  - an endpoint that drops SYNs: a request's connect to it times out (2 s) and is retried
    on the other endpoint; its checks time out and take it out;
  - the metrics parse with prometheus_client and pass promtool check metrics.
Run by ctest:  test_health.py L7C L7RUN
Every process started here is ended by pid; ports derive from our pid; pins and files go."""
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

L7C, L7RUN = sys.argv[1:3]
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "common"))
from cases import case, failures, wait_log  # noqa: E402
from procs import start, stop, stop_all, wait_port  # noqa: E402
from rawhttp import listen, request, requests, serve  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402  (python3-prometheus-client)

BASE = 31000 - (os.getpid() % 400) * 16
FRONT, METRICS = BASE, BASE + 1
A = [BASE + 2 + i for i in range(3)]   # set api
P = [BASE + 5, BASE + 6]               # set plain: P[1] never listens
L0 = [BASE + 7, BASE + 8]              # lit0: L0[1] never listens
L1 = [BASE + 9, BASE + 10]             # lit1: L1[1] never listens
SILENT = BASE + 11                     # accepts no connection: SYNs dropped
PERIOD, FALL, RISE = 0.2, 2, 2


class Backend:
    """An HTTP/1.1 backend in this process: counts requests (health checks apart), answers
    /healthz with `health_status`, and can stop and start listening."""

    def __init__(self, port):
        self.port, self.health_status, self.lock = port, 200, threading.Lock()
        self.served, self.checks, self.sock, self.check_head = 0, 0, None, []

    def start(self):
        self.sock = listen(self.port)
        threading.Thread(target=serve, args=(self.sock, self._serve), daemon=True).start()

    def stop(self):
        s, self.sock = self.sock, None
        s.close()

    def _serve(self, c):
        try:
            for lines, _body, _tr in requests(c):
                method, target, _ = lines[0].split(b" ", 2)
                if target == b"/healthz":
                    with self.lock:
                        self.checks += 1
                        self.check_head = lines
                    st, body = self.health_status, b"health"
                    if not st:   # not HTTP at all
                        c.sendall(b"garbage\r\n\r\n")
                        continue
                else:
                    with self.lock:
                        self.served += 1
                    st, body = 200, b"backend=%d\n" % self.port
                head = b"HTTP/1.1 %d X\r\ncontent-length: %d\r\n\r\n" % (st, len(body))
                c.sendall(head if method == b"HEAD" else head + body)
        except OSError:
            pass
        finally:
            c.close()

    def count(self):
        with self.lock:
            return self.served


def send(method, path, body=b""):
    """One request on a fresh connection: (status, backend port or None)."""
    data = b"%s %s HTTP/1.1\r\nHost: t\r\nConnection: close\r\ncontent-length: %d\r\n\r\n%s" % (
        method.encode(), path.encode(), len(body), body)
    st, text = request(FRONT, data)
    port = None
    for line in text.splitlines():
        if line.startswith("backend="):
            port = int(line[len("backend="):])
    return st, port


def metrics():
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % METRICS, timeout=5) as r:
        return r.read().decode()


def series(text, family):
    """{frozenset(labels): value} of one family, as prometheus_client parses the text."""
    out = {}
    for f in text_string_to_metric_families(text):
        for s in f.samples:
            if s.name == family:
                out[frozenset(s.labels.items())] = s.value
    return out


def healthy(text, port):
    v = series(text, "l7_endpoint_healthy").get(frozenset({"upstream": "api", "endpoint": "127.0.0.1:%d" % port}.items()))
    return v


def stats(pin):
    out = subprocess.run([L7RUN, "--stats", pin], capture_output=True, text=True, timeout=30).stdout
    return {line.split()[1]: int(line.split()[2]) for line in out.splitlines() if line.startswith("stat ")}


POLICY = """import "http.l7i";
service frontend = 127.0.0.1:%d;
upstream api = endpoints("api") health "/healthz" every %dms timeout 150ms unhealthy %d healthy %d host "api.test";
upstream plain = endpoints("plain");
upstream lit0 = [127.0.0.1:%d, 127.0.0.1:%d] retries 0;
upstream lit1 = [127.0.0.1:%d, 127.0.0.1:%d];
policy p (act (HttpRequest request)) {
  if (starts_with(request.path, "/plain/")) { Route(request, plain); }
  if (starts_with(request.path, "/lit0/")) { Route(request, lit0); }
  if (starts_with(request.path, "/lit1/")) { Route(request, lit1); }
  Route(request, api);
}
""" % (FRONT, int(PERIOD * 1000), FALL, RISE, L0[0], L0[1], L1[0], L1[1])


def main():
    tmp = tempfile.mkdtemp(prefix="l7health-")
    src, obj, epfile = (os.path.join(tmp, n) for n in ("p.l7", "p.o", "endpoints"))
    logpath = os.path.join(tmp, "l7run.log")
    pin = "/sys/fs/bpf/l7health-%d" % os.getpid()
    with open(src, "w") as f:
        f.write(POLICY)
    subprocess.run([L7C, src, "-o", obj], check=True)
    with open(epfile, "w") as f:
        f.write("".join("api 127.0.0.1:%d\n" % p for p in A) + "".join("plain 127.0.0.1:%d\n" % p for p in P))
    backs = {p: Backend(p) for p in A + [P[0], L0[0], L1[0]]}
    for b in backs.values():
        b.start()
    log = open(logpath, "w")
    # --pool-idle 0: no connects to fill idle slots, which would find the dead endpoints before
    # any request does (and eject those of run-time sets): here the requests find them
    l7 = start([L7RUN, "--pin", pin, "--pool-idle", "0", "--metrics-listen", "127.0.0.1:%d" % METRICS, "--endpoints", epfile, obj],
               stdout=log, stderr=log)
    try:
        assert wait_port(FRONT, 30), "l7run did not come up"
        time.sleep(3 * PERIOD)   # the first checks

        def load(n=60, path="/x"):
            before = {p: backs[p].count() for p in A}
            got = [send("GET", path) for _ in range(n)]
            bad = [g for g in got if g[0] != 200]
            assert not bad, "%d of %d failed: %r" % (len(bad), n, bad[:5])
            return {p: backs[p].count() - before[p] for p in A}

        def bad_status_leaves_and_comes_back():
            n = load()
            assert all(n[p] > 0 for p in A), "every endpoint serves at first: %r" % n
            assert all(backs[p].checks > 0 for p in A), "every endpoint is checked"
            head = backs[A[0]].check_head
            assert head[0] == b"GET /healthz HTTP/1.1" and b"host: api.test" in [h.lower() for h in head], head
            assert healthy(metrics(), A[1]) == 1.0
            since = os.path.getsize(logpath)
            t0 = time.time()
            backs[A[1]].health_status = 503
            t = wait_log(logpath, "endpoint 127.0.0.1:%d is down: %d health checks in a row failed (last: status 503)" %
                         (A[1], FALL), since)
            assert t, "the endpoint answering 503 was not taken out"
            bound = PERIOD * FALL + 1.0   # period x threshold, plus one period's phase and slack
            assert t - t0 < bound, "taken out after %.2fs, more than %.2fs" % (t - t0, bound)
            out = t - t0
            time.sleep(0.1)   # the tick after the log line rebuilds the tables
            n = load()
            assert n[A[1]] == 0 and n[A[0]] > 0 and n[A[2]] > 0, "requests after it was taken out: %r" % n
            text = metrics()
            assert healthy(text, A[1]) == 0.0 and healthy(text, A[0]) == 1.0, text
            checks = series(text, "l7_health_checks_total")
            key = frozenset({"upstream": "api", "endpoint": "127.0.0.1:%d" % A[1], "result": "status"}.items())
            assert checks.get(key, 0) >= FALL, checks
            s = stats(pin)
            assert s.get("endpoints_marked_down", 0) >= 1 and s.get("health_checks_failed", 0) >= FALL, s
            since = os.path.getsize(logpath)
            t0 = time.time()
            backs[A[1]].health_status = 200
            t = wait_log(logpath, "endpoint 127.0.0.1:%d is healthy again after %d passed health checks" % (A[1], RISE), since)
            assert t and t - t0 < PERIOD * RISE + 1.0, "not back in time: %r" % (t and t - t0)
            time.sleep(0.1)
            n = load()
            assert n[A[1]] > 0, "back in the set but no request: %r" % n
            assert healthy(metrics(), A[1]) == 1.0
            print("  out %.2fs after it answered 503 (bound %.2fs); 60 requests then, none to it; back after %.2fs" %
                  (out, bound, t - t0), flush=True)
        case(bad_status_leaves_and_comes_back)

        def down_stays_down_across_a_reload():
            since = os.path.getsize(logpath)
            backs[A[0]].health_status = 500
            assert wait_log(logpath, "endpoint 127.0.0.1:%d is down" % A[0], since), "not taken out"
            l7.send_signal(signal.SIGHUP)
            assert wait_log(logpath, "reload: version 2", since, 30), "no reload"
            time.sleep(0.1)
            n = load(30)
            assert n[A[0]] == 0 and n[A[1]] > 0, "the new version sends to the endpoint that is down: %r" % n
            since = os.path.getsize(logpath)
            backs[A[0]].health_status = 200
            assert wait_log(logpath, "endpoint 127.0.0.1:%d is healthy again" % A[0], since), "not back"
            time.sleep(0.1)
            assert load(30)[A[0]] > 0, "back, but the new version sends it nothing"
        case(down_stays_down_across_a_reload)

        def an_answer_without_status_fails():
            since = os.path.getsize(logpath)
            backs[A[1]].health_status = 0
            assert wait_log(logpath, "endpoint 127.0.0.1:%d is down: %d health checks in a row failed (last: no HTTP status line)" %
                            (A[1], FALL), since), "not taken out"
            key = frozenset({"upstream": "api", "endpoint": "127.0.0.1:%d" % A[1], "result": "bad_response"}.items())
            assert series(metrics(), "l7_health_checks_total").get(key, 0) >= FALL
            since = os.path.getsize(logpath)
            backs[A[1]].health_status = 200
            assert wait_log(logpath, "endpoint 127.0.0.1:%d is healthy again" % A[1], since), "not back"
        case(an_answer_without_status_fails)

        def stopped_listening_leaves_and_comes_back():
            since = os.path.getsize(logpath)
            t0 = time.time()
            backs[A[2]].stop()
            t = wait_log(logpath, "endpoint 127.0.0.1:%d is down" % A[2], since)
            assert t and t - t0 < PERIOD * FALL + 1.0, "not taken out in time: %r" % (t and t - t0)
            text = metrics()
            key = frozenset({"upstream": "api", "endpoint": "127.0.0.1:%d" % A[2], "result": "connect"}.items())
            assert series(text, "l7_health_checks_total").get(key, 0) >= FALL, text
            time.sleep(0.1)
            n = load(30)
            assert n[A[2]] == 0, n
            since = os.path.getsize(logpath)
            backs[A[2]].start()
            assert wait_log(logpath, "endpoint 127.0.0.1:%d is healthy again" % A[2], since), "not back"
            time.sleep(0.1)
            assert load(30)[A[2]] > 0, "back, but no request"
        case(stopped_listening_leaves_and_comes_back)

        def idempotent_requests_are_retried():
            before = stats(pin).get("upstream_retries", 0)
            got = []
            for i in range(40):
                for m in ("GET", "HEAD", "PUT", "DELETE", "OPTIONS"):
                    got.append((m, send(m, "/plain/%d" % i)[0]))
            bad = [g for g in got if g[1] != 200]
            assert not bad, "%d of %d failed: %r" % (len(bad), len(got), bad[:5])
            n = stats(pin).get("upstream_retries", 0) - before
            assert n >= 1, "no retry was counted"
            r = series(metrics(), "l7_upstream_retries_total")
            assert r.get(frozenset({"upstream": "plain"}.items()), 0) >= 1, r
            # a set compiled in: round robin's second turn finds the refused endpoint, retried; the
            # refusal ejects it, so the next turns go to the other endpoint
            got = [send(m, "/lit1/x") for m in ("GET", "PUT", "DELETE", "GET", "HEAD", "OPTIONS")]
            assert [st for st, _ in got] == [200] * 6 and all(port in (L1[0], None) for _, port in got), got   # HEAD: None
            r = series(metrics(), "l7_upstream_retries_total")
            assert r.get(frozenset({"upstream": "lit1"}.items()), 0) >= 1, r
            print("  200 requests to a run-time set with one endpoint down and 6 to a set compiled in: none failed; "
                  "%d retried in the run-time set (the passive ejection keeps the rest off it)" % n, flush=True)
        case(idempotent_requests_are_retried)

        def post_is_not_retried():
            before = stats(pin).get("retries_not_idempotent", 0)
            # once lit1's refused endpoint is back from its ejection, the first POST its turn
            # gives it gets the 502 (and ejects it again for the rest)
            r0 = series(metrics(), "l7_upstream_retries_total").get(frozenset({"upstream": "lit1"}.items()), 0)
            assert wait_log(logpath, "upstream lit1: endpoint 127.0.0.1:%d back after its ejection" % L1[1], 0), "not back"
            time.sleep(0.1)
            got = [send("POST", "/lit1/x", b"once") for _ in range(4)]
            assert sorted(st for st, _ in got) == [200, 200, 200, 502], got
            assert all(port == L1[0] for st, port in got if st == 200), got
            assert stats(pin).get("retries_not_idempotent", 0) - before == 1
            r1 = series(metrics(), "l7_upstream_retries_total").get(frozenset({"upstream": "lit1"}.items()), 0)
            assert r1 == r0, "a POST was retried: %r -> %r" % (r0, r1)
            got = [send("GET", "/lit0/x")[0] for _ in range(4)]   # retries 0: one 502, then ejected
            assert sorted(got) == [200, 200, 200, 502], got
            assert not series(metrics(), "l7_upstream_retries_total").get(frozenset({"upstream": "lit0"}.items())), \
                "retries 0 exports no retry series"
        case(post_is_not_retried)

        def silent_endpoint_times_out():
            # a listener whose accept queue is full drops every SYN: connects to it time out
            bh = socket.socket()
            bh.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            bh.bind(("127.0.0.1", SILENT))
            bh.listen(0)
            filler = socket.create_connection(("127.0.0.1", SILENT), timeout=2)
            try:
                since = os.path.getsize(logpath)
                with open(epfile + ".tmp", "w") as f:
                    f.write("".join("api 127.0.0.1:%d\n" % p for p in A + [SILENT]) + "plain 127.0.0.1:%d\n" % P[0] +
                            "plain 127.0.0.1:%d\n" % SILENT)
                os.rename(epfile + ".tmp", epfile)
                assert wait_log(logpath, "upstream plain: 2 endpoints in force", since), "not applied"
                t0 = time.time()
                got = [(send("GET", "/plain/t"), time.time() - t0) for _ in range(2)]   # by turns: one to each
                assert [g[0][0] for g in got] == [200, 200] and all(g[0][1] == P[0] for g in got), got
                assert max(g[1] for g in got) >= 1.9, "no request waited for the connect timeout: %r" % got
                assert wait_log(logpath, "127.0.0.1:%d) is down: connect timed out" % SILENT, since, 1), "not logged"
                t = wait_log(logpath, "endpoint 127.0.0.1:%d is down: %d health checks in a row failed (last: connect timed out)" %
                             (SILENT, FALL), since)
                assert t, "the silent endpoint was not taken out by its checks"
                key = frozenset({"upstream": "api", "endpoint": "127.0.0.1:%d" % SILENT, "result": "timeout"}.items())
                assert series(metrics(), "l7_health_checks_total").get(key, 0) >= FALL
                print("  a request to a silent endpoint: 200 from the other after %.2fs" % max(g[1] for g in got), flush=True)
            finally:
                filler.close()
                bh.close()
        case(silent_endpoint_times_out)

        def metrics_pass_promtool():
            text = metrics()
            for fam in ("l7_endpoint_healthy", "l7_health_checks_total", "l7_upstream_retries_total"):
                assert any(f.name == fam.replace("_total", "") for f in text_string_to_metric_families(text)), fam
            r = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=30)
            assert r.returncode == 0, r.stdout + r.stderr
        case(metrics_pass_promtool)
    finally:
        stop(l7)
        log.close()
        for b in backs.values():
            if b.sock:
                b.stop()
        stop_all()
        with open(logpath) as f:
            tail = f.read()[-3000:]
        subprocess.run(["rm", "-rf", pin, tmp])
    if failures:
        print(tail)
        print("FAILED: %s" % ", ".join(failures))
        return 1
    print("all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
