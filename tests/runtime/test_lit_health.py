#!/usr/bin/python3
"""Passive health of sets written in the policy (issue 15 item 3), gateway mode, real traffic
through the kernel. Their rings and turns are constants of the object; l7run marks an ejected
endpoint's slot in l7_lb_down and the kernel's pick walks past it:
  rr = [R0, R1, R2]                         round robin; R1 does not listen at first
  hs = [H0, H1, H2] balance hash(header "x-user")
  - rr: the first request that finds R1 refused is retried (200) and ejects it for 1 s; R1
    then listens again, yet no request sent during the ejection reaches it (without the
    mark it takes a third); after the ejection it serves again;
  - hs: with H1 refused, the keys of H0 and H2 stay where they were, H1's keys go to the
    others and none reaches H1 (listening again) during the ejection; after it every key is
    back on its first endpoint.
  hc = [C0, C1, C2] health "/healthz" every 200ms timeout 150ms unhealthy 2 healthy 2
  - C1 answering 503 to its checks is out of the set: no request reaches it; answering 200
    again, it is back and serves its turns; l7_endpoint_healthy says 0 then 1;
  - an endpoint that is down stays out of the version a reload (SIGHUP) brings.
Backends close each connection after one answer, so every request needs a connect.
Run by ctest:  test_lit_health.py L7C L7RUN"""
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

BASE = 30000 - (os.getpid() % 300) * 12
FRONT = BASE
R = [BASE + 1 + i for i in range(3)]
H = [BASE + 4 + i for i in range(3)]
C = [BASE + 7 + i for i in range(3)]
METRICS = BASE + 10
KEYS = ["user%d" % i for i in range(24)]


class Backend:
    """Answers every request with its port, one request per connection; /healthz with
    health_status."""

    def __init__(self, port):
        self.port, self.sock, self.health_status = port, None, 200

    def start(self):
        self.sock = listen(self.port)
        threading.Thread(target=serve, args=(self.sock, self._serve), daemon=True).start()

    def stop(self):
        s, self.sock = self.sock, None
        s.shutdown(socket.SHUT_RDWR)   # wakes the accept; a close alone leaves it listening
        s.close()

    def _serve(self, c):
        try:
            for lines, _body, _tr in requests(c):
                check = lines[0].split(b" ")[1] == b"/healthz"
                st, body = (self.health_status, b"health") if check else (200, b"backend=%d\n" % self.port)
                c.sendall(b"HTTP/1.1 %d X\r\nconnection: close\r\ncontent-length: %d\r\n\r\n%s" % (st, len(body), body))
                break
        except OSError:
            pass
        finally:
            c.close()


def send(path, user=None):
    """(status, backend port or None, time the answer came)."""
    extra = b"x-user: %s\r\n" % user.encode() if user else b""
    st, text = request(FRONT, b"GET %s HTTP/1.1\r\nHost: t\r\n%sConnection: close\r\n\r\n" % (path.encode(), extra))
    port = None
    for line in text.splitlines():
        if line.startswith("backend="):
            port = int(line[len("backend="):])
    return st, port, time.time()


POLICY = """import "http.l7i";
service frontend = 127.0.0.1:%d;
upstream rr = [127.0.0.1:%d, 127.0.0.1:%d, 127.0.0.1:%d];
upstream hs = [127.0.0.1:%d, 127.0.0.1:%d, 127.0.0.1:%d] balance hash(header "x-user");
upstream hc = [127.0.0.1:%d, 127.0.0.1:%d, 127.0.0.1:%d] health "/healthz" every 200ms timeout 150ms unhealthy 2 healthy 2;
policy p (act (HttpRequest request)) {
  if (starts_with(request.path, "/h/")) { Route(request, hs); }
  if (starts_with(request.path, "/c/")) { Route(request, hc); }
  Route(request, rr);
}
""" % tuple([FRONT] + R + H + C)


def healthy(port):
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % METRICS, timeout=5) as r:
        text = r.read().decode()
    want = {"upstream": "hc", "endpoint": "127.0.0.1:%d" % port}
    for f in text_string_to_metric_families(text):
        for m in f.samples:
            if m.name == "l7_endpoint_healthy" and m.labels == want:
                return m.value
    return None


