#!/bin/bash
# Cross-node mesh benchmark (not a test; issue 15 item 1). Two network namespaces made here, node A
# and node B, joined by a veth pair (10.77.250.1/24, 10.77.250.2/24); nginx on node B; on node A,
# in a child cgroup, wrk and either nothing (direct), l7run --mesh (the kernel redirects each
# request into a pooled connection to B; l7run relays the responses into a socket whose SK_MSG
# frames them into the client) or HAProxy, with the same policy: deny /admin, add a header,
# route everything else to B; and l7run with the same policy whose upstream is a run-time set
# (`endpoints("r")`, --endpoints: the kernel's pick over l7_lb_tab instead of a constant, issue 15
# item 2). Bounded: ROUNDS x 4 modes x DUR seconds, modes alternating within
# each round, medians over rounds. CPU per request = busy CPU time of the whole machine
# (/proc/stat) during the run / requests (wrk, nginx, the proxy and the veth all included).
# usage: bench/mesh_remote.sh [BUILD_DIR]   (env: ROUNDS=3 DUR=5 CONNS=32 THREADS=2)
set -euo pipefail
B=${1:-build}
ROUNDS=${ROUNDS:-3} DUR=${DUR:-5} CONNS=${CONNS:-32} THREADS=${THREADS:-2}
L7C=$B/driver/l7c L7RUN=$B/runtime/l7run
CG=/sys/fs/cgroup/unified/l7rmesh-bench-$$
NSA=l7rb-a-$$ NSB=l7rb-b-$$
A=10.77.250.1 BB=10.77.250.2
T=$(mktemp -d /tmp/l7rmesh-bench.XXXX)
SVC=28180 HAP=28190 NB=28101
PIDS=()

cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	[ -f "$T/nginx.pid" ] && kill "$(cat "$T/nginx.pid")" 2>/dev/null || true
	sleep 0.5
	rmdir "$CG" 2>/dev/null || true
	ip netns del "$NSA" 2>/dev/null || true
	ip netns del "$NSB" 2>/dev/null || true
	rm -rf "$T" "/sys/fs/bpf/l7rmesh-bench-$$"
}
trap cleanup EXIT
mkdir "$CG"
ip netns add "$NSA"
ip netns add "$NSB"
ip link add "l7rba$$" netns "$NSA" type veth peer name "l7rbb$$" netns "$NSB"
ip -n "$NSA" link set lo up
ip -n "$NSB" link set lo up
ip -n "$NSA" addr add $A/24 dev "l7rba$$"
ip -n "$NSB" addr add $BB/24 dev "l7rbb$$"
ip -n "$NSA" link set "l7rba$$" up
ip -n "$NSB" link set "l7rbb$$" up
ona() { nsenter --net="/run/netns/$NSA" -- "$@"; }
incg() { echo $BASHPID > "$CG/cgroup.procs"; exec nsenter --net="/run/netns/$NSA" -- "$@"; }

cat > "$T/nginx.conf" <<EOF
worker_processes 1;
pid $T/nginx.pid;
error_log $T/nginx.err;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 100000000;
  keepalive_timeout 300s;
  server { listen $BB:$NB; location / { return 200 "b\n"; } }
}
EOF
nsenter --net="/run/netns/$NSB" -- nginx -c "$T/nginx.conf" -e "$T/nginx.err" < /dev/null > /dev/null 2>&1
sleep 0.5

cat > "$T/route.l7" <<EOF
import "http.l7i";
service front = 127.0.0.1:$SVC;
upstream r = $BB:$NB;
policy bench (act (HttpRequest request) context ('.*->front')) {
  [Ingress]
  if (starts_with(request.path, "/admin")) { Deny(request, 403); }
  else { SetHeader(request, "x-l7-mesh", "r"); Route(request, r); }
}
EOF
"$L7C" "$T/route.l7" -o "$T/route.o"
sed "s/^upstream r = .*/upstream r = endpoints(\"r\");/" "$T/route.l7" > "$T/set.l7"
"$L7C" "$T/set.l7" -o "$T/set.o"
echo "r $BB:$NB" > "$T/endpoints"

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
  http-request set-header x-l7-mesh r
  default_backend r
backend r
  server s $BB:$NB
EOF

. "$(dirname "$0")/wrk_point.sh"
run_wrk() { wrk_point "$1" "$2"; }   # $1 mode $2 URL

# run_l7c NAME OBJECT [L7RUN OPTIONS...]
run_l7c() {
	local name=$1 obj=$2 p
	shift 2
	# nsenter execs the program (no --fork): $! is l7run's pid
	nsenter --net="/run/netns/$NSA" -- "$L7RUN" --mesh --cgroup "$CG" --pool $((CONNS + 16)) \
		--pin "/sys/fs/bpf/l7rmesh-bench-$$" "$@" "$obj" 2> "$T/l7run.log" &
	p=$!
	PIDS+=("$p")
	for _ in $(seq 50); do ona nc -z 127.0.0.1 $SVC 2>/dev/null && break; sleep 0.1; done
	sleep 0.5
	run_wrk "$name" "http://127.0.0.1:$SVC/x"
	kill "$p"; wait "$p" || true
}

for r in $(seq "$ROUNDS"); do
	echo "round $r"
	run_wrk direct "http://$BB:$NB/x"
	run_l7c l7c "$T/route.o"
	run_l7c l7c-set "$T/set.o" --endpoints "$T/endpoints"
	nsenter --net="/run/netns/$NSA" -- haproxy -db -f "$T/haproxy.cfg" 2> "$T/haproxy.log" &
	p=$!
	PIDS+=("$p")
	sleep 0.5
	run_wrk haproxy "http://127.0.0.1:$HAP/x"
	kill "$p"; wait "$p" || true; sleep 0.3
done

echo
echo "medians over $ROUNDS rounds (wrk -t$THREADS -c$CONNS -d${DUR}s, node A -> node B over a veth):"
for m in direct l7c l7c-set haproxy; do
	awk -v m="$m" '$1==m' "$T/results" | sort -k2 -n | awk -v n="$ROUNDS" '{a[NR]=$0} END{print a[int((n+1)/2)]}'
done | awk 'NR==1{base=$2} {printf "%-8s %10.0f req/s (%.2fx direct)  p50 %-8s p99 %-8s cpu/req %s us  non-2xx %s\n", $1, $2, $2/base, $3, $4, $5, $6; r[$1]=$2}
	END{ if (r["haproxy"] > 0) printf "l7c / haproxy = %.2fx\n", r["l7c"]/r["haproxy"];
	     if (r["l7c"] > 0) printf "l7c-set / l7c = %.2fx\n", r["l7c-set"]/r["l7c"] }'
