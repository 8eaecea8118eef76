#!/usr/bin/env bash
# Reproduces docs/benchmarks.md's measured tables: the attention bench and the
# model-level bench, on the best SIMD target of this CPU and with AVX2 forced (the
# target most laptops and cloud machines have), one after the other on a quiet machine.
# Usage: scripts/bench-cpu.sh [OUT_DIR]   (default runs/bench; ~40 min on 2 cores)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-runs/bench}
oal=build/release/oal
mkdir -p "$out"
lscpu > "$out/lscpu.txt"
best=$($oal bench --methods oal --n 64 --dtype fp32 --mode prefill --repeats 1 --json --quiet |
       python3 -c 'import json,sys; print(json.load(sys.stdin)["machine"]["kernels_isa"])')
echo "best SIMD target here: $best"
$oal bench --out "$out/attention-$best.md" --out-svg "$out/attention-$best.svg"
$oal bench --dtype fp32 --simd avx2 --out "$out/attention-avx2.md" --out-svg "$out/attention-avx2.svg"
model=(--model synthetic:qwen2.5-0.5b --prefill-n 1024,4096 --n 1024,4096,16384,32768
       --warmup 1 --repeats 1 --decode-steps 8)
$oal bench "${model[@]}" --out "$out/model-$best.md"
$oal bench "${model[@]}" --simd avx2 --out "$out/model-avx2.md"
