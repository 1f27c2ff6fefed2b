#!/usr/bin/python3
"""The compiler's folders form layers: support (arenas, sources, diagnostics) below everything,
then dsl -> frontend -> ir -> codegen -> driver, each including only what is below it, and the
contract headers and data-plane code of stdlib/ shared by all (but including none of them).
l7run (runtime/) stands beside the compiler: it may use support and stdlib, never a stage.

Checked from the sources: every #include of a file in one folder by a file in another is an
edge; the edges must follow the layers (so the graph has no cycle), and the CMake libraries
must say the same: each folder's target links only targets below it, and an include edge has a
link path behind it. A C folder that is not placed here fails the test: placing it is the point.

Usage: layering.py SOURCE_DIR: checks the tree, then that the check finds what it must in small
made-up trees (a stage including one above it, a library linking one above it, an unplaced
folder), so that a check gone blind fails too."""
import os
import re
import shutil
import sys
import tempfile

# folder -> layer; a folder may include its own layer's files and lower layers' only
LAYERS = {
    "support": 0,
    "dsl": 1,
    "frontend": 2,
    "ir": 3,
    "codegen": 4,
    "import": 4,               # l7c import: YAML to .l7, beside codegen (neither uses the other)
    "driver": 5,
}
SHARED = {"stdlib"}            # included by every layer, includes none of them
BESIDE = {"runtime": {"support"} | SHARED}   # tools that are not stages: what they may include
UNCHECKED = {"tests", "bench", "docs", "scripts", "examples", "build"}
# where #include "x.h" / <x.h> is looked for, after the including file's own folder
INCLUDE_DIRS = ["support", "dsl/src", "frontend", "ir", "codegen", "import", "driver", "stdlib/include", "stdlib/bpf", "runtime"]
SOURCE = re.compile(r"\.(c|h|def)$")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)
ANGLE_DIRS = ["stdlib/include"]   # <l7/abi.h>; any other <x.h> is the system's (<limits.h> is not driver/limits.h)
TARGET = re.compile(r"^\s*add_(library|executable)\(\s*([A-Za-z0-9_]+)", re.M)
LINK = re.compile(r"^\s*target_link_libraries\(\s*([A-Za-z0-9_]+)([^)]*)\)", re.M)


def check(ROOT):
    """The problems of the tree at ROOT, and a summary line."""
    failures = []

    def top(path):
        return os.path.relpath(path, ROOT).split(os.sep)[0]

    def sources():
        for dirpath, dirnames, files in os.walk(ROOT):
            rel = os.path.relpath(dirpath, ROOT)
            parts = [] if rel == "." else rel.split(os.sep)
            if parts and (parts[0] in UNCHECKED or any(x.startswith(".") for x in parts) or "CMakeCache.txt" in files):
                dirnames[:] = []
                continue
            for f in files:
                if SOURCE.search(f):
                    yield os.path.join(dirpath, f)

    def resolve(name, including, angle):
        """The file an #include names: "x.h" beside the including file first, then the include
        dirs; <x.h> only in the contract headers' dir (else a system header)."""
        own = os.path.normpath(os.path.join(os.path.dirname(including), name))
        if not angle and os.path.isfile(own):
            return own
        dirs = ANGLE_DIRS if angle else INCLUDE_DIRS
        hits = [os.path.join(ROOT, d, name) for d in dirs if os.path.isfile(os.path.join(ROOT, d, name))]
        if len(hits) > 1:
            failures.append("%s: '%s' could be any of %s" % (os.path.relpath(including, ROOT), name,
                                                           ", ".join(os.path.relpath(h, ROOT) for h in hits)))
        return hits[0] if hits else None   # a system header

    def allowed(a, b):   # may folder a include (link) folder b?
        if b in SHARED:
            return True
        if a in SHARED:
            return False
        if a in BESIDE:
            return b in BESIDE[a]
        if b in BESIDE:
            return False
        return LAYERS[b] < LAYERS[a]

    edges = {}   # (from folder, to folder) -> an example
    folders = set()
    for path in sources():
        a = top(path)
        folders.add(a)
        text = open(path, encoding="utf-8", errors="replace").read()
        for delim, name in INCLUDE.findall(text):
            target = resolve(name, path, delim == "<")
            if not target:
                continue
            b = top(target)
            if a != b:
                edges.setdefault((a, b), "%s includes %s" % (os.path.relpath(path, ROOT), os.path.relpath(target, ROOT)))

    placed = set(LAYERS) | SHARED | set(BESIDE)
    for f in sorted(folders - placed):
        failures.append("folder %s/ has C sources but no place in the layers (tests/compiler/layering.py)" % f)
    for (a, b), why in sorted(edges.items()):
        if a in placed and b in placed and not allowed(a, b):
            failures.append("%s/ must not include %s/: %s" % (a, b, why))

    # ---- the CMake targets say the same ----
    owner = {}   # target -> folder
    links = {}   # target -> targets it links
    for folder in sorted(placed):
        for dirpath, _, files in os.walk(os.path.join(ROOT, folder)):
            if "CMakeLists.txt" in files:
                text = open(os.path.join(dirpath, "CMakeLists.txt")).read()
                for _, t in TARGET.findall(text):
                    owner[t] = folder
    owner.setdefault("l7abi", "stdlib")   # the contract headers' INTERFACE library (top-level CMakeLists.txt)
    for folder in sorted(placed):
        for dirpath, _, files in os.walk(os.path.join(ROOT, folder)):
            if "CMakeLists.txt" in files:
                text = open(os.path.join(dirpath, "CMakeLists.txt")).read()
                for t, rest in LINK.findall(text):
                    links.setdefault(t, set()).update(x for x in rest.split() if x in owner)

    for t, deps in sorted(links.items()):
        for d in sorted(deps):
            a, b = owner[t], owner[d]
            if a != b and not allowed(a, b):
                failures.append("CMake: %s (%s/) links %s (%s/), which is not below it" % (t, a, d, b))

    def reach(t, seen=None):
        seen = set() if seen is None else seen
        for d in links.get(t, ()):
            if d not in seen:
                seen.add(d)
                reach(d, seen)
        return seen

    for t in sorted(links):
        if t in reach(t):
            failures.append("CMake: %s links itself through its libraries" % t)
    for (a, b), why in sorted(edges.items()):
        if a in LAYERS and b in LAYERS and a != b:
            ta = [t for t, f in owner.items() if f == a]
            tb = {t for t, f in owner.items() if f == b}
            if ta and tb and not any(reach(t) & tb for t in ta):
                failures.append("CMake: nothing in %s/ links %s/, though %s" % (a, b, why))
    summary = "%d folders, %d include edges between them, %d CMake targets" % (len(folders), len(edges), len(owner))
    return failures, summary


