#!/usr/bin/env python3
"""Merges llama-bench's JSON (-o json) and `oal bench --model --json` of one run into
the side-by-side markdown table of docs/benchmarks.md (scripts/bench-peer.sh calls it).

  peer_table.py --llama PREFILL.json --llama DECODE.json --oal OAL.json
  peer_table.py --llama SWEEP.jsonl --oal OAL.json   # llama-batched-bench --output-format jsonl

Prefill rows: tokens/s for N prompt tokens (llama-bench -p N, or llama-batched-bench's
prefill of pp = N; oal prefill N). Decode rows: ms per generated token after a context
of D tokens (llama-bench -n 32 -d D, or llama-batched-bench's 32 tokens generated after
its prefill of pp = D; oal decode at context D). Both sides' numbers are medians of their repeats (llama-bench's
samples_ts, oal's ms_median). The ratio column is llama.cpp time / oal time (> 1: oal
faster).
"""
import argparse
import json
import statistics


def sweep_rows(path, out):
    """llama-batched-bench's JSONL: one line per pp, its prefill and its decode at depth pp."""
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            if r["pl"] != 1:
                raise SystemExit(f"peer_table: {path}: expected one sequence (-npl 1), got pl={r['pl']}")
            tool = {"cpu": "the same machine", "commit": "llama-batched-bench"}
            out[("prefill", r["pp"])] = {"tokens_per_s": r["speed_pp"], "ms": 1e3 * r["t_pp"], **tool}
            out[("decode", r["pp"])] = {"tokens_per_s": r["speed_tg"], "ms": 1e3 * r["t_tg"] / r["tg"], **tool}


def llama_rows(paths):
    out = {}
    for p in paths:
        if p.endswith(".jsonl"):
            sweep_rows(p, out)
            continue
        with open(p) as f:
            for r in json.load(f):
                ts = statistics.median(r.get("samples_ts") or [r["avg_ts"]])
                if r["n_gen"] == 0:
                    out[("prefill", r["n_prompt"])] = {"tokens_per_s": ts, "ms": 1e3 * r["n_prompt"] / ts,
                                                       "cpu": r.get("cpu_info", ""), "commit": r.get("build_commit", "")}
                else:
                    out[("decode", r.get("n_depth", 0))] = {"tokens_per_s": ts, "ms": 1e3 / ts,
                                                            "cpu": r.get("cpu_info", ""), "commit": r.get("build_commit", "")}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--llama", action="append", required=True)
    ap.add_argument("--oal", required=True)
    a = ap.parse_args()
    peer = llama_rows(a.llama)
    with open(a.oal) as f:
        oal = json.load(f)
    variants = []
    for r in oal["rows"]:
        if r["variant"] not in variants:
            variants.append(r["variant"])
    by = {(r["variant"], r["mode"], r["n"]): r for r in oal["rows"]}
    some = next(iter(peer.values()), {})
    ubatch = oal.get("ubatch", 0)  # runs before --ubatch prefilled the whole prompt
    print(f"model: {oal['model']} ({oal['parameters'] / 1e6:.1f}M parameters); "
          f"oal kernels {oal['kernels_isa']}, KV cache {oal.get('kv_cache', 'f32')}, prefill "
          f"{'ubatch ' + str(ubatch) if ubatch else 'whole prompt'}, "
          f"{oal['machine']['threads']} threads on "
          f"{oal['machine']['cpu']}; llama.cpp {some.get('commit', '?')} on {some.get('cpu', '?')}\n")
    head = "| mode | N / context | llama.cpp | " + " | ".join(f"oal {v}" for v in variants) + \
           " | " + " | ".join(f"ratio {v}" for v in variants) + " |"
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for (mode, n) in sorted(peer, key=lambda k: (k[0] != "prefill", k[1])):
        p = peer[(mode, n)]
        cells, ratios = [], []
        for v in variants:
            r = by.get((v, mode, n))
            if r is None:
                cells.append("")
                ratios.append("")
                continue
            ms = r["ms_median"]
            cells.append(f"{r['tokens_per_s']:.1f} tok/s" if mode == "prefill" else f"{ms:.2f} ms")
            ratios.append(f"{p['ms'] / ms:.2f}×")
        peer_cell = f"{p['tokens_per_s']:.1f} tok/s" if mode == "prefill" else f"{p['ms']:.2f} ms"
        print(f"| {mode} | {n} | {peer_cell} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
    rss = {v: max(r["peak_rss_bytes"] for r in oal["rows"] if r["variant"] == v) for v in variants}
    print("\npeak RSS of the oal run (MiB): " + ", ".join(f"{v} {b / 2**20:.0f}" for v, b in rss.items()))


if __name__ == "__main__":
    main()
