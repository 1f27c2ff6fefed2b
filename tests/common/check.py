"""The PASS/FAIL lines of a test and the list of what failed: every check is printed as it
happens (ctest logs are read by people), the summary repeats the failures at the end."""
import sys

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
