#!/usr/bin/python3
"""One `l7c import` case (tests/import/cases/*.yaml): its diagnostics exactly, the output compiled
by l7c with no errors, and its decision table through the reference evaluator (`l7c --eval`)
and through the kernel (l7run in gateway mode, echo backends, real HTTP clients, callers bound
to their identity's addresses, `l7run --identities`), all in a network namespace of its own.

A case is YAML with comment lines that say what must happen:

  # source: URL                          where a documentation example comes from
  # args: --port 8080                    extra `l7c import` options
  # expect: LINE:COL: SEVERITY: MESSAGE  the diagnostics, in order, exactly (file: the case;
  #                                      `l7c: SEVERITY: MESSAGE` for those with no position)
  # compile-warning: TEXT                a warning l7c prints compiling the output (contains TEXT;
  #                                      every warning printed must contain one of them)
  # compile-args: --budget=N             options of that compile
  # test: [from IDENTITY|IP] [to SERVICE] METHOD TARGET [H:name:value]... [host:HOST]
  #       [jwt|jwt-badsig|jwt-expired|jwt-alg-none[@JWT]:CLAIMS] -> STATUS [UPSTREAM] [+name:value]...
  #       [-name[:value]]... [audit]       the backend sees that line; no line of the name (or not
  #                                      that one); audit: the request is audited (a deny not
  #                                      enforced: `audit:` from the evaluator, --stats `audited`
  #                                      grows by one in the kernel), and without it is not
  #                                      one row of the decision table: STATUS from the evaluator
  #                                      and from the kernel; UPSTREAM the backend that answers
  #                                      (default: the service's own; `proxy`: the fallback)

Identities named in `from` get addresses here: 127.0.(10+k).0/24, the client bound to .1.
Usage: run_import.py L7C L7RUN ECHO_BACKEND CASE.yaml"""
import ctypes
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from check import check, summary  # noqa: E402
from jwtgen import token as jwt_token  # noqa: E402
from procs import start, stop_all, wait_port  # noqa: E402
from rawhttp import Reader, connect  # noqa: E402

L7C, L7RUN, ECHO, CASE = sys.argv[1:5]
NAME = os.path.splitext(os.path.basename(CASE))[0]
TEXT = open(CASE).read()
ROW = re.compile(r"(?:from (\S+) )?(?:to (\S+) )?(\S+) (\S+)(.*?)->(.*)$")
DIAG = re.compile(r"^(?:(.+?):(\d+):(\d+)|l7c): (error|warning|note): (.*)$")


def lines(tag):
    return [m.strip() for m in re.findall(r"^# %s:(.*)$" % tag, TEXT, re.M)]


def diagnostics(stderr, case_path):
    """The diagnostics of l7c's stderr as `LINE:COL: SEV: MSG` (the case's own positions) or
    `l7c: SEV: MSG`; caret and source lines dropped."""
    out = []
    for l in stderr.splitlines():
        m = DIAG.match(l)
        if not m:
            continue
        path, line, col, sev, msg = m.groups()
        if path is None:
            out.append("l7c: %s: %s" % (sev, msg))
        elif os.path.abspath(path) == os.path.abspath(case_path):
            out.append("%s:%s: %s: %s" % (line, col, sev, msg))
        else:
            out.append("%s:%s:%s: %s: %s" % (os.path.basename(path), line, col, sev, msg))
    return out


def parse_row(row):
    m = ROW.match(row.strip())
    if not m:
        raise ValueError("bad test line: " + row)
    src, svc, method, target, extra, expect = m.groups()
    headers, host, jwt = [], "example", None
    for tok in extra.split():
        if tok.startswith("H:"):   # %20 for a space in the value
            _, name, value = tok.split(":", 2)
            headers.append((name, value.replace("%20", " ")))
        elif tok.startswith("host:"):
            host = tok[5:]
        elif tok.startswith("jwt"):   # jwt[@INSTANCE]: signed for that Jwt instance (default the first)
            kind, _, claims = tok.partition(":")
            kind, _, inst = kind.partition("@")
            jwt = (kind, json.loads(claims), inst)
        else:
            raise ValueError("bad token %r in %s" % (tok, row))
    return src, svc, method, target, headers, host, jwt, expect.split()


def jwt_of(l7text, outdir):
    """{instance: (key, issuer, audience, header)} of the output's Jwt instances, and the first's name."""
    out, first = {}, None
    for m in re.finditer(r'^Jwt (\S+) \{ key_file = "([^"]+)"; issuer = "([^"]*)";(?: audience = "([^"]*)";)?(?: header = "([^"]*)";)?',
                         l7text, re.M):
        key = open(os.path.join(outdir, m.group(2)), "rb").read()
        key = key[:-1] if key.endswith(b"\n") else key
        key = key[:-1] if key.endswith(b"\r") else key
        out[m.group(1)] = (key, m.group(3), m.group(4), m.group(5) or "Authorization")
        first = first or m.group(1)
    return out, first


