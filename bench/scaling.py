#!/usr/bin/env python3
"""Compile time and verifier cost against rule count (issue: partial evaluation & budget).

Two series, one Markdown section each:
  RBAC: N = 10, 100, 1,000, 10,000 rules (method + exact path or prefix) that all Allow;
  routes: N = 10, 100, 1,000, 10,000 rules of the same shape that each decide their own way
    (Route to one of 8 upstreams, every 7th a Deny with a status; tests/common/routegen.py,
    with its shadowing prefixes and >64-byte paths from 1,000 rules on).
For each N:
  - l7c: compile time, and the verifier's processed instructions (`l7c --explain --verify`):
    RBAC the program that holds the policy (l7_client_parser, gateway mode); routes the sum and
    the largest over the gateway programs that hold it (l7_client_parser and its chain of
    decide programs, if the policy was split) and the chain's length;
  - the L7FP approach: template C filled with the same rules (an if/else chain of method and
    string compares over a parsed request in a map; RBAC returns allow/deny, routes the rule's
    action index), compiled with clang -O2 -target bpf and loaded with bpftool: compile time
    and processed instructions of that program alone.
Limits: CLANG_LIMIT seconds (default 300) for each clang compile and bpftool load, L7C_LIMIT
(default 1200) for each l7c run; a run stopped at its limit is reported as such.
Usage: bench/scaling.py BUILD_DIR [rbac|routes ...]   (default both; prints Markdown)"""
import json, os, re, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "common"))
import routegen  # noqa: E402

BUILD = sys.argv[1] if len(sys.argv) > 1 else "build"
SERIES = sys.argv[2:] or ["rbac", "routes"]
L7C = os.path.join(BUILD, "driver", "l7c")
METHODS = ["GET", "POST", "PUT", "DELETE"]
SIZES = (10, 100, 1000, 10000)
NUP = 8
CLANG_LIMIT = int(os.environ.get("CLANG_LIMIT", "300"))   # seconds; the template approach can take longer
L7C_LIMIT = int(os.environ.get("L7C_LIMIT", "1200"))


def rule(i):
    return METHODS[i % 4], ("/svc%d/" % i) if i % 3 == 0 else ("/svc%d/op" % i), i % 3 == 0


def rbac_policy(n):
    body = []
    for i in range(n):
        m, p, pre = rule(i)
        c = 'starts_with(request.path, "%s")' % p if pre else 'request.path == "%s"' % p
        body.append('  %s (request.method == "%s" && %s) {\n    Allow(request);' % ("if" if i == 0 else "} else if", m, c))
    return ("service front = 127.0.0.1:8080;\nupstream app = 127.0.0.1:9001;\n"
            "policy rbac (act (HttpRequest request) context ('.*->front')) {\n%s\n  }\n}\n"
            "policy route (act (HttpRequest request)) { Route(request, app); }\n" % "\n".join(body))


C_HEAD = r'''
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
struct req { unsigned method, path_len, action; unsigned char path[256]; };
struct { __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY); __uint(max_entries, 1); __type(key, unsigned); __type(value, struct req); } reqs SEC(".maps");
static __always_inline int eq(const struct req *r, const char *s, unsigned n)
{ if (r->path_len != n) return 0; for (unsigned i = 0; i < n && i < 256; i++) if (r->path[i] != (unsigned char)s[i]) return 0; return 1; }
static __always_inline int pfx(const struct req *r, const char *s, unsigned n)
{ if (r->path_len < n) return 0; for (unsigned i = 0; i < n && i < 256; i++) if (r->path[i] != (unsigned char)s[i]) return 0; return 1; }
'''


def rbac_c(n):
    """What a template engine fills in: one compare per rule, first match wins."""
    rules = []
    for i in range(n):
        m, p, pre = rule(i)
        cmp = "pfx" if pre else "eq"
        rules.append('\tif (r->method == %d && %s(r, "%s", %d)) return 1;' % (METHODS.index(m) + 1, cmp, p, len(p)))
    return C_HEAD + r'''
static __noinline int allowed(const struct req *r)
{
%s
	return 0;
}
SEC("xdp") int policy(struct xdp_md *ctx)
{ unsigned k = 0; struct req *r = bpf_map_lookup_elem(&reqs, &k); (void)ctx; return r && allowed(r) ? XDP_PASS : XDP_DROP; }
char _license[] SEC("license") = "GPL";
''' % "\n".join(rules)


def routes_policy(n):
    return routegen.policy(routegen.rules(n, NUP), 8080, range(9001, 9001 + NUP))


def routes_c(n):
    """The same template for a routing table: the first matching rule's action index (0..7 the
    upstreams, 8.. the Deny statuses, 0xff no rule: the default 404)."""
    rules = []
    for r in routegen.rules(n, NUP):
        cmp = "pfx" if r.prefix else "eq"
        meth = "r->method == %d && " % (METHODS.index(r.method) + 1) if r.method else ""
        act = r.action[1] if r.action[0] == "route" else NUP + routegen.DENY.index(r.action[1])
        rules.append('\tif (%s%s(r, "%s", %d)) return %d;' % (meth, cmp, r.path, len(r.path), act))
    return C_HEAD + r'''
static __noinline int decide(const struct req *r)
{
%s
	return 0xff;
}
SEC("xdp") int policy(struct xdp_md *ctx)
{ unsigned k = 0; struct req *r = bpf_map_lookup_elem(&reqs, &k); (void)ctx; if (!r) return XDP_DROP; r->action = decide(r); return XDP_PASS; }
char _license[] SEC("license") = "GPL";
''' % "\n".join(rules)


