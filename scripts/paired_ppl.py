#!/usr/bin/env python3
"""Paired comparison of two `oal ppl --json` runs over the same blocks of the same text.

Perplexities of two models on a few long blocks carry standard errors larger than the
gap between them, but the blocks are shared: the per-block difference of mean NLL
(`block_nll`, B minus A) varies far less than either NLL. Prints the mean difference, its
standard error over blocks, the PPL ratio B/A = exp(mean difference) with a 95 %
interval, and how many blocks favour each model.

  scripts/paired_ppl.py A.json B.json [--json]
"""
import argparse
import json
import math
import sys


def load(path):
    try:
        with open(path) as f:
            run = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        sys.exit(f"paired_ppl: cannot read {path}: {e}")
    if not isinstance(run, dict) or not isinstance(run.get("block_nll"), list):
        sys.exit(f"paired_ppl: {path} has no block_nll list (expected `oal ppl --json` output)")
    return run


def compare(a, b):
    for key in ("ctx", "first_block", "text"):
        if a.get(key) != b.get(key):
            sys.exit(f"paired_ppl: the runs differ in {key}: {a.get(key)!r} vs {b.get(key)!r}")
    if len(a["block_nll"]) != len(b["block_nll"]):
        sys.exit(f"paired_ppl: {len(a['block_nll'])} vs {len(b['block_nll'])} blocks")
    d = [y - x for x, y in zip(a["block_nll"], b["block_nll"])]
    n = len(d)
    if n < 2:
        sys.exit("paired_ppl: need at least two blocks for a standard error")
    mean = sum(d) / n
    se = math.sqrt(sum((x - mean) ** 2 for x in d) / (n - 1) / n)
    return {"blocks": n, "ctx": a["ctx"], "first_block": a.get("first_block", 0),
            "ppl_a": a["ppl"], "ppl_b": b["ppl"], "mean_nll_diff": mean, "nll_diff_stderr": se,
            "ppl_ratio": math.exp(mean), "ppl_ratio_95": [math.exp(mean - 1.96 * se),
                                                          math.exp(mean + 1.96 * se)],
            "blocks_b_lower": sum(x < 0 for x in d), "blocks_a_lower": sum(x > 0 for x in d)}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("a", help="`oal ppl --json` output of model A")
    p.add_argument("b", help="the same for model B (same text, ctx and blocks)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    args = p.parse_args()
    r = compare(load(args.a), load(args.b))
    if args.json:
        print(json.dumps(r, indent=1))
        return
    lo, hi = r["ppl_ratio_95"]
    print(f"{r['blocks']} blocks of {r['ctx']} from block {r['first_block']}: "
          f"PPL A {r['ppl_a']:.3f}, B {r['ppl_b']:.3f}")
    print(f"B - A mean NLL {r['mean_nll_diff']:+.5f} ± {r['nll_diff_stderr']:.5f}; "
          f"PPL ratio B/A {r['ppl_ratio']:.4f} (95 %: {lo:.4f}-{hi:.4f}); "
          f"B lower on {r['blocks_b_lower']}, A lower on {r['blocks_a_lower']}")


if __name__ == "__main__":
    main()
