#!/bin/bash
# Mesh-mode benchmark (not a test). Loopback only, bounded: ROUNDS x 4 modes x DUR seconds.
#   plain    wrk -> nginx, no programs
#   pass     wrk -> service address -> nginx through l7run --mesh, policy: Route everything
#   route    same, policy: route /a /b to two nginx servers + SetHeader (tests/mesh policy)
#   haproxy  wrk -> HAProxy with the same routes and header -> nginx
# Modes alternate within each round; medians over rounds. CPU per request = busy CPU time of the
# whole machine (/proc/stat) during the run / requests (includes wrk, nginx and the proxy).
# usage: bench/mesh.sh [BUILD_DIR]   (env: ROUNDS=3 DUR=5 CONNS=32 THREADS=2)
set -euo pipefail
B=${1:-/tmp/b-mesh}
ROUNDS=${ROUNDS:-3} DUR=${DUR:-5} CONNS=${CONNS:-32} THREADS=${THREADS:-2}
L7C=$B/driver/l7c L7RUN=$B/runtime/l7run
CG=/sys/fs/cgroup/unified/l7mesh-bench-$$
T=$(mktemp -d /tmp/l7mesh-bench.XXXX)
SVC=28080 HAP=28090 NA=28001 NB=28002
PIDS=()

cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	[ -f "$T/nginx.pid" ] && kill "$(cat "$T/nginx.pid")" 2>/dev/null || true
	sleep 0.5
	rmdir "$CG" 2>/dev/null || true
	rm -rf "$T"
}
trap cleanup EXIT
mkdir "$CG"
incg() { echo $BASHPID > "$CG/cgroup.procs"; exec "$@"; }

cat > "$T/nginx.conf" <<EOF
worker_processes 1;
pid $T/nginx.pid;
error_log $T/nginx.err;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 100000000;
  keepalive_timeout 300s;
  server { listen 127.0.0.1:$NA; location / { return 200 "a\n"; } }
  server { listen 127.0.0.1:$NB; location / { return 200 "b\n"; } }
}
EOF
(incg nginx -c "$T/nginx.conf" -e "$T/nginx.err")
sleep 0.5

policy() {   # $1 = body of the policy
	cat <<EOF
import "http.l7i";
service front = 127.0.0.1:$SVC;
upstream a = 127.0.0.1:$NA;
upstream b = 127.0.0.1:$NB;
policy bench (act (HttpRequest request) context ('.*->front')) {
  [Ingress]
  $1
}
EOF
}
policy 'Route(request, a);' > "$T/pass.l7"
policy 'if (starts_with(request.path, "/admin")) { Deny(request, 403); }
  else if (starts_with(request.path, "/a")) { SetHeader(request, "x-l7-mesh", "a"); Route(request, a); }
  else { Route(request, b); }' > "$T/route.l7"
"$L7C" "$T/pass.l7" -o "$T/pass.o"
"$L7C" "$T/route.l7" -o "$T/route.o"

cat > "$T/haproxy.cfg" <<EOF
global
  nbthread 1
defaults
  mode http
  timeout connect 5s
  timeout client 60s
  timeout server 60s
  option http-keep-alive
frontend f
  bind 127.0.0.1:$HAP
  http-request deny deny_status 403 if { path_beg /admin }
  http-request set-header x-l7-mesh a if { path_beg /a }
  use_backend a if { path_beg /a }
  default_backend b
backend a
  server s 127.0.0.1:$NA
backend b
  server s 127.0.0.1:$NB
EOF

# wrk alternates /a and /b per request
cat > "$T/ab.lua" <<'EOF'
local n = 0
request = function()
  n = n + 1
  return wrk.format("GET", (n % 2 == 0) and "/a/x" or "/b/y")
end
EOF

# one wrk point through the cgroup, alternating /a and /b (ab.lua)
. "$(dirname "$0")/wrk_point.sh"
run_wrk() { wrk_point "$1" "http://127.0.0.1:$2/" -s "$T/ab.lua"; }   # $1 mode $2 port

with_mesh() {   # $1 mode $2 object
	"$L7RUN" --mesh --cgroup "$CG" --pool 48 --pin "/sys/fs/bpf/l7mesh-bench-$$" "$2" 2> "$T/l7run.log" &
	local p=$!
	PIDS+=("$p")
	for _ in $(seq 50); do nc -z 127.0.0.1 $SVC 2>/dev/null && break; sleep 0.1; done
	sleep 0.3
	run_wrk "$1" $SVC
	kill "$p"; wait "$p" || true
}

for r in $(seq "$ROUNDS"); do
	echo "round $r"
	run_wrk plain $NA
	with_mesh pass "$T/pass.o"
	with_mesh route "$T/route.o"
	(incg haproxy -f "$T/haproxy.cfg" -D -p "$T/haproxy.pid")
	sleep 0.3
	run_wrk haproxy $HAP
	kill "$(cat "$T/haproxy.pid")"; sleep 0.3
done

echo
echo "medians over $ROUNDS rounds (wrk -t$THREADS -c$CONNS -d${DUR}s, alternating /a /b):"
for m in plain pass route haproxy; do
	awk -v m="$m" '$1==m' "$T/results" | sort -k2 -n | awk -v n="$ROUNDS" '{a[NR]=$0} END{print a[int((n+1)/2)]}'
done | awk 'NR==1{base=$2} {printf "%-8s %10.0f req/s (%.2fx plain)  p50 %-8s p99 %-8s cpu/req %s us  non-2xx %s\n", $1, $2, $2/base, $3, $4, $5, $6; r[$1]=$2}
	END{ if (r["haproxy"] > 0) printf "route / haproxy = %.2fx\n", r["route"]/r["haproxy"] }'
