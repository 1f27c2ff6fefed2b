#!/usr/bin/env python3
"""Every example policy, compiled by l7c, loaded by l7run (gateway mode), and driven with the
requests its `// test:` lines describe — real HTTP over loopback through the kernel.

  // test: [N x] [from IP] METHOD PATH [H:name:value]... [jwt|jwt-expired|jwt-badsig|jwt-alg-none:CLAIMS]
  //       -> STATUS [UPSTREAM] [+name:value]... [-name[:value]]...   (what the client and the
  //                                                                    backend see, or not)
  //       -> STATUS [UPSTREAM] xK, STATUS [UPSTREAM] xK  (for N repeated requests, in order)
  // test: sleep SECONDS                                 (for policies with timers)
  // counters: NAME=VALUE ...                             (l7run --metrics after the tests)

Usage: run_examples.py L7C L7RUN EXAMPLES_DIR ECHO_BACKEND
Every process started here is ended by pid; ports derive from our pid; pins are removed."""
import os, re, shutil, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from exampletests import check, jwt_setup, parse as parse_test, raw_request, token  # noqa: E402
from procs import start, stop_all, wait_port  # noqa: E402
from rawhttp import request  # noqa: E402

L7C, L7RUN, EXAMPLES, ECHO = sys.argv[1:5]
BASE = 21000 + (os.getpid() % 700) * 16     # below the ephemeral range; 16 ports per run
passed, failed = 0, 0


def run_example(path, slot):
    """One run of an example's test lines on a fresh l7run: (passed, failed)."""
    passed = failed = 0
    name = os.path.basename(path)
    text = open(path).read()
    tests = re.findall(r"^// test: (.*)$", text, re.M)
    if not tests:
        return 0, 0
    ir = subprocess.run([L7C, "--emit=ir", "--passes=none", path], capture_output=True, text=True).stdout
    services = re.findall(r"^service (\d+) (\S+) ", ir, re.M)
    upstreams = re.findall(r"^(?:upstream|fallback) (\d+) (\S+) ", ir, re.M)
    key, iss, aud = jwt_setup(path, text, ir)
    work = tempfile.mkdtemp(prefix="l7c-ex-")
    obj, pin = os.path.join(work, "p.o"), "/sys/fs/bpf/l7c-ex-%d-%d" % (os.getpid(), slot)
    try:
        subprocess.run([L7C, path, "-o", obj], check=True, capture_output=True)
        base = BASE + slot * 0   # one example at a time: ports reused after each stops
        front = base
        args = [L7RUN, "--pin", pin, "--bpf-stats"]
        for i, _ in services:
            args += ["--listen", "%s=127.0.0.1:%d" % (i, front + int(i))]
        log = open(os.path.join(work, "log"), "w")
        for i, up in upstreams:
            port = base + 4 + int(i)
            start([sys.executable, ECHO, str(port), up], stdout=subprocess.DEVNULL, stderr=log)
            wait_port(port, 10)
            args += ["--upstream", "%s=127.0.0.1:%d" % (i, port)]
        start(args + [obj], stdout=log, stderr=log)
        if not wait_port(front, 20):
            raise RuntimeError("l7run did not come up:\n" + open(log.name).read()[-1500:])
        for t in tests:
            if t.startswith("sleep "):   # for policies with timers
                time.sleep(float(t.split()[1]))
                continue
            count, src, method, p, headers, j, expect = parse_test(t)
            hs = list(headers)
            if j:
                hs.append(("Authorization", "Bearer " + token(j[0], j[1], key, iss, aud)))
            got = [request(front, raw_request(method, p, hs).encode(), src) for _ in range(count)]
            ok, why = check(expect, got)
            if ok:
                passed += 1
                print("PASS %s: %s" % (name, t))
            else:
                failed += 1
                print("FAIL %s: %s\n     %s" % (name, t, why))
        for want in re.findall(r"^// counters: (.*)$", text, re.M):
            out = subprocess.run([L7RUN, "--metrics", pin, obj], capture_output=True, text=True).stdout
            for kv in want.split():
                k, v = kv.split("=")
                m = re.search(r'l7_increments_total\{name="%s"\} (\d+)' % k, out)
                if m and int(m.group(1)) == int(v):
                    passed += 1
                    print("PASS %s: counter %s = %s" % (name, k, v))
                else:
                    failed += 1
                    print("FAIL %s: counter %s = %s, metrics say:\n%s" % (name, k, v, out))
    except Exception as e:  # noqa: BLE001 - report and go on
        failed += 1
        print("FAIL %s: %r" % (name, e))
    finally:
        stop_all()
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(pin, ignore_errors=True)
    return passed, failed


for slot, f in enumerate(sorted(os.listdir(EXAMPLES))):
    if f.endswith(".l7"):
        path = os.path.join(EXAMPLES, f)
        # Token buckets refill in real time: on a loaded machine a slow batch sees a token come
        # back and gets a 200 its line does not expect. Such an example runs again on a fresh
        # l7run (fresh buckets), up to three times, as tests/runtime/test_limit.py does; a limit
        # that is not enforced fails every attempt. The last attempt counts.
        attempts = 3 if re.search(r"^TokenBucket ", open(path).read(), re.M) else 1
        for attempt in range(attempts):
            p, fl = run_example(path, slot)
            if not fl:
                break
            if attempt + 1 < attempts:
                print("RETRY %s: %d failure(s) on attempt %d, on a fresh l7run" % (f, fl, attempt + 1))
        passed += p
        failed += fl
print("examples: %d passed, %d failed" % (passed, failed))
sys.exit(1 if failed or not passed else 0)
