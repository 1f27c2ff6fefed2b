#!/bin/sh
# Runs a test that needs the external conformance corpus (llhttp cases, smuggling cases, hash
# vectors): $L7_CORPUS, or <clone>/../shared/corpus. A clone alone has no corpus: then the test
# is skipped with a line naming the path (ctest: SKIP_RETURN_CODE 77, label "corpus"), except
# under CI=true, where a missing corpus is a failure.
#   usage: need_corpus.sh DEFAULT_DIR COMMAND [ARGS...]
default=$1; shift
dir=${L7_CORPUS:-$default}
if [ ! -f "$dir/http/index.tsv" ] || [ ! -f "$dir/smuggling/index.tsv" ] || [ ! -d "$dir/vectors" ]; then
  if [ "${CI:-}" = true ]; then
    echo "FAILED: the conformance corpus is missing at $dir (CI=true requires it; set L7_CORPUS)" >&2
    exit 1
  fi
  echo "SKIPPED: no conformance corpus at $dir (set L7_CORPUS to run this test)"
  exit 77
fi
L7_CORPUS=$dir exec "$@"
