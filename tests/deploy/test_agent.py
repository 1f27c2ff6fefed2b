#!/usr/bin/python3
"""The node agent (issue #16 item 4) run exactly as deploy/kubernetes/daemonset.yaml runs it:
its container's command and arguments, with the container's paths moved under a temporary
directory (the binaries to the build's), against a policy directory updated the way a kubelet
updates a ConfigMap volume (a new `..<timestamp>` directory, a `..data_tmp` symlink to it
renamed over `..data`, the visible files symlinks through `..data`, the old directory removed).

usage: test_agent.py L7C L7RUN SOURCE_DIR

In a network namespace of its own (the manifests' fixed ports are ours alone). Asserted:
  - a policy that does not build: l7run runs (/healthz 200), is not ready (/readyz 503, the
    status file says why), and serves the first one that builds (the ConfigMap example);
  - the example's decisions; then a swap under traffic (new connections and keep-alive ones): no
    request fails (a close before any response byte is re-sent, and must not have reached a
    backend: the criterion of tests/reliability/test_reload.py), new connections get the new
    policy's decisions;
  - a swap to a policy l7c refuses, then to one l7run refuses (a changed listen address): the
    serving version stays and keeps deciding, l7_policy_reload_failures_total{stage} (/metrics,
    parsed by prometheus_client), `l7run --stats` and the status file say so and why;
  - the kubelet's clean-up events (or touching nothing) build nothing: the version stays;
  - SIGTERM: no new connection is accepted, /readyz says 503, a slow request in flight completes,
    and l7run exits 0 within --grace-period, its pins gone;
  - a directory of Cilium YAML (imported with its import.args) is served and followed too."""
import ctypes
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import yaml
from prometheus_client.parser import text_string_to_metric_families

L7C, L7RUN, SRC = sys.argv[1:4]
sys.path.insert(0, os.path.join(SRC, "tests", "common"))
from check import check, summary  # noqa: E402

DEPLOY = os.path.join(SRC, "deploy", "kubernetes")
PID = os.getpid()


def unshare_net():
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(0x40000000) != 0:   # CLONE_NEWNET
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNET)")
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)


# ---- the kubelet's atomic writer (pkg/volume/util/atomic_writer.go) ---------------------------

def kubelet_write(target, files):
    """What the kubelet does to a ConfigMap volume when the ConfigMap changes."""
    old = os.readlink(os.path.join(target, "..data")) if os.path.islink(os.path.join(target, "..data")) else None
    ts = "..%s.%09d" % (time.strftime("%Y_%m_%d_%H_%M_%S", time.gmtime()), time.time_ns() % 10**9)
    os.mkdir(os.path.join(target, ts))
    for name, text in files.items():
        with open(os.path.join(target, ts, name), "w") as f:
            f.write(text)
    tmp = os.path.join(target, "..data_tmp")
    os.symlink(ts, tmp)
    os.rename(tmp, os.path.join(target, "..data"))   # the one atomic step
    for name in files:
        link = os.path.join(target, name)
        if not os.path.islink(link):
            os.symlink(os.path.join("..data", name), link)
    for name in os.listdir(target):
        if not name.startswith("..") and name not in files:
            os.unlink(os.path.join(target, name))
    if old:
        shutil.rmtree(os.path.join(target, old))


# ---- backends --------------------------------------------------------------------------------

