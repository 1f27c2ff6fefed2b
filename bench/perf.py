#!/usr/bin/env python3
"""Side-by-side benchmark of l7c against HAProxy and nginx enforcing the same policies (issue 7,
"Benchmarks"). Called by bench/run-all.sh; writes docs/performance.md and its plots.

Every point runs the configurations of one policy in alternating order, several rounds, wrk with
keep-alive for a fixed time each; the report gives medians over rounds. Loopback only; every
process started here is ended by its pid; ports derive from our pid.

usage: perf.py --build DIR --out docs/performance.md [--quick] [--rounds N] [--secs S]"""
import argparse
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True      # no __pycache__ in the source tree
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(HERE, "policies"))
import gen  # noqa: E402  (bench/policies/gen.py)

HZ = os.sysconf("SC_CLK_TCK")
NCPU = os.cpu_count() or 1
PID = os.getpid()
# 20 ports per run derived from the pid, below the ephemeral range (32768-) so that wrk's and
# the proxies' outgoing connections never hold one of them
BASE = 12000 + (PID % 1000) * 20
# Social Network mirrors examples/social_network.l7: its demo key, issuer and audience
JWT_KEY_FILE = "examples/keys/social.key"
JWT_ISS, JWT_AUD = "social-network", "frontend"
JWT_SECRET = None          # read from the measured source tree in main()
CONFIGS = ["direct", "l7c", "l7c-mesh", "haproxy", "nginx"]

procs = []          # (Popen, name): ended by pid at exit
tmp = None
cgroup = None
log = print


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, text=True, capture_output=True, **kw).stdout


def start(argv, name, stderr_file=None, in_cgroup=False):
    err = open(stderr_file, "w") if stderr_file else subprocess.DEVNULL
    pre = (lambda: open(os.path.join(cgroup, "cgroup.procs"), "w").write("%d\n" % os.getpid())) \
        if in_cgroup else None
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, preexec_fn=pre)
    procs.append((p, name))
    return p


def stop(p):
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    procs[:] = [x for x in procs if x[0] is not p]


def tail(path):
    try:
        with open(path) as f:
            lines = [l.strip() for l in f if l.strip()]
        return lines[-1][:200] if lines else ""
    except (OSError, TypeError):
        return ""


def wait_port(port, timeout=10.0):
    end = time.time() + timeout
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


def http_get(port, path, headers, method="GET"):
    """One request on a fresh connection: (status, body) or (None, error)."""
    try:
        s = socket.create_connection(("127.0.0.1", port), 3)
        s.settimeout(3)
        req = "%s %s HTTP/1.1\r\nHost: bench\r\n%sConnection: close\r\n\r\n" % (
            method, path, "".join("%s: %s\r\n" % h for h in headers))
        s.sendall(req.encode())
        data = b""
        while True:
            b = s.recv(65536)
            if not b:
                break
            data += b
        s.close()
        head, _, body = data.partition(b"\r\n\r\n")
        return int(head.split()[1]), body.decode(errors="replace")
    except (OSError, IndexError, ValueError) as e:
        return None, str(e)


# ---------------------------------------------------------------------------------- CPU counters
def task_ns(pids):
    """On-CPU ns of every thread of the given processes (schedstat: ns precision)."""
    t = 0
    for pid in pids:
        try:
            for tid in os.listdir("/proc/%d/task" % pid):
                with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                    t += int(f.read().split()[0])
        except OSError:
            pass
    return t


def children(pid):
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(d))
            except (OSError, ValueError, IndexError):
                pass
    return out


def kworker_ns(field=0):
    """{pid: on-CPU ns} of the kworker threads: the sockmap backlog (sk_psock_backlog) transmits
    sk_skb redirects there, outside softirq and outside any process of ours. field 2: the times
    each was run on a CPU instead (schedstat's third field; each backlog work run is one)."""
    out = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/comm" % d) as f:
                    if f.read().startswith("kworker"):
                        with open("/proc/%s/schedstat" % d) as g:
                            out[int(d)] = int(g.read().split()[field])
            except (OSError, ValueError, IndexError):
                pass
    return out


def kworker_delta(a, b):
    """kworkers come and go: count the growth of those seen twice and all of the new ones."""
    return sum(v - a.get(p, 0) for p, v in b.items())


def machine():
    """(busy ticks, softirq ticks) of all CPUs."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    user, nice, system, idle, iowait, irq, softirq, steal = v[:8]
    return user + nice + system + irq + softirq + steal, softirq


def bpf_progs(pin_dir, map_name):
    """{program name: (run_cnt, run_time_ns)} of one l7run's programs: those pinned in pin_dir
    (gateway), else those that use its pinned map map_name (mesh pins only maps)."""
    out = {}
    try:
        names = [n for n in os.listdir(pin_dir) if n.startswith("prog_")]
    except OSError:
        return out
    try:
        if names:
            for n in names:
                p = json.loads(sh(["bpftool", "-j", "prog", "show", "pinned", os.path.join(pin_dir, n)]))
                out[n[5:]] = (p.get("run_cnt", 0), p.get("run_time_ns", 0))
        else:
            mid = json.loads(sh(["bpftool", "-j", "map", "show", "pinned", os.path.join(pin_dir, map_name)]))["id"]
            for p in json.loads(sh(["bpftool", "-j", "prog", "show"])):
                if mid in p.get("map_ids", []):
                    out[p.get("name", str(p["id"]))] = (p.get("run_cnt", 0), p.get("run_time_ns", 0))
    except (subprocess.CalledProcessError, ValueError, KeyError):
        pass
    return out


# ------------------------------------------------------------------------------------ the peers
def backend_conf(ports):
    """Fast static backend; the body names the upstream and echoes x-processed-by (and x-m0,
    which Mutate[c] removes), so a sanity request shows both the route and the header
    mutation."""
    return """daemon off; worker_processes 1; pid %(t)s/backend.pid; error_log %(t)s/backend.err;
