#!/usr/bin/python3
"""Differential test, HTTP/2 (issue 14): every stream mesh mode decides in the kernel against
the reference evaluator's decision for the same request.

usage: run_h2_differential.py L7C L7RUN DIFF_EVAL DIFF_H2_BACKEND POLICY.l7...

Per policy: requests from the shared generator (diffgen.py: valid ones from the policy's
constants, near misses, edge cases, the malformed ones that still make a header block, plus
HTTP/2's own: connection-specific fields, te, CONNECT, unknown or conflicting pseudo-headers,
gRPC calls), each turned into the HTTP/2 request text `l7c --eval` reads (version HTTP/2) with
an x-diff-id field. diff_eval decides each as a stream and prints the header block it decided
(ir_h2_block: what an HTTP/2 client sends for it); that block is what goes on the wire, several
streams per connection (one HEADERS frame each, a body as DATA), from client addresses all over
127.x.y.z, to l7run --mesh --h2c (a copy of the policy with this run's ports) in front of
recording h2c backends (diff_h2_backend.py) that answer with their name.

Compared, per stream:
  forward UP       200 "backend=UP" on the stream, and backend UP logged its id exactly once
  forward UP with header mutations: the same (l7run applies them: tests/mesh/test_h2_mesh.py
                   checks the fields)
  fallback         l7run's 502 (its fallback path speaks HTTP/1.1; a gRPC call gets a
                   non-zero grpc-status)
  deny S           :status S, or for a gRPC call :status 200 with the evaluator's grpc-status
  h2err stream C   RST_STREAM C (malformed: PROTOCOL_ERROR); refused: RST_STREAM REFUSED_STREAM
  h2err conn C     GOAWAY C (such a stream gets a connection of its own)
and for every stream that is not forwarded: no backend saw its id. Backend log lines with no id
of a forwarded stream are leaks. JWTs are verified at NOW in both (L7RUN_JWT_NOW).

L7_H2DIFF_BREAK="OLD=>NEW" replaces text in the kernel's copy of each policy only (the
evaluator keeps the original): the test must then fail, which shows it compares something.
Every process started here is ended by pid; ports derive from our pid; the cgroup, pins and
temporary files are removed. Exit 1 on any mismatch."""
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "common"))
from diffgen import NOW, Consts, Gen  # noqa: E402
from h2frames import PREFACE, DATA, HEADERS, RST_STREAM, SETTINGS, GOAWAY, fr, frames, answers  # noqa: E402
from procs import CG_ROOT, cgroup_home, cgroup_join, cgroup_remove, start, stop_all, wait_port  # noqa: E402

L7C, L7RUN, EVAL, BACKEND = sys.argv[1:5]
POLICIES = sys.argv[5:]
PER_POLICY = int(os.environ.get("L7_H2DIFF_N", "300"))
BREAK = os.environ.get("L7_H2DIFF_BREAK")
STREAMS = 16         # streams per connection
WORKERS = 4          # connections at a time (each takes a pool connection per upstream it uses)
BODY_MAX = 2048      # bytes of a body: 16 streams' bodies stay inside the 64 KiB windows
PID = os.getpid()
BASE = 30600 + (PID % 100) * 20     # 30600..32599: below the ephemeral range; 4 services, 16 upstreams
CG = os.path.join(CG_ROOT, "l7h2diff-%d" % PID)
REFUSED_STREAM = 7
END_STREAM, END_HEADERS = 1, 4


# ---------------------------------------------------------------- the streams

def to_h2(data, limit=BODY_MAX):
    """The HTTP/2 request text for the first request of a generated HTTP/1.1 byte stream (its
    version HTTP/2, its Content-Length body, at most `limit` bytes of it), or None if that
    request has no HTTP/1.1 request line to turn into one."""
    end = data.find(b"\r\n\r\n")
    if end < 0:
        return None
    lines = data[:end].split(b"\r\n")
    parts = lines[0].split(b" ")
    if len(parts) != 3 or parts[2] != b"HTTP/1.1":
        return None
    cl = [l.split(b":", 1)[1].strip() for l in lines[1:] if l.lower().startswith(b"content-length:")]
    body = data[end + 4:end + 4 + int(cl[0])] if len(cl) == 1 and cl[0].isdigit() else b""
    if len(body) > limit:
        body = body[:limit]
        lines = [l if not l.lower().startswith(b"content-length:") else b"Content-Length: %d" % limit for l in lines]
    lines[0] = parts[0] + b" " + parts[1] + b" HTTP/2"
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


