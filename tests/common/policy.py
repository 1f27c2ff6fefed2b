"""The source of a test policy: what every end-to-end test writes around its own rules (the
imports, one service and its upstreams on loopback, the policy head acting on the service's
ingress), so that a test spells only its rules."""


def policy(name, front, upstreams, rules, service="front", imports=(), using=None,
           acts=("HttpRequest request",)):
    """Policy `name` on `service` = 127.0.0.1:front with upstreams [(name, where)]: where is a
    port on 127.0.0.1 or the declaration's text after `=` (an endpoint set); rules: the lines
    under [Ingress], as written; imports: more .l7i files after http.l7i; using: the text in
    `using (...)`; acts: the `act (...)` lines."""
    lines = ['import "%s";' % i for i in ("http.l7i",) + tuple(imports)]
    lines.append("service %s = 127.0.0.1:%d;" % (service, front))
    lines += ["upstream %s = %s;" % (u, "127.0.0.1:%d" % w if isinstance(w, int) else w) for u, w in upstreams]
    lines.append("policy %s (" % name)
    lines += ["  act (%s)" % a for a in acts]
    if using:
        lines.append("  using (%s)" % using)
    lines += ["  context ('.*->%s')" % service, ") {", "  [Ingress]", rules.rstrip("\n"), "}", ""]
    return "\n".join(lines)
