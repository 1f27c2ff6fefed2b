"""What the runtime tests that run one l7run through many cases share: a case that reports
PASS or FAIL and lets the next one run, and waiting for a line of l7run's log."""
import time

failures = []   # the names of the cases that failed


def case(fn, *args):
    t = time.time()
    try:
        fn(*args)
        print("PASS %-36s %.2fs" % (fn.__name__, time.time() - t), flush=True)
    except Exception as e:  # noqa: BLE001 - report and go on
        failures.append(fn.__name__)
        print("FAIL %-36s %r" % (fn.__name__, e), flush=True)


def wait_log(logpath, text, since, secs=6.0):
    """The time text appears in the log after offset since (within secs), or None."""
    end = time.time() + secs
    while time.time() < end:
        with open(logpath) as f:
            f.seek(since)
            if text in f.read():
                return time.time()
        time.sleep(0.02)
    return None
