#!/usr/bin/python3
"""The layering of runtime/ (written at the top of runtime/l7run.h) against its #include lines:
every file of runtime/ is in exactly one layer, a file includes only headers of its own layer or
a lower one, the files of one mode never include another mode's header, and the headers of
runtime/ include each other without a circle. Compiler-free: reads the sources only.

    layers.py RUNTIME_DIR"""
import os
import re
import sys

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what)
    return ok


def parse_layers(header):
    """[(layer, {files})], lowest first, and {mode: {files}}, from the comment of l7run.h: lines
    `LAYER: FILE...` (continued on lines of files alone) and `mode NAME: FILE...`."""
    comment = header.split("*/", 1)[0]
    files = r"((?:\w+\.[ch]\s*)+)$"
    layers, modes, cur = [], {}, None
    for line in comment.splitlines():
        line = line.strip().lstrip("/*").strip()
        m = re.match(r"^mode ([a-z]+):\s+" + files, line)
        if m:
            modes[m.group(1)] = set(m.group(2).split())
            cur = None
            continue
        m = re.match(r"^([a-z]+):\s+" + files, line)
        if m:
            cur = (m.group(1), set(m.group(2).split()))
            layers.append(cur)
        elif cur and re.match("^" + files, line):
            cur[1].update(line.split())   # a layer's list continued on the next line
        else:
            cur = None
    return layers, modes


def includes(path):
    """The quoted #include lines of a file (a .def table is data, not a header)."""
    return [m.group(1) for m in re.finditer(r'^\s*#\s*include\s+"([^"]+)"', open(path).read(), re.M)
            if not m.group(1).endswith(".def")]


def main(rt):
    layers, modes = parse_layers(open(os.path.join(rt, "l7run.h")).read())
    check(len(layers) >= 5 and len(modes) >= 2, "l7run.h names the layers and the modes: %r %r" % (layers, modes))
    rank = {}
    for i, (name, files) in enumerate(layers):
        for f in files:
            check(f not in rank, "%s is in one layer only" % f)
            rank[f] = i
    sources = sorted(f for f in os.listdir(rt) if f.endswith((".c", ".h")))
    for f in sources:
        check(f in rank, "%s is in a layer of l7run.h" % f)
    for f in rank:
        check(f in sources, "l7run.h's %s exists" % f)
    mode_of = {f: m for m, files in modes.items() for f in files}
    for f in mode_of:
        check(f in rank, "mode file %s is in a layer" % f)

    graph = {}
    for f in sources:
        inc = [h for h in includes(os.path.join(rt, f)) if h in sources]   # runtime's own headers
        graph[f] = inc
        for h in inc:
            if f in rank and h in rank:
                check(rank[h] <= rank[f], "%s (%s) includes %s (%s), a higher layer" %
                      (f, layers[rank[f]][0], h, layers[rank[h]][0]))
            if f in mode_of and h in mode_of:
                check(mode_of[f] == mode_of[h], "%s (mode %s) includes %s (mode %s)" % (f, mode_of[f], h, mode_of[h]))

    # no circle among the headers (DFS, white/grey/black)
    state = {}

    def visit(h, path):
        state[h] = 1
        for n in graph.get(h, []):
            if not n.endswith(".h"):
                continue
            if state.get(n) == 1:
                check(False, "headers include each other in a circle: %s" % " -> ".join(path + [n]))
            elif not state.get(n):
                visit(n, path + [n])
        state[h] = 2
    for h in sources:
        if h.endswith(".h") and not state.get(h):
            visit(h, [h])

    print("%d files in %d layers, %d modes; %d include lines checked" %
          (len(sources), len(layers), len(modes), sum(len(v) for v in graph.values())))
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--self-test":
        # the check must fail on a tree that breaks the rules: copy runtime/, add a mode file
        # that includes the other mode's header and a core header that includes a mode's
        import shutil
        import tempfile
        tmp = tempfile.mkdtemp(prefix="layers-")
        try:
            bad = os.path.join(tmp, "runtime")
            shutil.copytree(sys.argv[2], bad)
            open(os.path.join(bad, "mesh_client.c"), "a").write('\n#include "gateway.h"\n')
            open(os.path.join(bad, "l7run.h"), "a").write('\n#include "pool.h"\n')
            rc = main(bad)
            seen = "\n".join(failures)
            ok = rc == 1 and "mesh_client.c (mode mesh) includes gateway.h" in seen and \
                "l7run.h (core) includes pool.h (pool), a higher layer" in seen and "circle" in seen
            print("self-test:", "the broken tree fails as it should" if ok else "NOT caught: %r" % failures)
            sys.exit(0 if ok else 1)
        finally:
            shutil.rmtree(tmp)
    sys.exit(main(sys.argv[1]))
