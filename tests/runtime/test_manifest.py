#!/usr/bin/python3
"""The manifest l7run reads from an object (l7/manifest.h), end to end:
  - `l7run --manifest OBJ` prints every record; the rule table of a policy whose values hold
    spaces, a tab, quotes, a backslash and UTF-8 is there, its keys as those bytes;
  - an object whose manifest is of another version, not a manifest, cut short, the old text
    section, or a file cut in half is refused at start (exit 1, nothing listening, no pins) and
    by --manifest, with the reason; so is a reload to one (the serving version stays);
  - that table decides in the kernel as the reference evaluator (`l7c --eval`) does, in gateway
    and mesh mode: each of the 40 values, near misses, no header; and --metrics counts each
    value's hits at its rule's line.
usage: test_manifest.py L7C L7RUN ECHO_BACKEND MESH_ECHO   (root: BPF, cgroup2; never skips)"""
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from check import check, summary  # noqa: E402
from procs import CG_ROOT, cgroup_left, cgroup_run, serving, start, stop, wait_port  # noqa: E402
from rawhttp import request  # noqa: E402

L7C, L7RUN, ECHO, MESH_ECHO = sys.argv[1:5]
PID = os.getpid()
BASE = 24000 + (PID % 400) * 8          # below the ephemeral range
SVC, UA, UB = BASE, BASE + 1, BASE + 2
CG = os.path.join(CG_ROOT, "l7manifest-%d" % PID)
# the version this tree's l7c writes and l7run reads (stdlib/include/l7/manifest.h)
VER = int(re.search(r"#define L7M_VERSION (\d+)", open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                    "stdlib", "include", "l7", "manifest.h")).read()).group(1))
WORK = tempfile.mkdtemp(prefix="l7manifest-")
N = 40


def value(i):
    """The x-tenant value of rule i: words with spaces, some with a tab, quotes, a backslash or
    UTF-8 (bytes, as the .l7 file and the request carry them)."""
    special = {5: "tab\there %d", 6: 'say "hi" %d', 7: "back\\slash %d", 8: "caf\u00e9 \u00fc %d"}
    return (special.get(i, "acme corp %d") % i).encode()


def l7_string(v):
    return v.replace(b"\\", b"\\\\").replace(b'"', b'\\"').replace(b"\t", b"\\t")


def action(i):
    return ["Route(request, a);", "Route(request, b);", "Deny(request, %d);" % (450 + i % 10)][i % 3]


def policy():
    rules = b"".join(b'  %sif (request.header("x-tenant") == "%s") {\n    %s\n  }\n' %
                     (b"} else " if i else b"", l7_string(value(i)), action(i).encode()) for i in range(N))
    rules = rules.replace(b"  }\n  } else ", b"  } else ")
    return (b"service front = 127.0.0.1:%d;\nupstream a = 127.0.0.1:%d;\nupstream b = 127.0.0.1:%d;\n"
            b"policy tenants (act (HttpRequest request) context ('.*->front')) {\n%s}\n" % (SVC, UA, UB, rules))


def raw(tenant):
    return b"GET /x HTTP/1.1\r\nHost: front\r\n" + (b"x-tenant: " + tenant + b"\r\n" if tenant is not None else b"") + b"\r\n"


def expected(src, tenant):
    """(status, backend or None, rule line or None) by l7c --eval."""
    f = os.path.join(WORK, "req.http")
    open(f, "wb").write(raw(tenant))
    out = subprocess.run([L7C, "--eval=" + f, src], check=True, capture_output=True, text=True).stdout
    m = re.search(r"^verdict: (forward|deny|refuse) (\S+)", out, re.M)
    line = re.search(r"^rule: \d+ \(line (\d+)\)", out, re.M)
    line = int(line.group(1)) if line else None
    if not m:
        return (404, None, None)
    return (200, m.group(2), line) if m.group(1) == "forward" else (int(m.group(2)), None, line)


# ---- objects with a broken manifest (the ELF section patched in place) ----

def sections(data):
    """{name: (header offset, data offset, size)} of an ELF64 little-endian object."""
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    hdr = lambda i: shoff + i * shentsize   # noqa: E731
    stroff, = struct.unpack_from("<Q", data, hdr(shstrndx) + 24)
    out = {}
    for i in range(shnum):
        name, = struct.unpack_from("<I", data, hdr(i))
        off, size = struct.unpack_from("<QQ", data, hdr(i) + 24)
        end = data.index(b"\0", stroff + name)
        out[data[stroff + name:end].decode()] = (hdr(i), off, size, stroff + name)
    return out


