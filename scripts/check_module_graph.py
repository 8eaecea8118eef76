#!/usr/bin/env python3
"""Checks that every src/oal/<module> includes only headers of the modules it may depend
on (the one-way order of CMakeLists.txt's oal_module() lines), and that the declared
edges are exactly the ones the code uses: each module declares the transitive reduction
of what its files include (no edge the code does not need, none implied by another).
Prints that graph with --print. Exit status 1 on a back-edge, an undeclared edge or a
declared edge that differs from the used graph's reduction.

Usage: scripts/check_module_graph.py [--print]"""
import pathlib
import re
import sys

root = pathlib.Path(__file__).resolve().parent.parent
cmake = (root / "CMakeLists.txt").read_text()
declared = {}
for name, deps in re.findall(r"^oal_module\((\w+)\s+([^)]*)\)", cmake, re.M):
    declared[name] = [d[4:] for d in deps.split() if d.startswith("oal_") and d != "oal_deps"]

def closure(m, seen=None):
    seen = set() if seen is None else seen
    for d in declared.get(m, []):
        if d not in seen:
            seen.add(d)
            closure(d, seen)
    return seen

used = {m: set() for m in declared}
bad = []
for m in declared:
    for f in sorted((root / "src/oal" / m).rglob("*")):
        if f.suffix not in (".h", ".cpp"):
            continue
        for inc in re.findall(r'#include\s+"oal/(\w+)/', f.read_text(errors="replace")):
            if inc == m:
                continue
            used[m].add(inc)
            if inc not in closure(m):
                bad.append(f"{f.relative_to(root)} includes oal/{inc}/ but {m} does not depend on {inc}")

def used_closure(m, seen=None):
    seen = set() if seen is None else seen
    for d in used.get(m, ()):
        if d not in seen:
            seen.add(d)
            used_closure(d, seen)
    return seen


def reduction(m):
    """What m uses directly, less what it reaches through another module it uses."""
    return used[m] - set().union(*[used_closure(d) for d in used[m]] or [set()])


for m in declared:
    if set(declared[m]) != reduction(m):
        bad.append(f"{m} declares {sorted(declared[m]) or 'nothing'} in CMakeLists.txt but its "
                   f"files use {sorted(reduction(m)) or 'nothing'} (transitively reduced)")

if "--print" in sys.argv:
    for m in declared:
        direct = sorted(reduction(m))
        print(f"{m:10} -> {', '.join(direct) if direct else '(nothing)'}")
for b in bad:
    print("module graph:", b, file=sys.stderr)
sys.exit(1 if bad else 0)
