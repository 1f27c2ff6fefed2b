#!/usr/bin/env bash
# Regenerates dsl/src/parser.c from dsl/grammar.js. Only needed after a grammar change:
# the generated parser is committed, so builds and CI never run this.
#
# Debian 12 has no tree-sitter CLI, and npm's tree-sitter-cli downloads a binary from a host we
# cannot reach. Debian 13 ships tree-sitter-cli 0.22.6; we fetch it with a private apt
# configuration (the system's sources stay untouched) and run it through trixie's own loader.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cache=${L7C_TS_CACHE:-/var/cache/l7c-tree-sitter}
root=$cache/root
ts="$root/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 --library-path $root/usr/lib/x86_64-linux-gnu $root/usr/bin/tree-sitter"

if [ ! -x "$root/usr/bin/tree-sitter" ]; then
  mkdir -p "$cache/lists/partial" "$cache/debs"
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main" \
    > "$cache/sources.list"
  apt_opts=(-o Dir::Etc::sourcelist="$cache/sources.list" -o Dir::Etc::sourceparts=- \
            -o Dir::State::Lists="$cache/lists" -o Dir::Cache::archives="$cache/debs")
  apt-get "${apt_opts[@]}" update -qq
  (cd "$cache/debs" && apt-get "${apt_opts[@]}" download tree-sitter-cli libc6 libgcc-s1)
  for deb in "$cache"/debs/*.deb; do dpkg -x "$deb" "$root"; done
fi

cd "$here/dsl"
$ts generate --abi 14 --no-bindings
echo "gen-parser: dsl/src/parser.c regenerated"
