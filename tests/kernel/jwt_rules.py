#!/usr/bin/env python3
"""A JWT check after several rules, at the default budget (issue 18): the family of
tests/runtime/test_access_log.py's policy -- a guard policy (Deny, Audit, NoLog), a routing
policy of N prefix rules (Route to two upstreams, Denies of different statuses), then a policy
that denies /jwt without a valid token -- for N = 2, 8 and 24 (32 passes the 512-byte stack,
on main too). Each path through the rules reaches the check with another decision so far;
inlined, the verifier walked the check's callbacks once per such state, and the mesh SK_MSG
program went past the kernel's 1M processed instructions (N = 8; 918K at N = 2) while
`--explain` estimated ~580K: l7c wrote an object l7run could not load.
`l7c --explain --verify` at the default budget: every program loads and attaches, each within
the budget, and the budget model never estimates a program that checks the token more than 15%
under what the kernel processed (an estimate under the truth is what lets an unloadable program through the
splitter); above it, at most 5x.

usage: jwt_rules.py L7C L7RUN"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from check import check, summary  # noqa: E402

L7C = sys.argv[1]
BUDGET = 1000000
UNDER, OVER = 0.85, 5.0   # estimate / processed, per program that checks the token:
DECIDE = ("l7_client_parser", "l7_mesh_msg_prog", "l7_mesh_h2_prog")   # (the others' are the calibration's)
WORK = tempfile.mkdtemp(prefix="l7c-jwtrules-")
KEY = os.path.join(WORK, "jwt.key")


def policy(n):
    rules = []
    for i in range(n):
        act = ("Route(request, a);", "Deny(request, %d);" % (400 + i % 50), "Route(request, b);")[i % 3]
        rules.append('  %s (starts_with(request.path, "/r%d/")) {\n    %s' % ("if" if i == 0 else "} else if", i, act))
    return ('import "http.l7i";\nservice front = 127.0.0.1:9000;\nupstream a = 127.0.0.1:9001;\n'
            'upstream b = 127.0.0.1:9002;\n'
            'policy guard (act (HttpRequest request)) {\n'
            '  if (starts_with(request.path, "/admin")) {\n    Deny(request, 403);\n'
            '  } else if (starts_with(request.path, "/secret")) {\n    Audit(request);\n'
            '  } else if (starts_with(request.path, "/quiet")) {\n    NoLog(request);\n  }\n}\n'
            'policy routes (act (HttpRequest request)) {\n%s\n  }\n}\n'
            'Jwt auth { key_file = "%s"; issuer = "t"; audience = "t"; }\n'
            'policy tokens (act (HttpRequest request) using (Jwt auth)) {\n'
            '  if (starts_with(request.path, "/jwt") && !auth.valid) {\n    Deny(request, 401);\n  }\n}\n'
            % ("\n".join(rules), KEY))


def main():
    with open(KEY, "wb") as f:
        f.write(b"jwt-rules-test-key-0123456789abcd")
    for n in (2, 8, 24):
        src = os.path.join(WORK, "jwt%d.l7" % n)
        with open(src, "w") as f:
            f.write(policy(n))
        r = subprocess.run([L7C, "--explain", "--verify", "--format=json", src], capture_output=True, text=True,
                           timeout=600)
        if not check(r.returncode == 0, "N=%d: l7c --explain --verify exits 0 (%d): %s" % (n, r.returncode, r.stderr[-600:])) \
                and not r.stdout.strip():
            continue
        d = json.loads(r.stdout)
        v = d["verify"]
        check(v["ran"] and v["loaded"] > 0 and not v["rejected"] and not v["attach_refused"],
              "N=%d: every program loads and attaches (%s)" % (n, v))
        for p in d["programs"]:
            if p["subprogram"] or p["processed"] is None or p["processed"] < 0 and p["verifier"] == "":
                continue
            name, proc, est = p["name"], p["processed"], p["estimated_processed"]
            check(0 < proc <= BUDGET, "N=%d %s: %d processed, within the budget" % (n, name, proc))
            if name not in DECIDE:
                continue
            check(est >= UNDER * proc, "N=%d %s: estimate %d not under %d%% of the %d processed"
                  % (n, name, est, UNDER * 100, proc))
            check(est <= OVER * proc, "N=%d %s: estimate %d at most %gx the %d processed" % (n, name, est, OVER, proc))
            print("     N=%d %-22s processed %7d estimated %7d (%.2fx) stack %d" % (n, name, proc, est, est / proc,
                                                                                   p["stack"]), flush=True)
    subprocess.run(["rm", "-rf", WORK])
    return summary("jwt_rules")


if __name__ == "__main__":
    sys.exit(main())
