"""The request generator of the differential tests (run_differential.py: HTTP/1.1 through
gateway mode; run_h2_differential.py: HTTP/2 streams through mesh mode): the policy's constants
as diff_eval --constants prints them, and requests built from them (valid, near misses, edge
cases, malformed; JWTs signed with the policy's keys, valid at NOW and not)."""
import random
import re

from jwtgen import b64, token as jwt_token

NOW = 1700000000                          # the time JWTs are verified at, in both (not today's)


# ---------------------------------------------------------------- the policy's constants

class Consts:
    def __init__(self, text):
        self.services, self.upstreams, self.mutations = [], {}, {}
        self.fallback, self.headers, self.nets = -1, [], []
        self.paths, self.values, self.methods, self.methodnums = set(), set(), set(), set()
        self.ports, self.njwts = set(), 0
        self.jwts, self.claims = {}, {}          # header name -> (iss, aud, leeway, key, claim names)
        un = lambda h: b"" if h == "-" else bytes.fromhex(h)
        for line in text.splitlines():
            w = line.split()
            if w[0] == "service":
                self.services.append((int(w[1]), w[2], int(w[3])))
            elif w[0] == "upstream":
                self.upstreams[int(w[1])] = w[2]
            elif w[0] == "fallback":
                self.fallback = int(w[1])
            elif w[0] == "mutation":
                self.mutations[int(w[1])] = (un(w[2]), un(w[3]))
            elif w[0] == "header":
                self.headers.append(un(w[1]))
            elif w[0] == "net":
                self.nets.append((int(w[1], 16), int(w[2], 16)))
            elif w[0] == "port":
                self.ports.update((int(w[1]), int(w[2])))
            elif w[0] in ("path", "value", "method"):
                s = un(w[2])
                {"path": self.paths, "value": self.values, "method": self.methods}[w[0]].add((w[1], s))
            elif w[0] == "methodnum":
                self.methodnums.add(int(w[1]))
            elif w[0] == "jwt":
                key = open(un(w[6]), "rb").read()   # as l7run reads it (stdlib/bpf/jwt_key.h)
                key = key[:-1] if key.endswith(b"\n") else key
                key = key[:-1] if key.endswith(b"\r") else key
                self.jwts[int(w[1])] = (un(w[2]), un(w[3]).decode(), un(w[4]).decode(), int(w[5]), key)
            elif w[0] == "claim":
                self.claims.setdefault(int(w[1]), []).append(un(w[2]).decode())
            elif w[0] == "njwts":
                self.njwts = int(w[1])


METHOD_NAMES = ["OTHER", "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"]


def near(kind, s):
    """s itself and its near misses."""
    out = [s]
    if s:
        out += [s[:-1], s + b"x", s.upper(), s.swapcase()]
    if kind == "prefix":
        out += [s + b"x/y", s + b"/", s + b"/deeper/path"]
    else:
        out += [s + b"/", s + b"?"]
    # gRPC paths /SERVICE/METHOD (request.grpc_service == S is a prefix "/S/" and the form): a
    # method of the service, and the forms that are not gRPC paths (no method, a third segment,
    # no service), and another method of an exact call
    seg = s.split(b"/")
    if kind == "prefix" and len(seg) == 3 and not seg[0] and seg[1] and not seg[2]:
        out += [s + b"Get", s + b"GetX", s + b"Get/extra", s[:-1], b"/" + s]
    if kind == "eq" and len(seg) == 3 and not seg[0] and seg[1] and seg[2]:
        out += [b"/%s/" % seg[1], b"/%s/Other" % seg[1], b"/x%s/%s" % (seg[1], seg[2]), s + b"/extra", b"//" + seg[2]]
    return out


def ip_str(v):
    return "%d.%d.%d.%d" % (v >> 24, (v >> 16) & 255, (v >> 8) & 255, v & 255)


