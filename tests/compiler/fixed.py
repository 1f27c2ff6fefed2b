#!/usr/bin/python3
"""l7c's prebuilt machinery functions (codegen/fixed.c): an object whose fixed functions were
compiled when l7c was built and joined by libbpf's static linker is the object of the full
pipeline (l7c --machinery=full), function for function.

For every example (both modes, and each one-mode object), one split at the parse point (decide
chains), and a JWT policy (the JWT callbacks), the test compiles the object both ways and
checks that:
  - they hold the same functions, each with the same section, instructions, relocations (maps,
    CO-RE, data) and callees (tests/common/bpfobj.py);
  - each function's BTF linkage is the same (a callback is static: the kernel verifies it in
    its caller's context; the l7g_* functions are global);
  - the prebuilt path did join something (the object has functions the bundle holds).
A fixed function whose code a policy changes, a callee's inferred attributes lost across the
join, or a callback left global fails here.

usage: fixed.py L7C EXAMPLES_DIR TMPDIR"""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from bpfobj import elf  # noqa: E402

l7c, examples, tmp = (os.path.abspath(a) for a in sys.argv[1:4])
os.makedirs(tmp, exist_ok=True)


def btf_linkage(path):
    """{function name: linkage} from the object's BTF"""
    r = subprocess.run(['bpftool', 'btf', 'dump', 'file', path], capture_output=True, text=True, check=True)
    return dict(re.findall(r"\] FUNC '([^']+)' type_id=\d+ linkage=(\w+)", r.stdout))


failures, checked, joined = [], 0, 0
cases = [(f, []) for f in sorted(os.listdir(examples)) if f.endswith('.l7')]
cases += [('route.l7', ['--split=parse']), ('route.l7', ['--mode=gateway']), ('api_keys.l7', ['--mode=mesh'])]
for f, extra in cases:
    tag = f[:-3] + ''.join(extra).replace('-', '').replace('=', '_')
    objs, btf = {}, {}
    for how in ('prebuilt', 'full'):
        out = os.path.join(tmp, '%s-%s.o' % (tag, how))
        r = subprocess.run([l7c, '--machinery=' + how] + extra + [f, '-o', out], cwd=examples,
                           capture_output=True, text=True)
        if r.returncode:
            failures.append('%s --machinery=%s: exit %d: %s' % (tag, how, r.returncode, r.stderr.strip()))
            break
        objs[how], btf[how] = elf(out), btf_linkage(out)
    if len(objs) < 2:
        continue
    fast, full = objs['prebuilt'], objs['full']
    if set(fast) != set(full):
        failures.append('%s: functions only in the prebuilt object %s, only in the full one %s' %
                        (tag, sorted(set(fast) - set(full)), sorted(set(full) - set(fast))))
    for n, v in fast.items():
        if n not in full:
            continue
        checked += 1
        if v != full[n]:
            what = ('section' if v[0] != full[n][0] else 'instructions' if v[1] != full[n][1]
                    else 'relocations' if v[2] != full[n][2] else 'calls')
            failures.append('%s: %s differs from the full pipeline\'s (%s; %d vs %d instructions)' %
                            (tag, n, what, len(v[1]) // 8, len(full[n][1]) // 8))
        if btf['prebuilt'].get(n) != btf['full'].get(n):
            failures.append('%s: %s has BTF linkage %s, the full pipeline\'s %s' %
                            (tag, n, btf['prebuilt'].get(n), btf['full'].get(n)))
    # the joined units come after the policy's own .text: an object with nothing joined has
    # the full pipeline's layout, and the test would pass without testing anything
    r = subprocess.run(['readelf', '-sW', os.path.join(tmp, '%s-prebuilt.o' % tag)], capture_output=True, text=True)
    joined += sum(1 for line in r.stdout.splitlines() if ' HIDDEN ' in line)

for m in failures:
    print('FAIL', m)
print('%d cases, %d functions compared, %d joined symbols, %d failures' % (len(cases), checked, joined, len(failures)))
sys.exit(1 if failures or not checked or not joined else 0)
