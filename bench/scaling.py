#!/usr/bin/env python3
"""Compile time and verifier cost against rule count (issue: partial evaluation & budget).

For N = 10, 100, 1,000, 10,000 RBAC rules (method + exact path or prefix, an ALLOW policy):
  - l7c: compile time, and the verifier's processed instructions of the program that holds the
    policy (l7_client_parser, gateway mode; `l7c --explain --verify`);
  - the L7FP approach: template C filled with the same rules (an if/else chain of method and
    string compares over a parsed request in a map), compiled with clang -O2 -target bpf and
    loaded with bpftool: compile time and processed instructions of that program alone.
Usage: bench/scaling.py BUILD_DIR   (prints a Markdown table)"""
import json, os, re, subprocess, sys, tempfile, time

BUILD = sys.argv[1] if len(sys.argv) > 1 else "build"
L7C = os.path.join(BUILD, "driver", "l7c")
METHODS = ["GET", "POST", "PUT", "DELETE"]
CLANG_LIMIT = int(os.environ.get("CLANG_LIMIT", "300"))   # seconds; the template approach can take longer


def rule(i):
    return METHODS[i % 4], ("/svc%d/" % i) if i % 3 == 0 else ("/svc%d/op" % i), i % 3 == 0


def l7_policy(n):
    body = []
    for i in range(n):
        m, p, pre = rule(i)
        c = 'starts_with(request.path, "%s")' % p if pre else 'request.path == "%s"' % p
        body.append('  %s (request.method == "%s" && %s) {\n    Allow(request);' % ("if" if i == 0 else "} else if", m, c))
    return ("service front = 127.0.0.1:8080;\nupstream app = 127.0.0.1:9001;\n"
            "policy rbac (act (HttpRequest request) context ('.*->front')) {\n%s\n  }\n}\n"
            "policy route (act (HttpRequest request)) { Route(request, app); }\n" % "\n".join(body))


def c_policy(n):
    """What a template engine fills in: one compare per rule, first match wins."""
    rules = []
    for i in range(n):
        m, p, pre = rule(i)
        cmp = "pfx" if pre else "eq"
        rules.append('\tif (r->method == %d && %s(r, "%s", %d)) return 1;' % (METHODS.index(m) + 1, cmp, p, len(p)))
    return r'''
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
struct req { unsigned method, path_len; unsigned char path[256]; };
struct { __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY); __uint(max_entries, 1); __type(key, unsigned); __type(value, struct req); } reqs SEC(".maps");
static __always_inline int eq(const struct req *r, const char *s, unsigned n)
{ if (r->path_len != n) return 0; for (unsigned i = 0; i < n && i < 256; i++) if (r->path[i] != (unsigned char)s[i]) return 0; return 1; }
static __always_inline int pfx(const struct req *r, const char *s, unsigned n)
{ if (r->path_len < n) return 0; for (unsigned i = 0; i < n && i < 256; i++) if (r->path[i] != (unsigned char)s[i]) return 0; return 1; }
static __noinline int allowed(const struct req *r)
{
%s
	return 0;
}
SEC("xdp") int policy(struct xdp_md *ctx)
{ unsigned k = 0; struct req *r = bpf_map_lookup_elem(&reqs, &k); (void)ctx; return r && allowed(r) ? XDP_PASS : XDP_DROP; }
char _license[] SEC("license") = "GPL";
''' % "\n".join(rules)


def verify_c(obj):
    pin = "/sys/fs/bpf/l7c-scaling-%d" % os.getpid()
    out = subprocess.run(["bpftool", "-d", "prog", "load", obj, pin], capture_output=True, text=True)
    subprocess.run(["rm", "-f", pin])
    m = re.findall(r"processed (\d+) insns", out.stdout + out.stderr)
    return int(m[-1]) if m else None


rows = []
with tempfile.TemporaryDirectory() as d:
    for n in (10, 100, 1000, 10000):
        src = os.path.join(d, "p%d.l7" % n)
        open(src, "w").write(l7_policy(n))
        t0 = time.time()
        subprocess.run([L7C, src, "-o", os.path.join(d, "p.o")], check=True, capture_output=True)
        l7_s = time.time() - t0
        ex = json.loads(subprocess.run([L7C, "--explain", "--verify", "--format=json", src], check=True,
                                       capture_output=True, text=True).stdout)
        prog = next(p for p in ex["programs"] if p["name"] == "l7_client_parser")
        csrc = os.path.join(d, "c%d.c" % n)
        open(csrc, "w").write(c_policy(n))
        t0 = time.time()
        try:
            cc = subprocess.run(["clang-19", "-O2", "-g", "-target", "bpf", "-mcpu=v3", "-I/usr/include/x86_64-linux-gnu",
                                 "-c", csrc, "-o", os.path.join(d, "c.o")], capture_output=True, text=True,
                                timeout=CLANG_LIMIT)
            c_s = time.time() - t0
            c_insns = verify_c(os.path.join(d, "c.o")) if cc.returncode == 0 else None
        except subprocess.TimeoutExpired:
            c_s, c_insns = None, None
        rows.append((n, l7_s, prog["processed"], prog["verifier"], c_s, c_insns))
        print("N=%d done" % n, file=sys.stderr, flush=True)

print("| rules | l7c compile | l7c verifier processed (whole parser program) | template C + clang -O2 compile | template C verifier processed (policy alone) |")
print("|---:|---:|---:|---:|---:|")
for n, l7_s, p, v, c_s, ci in rows:
    cs = "> %d s (stopped)" % CLANG_LIMIT if c_s is None else "%.2f s" % c_s
    ci = ("rejected by the verifier" if c_s is not None else "-") if ci is None else ci
    print("| %d | %.2f s | %d (%s) | %s | %s |" % (n, l7_s, p, v, cs, ci))
