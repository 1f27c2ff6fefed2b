# Sourced by bench/mesh.sh and bench/mesh_remote.sh: one wrk point, measured the same way in both.
# The caller defines incg (run a command in its cgroup), T, DUR, THREADS and CONNS.

busy() { awk '/^cpu /{print $2+$3+$4+$7+$8; exit}' /proc/stat; }   # user nice system irq softirq
HZ=$(getconf CLK_TCK)

# wrk_point NAME URL [WRK ARGS...]: wrk from the cgroup; req/s, p50, p99, the whole machine's
# busy CPU per request and the non-2xx count, appended to $T/results ("NAME rps p50 p99 cpu_us
# non2xx") and printed; WRK_REQS gets the number of requests (for per-request costs).
wrk_point() {
	local name=$1 url=$2 b0 b1 out rps p50 p99 reqs cpu_us non2xx
	shift 2
	b0=$(busy)
	out=$( (incg timeout $((DUR + 10)) wrk -t"$THREADS" -c"$CONNS" -d"${DUR}s" --latency "$@" "$url") )
	b1=$(busy)
	rps=$(echo "$out" | awk '/Requests\/sec/{print $2}')
	reqs=$(echo "$out" | awk '/requests in/{print $1}')
	p50=$(echo "$out" | awk '$1=="50%"{print $2}')
	p99=$(echo "$out" | awk '$1=="99%"{print $2}')
	non2xx=$(echo "$out" | awk '/Non-2xx/{print $4}')
	cpu_us=$(awk -v b="$((b1 - b0))" -v hz="$HZ" -v r="$reqs" 'BEGIN{printf "%.2f", b / hz * 1e6 / r}')
	WRK_REQS=$reqs
	echo "$name $rps $p50 $p99 $cpu_us ${non2xx:-0}" >> "$T/results"
	printf "%-8s %10s req/s  p50 %-8s p99 %-8s cpu/req %6s us  non-2xx %s\n" "$name" "$rps" "$p50" "$p99" "$cpu_us" "${non2xx:-0}"
}