class Backend(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        q = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
        if "ms" in q:
            time.sleep(int(q["ms"][0]) / 1000)
        with self.server.lock:
            self.server.paths.append(self.path)
        body = ("%s %s\n" % (self.server.name, self.path)).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_GET

    def log_message(self, *a):
        pass


def backend(addr, name):
    s = ThreadingHTTPServer(addr, Backend)
    s.daemon_threads = True
    s.name, s.paths, s.lock = name, [], threading.Lock()
    threading.Thread(target=s.serve_forever, daemon=True).start()
    return s


def get(port, path, host="127.0.0.1", method="GET", timeout=10):
    """One request on a new connection: (status, body), or (None, why)."""
    c = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        c.request(method, path, headers={"Connection": "close"})
        r = c.getresponse()
        return r.status, r.read().decode()
    except (OSError, http.client.HTTPException) as e:
        return None, repr(e)
    finally:
        c.close()


def wait_for(cond, timeout, step=0.1):
    end = time.time() + timeout
    while time.time() < end:
        v = cond()
        if v:
            return v
        time.sleep(step)
    return cond()


# ---- the DaemonSet's command line ------------------------------------------------------------

def daemonset_command(tmp):
    """The container's command + args and environment, container paths moved under tmp."""
    docs = list(yaml.safe_load_all(open(os.path.join(DEPLOY, "daemonset.yaml"))))
    ds = [d for d in docs if d and d.get("kind") == "DaemonSet"][0]
    c = ds["spec"]["template"]["spec"]["containers"][0]
    sub = [("/usr/local/bin/l7run", L7RUN), ("/usr/local/bin/l7c", L7C),
           ("/etc/l7/policy", os.path.join(tmp, "policy")), ("/run/l7", os.path.join(tmp, "run")),
           ("/var/tmp/l7", os.path.join(tmp, "build")), ("/sys/fs/bpf/l7run", "/sys/fs/bpf/l7agent-test-%d" % PID)]

    def moved(s):
        for a, b in sub:
            s = s.replace(a, b)
        return s
    argv = [moved(a) for a in c["command"] + c["args"]]
    env, own = dict(os.environ), {}
    for e in c.get("env", []):
        env[e["name"]] = own[e["name"]] = moved(e["value"])
    left = [a for a in argv + list(own.values()) if re.search(r"(^|=)/(etc/l7|run/l7|var/tmp/l7|usr/local)\b", a)]
    check(not left, "every container path of the DaemonSet is moved for the test (left: %s)" % left)
    flags = dict(a[2:].split("=", 1) for a in c["args"] if a.startswith("--") and "=" in a)
    return argv, env, flags, c


def metrics(port):
    try:
        text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5).read().decode()
    except OSError:
        return {}
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def probe(port, path):
    try:
        r = urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=5)
        return r.status, r.read().decode().strip()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode().strip()
    except OSError as e:
        return None, repr(e)


def brief(s):
    """What a check line shows of the status file."""
    return {k: s.get(k) for k in ("ready", "version", "reloads", "failures")} if s else s


def status(path):
    try:
        return json.load(open(path))
    except (OSError, ValueError):
        return {}


# ---- traffic during a swap -------------------------------------------------------------------

class Traffic:
    """Workers sending GET /api/x?id=N (N unique) until stopped: two on a new connection each
    time, one on a kept-alive connection. A request fails on an error status, a reset, a
    timeout, or a close after part of its response. A close before any byte of the response is
    what a server closing an idle connection looks like (gateway mode drains an old version's
    connections at request boundaries after a reload, as HAProxy's soft stop does): the client
    sends the request again on a new connection, as HTTP clients do (RFC 9112 9.3.1) — counted
    apart, and such a request must never have reached a backend (each id is seen once there).
    This is the criterion of tests/reliability/test_reload.py."""

    def __init__(self, port, backends):
        self.port, self.stop, self.lock, self.backends = port, False, threading.Lock(), backends
        self.ok, self.fail, self.retried, self.seen, self.n = 0, [], 0, set(), 0
        self.threads = [threading.Thread(target=self.worker, args=(keep,)) for keep in (False, False, True)]
        for t in self.threads:
            t.start()

    def next_path(self):
        with self.lock:
            self.n += 1
            return "/api/x?id=%d" % self.n

    def worker(self, keep):
        c, path, tries = None, None, 0
        while not self.stop or path:
            if path is None:
                path, tries = self.next_path(), 0
            if c is None:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
            try:
                c.request("GET", path, headers={} if keep else {"Connection": "close"})
                r = c.getresponse()
                body = r.read().decode()
                with self.lock:
                    if r.status == 200 and body.split()[1:] == [path]:
                        self.ok += 1
                        self.seen.add(body.split()[0])
                    else:
                        self.fail.append((path, r.status, body))
                path = None
            except http.client.RemoteDisconnected as e:   # closed before any byte of the response
                with self.lock:
                    if tries < 3:
                        self.retried += 1
                    else:
                        self.fail.append((path, None, repr(e)))
                tries += 1
                path = path if tries <= 3 else None
                c.close()
                c = None
                continue
            except (OSError, http.client.HTTPException) as e:
                with self.lock:
                    self.fail.append((path, None, repr(e)))
                path = None
                c.close()
                c = None
                continue
            if not keep:
                c.close()
                c = None
        if c:
            c.close()

    def end(self):
        self.stop = True
        for t in self.threads:
            t.join(30)
        got = [p for b in self.backends for p in b.paths if p.startswith("/api/x?id=")]
        twice = sorted({p for p in got if got.count(p) > 1})
        return twice


