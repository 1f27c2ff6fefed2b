#!/usr/bin/env bash
# Benchmark (not a test): wrk through l7run (kernel path) vs wrk direct to the backend, in the
# same run, alternating, on loopback. Prints median req/s and p99 of each, the data plane's
# ns per request (run_time_ns / run_cnt of the programs), and l7run's CPU per request.
#   bench/gateway.sh BUILD_DIR [RUNS] [SECONDS] [CONNECTIONS]
# Needs root (BPF), nginx and wrk. Everything it starts it stops, by pid.
set -euo pipefail
BUILD=${1:?usage: bench/gateway.sh BUILD_DIR [RUNS] [SECONDS] [CONNECTIONS]}
RUNS=${2:-5}; SECS=${3:-5}; CONNS=${4:-32}
HERE=$(cd "$(dirname "$0")" && pwd)
TMP=$(mktemp -d /tmp/l7bench.XXXXXX)
BASE=$((21000 + ($$ % 1000) * 10)); FRONT=$BASE; B1=$((BASE + 1)); B2=$((BASE + 2))
PIN=/sys/fs/bpf/l7bench-$$
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$TMP"; }
trap cleanup EXIT

# nginx as the backend: fast enough that the gateway, not the backend, is what differs.
cat > "$TMP/nginx.conf" <<CONF
daemon off; worker_processes 1; pid $TMP/nginx.pid; error_log $TMP/nginx.err;
events { worker_connections 4096; }
http { access_log off; keepalive_requests 1000000; keepalive_timeout 60s;
  server { listen 127.0.0.1:$B1; listen 127.0.0.1:$B2; location / { return 200 "hello from nginx\n"; } } }
CONF
nginx -c "$TMP/nginx.conf" & pids+=($!)
"$BUILD/driver/l7c" "$HERE/../tests/runtime/gw_test.l7" -o "$TMP/gw.o"
"$BUILD/runtime/l7run" --bpf-stats --pin "$PIN" --listen 127.0.0.1:$FRONT \
    --upstream 0=127.0.0.1:$B1 --upstream 1=127.0.0.1:$B2 "$TMP/gw.o" 2>"$TMP/l7run.log" & L7PID=$!; pids+=($L7PID)
for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$FRONT) 2>/dev/null && break; sleep 0.1; done

run() {  # $1 port -> "req/s p99_ms"
	wrk -t2 -c"$CONNS" -d"${SECS}s" --latency "http://127.0.0.1:$1/a/bench" > "$TMP/wrk.out"
	local rps p99
	rps=$(awk '/^Requests\/sec/ {print $2}' "$TMP/wrk.out")
	p99=$(awk '$1 == "99%" {v=$2; if (v ~ /us$/) {sub(/us/,"",v); v/=1000} else if (v ~ /ms$/) sub(/ms/,"",v); else if (v ~ /s$/) {sub(/s/,"",v); v*=1000}; print v}' "$TMP/wrk.out")
	echo "$rps $p99"
}
cpu_ticks() { awk '{print $14 + $15}' /proc/$L7PID/stat; }
prog_stats() { "$BUILD/runtime/l7run" --stats "$PIN" | awk '/^prog/ {c += $4; t += $6} END {print c, t}'; }
reqs() { "$BUILD/runtime/l7run" --stats "$PIN" | awk '/^stat requests/ {print $3}'; }

run $FRONT > /dev/null   # warm-up: fills the pool
read -r c0 t0 < <(prog_stats); r0=$(reqs); k0=$(cpu_ticks)
: > "$TMP/gw"; : > "$TMP/direct"
for i in $(seq "$RUNS"); do
	run $FRONT >> "$TMP/gw"
	run $B1 >> "$TMP/direct"
done
read -r c1 t1 < <(prog_stats); r1=$(reqs); k1=$(cpu_ticks)
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
hz=$(getconf CLK_TCK)
echo "runs=$RUNS x ${SECS}s, wrk -t2 -c$CONNS, loopback, nginx backend"
printf "through l7run : median %10.0f req/s   p99 %6.2f ms\n" "$(cut -d' ' -f1 "$TMP/gw" | median)" "$(cut -d' ' -f2 "$TMP/gw" | median)"
printf "direct        : median %10.0f req/s   p99 %6.2f ms\n" "$(cut -d' ' -f1 "$TMP/direct" | median)" "$(cut -d' ' -f2 "$TMP/direct" | median)"
awk -v c="$((c1 - c0))" -v t="$((t1 - t0))" -v r="$((r1 - r0))" -v k="$((k1 - k0))" -v hz="$hz" 'BEGIN {
	printf "data plane    : %.0f ns per request (all programs, %d runs, %d requests)\n", r ? t / r : 0, c, r
	printf "l7run CPU     : %.1f ns per request (%d ticks)\n", r ? k * 1e9 / hz / r : 0, k }'
"$BUILD/runtime/l7run" --stats "$PIN" | grep '^prog'
