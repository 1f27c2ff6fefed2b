#!/usr/bin/env python3
"""Hot reload under load (issue 7): 100 reloads of l7run while keep-alive clients send requests,
alternating two policy versions that send the same path to different backends and tag the
request differently (A: x-ver: a -> backend 1, B: x-ver: b -> backend 2); both deny /admin.

usage: test_reload.py L7C L7RUN MODE    (MODE: gateway | mesh)

A request FAILS when it gets an error status, a reset, a close after part of its response, or
no response within 5 s. A close before any byte of the response on a keep-alive connection is
what a server closing an idle connection looks like (gateway mode drains an old version's
connections that way, as HAProxy does on a soft stop): the client reconnects and sends the
request again, as HTTP clients do; these are counted apart and must never have reached a
backend (no request twice in the recordings). Asserted:
  - no failed request, no /admin request answered other than 403 or seen by a backend;
  - every connection is judged by one version: all its responses come from one backend, and
    each backend got only its version's tag (the recordings: header and backend agree);
  - after every reload a new connection is judged by the new version;
  - refused reloads (garbage file, a program the verifier refuses, a missing JWT key, a changed
    listen address) change nothing: the same version keeps serving, the log says why;
  - afterwards one version is loaded: l7run's BPF programs and maps, pins, SOCKHASH entries and
    fds are back at the baseline, and every program and map of the retired versions is gone
    from the kernel (bpftool prog/map show).
Mesh mode runs clients, backends and l7run --mesh in a cgroup of the test's own; some clients
keep one connection for the whole run, so old versions stay loaded until they close.
REL_RELOADS=N changes the number of reloads; REL_KEEP=1 keeps the files of a failed run."""
import errno
import glob
import json
import os
import random
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import relcommon as rc  # noqa: E402
from rec_backend import framed  # noqa: E402

L7C, L7RUN, MODE = sys.argv[1:4]
FRONT, B1, B2 = rc.BASE + 2, rc.BASE + 3, rc.BASE + 4
RELOADS = int(os.environ.get("REL_RELOADS", "100"))
WORKERS, LONG_LIVED = 12, 4
THINK = 0.001               # s between a response and a worker's next request: the load leaves
                            # the verifier some CPU (2 cores shared with clients and backends)
CG = os.path.join(rc.CG_ROOT, "l7rel-reload-%d" % rc.PID)
BACKEND_OF = {"a": "1", "b": "2"}

POLICY = """import "http.l7i";
service front = 127.0.0.1:%(front)d;
upstream one = 127.0.0.1:%(b1)d;
upstream two = 127.0.0.1:%(b2)d;
%(jwt)s
policy version_%(v)s (
  act (HttpRequest request)
  %(using)s
  context ('.*->front')
) {
  [Ingress]
  if (starts_with(request.path, "/admin")) {
    Deny(request, 403);
  }
  %(jwtrule)s
  SetHeader(request, "x-ver", "%(v)s");
  Route(request, %(up)s);
}
"""


def policy(tmp, v, up, front=FRONT, jwt_key=None):
    sub = {"front": front, "b1": B1, "b2": B2, "v": v, "up": up, "jwt": "", "using": "", "jwtrule": ""}
    if jwt_key:
        sub.update(jwt='Jwt auth { key_file = "%s"; issuer = "t"; audience = "t"; }' % jwt_key,
                   using="using (Jwt auth)",
                   jwtrule='if (starts_with(request.path, "/jwt") && !auth.valid) { Deny(request, 401); }')
    name = "%s-%s-%d" % (v, up, front)
    return rc.compile_policy(L7C, POLICY, os.path.join(tmp, name + ".o"), sub)


