#!/usr/bin/env python3
"""Generates the benchmark policies that examples/ does not have, in the language as it is today
(if/else, starts_with, ==, in [..], Deny, Route, SetHeader, RemoveHeader). bench/perf.py calls these functions
for the complexity sweep; run this file to rewrite the committed copies in bench/policies/.

Addresses are placeholders: perf.py rewrites `service`/`upstream` lines to its own ports."""
import os

HEAD = """import "http.l7i";

service frontend = 127.0.0.1:8080;
upstream api = 127.0.0.1:9001;
upstream web = 127.0.0.1:9002;
"""


def rbac_path(i):
    """Path prefix that rule i allows (RBAC-style: path prefix + method set)."""
    return "/wrk2-api/review/%d/" % i


def rbac(n, header=None, comment=""):
    """n RBAC rules as an else-if chain (first match wins, no match -> 403), then the header
    mutation and routing by path in a second policy (a policy that does not decide passes the
    request on). `header`: also require a prefix of that header (complexity sweep: the data plane
    must find and match one big header)."""
    rules = []
    for i in range(1, n + 1):
        kw = "if" if i == 1 else "} else if"
        rules.append('  %s (starts_with(request.path, "%s") && request.method in ["GET", "POST"]) {\n'
                     '    SetHeader(request, "x-processed-by", "l7bench");' % (kw, rbac_path(i)))
    body = "\n".join(rules) + "\n  } else {\n    Deny(request, 403);\n  }\n"
    route = ('  if (starts_with(request.path, "/wrk2-api/review/")) {\n    Route(request, api);\n  }\n'
             '  Route(request, web);\n')
    if header:
        route = ('  if (!starts_with(request.header("%s"), "v")) {\n    Deny(request, 403);\n  }\n' % header) + route
    return ("// %s\n" % comment) + HEAD + """
policy rbac (
  act (HttpRequest request)
  context ('.*->frontend')
) {
  [Ingress]
""" + body + """}

policy route (
  act (HttpRequest request)
  context ('.*->frontend')
) {
  [Ingress]
""" + route + "}\n"


def hotel():
    # Telemetry: the data plane counts every request in its per-CPU l7_stats map (requests,
    # forwarded, denied, ...) whatever the policy says; the language has no counter action yet.
    return ("// Hotel Reservation (L7FP Table 5.2): record telemetry (the data plane's per-CPU\n"
            "// request counters), add x-processed-by, route by path.\n") + HEAD + """
policy hotel (
  act (HttpRequest request)
  context ('.*->frontend')
) {
  [Ingress]
  SetHeader(request, "x-processed-by", "l7bench");
  if (starts_with(request.path, "/recommendations")) {
    Route(request, api);
  }
  Route(request, web);
}
"""


def route_header(header):
    """Route[c] of the complexity sweep: find and match one (big) header, route by path."""
    return ("// Route[c] (L7FP 5.4): parse and match one header, route by path.\n") + HEAD + """
policy route (
  act (HttpRequest request)
  context ('.*->frontend')
) {
  [Ingress]
  if (!starts_with(request.header("%s"), "v")) {
    Deny(request, 403);
  }
  if (starts_with(request.path, "/wrk2-api/review/")) {
    Route(request, api);
  }
  Route(request, web);
}
""" % header


MUTATE_HEADERS = 8        # Mutate[c]: the request carries this many x-mN headers


def mutate_header_names():
    return ["x-m%d" % i for i in range(MUTATE_HEADERS)]


def mutate(c):
    """Mutate[c] (L7FP 5.4, "mutation removing bytes"): the request carries MUTATE_HEADERS
    headers; the policy removes round(c * MUTATE_HEADERS) of them and routes."""
    k = int(round(c * MUTATE_HEADERS))
    removes = "".join('  RemoveHeader(request, "%s");\n' % n for n in mutate_header_names()[:k])
    return ("// Mutate[c=%g] (L7FP 5.4): remove %d of the request's %d x-m headers, route.\n"
            % (c, k, MUTATE_HEADERS)) + HEAD + """
policy mutate (
  act (HttpRequest request)
  context ('.*->frontend')
) {
  [Ingress]
""" + removes + """  Route(request, api);
}
"""


if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    files = {
        "media_service.l7": rbac(50, comment="Media Service (L7FP Table 5.2): 50 RBAC rules "
                                 "(path prefix + method), add x-processed-by, route by path."),
        "hotel_reservation.l7": hotel(),
    }
    for name, text in files.items():
        with open(os.path.join(here, name), "w") as f:
            f.write(text)
        print("wrote", name)
