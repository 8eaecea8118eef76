#!/usr/bin/env python3
"""Per-token time of OAL decoding from Python, Qwen2.5-0.5B attention shape (Hq 14, Hkv 2,
d 64, groups 60 + 2 + 2), one layer, batch 1, after a 256-token prefill: the functional
oal.step (a decoder built per call) against DecodeState.step (one decoder kept; inference).
Median microseconds per token, three rounds. Run with the build tree package:
  PYTHONPATH=build/release/python /usr/bin/python3 scripts/python_step_bench.py"""
import time, torch, oal, statistics
torch.manual_seed(0)
torch.set_num_threads(2)  # the thread count the docs quote
Hq, Hkv, d = 14, 2, 64
groups = [[list(range(0, 60)), [60, 61], [62, 63]]] * Hq
attn = oal.QuadraticAttention(groups, heads=None)
q = torch.randn(1, Hq, 512, d); k = torch.randn(1, Hkv, 512, d); v = torch.randn(1, Hkv, 512, d)
def run(functional):
    with torch.no_grad():
        _, st = attn.prefill(q[:, :, :256], k[:, :, :256], v[:, :, :256])
        S = st.tensor
        ts = []
        for t in range(256, 512):
            t0 = time.perf_counter()
            if functional:
                y, S = oal.step(q[:, :, t], k[:, :, t], v[:, :, t], attn.group_of, attn.L, attn.eps, S)
            else:
                y = st.step(q[:, :, t], k[:, :, t], v[:, :, t])
            ts.append(time.perf_counter() - t0)
    return statistics.median(ts[16:]) * 1e6
for r in range(3):
    print(f"functional oal.step {run(True):.1f} us/token   DecodeState.step (decoder) {run(False):.1f} us/token")
