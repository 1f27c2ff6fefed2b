#!/usr/bin/env bash
# README's test command: install, build, run every test (kernel tests included; run as root).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
if [ "$(id -u)" != 0 ]; then
  echo "test.sh: the kernel tests load BPF programs and need root" >&2
  exit 2
fi
cd build
ctest --output-on-failure -j"${L7C_TEST_JOBS:-2}" --timeout 900 "$@"
