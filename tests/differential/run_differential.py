#!/usr/bin/env python3
"""Differential test (issue 5): the kernel data plane against the reference evaluator.

usage: run_differential.py L7C L7RUN DIFF_EVAL DIFF_BACKEND CORPUS_DIR POLICY.l7...

Per policy: its constants (diff_eval --constants) seed a generator of requests -- valid ones
built from the paths, prefixes, methods, hosts and header values the rules compare with, near
misses of each, edge cases (/, long paths and request lines, many headers, 16 KiB heads,
pipelined pairs, bodies) and malformed ones (bare LF/CR, NUL, CL+TE, duplicate CL, obs-fold,
bad versions, oversized lines, and every case of the shared corpus) -- sent from client
addresses all over 127.x.y.z (identities). Each request stream is decided by the evaluator
(diff_eval, in-process ir_eval, one batch per policy) and sent over its own connection through
l7run (gateway mode) to recording echo backends. Every request the evaluator decides gets an
`x-diff-id` header after its request line (in both copies), so the backends' log says which
requests reached which backend with which head.

Compared, per request:
  forward UP   200 from the backend, and backend UP logged exactly this request once: the head
               sent, without its Connection and Keep-Alive lines (rawhttp.hop_cut) and the
               lines of the names the evaluator removed, plus exactly the
               lines it added, nothing else changed. UP is a
               backend slot: the endpoint a hashed set's Ketama ring picks, exactly; for a
               round-robin set any endpoint of the set (the turn is the kernel's counter)
  fallback UP  the same, at the fallback backend
  deny S       status S from l7run; no backend saw the request
  refuse S     a 4xx/5xx or a close; no backend saw it, nor anything after it
  incomplete   no response; no backend saw it
Backend log lines with no id of a decided request are leaks (strays) and are mismatches too.
JWTs: the header of each Jwt configuration carries tokens signed with the policy's own key
(HMAC by Python's hmac, tests/common/jwtgen.py) -- valid ones with claims from the rules'
constants, and expired, not yet valid, without exp, wrong signature or key, wrong issuer or
audience, alg none or HS512, malformed, with odd schemes -- some sent again (the kernel's token
cache). Evaluator and data plane verify them at one fixed time, NOW: diff_eval --now=NOW, and
l7run with L7RUN_JWT_NOW=NOW (exp and nbf are a day away from it, so the seconds the run takes
change nothing). Rate limits are never reached by enough requests to trigger.

Every process started here is ended by pid; ports derive from our pid (below the ephemeral
range); pins and temporary files are removed. Exit 1 on any mismatch."""
import os
import re
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from procs import start, stop_all, wait_port  # noqa: E402
from rawhttp import hop_cut, parse_responses  # noqa: E402
from diffgen import NOW, Consts, Gen  # noqa: E402   (the generator, shared with run_h2_differential.py)

L7C, L7RUN, EVAL, BACKEND, CORPUS = sys.argv[1:6]
CORPUS = os.environ.get("L7_CORPUS") or CORPUS   # as every corpus test: the environment wins
POLICIES = sys.argv[6:]
PER_POLICY = int(os.environ.get("L7_DIFF_N", "2000"))
WORKERS = int(os.environ.get("L7_DIFF_WORKERS", "6"))
PID = os.getpid()
BASE = 12000 + (PID % 400) * 24          # 12000..21599: below the ephemeral range; 16 backend slots


def corpus_cases():
    out = []
    for index in ("http/index.tsv", "smuggling/index.tsv"):
        path = os.path.join(CORPUS, index)
        if not os.path.exists(path):
            continue
        cols = None
        for line in open(path, encoding="utf-8"):
            if line.startswith("#") or not line.strip():
                continue
            f = line.rstrip("\n").split("\t")
            if cols is None:
                cols = f
                continue
            row = dict(zip(cols, f))
            with open(os.path.join(CORPUS, row["file"]), "rb") as fh:
                out.append(("corpus:" + row["name"], fh.read()))
    return out


# ---------------------------------------------------------------- the evaluator

