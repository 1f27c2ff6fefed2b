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
# Debian's own tools first (python3 that sees the python3-* packages), as on a fresh machine.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH
ctest --output-on-failure -j"${L7C_TEST_JOBS:-2}" --timeout 900 "$@"