def request_bytes(method, target, headers, host, jwt, keyinfo):
    hs = list(headers)
    if jwt:
        kind, claims, inst = jwt
        key, iss, aud, header = keyinfo[0][inst or keyinfo[1]]
        body = dict(claims)
        body.setdefault("iss", iss)
        if aud:
            body.setdefault("aud", aud)
        body.setdefault("exp", int(time.time()) + (-600 if kind == "jwt-expired" else 600))
        tok = jwt_token(key, body, alg="none" if kind == "jwt-alg-none" else "HS256", flip=kind == "jwt-badsig")
        hs.append((header, "Bearer " + tok))
    req = "%s %s HTTP/1.1\r\nHost: %s\r\n" % (method, target, host)
    req += "".join("%s: %s\r\n" % h for h in hs)
    if method in ("POST", "PUT", "PATCH"):
        req += "Content-Length: 0\r\n"
    return (req + "\r\n").encode()


def audits(pin):
    """the data plane's count of audited requests (l7run --stats: `stat audited N`)"""
    out = subprocess.run([L7RUN, "--stats", pin], capture_output=True, text=True, timeout=20).stdout
    m = re.search(r"^stat audited\s+(\d+)$", out, re.M)
    return int(m.group(1)) if m else -1


def unshare_net():
    """This process (and what it starts) in a network namespace of its own: fixed ports and
    addresses are ours alone, and nothing leaks out."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(0x40000000) != 0:   # CLONE_NEWNET
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNET)")
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)


def main():
    work = tempfile.mkdtemp(prefix="l7c-import-")
    pin = "/sys/fs/bpf/l7c-import-%d" % os.getpid()
    try:
        run(work, pin)
    finally:
        stop_all()
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(pin, ignore_errors=True)
    return summary("import." + NAME)


def run(work, pin):
    args = " ".join(lines("args")).split()
    expect = lines("expect")
    rows = [parse_row(r) for r in lines("test")]
    # identities of the rows: addresses of our own
    ids, idfile = {}, os.path.join(work, "ids.txt")
    for src, *_ in rows:
        if src and not re.match(r"^\d+\.\d+\.\d+\.\d+$", src) and src not in ids:
            ids[src] = "127.0.%d" % (10 + len(ids))
    with open(idfile, "w") as f:
        for n, net in ids.items():
            f.write("%s %s.0/24\n" % (n, net))

    out = os.path.join(work, "policy.l7")
    p = subprocess.run([L7C, "import"] + args + [CASE, "-o", out], capture_output=True, text=True)
    got = diagnostics(p.stderr, CASE)
    errors = any(": error: " in e for e in expect)
    check(got == expect, "%s: diagnostics as expected\n  got:\n    %s\n  expected:\n    %s" % (
        NAME, "\n    ".join(got) or "(none)", "\n    ".join(expect) or "(none)"))
    check(p.returncode == (1 if errors else 0), "%s: l7c import exits %d (got %d)" % (NAME, 1 if errors else 0, p.returncode))
    if errors:
        check(not os.path.exists(out), "%s: no output written when there are errors" % NAME)
        check(not rows, "%s: an error case has no decision table" % NAME)
        return
    l7text = open(out).read()
    print(l7text)
    # the output compiles, with only the warnings the case names
    obj = os.path.join(work, "policy.o")
    c = subprocess.run([L7C] + " ".join(lines("compile-args")).split() + [out, "-o", obj], capture_output=True, text=True)
    check(c.returncode == 0, "%s: the output compiles (l7c exit %d)\n%s" % (NAME, c.returncode, c.stderr[-3000:]))
    warns = [l for l in c.stderr.splitlines() if ": warning: " in l]
    want = lines("compile-warning")
    # each warning is one the case names, and each it names is printed (how many programs a
    # budget warning names depends on the calibration's estimates, which move with the kernel)
    check(all(any(w in g for w in want) for g in warns) and all(any(w in g for g in warns) for w in want),
          "%s: compile warnings as expected\n  got: %s\n  expected: %s" % (NAME, warns, want))
    if c.returncode:
        return
    # the same import with the identities declared, for the evaluator (it has no identities file)
    evl7 = os.path.join(work, "eval.l7")
    subprocess.run([L7C, "import"] + args + ["--identities", idfile, CASE, "-o", evl7], capture_output=True, check=True)
    services = re.findall(r"^service (\S+) = (\d+\.\d+\.\d+\.\d+):(\d+);", l7text, re.M)
    upstreams = re.findall(r"^(?:upstream|fallback) (\S+) = (\d+\.\d+\.\d+\.\d+):(\d+);", l7text, re.M)
    keyinfo = jwt_of(l7text, work)
    svc_of = {s[0]: s for s in services}
    for r in rows:
        if r[1] and r[1] not in svc_of:
            check(False, "%s: row names service %s, which the output does not declare" % (NAME, r[1]))
            return

    def src_ip(src):
        if not src:
            return "127.0.0.1"
        return src if re.match(r"^\d+\.\d+\.\d+\.\d+$", src) else ids[src] + ".1"

    def expected(svc, words):
        status, backend = int(words[0]), None
        rest = [w for w in words[1:] if w != "audit"]
        if rest and not rest[0][0] in "+-":
            backend, rest = rest[0], rest[1:]
        if status != 0 and backend is None and not (400 <= status):
            backend = svc + "_backend"
        return status, backend, [w for w in rest if w[0] == "+"], [w for w in rest if w[0] == "-"]

    # the evaluator
    for i, r in enumerate(rows):
        src, svc, method, target, headers, host, jwt, words = r
        svc = svc or services[0][0]
        status, backend, plus, minus = expected(svc, words)
        desc = "%s: eval row %d: %s" % (NAME, i + 1, lines("test")[i])
        req = os.path.join(work, "req%d" % i)
        open(req, "wb").write(request_bytes(method, target, headers, host, jwt, keyinfo))
        e = subprocess.run([L7C, "--eval=" + req, "--eval-source=" + src_ip(src), "--eval-service=" + svc, evl7],
                           capture_output=True, text=True)
        v = re.search(r"^verdict: (\w+) (\S+)", e.stdout, re.M)
        verdict = (v.group(1), v.group(2)) if v else ("?", e.stdout + e.stderr)
        if status >= 400:
            ok = verdict == ("deny", str(status)) or (verdict[0] == "refuse" and verdict[1] == str(status))
        else:
            ok = verdict[0] in ("forward", "fallback") and verdict[1] == backend
        adds = re.findall(r"^request-add: (\S+): (.*)$", e.stdout, re.M)
        removes = re.findall(r"^request-remove: (\S+)$", e.stdout, re.M)
        sent = headers + ([(keyinfo[0][jwt[2] or keyinfo[1]][3], None)] if jwt else [])
        for w in plus:   # added, or sent by the client and not removed (+name: any value)
            n, colon, val = w[1:].partition(":")
            kept = any(h[0].lower() == n.lower() and (not colon or h[1] == val) for h in sent) and \
                n.lower() not in [x.lower() for x in removes]
            ok &= kept or any(a[0].lower() == n.lower() and (not colon or a[1] == val) for a in adds)
        for w in minus:   # -name: no line of it reaches the upstream; -name:value: not that line
            n, _, val = w[1:].partition(":")
            sent = [h for h in headers if h[0].lower() == n.lower() and (not val or h[1] == val)]
            ok &= not sent or any(x.lower() == n.lower() for x in removes)
            ok &= not any(a[0].lower() == n.lower() and (not val or a[1] == val) for a in adds)
        ok &= ("\naudit: would deny" in "\n" + e.stdout) == ("audit" in words)
        check(ok, desc + "\n    evaluator: " + e.stdout.replace("\n", "\n    "))

    # the kernel
    unshare_net()
    log = open(os.path.join(work, "log"), "w")
    for name, ip, port in upstreams:
        start([sys.executable, ECHO, "%s:%s" % (ip, port), name], stdout=subprocess.DEVNULL, stderr=log)
    for name, ip, port in upstreams:
        wait_port(int(port), 10, ip)
    kidfile = os.path.join(work, "ids-kernel.txt")
    shutil.copy(idfile, kidfile)
    start([L7RUN, "--pin", pin, "--identities", kidfile, obj], stdout=log, stderr=log)
    for name, ip, port in services:
        if not wait_port(int(port), 60, ip):
            log.flush()
            check(False, "%s: l7run serves %s at %s:%s\n%s" % (NAME, name, ip, port, open(log.name).read()[-3000:]))
            return
    for i, r in enumerate(rows):
        src, svc, method, target, headers, host, jwt, words = r
        svc = svc or services[0][0]
        status, backend, plus, minus = expected(svc, words)
        _, ip, port = svc_of[svc]
        audited = audits(pin)
        s = connect(int(port), 5.0, src_ip(src), ip)
        try:
            s.sendall(request_bytes(method, target, headers, host, jwt, keyinfo))
            st, _, body = Reader(s).response(head_only=method == "HEAD")
        except (OSError, EOFError) as e:
            st, body = 0, str(e)
        finally:
            s.close()
        ok = st == status
        grew = audits(pin) - audited
        ok &= grew == (1 if "audit" in words else 0)
        seen = body.lower().replace(": ", ":")
        if method == "HEAD":   # no body: the status says it all
            backend, plus, minus = None, [], []
        if backend:
            ok &= "backend=%s\n" % backend.lower() in seen
        for w in plus:
            ok &= ("header=" + w[1:] + ("" if ":" in w else ":")).lower() in seen
        for w in minus:
            ok &= ("header=" + w[1:] + ("" if ":" in w else ":")).lower() not in seen
        check(ok, "%s: kernel row %d: %s\n    got %d (audited %d): %s" % (NAME, i + 1, lines("test")[i], st, grew,
                                                                     body[:300].replace("\n", " | ")))


if __name__ == "__main__":
    sys.exit(main())