def h2_only(g):
    """Requests only HTTP/2 can make: what its field rules refuse (RFC 9113 8.2.2, 8.3) and
    what it has that HTTP/1.1 has not (CONNECT's authority, pseudo-headers, gRPC calls)."""
    r = g.r
    k = r.randrange(9)
    if k == 0:
        return g.request(headers=g.headers() + [g.pick([b"te: trailers", b"TE: trailers", b"te: gzip",
                                                        b"te: trailers, deflate"])])
    if k == 1:
        return g.request(headers=g.headers() + [g.pick([b"connection: keep-alive", b"keep-alive: 5",
                                                        b"proxy-connection: x", b"upgrade: h2c"])])
    if k == 2:
        return g.request(method=b"CONNECT", target=g.pick([b"example:443", b"static.example:80", b"x"]), host=False)
    if k == 3:
        return g.request(headers=[g.pick([b":scheme: https", b":protocol: websocket", b":authority: other",
                                          b":path: /", b":method: GET", b":x: y"])] + g.headers())
    if k == 4:
        return g.request(headers=g.headers() + [b"content-length: " + g.pick([b"x", b"-1", b"1 2"])])
    if k == 5:
        return g.request(host=g.pick([b"", b"a b", b"h@st", b"example:8080"]))
    # gRPC calls: POST /SERVICE/METHOD (paths the rules name, and near misses) as a client sends them
    ct = g.pick([b"application/grpc", b"application/grpc+proto", b"application/grpc;x=1", b"application/json",
                 b"application/grpc-web"])
    return g.request(method=b"POST", target=g.pick(g.paths),
                     headers=[b"content-type: " + ct, b"te: trailers"] + g.headers(), body=b"\0\0\0\0\0")


def cases(g, n):
    """n HTTP/2 request texts."""
    out = []
    while len(out) < n:
        x = g.r.random()
        data = g.valid() if x < 0.5 else g.edge() if x < 0.7 else g.malformed() if x < 0.8 else h2_only(g)
        t = to_h2(data)
        if t is not None:
            out.append(t)
    return out


def with_id(text, rid):
    nl = text.index(b"\r\n")
    return text[:nl + 2] + b"x-diff-id: " + rid.encode() + b"\r\n" + text[nl + 2:]


def evaluate(policy, recs):
    """recs: [(service, src, port, text)] -> [decision dict]"""
    inp = "".join("h2 %d %s %d %s\n" % (s, src, port, t.hex()) for s, src, port, t in recs)
    res = subprocess.run([EVAL, "--now=%d" % NOW, policy], input=inp, capture_output=True, text=True, timeout=300)
    if res.returncode:
        raise RuntimeError("diff_eval failed: %s" % res.stderr)
    lines = res.stdout.splitlines()
    assert len(lines) == len(recs), (len(lines), len(recs))
    return [parse(l) for l in lines]


def parse(line):
    w = line.split()
    assert w[0] == "h2", line
    d = {"kind": w[1]}
    for x in w[2:]:
        if x.startswith("block="):
            d["block"] = bytes.fromhex(x[6:]) if x != "block=-" else b""
        elif x.startswith("call="):
            d["grpc_call"] = x == "call=grpc"
        elif x.startswith("any="):
            d["any"] = [int(u) for u in x[4:].split(",")]
        elif x.startswith("grpc="):
            d["grpc"] = int(x[5:])
        elif x.startswith("#"):
            d["rule"] = x[1:]
        elif x == "rmut":
            d["rmut"] = True
    if d["kind"] in ("forward", "fallback"):
        d["up"] = int(w[2])
        d["mutated"] = w[3] != "-" or w[4] != "-" or d.get("rmut", False)
    elif d["kind"] == "deny":
        d["status"] = int(w[2])
    elif d["kind"] == "h2err":
        d["scope"], d["code"] = w[2], int(w[3])
    return d