def run(args, limit):
    """(seconds, CompletedProcess) or (None, None) when stopped at limit seconds."""
    t0 = time.time()
    try:
        r = subprocess.run(args, capture_output=True, text=True, timeout=limit)
    except subprocess.TimeoutExpired:
        return None, None
    return time.time() - t0, r


def verify_c(obj):
    """The verifier's processed instructions of the template program; None if rejected, or the
    string 'stopped' past CLANG_LIMIT."""
    pin = "/sys/fs/bpf/l7c-scaling-%d" % os.getpid()
    s, out = run(["bpftool", "-d", "prog", "load", obj, pin], CLANG_LIMIT)
    subprocess.run(["rm", "-f", pin])
    if out is None:
        return "stopped"
    m = re.findall(r"processed (\d+) insns", out.stdout + out.stderr)
    return int(m[-1]) if m else None


def template(d, n, text):
    """(clang seconds or None if stopped, processed insns / None if rejected / 'stopped' / '-')"""
    csrc = os.path.join(d, "c%d.c" % n)
    open(csrc, "w").write(text)
    s, cc = run(["clang-19", "-O2", "-g", "-target", "bpf", "-mcpu=v3", "-I/usr/include/x86_64-linux-gnu",
                 "-c", csrc, "-o", os.path.join(d, "c.o")], CLANG_LIMIT)
    if s is None:
        return None, "-"
    if cc.returncode:
        return s, "clang failed"
    return s, verify_c(os.path.join(d, "c.o"))


def l7c(d, n, text):
    """(compile seconds or None if stopped, --explain --verify JSON or None if stopped, error)"""
    src = os.path.join(d, "p%d.l7" % n)
    open(src, "w").write(text)
    s, r = run([L7C, src, "-o", os.path.join(d, "p.o")], L7C_LIMIT)
    if s is None:
        return None, None, None
    if r.returncode:
        return s, None, r.stderr.strip().splitlines()[-1:]
    _, r = run([L7C, "--explain", "--verify", "--format=json", src], L7C_LIMIT)
    if r is None:
        return s, None, None
    if r.returncode:
        return s, None, r.stderr.strip().splitlines()[-1:]
    return s, json.loads(r.stdout), None


def secs(s, limit):
    return "> %d s (stopped)" % limit if s is None else "%.2f s" % s


def c_cells(c_s, ci):
    ci = {None: "rejected by the verifier", "stopped": "> %d s (load stopped)" % CLANG_LIMIT}.get(ci, ci)
    return secs(c_s, CLANG_LIMIT), ci


def rbac(d):
    rows = []
    for n in SIZES:
        l7_s, ex, err = l7c(d, n, rbac_policy(n))
        if ex:
            prog = next(p for p in ex["programs"] if p["name"] == "l7_client_parser")
            v = "%d (%s)" % (prog["processed"], prog["verifier"])
        else:
            v = "failed: %s" % err if err else "> %d s (stopped)" % L7C_LIMIT
        rows.append((n, secs(l7_s, L7C_LIMIT), v) + c_cells(*template(d, n, rbac_c(n))))
        print("rbac N=%d done" % n, file=sys.stderr, flush=True)
    print("## RBAC: N rules that all Allow\n")
    print("| rules | l7c compile | l7c verifier processed (whole parser program) | template C + clang -O2 compile | template C verifier processed (policy alone) |")
    print("|---:|---:|---:|---:|---:|")
    for r in rows:
        print("| %d | %s | %s | %s | %s |" % r)
    print()


def routes(d):
    rows = []
    for n in SIZES:
        l7_s, ex, err = l7c(d, n, routes_policy(n))
        if ex:
            progs = dict((p["name"], p) for p in ex["programs"] if not p["subprogram"])
            chain = next((c["programs"] for c in ex["chains"] if c["host"] == "l7_client_parser"), [])
            held = [progs["l7_client_parser"]] + [progs[c] for c in chain]
            bad = [p["name"] for p in held if p["verifier"] != "accepted"]
            cells = ("%d" % sum(p["processed"] for p in held), "%d" % max(p["processed"] for p in held),
                     "%d" % len(chain) if chain else "none") + ((" (%s not accepted)" % ", ".join(bad),) if bad else ("",))
            cells = cells[:2] + (cells[2] + cells[3],)
        else:
            why = "failed: %s" % err if err else "> %d s (stopped)" % L7C_LIMIT
            cells = (why, "-", "-")
        rows.append((n, secs(l7_s, L7C_LIMIT)) + cells + c_cells(*template(d, n, routes_c(n))))
        print("routes N=%d done" % n, file=sys.stderr, flush=True)
    print("## Routes: N rules that each decide their own way (8 upstreams, Denies)\n")
    print("| rules | l7c compile | l7c verifier processed, sum (parser + decide chain) | largest program | decide chain | "
          "template C + clang -O2 compile | template C verifier processed (policy alone) |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print("| %d | %s | %s | %s | %s | %s | %s |" % r)
    print()


if __name__ == "__main__":   # bench/compile_time.py and scripts/calibrate.py import the policy generators
    with tempfile.TemporaryDirectory() as d:
        for s in SERIES:
            {"rbac": rbac, "routes": routes}[s](d)