def verifier_refused(src, dst, section):
    """A copy of src whose program in `section` starts with a read above the stack frame: the
    verifier refuses it ("invalid read from stack")."""
    data = bytearray(open(src, "rb").read())
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3a)
    strtab_off = struct.unpack_from("<Q", data, shoff + shstrndx * shentsize + 0x18)[0]
    for i in range(shnum):
        sh = shoff + i * shentsize
        name_off, = struct.unpack_from("<I", data, sh)
        name = data[strtab_off + name_off:data.index(b"\0", strtab_off + name_off)]
        if name == section.encode():
            off, = struct.unpack_from("<Q", data, sh + 0x18)
            data[off:off + 8] = bytes([0x79, 0xa0, 0x08, 0, 0, 0, 0, 0])   # r0 = *(u64 *)(r10 + 8)
            open(dst, "wb").write(data)
            return dst
    raise RuntimeError("no %s section in %s" % (section, src))


def install(src, path):
    """Replace the object l7run reloads the way an operator should: rename over it."""
    shutil.copyfile(src, path + ".tmp")
    os.rename(path + ".tmp", path)


class Closed(Exception):
    def __init__(self, got):
        Exception.__init__(self, "closed after %d byte(s)" % got)
        self.got = got


class Conn:
    """A keep-alive connection. In gateway mode each request on it is one byte longer than the
    one before (an x-pad field): on kernels since 6.14, tcp_bpf_strp_read_sock() can account a
    message the data plane passed to l7run twice, after which a segment no longer than it does
    not wake the stream parser until the next one arrives (l7run never sees the stall; the
    client waits for a response). Measured on main without any reload: about 1 connection in
    100 whose second request has the length of the first, with a 5 ms pause between them; none
    when it is longer. That kernel defect is not what this test is about (docs/architecture.md,
    "Known kernel defect"); every request on a connection is still judged and answered."""

    def __init__(self):
        self.s = socket.create_connection(("127.0.0.1", FRONT), timeout=5)
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        self.n = 0

    def request(self, path):
        """(status, body) of one GET; raises Closed, socket.timeout or OSError."""
        self.n += 1
        pad = b"x-pad: %s\r\n" % (b"p" * self.n) if MODE == "gateway" else b""
        self.s.sendall(b"GET %s HTTP/1.1\r\nHost: t\r\n%s\r\n" % (path.encode(), pad))
        got = 0
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end >= 0:
                head = self.buf[:end].split(b"\r\n")
                n = 0
                for line in head[1:]:
                    k, _, v = line.partition(b":")
                    if k.strip().lower() == b"content-length":
                        n = int(v)
                if len(self.buf) >= end + 4 + n:
                    body = self.buf[end + 4:end + 4 + n]
                    self.buf = self.buf[end + 4 + n:]
                    return int(head[0].split()[1]), body.decode(errors="replace")
            d = self.s.recv(65536)
            if not d:
                raise Closed(got + len(self.buf))
            got += len(d)
            self.buf += d

    def close(self):
        self.s.close()


def field(body, name):
    m = re.search(r"^%s=(.*)$" % name, body, re.M)
    return m.group(1) if m else None


