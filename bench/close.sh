#!/usr/bin/env bash
# Benchmark (not a test): one request per connection (every request says Connection: close, so
# wrk opens a new connection for each) through l7run's gateway mode, HAProxy and straight to the
# backend, in one run, taking turns. What a load of short connections costs: a new client's
# first request is decided and forwarded in the kernel only if an idle pool connection is there
# for it (l7_idle; --pool-idle), else l7run forwards it (a pool miss).
#   bench/close.sh BUILD_DIR [BUILD_DIR...]     one l7run per build dir (before/after in one run)
#   env: SECS (default 10) per point, CONNS (16) concurrent connections, ROUNDS (2)
# Prints req/s (median of the rounds) and CPU per request: the proxy's own (l7run's process plus
# the run time of its BPF programs; HAProxy's process) and the whole machine's (/proc/stat busy
# time over requests: wrk and nginx included, and whatever else runs: indicative on a shared
# machine), each as a ratio to HAProxy and to direct; and, per l7run, the data plane's counters.
# Needs root (BPF), nginx, haproxy and wrk. Everything it starts it stops, by pid.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: bench/close.sh BUILD_DIR [BUILD_DIR...]" >&2; exit 2; }
SECS=${SECS:-10}; CONNS=${CONNS:-16}; ROUNDS=${ROUNDS:-2}
HERE=$(cd "$(dirname "$0")" && pwd)
TMP=$(mktemp -d /tmp/l7close.XXXXXX)
BASE=$((24000 + ($$ % 800) * 10)); B1=$BASE; B2=$((BASE + 1)); HAP=$((BASE + 2))
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$TMP"; }
trap cleanup EXIT
mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf
sysctl -q kernel.bpf_stats_enabled=1

cat > "$TMP/nginx.conf" <<CONF
daemon off; worker_processes 1; pid $TMP/nginx.pid; error_log $TMP/nginx.err;
events { worker_connections 4096; }
http { access_log off; keepalive_requests 1000000; keepalive_timeout 60s;
  server { listen 127.0.0.1:$B1; listen 127.0.0.1:$B2; location / { return 200 "hello from nginx\n"; } } }
CONF
nginx -c "$TMP/nginx.conf" & pids+=($!)
# HAProxy doing what tests/runtime/gw_test.l7 does for /a, keeping its server connections
# (http-reuse safe, its default) while every client connection closes
cat > "$TMP/haproxy.cfg" <<CONF
global
  nbthread $(nproc)
defaults
  mode http
  option http-keep-alive
  timeout connect 5s
  timeout client 60s
  timeout server 60s
frontend f
  bind 127.0.0.1:$HAP
  http-request deny deny_status 403 if { path_beg /deny }
  http-request set-header x-l7 yes if { path_beg /a } || { path_beg /b }
  use_backend u0 if { path_beg /a }
  use_backend u1 if { path_beg /b }
backend u0
  server s 127.0.0.1:$B1
backend u1
  server s 127.0.0.1:$B2
CONF
haproxy -db -f "$TMP/haproxy.cfg" 2>"$TMP/haproxy.err" & HPID=$!; pids+=($HPID)

names=(); ports=(); l7pids=(); l7pins=()
n=0
for b in "$@"; do
	n=$((n + 1)); port=$((BASE + 2 + n)); pin=/sys/fs/bpf/l7close-$$-$n
	"$b/driver/l7c" "$HERE/../tests/runtime/gw_test.l7" -o "$TMP/gw$n.o"
	"$b/runtime/l7run" --pin "$pin" --listen 127.0.0.1:$port --upstream 0=127.0.0.1:$B1 \
		--upstream 1=127.0.0.1:$B2 "$TMP/gw$n.o" 2>"$TMP/l7run$n.log" & p=$!; pids+=($p)
	names+=("l7run#$n"); ports+=($port); l7pids+=($p); l7pins+=("$pin")
done
for p in $HAP "${ports[@]}"; do
	for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$p) 2>/dev/null && break; sleep 0.1; done
done

