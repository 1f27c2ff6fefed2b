#!/usr/bin/python3
"""deploy/kubernetes/ read the way the API server would see it (python3-yaml), and checked
against what docs/deploy.md promises and what l7run needs:
  - every manifest parses, every object has apiVersion, kind, metadata.name and the one
    namespace; the kinds are those docs/deploy.md installs; kustomization.yaml lists them all;
  - the DaemonSet: hostNetwork, a privileged container, the host's bpffs (hostPath /sys/fs/bpf)
    mounted with Bidirectional propagation, the cgroup v2 root (hostPath /sys/fs/cgroup), the
    policy ConfigMap mounted (read-only) at the directory its --watch names, liveness /healthz
    and readiness /readyz on the port --metrics-listen serves, resource requests, a
    terminationGracePeriodSeconds longer than --grace-period, the ServiceAccount of rbac.yaml;
    every option of its command line is one `l7run --help` lists;
  - RBAC: the RoleBinding binds that ServiceAccount to a Role that reads exactly that ConfigMap;
  - the ConfigMap: keys the agent builds (one .l7, or *.yaml and import.args), and its .l7
    compiles with l7c;
  - the Containerfile: every stage FROM Debian 12, every package it installs is a Debian 12
    package (apt-cache on this Debian 12 machine), it builds the l7c and l7run targets and
    installs them where the DaemonSet's command line runs them.

usage: test_manifests.py L7C L7RUN SOURCE_DIR"""
import os
import re
import subprocess
import sys
import tempfile

import yaml

L7C, L7RUN, SRC = sys.argv[1:4]
sys.path.insert(0, os.path.join(SRC, "tests", "common"))
from check import check, summary  # noqa: E402

DEPLOY = os.path.join(SRC, "deploy", "kubernetes")


def load_all():
    objs = []
    for name in sorted(os.listdir(DEPLOY)):
        if not name.endswith(".yaml"):
            continue
        try:
            docs = [d for d in yaml.safe_load_all(open(os.path.join(DEPLOY, name))) if d is not None]
        except yaml.YAMLError as e:
            check(False, "%s parses: %s" % (name, e))
            continue
        check(docs, "%s parses (%d object(s))" % (name, len(docs)))
        if name == "kustomization.yaml":   # kubectl apply -k: every other manifest, none twice
            others = sorted(n for n in os.listdir(DEPLOY) if n.endswith(".yaml") and n != name)
            res = docs[0].get("resources", [])
            check(docs[0].get("kind") == "Kustomization" and sorted(res) == others and res[0] == "namespace.yaml",
                  "kustomization.yaml lists every manifest, the namespace first: %s" % res)
            continue
        for d in docs:
            ok = isinstance(d, dict) and d.get("apiVersion") and d.get("kind") and d.get("metadata", {}).get("name")
            check(ok, "%s: %s/%s has apiVersion, kind and metadata.name" % (name, d.get("kind"), d.get("metadata", {}).get("name")))
            objs.append((name, d))
    return objs


def one(objs, kind):
    found = [d for _, d in objs if d.get("kind") == kind]
    check(len(found) == 1, "one %s (found %d)" % (kind, len(found)))
    return found[0] if found else {}


