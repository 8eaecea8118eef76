#!/usr/bin/env python3
"""Compares `oal bench --json` outputs of two builds cell by cell (scripts/bench-compare.sh).

Each input is one run's JSON (attention bench rows keyed by method, mode, dtype, n; model
bench rows by variant, mode, n). Runs of the same build are combined by the median of
their ms_median per cell; the table gives both and the ratio new / old (< 1: the new
build is faster). A cell is flagged "slower" when the ratio exceeds 1 + its noise: the
larger of --noise (default 3 %) and the cell's own run-to-run spread (max / min - 1 over
the runs of either build), so that a flag means more than this machine's noise.

Usage: bench_compare.py --old A1.json A2.json --new B1.json B2.json [--label L] [--noise 0.03]
Prints a Markdown table; exit status 0 (the table is the result, not a pass/fail)."""
import argparse
import json
import statistics


def cells(path):
    j = json.load(open(path))
    out = {}
    for r in j["rows"]:
        if r.get("skipped") or r.get("ms_median") is None:
            continue
        key = (r.get("method") or r.get("variant"), r["mode"], r.get("dtype", ""), r["n"])
        out[key] = r["ms_median"]
    machine = dict(j.get("machine", {}))
    machine.setdefault("kernels_isa", j.get("kernels_isa", "?"))  # the model bench's place
    return out, machine


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--old", nargs="+", required=True)
    ap.add_argument("--new", nargs="+", required=True)
    ap.add_argument("--label", default="")
    ap.add_argument("--noise", type=float, default=0.03)
    a = ap.parse_args()
    old = [cells(p) for p in a.old]
    new = [cells(p) for p in a.new]
    keys = sorted(set(old[0][0]) & set(new[0][0]), key=lambda k: (k[0], k[1], k[2], k[3]))

    def spread(runs, k):  # how far runs of one build differ on this cell
        v = [r[0][k] for r in runs if k in r[0]]
        return max(v) / min(v) - 1 if len(v) >= 2 else 0.0

    machine, new_machine = old[0][1], new[0][1]
    print(f"### {a.label}".rstrip())
    print()
    print(f"CPU {machine.get('cpu', '?')}, {machine.get('threads', '?')} threads, SIMD "
          f"{machine['kernels_isa']}; old "
          f"{machine.get('commit', '?')} vs new {new_machine.get('commit', '?')}; "
          f"{len(old)} + {len(new)} runs, interleaved; median per cell; a cell is slower "
          f"beyond max({100 * a.noise:.0f} %, its run-to-run spread)")
    print()
    print("| method | mode | dtype | N | old ms | new ms | new / old | noise | |")
    print("|---|---|---|---:|---:|---:|---:|---:|---|")
    slower = 0
    for k in keys:
        o = statistics.median([r[0][k] for r in old if k in r[0]])
        n = statistics.median([r[0][k] for r in new if k in r[0]])
        ratio = n / o
        noise = max(a.noise, spread(old, k), spread(new, k))
        flag = "slower" if ratio > 1 + noise else ""
        slower += bool(flag)
        print(f"| {k[0]} | {k[1]} | {k[2]} | {k[3]} | {o:.3f} | {n:.3f} | {ratio:.3f} | "
              f"{100 * noise:.0f} % | {flag} |")
    print()
    print(f"{slower} of {len(keys)} cells slower than the noise bound")


if __name__ == "__main__":
    main()