# ---- the policies ------------------------------------------------------------------------------

def example():
    docs = list(yaml.safe_load_all(open(os.path.join(DEPLOY, "configmap.yaml"))))
    return [d for d in docs if d and d.get("kind") == "ConfigMap"][0]["data"]


def variant(text):
    """The example, changed: /api/ goes to web, /old is gone (410)."""
    out = text.replace("Route(request, api);", "Route(request, web);")
    out = out.replace('if (starts_with(request.path, "/admin")) {',
                      'if (starts_with(request.path, "/old")) {\n    Deny(request, 410);\n  } else if (starts_with(request.path, "/admin")) {')
    check(out != text and "410" in out, "the second policy differs from the example")
    return out


CILIUM = """apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata:
  name: public
  namespace: default
spec:
  endpointSelector:
    matchLabels:
      app: web
  ingress:
  - toPorts:
    - ports:
      - port: "8080"
        protocol: TCP
      rules:
        http:
        - method: GET
          path: "/public.*"
%s"""


def main():
    unshare_net()
    tmp = tempfile.mkdtemp(prefix="l7agent-")
    procs = []
    try:
        return run(tmp, procs)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        pin = "/sys/fs/bpf/l7agent-test-%d" % PID
        if os.path.isdir(pin):
            shutil.rmtree(pin, ignore_errors=True)
        if not os.environ.get("L7_KEEP"):
            shutil.rmtree(tmp, ignore_errors=True)


def start_agent(tmp, procs, name, argv, env):
    for d in ("policy", "run", "build"):
        os.makedirs(os.path.join(tmp, d), exist_ok=True)
    log = open(os.path.join(tmp, name + ".log"), "w+")
    p = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
    procs.append(p)
    return p, log


def logtext(log):
    log.flush()
    log.seek(0)
    return log.read()