def made_up(files):
    """A small tree of files (path -> text), checked; its problems."""
    d = tempfile.mkdtemp(prefix="layering.")
    try:
        for path, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(d, path)), exist_ok=True)
            with open(os.path.join(d, path), "w") as f:
                f.write(text)
        return check(d)[0]
    finally:
        shutil.rmtree(d)


def self_test():
    good = {
        "support/diag.h": "", "support/CMakeLists.txt": "add_library(l7support STATIC diag.c)\n",
        "frontend/frontend.h": '#include "diag.h"\n',
        "frontend/CMakeLists.txt": "add_library(l7frontend STATIC x.c)\ntarget_link_libraries(l7frontend PUBLIC l7support)\n",
        "ir/ir.h": '#include "frontend.h"\n#include <l7/abi.h>\n',
        "ir/CMakeLists.txt": "add_library(l7ir STATIC x.c)\ntarget_link_libraries(l7ir PUBLIC l7frontend)\n",
        "codegen/codegen.h": '#include "ir.h"\n', "codegen/CMakeLists.txt": "add_library(l7codegen STATIC x.c)\n"
        "target_link_libraries(l7codegen PUBLIC l7ir)\n",
        "stdlib/include/l7/abi.h": "",
    }
    cases = [
        ("a clean tree", {}, None),
        ("ir including codegen", {"ir/lower.c": '#include "codegen.h"\n'}, "ir/ must not include codegen/"),
        ("stdlib including a stage", {"stdlib/bpf/x.h": '#include "ir.h"\n'}, "stdlib/ must not include ir/"),
        ("a link upwards", {"frontend/CMakeLists.txt": "add_library(l7frontend STATIC x.c)\n"
                            "target_link_libraries(l7frontend PUBLIC l7support l7ir)\n"}, "links l7ir (ir/), which is not below"),
        ("an include without a link", {"ir/CMakeLists.txt": "add_library(l7ir STATIC x.c)\n"}, "nothing in ir/ links frontend/"),
        ("an unplaced folder", {"newstage/x.c": '#include "ir.h"\n'}, "folder newstage/ has C sources but no place"),
    ]
    bad = []
    for what, change, want in cases:
        got = made_up({**good, **change})
        if want is None and got:
            bad.append("%s: %s" % (what, got))
        if want is not None and not any(want in g for g in got):
            bad.append("%s: not found (got %s)" % (what, got or "nothing"))
    return bad


if __name__ == "__main__":
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", ".."))
    failures, summary = check(root)
    failures += ["the check itself: " + b for b in self_test()]
    for f in failures:
        print("FAIL", f)
    print("layering: %s; %d problems" % (summary, len(failures)))
    sys.exit(1 if failures else 0)
