#!/usr/bin/python3
"""gRPC fields and DenyGrpc in the kernel (issue 14 item 1): examples/grpc.l7 loaded by l7run in
gateway mode and in mesh mode, and driven by curl with real HTTP/1.1 requests on gRPC paths
(/package.Service/Method) from the callers' addresses (curl --interface): calls are routed by
service and method to their backends, other methods, other callers and paths not of the form
/SERVICE/METHOD are denied, the payment service wants a JWT, the listing is rate limited. Each
answer is checked against what the case says and against `l7c --eval` on the same request (the
reference evaluator, which also names the gRPC status a gRPC client would get).
usage: grpc_paths.py L7C L7RUN SOURCE_DIR   (root: BPF, cgroup2; never skips)"""
import os
import re
import subprocess
import sys
import tempfile
import time

L7C, L7RUN, SRC = sys.argv[1:4]
sys.path.insert(0, os.path.join(SRC, "tests", "common"))
import procs  # noqa: E402
from check import check, summary  # noqa: E402
from exampletests import relocated  # noqa: E402
from jwtgen import token  # noqa: E402

PID = os.getpid()
BASE = 24000 + (PID % 400) * 8          # below the ephemeral range, unique per run
SVC, UPS = BASE, [BASE + 1, BASE + 2, BASE + 3]
NAMES = ["catalog", "orders", "payments"]
CG = os.path.join(procs.CG_ROOT, "l7grpc-%d" % PID)
WORK = tempfile.mkdtemp(prefix="l7c-grpc-")
EXAMPLE = os.path.join(os.path.abspath(SRC), "examples", "grpc.l7")
WEB, BATCH, OTHER = "127.0.3.7", "127.0.4.2", "127.0.0.1"


def cases(key):
    """(what, source, path, jwt or None, status, backend or ""): what the policy says."""
    now = int(time.time())
    good = token(key, {"sub": "web", "iss": "shop", "aud": "payments", "exp": now + 600})
    expired = token(key, {"sub": "web", "iss": "shop", "aud": "payments", "exp": now - 600})
    return [
        ("web calls the catalogue", WEB, "/shop.v1.Catalog/GetProduct", None, 200, "catalog"),
        ("batch calls the catalogue", BATCH, "/shop.v1.Catalog/Search", None, 200, "catalog"),
        ("an outsider calls the catalogue", OTHER, "/shop.v1.Catalog/GetProduct", None, 403, ""),
        ("web creates an order", WEB, "/shop.v1.Orders/CreateOrder", None, 200, "orders"),
        ("web gets an order", WEB, "/shop.v1.Orders/GetOrder", None, 200, "orders"),
        ("web cancels an order (not its method)", WEB, "/shop.v1.Orders/CancelOrder", None, 403, ""),
        ("batch lists orders (List*)", BATCH, "/shop.v1.Orders/ListOrdersByDay", None, 200, "orders"),
        ("batch creates an order (not its method)", BATCH, "/shop.v1.Orders/CreateOrder", None, 403, ""),
        ("a service that is a prefix of another", WEB, "/shop.v1.OrdersAdmin/CreateOrder", None, 403, ""),
        ("a method that ends like another", WEB, "/shop.v1.Orders/XGetOrder", None, 403, ""),
        ("a third segment: not a gRPC path", WEB, "/shop.v1.Orders/CreateOrder/extra", None, 403, ""),
        ("no method: not a gRPC path", WEB, "/shop.v1.Orders/", None, 403, ""),
        ("a service's third segment: not a gRPC path", WEB, "/shop.v1.Catalog/GetProduct/extra", None, 403, ""),
        ("a service without a method: not a gRPC path", BATCH, "/shop.v1.Catalog/", None, 403, ""),
        ("a service's method with a query", BATCH, "/shop.v1.Catalog/Search?q=1", None, 200, "catalog"),
        ("no service: the parser refuses '//' before any rule", WEB, "//CreateOrder", None, 400, ""),
        ("a query is not part of the path", WEB, "/shop.v1.Orders/GetOrder?x=1", None, 200, "orders"),
        ("payments with a token", WEB, "/shop.v1.Payments/Charge", good, 200, "payments"),
        ("payments without a token", WEB, "/shop.v1.Payments/Charge", None, 401, ""),
        ("payments with an expired token", WEB, "/shop.v1.Payments/Charge", expired, 401, ""),
        ("payments from batch", BATCH, "/shop.v1.Payments/Charge", good, 403, ""),
    ]