def evaluate(policy, cases):
    """cases: [(service, src, port, bytes)] -> [[decision...]] with decision dicts."""
    inp = "".join("%d %s %d %s\n" % (s, src, port, data.hex() or "-") for s, src, port, data in cases)
    res = subprocess.run([EVAL, "--now=%d" % NOW, policy], input=inp, capture_output=True, text=True, timeout=300)
    if res.returncode:
        raise RuntimeError("diff_eval failed: %s" % res.stderr)
    lines = res.stdout.splitlines()
    assert len(lines) == len(cases), (len(lines), len(cases))
    return [parse_decisions(l) for l in lines]


def parse_decisions(line):
    out = []
    for part in line.split(" ; "):
        w = part.split()
        d = {"kind": w[0]}
        for x in w[1:]:
            if x.startswith("@"):
                d["off"] = int(x[1:])
            elif x.startswith("#"):
                d["rule"] = x[1:]
            elif x == "partial":
                d["partial"] = True
            elif x == "body":     # refused for its chunked body: the head before it is held
                d["body"] = True
            elif x.startswith("any="):   # round robin: any slot of the set may have the turn
                d["any"] = [int(u) for u in x[4:].split(",")]
        if w[0] in ("forward", "fallback"):
            d["up"] = int(w[1])
            d["muts"] = [] if w[2] == "-" else [int(m) for m in w[2].split(",")]
            d["dels"] = [] if w[3] == "-" else [bytes.fromhex(h) for h in w[3].split(",")]
        elif w[0] in ("deny", "refuse"):
            d["status"] = int(w[1])
        out.append(d)
    return out


def insert_ids(data, decisions, tag):
    """An x-diff-id field after the request line of every request decided forward, fallback
    or deny (refused ones stay byte for byte as generated: a leak of one is a stray)."""
    out, prev, k = bytearray(), 0, 0
    for d in decisions:
        if d["kind"] not in ("forward", "fallback", "deny") or "off" not in d:
            continue
        nl = data.find(b"\n", d["off"])
        if nl < 0:
            continue
        out += data[prev:nl + 1] + b"x-diff-id: %s.%d\r\n" % (tag.encode(), k)
        prev, k = nl + 1, k + 1
    return bytes(out + data[prev:])


# ---------------------------------------------------------------- the kernel path

def held(decs, k):
    """A request whose chunked body is refused: l7run holds chunked requests until their body
    is framed whole, so it never reaches a backend and gets no response of its own."""
    return (decs[k]["kind"] in ("forward", "fallback") and k + 1 < len(decs) and decs[k + 1]["kind"] == "refuse"
            and decs[k + 1].get("body"))


def exchange(port, src, data, decisions):
    """Send one stream; returns (responses, closed)."""
    want, methods, tail = 0, [], None
    for i, d in enumerate(decisions):
        if d["kind"] in ("forward", "fallback", "deny", "refuse"):
            if held(decisions, i):
                continue
            if d.get("partial"):
                tail = "partial"
                break
            want += 1
            off = d.get("off", 0)
            # a refusal (malformed head) has a body whatever its method; any other answer to a
            # HEAD has none (RFC 9110 9.3.2), from the backend or from l7run
            methods.append(b"" if d["kind"] == "refuse" else data[off:off + 16].split(b" ", 1)[0])
            if d["kind"] == "refuse":
                tail = "refuse"
                break
        else:
            tail = d["kind"]
            break
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((src, 0))
    s.settimeout(5)
    buf, closed, resp = b"", False, []
    try:
        s.connect(("127.0.0.1", port))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            s.sendall(data)
        except OSError:
            pass
        s.setblocking(False)
        idle = 3.0
        deadline = time.time() + 10
        while time.time() < deadline:
            resp, _ = parse_responses(buf, methods)
            if len(resp) >= want:
                if tail == "refuse":
                    idle = 2.0      # until the close
                elif tail in ("incomplete", "partial", "body", "closed"):
                    idle = 0.15     # anything the kernel should not answer?
                else:
                    break
            r, _, _ = select.select([s], [], [], idle)
            if not r:
                break
            try:
                chunk = s.recv(1 << 16)
            except (ConnectionResetError, BlockingIOError) as e:
                if isinstance(e, BlockingIOError):
                    continue
                closed = True
                break
            if not chunk:
                closed = True
                break
            buf += chunk
        resp, _ = parse_responses(buf, methods + [b""] * 8)
    except OSError:
        closed = True
    finally:
        s.close()
    return resp, closed