def broken(obj, name, change):
    data = bytearray(open(obj, "rb").read())
    change(data, sections(data)["l7.manifest"])
    path = os.path.join(WORK, name + ".o")
    open(path, "wb").write(data)
    return path


def set_version(v):
    return lambda d, s: struct.pack_into("<I", d, s[1] + 4, v)


def bad_magic(d, s):
    d[s[1]] ^= 0xff


def cut_section(d, s):   # the section half as long as its manifest says
    struct.pack_into("<Q", d, s[0] + 32, s[2] // 2)


def old_name(d, s):      # the section named as l7c before the manifest named it
    d[s[3]:s[3] + 11] = b"l7.config\0\0"


def bad_objects(obj):
    half = os.path.join(WORK, "half.o")
    data = open(obj, "rb").read()
    open(half, "wb").write(data[:len(data) // 2])
    size = sections(data)["l7.manifest"][2]
    return [("newer", broken(obj, "newer", set_version(VER + 1)),
             "compiled by a newer l7c: manifest version %d, this l7run reads %d" % (VER + 1, VER)),
            ("older", broken(obj, "older", set_version(1)), "compiled by an older l7c: manifest version 1, this l7run reads %d" % VER),
            ("magic", broken(obj, "magic", bad_magic), "not an l7c manifest"),
            ("truncated", broken(obj, "cut", cut_section), "truncated manifest: %d bytes, its header says %d" % (size // 2, size)),
            ("text", broken(obj, "text", old_name), "manifest version 1 (its text section l7.config)"),
            ("half a file", half, "not an l7c object")]


def t_refused(obj):
    for name, path, why in bad_objects(obj):
        r = subprocess.run([L7RUN, "--manifest", path], capture_output=True, text=True, timeout=30)
        check(r.returncode == 1 and why in r.stderr and not r.stdout,
              "--manifest refuses the %s object: exit %d, %r" % (name, r.returncode, r.stderr.strip()))
        pin = "/sys/fs/bpf/l7manifest-%d-%s" % (PID, name.replace(" ", "-"))
        r = subprocess.run([L7RUN, "--pin", pin, path], capture_output=True, text=True, timeout=60)
        check(r.returncode == 1 and why in r.stderr and path in r.stderr,
              "l7run refuses to start with the %s object: exit %d, %r" % (name, r.returncode, r.stderr.strip()[-300:]))
        check(not os.path.exists(pin) and not wait_port(SVC, 0.2), "nothing left of it: no pins, nothing listening")


def t_reload_refused(obj):
    """A reload to an object of another manifest version changes nothing."""
    live, pin, pidfile = os.path.join(WORK, "live.o"), "/sys/fs/bpf/l7manifest-%d-reload" % PID, os.path.join(WORK, "pid")
    shutil.copy(obj, live)
    log = open(os.path.join(WORK, "reload.log"), "w+")
    backends = [start([sys.executable, ECHO, str(p), n], stdout=subprocess.DEVNULL, stderr=log) for n, p in (("a", UA), ("b", UB))]
    for p in (UA, UB):
        wait_port(p, 10)
    l7 = start([L7RUN, "--pin", pin, "--pidfile", pidfile, live], stdout=log, stderr=log)
    try:
        check(wait_port(SVC, 60), "l7run serves the policy")
        newer = [p for n, p, _ in bad_objects(obj) if n == "newer"][0]
        tmp = live + ".new"
        shutil.copy(newer, tmp)
        os.replace(tmp, live)
        r = subprocess.run([L7RUN, "--reload", pidfile, "--pin", pin], capture_output=True, text=True, timeout=120)
        time.sleep(0.2)
        log.seek(0)
        text = log.read()
        check(r.returncode == 1 and "manifest version %d, this l7run reads %d" % (VER + 1, VER) in text,
              "a reload to a newer manifest is refused and says why: exit %d, %r" % (r.returncode, text[-400:]))
        st, body = request(SVC, raw(value(1)))
        check(st == 200 and "backend=b" in body, "the serving version still answers: %d %r" % (st, body[:80]))
    finally:
        stop(l7)
        for b in backends:
            stop(b)
        log.close()
        shutil.rmtree(pin, ignore_errors=True)


def rule_hits(pin, obj):
    text = subprocess.run([L7RUN, "--metrics", pin, obj], capture_output=True, text=True, timeout=30).stdout
    hits = {}
    for line, n in re.findall(r'l7_rule_hits_total\{rule="\d+",line="(\d+)",policy="tenants"[^}]*\} (\d+)', text):
        hits[int(line)] = hits.get(int(line), 0) + int(n)
    return dict((k, v) for k, v in hits.items() if v)


def main():
    src, obj = os.path.join(WORK, "tenants.l7"), os.path.join(WORK, "tenants.o")
    open(src, "wb").write(policy())
    r = subprocess.run([L7C, src, "-o", obj], capture_output=True, text=True)
    check(r.returncode == 0, "l7c compiles the policy: %s" % r.stderr[-500:])
    if r.returncode:
        return summary("test_manifest")

    r = subprocess.run([L7RUN, "--manifest", obj], capture_output=True, timeout=30)
    out = r.stdout
    tables = re.findall(rb'^table\[\d+\] table=0 match=exact method=any group=\d+ key="([^"]*)"$', out, re.M)
    check(r.returncode == 0 and out.startswith(b"manifest version %d: " % VER) and len(tables) == N,
          "--manifest: version %d, one table of %d entries (%d): %r" % (VER, N, len(tables), out[:200]))
    check(tables[1:2] == [b"acme corp 1"] and tables[5:9] == [b"tab\\x09here 5", b"say \\x22hi\\x22 6",
                                                               b"back\\x5cslash 7", b"caf\\xc3\\xa9 \\xc3\\xbc 8"],
          "--manifest prints the keys as their bytes: %r" % tables[:9])
    check(re.search(rb'^service\[0\] name="front" ip=127\.0\.0\.1 port=%d$' % SVC, out, re.M) is not None and
          len(re.findall(rb"^rule\[\d+\] .* entry=table\[\d+\]$", out, re.M)) == N,
          "--manifest: the service, and each value's rule counted at its table entry")

    t_refused(obj)
    t_reload_refused(obj)

    tenants = [value(i) for i in range(N)]
    tenants += [b"acme corp", b"acme  corp 1", b"acme corp 1 ", b"ACME corp 1", b"acme corp 1x", b"tab here 5",
                b"", None]
    cases = [(t, expected(src, t)) for t in tenants]
    check(cases[0][1][:2] == (200, "a") and cases[1][1][:2] == (200, "b") and cases[2][1][0] == 452 and
          cases[N][1][0] == 404 and cases[N + 2][1][:2] == (200, "b"),
          "the reference evaluator answers as the policy says: %s" % [c[1] for c in cases[:3] + cases[N:N + 3]])
    hits_want = {}
    for t, w in cases:
        if w[2]:
            hits_want[w[2]] = hits_want.get(w[2], 0) + 1
    with cgroup_run(CG, WORK):
        for mode in ("gateway", "mesh"):
            pin = "/sys/fs/bpf/l7manifest-%d-%s" % (PID, mode)
            log = open(os.path.join(WORK, mode + ".log"), "w")
            backends = [([sys.executable, MESH_ECHO, n, str(p)] if mode == "mesh" else [sys.executable, ECHO, str(p), n], p)
                        for n, p in (("a", UA), ("b", UB))]
            with serving(mode, L7RUN, obj, SVC, backends, log, CG, pin):
                bad = []
                for t, want in cases:
                    st, body = request(SVC, raw(t))
                    m = re.search(r"backend=(\w+)", body.lower())
                    if st != want[0] or (st == 200 and (not m or m.group(1) != want[1])):
                        bad.append("%r -> %d %s (l7c --eval: %s)" % (t, st, m and m.group(1), want))
                check(not bad, "%s: %d requests decided as l7c --eval decides them; wrong: %s" % (mode, len(cases), bad))
                got = rule_hits(pin, obj)
                check(got == hits_want, "%s: --metrics counts each value's hits at its rule's line (%d lines; got %d)"
                      % (mode, len(hits_want), len(got)))
    return summary("test_manifest") or cgroup_left(CG)


sys.exit(main())