events { worker_connections 8192; }
http { access_log off; keepalive_requests 100000000; keepalive_timeout 300s;
  client_header_buffer_size 4k; large_client_header_buffers 8 32k;
  server { listen 127.0.0.1:%(u0)d; location / { return 200 "u0 $http_x_processed_by$http_x_m0\\n"; } }
  server { listen 127.0.0.1:%(u1)d; location / { return 200 "u1 $http_x_processed_by$http_x_m0\\n"; } }
  server { listen 127.0.0.1:%(u2)d; location / { return 200 "u2 $http_x_processed_by$http_x_m0\\n"; } } }
""" % dict(ports, t=tmp)


def haproxy_conf(pol, port, ports):
    return """global
  nbthread %(n)d
  tune.bufsize 65536
  tune.maxrewrite 1024
defaults
  mode http
  option http-keep-alive
  timeout connect 5s
  timeout client 60s
  timeout server 60s
  timeout http-keep-alive 60s
frontend f
  bind 127.0.0.1:%(port)d
%(rules)s
  default_backend notfound
backend u0
  server s 127.0.0.1:%(u0)d
backend u1
  server s 127.0.0.1:%(u1)d
backend u2
  server s 127.0.0.1:%(u2)d
backend notfound
  http-request deny deny_status 404
%(extra)s""" % {"n": NCPU, "port": port, "rules": pol["haproxy"], "u0": ports["u0"],
                "u1": ports["u1"], "u2": ports["u2"], "extra": pol.get("haproxy_extra", "")}


def nginx_conf(pol, port, ports, name):
    js = pol.get("njs")
    if js:
        with open(os.path.join(tmp, "jwt.js"), "w") as f:
            f.write(js)
    return """%(load)sdaemon off; worker_processes %(n)d; pid %(t)s/%(name)s.pid; error_log %(t)s/%(name)s.err;
events { worker_connections 8192; }
http { access_log off; keepalive_requests 100000000; keepalive_timeout 300s;
  client_header_buffer_size 4k; large_client_header_buffers 8 32k;
  proxy_http_version 1.1; proxy_buffering off;
  upstream u0 { server 127.0.0.1:%(u0)d; keepalive 256; }
  upstream u1 { server 127.0.0.1:%(u1)d; keepalive 256; }
  upstream u2 { server 127.0.0.1:%(u2)d; keepalive 256; }
  %(jsinc)s
%(http)s
  server { listen 127.0.0.1:%(port)d;
    location / {
      if ($l7_route = deny403) { return 403; }
      if ($l7_route = deny401) { return 401; }
      if ($l7_route = deny404) { return 404; }
      proxy_set_header Connection "";
      proxy_set_header Host $http_host;
%(loc)s
      proxy_pass http://$l7_route;
    } } }
""" % {"load": "load_module /usr/lib/nginx/modules/ngx_http_js_module.so;\n" if js else "",
       "n": NCPU, "t": tmp, "name": name, "u0": ports["u0"], "u1": ports["u1"], "u2": ports["u2"],
       "jsinc": ('js_import jwt from %s/jwt.js;' % tmp) if js else "",
       "http": pol["nginx_http"], "port": port, "loc": pol.get("nginx_loc", "")}


# --------------------------------------------------------------------------------- the policies
def rbac_haproxy(n, header=None):
    lines = ["  acl meth method GET POST"]
    if header:
        lines.append("  http-request deny deny_status 403 unless { req.hdr(%s) -m beg v }" % header)
    # set before the allow rules: `allow` stops the http-request list (denied requests are not
    # forwarded, so the header on them is never seen)
    lines.append("  http-request set-header x-processed-by l7bench")
    for i in range(1, n + 1):
        lines.append("  http-request allow if { path_beg %s } meth" % gen.rbac_path(i))
    lines.append("  http-request deny deny_status 403")
    lines.append("  use_backend u0 if { path_beg /wrk2-api/review/ }")
    lines.append("  use_backend u1")
    return "\n".join(lines)


def rbac_nginx(n, header=None):
    # first-match list of regexes (nginx checks map regexes in order): the same else-if chain
    rules = "\n".join("    ~^(GET|POST):%s  u0;" % re.escape(gen.rbac_path(i)).replace("/", "/")
                      for i in range(1, n + 1))
    hdr = ""
    if header:
        hdr = "  map $http_%s $l7_hdr_ok { ~^v 1; default 0; }\n" % header.replace("-", "_")
    m = hdr + "  map $request_method:$uri $l7_rbac {\n%s\n    default deny403;\n  }\n" % rules
    if header:
        m += "  map $l7_hdr_ok:$l7_rbac $l7_route { ~^0: deny403; ~:deny403$ deny403; ~^1:u0$ u0; default u1; }\n"
    else:
        m += "  map $l7_rbac $l7_route { deny403 deny403; u0 u0; default u1; }\n"
    # every rule routes /wrk2-api/review/... to api, which is where the allowed paths live
    return m


def route_example(src):
    """examples/route.l7, written for each peer."""
    return {
        "name": "route", "l7": os.path.join(src, "examples/route.l7"), "upstreams": ["api", "web"],
        "haproxy": """  http-request deny deny_status 403 if { path_beg /admin }
  acl api_get path_beg /api/
  acl get method GET
  http-request set-header x-l7-route api if api_get get
  use_backend u0 if api_get get
  use_backend u1 if { req.hdr(host) -m str static.example } || { req.hdr(x-web) -m str 1 }
  use_backend u1 if { path / }""",
        "nginx_http": """  map "$request_method $uri|$http_host|$http_x_web" $l7_route {
    "~^[A-Z]+ /admin"                 deny403;
    "~^GET /api/"                     u0;
    "~^[A-Z]+ [^|]*\\|static\\.example\\|" u1;
    "~\\|1$"                           u1;
    "~^[A-Z]+ /\\|"                    u1;
    default                          deny404;
  }
  map $l7_route $l7_hdr { u0 api; default ""; }""",
        "nginx_loc": "      proxy_set_header x-l7-route $l7_hdr;",
        "path": "/", "expect": "u1 \n", "deny": ("/admin/x", 403),
    }


def media(n=50, header=None, l7=None, name="media"):
    return {
        "name": name, "l7": l7 or os.path.join(HERE, "policies/media_service.l7"),
        "upstreams": ["api", "web"],
        "haproxy": rbac_haproxy(n, header), "nginx_http": rbac_nginx(n, header),
        "nginx_loc": "      proxy_set_header x-processed-by l7bench;",
        "expect": "u0 l7bench\n", "deny": ("/wrk2-api/review/%d/x" % (n + 1), 403),
    }


def hotel():
    return {
        "name": "hotel", "l7": os.path.join(HERE, "policies/hotel_reservation.l7"),
        "upstreams": ["api", "web"],
        # telemetry: a stick table counting requests per path (HAProxy's own per-key counters)
        "haproxy": """  http-request track-sc0 path table telemetry
  http-request set-header x-processed-by l7bench
  use_backend u0 if { path_beg /recommendations }
  use_backend u1""",
        "haproxy_extra": """backend telemetry
  stick-table type string len 64 size 10k expire 60s store http_req_cnt,http_req_rate(10s),bytes_in_cnt
