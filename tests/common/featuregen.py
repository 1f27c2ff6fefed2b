"""A policy that mixes every declaration, predicate and action docs/language.md lists, with N
rules in its main policy: each rule tests its own path prefix /fI/ and one more feature, in
turn (method ==, a header ==, a regex on the path, the query, the Host, has_header and a source
prefix, method in [...] and the port, a JWT claim, a source set of 8 prefixes, port ranges, a
Counter's value, a Timer, a Limit, a regex on a header with a [proxy] action, a source address,
a regex on a claim, || and !=), and decides or acts in turn (Route to a single upstream or an
upstream set, Deny, Fallback, SetHeader / AddHeader / RemoveHeader on the request and the
response, Increment, Reset, Restart, Limit, ExtAuthz). Beside it: a hygiene policy (request and
response mutations for every request), an ALLOW policy (RBAC: /private/ needs x-role admin), a
policy whose context names an identity, and one that counts every request.
No two rules differ in only one field, so no rule table holds them: they stay code, the case
the splitter has to size (tests/kernel/feature_mix.py).

Every rule has a request that takes it (`Rule.request`); which rule and decision it gets is
l7c --eval's to say: JWTs count as invalid there and buckets as never empty, so the requests
carry no token and the buckets are large."""

METHODS = ["GET", "POST", "PUT", "DELETE"]
KINDS = 16


