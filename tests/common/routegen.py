"""A routing table as a policy: N rules in one if / else if chain, each `request.method == "M" &&
request.path == "/..."` (or `starts_with(request.path, "/...")`, some without the method), each
with its own action: Route to one of several upstreams, every 7th a Deny with a status. The
kernel test tests/kernel/big_routes.py and the routes series of bench/scaling.py build theirs
here.

With specials (N >= 200), some rules are replaced by the cases a lookup table can get wrong:
an early prefix covering later exact paths and prefixes routed elsewhere (first match wins), a
later prefix covering an earlier exact path, nested prefixes either way round, one path with
three methods deciding three ways, a method-less rule before and after a method rule on one
path, and exact paths longer than 64 bytes that share their first 64 bytes (with each other
and with a 64-byte exact path)."""

METHODS = ["GET", "POST", "PUT", "DELETE"]
DENY = [403, 429, 401, 451]
LONG = "/long/" + "a" * 70          # 76 bytes: past the 64 bytes a table keys on


class Rule:
    def __init__(self, method, path, prefix, action):
        self.method, self.path, self.prefix = method, path, prefix
        self.action = action        # ("route", k) or ("deny", status)

    def cond(self):
        c = 'starts_with(request.path, "%s")' % self.path if self.prefix else 'request.path == "%s"' % self.path
        return 'request.method == "%s" && %s' % (self.method, c) if self.method else c

    def act(self):
        return "Route(request, u%d);" % self.action[1] if self.action[0] == "route" else "Deny(request, %d);" % self.action[1]


def plain(i, nup):
    """Rule i of the table: /rI/ as a prefix every third rule, /rI/op exact otherwise; every
    fifth without a method; every seventh a Deny, the others routed to upstream (3i + i/11) mod nup."""
    method = None if i % 5 == 4 else METHODS[i % 4]
    prefix = i % 3 == 0
    act = ("deny", DENY[(i // 7) % len(DENY)]) if i % 7 == 6 else ("route", (3 * i + i // 11) % nup)
    return Rule(method, "/r%d/" % i if prefix else "/r%d/op" % i, prefix, act)


def specials(n, nup):
    """{position: Rule}: the cases named in the module's docstring (nup >= 6)."""
    u = lambda k: ("route", k % nup)   # noqa: E731
    return {
        5: Rule(None, "/shadow/", True, u(1)),                  # covers the two below
        n // 2 + 3: Rule("GET", "/shadow/x", False, u(2)),
        n - 5: Rule("POST", "/shadow/deep/", True, u(3)),
        8: Rule("GET", "/p/a", False, u(0)),                    # a later prefix covers it
        n // 3: Rule(None, "/p/", True, u(4)),
        12: Rule("GET", "/n/deep/", True, u(2)),                # nested prefixes, the longer first
        n // 3 + 1: Rule("GET", "/n/", True, ("deny", 429)),
        13: Rule("PUT", "/m/", True, u(5)),                     # nested prefixes, the shorter first
        n // 3 + 2: Rule("PUT", "/m/deep/", True, u(1)),
        n // 2: Rule("GET", "/dual/item", False, u(1)),         # one path, three methods
        n // 2 + 1: Rule("POST", "/dual/item", False, u(3)),
        n // 2 + 2: Rule("DELETE", "/dual/item", False, ("deny", 403)),
        20: Rule(None, "/any", False, u(2)),                    # method-less first: covers GET /any
        n // 4: Rule("GET", "/any", False, u(0)),
        21: Rule("GET", "/mx", False, u(1)),                    # method rule first
        n // 4 + 1: Rule(None, "/mx", False, u(5)),
        n // 5: Rule("GET", LONG + "/one", False, u(3)),        # > 64 bytes, same first 64
        n // 5 + 1: Rule("GET", LONG + "/two", False, u(4)),
        n // 5 + 2: Rule("GET", LONG[:64], False, u(5)),        # exactly those 64 bytes
        n // 5 + 3: Rule("DELETE", LONG[:64], True, ("deny", 451)),  # and as a prefix
        n - 3: Rule(None, LONG + "/", True, u(0)),              # a long prefix, the last but two
    }


def rules(n, nup, with_specials=True):
    sp = specials(n, nup) if with_specials and n >= 200 else {}
    assert len(sp) in (0, 21), "special rules overlap"
    return [sp.get(i) or plain(i, nup) for i in range(n)]


def policy(rs, svc_port, up_ports):
    """The policy file: service front on svc_port, upstreams u0.. on up_ports, one policy."""
    body = "\n".join("  %s (%s) {\n    %s" % ("if" if i == 0 else "} else if", r.cond(), r.act()) for i, r in enumerate(rs))
    ups = "".join("upstream u%d = 127.0.0.1:%d;\n" % (k, p) for k, p in enumerate(up_ports))
    return ("service front = 127.0.0.1:%d;\n%s"
            "policy routes (act (HttpRequest request) context ('.*->front')) {\n%s\n  }\n}\n" % (svc_port, ups, body))