""",
        # telemetry: nginx has no per-request counters in its stock modules, so it records a
        # compact buffered access log (what nginx deployments use for request telemetry)
        "nginx_http": """  map $uri $l7_route { ~^/recommendations u0; default u1; }
  log_format l7tele '$uri $status $request_length $bytes_sent $request_time';
  access_log %s/telemetry.log l7tele buffer=256k flush=1s;""" % tmp,
        "nginx_loc": "      proxy_set_header x-processed-by l7bench;",
        "path": "/recommendations?hotelId=1&lat=38.0&lon=-122.0", "expect": "u0 l7bench\n",
        "deny": None,
    }


def mutate_policy(c):
    """Mutate[c]: requests carry gen.MUTATE_HEADERS headers of ~120 bytes, the policy removes
    round(c·N) of them (x-m0 first) and routes to api; HAProxy `http-request del-header`, nginx
    `proxy_set_header NAME ""` (nginx does not pass a header set to the empty string)."""
    k = int(round(c * gen.MUTATE_HEADERS))
    names = gen.mutate_header_names()[:k]
    src = os.path.join(tmp, "mutate-c%g.l7" % c)
    with open(src, "w") as f:
        f.write(gen.mutate(c))
    return {
        "name": "mutate-c", "l7": src, "upstreams": ["api", "web"],
        "haproxy": "".join("  http-request del-header %s\n" % n for n in names) + "  use_backend u0",
        "nginx_http": "  map $uri $l7_route { default u0; }",
        "nginx_loc": "\n".join('      proxy_set_header %s "";' % n for n in names),
        "path": "/", "expect": "u0 \n", "deny": None,
        "headers": [(n, "v" * 110) for n in gen.mutate_header_names()],
    }


def jwt_token(size=None, sub="alice"):
    """HS256 token; `size`: pad a claim so the whole token is about that many bytes."""
    import base64
    import hashlib
    import hmac
    b64 = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=").decode()
    hdr = b64(b'{"alg":"HS256","typ":"JWT"}')
    claims = {"iss": JWT_ISS, "sub": sub, "aud": JWT_AUD, "exp": int(time.time()) + 86400}
    if size:
        base = len(hdr) + 1 + len(b64(json.dumps(claims, separators=(",", ":")).encode())) + 44
        claims["pad"] = "x" * max(0, (size - base) * 3 // 4 - 10)
    body = b64(json.dumps(claims, separators=(",", ":")).encode())
    sig = b64(hmac.new(JWT_SECRET.encode(), (hdr + "." + body).encode(), hashlib.sha256).digest())
    return hdr + "." + body + "." + sig


def jwt_cycle_script(tmp, n):
    """A wrk script sending n distinct valid tokens in turn, the two threads half a cycle apart:
    a token comes back after ~n requests, past the 2,048 that l7_jwt_cache keeps."""
    path = os.path.join(tmp, "jwt-cycle-%d.lua" % n)
    if not os.path.exists(path):
        with open(path, "w") as f:
            f.write("local tokens = {\n")
            for i in range(n):
                f.write('"%s",\n' % jwt_token(sub="user%d" % i))
            f.write("}\nlocal nth = 0\nlocal i = 0\n"
                    "function setup(thread) thread:set('id', nth); nth = nth + 1 end\n"
                    "function init(args) i = (id or 0) * math.floor(#tokens / 2) end\n"
                    "function request()\n  i = i % #tokens + 1\n"
                    "  return wrk.format(nil, nil, {['Authorization'] = 'Bearer ' .. tokens[i]})\nend\n")
    return path


NJS = r"""// HS256 JWT check for nginx (njs 0.7): signature, alg, exp.
var crypto = require('crypto');
var SECRET = '%s';   // the key file's bytes
function route(r) {
  var a = r.headersIn['Authorization'];
  if (!a || a.slice(0, 7) != 'Bearer ') return 'deny401';
  var p = a.slice(7).split('.');
  if (p.length != 3) return 'deny401';
  var sig = crypto.createHmac('sha256', SECRET).update(p[0] + '.' + p[1]).digest('base64url');
  if (sig != p[2]) return 'deny401';
  try {
    var h = JSON.parse(Buffer.from(p[0], 'base64url').toString());
    var c = JSON.parse(Buffer.from(p[1], 'base64url').toString());
  } catch (e) { return 'deny401'; }
  if (h.alg != 'HS256' || c.iss != '%s' || c.aud != '%s') return 'deny401';
  if (typeof c.exp != 'number' || c.exp + 5 < Date.now() / 1000) return 'deny401';
  var u = r.uri;
  if (u.startsWith('/user/')) return 'u0';
  if (u.startsWith('/post/')) return 'u1';
  if (u.startsWith('/timeline/')) return 'u2';
  return 'deny404';
}
export default { route };
"""


def social(src):
    l7 = os.path.join(src, "examples/social_network.l7")
    return {
        "name": "social", "l7": l7, "upstreams": ["api", "web"],
        "haproxy": """  http-request set-var(txn.jwt) http_auth_bearer
  http-request deny deny_status 401 unless { var(txn.jwt),jwt_header_query('$.alg') -m str HS256 }
  http-request deny deny_status 401 unless { var(txn.jwt),jwt_verify("HS256","%s") -m int 1 }
  http-request deny deny_status 401 unless { var(txn.jwt),jwt_payload_query('$.iss') -m str %s }
  http-request deny deny_status 401 unless { var(txn.jwt),jwt_payload_query('$.aud') -m str %s }
  http-request set-var(txn.now) date
  http-request deny deny_status 401 if { var(txn.jwt),jwt_payload_query('$.exp','int'),add(5),sub(txn.now) -m int lt 0 }
  http-request set-header x-processed-by l7c
  use_backend u0 if { path_beg /user/ }
  use_backend u1 if { path_beg /post/ }
  use_backend u2 if { path_beg /timeline/ }""" % (JWT_SECRET, JWT_ISS, JWT_AUD),
        "nginx_http": "  js_set $l7_route jwt.route;",
        "nginx_loc": "      proxy_set_header x-processed-by l7c;",
        "njs": NJS % (JWT_SECRET, JWT_ISS, JWT_AUD),
        "path": "/post/compose", "expect": "u1 l7c\n",
        "headers": [("Authorization", "Bearer " + jwt_token())],
        "deny_headers": [("Authorization", "Bearer " + jwt_token()[:-3] + "AAA")],
    }


# ------------------------------------------------------------------------------------- l7c side
def rewrite_l7(src, dst, front, ports):
    """Copy a policy with its service/upstream addresses replaced by our ports: the upstreams in
    the order they are declared become the backend's u0, u1, u2."""
    with open(src) as f:
        text = f.read()
    text = re.sub(r"^(\s*service\s+\w+\s*=\s*)[0-9.]+:\d+", lambda m: m.group(1) + "127.0.0.1:%d" % front,
                  text, flags=re.M)

    seen = []

    def up(m):
        seen.append(m.group(2))
        return m.group(1) + "127.0.0.1:%d" % ports["u%d" % min(len(seen) - 1, 2)]
    text = re.sub(r"^(\s*upstream\s+(\w+)\s*=\s*)[0-9.]+:\d+", up, text, flags=re.M)
    with open(dst, "w") as f:
        f.write(text)