# ---------------------------------------------------------------- one policy

def show(data, limit=600):
    r = repr(data[:limit])
    return r + (" ... (%d bytes)" % len(data) if len(data) > limit else "")


def run_policy(pi, policy, corpus, totals, mismatches):
    name = os.path.basename(policy)
    c = Consts(subprocess.run([EVAL, "--constants", policy], capture_output=True, text=True, check=True).stdout)
    if c.njwts:
        print("%s: JWT rules: tokens signed with the policy's keys, verified at %d in both" % (name, NOW))
    work = tempfile.mkdtemp(prefix="l7c-diff-")
    pin = "/sys/fs/bpf/l7c-diff-%d-%d" % (PID, pi)
    logpath = os.path.join(work, "backend.log")
    t0 = time.time()
    try:
        obj = os.path.join(work, "p.o")
        subprocess.run([L7C, policy, "-o", obj], check=True, capture_output=True, timeout=120)
        svc_port = {i: BASE + i for i, _, _ in c.services}
        up_port = {i: BASE + 8 + i for i in c.upstreams}
        open(logpath, "w").close()
        be = start([sys.executable, BACKEND, logpath] + ["%s=%d" % (c.upstreams[i], p) for i, p in up_port.items()],
                   stdout=subprocess.PIPE)
        be.stdout.readline()
        args = [L7RUN, "--pin", pin]
        for i, p in svc_port.items():
            args += ["--listen", "%d=127.0.0.1:%d" % (i, p)]
        for i, p in up_port.items():
            args += ["--upstream", "%d=127.0.0.1:%d" % (i, p)]
        l7log = open(os.path.join(work, "l7run.log"), "w")
        start(args + [obj], stdout=l7log, stderr=l7log, env=dict(os.environ, L7RUN_JWT_NOW=str(NOW)))
        for p in svc_port.values():
            if not wait_port(p, 30):
                raise RuntimeError("l7run did not come up:\n" + open(l7log.name).read()[-1500:])

        # the cases: (label, service, src, bytes)
        g = Gen(c, 1000 + pi)
        cases = [(label, data) for label, data in corpus]
        while len(cases) < max(PER_POLICY, len(corpus) + 1):
            x = g.r.random()
            kind = "valid" if x < 0.55 else "edge" if x < 0.8 else "malformed"
            cases.append((kind, getattr(g, kind)()))
        svcs = [i for i, _, _ in c.services]
        placed = [(label, g.pick(svcs), g.pick(g.srcs), data) for label, data in cases]
        # pass 1: where the requests are; then the ids; pass 2: the decisions of the final bytes
        d1 = evaluate(policy, [(s, src, svc_port[s], data) for _, s, src, data in placed])
        final = [(label, s, src, insert_ids(data, d, "%d-%d" % (pi, n)))
                 for n, ((label, s, src, data), d) in enumerate(zip(placed, d1))]
        d2 = evaluate(policy, [(s, src, svc_port[s], data) for _, s, src, data in final])

        with ThreadPoolExecutor(WORKERS) as ex:
            results = list(ex.map(lambda a: exchange(svc_port[a[0][1]], a[0][2], a[0][3], a[1]), zip(final, d2)))
        time.sleep(0.5)   # stragglers into the backend log
        seen = {}
        stray = []
        for line in open(logpath):
            bname, hx = line.split()
            head = bytes.fromhex(hx)
            m = re.search(rb"\r\nx-diff-id: (\S+)\r\n", head + b"\r\n")
            if m:
                seen.setdefault(m.group(1).decode(), []).append((bname, head))
            else:
                stray.append((bname, head))

        counts = {}
        known = set()
        for n, ((label, s, src, data), decs, (resp, closed)) in enumerate(zip(final, d2, results)):
            problems = check_case(c, n, pi, data, decs, resp, closed, seen, known, counts)
            for p in problems:
                mismatches.append("%s case %d (%s, service %d, from %s): %s\n    request: %s\n    evaluator: %s"
                                  % (name, n, label, s, src, p, show(data), decs))
        for k in seen:
            if k not in known:
                for bname, head in seen[k]:
                    mismatches.append("%s: backend %s got a request with unexpected id %s: %s" % (name, bname, k, show(head)))
        for bname, head in stray:
            line = head if any(head in data for _, _, _, data in final) else head.split(b"\r\n", 1)[0]
            where = ["case %d (%s): %s, evaluator %s" % (n, label, show(data), dec)
                     for n, ((label, _, _, data), dec) in enumerate(zip(final, d2)) if line in data][:3]
            mismatches.append("%s: backend %s got a request no decided request explains (leak): %s\n    sent in %s"
                              % (name, bname, show(head), "\n    or ".join(where) or "no case"))
        if c.njwts:
            print("%s: tokens made: %s" % (name, ", ".join("%s %d" % kv for kv in sorted(g.token_kinds.items()))))
            if not counts.get("forward"):   # every forward of these policies needs a valid token
                mismatches.append("%s: no request was forwarded (its forwards need a valid token)" % name)
        for k, v in counts.items():
            totals[k] = totals.get(k, 0) + v
        print("%s: %d streams, %d requests decided in %.1fs: %s" % (
            name, len(final), sum(v for k, v in counts.items()), time.time() - t0,
            ", ".join("%s %d" % kv for kv in sorted(counts.items()))), flush=True)
    finally:
        stop_all()
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(pin, ignore_errors=True)