def main():
    objs = load_all()
    kinds = sorted(d["kind"] for _, d in objs)
    check(kinds == sorted(["Namespace", "ServiceAccount", "Role", "RoleBinding", "ConfigMap", "DaemonSet"]),
          "the objects docs/deploy.md installs: %s" % kinds)
    ns = one(objs, "Namespace").get("metadata", {}).get("name")
    for _, d in objs:
        if d["kind"] != "Namespace":
            check(d["metadata"].get("namespace") == ns, "%s %s is in namespace %s" % (d["kind"], d["metadata"]["name"], ns))

    ds = one(objs, "DaemonSet")
    spec = ds.get("spec", {})
    check(spec.get("selector", {}).get("matchLabels", {}).items() <= spec.get("template", {}).get("metadata", {}).get("labels", {}).items(),
          "the DaemonSet's selector matches its pods' labels")
    pod = spec.get("template", {}).get("spec", {})
    check(pod.get("hostNetwork") is True, "DaemonSet: hostNetwork")
    c = (pod.get("containers") or [{}])[0]
    check(c.get("securityContext", {}).get("privileged") is True, "DaemonSet: the container is privileged")
    args = c.get("args", [])
    flags = {}
    for a in args:
        m = re.match(r"--([\w-]+)(?:=(.*))?$", a)
        check(m, "argument %r is --option[=value]" % a)
        if m:
            flags[m.group(1)] = m.group(2)
    help_text = subprocess.run([L7RUN, "--help"], capture_output=True, text=True).stdout
    for f in flags:
        check(re.search(r"--%s\b" % re.escape(f), help_text), "l7run --help lists --%s" % f)
    check(c.get("command") == ["/usr/local/bin/l7run"], "the command is l7run: %r" % c.get("command"))

    vols = {v["name"]: v for v in pod.get("volumes", [])}
    mounts = {m["mountPath"]: m for m in c.get("volumeMounts", [])}

    def host_vol(path):
        return [n for n, v in vols.items() if v.get("hostPath", {}).get("path") == path]
    bpf = mounts.get("/sys/fs/bpf", {})
    check(bpf.get("name") in host_vol("/sys/fs/bpf") and bpf.get("mountPropagation") == "Bidirectional",
          "the host's bpffs at /sys/fs/bpf, Bidirectional propagation")
    check(flags.get("pin", "").startswith("/sys/fs/bpf/"), "--pin is in that bpffs: %r" % flags.get("pin"))
    cg = mounts.get("/sys/fs/cgroup", {})
    check(cg.get("name") in host_vol("/sys/fs/cgroup"), "the cgroup v2 root (hostPath /sys/fs/cgroup) mounted")

    cm = one(objs, "ConfigMap")
    watch = flags.get("watch")
    pm = mounts.get(watch, {})
    check(watch and vols.get(pm.get("name"), {}).get("configMap", {}).get("name") == cm.get("metadata", {}).get("name")
          and pm.get("readOnly") is True, "the policy ConfigMap is mounted read-only at --watch %s" % watch)
    for f in ("status-file", "pidfile"):
        d = os.path.dirname(flags.get(f) or "/nowhere/x")
        check(d in mounts, "--%s is on a volume (%s)" % (f, d))
    tmpdir = [e["value"] for e in c.get("env", []) if e["name"] == "TMPDIR"]
    check(tmpdir and tmpdir[0] in mounts, "TMPDIR (the builds) is a volume: %r" % tmpdir)

    port = int((flags.get("metrics-listen") or ":0").rsplit(":", 1)[1])
    ports = {p.get("name"): p.get("containerPort") for p in c.get("ports", [])}
    for kind, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        g = c.get(kind, {}).get("httpGet", {})
        p = g.get("port")
        check(g.get("path") == path and (ports.get(p) if isinstance(p, str) else p) == port,
              "%s: GET %s on the metrics port %d" % (kind, path, port))
    req = c.get("resources", {}).get("requests", {})
    check("cpu" in req and "memory" in req, "resource requests: %r" % req)
    check(pod.get("terminationGracePeriodSeconds", 30) > float(flags.get("grace-period") or 0),
          "terminationGracePeriodSeconds > --grace-period (l7run drains before the SIGKILL)")

    sa = one(objs, "ServiceAccount").get("metadata", {}).get("name")
    check(pod.get("serviceAccountName") == sa, "the pods run as ServiceAccount %s" % sa)
    role, rb = one(objs, "Role"), one(objs, "RoleBinding")
    check(rb.get("roleRef", {}).get("name") == role.get("metadata", {}).get("name") and
          any(s.get("kind") == "ServiceAccount" and s.get("name") == sa for s in rb.get("subjects", [])),
          "the RoleBinding binds the ServiceAccount to the Role")
    rules = role.get("rules", [])
    check(rules and all(set(r.get("verbs", [])) <= {"get", "list", "watch"} for r in rules) and
          any("configmaps" in r.get("resources", []) and cm["metadata"]["name"] in r.get("resourceNames", []) for r in rules),
          "the Role reads only the policy ConfigMap")

    data = cm.get("data", {})
    l7 = [k for k in data if k.endswith(".l7")]
    other = [k for k in data if not (k.endswith(".l7") or k.endswith(".yaml") or k == "import.args")]
    check(len(l7) == 1 and not other, "the ConfigMap holds one policy the agent builds: %s" % sorted(data))
    with tempfile.TemporaryDirectory() as tmp:
        for k, v in data.items():
            with open(os.path.join(tmp, k), "w") as f:
                f.write(v)
        for k in l7:
            r = subprocess.run([L7C, os.path.join(tmp, k), "-o", os.path.join(tmp, "p.o")], capture_output=True, text=True)
            check(r.returncode == 0, "the ConfigMap's %s compiles: %s" % (k, r.stderr.strip()))

    cf = open(os.path.join(DEPLOY, "Containerfile")).read()
    text = re.sub(r"\\\n", " ", cf)
    froms = re.findall(r"^FROM\s+(\S+)", text, re.M)
    check(froms and all(re.fullmatch(r"(docker\.io/library/)?debian:12(\.\d+)?(-slim)?", f) for f in froms),
          "every stage is FROM Debian 12: %s" % froms)
    pkgs = []
    for m in re.finditer(r"apt-get install\s+(.*?)(?:&&|$)", text, re.M):
        pkgs += [p for p in m.group(1).split() if not p.startswith("-")]
    check(len(pkgs) > 10, "the Containerfile installs Debian packages (%d)" % len(pkgs))
    r = subprocess.run(["apt-cache", "show", "--no-all-versions"] + pkgs, capture_output=True, text=True)
    known = set(re.findall(r"^Package: (\S+)$", r.stdout, re.M))   # one call: each takes seconds
    for p in pkgs:
        check(p in known, "Debian 12 has %s" % p)
    check(re.search(r"cmake --build \S+ .*--target l7c l7run", text), "it builds the l7c and l7run targets")
    check(re.search(r"COPY --from=build \S*/driver/l7c \S*/runtime/l7run /usr/local/bin/", text),
          "l7c and l7run go to /usr/local/bin, where the DaemonSet runs them")
    check(L7C.endswith("/driver/l7c") and L7RUN.endswith("/runtime/l7run"), "those are the build's paths of the targets")
    check(flags.get("l7c") == "/usr/local/bin/l7c", "--l7c names the installed compiler")
    return summary("deploy.manifests")


if __name__ == "__main__":
    sys.exit(main())
