#!/bin/bash
# Mesh-mode benchmark (not a test). Loopback only, bounded: ROUNDS x 4 modes x DUR seconds.
#   plain    wrk -> nginx, no programs
#   pass     wrk -> service address -> nginx through l7run --mesh, policy: Route everything
#   route    same, policy: route /a /b to two nginx servers + SetHeader (tests/mesh policy)
#   haproxy  wrk -> HAProxy with the same routes and header -> nginx
#   plain1   wrk -c1 -t1 -> nginx: the latency of one connection, direct
#   route1   the same through l7run --mesh with the route policy
# With BASE_BUILD_DIR, pass-base, route-base and route1-base run the other build's l7c and l7run
# in the same rounds (before/after in one run).
# Modes alternate within each round; medians over rounds. CPU per request = busy CPU time of the
# whole machine (/proc/stat) during the run / requests (includes wrk, nginx and the proxy).
# For the mesh modes, l7run runs with --bpf-stats: each program's runs per request, ns per run
# and ns per request (bpf_stats run_time_ns / run_cnt), and l7run's own CPU per request.
# usage: bench/mesh.sh [BUILD_DIR [BASE_BUILD_DIR]]   (env: ROUNDS=3 DUR=5 CONNS=32 THREADS=2)
set -euo pipefail
B=${1:-/tmp/b-mesh}
BASE=${2:-}
ROUNDS=${ROUNDS:-3} DUR=${DUR:-5} CONNS=${CONNS:-32} THREADS=${THREADS:-2}
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
for v in "" ${BASE:+-base}; do   # each build compiles its own objects
	dir=$B; [ -n "$v" ] && dir=$BASE
	"$dir/driver/l7c" "$T/pass.l7" -o "$T/pass$v.o"
	"$dir/driver/l7c" "$T/route.l7" -o "$T/route$v.o"
done

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
run_wrk() {   # $1 mode $2 port; a mode ending in 1 (plain1, route1...) runs one connection
	case $1 in
	*1|*1-base) THREADS=1 CONNS=1 wrk_point "$1" "http://127.0.0.1:$2/" -s "$T/ab.lua" ;;
	*) wrk_point "$1" "http://127.0.0.1:$2/" -s "$T/ab.lua" ;;
	esac
}

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }   # utime + stime

with_mesh() {   # $1 mode $2 object $3 build dir
	local pin="/sys/fs/bpf/l7mesh-bench-$$" t0 t1
	"$3/runtime/l7run" --mesh --bpf-stats --cgroup "$CG" --pool 48 --pin "$pin" "$2" 2> "$T/l7run.log" &
	local p=$!
	PIDS+=("$p")
	for _ in $(seq 50); do nc -z 127.0.0.1 $SVC 2>/dev/null && break; sleep 0.1; done
	sleep 0.3
	t0=$(cpu_ticks "$p")
	run_wrk "$1" $SVC
	t1=$(cpu_ticks "$p")
	# per program: runs per request, ns per run, ns per request; then l7run's CPU per request
	"$3/runtime/l7run" --stats "$pin" | awk -v m="$1" -v n="$WRK_REQS" -v rt="$(( (t1 - t0) * 1000000000 / HZ ))" '
		$1 == "prog" && $4 > 0 { printf "%s %s %.2f %.0f %.0f\n", m, $2, $4 / n, $6 / $4, $6 / n; bpf += $6 / n }
		END { printf "%s bpf-total - - %.0f\n%s l7run-cpu - - %.0f\n", m, bpf, m, rt / n }' >> "$T/progs"
	kill "$p"; wait "$p" || true
}

for r in $(seq "$ROUNDS"); do
	echo "round $r"
	run_wrk plain $NA
	run_wrk plain1 $NA
	with_mesh pass "$T/pass.o" "$B"
	with_mesh route "$T/route.o" "$B"
	with_mesh route1 "$T/route.o" "$B"
	if [ -n "$BASE" ]; then
		with_mesh pass-base "$T/pass-base.o" "$BASE"
		with_mesh route-base "$T/route-base.o" "$BASE"
		with_mesh route1-base "$T/route-base.o" "$BASE"
	fi
	(incg haproxy -f "$T/haproxy.cfg" -D -p "$T/haproxy.pid")
	sleep 0.3
	run_wrk haproxy $HAP
	kill "$(cat "$T/haproxy.pid")"; sleep 0.3
done

echo
echo "medians over $ROUNDS rounds (wrk -t$THREADS -c$CONNS -d${DUR}s, alternating /a /b):"
MODES="plain pass route haproxy plain1 route1${BASE:+ pass-base route-base route1-base}"
for m in $MODES; do
	awk -v m="$m" '$1==m' "$T/results" | sort -k2 -n | awk -v n="$ROUNDS" '{a[NR]=$0} END{print a[int((n+1)/2)]}'
done | awk '
	function us(t) { return t ~ /ms$/ ? t * 1000 : t ~ /us$/ ? t + 0 : t * 1e6 }   # wrk latency units
	NR==1{base=$2} {printf "%-12s %10.0f req/s (%.2fx plain)  p50 %-8s p99 %-8s cpu/req %s us  non-2xx %s\n", $1, $2, $2/base, $3, $4, $5, $6; r[$1]=$2; p[$1]=us($3)}
	END{ if (r["haproxy"] > 0) printf "route / haproxy = %.2fx\n", r["route"]/r["haproxy"]
	     printf "route / pass = %.2f\n", r["route"]/r["pass"]
	     printf "p50 at 1 connection, mesh route / direct = %.2f\n", p["route1"]/p["plain1"]
	     if (r["route-base"] > 0) printf "base: route / pass = %.2f, p50 route1 / plain1 = %.2f; route / route-base = %.2f\n",
		r["route-base"]/r["pass-base"], p["route1-base"]/p["plain1"], r["route"]/r["route-base"] }'
echo
echo "programs (medians over rounds): runs/request, ns/run, ns/request"
med() { sort -g | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }   # median of a column
awk '!seen[$1" "$2]++ {print $1, $2}' "$T/progs" | while read -r m prog; do
	col() { awk -v m="$m" -v p="$prog" -v c="$1" '$1==m && $2==p {print $c}' "$T/progs" | med; }
	printf "%-12s %-22s %6s runs/req %6s ns/run %6s ns/req\n" "$m" "$prog" "$(col 3)" "$(col 4)" "$(col 5)"
done
