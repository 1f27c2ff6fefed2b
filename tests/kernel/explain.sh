#!/usr/bin/env bash
# l7c --explain --verify on every example: every program is accepted by the running kernel and
# attached as l7run would (decide programs in their tail-call slots, sock_ops on a cgroup), and
# the budget model's estimate of processed instructions is within MAX_ERR% of the verifier's
# count for every program, and within MEAN_ERR% on average, with the calibration the build made
# on this kernel (the kernel.calibrate fixture: scripts/calibrate.py; --explain must say it used
# it). The same for bench/scaling.py's policies (its RBAC and routes series), and, with the
# bounds HELD_MAX_ERR / HELD_MEAN_ERR, for scaling-style policies the calibration never saw
# (30 and 300 rules): what a new policy can expect.
# Usage: explain.sh L7C EXAMPLES_DIR
set -u
l7c=$1 dir=$2
# measured (kernel 6.18.44, see driver/budget.c): the calibrated programs 0% (the verifier is
# deterministic: the count of a program it has seen; the structural model alone: mean 44%, worst
# +573%); the 36 programs of the policies not calibrated: mean 2.3%, worst -24.0% (routes 30's
# mesh SK_MSG program: its rules as code, which the configuration's cost does not see; rbac 30's
# client parser +20.4%)
MAX_ERR=${MAX_ERR:-15}
MEAN_ERR=${MEAN_ERR:-5}
HELD_MAX_ERR=${HELD_MAX_ERR:-30}
HELD_MEAN_ERR=${HELD_MEAN_ERR:-4}
errs=$(mktemp) held=$(mktemp) pol=$(mktemp -d)
trap 'rm -rf "$errs" "$held" "$pol"' EXIT
pass=0 fail=0
check='
import json, sys
d = json.load(sys.stdin)
name, bound = sys.argv[1].rsplit("/", 1)[-1], float(sys.argv[2])
ok = True
c = d["calibration"]
if c["source"] != "built" or c["release"] != c["running"]:
    print("%s: calibration %s (%s), not the one built for kernel %s: %s" % (name, c["source"], c["release"], c["running"], c["note"]))
    ok = False
for p in d["programs"]:
    if p["subprogram"]:
        continue
    err = (p["estimated_processed"] - p["processed"]) / max(p["processed"], 1)
    print("%s: %s: estimated %d (calibration: %s), verifier %d (%+.1f%%; structural model %d), %s" % (name, p["name"],
          p["estimated_processed"], p["calibration"], p["processed"], 100 * err, p["model_estimate"], p["verifier"]))
    open(sys.argv[3], "a").write("%f\n" % abs(err))
    if p["verifier"] != "accepted" or p["processed"] <= 0 or abs(err) * 100 > bound:
        ok = False
    a = p["attach"]
    if a is None and "_decide_" not in p["name"] and p["section"] != "sk_msg":
        print("%s: %s: not attached" % (name, p["name"]))
        ok = False
    if a is not None and not (a["tried"] and a["attached"]):
        print("%s: %s: %s to %s: %s" % (name, p["name"], a["as"], a["to"], a["error"]))
        ok = False
if d["verify"]["attach_refused"] or d["verify"]["rejected"] or d["verify"]["attached"] != d["verify"]["loaded"]:
    print("%s: verify: %s" % (name, d["verify"]))
    ok = False
sys.exit(0 if ok else 1)
'