def compile_l7(args, pol, front, ports, tag):
    if not os.path.exists(pol["l7"]):
        return None, "%s is not in the measured tree yet" % pol["l7"].split("/examples/")[-1].join(("examples/", ""))
    src = os.path.join(tmp, "%s-%s.l7" % (pol["name"], tag))
    rewrite_l7(pol["l7"], src, front, ports)
    # relative paths in the policy (key files) resolve against the policy's own directory
    with open(src) as f:
        text = f.read()
    text = re.sub(r'(key_file\s*=\s*")([^"/][^"]*)"',
                  lambda m: m.group(1) + os.path.join(os.path.dirname(pol["l7"]), m.group(2)) + '"', text)
    with open(src, "w") as f:
        f.write(text)
    obj = src[:-3] + ".o"
    r = subprocess.run([args.l7c, src, "-o", obj], capture_output=True, text=True)
    if r.returncode:
        err = [l for l in r.stderr.splitlines() if "error" in l][:1]
        return None, "l7c: " + (err[0] if err else r.stderr.strip()[:200])
    return obj, None


# -------------------------------------------------------------------------------------- running
def parse_wrk(out):
    def ms(v):
        for suf, f in (("us", 1e-3), ("ms", 1.0), ("s", 1e3)):
            if v.endswith(suf):
                return float(v[:-len(suf)]) * f
        return float(v)
    r = {"rps": 0.0, "p50": 0.0, "p99": 0.0, "reqs": 0, "non2xx": 0, "errors": 0}
    for line in out.splitlines():
        w = line.split()
        if line.startswith("Requests/sec:"):
            r["rps"] = float(w[1])
        elif len(w) > 3 and w[1] == "requests" and w[2] == "in":
            r["reqs"] = int(w[0])
        elif w[:1] == ["50%"]:
            r["p50"] = ms(w[1])
        elif w[:1] == ["99%"]:
            r["p99"] = ms(w[1])
        elif line.strip().startswith("Non-2xx"):
            r["non2xx"] = int(w[-1])
        elif line.strip().startswith("Socket errors"):
            r["errors"] = sum(int(x.strip(",")) for x in w[2:] if x.strip(",").isdigit())
    return r


def wrk(args, port, path, headers, secs, in_cgroup=False, script=None, conns=None):
    conns = conns or args.conns
    argv = ["timeout", str(secs + 15), "wrk", "-t%d" % min(args.threads, conns), "-c%d" % conns,
            "-d%ds" % secs, "--latency"]
    for h in headers:
        argv += ["-H", "%s: %s" % h]
    if script:
        argv += ["-s", script]
    argv.append("http://127.0.0.1:%d%s" % (port, path))
    pre = (lambda: open(os.path.join(cgroup, "cgroup.procs"), "w").write("%d\n" % os.getpid())) \
        if in_cgroup else None
    out = subprocess.run(argv, capture_output=True, text=True, preexec_fn=pre).stdout
    return parse_wrk(out)


