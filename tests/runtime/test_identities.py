#!/usr/bin/env python3
"""Caller identities kept current at run time (Meshlib's IP cache): l7run fills the l7_idents
trie from the policy and from --identities FILE, and re-reads the file when it changes.
Real traffic through the kernel in gateway mode, from client sockets bound to 127.0.x.y.
Run by ctest:  test_identities.py L7C L7RUN POLICY.l7
Policy (identities.l7): login may only POST /users/login, billing may only GET, other
callers are not restricted. Every process started here is ended by pid; ports derive from our
pid; pins and files are removed."""
import os
import subprocess
import sys
import tempfile
import time

L7C, L7RUN, POLICY = sys.argv[1:4]
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "common"))
from cases import case, failures  # noqa: E402
from procs import start, stop, stop_all, wait_port  # noqa: E402
from rawhttp import request  # noqa: E402
BASE = 32000 - (os.getpid() % 1000) * 2   # below the ephemeral range, away from test_gateway's
FRONT, BACK = BASE, BASE + 1
LOGIN, BILLING, OTHER = "127.0.1.5", "127.0.3.5", "127.0.4.5"
INSIDE = "127.0.1.200"   # in login's declared /24; the file may give it to billing


def status(src, method, path):
    """One request from source address src; the response's status code."""
    data = "%s %s HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\nConnection: close\r\n\r\n" % (method, path)
    return request(FRONT, data.encode(), src)[0]


def who(src):
    """The identity the data plane gives src, read off the policy's answers."""
    login_ok = status(src, "POST", "/users/login") == 200
    get_ok = status(src, "GET", "/users/list") == 200
    create_ok = status(src, "POST", "/users/create") == 200
    if login_ok and get_ok and create_ok:
        return "external"
    if login_ok and not get_ok and not create_ok:
        return "login"
    if get_ok and not login_ok and not create_ok:
        return "billing"
    return "inconsistent(%s,%s,%s)" % (login_ok, get_ok, create_ok)


def expect(src, name, secs=0.0):
    """src is judged as identity `name` (within secs, for a file change to be noticed)."""
    end = time.time() + secs
    while True:
        got = who(src)
        if got == name or time.time() >= end:
            assert got == name, "%s judged as %s, expected %s" % (src, got, name)
            return
        time.sleep(0.2)


def write(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.rename(tmp, path)   # atomic: l7run never reads half a file


def l7run(obj, pin, log, *extra):
    return start([L7RUN, "--pin", pin, "--listen", "127.0.0.1:%d" % FRONT, "--upstream",
                  "0=127.0.0.1:%d" % BACK, *extra, obj], stdout=log, stderr=log)


def main():
    tmp = tempfile.mkdtemp(prefix="l7id-")
    obj, idfile = os.path.join(tmp, "p.o"), os.path.join(tmp, "identities")
    logpath = os.path.join(tmp, "l7run.log")
    pin = "/sys/fs/bpf/l7id-%d" % os.getpid()
    subprocess.run([L7C, POLICY, "-o", obj], check=True)
    start([sys.executable, os.path.join(HERE, "echo_backend.py"), str(BACK), "users"],
          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert wait_port(BACK, 10), "backend did not start"
    log = open(logpath, "w")
    try:
        def policy_only():
            p = l7run(obj, pin, log)
            try:
                assert wait_port(FRONT, 30), "l7run did not come up"
                expect(LOGIN, "login")
                expect(INSIDE, "login")
                expect(BILLING, "external")   # billing has no address without the file
            finally:
                stop(p)
        case(policy_only)

        def bad_file_at_start():
            write(idfile, "login 127.0.1.0/24\nauditors 127.0.9.0/24\n")
            r = subprocess.run([L7RUN, "--pin", pin + "b", "--listen", "127.0.0.1:%d" % FRONT, "--upstream",
                                "0=127.0.0.1:%d" % BACK, "--identities", idfile, obj],
                               capture_output=True, text=True, timeout=30)
            assert r.returncode != 0, "l7run started with an identity the policy does not declare"
            assert "%s:2: unknown identity 'auditors'" % idfile in r.stderr, r.stderr
        case(bad_file_at_start)

        write(idfile, "# billing's pods, and one address inside login's /24\nbilling 127.0.3.0/24 %s\n" % INSIDE)
        p = l7run(obj, pin, log, "--identities", idfile)
        try:
            assert wait_port(FRONT, 30), "l7run did not come up"

            def file_at_start():
                expect(BILLING, "billing")
                expect(INSIDE, "billing")    # the /32 of the file beats login's /24
                expect(LOGIN, "login")
                expect(OTHER, "external")
            case(file_at_start)

            def file_changes_while_running():
                time.sleep(1.1)   # a new mtime second, whatever the file system's granularity
                write(idfile, "login 127.0.3.0/24\nbilling 127.0.4.0/24\n")
                expect(BILLING, "login", secs=5)
                expect(OTHER, "billing")
                expect(INSIDE, "login")      # its /32 is gone: the policy's /24 decides again
                expect(LOGIN, "login")
            case(file_changes_while_running)

            def bad_file_keeps_what_is_in_force():
                time.sleep(1.1)
                write(idfile, "login 127.0.3.0/24\nbilling 127.0.4.0/99\n")
                end = time.time() + 5
                while time.time() < end and "ignored" not in open(logpath).read():
                    time.sleep(0.2)
                assert "billing 127.0.4.0/99" in open(logpath).read() or "ignored" in open(logpath).read()
                assert "127.0.4.0/99' is not an IPv4 address or prefix" in open(logpath).read()
                expect(BILLING, "login")
                expect(OTHER, "billing")
            case(bad_file_keeps_what_is_in_force)

            def file_removed_entries_go():
                time.sleep(1.1)
                write(idfile, "\n")
                expect(BILLING, "external", secs=5)
                expect(OTHER, "external")
                expect(LOGIN, "login")
            case(file_removed_entries_go)
        finally:
            stop(p)
        assert p.returncode == 0, "l7run exited with %s" % p.returncode
        assert not os.path.exists(pin), "pins left in " + pin
    finally:
        stop_all()
        log.close()
        if failures:
            sys.stdout.write(open(logpath).read()[-3000:])
        for f in os.listdir(tmp):
            os.unlink(os.path.join(tmp, f))
        os.rmdir(tmp)
    if failures:
        print("FAILED:", " ".join(failures))
        return 1
    print("all identity cases passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