run() {   # run NAME BOUND ERRFILE L7C-ARGS...
  local name=$1 bound=$2 ef=$3; shift 3
  out=$("$l7c" --explain --verify --format=json "$@") || { echo "FAIL $name: l7c --explain --verify failed"; fail=$((fail+1)); return; }
  if python3 -c "$check" "$name" "$bound" "$ef" <<<"$out"
  then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL $name"; fi
}
for f in "$dir"/*.l7; do
  run "$f" "$MAX_ERR" "$errs" "$f"
done
# split programs: every program of the chains accepted, and the model bounds them too
run "$dir/social_network.l7 (split at parse)" "$MAX_ERR" "$errs" --split=parse "$dir/social_network.l7"
run "$dir/social_network.l7 (budget 100000)" "$MAX_ERR" "$errs" --budget=100000 "$dir/social_network.l7"
run "$dir/social_network.l7 (budget 80000)" "$MAX_ERR" "$errs" --budget=80000 "$dir/social_network.l7"
run "$dir/social_network.l7 (decide chain)" "$MAX_ERR" "$errs" --split=rules "$dir/social_network.l7"
chain=$("$l7c" --explain --split=rules "$dir/social_network.l7")
if grep -Eq '^  l7_mesh_msg_prog -> l7_mesh_decide_0 -> l7_mesh_decide_1' <<<"$chain"; then pass=$((pass+1))
else fail=$((fail+1)); echo "FAIL: no mesh decide chain in --explain:"; head -8 <<<"$chain"; fi
# bench/scaling.py's policies (calibrated), and scaling-style ones of sizes it never saw
python3 - "$dir/../bench" "$pol" <<'EOF'
import os, sys
sys.path.insert(0, sys.argv[1])
out = sys.argv[2]
sys.argv[1:] = []
import scaling
for n in (10, 100, 1000, 10000, 30, 300):
    open(os.path.join(out, "rbac%d.l7" % n), "w").write(scaling.rbac_policy(n))
    open(os.path.join(out, "routes%d.l7" % n), "w").write(scaling.routes_policy(n))
EOF
for n in 10 100 1000 10000; do
  for s in rbac routes; do run "scaling $s $n" "$MAX_ERR" "$errs" "$pol/$s$n.l7"; done
done
for n in 30 300; do
  for s in rbac routes; do run "scaling-style $s $n (not calibrated)" "$HELD_MAX_ERR" "$held" "$pol/$s$n.l7"; done
done
# the splitter's advice names the cause: at a budget below what the client parser's machinery
# alone needs, it says so (and not that rule sets should move to tables)
adv=$("$l7c" --explain --budget=50000 "$dir/social_network.l7" 2>&1)
if grep -q 'l7_client_parser needs [0-9]* processed instructions, over the budget of 50000: the machinery alone needs about [0-9]*' <<<"$adv" &&
   ! grep -q 'l7_client_parser.*move large rule sets' <<<"$adv"; then pass=$((pass+1))
else fail=$((fail+1)); echo "FAIL: --budget=50000 advice:"; grep -i 'warning' <<<"$adv"; fi
# 100 keyed Limits in one rule: unsplit, its longest jump is past its reach once patched (the
# kernel refused main's object: "cannot be patched due to 16-bit range"); split, it loads
python3 -c 'import sys; sys.path.insert(0, sys.argv[1]); import calibrate; print(calibrate.limits_policy(), end="")' "$dir/../scripts" >"$pol/limits.l7"
run "one rule of 100 Limits (split by its jumps' reach)" "$MAX_ERR" "$errs" "$pol/limits.l7"
# the model's mean error over every program of the examples, the splits and bench/scaling.py's
# policies, and over those of the policies it was not calibrated on
mean() {   # mean ERRFILE BOUND WHAT
  python3 -c 'import sys; e=[float(l) for l in open(sys.argv[1])]; m=100*sum(e)/len(e); print("estimate error over %d programs (%s): mean %.1f%%, max %.1f%% (bound: mean %s%%)" % (len(e), sys.argv[3], m, 100*max(e), sys.argv[2])); sys.exit(m > float(sys.argv[2]))' "$@"
}
if mean "$errs" "$MEAN_ERR" "examples, splits, bench/scaling.py"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: mean estimate error over $MEAN_ERR%"; fi
if mean "$held" "$HELD_MEAN_ERR" "not calibrated"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: mean estimate error of policies not calibrated over $HELD_MEAN_ERR%"; fi
# a refused attach (sock_ops on a directory that is no cgroup: the kernel says EBADF) fails
# --verify with exit 1, names the program and the errno, writes no object and removes an older
# one at that path; the child directory it made is gone again
notcg=$(mktemp -d) obj=$(mktemp --suffix=.o)
"$l7c" --explain --verify --verify-cgroup="$notcg" --format=json "$dir/route.l7" -o "$obj" >"$errs.json" 2>"$errs.err"
rc=$?
if [ "$rc" = 1 ] && [ ! -e "$obj" ] && [ -z "$(ls -A "$notcg")" ] && grep -q 'refused 0 programs and 1 attach' "$errs.err" &&
   python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); p=dict((x["name"],x) for x in d["programs"]); a=p["l7_mesh_sockops_prog"]["attach"]; assert a["tried"] and not a["attached"] and a["errno"]==9 and "EBADF" in a["error"], a; assert d["verify"]["attach_refused"]==1 and p["l7_client_parser"]["attach"]["attached"]' "$errs.json"
then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: a refused attach: exit $rc, object left: $(ls "$obj" 2>&1)"; cat "$errs.err"; fi
rm -rf "$notcg" "$obj" "$errs.json" "$errs.err"
# without the privileges to load, --verify cannot run: exit 2 and why, not a report of success
if command -v setpriv >/dev/null; then
  setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all --bounding-set=-all \
    "$l7c" --explain --verify "$dir/route.l7" >/dev/null 2>"$errs"
  rc=$?
  if [ "$rc" = 2 ] && grep -q 'needs root' "$errs"; then pass=$((pass+1))
  else fail=$((fail+1)); echo "FAIL: --verify without privileges: exit $rc"; cat "$errs"; fi
fi
echo "explain: $pass passed, $fail failed"
[ "$fail" = 0 ] && [ "$pass" -gt 0 ]
