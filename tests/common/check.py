"""The PASS/FAIL lines of a test and the list of what failed: every check is printed as it
happens (ctest logs are read by people), the summary repeats the failures at the end; and the
loop of tests that run named checks one after another (run_checks)."""
import sys
import time

failures = []


def check(cond, what):
    print("%s %s" % ("PASS" if cond else "FAIL", what))
    sys.stdout.flush()
    if not cond:
        failures.append(what)
    return cond


def summary(name):
    """Prints `name: N failure(s)` and the failures; the exit status: 1 if any."""
    print("%s: %d failure(s)" % (name, len(failures)))
    for f in failures:
        print("  " + f)
    return 1 if failures else 0


def run_checks(checks, only=(), label="%-13s", on_fail=None):
    """Runs each (name, fn) of `checks` (those named in `only`, when it is not empty), every one
    whatever failed before it: `ok   NAME SECONDS [what fn returned]` or `FAIL NAME why`, with
    `label` formatting the name; on_fail() runs before a failure is printed. Returns how many
    failed."""
    failed = 0
    for name, fn in checks:
        if only and name not in only:
            continue
        t0 = time.time()
        try:
            what = fn()
            print(("ok   " + label + " %.2fs%s") % (name, time.time() - t0, "" if what is None else "  %s" % (what,)),
                  flush=True)
        except Exception as e:  # noqa: BLE001 - report every check, then fail
            if on_fail:
                on_fail()
            failed += 1
            print(("FAIL " + label + " %s") % (name, e), flush=True)
    return failed
