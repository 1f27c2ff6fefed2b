#!/bin/sh
# manifest_seeds.sh L7C OBJCOPY OUT POLICY.l7...: the manifest section of each policy's object
# as a seed of fuzz_manifest, written at test time so that the seeds are of this l7c's version.
set -e
l7c=$1 objcopy=$2 out=$3
shift 3
rm -rf "$out" && mkdir -p "$out"
for src; do
	name=$(basename "$(dirname "$src")")-$(basename "$src" .l7)
	"$l7c" -O1 "$src" -o "$out/$name.o" 2>/dev/null
	"$objcopy" --dump-section l7.manifest="$out/$name.manifest" "$out/$name.o"
	rm "$out/$name.o"
done
ls "$out" | wc -l