def curl(src, path, jwt):
    """(status, body) of one gRPC-style POST through l7run, from address src."""
    out = os.path.join(WORK, "body")
    argv = ["curl", "-s", "--path-as-is", "--max-time", "10", "--interface", src, "-o", out, "-w", "%{http_code}",
            "-X", "POST", "-H", "content-type: application/grpc", "-H", "te: trailers", "--data-binary", "",
            "http://127.0.0.1:%d%s" % (SVC, path)]
    if jwt:
        argv[1:1] = ["-H", "authorization: Bearer " + jwt]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    body = open(out, errors="replace").read() if os.path.exists(out) else ""
    return int(r.stdout or 0), body


def evaluate(obj_src, src, path, jwt):
    """l7c --eval of the same request: (status, upstream name or "", grpc-status line)."""
    req = os.path.join(WORK, "req.http")
    head = "POST %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\ncontent-type: application/grpc\r\nContent-Length: 0\r\n" % (path, SVC)
    if jwt:
        head += "authorization: Bearer %s\r\n" % jwt
    open(req, "w").write(head + "\r\n")
    out = subprocess.run([L7C, "--eval=" + req, "--eval-source=" + src, obj_src], capture_output=True, text=True).stdout
    fwd = re.search(r"^verdict: forward (\S+)$", out, re.M)
    deny = re.search(r"^verdict: (?:deny|refuse) (\d+)", out, re.M)
    grpc = re.search(r"^grpc-status: (.*)$", out, re.M)
    return (200 if fwd else int(deny.group(1)) if deny else 0), fwd.group(1) if fwd else "", grpc.group(1) if grpc else ""


def run(mode, obj, src_policy, key, limited_src):
    pin = "/sys/fs/bpf/l7c-grpc-%d-%s" % (PID, mode)
    log = open(os.path.join(WORK, mode + ".log"), "w")
    echo = os.path.join(SRC, "tests", "mesh", "echo.py")
    backends = [([sys.executable, echo, name, str(UPS[i])], UPS[i]) for i, name in enumerate(NAMES)]
    with procs.serving(mode, L7RUN, obj, SVC, backends, log, CG, pin):
        for what, src, path, jwt, status, backend in cases(key):
            st, body = curl(src, path, jwt)
            got = re.search(r"backend=(\S+)", body)
            got = got.group(1) if got and st == 200 else ""
            check((st, got) == (status, backend), "%s: %s %s -> %d %s (want %d %s)" % (mode, what, path, st, got, status, backend))
            if st == 200:   # the backend saw the gRPC path as sent
                check("path=" + path.split("?")[0] in body, "%s: %s: the backend saw %s" % (mode, what, path))
            ev = evaluate(src_policy, src, path, jwt)
            check(ev[:2] == (st, got), "%s: %s: the kernel (%d %s) and l7c --eval (%d %s) agree" % (mode, what, st, got, *ev[:2]))
            if status not in (200, 400):   # a deny, not a refusal of the parser
                check(ev[2] != "", "%s: %s: --eval names the gRPC status (%s)" % (mode, what, ev[2]))
        # the listing: a bucket of 3 per client address, then 429 (RESOURCE_EXHAUSTED for gRPC)
        got = [curl(limited_src, "/shop.v1.Catalog/ListProducts", None)[0] for _ in range(4)]
        check(got == [200, 200, 200, 429], "%s: ListProducts rate limited per client: %s" % (mode, got))


def main():
    text, key = relocated(EXAMPLE, {8080: SVC, 9601: UPS[0], 9602: UPS[1], 9603: UPS[2]})
    src = os.path.join(WORK, "grpc.l7")
    open(src, "w").write(text)
    obj = os.path.join(WORK, "grpc.o")
    subprocess.run([L7C, src, "-o", obj], check=True)
    ev = evaluate(src, OTHER, "/shop.v1.Catalog/GetProduct", None)
    check(ev[2] == "7 PERMISSION_DENIED (named by the rule)", "--eval: the deny's gRPC status (%s)" % ev[2])
    with procs.cgroup_run(CG, WORK):
        run("gateway", obj, src, key, "127.0.5.1")
        run("mesh", obj, src, key, "127.0.5.2")
    return summary("grpc_paths") or procs.cgroup_left(CG)


sys.exit(main())
