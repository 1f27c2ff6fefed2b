#!/usr/bin/python3
"""dsl/package.json describes what dsl/ holds: every file or folder it names exists (no Node
bindings are built, so it names none), and the tree-sitter section points the CLI at the
highlight query and the file types. usage: dsl_package.py DSL_DIR"""
import glob
import json
import os
import sys

dsl = sys.argv[1]
pkg = json.load(open(os.path.join(dsl, "package.json")))
problems = []
for key in ("main", "types"):
    if key in pkg and not os.path.exists(os.path.join(dsl, pkg[key])):
        problems.append("%s: %s does not exist" % (key, pkg[key]))
for pattern in pkg.get("files", []):
    if not glob.glob(os.path.join(dsl, pattern), recursive=True):
        problems.append("files: nothing matches %s" % pattern)
for script, cmd in pkg.get("scripts", {}).items():
    if "node-gyp" in cmd and not os.path.exists(os.path.join(dsl, "binding.gyp")):
        problems.append("scripts.%s runs node-gyp, but there is no binding.gyp" % script)
for dep in pkg.get("dependencies", {}):
    problems.append("dependencies: %s (nothing here is built for Node)" % dep)
ts = pkg.get("tree-sitter", [])
if not ts:
    problems.append("no tree-sitter section")
for lang in ts:
    for key in ("highlights", "injections", "locals", "tags"):
        for f in [lang[key]] if isinstance(lang.get(key), str) else lang.get(key, []):
            if not os.path.exists(os.path.join(dsl, f)):
                problems.append("tree-sitter.%s: %s does not exist" % (key, f))
    if "highlights" not in lang:
        problems.append("tree-sitter: no highlights (queries/highlights.scm)")
    if not {"l7", "l7i"} <= set(lang.get("file-types", [])):
        problems.append("tree-sitter: file-types must name l7 and l7i")
for p in problems:
    print("dsl/package.json: " + p)
print("dsl/package.json: %d problems" % len(problems))
sys.exit(1 if problems else 0)
