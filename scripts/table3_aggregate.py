#!/usr/bin/env python3
"""Table 3 over seeds: reads OUT/unadapted.json and OUT/seed<S>/<method>-finetune.json
(written by scripts/table3.sh) and prints a Markdown table with, per method,
the converted-unadapted PPL, the held-out PPL after LoRA as mean ± spread (half the
range over seeds) with each seed's value, the best validation NLL and its update, the
updates run and whether early stopping ended the run, and the validation NLL change
over the last quarter of each run (how flat validation was when it ended). The methods
are those of unadapted.json, in its order; one without a finetune.json for every seed is
listed with its unadapted PPL and "not run".

Usage: table3_aggregate.py OUT SEED [SEED ...]
"""
import json
import os
import sys

def late_change(val):
    """Relative change of validation NLL over the last quarter of the run's updates."""
    last = val[-1]["step"]
    ref = [v for v in val if v["step"] <= 0.75 * last][-1]
    return (val[-1]["nll"] - ref["nll"]) / ref["nll"]


def main(out, seeds):
    unadapted = json.load(open(f"{out}/unadapted.json"))  # dicts keep the file's order
    methods = list(unadapted)
    print("| method | PPL converted, unadapted | PPL after LoRA (mean ± half-range) | per seed "
          "| best val NLL (update) per seed | updates (stopped early) | val NLL change, last quarter |")
    print("|---|---:|---:|---|---|---|---|")
    adapted = []
    for m in methods:
        if not all(os.path.exists(f"{out}/seed{s}/{m}-finetune.json") for s in seeds):
            # Converted but not adapted in this run (METHODS left it out): say so.
            print(f"| {m} | {unadapted[m]:.4f} | not run | – | – | – | – |")
            continue
        adapted.append(m)
        runs = [json.load(open(f"{out}/seed{s}/{m}-finetune.json")) for s in seeds]
        ppl = [r["heldout_ppl"] for r in runs]
        mean = sum(ppl) / len(ppl)
        half = (max(ppl) - min(ppl)) / 2
        best = ", ".join(f"{r['best_val_nll']:.4f} ({r['best_step']})" for r in runs)
        ups = ", ".join(f"{r['updates']}{' (yes)' if r['stopped_early'] else ''}" for r in runs)
        late = ", ".join(f"{100 * late_change(r['val']):+.2f}%" for r in runs)
        print(f"| {m} | {unadapted[m]:.4f} | {mean:.4f} ± {half:.4f} | "
              f"{', '.join(f'{p:.4f}' for p in ppl)} | {best} | {ups} | {late} |")
    print(f"\nseeds: {' '.join(seeds)}; wall time per row (s): " +
          ", ".join(f"{m} {sum(json.load(open(f'{out}/seed{s}/{m}-finetune.json'))['seconds'] for s in seeds)}"
                    for m in adapted))


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2:])