class Config:
    """One enforcing component for one policy: start, sanity-check, measure one run, stop."""

    def __init__(self, kind, port):
        self.kind, self.port, self.p, self.err = kind, port, None, None
        self.pids = lambda: []
        self.bpf = None           # map path whose programs are the data plane

    def measure(self, args, point):
        ms = self.kind == "l7c-mesh"
        if ms:
            self.start_mesh(args, point)
            if self.err:
                return None
        c0 = self.bpf_stats()
        k0 = task_ns(self.pids())
        w0 = kworker_ns()
        b0, s0 = machine()
        r = wrk(args, self.port, point["path"], point["headers"], point["secs"], in_cgroup=ms,
                script=point.get("script"), conns=point.get("conns"))
        b1, s1 = machine()
        w1 = kworker_ns()
        k1 = task_ns(self.pids())
        c1 = self.bpf_stats()
        if ms:
            self.stop()
        n = max(r["reqs"], 1)
        r["proc_us"] = (k1 - k0) / 1e3 / n
        r["progs"] = {k: ((v[0] - c0.get(k, (0, 0))[0]) / n, (v[1] - c0.get(k, (0, 0))[1]) / n)
                      for k, v in c1.items()}          # runs per request, ns per request
        r["bpf_us"] = sum(v[1] for v in r["progs"].values()) / 1e3
        r["bpf_runs"] = sum(v[0] for v in r["progs"].values())
        r["busy_us"] = (b1 - b0) / HZ * 1e6 / n
        r["sirq_us"] = (s1 - s0) / HZ * 1e6 / n
        r["kw_us"] = kworker_delta(w0, w1) / 1e3 / n
        return r

    def bpf_stats(self):
        return bpf_progs(*self.bpf) if self.bpf else {}

    def stop(self):
        if self.p:
            stop(self.p)
            self.p = None
        if self.bpf and os.path.isdir(self.bpf[0]):
            shutil.rmtree(self.bpf[0], ignore_errors=True)


def start_config(args, kind, pol, ports, port):
    c = Config(kind, port)
    if kind == "direct":
        c.port = ports[pol["expect"][:2]]
        return c
    if kind == "haproxy":
        cfg = os.path.join(tmp, "haproxy-%d.cfg" % port)
        with open(cfg, "w") as f:
            f.write(haproxy_conf(pol, port, ports))
        c.errfile = os.path.join(tmp, "haproxy-%d.err" % port)
        c.p = start(["haproxy", "-db", "-f", cfg], "haproxy", c.errfile)
        c.pids = lambda p=c.p: [p.pid]
    elif kind == "nginx":
        cfg = os.path.join(tmp, "nginx-%d.conf" % port)
        with open(cfg, "w") as f:
            f.write(nginx_conf(pol, port, ports, "nginx-%d" % port))
        c.errfile = os.path.join(tmp, "nginx-%d.err" % port)
        c.p = start(["nginx", "-c", cfg, "-e", c.errfile], "nginx")
        c.pids = lambda p=c.p: [p.pid] + children(p.pid)
    elif kind == "l7c":
        obj, c.err = compile_l7(args, pol, port, ports, "gw")
        if c.err:
            return c
        pin = "/sys/fs/bpf/l7bench-%d-%d" % (PID, port)
        c.errfile = os.path.join(tmp, "l7run-%d.err" % port)
        c.p = start([args.l7run, "--bpf-stats", "--pin", pin, obj], "l7run", c.errfile)
        c.pids = lambda p=c.p: [p.pid]
        c.bpf = (pin, None)
    elif kind == "l7c-mesh":
        c.obj, c.err = compile_l7(args, pol, port, ports, "mesh")
        return c          # started per run: attached programs would also see the peers' sockets
    if not wait_port(c.port):
        c.err = "%s did not listen on %d: %s" % (kind, c.port, tail(getattr(c, "errfile", None)))
        c.stop()
    return c


def start_mesh(self, args, point):
    pin = "/sys/fs/bpf/l7bench-mesh-%d-%d" % (PID, self.port)
    # a pool connection per client connection and upstream: 64 (L7_MESH_SLOTS) for the 64-connection point
    pool = "64" if (point.get("conns") or args.conns) > 48 else "48"
    self.p = start([args.l7run, "--mesh", "--cgroup", cgroup, "--pool", pool, "--pin", pin, self.obj],
                   "l7run-mesh", os.path.join(tmp, "l7run-mesh.err"))
    self.pids = lambda p=self.p: [p.pid]
    self.bpf = (pin, "l7_mesh_socks")
    if not wait_port(self.port):
        self.err = "l7run --mesh did not listen"
        self.stop()
        return
    for _ in range(50):               # the pool is open once the map holds its sockets
        if os.path.exists(os.path.join(pin, "l7_mesh_socks")):
            break
        time.sleep(0.05)
    time.sleep(0.3)


Config.start_mesh = start_mesh


def sanity(c, pol, point):
    """The measured request gets the expected answer (route + header) and a request the policy
    denies is denied: the peers enforce the same thing."""
    if c.kind == "l7c-mesh":
        return None       # checked inside its measured run (wrk's non-2xx count)
    st, body = http_get(c.port, point["path"], point["headers"])
    want = pol["expect"] if c.kind != "direct" else None
    if st != 200 or (want and body != want):
        return "expected 200 %r, got %s %r" % (want, st, body[:80])
    if c.kind != "direct":
        if pol.get("deny"):
            dst, _ = http_get(c.port, pol["deny"][0], point["headers"])
            if dst != pol["deny"][1]:
                return "deny check: %s gave %s, expected %s" % (pol["deny"][0], dst, pol["deny"][1])
        if pol.get("deny_headers"):
            dst, _ = http_get(c.port, point["path"], pol["deny_headers"])
            if dst not in (401, 403):
                return "bad JWT was not refused (status %s)" % dst
    return None


def run_point(args, pol, point, ports, next_port):
    """All configurations of one point, rounds alternating; returns {config: [run dicts]}."""
    cfgs = {}
    notes = {}
    for kind in CONFIGS:
        if kind == "l7c-mesh" and not args.mesh:
            continue
        c = start_config(args, kind, pol, ports, next_port())
        if not c.err:
            c.err = sanity(c, pol, point)
        if c.err:
            notes[kind] = c.err
            log("    %-9s skipped: %s" % (kind, c.err))
            c.stop()
            continue
        cfgs[kind] = c
    # warm-up: pools filled, caches hot
    for kind, c in cfgs.items():
        if kind != "l7c-mesh":
            wrk(args, c.port, point["path"], point["headers"], 1, script=point.get("script"), conns=point.get("conns"))
    runs = {k: [] for k in cfgs}
    order = list(cfgs)
    for rnd in range(point["rounds"]):
        for kind in order[rnd % len(order):] + order[:rnd % len(order)]:   # rotate the order
            r = cfgs[kind].measure(args, point)
            if r is None:
                notes[kind] = cfgs[kind].err
                continue
            runs[kind].append(r)
            log("    r%d %-9s %9.0f req/s p50 %6.3f p99 %6.3f ms  proc %5.2f bpf %5.2f kw %5.2f sirq %5.2f busy %6.2f us/req%s"
                % (rnd, kind, r["rps"], r["p50"], r["p99"], r["proc_us"], r["bpf_us"], r["kw_us"],
                   r["sirq_us"], r["busy_us"], "  non-2xx %d" % r["non2xx"] if r["non2xx"] else ""))
    for c in cfgs.values():
        c.stop()
    return runs, notes


