#!/usr/bin/env python3
"""Table 3 at 256K training tokens from scripts/table3_windowed.sh's records: a Markdown
table (per method: training tokens, validation NLL before and best, held-out PPL at
ctx 1024 and 4096, passkey recall at 1K/4K/8K) and an SVG of validation NLL against
training tokens, one line per method.

Reads RECORDS/<range>/<name>-{finetune,ppl1024,ppl4096,passkey}.json (a missing record
shows as "–"); writes RECORDS/<range>/table.md and RECORDS/<range>/val-nll.svg. A name
ending in "-t4096" was trained on 4096-token blocks (TRAIN_CTX=4096) and validated on
two 4096-token blocks (not the 1024-token validation blocks of the others): its curve is
drawn dashed, against the same axis of training tokens.

Usage: table3_curves.py RECORDS RANGE CTX
"""
import glob
import json
import os
import sys

COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf"]


def load(path):
    return json.load(open(path)) if os.path.exists(path) else None


def passkey_cell(j):
    """Hits per length as 'a/b/c', and the total, from oal eval --task passkey --json."""
    if j is None:
        return "–"
    by_len = {}
    for c in j["cells"]:
        by_len.setdefault(c["length"], 0)
        by_len[c["length"]] += c["correct"]
    total = sum(c["correct"] for c in j["cells"])
    trials = sum(c["trials"] for c in j["cells"])
    return "/".join(str(by_len[k]) for k in sorted(by_len)) + f" ({total}/{trials})"


def train_ctx(name, ctx):
    """The block length a run trained on: 4096 for "-t4096" runs, else the table's."""
    return 4096 if name.endswith("-t4096") else ctx


def svg(curves, ctx, out):
    """Validation NLL (y) against training tokens (x), one polyline per method."""
    W, H, L, R, T, B = 640, 400, 70, 170, 30, 50
    xs = [s * train_ctx(n, ctx) for n, c in curves.items() for s, _ in c]
    ys = [v for c in curves.values() for _, v in c]
    x0, x1 = 0, max(xs) or 1
    y0, y1 = min(ys), max(ys)
    pad = 0.05 * (y1 - y0 or 1)
    y0, y1 = y0 - pad, y1 + pad
    px = lambda x: L + (W - L - R) * (x - x0) / (x1 - x0)
    py = lambda y: T + (H - T - B) * (1 - (y - y0) / (y1 - y0))
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
             f'<rect width="{W}" height="{H}" fill="white"/>',
             f'<line x1="{L}" y1="{H-B}" x2="{W-R}" y2="{H-B}" stroke="black"/>',
             f'<line x1="{L}" y1="{T}" x2="{L}" y2="{H-B}" stroke="black"/>',
             f'<text x="{(L+W-R)/2}" y="{H-12}" text-anchor="middle">training tokens (one block per update; dashed: 4096-token blocks)</text>',
             f'<text x="16" y="{(T+H-B)/2}" transform="rotate(-90 16 {(T+H-B)/2})" text-anchor="middle">validation NLL (nats/token)</text>']
    for i in range(6):
        xv = x0 + (x1 - x0) * i / 5
        yv = y0 + (y1 - y0) * i / 5
        parts.append(f'<text x="{px(xv):.1f}" y="{H-B+16}" text-anchor="middle">{xv/1000:.0f}K</text>')
        parts.append(f'<text x="{L-6}" y="{py(yv)+4:.1f}" text-anchor="end">{yv:.2f}</text>')
        parts.append(f'<line x1="{L}" y1="{py(yv):.1f}" x2="{W-R}" y2="{py(yv):.1f}" stroke="#ddd"/>')
    for i, (name, c) in enumerate(sorted(curves.items())):
        col = COLORS[i % len(COLORS)]
        pts = " ".join(f"{px(s * train_ctx(name, ctx)):.1f},{py(v):.1f}" for s, v in c)
        dash = ' stroke-dasharray="6,4"' if train_ctx(name, ctx) != ctx else ""
        parts.append(f'<polyline fill="none" stroke="{col}" stroke-width="2"{dash} points="{pts}"/>')
        parts.append(f'<text x="{W-R+8}" y="{T+16+18*i}" fill="{col}">{name}</text>')
    parts.append("</svg>")
    open(out, "w").write("\n".join(parts) + "\n")


def main(records, rng, ctx):
    d = f"{records}/{rng.replace(':', '')}"
    names = sorted(os.path.basename(p)[: -len("-finetune.json")] for p in glob.glob(f"{d}/*-finetune.json"))
    lines = ["| method | block length | training tokens | val NLL before → best (update) | PPL ctx 1024 | PPL ctx 4096 | passkey 1K/4K/8K |",
             "|---|---:|---:|---|---:|---:|---:|"]
    curves = {}
    for n in names:
        f = load(f"{d}/{n}-finetune.json")
        p1, p4 = load(f"{d}/{n}-ppl1024.json"), load(f"{d}/{n}-ppl4096.json")
        curves[n] = [(v["step"], v["nll"]) for v in f["val"]]
        tokens = f["updates"] * train_ctx(n, ctx)
        cell = lambda j: f"{j['ppl']:.2f}" if j else "–"
        lines.append(f"| {n} | {train_ctx(n, ctx)} | {tokens:,} | {f['initial_val_nll']:.3f} → {f['best_val_nll']:.3f} ({f['best_step']}) "
                     f"| {cell(p1)} | {cell(p4)} | {passkey_cell(load(f'{d}/{n}-passkey.json'))} |")
    open(f"{d}/table.md", "w").write("\n".join(lines) + "\n")
    if curves:
        svg(curves, ctx, f"{d}/val-nll.svg")
    print("\n".join(lines))


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