class Load:
    """Keep-alive clients: WORKERS threads, LONG_LIVED of them on one connection for the whole
    run, the others reconnecting every 5-60 requests; one request in 16 goes to /admin."""

    def __init__(self):
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.n = {"ok": 0, "denied": 0, "idle_close": 0, "connections": 0}
        self.per_backend = {"1": 0, "2": 0}
        self.fail = []            # (kind, detail)
        self.mixed = []           # connections that saw two backends
        self.long_backends = set()

    def failed(self, kind, detail):
        with self.lock:
            self.fail.append((kind, detail))

    def add(self, k, d=1):
        with self.lock:
            self.n[k] += d

    def worker(self, wid):
        rnd = random.Random(wid)
        long_lived = wid < LONG_LIVED
        seq, conn, backends, left, retry = 0, None, set(), 0, None
        while not self.stop.is_set():
            if conn is None:
                try:
                    conn = Conn()
                except OSError as e:
                    self.failed("connect", repr(e))
                    time.sleep(0.05)
                    continue
                self.add("connections")
                backends, left = set(), rnd.randint(5, 60) if not long_lived else 2000
            if retry:
                path, tries = retry
            else:
                seq += 1
                path, tries = ("/admin/%d.%d" if seq % 16 == 0 else "/r/%d.%d") % (wid, seq), 0
            try:
                st, body = conn.request(path)
            except Closed as e:
                conn.close()
                conn = None
                if e.got == 0 and tries < 3:
                    self.add("idle_close")   # a close before any response byte: send it again
                    retry = (path, tries + 1)
                else:
                    self.failed("eof", "%s: %s" % (path, e))
                    retry = None
                continue
            except socket.timeout:
                self.failed("timeout", "%s (connection's backends %s, at %.3f)" % (path, sorted(backends), time.time()))
                conn.close()
                conn, retry = None, None
                continue
            except OSError as e:
                self.failed("reset" if e.errno in (errno.ECONNRESET, errno.EPIPE) else "error", "%s: %r" % (path, e))
                conn.close()
                conn, retry = None, None
                continue
            retry = None
            if path.startswith("/admin"):
                if st != 403:
                    self.failed("bypass" if st == 200 else "status", "%s: %d %s" % (path, st, body[:60]))
                else:
                    self.add("denied")
            else:
                b = field(body, "backend")
                if st != 200 or field(body, "target") != path or b not in ("1", "2"):
                    self.failed("status", "%s: %d %r" % (path, st, body[:80]))
                else:
                    backends.add(b)
                    with self.lock:
                        self.n["ok"] += 1
                        self.per_backend[b] += 1
                        if long_lived:
                            self.long_backends.add((wid, b))
                    if len(backends) > 1:
                        with self.lock:
                            self.mixed.append((wid, path, sorted(backends)))
            left -= 1
            time.sleep(THINK)
            if left <= 0 and (not long_lived or MODE == "gateway"):
                conn.close()
                conn = None
        if conn:
            conn.close()

    def run(self):
        self.threads = [threading.Thread(target=self.worker, args=(w,)) for w in range(WORKERS)]
        for t in self.threads:
            t.start()

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join(30)


def fresh(path):
    """One request on a new connection: (status, backend)."""
    c = Conn()
    try:
        st, body = c.request(path)
        return st, field(body, "backend")
    finally:
        c.close()


def bpf_ids(pid):
    """The BPF programs and maps l7run holds (ids from /proc/PID/fdinfo)."""
    progs, maps = set(), set()
    for fd in glob.glob("/proc/%d/fdinfo/*" % pid):
        try:
            text = open(fd).read()
        except OSError:
            continue
        m = re.search(r"^prog_id:\s*(\d+)", text, re.M)
        if m:
            progs.add(int(m.group(1)))
        m = re.search(r"^map_id:\s*(\d+)", text, re.M)
        if m:
            maps.add(int(m.group(1)))
    return progs, maps


def kernel_ids(kind):
    out = subprocess.run(["bpftool", "-j", kind, "show"], capture_output=True, text=True, timeout=60).stdout
    return {o["id"] for o in json.loads(out or "[]")}


def reload_state(pin):
    out = subprocess.run([L7RUN, "--stats", pin], capture_output=True, text=True, timeout=10).stdout
    m = re.search(r"^reload version (\d+) reloads (\d+) failed (\d+) live (\d+) draining (\d+)", out, re.M)
    if not m:
        raise AssertionError("no reload line in --stats: %r" % out[-300:])
    return dict(zip(("version", "reloads", "failed", "live", "draining"), map(int, m.groups()))), out


def sockets(pin):
    if MODE == "gateway":
        st = rc.stats(L7RUN, pin)
        return st.get("l7_clients"), st.get("l7_upstreams")
    out = subprocess.run(["bpftool", "-j", "map", "dump", "pinned", os.path.join(pin, "l7_mesh_socks")],
                         capture_output=True, text=True, timeout=20).stdout
    return len(json.loads(out or "[]")), None


def recordings(d):
    """[(target, [x-ver values])] of every request a recording backend got."""
    out = []
    for f in sorted(glob.glob(os.path.join(d, "c*.bin"))):
        for _, t, head in framed(open(f, "rb").read())[0]:
            xv = [l.split(b":", 1)[1].strip().decode() for l in head.split(b"\r\n")[1:] if l.lower().startswith(b"x-ver:")]
            out.append((t.decode(), xv))
    return out