def summarize(runs):
    """Medians over rounds; machine+ and softirq+ against the direct run of the same round."""
    out = {}
    direct = runs.get("direct", [])
    for kind, rs in runs.items():
        if not rs:
            continue
        med = lambda k: statistics.median(r[k] for r in rs)
        s = {k: med(k) for k in ("rps", "p50", "p99", "proc_us", "bpf_us", "bpf_runs", "busy_us", "sirq_us", "kw_us")}
        s["non2xx"] = sum(r["non2xx"] for r in rs)
        s["errors"] = sum(r["errors"] for r in rs)
        s["runs"] = len(rs)
        names = sorted({n for r in rs for n in r.get("progs", {})})
        s["progs"] = {n: (statistics.median(r["progs"].get(n, (0, 0))[0] for r in rs),
                          statistics.median(r["progs"].get(n, (0, 0))[1] for r in rs)) for n in names}
        if direct:
            pairs = list(zip(rs, direct))
            s["busy_plus"] = statistics.median(a["busy_us"] - b["busy_us"] for a, b in pairs)
            s["sirq_plus"] = statistics.median(a["sirq_us"] - b["sirq_us"] for a, b in pairs)
            s["kw_plus"] = statistics.median(a["kw_us"] - b["kw_us"] for a, b in pairs)
        else:
            s["busy_plus"] = s["sirq_plus"] = s["kw_plus"] = float("nan")
        # the enforcing component: its process(es), plus its BPF programs (l7c), plus the extra
        # softirq against direct (the extra loopback hop / the kernel work); BPF time is partly
        # inside that softirq, so for l7c this sum is an upper bound
        # (kworker+: the sockmap backlog work that transmits l7c's redirects, for everyone)
        s["component_us"] = (s["proc_us"] + s["bpf_us"] + max(s["sirq_plus"], 0.0) + max(s["kw_plus"], 0.0)
                             if kind != "direct" else 0.0)
        out[kind] = s
    return out


# --------------------------------------------------------------------------------------- report
def header_sets(kind, kb):
    """kb kB (1 kB = 1000 B) of header lines: one big header, or kb headers of 1 kB each.
    A line counts its name, ': ' and CRLF."""
    if kind == "single":
        n = kb * 1000 - len("x-data: ") - 2
        return [("x-data", "v" * n)]
    return [("x-h%02d" % i, "v" * (1000 - len("x-h00: ") - 2)) for i in range(kb)]


def fmt(v, d=1):
    return "—" if v is None or v != v else ("%.*f" % (d, v))