class Gen:
    def __init__(self, c, seed):
        self.c, self.r = c, random.Random(seed)
        paths = {b"/", b"/other", b"/index.html"}
        for kind, s in c.paths:
            paths.update(p for p in near(kind, s) if p.startswith(b"/") or not p)
        paths.discard(b"")
        self.paths = sorted(paths)
        values = {b"none", b"example", b"", b"1", b"0"}
        for kind, s in c.values:
            values.update(near(kind, s))
        self.values = sorted(v for v in values if b"\r" not in v and b"\n" not in v and b"\0" not in v)
        methods = {b"GET", b"HEAD", b"POST", b"PUT", b"DELETE", b"OPTIONS", b"PATCH", b"TRACE", b"MKCOL",
                   b"PROPFIND", b"get"}
        for n in c.methodnums:
            if 0 < n < len(METHOD_NAMES) and n != 6:
                methods.add(METHOD_NAMES[n].encode())
        for kind, s in c.methods:
            methods.update(m for m in near(kind, s) if m and re.fullmatch(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+", m))
        self.methods = sorted(methods)
        self.hosts = sorted(set(self.values) | {b"example", b"static.example:80", b"localhost"})
        srcs = {0x7F000001, 0x7F000002, 0x7F010203, 0x7F000105, 0x7F000209}
        for net, mask in c.nets:
            if net >> 24 != 127:
                continue
            host = ~mask & 0xFFFFFFFF
            srcs.update({net | 1, net | (host & 0x37) | 1, net | (host - 1 if host > 1 else 1),
                         ((net ^ (host + 1)) & 0xFFFFFFFF) | 1 if host < 0xFFFFFF else net | 2})
        self.srcs = sorted(ip_str(s) for s in srcs if s >> 24 == 127 and s & 255 not in (0, 255))

        self.tokens = {}     # header -> tokens made, some sent again (the kernel's cache)
        self.token_kinds = {}

    def pick(self, seq):
        return seq[self.r.randrange(len(seq))]

    KINDS = ["valid"] * 6 + ["expired", "nbf", "nbf-past", "no-exp", "badsig", "otherkey", "iss", "aud",
                             "aud-list", "none", "hs512", "garbage", "scheme"]

    def jwt_value(self, idx):
        """An Authorization-style value for JWT configuration idx: Bearer and a token of some kind."""
        r = self.r
        header, iss, aud, leeway, key = self.c.jwts[idx]
        made = self.tokens.setdefault(header, [])
        if made and r.random() < 0.3:
            return self.pick(made)
        kind = self.pick(self.KINDS)
        self.token_kinds[kind] = self.token_kinds.get(kind, 0) + 1
        claims = {}
        if iss or r.random() < 0.2:
            claims["iss"] = iss + "x" if kind == "iss" else iss or "https://anyone"
        if aud or r.random() < 0.2:
            claims["aud"] = "other" if kind == "aud" else ["x", aud] if kind == "aud-list" else aud or "any"
        day = 86400 + leeway
        if kind != "no-exp":
            claims["exp"] = NOW - day if kind == "expired" else NOW + day
        if kind in ("nbf", "nbf-past"):
            claims["nbf"] = NOW + day if kind == "nbf" else NOW - day
        compared = sorted(s for _, s in self.c.values)   # what rules compare claims with, first
        for name in self.c.claims.get(idx, []):
            x = r.random()
            if x < 0.4 and compared:
                claims[name] = self.pick(compared).decode("latin-1")
            elif x < 0.7:
                claims[name] = self.pick(self.values).decode("latin-1")
            elif x < 0.8:
                claims[name] = 7
        if kind == "garbage":
            tok = self.pick(["x.y.z", "abc", b64(b"{}") + "." + b64(b"{}") + ".", "a.b.c.d", "@@.@@.@@"])
        else:
            tok = jwt_token(b"other-key" if kind == "otherkey" else key, claims,
                            alg="none" if kind == "none" else "HS512" if kind == "hs512" else "HS256",
                            flip=kind == "badsig")
        scheme = self.pick(["bearer ", "Bearer  ", "Basic ", "Bearer"]) if kind == "scheme" else "Bearer "
        value = (scheme + tok).encode()
        made.append(value)
        return value

    def path(self):
        r = self.r
        p = self.pick(self.paths)
        if r.random() < 0.3:
            p += b"?" + (self.pick(self.values) if r.random() < 0.7 else b"")
        return p

    def headers(self):
        r, hs = self.r, []
        jwt_of = {h[0]: i for i, h in self.c.jwts.items()}
        for name in self.c.headers:
            if r.random() < (0.8 if name in jwt_of else 0.5):
                n = name if r.random() < 0.7 else name.upper()
                v = self.jwt_value(jwt_of[name]) if name in jwt_of and r.random() < 0.9 else self.pick(self.values)
                if r.random() < 0.15:
                    v = b" " + v + b"  "
                hs.append(n + b": " + v)
                if r.random() < 0.05:   # the same header twice
                    hs.append(name + b": " + self.pick(self.values))
        if r.random() < 0.3:
            hs.append(b"user-agent: diff/1")
        r.shuffle(hs)
        return hs

    def request(self, method=None, target=None, host=None, headers=None, body=None, chunked=False,
                version=b"HTTP/1.1", eol=b"\r\n"):
        r = self.r
        method = method or self.pick(self.methods)
        target = target or self.path()
        hs = []
        if host is not False:
            hs.append(b"Host: " + (host or self.pick(self.hosts)))
        hs += self.headers() if headers is None else headers
        if body is None and method in (b"POST", b"PUT", b"PATCH") and r.random() < 0.6:
            body = b"x" * r.choice([0, 1, 17, 300])
        if chunked:
            hs.append(b"Transfer-Encoding: chunked")
            b = body or b"hello"
            payload = b"%x\r\n%s\r\n0\r\n\r\n" % (len(b), b)
        elif body is not None:
            hs.append(b"Content-Length: %d" % len(body))
            payload = body
        else:
            payload = b""
        return method + b" " + target + b" " + version + eol + b"".join(h + eol for h in hs) + eol + payload

    def valid(self):
        r = self.r
        return self.request(chunked=r.random() < 0.03)

    def edge(self):
        r, k = self.r, self.r.randrange(22)
        if k == 0:
            return self.request(target=b"/")
        if k == 1:   # long paths, some past the 8 KiB request line
            n = r.choice([200, 1000, 4000, 8100, 8170, 8200, 9000])
            return self.request(target=self.pick(self.paths) + b"/" + b"a" * n)
        if k == 2:   # many header fields, around the 128 limit
            n = r.choice([60, 120, 125, 126, 127, 128, 129, 200])
            return self.request(headers=self.headers() + [b"x-h-%d: v" % i for i in range(n)])
        if k == 3:   # heads around 16 KiB
            base = self.request(headers=self.headers())
            pad = 16384 - len(base) - len(b"x-pad: \r\n") + r.randrange(-40, 40)
            hs = self.headers() if r.random() < 0.5 else []
            return self.request(headers=[b"x-pad: " + b"p" * max(pad, 1)] + hs)
        if k == 4:   # a wanted header after a big head
            return self.request(headers=[b"x-pad%d: %s" % (i, b"q" * 900) for i in range(r.randrange(5, 18))] +
                                self.headers())
        if k in (5, 6, 7):   # pipelined pairs
            a = self.valid() if r.random() < 0.8 else self.malformed()
            b = self.valid() if r.random() < 0.8 else self.malformed()
            return a + b
        if k == 8:
            return self.request(version=b"HTTP/1.0", host=False if r.random() < 0.5 else None)
        if k == 9:   # empty values of wanted headers
            return self.request(headers=[h + b":" for h in self.c.headers] or [b"x-empty:"])
        if k == 10:  # normalisation bait
            p = self.pick(self.paths)
            t = self.pick([b"/a/../" + p.lstrip(b"/"), b"/" + p, b"/./" + p.lstrip(b"/"),
                           p.replace(b"a", b"%61", 1), p + b"%2f", p.replace(b"/", b"\\", 1),
                           p + b"#frag", p + b"/.", p + b"/..", p.replace(b"/", b"%2F", 1)])
            return self.request(target=t)
        if k == 11:  # absolute form, asterisk, authority
            return self.pick([self.request(target=b"http://example" + self.pick(self.paths)),
                              self.request(method=b"OPTIONS", target=b"*"),
                              self.request(target=b"example:80")])
        if k == 12:  # bodies
            return self.request(method=self.pick([b"POST", b"PUT", b"PATCH", b"GET"]),
                                body=b"b" * r.choice([0, 5, 4000, 20000]))
        if k == 13:
            return self.request(chunked=True, method=b"POST")
        if k == 14:  # Connection: close, then another request
            return self.request(headers=self.headers() + [b"Connection: close"]) + self.valid()
        if k == 15:  # leading empty line, long header value
            return self.pick([b"\r\n" + self.valid(),
                              self.request(headers=self.headers() + [b"x-long: " + b"v" * r.choice([4000, 8100, 9000])])])
        if k == 16:  # wanted header names in odd case / with OWS tabs
            hs = [n.title() + b":\t" + self.pick(self.values) + b"\t" for n in self.c.headers]
            return self.request(headers=hs)
        if k == 17:  # unusual but valid methods and targets
            return self.request(method=self.pick([b"M-SEARCH", b"PURGE", b"LINK", b"SOURCE", b"ACL"]),
                                target=self.path())
        if k == 18:  # query-only and odd characters
            return self.request(target=self.pick(self.paths) + self.pick([b"?", b"??", b"?a=b&c", b";p", b"%20", b"~"]))
        if k == 19:  # Expect: 100-continue with a body
            return self.request(method=b"POST", headers=self.headers() + [b"Expect: 100-continue"], body=b"e" * 10)
        if k == 20:  # three pipelined
            return self.valid() + self.valid() + self.valid()
        return self.request(host=self.pick([b"", b"EXAMPLE", b"example.", b"a:1:2"]))

    def malformed(self):
        r, k = self.r, self.r.randrange(20)
        if k == 0:
            return self.request(eol=b"\n")   # bare LF everywhere
        if k == 1:
            return self.valid().replace(b"\r\n", b"\n", 1)
        if k == 2:
            return self.request(headers=self.headers() + [b"x-a: 1\r"])   # bare CR
        if k == 3:
            return self.request(headers=self.headers() + [b"x-n: a\0b"])
        if k == 4:
            return self.request(target=self.path() + b"\0")
        if k == 5:   # CL + TE
            return self.request(method=b"POST", headers=self.headers() + [b"Content-Length: 5"], chunked=True)
        if k == 6:
            return self.request(method=b"POST", headers=self.headers() + [b"Content-Length: 3", b"Content-Length: 4"],
                                body=b"abcd")
        if k == 7:
            return self.request(method=b"POST", headers=self.headers() + [b"Content-Length: 1x"])
        if k == 8:   # obs-fold
            return self.request(headers=self.headers() + [b"x-f: a", b" folded"])
        if k == 9:
            return self.request(headers=self.headers() + [b"x-s : 1"])
        if k == 10:
            return self.request(version=self.pick([b"HTTP/1.2", b"HTTP/2.0", b"http/1.1", b"HTTP/1", b"HTTP/1.1 "]))
        if k == 11:
            return self.request(host=False)
        if k == 12:
            return self.request(headers=self.headers() + [b"Host: other"])
        if k == 13:   # a request line of 8 KiB+
            return self.request(target=b"/" + b"z" * r.choice([8192, 12000, 17000]))
        if k == 14:   # a head past 16 KiB
            return self.request(headers=[b"x-big: " + b"y" * r.choice([16400, 20000])])
        if k == 15:
            return self.request(method=b"POST", headers=self.headers() + [b"Transfer-Encoding: gzip"], body=b"zz")
        if k == 16:
            return self.pick([b"GET  / HTTP/1.1\r\nHost: a\r\n\r\n", b"GET /\tx HTTP/1.1\r\nHost: a\r\n\r\n",
                              b"GET / HTTP/1.1\r\nHost: a\r\nno-colon\r\n\r\n", b" GET / HTTP/1.1\r\nHost: a\r\n\r\n",
                              b"GET / HTTP/1.1\r\nHost: a\r\n\x01x: y\r\n\r\n", b"G\x7fT / HTTP/1.1\r\nHost: a\r\n\r\n"])
        if k == 17:   # CL.TE smuggling with a hidden request to a policy path
            hidden = self.request(target=self.pick(self.paths), host=b"h", headers=[])
            body = b"0\r\n\r\n" + hidden
            return self.request(method=b"POST", headers=[b"Content-Length: %d" % len(body),
                                                          b"Transfer-Encoding: chunked"], body=None) + body
        if k == 18:   # a chunked body with bad framing, then a request
            return (self.request(method=b"POST", headers=[b"Transfer-Encoding: chunked"]) + b"zz\r\nab\r\n0\r\n\r\n"
                    + self.valid())
        return self.request(headers=self.headers() + [b"x-u: \xff\xfe"])
