#!/usr/bin/env bash
# README's demo: install, build, compile examples/route.l7, load it with l7run (gateway mode),
# send real requests through the kernel data plane on loopback and show what happened.
# Needs root (BPF). Cleans up its processes and pins on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "demo.sh: needs root (installs Debian packages, loads BPF programs); run it in a root shell or with sudo" >&2; exit 2; }
bash scripts/build.sh

work=$(mktemp -d /tmp/l7c-demo.XXXXXX)
pin=/sys/fs/bpf/l7c-demo-$$
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work" "$pin"
}
trap cleanup EXIT

# Free ports for this run, so the demo never collides with anything already listening.
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
front=$(port); api=$(port); web=$(port)

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "compile: build/driver/l7c examples/route.l7"
time build/driver/l7c examples/route.l7 -o "$work/route.o"
build/driver/l7c --emit=ir examples/route.l7 | sed -n '/after pass shadow/,$p' | sed 1d

step "backends: 'api' on :$api and 'web' on :$web (echo the request they receive)"
python3 tests/runtime/echo_backend.py "$api" api >/dev/null 2>&1 & pids+=($!)
python3 tests/runtime/echo_backend.py "$web" web >/dev/null 2>&1 & pids+=($!)

step "load: l7run route.o (service 'frontend' on :$front)"
build/runtime/l7run --listen "0=127.0.0.1:$front" --upstream "0=127.0.0.1:$api" --upstream "1=127.0.0.1:$web" \
  --pin "$pin" --bpf-stats "$work/route.o" >"$work/l7run.log" 2>&1 & pids+=($!)
for _ in $(seq 50); do
  (exec 3<>/dev/tcp/127.0.0.1/$front) 2>/dev/null && break
  sleep 0.1
done

step "requests through the kernel"
req() {  # req DESCRIPTION CURL_ARGS...
  local what=$1; shift
  local out; out=$(curl -s -m 5 -o "$work/body" -w '%{http_code}' "$@" || true)
  local who; who=$(grep -m1 '^backend=' "$work/body" 2>/dev/null | cut -d= -f2 || true)
  local tag; tag=$(grep -im1 '^header=x-l7-route:' "$work/body" 2>/dev/null | cut -d= -f2 | tr -d '\r' || true)
  printf '  %-44s -> %s %s %s\n' "$what" "$out" "${who:+(backend $who)}" "$tag"
}
req "GET /api/users"                  "http://127.0.0.1:$front/api/users"
req "POST /api/users (not GET)"       -X POST -d x "http://127.0.0.1:$front/api/users"
req "GET / "                          "http://127.0.0.1:$front/"
req "GET /x with Host: static.example" -H "Host: static.example" "http://127.0.0.1:$front/x"
req "GET /admin/panel"                "http://127.0.0.1:$front/admin/panel"
req "GET /unknown (no rule)"          "http://127.0.0.1:$front/unknown"
printf '  %-44s -> %s\n' "smuggling: Content-Length + Transfer-Encoding" "$(python3 - "$front" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
s.sendall(b"POST /api/x HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
print(s.recv(200).split(b"\r\n")[0].decode(errors="replace"))
PY
)"

step "kernel statistics: l7run --stats"
build/runtime/l7run --stats "$pin" || true

# ---- mesh mode: the same policy for local service-to-service traffic ----
# Clients and backends in a child cgroup; sock_ops enrolls their sockets, and the SK_MSG
# program routes each request straight into the backend's socket: no proxy hop, no TCP.
for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
wait 2>/dev/null || true
pids=()
front=$(port); api=$(port); web=$(port)
sed -e "s/127.0.0.1:8080/127.0.0.1:$front/" -e "s/127.0.0.1:9001/127.0.0.1:$api/" -e "s/127.0.0.1:9002/127.0.0.1:$web/" \
  examples/route.l7 > "$work/route-mesh.l7"
build/driver/l7c "$work/route-mesh.l7" -o "$work/route-mesh.o"
cg=/sys/fs/cgroup/unified/l7c-demo-$$
mkdir -p "$cg"
trap 'cleanup; sleep 0.2; rmdir "$cg" 2>/dev/null || true' EXIT
# run a command inside the cgroup, as this very process (exec), so its pid is the one we kill
incg() { exec sh -c 'echo $$ > "$0/cgroup.procs"; shift; exec "$@"' "$cg" - "$@"; }

step "mesh mode: l7run --mesh --cgroup $cg (backends and clients inside it)"
incg python3 tests/runtime/echo_backend.py "$api" api >/dev/null 2>&1 & pids+=($!)
incg python3 tests/runtime/echo_backend.py "$web" web >/dev/null 2>&1 & pids+=($!)
sleep 0.5
build/runtime/l7run --mesh --cgroup "$cg" "$work/route-mesh.o" >"$work/mesh.log" 2>&1 & pids+=($!)
for _ in $(seq 100); do
  (exec 3<>/dev/tcp/127.0.0.1/$front) 2>/dev/null && break
  sleep 0.1
done
sleep 0.5   # the pool connections are pre-opened and enrolled
meshreq() {
  local what=$1; shift
  local out; out=$( (incg curl -s -m 5 -o "$work/body" -w '%{http_code}' "$@") || true)
  local who; who=$(grep -m1 '^backend=' "$work/body" 2>/dev/null | cut -d= -f2 || true)
  local tag; tag=$(grep -im1 '^header=x-l7-route:' "$work/body" 2>/dev/null | cut -d= -f2 | tr -d '\r' || true)
  printf '  %-44s -> %s %s %s\n' "$what" "$out" "${who:+(backend $who)}" "$tag"
}
meshreq "GET /api/users"   "http://127.0.0.1:$front/api/users"
meshreq "GET /"            "http://127.0.0.1:$front/"
meshreq "GET /admin/panel" "http://127.0.0.1:$front/admin/panel"