def machine_description(args):
    def first(cmd):
        try:
            return sh(cmd).strip()
        except (OSError, subprocess.CalledProcessError):
            return "?"
    with open("/proc/cpuinfo") as f:
        ci = f.read()
    model = re.search(r"model name\s*:\s*(.*)", ci)
    mhz = re.search(r"cpu MHz\s*:\s*(.*)", ci)
    mem = re.search(r"MemTotal:\s*(\d+)", open("/proc/meminfo").read())
    pk = lambda p: first(["dpkg-query", "-W", "-f=${Version}", p])
    return [
        "- CPU: %s, %d logical CPUs (%s MHz as reported by /proc/cpuinfo)" %
        (model.group(1) if model else "?", NCPU, mhz.group(1) if mhz else "?"),
        "- Memory: %d MiB" % (int(mem.group(1)) // 1024 if mem else 0),
        "- Kernel: `%s`" % first(["uname", "-srvm"]),
        "- Packages: haproxy %s, nginx %s (nginx-light), libnginx-mod-http-js (njs) %s, wrk %s, gnuplot %s" %
        (pk("haproxy"), pk("nginx"), pk("libnginx-mod-http-js"), pk("wrk"), pk("gnuplot-nox")),
        "- l7c: commit `%s` (%s)" % (args.commit, args.source),
    ]


def gnuplot(svg, size, title, script):
    """Draws svg (size "W,H") with gnuplot: its terminal, output and title, then script. The svg's
    path relative to the report, or None (said in the log) if gnuplot failed."""
    r = subprocess.run(["gnuplot"], text=True, capture_output=True, input="""set terminal svg size %s dynamic font 'Helvetica,12'
set output '%s'
set title '%s'
""" % (size, svg, title) + script)
    if r.returncode:
        log("gnuplot: " + r.stderr.strip()[:300])
        return None
    return os.path.relpath(svg, os.path.dirname(args_global.out))


def plot(name, title, xlabel, series, ylabel, logy=False, xtics=None, logx=False):
    """series: {label: [(x, y), ...]} -> docs/perf/NAME.svg via gnuplot."""
    if not series:
        return None
    dat = os.path.join(tmp, name + ".dat")
    blocks = []
    with open(dat, "w") as f:
        for label, pts in series.items():
            f.write("# %s\n" % label)
            for x, y in pts:
                f.write("%s %s\n" % (x, y))
            f.write("\n\n")
            blocks.append(label)
    svg = os.path.join(args_global.outdir, name + ".svg")
    plots = ", ".join("'%s' index %d using %s with linespoints title '%s'" %
                      (dat, i, "2:xtic(1)" if xtics else "1:2", lab) for i, lab in enumerate(blocks))
    return gnuplot(svg, "720,400", title, """set xlabel '%s'
set ylabel '%s'
set grid
set key outside right
%s
%s
plot %s
""" % (xlabel, ylabel, "set logscale y" if logy else "set yrange [0:*]", "set logscale x 2" if logx else "", plots))


def bar_plot(name, title, labels, series, ylabel):
    """Clustered bars: labels = x groups, series = {config: [value per label]}."""
    if not labels or not series:
        return None       # a run without the section (--only)
    dat = os.path.join(tmp, name + ".dat")
    cols = list(series)
    with open(dat, "w") as f:
        f.write("point " + " ".join('"%s"' % c for c in cols) + "\n")
        for i, lab in enumerate(labels):
            f.write('"%s" %s\n' % (lab, " ".join(
                "NaN" if series[c][i] is None or series[c][i] != series[c][i] else "%g" % series[c][i]
                for c in cols)))
    svg = os.path.join(args_global.outdir, name + ".svg")
    plots = ", ".join("'%s' using %d:xtic(1) title columnheader(%d)" % (dat, i + 2, i + 2)
                      for i in range(len(cols)))
    return gnuplot(svg, "760,400", title, """set ylabel '%s'
set style data histogram
set style histogram cluster gap 1
set style fill solid 0.8 border -1
set grid ytics
set key outside right
set yrange [0:*]
plot %s
""" % (ylabel, plots))


args_global = None


def main():
    global tmp, cgroup, args_global
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--out", default=os.path.join(REPO, "docs/performance.md"))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int)
    ap.add_argument("--secs", type=int)
    ap.add_argument("--conns", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-mesh", dest="mesh", action="store_false")
    ap.add_argument("--only", help="comma-separated sections: main,lat,hdr,cx,mut")
    ap.add_argument("--src", default=REPO, help="source tree that was built (examples/ come from it)")
    ap.add_argument("--commit", default="?")
    ap.add_argument("--report-only", metavar="RESULTS_JSON")
    ap.add_argument("--add", metavar="RESULTS_JSON",
                    help="run the --only sections, put them into RESULTS_JSON (a full run's, e.g. "
                         "docs/perf/results.json) in place of its own, and render the page from it: the page says "
                         "which sections come from which run")
    ap.add_argument("--source", default="?")
    ap.add_argument("--cmdline", default="bench/run-all.sh")
    args = ap.parse_args()
    args_global = args
    global JWT_SECRET
    JWT_SECRET = "social-network-demo-key-do-not-use-in-production"   # until the example lands
    for d in (args.src, REPO):
        if os.path.exists(os.path.join(d, JWT_KEY_FILE)):
            with open(os.path.join(d, JWT_KEY_FILE)) as fh:
                JWT_SECRET = fh.read().strip()
            break
    args.l7c = os.path.join(args.build, "driver/l7c")
    args.l7run = os.path.join(args.build, "runtime/l7run")
    args.outdir = os.path.join(os.path.dirname(os.path.abspath(args.out)), "perf")
    os.makedirs(args.outdir, exist_ok=True)
    main_rounds = args.rounds or (1 if args.quick else 5)
    main_secs = args.secs or (2 if args.quick else 5)
    sweep_rounds = args.rounds or (1 if args.quick else 3)
    sweep_secs = args.secs or (2 if args.quick else 3)
    only = set((args.only or "main,lat,hdr,cx,mut").split(","))
    if args.report_only:          # re-render the page from a saved results.json
        with open(args.report_only) as fh:
            saved = json.load(fh)
        args.quick, args.commit, args.source = saved["quick"], saved["commit"], saved["source"]
        if saved["quick"]:
            main_rounds = main_secs = sweep_rounds = sweep_secs = None
            main_rounds, main_secs, sweep_rounds, sweep_secs = 1, 2, 1, 2
        args.cmdline = "bench/run-all.sh" + (" --quick" if saved["quick"] else "")
        args.added = saved.get("added", [])
        tmp = tempfile.mkdtemp(prefix="l7perf-")
        write_report(args, [tuple(r) for r in saved["results"]], saved["elapsed"], main_rounds, main_secs,
                     sweep_rounds, sweep_secs)
        shutil.rmtree(tmp, ignore_errors=True)
        return

    tmp = tempfile.mkdtemp(prefix="l7perf-")
    cgroup = "/sys/fs/cgroup/unified/l7perf-%d" % PID
    if args.mesh:
        try:
            os.mkdir(cgroup)
        except OSError as e:
            log("mesh mode off: cannot create %s: %s" % (cgroup, e))
            args.mesh = False
    t_start = time.time()
    ports = {"u0": BASE, "u1": BASE + 1, "u2": BASE + 2}
    counter = [BASE + 3]

    def next_port():
        # rotate through our range; skip a port something else holds (parallel tests)
        for _ in range(18):
            counter[0] = counter[0] + 1 if counter[0] + 1 < BASE + 20 else BASE + 3
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", counter[0]))
                return counter[0]
            except OSError:
                pass
            finally:
                s.close()
        return counter[0]

    results = []          # (section, label, x, runs, summary, notes)
    try:
        # the backend lives in the cgroup so mesh mode can see its sockets; nothing is attached
        # to the cgroup outside the mesh runs
        with open(os.path.join(tmp, "backend.conf"), "w") as f:
            f.write(backend_conf(ports))
        start(["nginx", "-c", os.path.join(tmp, "backend.conf"), "-e", os.path.join(tmp, "backend.err")],
              "backend", in_cgroup=args.mesh)
        if not all(wait_port(p) for p in ports.values()):
            sys.exit("backend nginx did not start: " + open(os.path.join(tmp, "backend.err")).read())

        def point(section, label, x, pol, path=None, headers=(), rounds=None, secs=None, script=None, conns=None):
            pt = {"path": path or pol.get("path", "/"), "headers": list(pol.get("headers", [])) + list(headers),
                  "rounds": rounds or sweep_rounds, "secs": secs or sweep_secs, "script": script, "conns": conns}
            log("[%5.0fs] %s: %s" % (time.time() - t_start, section, label))
            runs, notes = run_point(args, pol, pt, ports, next_port)
            results.append((section, label, x, runs, summarize(runs), notes))

        if "main" in only:
            m = dict(rounds=main_rounds, secs=main_secs)
            point("main", "Route only (examples/route.l7)", 0, route_example(args.src), **m)
            point("main", "Social Network (JWT + header + route)", 1, social(args.src), **m)
            point("main", "Media Service, best case (rule 1 of 50)", 2, media(), path="/wrk2-api/review/1/compose", **m)
            point("main", "Media Service, worst case (rule 50 of 50)", 3, media(), path="/wrk2-api/review/50/compose", **m)
            point("main", "Hotel Reservation (telemetry + header + route)", 4, hotel(), **m)
            # every request a token the cache has not seen: l7c's JWT cold path (HAProxy and
            # nginx verify every request either way)
            point("main", "Social Network, a new JWT every request (cache cold)", 5, social(args.src),
                  script=jwt_cycle_script(tmp, 8192), **m)
        if "lat" in only:
            # latency by load (L7FP's headline is the median): 1 connection is the unloaded
            # round trip, 64 a queue on 2 cores
            for n in ([1, 64] if args.quick else [1, 8, 64]):
                point("lat", "Route only, %d connection%s" % (n, "s" if n > 1 else ""), n, route_example(args.src), conns=n)
        if "hdr" in only:
            sizes = [16] if args.quick else [1, 2, 4, 8, 12, 16]
            for kind in ("single", "multi"):
                for kb in (sizes if kind == "single" or not args.quick else [16]):
                    point("hdr-" + kind, "%d kB" % kb, kb, route_example(args.src), headers=header_sets(kind, kb))
        if "cx" in only:
            cs = [1.0] if args.quick else [0.25, 0.5, 0.75, 1.0]
            for c in cs:
                hdr_len = int(c * 16000) - len("x-data: ") - 2 - 200    # keep the head under 16 KiB
                headers = [("x-data", "v" * hdr_len)]
                src = os.path.join(tmp, "route-c%g.l7" % c)
                with open(src, "w") as f:
                    f.write(gen.route_header("x-data"))
                pol = media(1, header="x-data", l7=src, name="route-c")
                pol["haproxy"] = """  http-request deny deny_status 403 unless { req.hdr(x-data) -m beg v }
  use_backend u0 if { path_beg /wrk2-api/review/ }
  use_backend u1"""
                pol["nginx_http"] = """  map $http_x_data $l7_ok { ~^v 1; default 0; }
  map $l7_ok:$uri $l7_route { ~^0: deny403; ~^1:/wrk2-api/review/ u0; default u1; }"""
                pol["nginx_loc"] = ""
                pol["expect"] = "u0 \n"
                pol["deny"] = None
                if not args.quick:
                    point("cx-route", "Route c=%g" % c, c, pol, path="/wrk2-api/review/1/compose", headers=headers)
                n = int(round(100 * c))
                src = os.path.join(tmp, "rbac-c%g.l7" % c)
                with open(src, "w") as f:
                    f.write(gen.rbac(n, header="x-data", comment="RBAC[c=%g]" % c))
                pol = media(n, header="x-data", l7=src, name="rbac-c")
                point("cx-rbac", "RBAC c=%g (%d rules, last matches)" % (c, n), c, pol,
                      path="/wrk2-api/review/%d/compose" % n, headers=headers)
                # JWT[c]: a token of 3·c kB (one token: l7c's cache holds it after the first)
                pol = social(args.src)
                tok = jwt_token(int(3072 * c))
                pol["headers"] = [("Authorization", "Bearer " + tok)]
                pol["deny_headers"] = [("Authorization", "Bearer " + tok[:-3] + "AAA")]
                point("cx-jwt", "JWT c=%g (%d-byte token)" % (c, len(tok)), c, pol)
        if "mut" in only:
            # Mutate[c]: every point, quick or not (each is one short policy)
            for c in (0.25, 0.5, 0.75, 1.0):
                pol = mutate_policy(c)
                point("cx-mutate", "Mutate c=%g (%d of %d headers removed)" % (
                    c, int(round(c * gen.MUTATE_HEADERS)), gen.MUTATE_HEADERS), c, pol)
    finally:
        for p, _ in list(procs):
            stop(p)
        if args.mesh:
            for _ in range(20):
                try:
                    os.rmdir(cgroup)
                    break
                except OSError:
                    time.sleep(0.2)
    elapsed = run_elapsed = time.time() - t_start
    saved = {"results": results, "elapsed": elapsed, "quick": args.quick, "commit": args.commit,
             "source": args.source}
    if args.add:                  # these sections into an earlier full run's results
        with open(args.add) as fh:
            base = json.load(fh)
        secs = sorted({r[0] for r in results})
        base["results"] = [r for r in base["results"] if r[0] not in secs] + results
        base["added"] = [a for a in base.get("added", []) if not set(a["sections"]) & set(secs)] + [{
            "sections": secs, "commit": args.commit, "source": args.source, "quick": args.quick,
            "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "elapsed": elapsed}]
        saved = base
        args.quick, args.commit, args.source = base["quick"], base["commit"], base["source"]
        elapsed = base["elapsed"]
        results = [tuple(r) for r in base["results"]]
    args.added = saved.get("added", [])
    with open(os.path.join(tmp, "results.json"), "w") as f:
        json.dump(saved, f)
    shutil.copy(os.path.join(tmp, "results.json"), os.path.join(args.outdir, "results.json"))
    try:
        write_report(args, results, elapsed, main_rounds, main_secs, sweep_rounds, sweep_secs)
    finally:                      # results.json is kept in docs/perf for --report-only
        shutil.rmtree(tmp, ignore_errors=True)
    log("wrote %s in %.0f s" % (args.out, run_elapsed))


def write_report(args, results, elapsed, main_rounds, main_secs, sweep_rounds, sweep_secs):
    import report
    report.write(args, results, elapsed, main_rounds, main_secs, sweep_rounds, sweep_secs,
                 machine_description(args), plot, bar_plot)


if __name__ == "__main__":
    sys.path.insert(0, HERE)
    main()
