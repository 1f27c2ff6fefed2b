"""The `// test:` lines of examples/*.l7 (their syntax: tests/examples/run_examples.py), read
the same way by the examples test, tests/runtime/test_limit.py and bench/examples.py: parsed,
their JWTs signed with the example's key, their requests written out, their answers checked."""
import json
import os
import re
import time

from jwtgen import token as jwt_token

LINE = re.compile(r"(?:(\d+) x )?(?:from (\S+) )?(\S+) (\S+)(.*?)->(.*)$")


def parse(line):
    """(count, source address or None, method, path, [(name, value)], (jwt kind, claims) or
    None, what is expected) of a test line; None if it is not a request line."""
    m = LINE.match(line.strip())
    if not m:
        return None
    count, src, method, path, extra, expect = m.groups()
    headers, jwt = [], None
    for tok in extra.split():
        if tok.startswith("H:"):
            _, name, value = tok.split(":", 2)
            headers.append((name, value))
        elif tok.startswith("jwt"):
            kind, _, claims = tok.partition(":")
            jwt = (kind, json.loads(claims))
    return int(count or 1), src, method, path, headers, jwt, expect.strip()


def jwt_setup(path, text, ir):
    """(key, issuer, audience) for the example at path (its text, its `l7c --emit=ir`)."""
    jwt = re.search(r'^jwt #0 \S+: token in header\[\d+:\S+\], issuer "([^"]*)", audience "([^"]*)"', ir, re.M)
    keyfile = re.search(r'Jwt \w+ \{ key_file = "([^"]+)"', text)
    key = open(os.path.join(os.path.dirname(path), keyfile.group(1)), "rb").read().rstrip(b"\n") if keyfile else b""
    return key, jwt.group(1) if jwt else "", jwt.group(2) if jwt else ""


def token(kind, claims, key, iss, aud):
    """The token of a test line: kind jwt, jwt-expired, jwt-badsig or jwt-alg-none; iss, aud and
    exp (10 minutes ahead, or behind when expired) added unless the claims give them."""
    now = int(time.time())
    body = dict(claims)
    if iss:
        body.setdefault("iss", iss)
    if aud:
        body.setdefault("aud", aud)
    body.setdefault("exp", now - 600 if kind == "jwt-expired" else now + 600)
    return jwt_token(key, body, alg="none" if kind == "jwt-alg-none" else "HS256", flip=kind == "jwt-badsig")


def relocated(path, ports):
    """An example's text for a test run: its addresses 127.0.0.1:OLD moved to the run's ports
    ({OLD: NEW}) and its key_file made absolute; and the key's bytes (b"" without one)."""
    text = open(path).read()
    here = os.path.dirname(os.path.abspath(path))
    m = re.search(r'key_file = "([^"]+)"', text)
    key = open(os.path.join(here, m.group(1)), "rb").read().rstrip(b"\n") if m else b""
    for old, new in ports.items():
        text = text.replace("127.0.0.1:%d" % old, "127.0.0.1:%d" % new)
    text = re.sub(r'key_file = "([^"]+)"', lambda k: 'key_file = "%s"' % os.path.join(here, k.group(1)), text)
    return text, key


def raw_request(method, path, headers):
    """The request of a test line: Host example, its headers, an empty body for the methods
    that take one."""
    req = "%s %s HTTP/1.1\r\nHost: example\r\n" % (method, path)
    req += "".join("%s: %s\r\n" % h for h in headers)
    if method in ("POST", "PUT", "PATCH"):
        req += "Content-Length: 0\r\n"
    return req + "\r\n"


def check(expect, got):
    """(ok, why) of the responses got, [(status, body)] from the echo backend, against what a
    test line expects."""
    if "," in expect or " x" in expect:   # "200 x10, 429 x2" or "200 web#1, 200 web#0 x2"
        want = []
        for part in expect.split(","):
            what, _, n = part.strip().partition(" x")
            st, _, backend = what.partition(" ")
            want += [(int(st), backend)] * int(n or 1)
        seen = [(g[0], re.search(r"^backend=(\S+)$", g[1], re.M)) for g in got]
        seen = [(st, m.group(1) if m else "") for st, m in seen]
        ok = len(seen) == len(want) and all(s == w[0] and (not w[1] or b == w[1]) for (s, b), w in zip(seen, want))
        return ok, "got %s" % seen
    words = expect.split()
    status, body = got[0]
    if status != int(words[0]):
        return False, "status %d, body %r" % (status, body[:300])
    for w in words[1:]:
        if w.startswith("+"):
            if ("header=" + w[1:]).lower() not in body.lower().replace(": ", ":"):
                return False, "backend did not see %s: %r" % (w[1:], body[:400])
        elif w.startswith("-"):   # -name: no line of it; -name:value: not that line
            seen = body.lower().replace(": ", ":")
            if ("header=" + w[1:]).lower() + ("" if ":" in w else ":") in seen:
                return False, "backend saw %s: %r" % (w[1:], body[:400])
        elif "backend=%s\n" % w not in body:
            return False, "expected backend %s: %r" % (w, body[:300])
    return True, ""
