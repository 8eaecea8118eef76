#!/usr/bin/env python3
"""Fig. 2(b) from scripts/fig2b_smollm2.sh's runs: frozen attention-output MSE (before
W_o) of OAL against the group budget G and the per-head parameter count (G+1)(G+2)/2
(both axes log-scaled in the figure).

Reads OUT/G<g>/fidelity.json (oal fidelity --json) for every budget given; writes
OUT/table.md (the drawn head, the mean over the layer's heads, and each head's MSE
relative to its own G = smallest-budget value) and OUT/fig2b.svg (MSE of the drawn head
and of the head mean against the parameter count, log-scaled MSE axis).

Usage: fig2b_plot.py OUT HEAD G [G ...]
"""
import json
import math
import sys


def params(g):
    return (g + 1) * (g + 2) // 2


def load(out, budgets):
    rows = {}
    for g in budgets:
        j = json.load(open(f"{out}/G{g}/fidelity.json"))
        oal = j["methods"]["oal"]
        rows[g] = {(h["layer"], h["head"]): h["mse_before_wo"] for h in oal["heads"]}
    return rows


def table(rows, budgets, head):
    keys = sorted(rows[budgets[0]])
    layer = keys[0][0]
    base = {k: rows[budgets[0]][k] for k in keys}
    out = [f"Layer {layer}, {len(keys)} query heads; MSE before W_o on the held-out blocks.",
           "",
           f"| G | parameters per head | head {head} MSE | mean MSE over heads | "
           f"mean MSE / G = {budgets[0]} | heads improved vs G = {budgets[0]} |",
           "|---:|---:|---:|---:|---:|---:|"]
    for g in budgets:
        v = rows[g]
        mean = sum(v[k] for k in keys) / len(keys)
        ratio = sum(v[k] / base[k] for k in keys) / len(keys)
        better = sum(v[k] < base[k] for k in keys)
        out.append(f"| {g} | {params(g)} | {v[(layer, head)]:.4e} | {mean:.4e} | {ratio:.3f} | "
                   f"{better} / {len(keys)} |")
    return "\n".join(out) + "\n"


def svg(rows, budgets, head):
    keys = sorted(rows[budgets[0]])
    layer = keys[0][0]
    series = [
        (f"layer {layer} head {head}", "#1f77b4",
         [(params(g), rows[g][(layer, head)]) for g in budgets]),
        (f"mean over the {len(keys)} heads", "#d62728",
         [(params(g), sum(rows[g][k] for k in keys) / len(keys)) for g in budgets]),
    ]
    W, H, L, R, T, B = 560, 360, 80, 20, 30, 50
    xs = [math.log10(p) for _, _, pts in series for p, _ in pts]
    ys = [math.log10(m) for _, _, pts in series for _, m in pts]
    x0, x1 = min(xs) - 0.05, max(xs) + 0.05
    y0, y1 = math.floor(min(ys) * 10) / 10, math.ceil(max(ys) * 10) / 10
    if y1 - y0 < 0.2:
        y0, y1 = y0 - 0.1, y1 + 0.1

    def px(x):  # log-scaled parameter count
        return L + (math.log10(x) - x0) / (x1 - x0) * (W - L - R)

    def py(y):
        return T + (y1 - math.log10(y)) / (y1 - y0) * (H - T - B)

    s = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
         f'font-family="sans-serif" font-size="12">',
         f'<rect width="{W}" height="{H}" fill="white"/>',
         f'<text x="{W / 2}" y="18" text-anchor="middle">Fig. 2(b) on SmolLM2-135M: '
         f'OAL frozen MSE against the group budget</text>',
         f'<line x1="{L}" y1="{H - B}" x2="{W - R}" y2="{H - B}" stroke="black"/>',
         f'<line x1="{L}" y1="{T}" x2="{L}" y2="{H - B}" stroke="black"/>',
         f'<text x="{(L + W - R) / 2}" y="{H - 12}" text-anchor="middle">parameters per head '
         f'(G+1)(G+2)/2, log scale</text>',
         f'<text x="16" y="{(T + H - B) / 2}" text-anchor="middle" '
         f'transform="rotate(-90 16 {(T + H - B) / 2})">MSE before W_o (log scale)</text>']
    for g in budgets:
        x = px(params(g))
        s.append(f'<line x1="{x}" y1="{H - B}" x2="{x}" y2="{H - B + 4}" stroke="black"/>')
        s.append(f'<text x="{x}" y="{H - B + 16}" text-anchor="middle">{params(g)}</text>')
        s.append(f'<text x="{x}" y="{T + 12}" text-anchor="middle" fill="#666">G={g}</text>')
    for k in range(int(math.floor(y0 * 10)), int(math.ceil(y1 * 10)) + 1):
        e = k / 10
        if abs(e * 2 - round(e * 2)) > 1e-9:
            continue  # ticks every half decade
        y = T + (y1 - e) / (y1 - y0) * (H - T - B)
        s.append(f'<line x1="{L - 4}" y1="{y}" x2="{L}" y2="{y}" stroke="black"/>')
        s.append(f'<text x="{L - 6}" y="{y + 4}" text-anchor="end">{10 ** e:.2g}</text>')
    for i, (name, color, pts) in enumerate(series):
        path = " ".join(f"{px(p):.1f},{py(m):.1f}" for p, m in pts)
        s.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2"/>')
        for p, m in pts:
            s.append(f'<circle cx="{px(p):.1f}" cy="{py(m):.1f}" r="3" fill="{color}"/>')
        s.append(f'<text x="{W - R - 200}" y="{T + 34 + 16 * i}" fill="{color}">{name}</text>')
    s.append("</svg>")
    return "\n".join(s) + "\n"


def main(out, head, budgets):
    rows = load(out, budgets)
    open(f"{out}/table.md", "w").write(table(rows, budgets, head))
    open(f"{out}/fig2b.svg", "w").write(svg(rows, budgets, head))
    print(open(f"{out}/table.md").read(), end="")


if __name__ == "__main__":
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    main(sys.argv[1], int(sys.argv[2]), [int(g) for g in sys.argv[3:]])
