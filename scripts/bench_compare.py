#!/usr/bin/env python3
"""Compares `oal bench --json` outputs of two builds cell by cell (scripts/bench-compare.sh).

Each input is one run's JSON (attention bench rows keyed by method, mode, dtype, n; model
bench rows by variant, mode, n). Runs of the same build are combined by the median of
their ms_median per cell; the table gives both and the ratio new / old (< 1: the new
build is faster). A cell is flagged "slower" when the ratio exceeds 1 + --noise; --noise
defaults to the largest old-vs-old spread the runs themselves show (at least 3 %), so
that a flag means more than run-to-run noise.

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
    return out, j.get("machine", {})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--old", nargs="+", required=True)
    ap.add_argument("--new", nargs="+", required=True)
    ap.add_argument("--label", default="")
    ap.add_argument("--noise", type=float, default=None)
    a = ap.parse_args()
    old = [cells(p) for p in a.old]
    new = [cells(p) for p in a.new]
    keys = sorted(set(old[0][0]) & set(new[0][0]), key=lambda k: (k[0], k[1], k[2], k[3]))
    spread = 0.0
    for k in keys:  # old-vs-old: how far two runs of one build differ on this machine
        v = [o[0][k] for o in old if k in o[0]]
        if len(v) >= 2:
            spread = max(spread, max(v) / min(v) - 1)
    noise = a.noise if a.noise is not None else max(0.03, spread)
    machine = old[0][1]
    print(f"### {a.label}".rstrip())
    print()
    print(f"CPU {machine.get('cpu', '?')}, {machine.get('threads', '?')} threads, SIMD "
          f"{machine.get('kernels_isa', '?')}; old {machine.get('commit', '?')} vs new "
          f"{new[0][1].get('commit', '?')}; {len(old)} + {len(new)} runs, interleaved; "
          f"median per cell; noise bound {100 * noise:.1f} % (old-vs-old spread "
          f"{100 * spread:.1f} %)")
    print()
    print("| method | mode | dtype | N | old ms | new ms | new / old | |")
    print("|---|---|---|---:|---:|---:|---:|---|")
    slower = 0
    for k in keys:
        o = statistics.median([r[0][k] for r in old if k in r[0]])
        n = statistics.median([r[0][k] for r in new if k in r[0]])
        ratio = n / o
        flag = "slower" if ratio > 1 + noise else ""
        slower += bool(flag)
        print(f"| {k[0]} | {k[1]} | {k[2]} | {k[3]} | {o:.3f} | {n:.3f} | {ratio:.3f} | {flag} |")
    print()
    print(f"{slower} of {len(keys)} cells slower than the noise bound")


if __name__ == "__main__":
    main()