def main():
    tmp = tempfile.mkdtemp(prefix="l7lith-")
    src, obj, logpath = (os.path.join(tmp, n) for n in ("p.l7", "p.o", "l7run.log"))
    pin = "/sys/fs/bpf/l7lith-%d" % os.getpid()
    with open(src, "w") as f:
        f.write(POLICY)
    subprocess.run([L7C, src, "-o", obj], check=True)
    backs = {p: Backend(p) for p in R + H + C}
    for p, b in backs.items():
        if p != R[1]:
            b.start()
    log = open(logpath, "w")
    l7 = start([L7RUN, "--pin", pin, "--pool-idle", "0", "--metrics-listen", "127.0.0.1:%d" % METRICS, obj],
               stdout=log, stderr=log)
    try:
        assert wait_port(FRONT, 30), "l7run did not come up"

        def round_robin_skips_the_ejected():
            since = os.path.getsize(logpath)
            got = [send("/r") for _ in range(3)]   # one turn each: R1's is refused, retried
            assert all(g[0] == 200 for g in got), got
            t = wait_log(logpath, "upstream rr: endpoint 127.0.0.1:%d ejected for 1.0 s" % R[1], since)
            assert t, "R1 was not ejected"
            backs[R[1]].start()
            during, after = [], []
            while time.time() < t + 0.8:
                during.append(send("/r"))
            assert len(during) >= 6, "too few requests in the ejection to tell: %d" % len(during)
            bad = [g for g in during if g[0] != 200]
            assert not bad, "%d of %d failed: %r" % (len(bad), len(during), bad[:5])
            to_r1 = [g for g in during if g[1] == R[1]]
            assert not to_r1, "%d of %d requests went to the ejected endpoint" % (len(to_r1), len(during))
            assert {g[1] for g in during} == {R[0], R[2]}, {g[1] for g in during}
            assert wait_log(logpath, "endpoint 127.0.0.1:%d back after its ejection" % R[1], since, 5), "not back"
            time.sleep(0.1)
            after = [send("/r") for _ in range(9)]
            n = sum(1 for g in after if g[1] == R[1])
            assert n == 3, "back in the set: %d of 9 turns to it, want 3: %r" % (n, after)
            print("  %d requests during the ejection, none to it; 3 of 9 after" % len(during), flush=True)
        case(round_robin_skips_the_ejected)

        def hash_moves_only_the_ejected_keys():
            first = {k: send("/h/x", k)[1] for k in KEYS}
            assert set(first.values()) == set(H), "every endpoint owns keys: %r" % first
            mine = [k for k in KEYS if first[k] == H[1]]
            backs[H[1]].stop()
            since = os.path.getsize(logpath)
            st, port, _ = send("/h/x", mine[0])
            assert st == 200 and port in (H[0], H[2]), (st, port)
            t = wait_log(logpath, "upstream hs: endpoint 127.0.0.1:%d ejected" % H[1], since)
            assert t, "H1 was not ejected"
            backs[H[1]].start()
            during = {k: send("/h/x", k) for k in KEYS}
            assert time.time() < t + 0.95, "the keys took longer than the ejection: cannot tell"
            assert all(g[0] == 200 for g in during.values()), during
            moved = [k for k in KEYS if first[k] != H[1] and during[k][1] != first[k]]
            assert not moved, "keys of the endpoints that are up moved: %r" % moved
            to_h1 = [k for k in mine if during[k][1] == H[1]]
            assert not to_h1, "keys went to the ejected endpoint: %r" % to_h1
            again = {k: send("/h/x", k)[1] for k in mine[:1]}
            assert wait_log(logpath, "endpoint 127.0.0.1:%d back after its ejection" % H[1], since, 5), "not back"
            time.sleep(0.1)
            back = {k: send("/h/x", k)[1] for k in KEYS}
            assert back == first, "after the ejection: %r, at first %r" % (back, first)
            print("  %d of %d keys were on it, moved; the other %d stayed (%r)" % (len(mine), len(KEYS), len(KEYS) - len(mine),
                                                                                   again), flush=True)
        case(hash_moves_only_the_ejected_keys)

        def a_failing_check_takes_it_out():
            got = [send("/c/x") for _ in range(6)]
            assert sorted(g[1] for g in got) == sorted(C * 2), "every endpoint serves at first: %r" % got
            assert healthy(C[1]) == 1.0
            since = os.path.getsize(logpath)
            backs[C[1]].health_status = 503
            t = wait_log(logpath, "upstream hc: endpoint 127.0.0.1:%d is down: 2 health checks in a row failed (last: status 503)"
                         % C[1], since)
            assert t, "the endpoint answering 503 was not taken out"
            time.sleep(0.1)   # the tick after the log line writes l7_lb_down
            during = [send("/c/x") for _ in range(30)]
            assert all(g[0] == 200 for g in during), during
            n = sum(1 for g in during if g[1] == C[1])
            assert n == 0, "%d of 30 requests went to the endpoint that is down" % n
            assert healthy(C[1]) == 0.0 and healthy(C[0]) == 1.0
            since = os.path.getsize(logpath)
            backs[C[1]].health_status = 200
            assert wait_log(logpath, "upstream hc: endpoint 127.0.0.1:%d is healthy again" % C[1], since), "not back"
            time.sleep(0.1)
            after = [send("/c/x") for _ in range(9)]
            n = sum(1 for g in after if g[1] == C[1])
            assert n == 3, "back: %d of 9 turns to it, want 3" % n
            assert healthy(C[1]) == 1.0
        case(a_failing_check_takes_it_out)

        def down_stays_down_across_a_reload():
            since = os.path.getsize(logpath)
            backs[C[0]].health_status = 500
            assert wait_log(logpath, "upstream hc: endpoint 127.0.0.1:%d is down" % C[0], since), "not taken out"
            l7.send_signal(signal.SIGHUP)
            assert wait_log(logpath, "reload: version 2", since, 30), "no reload"
            time.sleep(0.1)
            got = [send("/c/x") for _ in range(30)]
            n = sum(1 for g in got if g[1] == C[0])
            assert all(g[0] == 200 for g in got) and n == 0, "the new version sent %d of 30 to the endpoint that is down" % n
            since = os.path.getsize(logpath)
            backs[C[0]].health_status = 200
            assert wait_log(logpath, "upstream hc: endpoint 127.0.0.1:%d is healthy again" % C[0], since), "not back"
            time.sleep(0.1)
            assert sum(1 for _ in range(9) if send("/c/x")[1] == C[0]) == 3, "back, but not its turns in the new version"
        case(down_stays_down_across_a_reload)
    finally:
        stop(l7)
        stop_all()
        log.close()
        subprocess.run(["rm", "-rf", pin], check=False)
        if failures:
            print(open(logpath).read()[-4000:])
    if failures:
        print("FAILED: %s" % ", ".join(failures))
        sys.exit(1)
    print("ok")


main()
