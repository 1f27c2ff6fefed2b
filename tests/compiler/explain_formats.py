#!/usr/bin/python3
"""l7c --explain in its three formats says the same thing: every fact of the JSON report (each
program with its instructions, estimate and processed count, each rule with its line, policy,
program and decision, each slow-path entry, each kernel limit with its worst program, each
chain) appears in the text and in the HTML report, written the same way.

Usage: explain_formats.py L7C POLICY.l7 [l7c options...]"""
import html
import json
import re
import subprocess
import sys

L7C, SRC, FLAGS = sys.argv[1], sys.argv[2], sys.argv[3:]


def run(fmt):
    r = subprocess.run([L7C, "--explain", "--format=" + fmt] + FLAGS + [SRC], capture_output=True, text=True)
    if r.returncode:
        sys.exit("l7c --explain --format=%s failed (%d): %s" % (fmt, r.returncode, r.stderr[-500:]))
    return r.stdout


doc, text, page = json.loads(run("json")), run("text"), html.unescape(run("html"))
rows = re.findall(r"<tr>(.*?)</tr>", page)
cells = [re.findall(r"<td>(.*?)</td>", row) for row in rows]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


def decision(rule):
    """What a rule decides, in words, from the JSON's fields."""
    d = rule["decision"]
    if d in ("forward", "fallback"):
        d += " " + rule["upstream"]
    elif d == "deny":
        d += " %d" % rule["status"]
    if rule["header_mutations"]:
        d += " + header mutations"
    if rule["table"] >= 0:
        d += " (table #%d: %d rule%s)" % (rule["table"], rule["table_rules"], "" if rule["table_rules"] == 1 else "s")
    return d


for p in doc["programs"]:
    proc = "-" if p["processed"] < 0 else str(p["processed"])
    est = "-" if p["subprogram"] else str(p["estimated_processed"])
    t = re.search(r"^%s +(\S+|\(.*?\)) +%d +%d +%s +%s " % (re.escape(p["name"]), p["insns"], p["policy_insns"], est, proc),
                  text, re.M)
    check(t, "text: program %s, %d insns, estimate %s, processed %s" % (p["name"], p["insns"], est, proc))
    h = [c for c in cells if c[:1] == [p["name"]]]
    check(h and h[0][2] == str(p["insns"]) and (p["subprogram"] or (h[0][4] == est and h[0][5] == proc)),
          "html: program %s, %d insns, estimate %s, processed %s (%s)" % (p["name"], p["insns"], est, proc, h[:1]))
    if p["verifier"]:
        check(re.search(r"^%s .*  %s$" % (re.escape(p["name"]), re.escape(p["verifier"])), text, re.M) and h and
              h[0][9] == p["verifier"], "program %s: verifier %r in text and html" % (p["name"], p["verifier"]))
for r in doc["rules"]:
    want = decision(r)
    t = re.search(r"^%d +%d +%s +%s +%d +[0-9.]+%%  %s$" % (r["id"], r["line"], re.escape(r["policy"]),
                                                           re.escape(r["program"]), r["insns"], re.escape(want)), text, re.M)
    check(t, "text: rule %d (line %d) in %s: %s" % (r["id"], r["line"], r["program"], want))
    check([str(r["id"]), str(r["line"]), r["policy"], r["program"], str(r["insns"])] in [c[:5] for c in cells] and
          any(c[:2] == [str(r["id"]), str(r["line"])] and c[6] == want for c in cells),
          "html: rule %d (line %d) in %s: %s" % (r["id"], r["line"], r["program"], want))
text_slow = text.split("\nslow path (userspace):\n", 1)[-1].splitlines()
html_slow = re.findall(r"<li>(.*?)</li>", page.split("Slow path</h2>", 1)[-1])
check(len(doc["slow_path"]) >= 3, "the slow path lists what goes there (%d entries)" % len(doc["slow_path"]))
for i, s in enumerate(doc["slow_path"]):
    check(i < len(text_slow) and text_slow[i] == "  " + s, "text: slow path entry %d: %s" % (i, s))
    check(i < len(html_slow) and html_slow[i] == s.replace("`", ""), "html: slow path entry %d: %s" % (i, s))
check(len(text_slow) == len(doc["slow_path"]) == len(html_slow),
      "slow path: %d entries in json, %d in text, %d in html" % (len(doc["slow_path"]), len(text_slow), len(html_slow)))
for lim in doc["limits"]:
    check(re.search(r"^  %s +%d of +%d %s +%s " % (lim["id"], lim["worst"], lim["limit"], re.escape(lim["unit"]),
                                                  re.escape(lim["program"])), text, re.M),
          "text: limit %s: %d of %d (%s)" % (lim["id"], lim["worst"], lim["limit"], lim["program"]))
    check([lim["id"], str(lim["worst"]), str(lim["limit"]), lim["unit"], lim["program"]] in [c[:5] for c in cells],
          "html: limit %s: %d of %d (%s)" % (lim["id"], lim["worst"], lim["limit"], lim["program"]))
for c in doc["chains"]:
    check(("  " + " -> ".join([c["host"]] + c["programs"])) in text, "text: chain of %s" % c["host"])
    check(" \u2192 ".join([c["host"]] + c["programs"]) in page, "html: chain of %s" % c["host"])
for n in doc["notes"]:
    check("warning: " + n in text and n in page, "note in text and html: %s" % n)

for f in failures:
    print("FAIL explain formats: %s" % f)
print("explain formats (%s %s): %d programs, %d rules, %d slow-path entries, %d limits, %d chains: %d failure(s)" %
      (SRC.rsplit("/", 1)[-1], " ".join(FLAGS), len(doc["programs"]), len(doc["rules"]), len(doc["slow_path"]),
       len(doc["limits"]), len(doc["chains"]), len(failures)))
sys.exit(1 if failures else 0)