# ---------------------------------------------------------------- the kernel path

def exchange(port, src, streams):
    """One connection: the preface, our SETTINGS, then each stream's HEADERS (and DATA) as
    writes of their own; frames back until every stream ended, a GOAWAY, or 5 s. Our SETTINGS
    ACK goes out only after the last block (the blocks are decided as sent before it)."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((src, 0))
    s.settimeout(5)
    got, acked = b"", False
    try:
        s.connect(("127.0.0.1", port))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.sendall(PREFACE + fr(SETTINGS, 0, 0))
        for sid, block, body in streams:
            s.sendall(fr(HEADERS, END_HEADERS | (0 if body else END_STREAM), sid, block))
            if body:
                s.sendall(fr(DATA, END_STREAM, sid, body))
        want = {sid for sid, _, _ in streams}
        deadline = time.time() + 8
        while time.time() < deadline:
            fs = frames(got)
            if not acked and any(t == SETTINGS and not fl & 1 for t, fl, _, _ in fs):
                s.sendall(fr(SETTINGS, 1, 0))
                acked = True
            ended = {sid for t, fl, sid, _ in fs if (t in (HEADERS, DATA) and fl & END_STREAM) or t == RST_STREAM}
            if want <= ended or any(t == GOAWAY for t, _, _, _ in fs):
                break
            d = s.recv(65536)
            if not d:
                break
            got += d
    except OSError:
        pass
    finally:
        s.close()
    return frames(got)


# ---------------------------------------------------------------- one policy

def localize(src, dst, svc_ports, up_ports, kernel_side):
    """src with this run's ports (mesh mode serves the policy's own addresses), key files by
    absolute path; kernel_side: with L7_H2DIFF_BREAK applied."""
    text = open(src).read()

    def port_of(m):
        table = svc_ports if m.group(1) == "service" else up_ports
        if m.group(2) not in table:
            return m.group(0)
        return "%s %s = 127.0.0.1:%d;" % (m.group(1), m.group(2), table[m.group(2)])
    text = re.sub(r"\b(service|upstream)\s+(\w+)\s*=\s*127\.0\.0\.1:\d+\s*;", port_of, text)
    text = re.sub(r'key_file\s*=\s*"([^"/][^"]*)"',
                  lambda m: 'key_file = "%s"' % os.path.join(os.path.dirname(os.path.abspath(src)), m.group(1)), text)
    if kernel_side and BREAK:
        old, new = BREAK.split("=>", 1)
        if old not in text:
            raise RuntimeError("L7_H2DIFF_BREAK: %r is not in %s" % (old, src))
        text = text.replace(old, new, 1)
    with open(dst, "w") as f:
        f.write(text)


def run_policy(pi, policy, totals, mismatches):
    name = os.path.basename(policy)
    work = tempfile.mkdtemp(prefix="l7h2diff-")
    pin = "/sys/fs/bpf/l7h2diff-%d-%d" % (PID, pi)
    t0 = time.time()
    home = cgroup_home()
    try:
        c0 = Consts(subprocess.run([EVAL, "--constants", policy], capture_output=True, text=True, check=True).stdout)
        if any("#" in u for u in c0.upstreams.values()):
            raise RuntimeError("upstream sets are not rewritten to this run's ports")
        svc_ports = {n: BASE + i for i, n, _ in c0.services}
        up_ports = {u: BASE + 4 + i for i, u in c0.upstreams.items()}
        pol, kpol = os.path.join(work, "p.l7"), os.path.join(work, "k.l7")
        localize(policy, pol, svc_ports, up_ports, False)
        localize(policy, kpol, svc_ports, up_ports, True)
        c = Consts(subprocess.run([EVAL, "--constants", pol], capture_output=True, text=True, check=True).stdout)
        obj = os.path.join(work, "k.o")
        subprocess.run([L7C, "--mode=mesh", kpol, "-o", obj], check=True, capture_output=True, timeout=120)
        logpath = os.path.join(work, "backend.log")
        open(logpath, "w").close()
        be = start([sys.executable, BACKEND, logpath] + ["%s=%d" % (u, p) for u, p in up_ports.items()],
                   cgroup=CG, stdout=subprocess.PIPE)
        if be.stdout.readline().strip() != b"ready":
            raise RuntimeError("the h2c backends did not start")
        l7log = open(os.path.join(work, "l7run.log"), "w")
        start([L7RUN, "--mesh", "--cgroup", CG, "--pool", "64", "--h2c", ",".join(up_ports), "--pin", pin, obj],
              stdout=l7log, stderr=l7log, env=dict(os.environ, L7RUN_JWT_NOW=str(NOW)))
        for p in svc_ports.values():
            if not wait_port(p, 30):
                raise RuntimeError("l7run did not come up:\n" + open(l7log.name).read()[-1500:])
        time.sleep(0.3)   # the pool fills
        cgroup_join(CG)   # our connections are the cgroup's clients

        g = Gen(c, 2000 + pi)
        # hosts that are authorities (most of the generator's are values the rules compare
        # with, which as :authority make nearly every stream malformed); h2_only() adds bad ones
        g.hosts = [h for h in g.hosts if re.fullmatch(rb"[A-Za-z0-9.-]+(:[0-9]+)?", h)]
        texts = cases(g, PER_POLICY)
        placed = []   # (service index, src, port, text)
        for n, t in enumerate(texts):
            i, _, _ = g.pick(c.services)
            placed.append((i, g.pick(g.srcs), BASE + i, with_id(t, "%d-%d" % (pi, n))))
        decs = evaluate(pol, placed)
        # connections: streams of one service and source, STREAMS at a time; a stream the
        # evaluator says ends its connection (GOAWAY) gets one of its own
        conns, open_ = [], {}
        for n, ((i, src, port, _), d) in enumerate(zip(placed, decs)):
            if d["kind"] == "bad":
                continue
            if d["kind"] == "h2err" and d["scope"] == "conn":
                conns.append((port, src, [n]))
                continue
            cur = open_.setdefault((port, src), [])
            cur.append(n)
            if len(cur) == STREAMS:
                conns.append((port, src, cur))
                open_[(port, src)] = []
        conns += [(port, src, ns) for (port, src), ns in open_.items() if ns]

        def send(conn):
            port, src, ns = conn
            streams = []
            for k, n in enumerate(ns):
                text = placed[n][3]
                streams.append((1 + 2 * k, decs[n]["block"], text[text.index(b"\r\n\r\n") + 4:]))
            return exchange(port, src, streams)
        with ThreadPoolExecutor(WORKERS) as ex:
            results = list(ex.map(send, conns))
        time.sleep(0.3)   # stragglers into the backend log
        cgroup_join(home)

        seen, stray = {}, []
        for line in open(logpath):
            bname, rid, _, path = line.split()
            if rid == "-":
                stray.append((bname, bytes.fromhex(path) if path != "-" else b""))
            else:
                seen.setdefault(rid, []).append(bname)
        counts = {}
        for (port, src, ns), fs in zip(conns, results):
            a = answers(fs)
            goaway = [struct.unpack(">II", p[:8])[1] for t, _, _, p in fs if t == GOAWAY]
            for k, n in enumerate(ns):
                d = decs[n]
                rid = "%d-%d" % (pi, n)
                label = d["kind"] + ("-mutated" if d.get("mutated") else "")
                counts[label] = counts.get(label, 0) + 1
                why = check_stream(c, d, a.get(1 + 2 * k, [{}, b"", None, 0]), goaway, seen.get(rid, []))
                if why:
                    mine = [(t, fl, len(p)) for t, fl, sid, p in fs if sid in (0, 1 + 2 * k)]
                    mismatches.append("%s stream %s (from %s): %s\n    request: %r\n    evaluator: %s\n"
                                      "    frames (type, flags, length) of the stream and the connection: %s" % (
                                          name, rid, src, why, placed[n][3][:300],
                                          {x: v for x, v in d.items() if x != "block"}, mine))
        counts["bad"] = sum(d["kind"] == "bad" for d in decs)
        sent = {"%d-%d" % (pi, n) for _, _, ns in conns for n in ns}
        for rid, bnames in seen.items():
            if rid not in sent:
                mismatches.append("%s: backend %s got a stream with an id never sent %s" % (name, bnames[0], rid))
        for bname, path in stray:
            mismatches.append("%s: backend %s got a stream without an id (leak): %r" % (name, bname, path[:100]))
        for k, v in counts.items():
            totals[k] = totals.get(k, 0) + v
        print("%s: %d streams on %d connections in %.1fs: %s" % (
            name, sum(len(ns) for _, _, ns in conns), len(conns), time.time() - t0,
            ", ".join("%s %d" % kv for kv in sorted(counts.items()))), flush=True)
        if not counts.get("forward") and not counts.get("forward-mutated"):
            mismatches.append("%s: the policy forwarded no stream" % name)
    finally:
        cgroup_join(home)
        stop_all()
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(pin, ignore_errors=True)


def check_stream(c, d, ans, goaway, seen):
    """'' if the stream's outcome is the evaluator's decision, else what differs."""
    hs, body, rst, _ = ans
    status = hs.get(":status")
    kind = d["kind"]
    if kind == "forward":
        names = [c.upstreams[u] for u in d.get("any", [d["up"]])]
        if status != "200" or body.decode("latin-1") not in ["backend=" + u for u in names]:
            return "forward %s: got status %s body %r rst %s goaway %s" % ("|".join(names), status, body[:80], rst, goaway)
        if len(seen) != 1 or seen[0] not in names:
            return "forward %s: the backends logged it %r" % ("|".join(names), seen)
        return ""
    if seen:
        return "%s: but backend %s got it" % (kind, seen[0])
    if kind in ("forward", "fallback", "deny"):
        want = d["status"] if kind == "deny" else 502
        if d["grpc_call"]:
            gs = hs.get("grpc-status")
            if status != "200" or gs is None or (kind == "deny" and gs != str(d["grpc"])) or gs == "0":
                return "%s %d (a gRPC call): got status %s grpc-status %s rst %s" % (kind, want, status, gs, rst)
        elif status != str(want):
            return "%s %d: got status %s body %r rst %s goaway %s" % (kind, want, status, body[:80], rst, goaway)
        return ""
    if kind == "h2err":
        if d["scope"] == "conn":
            return "" if goaway == [d["code"]] else "GOAWAY %d: got %r, status %s rst %s" % (d["code"], goaway, status, rst)
        want = REFUSED_STREAM if d["scope"] == "refused" else d["code"]
        return "" if rst == want and status is None else "RST_STREAM %d: got rst %s status %s goaway %s" % (
            want, rst, status, goaway)
    return "unknown decision %r" % kind


def main():
    if os.geteuid() != 0:
        print("FAIL: needs root")
        return 1
    totals, mismatches = {}, []
    t0 = time.time()
    os.mkdir(CG)
    try:
        for pi, policy in enumerate(POLICIES):
            try:
                run_policy(pi, policy, totals, mismatches)
            except Exception as e:  # noqa: BLE001 - a policy that cannot run is a failure, not a skip
                mismatches.append("%s: could not run: %s" % (os.path.basename(policy), e))
    finally:
        stop_all()
        if not cgroup_remove(CG):
            mismatches.append("cgroup left behind: " + CG)
    for m in mismatches[:40]:
        print("MISMATCH " + m)
    if len(mismatches) > 40:
        print("... and %d more" % (len(mismatches) - 40))
    decided = sum(v for k, v in totals.items() if k != "bad")
    print("h2 differential: %d policies, %d streams in %.0fs: %s; %d mismatches%s" % (
        len(POLICIES), decided, time.time() - t0, ", ".join("%s %d" % kv for kv in sorted(totals.items())),
        len(mismatches), " (L7_H2DIFF_BREAK=%r)" % BREAK if BREAK else ""))
    return 1 if mismatches or decided < 150 * len(POLICIES) else 0


if __name__ == "__main__":
    sys.exit(main())
