#!/usr/bin/env bash
# README's test command: install, build, run every test (kernel tests included; run as root).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then
  echo "test.sh: needs root (it installs Debian packages, and the kernel tests load BPF programs);" \
       "run it in a root shell or with sudo" >&2
  exit 2
fi
bash scripts/build.sh
cd build
# Debian's own tools first (python3 that sees the python3-* packages), as on a fresh machine.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH
corpus=${L7_CORPUS:-$(cd ../.. && pwd)/shared/corpus}
if [ ! -f "$corpus/http/index.tsv" ]; then
  echo "test.sh: no conformance corpus at $corpus: the tests labelled 'corpus' are skipped (set L7_CORPUS)"
fi
ctest --output-on-failure -j"${L7C_TEST_JOBS:-2}" --timeout 900 "$@"