def check_case(c, n, pi, data, decs, resp, closed, seen, known, counts):
    problems = []
    ri = 0
    ended = False
    for k, d in enumerate(decs):
        kind = d["kind"]
        counts[kind] = counts.get(kind, 0) + 1
        # the id of this request, if it got one
        rid = None
        if "off" in d:
            nl = data.find(b"\n", d["off"])
            m = re.match(rb"x-diff-id: (\S+)\r\n", data[nl + 1:nl + 80]) if nl >= 0 else None
            rid = m.group(1).decode() if m else None
        if rid:
            known.add(rid)
        got = seen.get(rid, []) if rid else []
        lenient = d.get("partial") or (k + 1 < len(decs) and decs[k + 1]["kind"] == "body")
        if held(decs, k):
            counts["held"] = counts.get("held", 0) + 1
            if got:
                problems.append("%s (chunked body refused): but backend %s got it" % (kind, got[0][0]))
            continue
        if kind in ("forward", "fallback"):
            upname = c.upstreams.get(d["up"], "?")
            if not lenient or ri < len(resp):
                if ri >= len(resp):
                    problems.append("%s %s: no response (closed=%s)" % (kind, upname, closed))
                elif resp[ri][0] != 200:
                    problems.append("%s %s: status %d, body %r" % (kind, upname, resp[ri][0], resp[ri][1][:200]))
            ri += 1
            if not rid:
                problems.append("%s: request without an id (cannot check the backend)" % kind)
                continue
            if len(got) != 1 and not (lenient and not got):
                problems.append("%s %s: the backends got it %d times: %s" % (kind, upname, len(got), [b for b, _ in got]))
            for bname, head in got[:1]:
                names = [c.upstreams.get(u, "?") for u in d.get("any", [d["up"]])]
                if bname not in names:
                    problems.append("%s %s: went to backend %s" % (kind, "|".join(names), bname))
                sent = data[d["off"]:data.find(b"\r\n\r\n", d["off"])]
                # gateway mode cuts the hop-by-hop lines before anything else
                why = head_diff(hop_cut(sent), head, [c.mutations[m] for m in d["muts"]], d["dels"])
                if why:
                    problems.append("%s %s: the backend saw a different head (%s): %s" % (kind, upname, why, show(head)))
        elif kind == "deny":
            if ri >= len(resp):
                problems.append("deny %d: no response (closed=%s)" % (d["status"], closed))
            elif resp[ri][0] != d["status"]:
                problems.append("deny %d: status %d, body %r" % (d["status"], resp[ri][0], resp[ri][1][:200]))
            ri += 1
            if got:
                problems.append("deny %d: but backend %s got it" % (d["status"], got[0][0]))
        elif kind == "refuse":
            if ri < len(resp):
                st = resp[ri][0]
                if not 400 <= st <= 599:
                    problems.append("refuse %d: status %d" % (d["status"], st))
                elif st != d["status"]:
                    counts["refuse-status-differs"] = counts.get("refuse-status-differs", 0) + 1
            elif not closed:
                problems.append("refuse %d: neither a response nor a close" % d["status"])
            if got:
                problems.append("refuse %d: but backend %s got it" % (d["status"], got[0][0]))
            ended = True
            if len(resp) > ri + 1:
                problems.append("responses after the refused request: %s" % [s for s, _ in resp[ri + 1:]])
            break
        elif kind in ("incomplete",):
            if got:
                problems.append("incomplete: but backend %s got it" % got[0][0])
            if len(resp) > ri:
                problems.append("incomplete: answered %s" % [s for s, _ in resp[ri:]])
            ended = True
            break
        elif kind in ("body", "closed"):
            ended = True
            break
        if d.get("partial"):
            ended = True
            break
    if not ended and len(resp) > ri:
        problems.append("more responses than requests: %s" % [s for s, _ in resp])
    return problems


