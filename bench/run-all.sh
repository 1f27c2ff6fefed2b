#!/usr/bin/env bash
# One command for every benchmark of issue 7: builds l7c/l7run, runs l7c (gateway and mesh mode),
# HAProxy, nginx and direct-to-backend side by side on loopback, writes docs/performance.md and
# its plots (docs/perf/).
#   sudo bench/run-all.sh [--quick] [--worktree] [--build DIR] [perf.py options...]
#     --quick     1 round of 2 s per point, fewer sweep points: < 3 minutes, indicative only
#     --worktree  build the working tree as it is (default: the committed HEAD, so that others'
#                 unfinished edits in the shared tree cannot break or skew the run)
#     --build DIR use an existing build directory, do not build
# Needs root (BPF, cgroup), and scripts/install-deps.sh's packages.
# The per-example cost table (verifier processed insns, data-plane ns per request of every
# examples/*.l7 in gateway and mesh mode) is a separate run: sudo bench/examples.py [--quick]
# (writes docs/examples-cost.md; see docs/performance.md, *Per-example cost*).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd); REPO=$(dirname "$HERE")
QUICK=(); WORKTREE=0; BUILD=; PASS=()
while [ $# -gt 0 ]; do
	case $1 in
		--quick) QUICK=(--quick) ;;
		--worktree) WORKTREE=1 ;;
		--build) BUILD=$2; shift ;;
		*) PASS+=("$1") ;;
	esac
	shift
done
for t in wrk haproxy nginx gnuplot bpftool; do
	command -v "$t" >/dev/null || { echo "run-all: $t missing: run scripts/install-deps.sh" >&2; exit 2; }
done
[ -f /usr/lib/nginx/modules/ngx_http_js_module.so ] || { echo "run-all: njs missing (libnginx-mod-http-js): run scripts/install-deps.sh" >&2; exit 2; }
mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf

COMMIT=$(git -C "$REPO" rev-parse --short HEAD)
if [ -z "$BUILD" ]; then
	BUILD=/tmp/l7perf-build-$$
	if [ $WORKTREE = 1 ]; then SRC=$REPO; SRCDESC="working tree of $COMMIT"
	else
		# a private copy of HEAD: the shared tree may hold others' half-done edits
		SRC=/tmp/l7perf-src-$$; mkdir -p "$SRC"; git -C "$REPO" archive HEAD | tar -x -C "$SRC"
		SRCDESC="committed HEAD"
	fi
	CLEAN=("$BUILD"); [ "$SRC" != "$REPO" ] && CLEAN+=("$SRC")
	trap 'rm -rf "${CLEAN[@]}"' EXIT
	echo "run-all: building $SRCDESC ($COMMIT) in $BUILD"
	cmake -S "$SRC" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
	make -C "$BUILD" -j"$(nproc)" l7c l7run >/dev/null
else
	SRCDESC="build dir $BUILD"
fi
python3 "$HERE/perf.py" --build "$BUILD" --src "${SRC:-$REPO}" --out "$REPO/docs/performance.md" "${QUICK[@]}" \
	--commit "$COMMIT" --source "$SRCDESC" --cmdline "bench/run-all.sh${QUICK:+ --quick}" "${PASS[@]}"