class Rule:
    def __init__(self, i, svc_port):
        self.i, self.k = i, i % KINDS
        self.prefix = "/f%d/" % i
        self.svc_port = svc_port

    def cond(self):
        i, p, k = self.i, self.prefix, self.k
        sw = 'starts_with(request.path, "%s")' % p
        return [
            'request.method == "%s" && request.path == "%sitem"' % (METHODS[i % 4], p),
            '%s && request.header("x-h%d") == "v%d"' % (sw, i % 4, i),
            'matches(request.path, "%s[0-9]+")' % p,
            '%s && request.query == "q=%d"' % (sw, i),
            '%s && request.host == "h%d.example"' % (sw, i),
            '%s && request.has_header("x-flag") && request.source in 127.0.0.0/8' % sw,
            '%s && request.method in ["PUT", "PATCH"] && request.port == %d' % (sw, self.svc_port),
            '%s && auth.valid && auth.claim("sub") == "u%d"' % (sw, i),
            '%s && !(request.source in [10.%d.0.0/16, 10.%d.1.0/24, 172.16.%d.0/24, 192.168.%d.0/24, '
            '10.200.%d.7, 10.201.%d.0/24, 10.202.%d.0/24, 10.203.%d.0/24])' % ((sw,) + (i % 250,) * 8),
            '%s && (request.port < 1024 || request.port in [80, 8080, %d])' % (sw, self.svc_port),
            '%s && hits.value >= %d' % (sw, 1000000 + i),
            '%s && IsTimeSince(window, %d)' % (sw, 100000 + i),
            '%s && request.header("x-user") != ""' % sw,
            '%s && matches(request.header("x-h%d"), "[a-z]+-%d")' % (sw, i % 4, i),
            '%s && request.source == 10.1.%d.%d' % (sw, i // 250 % 250, i % 250),
            '(request.path == "%sa" || request.path == "%sb") && request.method != "DELETE" && '
            'matches(auth.claim("role"), "admin|ops%d")' % (p, p, i),
        ][k]

    def act(self):
        i, k = self.i, self.k
        up = "u%d" % (i % 3)
        return [
            ["Route(request, %s);" % up],
            ["Deny(request, %d);" % (403, 451, 429, 418)[i // KINDS % 4]],
            ['SetHeader(request, "x-tag", "t%d");' % (i % 16), "Route(request, %s);" % up],
            ['AddHeader(request, "x-via", "v%d");' % (i % 16), "Route(request, pool);"],
            ['RemoveHeader(request, "x-drop");', "Route(request, %s);" % up],
            ["Deny(request, 403);"],
            ["Fallback(request);"],
            ["Route(request, pool);"],
            ['SetHeader(response, "x-resp", "r%d");' % (i % 16), "Route(request, %s);" % up],
            ['AddHeader(request, "x-port", "p%d");' % (i % 16), "Route(request, %s);" % up],
            ["Deny(request, 429);"],
            ["Reset(hits);", "Restart(window);", "Route(request, %s);" % up],
            ["Limit(per_user, request.header(\"x-user\"));", "Increment(hits);", "Route(request, pool);"],
            ['ExtAuthz(request, "authz");'],
            ["Route(request, %s);" % up],
            ['RemoveHeader(response, "server");', 'AddHeader(response, "x-resp2", "s%d");' % (i % 16),
             "Route(request, %s);" % up],
        ][k]

    def request(self):
        """The raw request this rule is written for (without a token: kind 7's and 15's claims
        never hold, so they fall through to the next rule)."""
        i, p, k = self.i, self.prefix, self.k
        method, target, fields = "GET", p + "x", []
        if k == 0:
            method, target = METHODS[i % 4], p + "item"
        elif k == 1:
            fields = [("x-h%d" % (i % 4), "v%d" % i)]
        elif k == 2:
            target = p + "%d" % (i * 7)
        elif k == 3:
            target = p + "x?q=%d" % i
        elif k == 4:
            fields = [("host", "h%d.example" % i)]
        elif k == 5:
            fields = [("x-flag", "")]
        elif k == 6:
            method = "PUT"
        elif k == 12:
            fields = [("x-user", "user%d" % i)]
        elif k == 13:
            fields = [("x-h%d" % (i % 4), "abc-%d" % i)]
        elif k == 15:
            target = p + "a"
        if not any(n == "host" for n, _ in fields):
            fields = [("host", "front")] + fields
        fields += [("x-drop", "1"), ("x-internal", "secret")]
        head = "%s %s HTTP/1.1\r\n" % (method, target) + "".join("%s: %s\r\n" % f for f in fields)
        return (head + "\r\n").encode()


def rules(n, svc_port):
    return [Rule(i, svc_port) for i in range(n)]


def policy(rs, svc_port, up_ports, pool_ports, fallback_port, key_file):
    """The policy file: service front on svc_port; upstreams u0..u2 on up_ports, the set `pool`
    (hash of x-user) on pool_ports, the fallback proxy on fallback_port; JWT key in key_file."""
    body = "\n".join("  %s (%s) {\n%s" % ("if" if j == 0 else "} else if", r.cond(),
                                          "".join("    %s\n" % a for a in r.act()))
                     for j, r in enumerate(rs))
    body = body + "\n  } else {\n    Route(request, u0);\n  }" if rs else "  Route(request, u0);"
    ups = "".join("upstream u%d = 127.0.0.1:%d;\n" % (k, p) for k, p in enumerate(up_ports))
    pool = ", ".join("127.0.0.1:%d%s" % (p, " weight 2" if j == 0 else "") for j, p in enumerate(pool_ports))
    return """import "http.l7i";
import "state.l7i";

service front = 127.0.0.1:%(svc)d;
%(ups)supstream pool = [%(pool)s] balance hash(header "x-user");
fallback proxy = 127.0.0.1:%(fb)d;
identity partners = [10.9.0.0/16, 10.10.0.7];

Jwt auth { key_file = "%(key)s"; issuer = "feature-mix"; audience = "front"; leeway = 5; }
TokenBucket per_user { rate = 100000; burst = 100000; status = 429; }

policy mix (
  act (HttpRequest request)
  act (HttpResponse response)
  using (Jwt auth)
  using (Counter hits)
  using (Timer window)
  using (TokenBucket per_user)
  context ('.*->front')
) {
  [Ingress]
%(body)s
}
---
policy hygiene (
  act (HttpRequest request)
  act (HttpResponse response)
  context ('.*->front')
) {
  RemoveHeader(request, "x-internal");
  SetHeader(request, "x-forwarded-proto", "http");
  if (starts_with(request.path, "/static/")) {
    SetHeader(response, "cache-control", "max-age=60");
  }
}
---
policy rbac (
  act (HttpRequest request)
  context ('.*->front')
) {
  if (!starts_with(request.path, "/private/")) {
    Allow(request);
  } else if (request.header("x-role") == "admin") {
    Allow(request);
  }
}
---
policy partner_guard (
  act (HttpRequest request)
  context ('partners->front')
) {
  if (request.path == "/partners-only") {
    Deny(request, 403);
  }
}
---
policy count_all (
  act (HttpRequest request)
  using (Counter total)
) {
  Increment(total);
}
""" % dict(svc=svc_port, ups=ups, pool=pool, fb=fallback_port, key=key_file, body=body)