def head_diff(sent, got, muts, dels=()):
    """'' if got is sent without its lines of the removed names (dels) and with exactly the
    mutation lines added (in order, anywhere after the request line), else what differs."""
    want_lines = [l for i, l in enumerate(sent.split(b"\r\n"))
                  if i == 0 or l.partition(b":")[0].lower() not in dels]
    lines = got.split(b"\r\n")
    mut_lines = [n + b": " + v for n, v in muts]
    rest, found = [], []
    mi = 0
    for i, l in enumerate(lines):
        if i > 0 and mi < len(mut_lines) and l == mut_lines[mi]:
            found.append(l)
            mi += 1
        else:
            rest.append(l)
    if mi < len(mut_lines):
        return "missing set-header %r" % mut_lines[mi]
    if rest != want_lines:
        extra = [l for l in rest if l not in want_lines]
        missing = [l for l in want_lines if l not in rest]
        return "extra lines %r, missing lines %r" % (extra[:4], missing[:4]) if extra or missing else "reordered"
    return ""


def main():
    corpus = corpus_cases()
    if not corpus:
        # The generated requests need nothing beside the clone; the external corpus adds its
        # cases when it is there (required under CI=true).
        if os.environ.get("CI") == "true":
            print("FAILED: no conformance corpus at %s (CI=true requires it; set L7_CORPUS)" % CORPUS)
            return 1
        print("SKIPPED corpus cases: no conformance corpus at %s (set L7_CORPUS); generated requests only"
              % CORPUS)
    totals, mismatches = {}, []
    t0 = time.time()
    try:
        for pi, policy in enumerate(POLICIES):
            try:
                run_policy(pi, policy, corpus, totals, mismatches)
            except Exception as e:  # noqa: BLE001 - a policy that cannot run is a failure, not a skip
                mismatches.append("%s: could not run: %s" % (os.path.basename(policy), e))
    finally:
        stop_all()
    for m in mismatches:
        print("MISMATCH " + m)
    decided = sum(v for k, v in totals.items() if k != "refuse-status-differs")
    print("differential: %d policies, %d requests in %.0fs: %s; %d mismatches" % (
        len(POLICIES), decided, time.time() - t0, ", ".join("%s %d" % kv for kv in sorted(totals.items())),
        len(mismatches)))
    return 1 if mismatches or decided < 1000 else 0


if __name__ == "__main__":
    sys.exit(main())
