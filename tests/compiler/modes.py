#!/usr/bin/python3
"""l7c --mode=gateway|mesh: an object of one mode's programs is that mode's programs of the
full build, instruction for instruction.

For every example (and one split at the parse point, for the decide chains) the test compiles
the full object and both one-mode objects, then checks in each one-mode object that:
  - it holds every program of its mode that the full object holds, and none of the other's;
  - every function in it (programs, their subprograms and global functions) is the
    same-named function of the full object: the same instructions, the same relocations
    (maps, CO-RE), and calls to the same functions (a call's offset is resolved to its
    target's name, as the objects lay out .text differently).
A fast path that compiled a mode's programs differently (other inlining, other constants,
a machinery function dropped or kept differently) fails here.

usage: modes.py L7C EXAMPLES_DIR TMPDIR"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from bpfobj import elf  # noqa: E402

l7c, examples, tmp = (os.path.abspath(a) for a in sys.argv[1:4])
os.makedirs(tmp, exist_ok=True)


def mesh_prog(name):
    return name.startswith('l7_mesh_')   # progs.def: the mesh programs' names (and chain)


failures, checked = [], 0
cases = [(f, []) for f in sorted(os.listdir(examples)) if f.endswith('.l7')] + [('route.l7', ['--split=parse'])]
for f, extra in cases:
    tag = f[:-3] + ''.join(extra).replace('-', '').replace('=', '_')
    objs = {}
    for mode in ('both', 'gateway', 'mesh'):
        out = os.path.join(tmp, '%s-%s.o' % (tag, mode))
        r = subprocess.run([l7c, '--mode=' + mode] + extra + [f, '-o', out], cwd=examples,
                           capture_output=True, text=True)
        if r.returncode:
            failures.append('%s --mode=%s: exit %d: %s' % (tag, mode, r.returncode, r.stderr.strip()))
            break
        objs[mode] = elf(out)
    if len(objs) < 3:
        continue
    full = objs['both']
    for mode in ('gateway', 'mesh'):
        one = objs[mode]
        progs = {n for n, v in full.items() if v[0] != '.text'}
        want = {n for n in progs if mesh_prog(n) == (mode == 'mesh')}
        have = {n for n, v in one.items() if v[0] != '.text'}
        if have != want:
            failures.append('%s --mode=%s: programs %s, the full build\'s of this mode %s' %
                            (tag, mode, sorted(have), sorted(want)))
        for n, v in one.items():
            checked += 1
            if n not in full:
                failures.append('%s --mode=%s: %s is not in the full build' % (tag, mode, n))
            elif v != full[n]:
                what = ('section' if v[0] != full[n][0] else 'instructions' if v[1] != full[n][1]
                        else 'relocations' if v[2] != full[n][2] else 'calls')
                failures.append('%s --mode=%s: %s differs from the full build\'s (%s; %d vs %d instructions)' %
                                (tag, mode, n, what, len(v[1]) // 8, len(full[n][1]) // 8))
    if not any(v[0] == 'sk_msg' and n.startswith('l7_mesh_decide_') for n, v in full.items()) and extra:
        failures.append('%s: the full build has no decide chain to compare' % tag)

for m in failures:
    print('FAIL', m)
print('%d cases, %d functions compared, %d failures' % (len(cases), checked, len(failures)))
sys.exit(1 if failures or not checked else 0)
