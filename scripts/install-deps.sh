#!/usr/bin/env bash
# Installs every Debian 12 package that building, testing, the demo and the benchmarks need.
# Idempotent: safe to run on every CI start. Needs root (apt-get).
set -euo pipefail

PKGS=(
  # build
  build-essential cmake pkg-config
  llvm-19-dev clang-19 libclang-rt-19-dev
  libbpf-dev libelf-dev zlib1g-dev libzstd-dev
  libtree-sitter-dev libcmark-dev cmark
  # tests (Debian's python3 at /usr/bin/python3 sees the python3-* packages)
  libcriterion-dev bpftool iproute2 curl python3 procps
  prometheus python3-prometheus-client python3-yaml libyaml-dev
  nghttp2-client nghttp2-server python3-h2
  python3-grpcio python3-grpc-tools protobuf-compiler
  # benchmarks (bench/)
  wrk haproxy nginx-light libnginx-mod-http-js gnuplot-nox
)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
  # nginx/haproxy are for bench/ only, prometheus for promtool: their packages start services we
  # do not want running.
  for svc in nginx haproxy prometheus prometheus-node-exporter; do
    if command -v systemctl >/dev/null 2>&1; then systemctl disable --now "$svc" >/dev/null 2>&1 || true; fi
  done
else
  echo "install-deps: all ${#PKGS[@]} packages present"
fi

# bpffs for pinning, and BPF run-time statistics for --stats and bench/.
mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf
