#!/bin/sh
# l7c import's command line: exit status (0 done, 1 errors in the input, 2 usage or I/O), what
# the options change in the output, and that docs/import.md's field table is the one the
# importer checks against (`l7c import --fields`).
# Usage: cli.sh L7C SOURCE_DIR WORK_DIR
set -u
l7c=$1 src=$2 work=$3
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 2
fail=0
ok() { echo "PASS $1"; }
bad() { echo "FAIL $1"; fail=1; }
expect() {   # expect STATUS DESCRIPTION CMD...
	want=$1 what=$2; shift 2
	"$@" >out 2>err; got=$?
	[ "$got" = "$want" ] && ok "$what (exit $got)" || { bad "$what: exit $got, expected $want"; cat err; }
}
case=$src/tests/import/cases/cilium_l7_public.yaml

expect 2 "no file" "$l7c" import
expect 2 "a file that does not exist" "$l7c" import nonexistent.yaml
expect 2 "a bad --port" "$l7c" import --port=0 "$case"
expect 2 "a bad --listen" "$l7c" import --listen=nothing "$case"
expect 2 "an unknown option" "$l7c" import --frobnicate "$case"
expect 0 "--help" "$l7c" import --help
grep -q -- "--identities=FILE" out && ok "--help lists the options" || bad "--help lists the options"

expect 0 "to stdout" "$l7c" import "$case"
grep -q "^service default_app_service_80 = 127.1.0.1:80;" out && ok "default addresses" || bad "default addresses"
expect 0 "-o FILE" "$l7c" import "$case" -o p.l7
[ -s p.l7 ] && ! [ -s out ] && ok "-o writes the file, not stdout" || bad "-o writes the file, not stdout"
expect 0 "the output compiles" "$l7c" p.l7 -o p.o

expect 0 "--listen and --backend" "$l7c" import --listen=default_app_service=10.0.0.5 --backend=default_app_service=10.0.0.6 "$case"
grep -q "^service default_app_service_80 = 10.0.0.5:80;" out && grep -q "^upstream default_app_service_80_backend = 10.0.0.6:80;" out \
	&& ok "--listen/--backend move the workload" || bad "--listen/--backend move the workload"
expect 1 "--listen of a workload the import does not make" "$l7c" import --listen=nope=10.0.0.5 "$case"
grep -q "error: --listen nope: no workload of that name" err && ok "... named in the error" || bad "... named in the error"
expect 0 "--port" "$l7c" import --port=8080 "$case"
grep -q "^service default_app_service_8080 = " out && grep -q "^service default_app_service_80 = " out \
	&& ok "--port adds a port, the policy's stays" || bad "--port adds a port, the policy's stays"

printf 'default_env_prod 10.1.0.0/16 10.2.3.4  # prod\n\n' > ids.txt
expect 0 "--identities" "$l7c" import --identities=ids.txt "$case"
grep -q "^identity default_env_prod = \[10.1.0.0/16, 10.2.3.4\];" out && ok "--identities declares the addresses" \
	|| bad "--identities declares the addresses"
! grep -q "note: 1 caller identity needs addresses" err && ok "... and no note about them" || bad "... and no note about them"
printf 'somebody 10.1.0.0/16\n' > ids2.txt
expect 1 "--identities naming an identity the import does not make" "$l7c" import --identities=ids2.txt "$case"
grep -q "ids2.txt:1:1: error: identity 'somebody' is not one the import makes" err && ok "... at its line" || bad "... at its line"

expect 1 "JWT keys need -o FILE" "$l7c" import -o - "$src/tests/import/cases/istio_jwt.yaml"
grep -q "error: the JWT keys are written next to the output: give -o FILE" err && ok "... said so" || bad "... said so"
expect 0 "JWT keys next to the output" "$l7c" import -o j.l7 "$src/tests/import/cases/istio_jwt.yaml"
[ -f j.jwt_foo_httpbin.key ] && [ -f j.jwt_bar_strict.key ] && ok "key files written" || bad "key files written"
printf 'foo-key-0123456789abcdef\n' | cmp -s - j.jwt_foo_httpbin.key && ok "the key is the jwks k, decoded" || bad "the key is the jwks k, decoded"

expect 0 "stdin" sh -c "'$l7c' import - < '$case'"
grep -q "^policy cilium_default_app_service" out && ok "stdin read" || bad "stdin read"

# docs/import.md's table is the importer's
expect 0 "--fields" "$l7c" import --fields
sed -n '/^<!-- l7c import --fields -->$/,/^<!-- \/l7c import --fields -->$/p' "$src/docs/import.md" | sed '1d;$d' > doc.txt
sed '1{/^$/d}' out > fields.txt
cmp -s doc.txt fields.txt && ok "docs/import.md lists every field as l7c import --fields does" \
	|| { bad "docs/import.md's field table differs from l7c import --fields (regenerate it)"; diff doc.txt fields.txt | head -20; }
exit $fail