def main():
    tmp = rc.tmpdir("l7rel-reload-")
    pin = "/sys/fs/bpf/l7rel-r-%d" % rc.PID
    logpath = os.path.join(tmp, "l7run.log")
    log = open(logpath, "w")
    home_cg = rc.cgroup_home()
    ok, load = False, None
    errors = []

    def check(cond, what):
        if not cond:
            errors.append(what)
            print("FAIL: " + what)
        return cond

    def logtext():
        log.flush()
        return open(logpath, errors="replace").read()

    try:
        objs = {"a": policy(tmp, "a", "one"), "b": policy(tmp, "b", "two")}
        cur = "b" if RELOADS % 2 else "a"     # serving after the reloads
        key = os.path.join(tmp, "gone.key")
        open(key, "w").write("k" * 32)
        bad = [("garbage", os.path.join(tmp, "garbage.o"), "not an l7c object"),
               ("verifier", verifier_refused(objs[cur], os.path.join(tmp, "refused.o"),
                                             "sk_skb/stream_verdict" if MODE == "gateway" else "sockops"),
                "invalid read from stack"),
               ("missing key", policy(tmp, "c", "one", jwt_key=key), "gone.key"),
               ("listen", policy(tmp, "c", "one", front=FRONT + 100), "listen address")]
        os.unlink(key)    # the operator's key went missing after compiling
        open(bad[0][1], "w").write("this is not an ELF object\n")
        live = os.path.join(tmp, "live.o")
        install(objs["a"], live)
        pidfile = os.path.join(tmp, "l7run.pid")
        cg = None
        if MODE == "mesh":
            os.mkdir(CG)
            cg = CG
        rc.start([sys.executable, os.path.join(rc.HERE, "rec_backend.py"), str(B1), os.path.join(tmp, "rec1"), "1"],
                 cgroup=cg)
        rc.start([sys.executable, os.path.join(rc.HERE, "rec_backend.py"), str(B2), os.path.join(tmp, "rec2"), "2"],
                 cgroup=cg)
        assert rc.wait_port(B1) and rc.wait_port(B2), "backends did not come up"
        if MODE == "gateway":
            gw = rc.start([L7RUN, "--pin", pin, "--pidfile", pidfile, "--drain-timeout", "3", live],
                          stdout=log, stderr=log)
        else:
            gw = rc.start([L7RUN, "--mesh", "--cgroup", CG, "--pool", "24", "--pin", pin, "--pidfile", pidfile, live],
                          stdout=log, stderr=log)
        assert rc.wait_port(FRONT, 30), "l7run did not come up"
        if MODE == "mesh":
            time.sleep(0.3)
            rc.cgroup_join(CG)   # the clients' sockets are the cgroup's
        # warm-up, then the baseline (one version loaded)
        for i in range(20):
            assert fresh("/r/warm.%d" % i) == (200, "1"), "warm-up"
        time.sleep(0.5)
        base_state, _ = reload_state(pin)
        base_ids = bpf_ids(gw.pid)
        base_fds = rc.fd_count(gw.pid)
        base_socks = sockets(pin)
        base_pins = sorted(os.listdir(pin))
        print("baseline: %d progs, %d maps, %d fds, sockets %s, pins %s" % (len(base_ids[0]), len(base_ids[1]),
                                                                        base_fds, base_socks, base_pins))

        load = Load()
        load.run()
        time.sleep(1.0)
        seen_progs, seen_maps = set(base_ids[0]), set(base_ids[1])
        lat, t0 = [], time.time()
        for i in range(RELOADS):
            v = "b" if i % 2 == 0 else "a"
            install(objs[v], live)
            r = subprocess.run([L7RUN, "--reload", pidfile, "--pin", pin], capture_output=True, text=True, timeout=120)
            if not check(r.returncode == 0, "reload %d: %s %s" % (i, r.stdout, r.stderr)):
                break
            m = re.search(r"\(([\d.]+) ms from the signal\)", r.stdout)
            lat.append(float(m.group(1)))
            st, b = fresh("/r/check.%d" % i)
            check(st == 200 and b == BACKEND_OF[v], "after reload %d (version %s) a new connection got %s from backend %s"
                  % (i, v, st, b))
            p, mp = bpf_ids(gw.pid)
            seen_progs |= p
            seen_maps |= mp
        t_reloads = time.time() - t0
        state, stats_text = reload_state(pin)
        print("%d reloads in %.1f s; latency SIGHUP -> new version taking connections: min %.1f median %.1f "
              "max %.1f ms" % (len(lat), t_reloads, min(lat), sorted(lat)[len(lat) // 2], max(lat)))
        print(stats_text.strip())
        met = subprocess.run([L7RUN, "--metrics", pin, live], capture_output=True, text=True, timeout=10).stdout
        mv = dict(l.rsplit(" ", 1) for l in met.splitlines() if l.startswith("l7_") and "{" not in l)
        check(mv.get("l7_policy_version") == str(RELOADS + 1) and mv.get("l7_reloads_total") == str(RELOADS) and
              mv.get("l7_reload_failures_total") == "0" and "l7_versions_draining" in mv,
              "--metrics: %s" % {k: v for k, v in mv.items() if "reload" in k or "version" in k})
        ver = [float(x) for x in re.findall(r"verifier ([\d.]+) ms", logtext())]
        pool = [float(x) for x in re.findall(r"pool ([\d.]+) ms\)", logtext())]
        for name, xs in (("open + verify", ver), ("pool fill", pool)):
            if xs:
                print("  of which %s: min %.1f median %.1f max %.1f ms" % (name, min(xs), sorted(xs)[len(xs) // 2],
                                                                           max(xs)))

        # refused reloads, still under load: nothing changes, the log says why
        for name, obj, why in bad:
            before = len(logtext())
            install(obj, live)
            r = subprocess.run([L7RUN, "--reload", pidfile, "--pin", pin], capture_output=True, text=True, timeout=120)
            after, _ = reload_state(pin)
            text = logtext()[before:]
            check(r.returncode == 1, "refused reload (%s): --reload exit %d" % (name, r.returncode))
            check(after["version"] == state["version"], "refused reload (%s) changed the version" % name)
            check(why in text and "refused" in text, "refused reload (%s): the log does not say why: %r"
                  % (name, text[-400:]))
            st, b = fresh("/r/after-%s" % name.replace(" ", "-"))
            check(st == 200 and b == BACKEND_OF[cur], "after the refused reload (%s): %s from backend %s"
                  % (name, st, b))
            print("refused reload (%s): %s" % (name, [l for l in text.splitlines() if "refused" in l][-1:]))
        install(objs[cur], live)
        after, _ = reload_state(pin)
        check(after["failed"] == state["failed"] + len(bad), "failed count %d -> %d" % (state["failed"],
                                                                                     after["failed"]))
        time.sleep(0.5)
        load.finish()

        n = load.n
        print("load: %d ok (backend 1: %d, 2: %d), %d denied, %d connections, %d closed idle and sent again, "
              "%d failed" % (n["ok"], load.per_backend["1"], load.per_backend["2"], n["denied"], n["connections"],
                             n["idle_close"], len(load.fail)))
        kinds = {}
        for k, d in load.fail:
            kinds.setdefault(k, []).append(d)
        for k, ds in kinds.items():
            print("  failed %s: %d, e.g. %s" % (k, len(ds), ds[:3]))
        check(not load.fail, "%d failed requests" % len(load.fail))
        check(not load.mixed, "connections judged by two versions: %s" % load.mixed[:5])
        check(n["ok"] >= 2000 and load.per_backend["1"] and load.per_backend["2"], "too little traffic: %s" % n)
        if MODE == "mesh":
            check(n["idle_close"] == 0, "mesh mode closed %d connections" % n["idle_close"])
            check(all(b == "1" for _, b in load.long_backends),
                  "a connection open since version 1 was judged by another: %s" % sorted(load.long_backends))

        # every retired version goes: one version left, baseline resources
        end = time.time() + 20
        while time.time() < end:
            st, _ = reload_state(pin)
            if st["live"] == 1 and not st["draining"]:
                break
            time.sleep(0.2)
        st, stats_text = reload_state(pin)
        check(st["live"] == 1 and st["draining"] == 0, "still loaded after the clients left: %s" % stats_text)
        time.sleep(0.3)
        ids = bpf_ids(gw.pid)
        fds = rc.fd_count(gw.pid)
        socks = sockets(pin)
        pins = sorted(os.listdir(pin))
        print("after: %d progs, %d maps, %d fds, sockets %s" % (len(ids[0]), len(ids[1]), fds, socks))
        check(len(ids[0]) == len(base_ids[0]) and len(ids[1]) == len(base_ids[1]),
              "l7run holds %d progs / %d maps, baseline %d / %d" % (len(ids[0]), len(ids[1]), len(base_ids[0]),
                                                                    len(base_ids[1])))
        gone_p = (seen_progs - ids[0]) & kernel_ids("prog")
        gone_m = (seen_maps - ids[1]) & kernel_ids("map")
        check(not gone_p and not gone_m, "programs/maps of retired versions still in the kernel: %s %s"
              % (sorted(gone_p)[:10], sorted(gone_m)[:10]))
        check(len(seen_progs) > len(base_ids[0]) * (RELOADS // 2), "saw only %d program ids" % len(seen_progs))
        check(pins == base_pins, "pins %s, baseline %s" % (pins, base_pins))
        check(socks[0] == base_socks[0], "SOCKHASH entries %s, baseline %s" % (socks, base_socks))
        if MODE == "gateway":
            # fds: pool sockets (one fd each, in l7_upstreams) may differ, nothing else
            check(fds - socks[1] == base_fds - base_socks[1], "fds besides pool sockets %d -> %d"
                  % (base_fds - base_socks[1], fds - socks[1]))
            check(not rc.close_wait([FRONT, B1, B2]), "CLOSE_WAIT: %s" % rc.close_wait([FRONT, B1, B2]))
        else:
            check(fds == base_fds, "fds %d -> %d" % (base_fds, fds))

        # what the backends got: each its version's tag only, no /admin, nothing twice
        targets, wrong = {}, []
        for b, d in (("1", "rec1"), ("2", "rec2")):
            want = [k for k, v in BACKEND_OF.items() if v == b]
            for t, xv in recordings(os.path.join(tmp, d)):
                targets[t] = targets.get(t, 0) + 1
                if xv != want:
                    wrong.append((b, t, xv))
        check(not wrong, "%d requests at the other version's backend, e.g. %s" % (len(wrong), wrong[:5]))
        check(not any(t.startswith("/admin") for t in targets), "an /admin request reached a backend")
        twice = [t for t, c in targets.items() if c > 1]
        check(not twice, "requests a backend got twice (a retried request had been forwarded): %s" % twice[:5])
        print("backends got %d requests, each with its version's tag" % len(targets))
        rc.stop(gw)
        check(gw.returncode == 0, "l7run exit %s" % gw.returncode)
        check(not os.path.exists(pin), "pins left behind")
        ok = not errors
    finally:
        if load:
            load.stop.set()
        if MODE == "mesh":
            rc.cgroup_join(home_cg)
        rc.stop_all()
        log.close()
        if not ok:
            sys.stdout.write(open(logpath, errors="replace").read()[-4000:])
        if MODE == "mesh":
            if not rc.cgroup_remove(CG, 150):
                print("FAIL: cgroup %s left behind: %s" % (CG, open(os.path.join(CG, "cgroup.procs")).read().split()))
                ok = False
        if ok or not os.environ.get("REL_KEEP"):
            os.system("rm -rf %s %s" % (tmp, pin))
        else:
            print("kept %s" % tmp)
    print("reload %s: ok" % MODE if ok else "reload %s: FAILED" % MODE)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