busy() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8}' /proc/stat; }   # user nice system irq softirq
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
bpf_ns() { "$1/runtime/l7run" --stats "$2" | awk '/^prog/ {t += $6} END {print t + 0}'; }
stat_of() { "$1/runtime/l7run" --stats "$2" | awk -v k="$3" '$1 == "stat" && $2 == k {print $3}'; }
run() {  # port -> requests (wrk's count of completed responses) and req/s
	wrk -t2 -c"$CONNS" -d"${SECS}s" -H "Connection: close" "http://127.0.0.1:$1/a/close" > "$TMP/wrk.out"
	awk '/requests in/ {r = $1} /^Requests\/sec/ {s = $2} /Non-2xx/ {bad = $NF} END {print r, s, bad + 0}' "$TMP/wrk.out"
}
# one point: label port own-cpu-ticks-fn ... -> appends "req/s own_ns machine_ns" to $TMP/<label>
point() {
	local label=$1 port=$2 pid=$3 build=${4:-} pin=${5:-} k0 k1 m0 m1 b0=0 b1=0 r s bad
	k0=$([ -n "$pid" ] && ticks "$pid" || echo 0); m0=$(busy)
	[ -n "$build" ] && b0=$(bpf_ns "$build" "$pin")
	read -r r s bad < <(run "$port")
	k1=$([ -n "$pid" ] && ticks "$pid" || echo 0); m1=$(busy)
	[ -n "$build" ] && b1=$(bpf_ns "$build" "$pin")
	[ "$bad" = 0 ] || echo "close: $label: $bad responses were not 2xx" >&2
	awk -v r="$r" -v s="$s" -v k="$((k1 - k0))" -v m="$((m1 - m0))" -v b="$((b1 - b0))" -v hz="$(getconf CLK_TCK)" \
		'BEGIN { printf "%s %.0f %.0f\n", s, (k * 1e9 / hz + b) / r, m * 1e9 / hz / r }' >> "$TMP/$label"
}

# warm-up: the pools fill (l7run's slots, HAProxy's server connections)
for p in $HAP "${ports[@]}"; do wrk -t1 -c"$CONNS" -d1s -H "Connection: close" "http://127.0.0.1:$p/a/w" > /dev/null; done
declare -A s0
for i in "${!ports[@]}"; do
	b=${*:$((i + 1)):1}
	for k in forwarded pool_miss pool_claims passed_to_l7run requests; do s0[$i.$k]=$(stat_of "$b" "${l7pins[$i]}" "$k"); done
done
for _ in $(seq "$ROUNDS"); do
	point direct $B1 ""
	point haproxy $HAP $HPID
	for i in "${!ports[@]}"; do point "l7run$i" "${ports[$i]}" "${l7pids[$i]}" "${*:$((i + 1)):1}" "${l7pins[$i]}"; done
done

med() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
col() { cut -d' ' -f"$2" "$TMP/$1" | med; }
hr=$(col haproxy 1); dr=$(col direct 1); hc=$(col haproxy 2); hm=$(col haproxy 3); dm=$(col direct 3)
echo "bench/close.sh: $ROUNDS rounds x ${SECS}s, wrk -t2 -c$CONNS -H 'Connection: close', loopback, nginx backend, $(nproc) CPUs"
printf "%-10s %10s %9s %9s %12s %9s %9s %12s\n" "" "req/s" "÷haproxy" "÷direct" "own ns/req" "÷haproxy" "all ns/req" "÷haproxy"
printf "%-10s %10.0f %9s %9.2f %12s %9s %12.0f %9.2f\n" direct "$dr" "$(awk -v a="$dr" -v b="$hr" 'BEGIN{printf "%.2f", a/b}')" 1 "-" "-" "$dm" "$(awk -v a="$dm" -v b="$hm" 'BEGIN{print a/b}')"
printf "%-10s %10.0f %9.2f %9.2f %12.0f %9.2f %12.0f %9.2f\n" haproxy "$hr" 1 "$(awk -v a="$hr" -v b="$dr" 'BEGIN{print a/b}')" "$hc" 1 "$hm" 1
for i in "${!ports[@]}"; do
	r=$(col "l7run$i" 1); c=$(col "l7run$i" 2); m=$(col "l7run$i" 3)
	printf "%-10s %10.0f %9.2f %9.2f %12.0f %9.2f %12.0f %9.2f\n" "${names[$i]}" "$r" \
		"$(awk -v a="$r" -v b="$hr" 'BEGIN{print a/b}')" "$(awk -v a="$r" -v b="$dr" 'BEGIN{print a/b}')" \
		"$c" "$(awk -v a="$c" -v b="$hc" 'BEGIN{print a/b}')" "$m" "$(awk -v a="$m" -v b="$hm" 'BEGIN{print a/b}')"
done
for i in "${!ports[@]}"; do
	b=${*:$((i + 1)):1}; line="${names[$i]} ($b):"
	for k in requests forwarded pool_claims pool_miss passed_to_l7run; do
		v=$(stat_of "$b" "${l7pins[$i]}" "$k"); [ -n "$v" ] && line+=" $k +$((v - ${s0[$i.$k]:-0}))"
	done
	echo "$line"
done