def run(tmp, procs):
    argv, env, flags, c = daemonset_command(tmp)
    print("agent: %s" % " ".join(argv))
    mport = int(flags["metrics-listen"].rsplit(":", 1)[1])
    grace = float(flags["grace-period"])
    st_file = flags["status-file"].replace("/run/l7", os.path.join(tmp, "run"))
    pin = flags["pin"].replace("/sys/fs/bpf/l7run", "/sys/fs/bpf/l7agent-test-%d" % PID)
    policy = os.path.join(tmp, "policy")
    os.makedirs(policy, exist_ok=True)
    data = example()
    m = re.search(r"service \w+ = [\d.]+:(\d+);", data["edge.l7"])
    port = int(m.group(1))
    backends = [backend(("127.0.0.1", 9001), "api"), backend(("127.0.0.1", 9002), "web")]

    # 1. a first policy that does not build: alive, not ready, says why
    kubelet_write(policy, {"edge.l7": "import \"http.l7i\";\nservice edge = 0.0.0.0:%d;\npolicy edge ( { }\n" % port})
    agent, log = start_agent(tmp, procs, "agent", argv, env)
    s = wait_for(lambda: status(st_file).get("last_error"), 60)
    check(s and s.get("stage") == "compile" and "edge.l7:3:" in s.get("message", ""),
          "a policy l7c refuses: the status file's last_error says where (%r)" % (s,))
    check(probe(mport, "/healthz")[0] == 200, "/healthz 200 while no policy serves")
    r = probe(mport, "/readyz")
    check(r[0] == 503 and "no policy" in r[1], "/readyz 503 while no policy serves: %r" % (r,))
    check(status(st_file).get("ready") is False, "the status file: not ready")

    # 2. the ConfigMap example: served once it is in the volume
    kubelet_write(policy, data)
    ready = wait_for(lambda: probe(mport, "/readyz")[0] == 200, 60)
    check(ready, "/readyz 200 once the example serves")
    s = status(st_file)
    check(s.get("ready") and s.get("version") == 1 and s.get("policy") == "edge" and s.get("sources") == "edge.l7"
          and s.get("last_success", {}).get("version") == 1, "the status file: version 1 serves (%r)" % brief(s))
    check(get(port, "/api/x") == (200, "api /api/x\n"), "example: /api/x -> api")
    check(get(port, "/") == (200, "web /\n"), "example: / -> web")
    check(get(port, "/admin")[0] == 403, "example: /admin -> 403")
    check(get(port, "/old/page") == (200, "web /old/page\n"), "example: /old/page -> web")

    # 3. a swap under traffic: the new decisions take effect, no request fails
    t = Traffic(port, backends)
    time.sleep(1.0)
    kubelet_write(policy, {"edge.l7": variant(data["edge.l7"])})
    swapped = wait_for(lambda: status(st_file).get("version") == 2, 60)
    time.sleep(1.0)
    twice = t.end()
    check(swapped, "the swapped ConfigMap is served as version 2")
    check(not t.fail, "no request failed during the swap (%d ok, %d re-sent after a close before any response byte; "
          "failed: %r)" % (t.ok, t.retried, t.fail[:5]))
    check(not twice, "no re-sent request had reached a backend (seen twice: %r)" % twice[:5])
    check(t.seen == {"api", "web"} and t.ok > 20, "the traffic spanned the swap: answered by %s, %d requests" % (t.seen, t.ok))
    check(get(port, "/api/x") == (200, "web /api/x\n"), "after the swap: /api/x -> web")
    check(get(port, "/old/page")[0] == 410, "after the swap: /old/page -> 410")
    check(get(port, "/admin")[0] == 403, "after the swap: /admin -> 403")

    # 4. the kubelet's clean-up and an update with the same files: nothing rebuilt
    kubelet_write(policy, {"edge.l7": variant(data["edge.l7"])})
    time.sleep(5)   # longer than a build and load take here: a rebuild would have published by now
    s = status(st_file)
    check(s.get("version") == 2 and s.get("reloads") == 1, "the same sources again: no new version (%r)" % brief(s))

    # 5. a policy l7c refuses: version 2 keeps serving; the counter, --stats and the status say so
    bad = variant(data["edge.l7"]).replace("Route(request, web);", "Route(request, nowhere);", 1)
    kubelet_write(policy, {"edge.l7": bad})
    s = wait_for(lambda: status(st_file).get("failures", {}).get("compile") == 2 and status(st_file), 60)
    err = (s or {}).get("last_error") or {}
    check(s and s.get("version") == 2 and err.get("stage") == "compile" and "nowhere" in err.get("message", ""),
          "l7c refuses the update: version 2 stays, last_error names the fault (%r)" % (err,))
    mv = metrics(mport)
    check(mv.get(("l7_policy_reload_failures_total", (("stage", "compile"),))) == 2 and
          mv.get(("l7_policy_reload_failures_total", (("stage", "load"),))) == 0 and
          mv.get(("l7_policy_version", ())) == 2,
          "/metrics: l7_policy_reload_failures_total{stage=compile} 2, {stage=load} 0, version 2")
    out = subprocess.run([L7RUN, "--stats", pin], capture_output=True, text=True).stdout
    check(re.search(r"^reload version 2 reloads 1 failed 0 .* compile_failed 2$", out, re.M),
          "--stats: compile_failed 2: %r" % re.findall(r"^reload .*", out, re.M))
    check(re.search(r"policy update of \S+ refused, the serving version is unchanged: [^\n]*\n[^\n]*undeclared name 'nowhere'",
                    logtext(log)),
          "the log says why the update was refused")
    check(get(port, "/api/x") == (200, "web /api/x\n") and get(port, "/old")[0] == 410,
          "version 2 keeps deciding after the refused update")

    # 6. one that builds but l7run refuses (a changed listen address): stage load
    moved = variant(data["edge.l7"]).replace(":%d;" % port, ":%d;" % (port + 1), 1)
    kubelet_write(policy, {"edge.l7": moved})
    s = wait_for(lambda: status(st_file).get("failures", {}).get("load") == 1 and status(st_file), 60)
    err = (s or {}).get("last_error") or {}
    check(s and s.get("version") == 2 and err.get("stage") == "load", "l7run refuses a changed listen address: "
          "version 2 stays, stage load (%r)" % (err,))
    mv = metrics(mport)
    check(mv.get(("l7_policy_reload_failures_total", (("stage", "load"),))) == 1, "/metrics: {stage=load} 1")
    check(get(port, "/api/x") == (200, "web /api/x\n"), "version 2 keeps deciding")
    check(s and s.get("last_success", {}).get("version") == 2, "last_success still names version 2")

    # 7. SIGTERM: stop accepting, finish the slow request in flight, exit 0 within the grace period
    slow = {}

    def slow_request():
        slow["r"] = get(port, "/slow?ms=2500", timeout=30)
        slow["t"] = time.time()
    th = threading.Thread(target=slow_request)
    th.start()
    time.sleep(0.5)
    t0 = time.time()
    agent.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    r = probe(mport, "/readyz")
    check(r[0] == 503 and "stopping" in r[1], "/readyz 503 once SIGTERM came: %r" % (r,))
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        refused = False
    except OSError:
        refused = True
    check(refused, "no new connection accepted while draining")
    try:
        rc = agent.wait(timeout=grace + 10)
    except subprocess.TimeoutExpired:
        rc = None
    took = time.time() - t0
    th.join(30)
    check(slow.get("r") == (200, "web /slow?ms=2500\n"), "the request in flight at SIGTERM completed: %r" % (slow.get("r"),))
    check(rc == 0, "l7run exited 0 after SIGTERM (rc %r)" % rc)
    check(took < grace and "t" in slow and time.time() >= slow["t"],
          "it exited within --grace-period (%.1f s of %.0f s), after the slow response" % (took, grace))
    check(took >= 1.5, "it waited for the slow request (%.1f s after SIGTERM)" % took)
    check(not os.path.exists(pin), "its pins are gone")
    check(re.search(r"stopping: no new connections; draining 1 connection", logtext(log)), "the log says it drains")

    # 8. Cilium YAML in the volume, imported with its import.args, then followed
    shutil.rmtree(policy)
    os.makedirs(policy)
    backend(("127.2.0.1", 8080), "pods")
    kubelet_write(policy, {"public.yaml": CILIUM % "", "import.args": "--port=8080\n"})
    os.unlink(st_file)   # the first agent's
    agent2, log2 = start_agent(tmp, procs, "agent-yaml", argv, env)
    check(wait_for(lambda: probe(mport, "/readyz")[0] == 200, 60), "the YAML policy serves")
    check(status(st_file).get("sources") == "import.args public.yaml", "status: its sources %r" % status(st_file).get("sources"))
    check(get(8080, "/public/a", host="127.1.0.1") == (200, "pods /public/a\n"), "YAML: GET /public/a -> 200")
    check(get(8080, "/private", host="127.1.0.1")[0] == 403, "YAML: GET /private -> 403")
    check(get(8080, "/public", host="127.1.0.1", method="POST")[0] == 403, "YAML: POST /public -> 403")
    kubelet_write(policy, {"public.yaml": CILIUM % '        - method: GET\n          path: "/private"\n',
                           "import.args": "--port=8080\n"})
    check(wait_for(lambda: status(st_file).get("version") == 2, 60), "the changed YAML is served as version 2")
    check(get(8080, "/private", host="127.1.0.1") == (200, "pods /private\n"), "YAML v2: GET /private -> 200")
    check(get(8080, "/public/b", host="127.1.0.1") == (200, "pods /public/b\n"), "YAML v2: GET /public/b -> 200")
    agent2.send_signal(signal.SIGTERM)
    try:
        rc = agent2.wait(timeout=grace + 10)
    except subprocess.TimeoutExpired:
        rc = None
    check(rc == 0, "the YAML agent exited 0 on SIGTERM")
    for name, lg in (("agent", log), ("agent-yaml", log2)):
        text = logtext(lg)
        print("---- %s log (%d lines)\n%s" % (name, text.count("\n"), "\n".join(text.splitlines()[-40:])))
    return summary("deploy.agent")


if __name__ == "__main__":
    sys.exit(main())
