#!/usr/bin/python3
"""Programs the kernel refuses, explained (issue 18 item 3, support/bpfobj/vlog.c): each
deliberately unverifiable input is given to the running kernel, and the diagnostic must name the
source line of the failing instruction, say why in the sentence of support/bpfobj/vmsg.def, and
point to a log file that holds the verifier's error.
  - too large: an 80-rule regex mix compiled with --split=none (one mesh SK_MSG program the
    kernel stops at 1M processed instructions), through `l7c --explain --verify -o`: the error at
    a line of the .l7 file, a note naming the machinery's C function at its file:line (the
    kernel's own source line for that instruction), the log beside the object, the JSON
    report's refusal saying the same;
    and the same object (written by l7c without --verify) through `l7run --mesh`: the same in
    one line;
  - a helper its program type may not call (a hand-written stream parser calling
    bpf_msg_apply_bytes) and a stack over 512 bytes (two frames of 320 and 288 bytes, each
    within the limit: only the kernel adds them up), both BPF C compiled here by clang with an
    l7c manifest added, given to l7run as POLICY.o: one line on stderr at the C file's line
    (marked in the sources), exit 1, the log in $TMPDIR; and a read past the context, a refusal
    vmsg.def has no sentence for: the verifier's line verbatim.

Usage: refusals.py L7C L7RUN BPF_CLANG OBJCOPY SRC_DIR ARCH_INCLUDE_DIR"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from check import check, summary  # noqa: E402
from procs import CG_ROOT  # noqa: E402
import featuregen  # noqa: E402

L7C, L7RUN, CLANG, OBJCOPY, SRC, ARCH_INCLUDE = sys.argv[1:7]
HERE = os.path.join(SRC, "tests", "kernel", "refusals")
PID = os.getpid()
BASE = 25000 + (PID % 900) * 8          # below the ephemeral range
WORK = tempfile.mkdtemp(prefix="l7c-refusals-")


def marker_line(path, marker):
    for n, line in enumerate(open(path), 1):
        if marker in line:
            return n
    raise SystemExit("no %s in %s" % (marker, path))


def log_holds(path, text):
    return bool(path) and os.path.isfile(path) and text in open(path, errors="replace").read()


def too_large():
    src = os.path.join(WORK, "mix.l7")
    # 80 rules that each run a regex, on a header or a JWT claim (featuregen's kinds 13 and 15):
    # the regex callback is walked again under every earlier rule's state. The 100-rule mix of
    # every kind no longer reaches 1M since the JWT check became two global functions (803K).
    rules = [r for r in featuregen.rules(80 * featuregen.KINDS, BASE) if r.k in (13, 15)][:80]
    open(src, "w").write(featuregen.policy(rules, BASE, [BASE + 1, BASE + 2, BASE + 3], [BASE + 4, BASE + 5], BASE + 6,
                                           os.path.join(SRC, "examples", "keys", "social.key")))
    outdir = os.path.join(WORK, "out")
    os.mkdir(outdir)
    obj = os.path.join(outdir, "mix.o")
    p = subprocess.run([L7C, "--explain", "--verify", "--split=none", "--format=json", "-o", obj, src],
                       capture_output=True, text=True, timeout=300)
    err = "\n".join(l for l in p.stderr.splitlines() if "ExtAuthz" not in l and not l.startswith(" "))
    print(err)
    check(p.returncode == 1 and not os.path.exists(obj), "too large: l7c --verify exits 1 and writes no object (rc %d)"
          % p.returncode)
    m = re.search(r"^%s:(\d+):(\d+): error: the kernel refused program l7_mesh_msg_prog: the program needs more than "
                  r"the kernel's 1M verifier steps" % re.escape(src), err, re.M)
    if not check(m is not None, "too large: an error at a line of the .l7 file, in vmsg.def's sentence (if the kernel "
                 "accepted the program, the machinery got cheaper: raise the rule count while --split=none keeps one "
                 "program)"):
        return
    lines = open(src).read().split("\n")
    line, col = int(m.group(1)), int(m.group(2))
    text = lines[line - 1] if 0 < line <= len(lines) else ""
    check(text.strip() != "" and col == len(text) - len(text.lstrip()) + 1,
          "too large: line %d is policy text and column %d its first character: %r" % (line, col, text))
    n = re.search(r"^(/\S+/stdlib/bpf/\w+\.[ch]):(\d+):\d+: note: the verifier stopped at instruction \d+: .+, in the "
                  r"machinery's (\w+)", err, re.M)
    if check(n is not None, "too large: a note names the machinery's C function at its file:line"):
        cfile, cline, fn = n.group(1), int(n.group(2)), n.group(3)
        above = open(cfile).read().split("\n")[:cline]
        heads = [i for i, l in enumerate(above) if re.match(r"^[A-Za-z_].*\b%s\(" % fn, l)]
        check(bool(heads), "too large: %s is defined in %s above line %d" % (fn, cfile, cline))
    check(re.search(r"note: split it \(a lower --budget\) or move rules to tables or sets", err) is not None,
          "too large: the hint")
    lp = re.search(r"note: full verifier log in (\S+)", err)
    check(lp is not None and os.path.dirname(lp.group(1)) == outdir and log_holds(lp.group(1), "BPF program is too large"),
          "too large: the full log is beside the object and holds the verifier's error")
    try:
        ref = [g["refusal"] for g in json.loads(p.stdout)["programs"] if g["name"] == "l7_mesh_msg_prog"][0] or {}
    except (ValueError, KeyError, IndexError):
        ref = {}
    check(ref.get("file") == src and ref.get("line") == line and ref.get("column") == col and
          ref.get("cause", "").startswith("the program needs more than the kernel's 1M verifier steps") and
          ref.get("log") == (lp.group(1) if lp else None) and ref.get("processed") == 1000001 and
          (ref.get("at") or {}).get("function") == (n.group(3) if n else None),
          "too large: the JSON report's refusal says what the diagnostic says: %s" % ref)
    vlog = open(lp.group(1)).read() if lp and os.path.isfile(lp.group(1)) else ""
    check("processed 1000001 insns" in vlog, "too large: the log holds the kernel's count")
    # the object's line info, laid out as libbpf loads the program, says what the kernel's does
    at = re.search(r"^(\S+):(\d+):\d+: note: the verifier stopped at instruction (\d+):", err, re.M)
    body = vlog.split("\n%s: (" % at.group(3))[0] if at else ""
    kernel = re.findall(r"^; .* @ (\S+):(\d+)$", body, re.M)
    check(bool(kernel) and at is not None and kernel[-1] == (os.path.basename(at.group(1)), at.group(2)),
          "too large: the note's file:line is the kernel's own source line for that instruction (%s)" % (
              kernel[-1] if kernel else None,))

    # l7run meets the same program at load, in mesh mode
    subprocess.run([L7C, "--split=none", "-o", obj, src], capture_output=True, check=True, timeout=300)
    cg, tmp = os.path.join(CG_ROOT, "l7refusals-%d" % PID), os.path.join(WORK, "tmp-mesh")
    os.mkdir(cg)
    os.mkdir(tmp)
    try:
        r = subprocess.run([L7RUN, "--mesh", "--cgroup", cg, "--pin", "/sys/fs/bpf/l7refusals-%d" % PID, obj],
                           capture_output=True, text=True, timeout=120, env=dict(os.environ, TMPDIR=tmp))
    finally:
        os.rmdir(cg)
    print(r.stderr, end="")
    refusal = [l for l in r.stderr.splitlines() if "error: the kernel refused" in l]
    check(r.returncode == 1 and len(refusal) == 1, "too large, l7run --mesh: exits 1 with one line (rc %d)" % r.returncode)
    check(bool(refusal) and refusal[0].find("%s:%d:%d: error: the kernel refused program l7_mesh_msg_prog: the program "
                                            "needs more than" % (src, line, col)) >= 0 and "in the machinery's %s" % (
              n.group(3) if n else "?") in refusal[0],
          "too large, l7run --mesh: the same .l7 line, sentence and machinery function as l7c's")
    lp = re.search(r"full verifier log in (\S+)$", refusal[0]) if refusal else None
    check(lp is not None and os.path.dirname(lp.group(1)) == tmp and log_holds(lp.group(1), "BPF program is too large"),
          "too large, l7run --mesh: the full log is in $TMPDIR")


def manifest():
    """An l7c object's manifest section (a policy of its own ports), for the hand-written objects."""
    src = os.path.join(WORK, "donor.l7")
    open(src, "w").write('import "http.l7i";\nservice front = 127.0.0.1:%d;\nupstream u = 127.0.0.1:%d;\n'
                         "policy p (\n  act (HttpRequest request)\n  context ('.*->front')\n) {\n  [Ingress]\n"
                         "  Route(request, u);\n}\n" % (BASE + 7, BASE + 6))
    obj = os.path.join(WORK, "donor.o")
    subprocess.run([L7C, "-o", obj, src], check=True, timeout=120)
    mf = os.path.join(WORK, "manifest.bin")
    subprocess.run([OBJCOPY, "--dump-section", "l7.manifest=" + mf, obj], check=True)
    return mf


