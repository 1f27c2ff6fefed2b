#!/bin/sh
# run_fuzzer.sh FUZZER SEEDS WORK SECONDS: fuzz for SECONDS from the committed seeds; new
# corpus entries and crash files go to WORK (the build tree). Non-zero exit on any crash.
set -e
fuzzer=$1 seeds=$2 work=$3 secs=$4
rm -rf "$work" && mkdir -p "$work/corpus" "$work/artifacts"
"$fuzzer" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
	-artifact_prefix="$work/artifacts/" "$work/corpus" "$seeds" 2>"$work/log" || {
	tail -40 "$work/log"; echo "fuzzer failed: crash input in $work/artifacts/"; exit 1; }
grep -E "stat::number_of_executed_units|stat::average_exec_per_sec" "$work/log"; grep "cov:" "$work/log" | tail -1