def hand_written(name, mf, marker, sentence, words, extra=None):
    """name.bpf.c compiled, with the manifest mf, given to l7run: refused at the marker's line
    with sentence (vmsg.def's, or the verifier's own), the log holding words; extra: a regex
    the line must match too."""
    csrc = os.path.join(HERE, name + ".bpf.c")
    plain, obj = os.path.join(WORK, name + ".bpf.o"), os.path.join(WORK, name + ".o")
    subprocess.run([CLANG, "-target", "bpf", "-mcpu=v3", "-O2", "-g", "-Wall", "-Wextra",
                    "-I" + ARCH_INCLUDE, "-c", csrc, "-o", plain], check=True)
    subprocess.run([OBJCOPY, "--add-section", "l7.manifest=" + mf, plain, obj], check=True)
    tmp = os.path.join(WORK, "tmp-" + name)
    os.mkdir(tmp)
    p = subprocess.run([L7RUN, obj], capture_output=True, text=True, timeout=60, env=dict(os.environ, TMPDIR=tmp))
    print(p.stderr, end="")
    check(p.returncode == 1, "%s: l7run exits 1 (rc %d)" % (name, p.returncode))
    lines = p.stderr.strip().split("\n")
    check(len(lines) == 1, "%s: one line on stderr (%d)" % (name, len(lines)))
    line = marker_line(csrc, marker)
    m = re.search(r"%s:(\d+):(\d+): error: the kernel refused program l7_client_parser: %s" % (re.escape(csrc),
                                                                                               re.escape(sentence)),
                  p.stderr)
    check(m is not None and int(m.group(1)) == line, "%s: the error at %s:%d (%s), saying %r" % (
        name, os.path.basename(csrc), line, marker, sentence))
    if extra:
        check(re.search(extra, p.stderr) is not None, "%s: %s" % (name, extra))
    lp = re.search(r"full verifier log in (\S+)$", p.stderr.strip())
    check(lp is not None and os.path.dirname(lp.group(1)) == tmp and log_holds(lp.group(1), words),
          "%s: the full log is in $TMPDIR and holds %r" % (name, words))


try:
    too_large()
    mf = manifest()
    hand_written("helper", mf, "REFUSED HERE", "a helper that programs of this type (and attach type) may not call",
                 "program of this type cannot use helper bpf_msg_apply_bytes")
    hand_written("stack", mf, "STACK CALLER", "the stack of its deepest call chain (bpf_loop callbacks included) is "
                 "over the kernel's 512 bytes", "combined stack size of 2 calls is 608. Too large",
                 r"the deepest call chain, from instruction \d+: call l7_deep: 608 bytes: l7_client_parser \(320\) -> "
                 r"l7_deep \(288\)")
    hand_written("ctx", mf, "PAST THE CONTEXT", "invalid bpf_context access off=1000 size=4", "invalid bpf_context access")
finally:
    shutil.rmtree(WORK, ignore_errors=True)
sys.exit(summary("kernel.refusals"))
