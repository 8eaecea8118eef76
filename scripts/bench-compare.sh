#!/usr/bin/env bash
# Two builds of oal side by side (issue 27: "no slower cell than before"): the attention
# bench and a short model bench, each run by the old and the new binary in turn (old,
# new, old, new: interleaved so that drift hits both), on the best SIMD target of this CPU
# and with AVX2 forced; scripts/bench_compare.py tables the ratios.
#
#   scripts/bench-compare.sh OLD_OAL NEW_OAL [OUT_DIR]   (default runs/compare; ~20 min on 2 cores)
#
# Build the old binary from a worktree, e.g.
#   git worktree add /tmp/oal-old <commit> && cmake -S /tmp/oal-old -B /tmp/oal-old/build \
#     -DCMAKE_BUILD_TYPE=Release -DOAL_BUILD_TESTS=OFF -DOAL_PYTHON=OFF &&
#   cmake --build /tmp/oal-old/build -j --target oal
# Turn autogroup off and keep other work off the CPU while it runs.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { sed -n '2,13p' "$0"; exit 2; }
old=$1 new=$2 out=${3:-runs/compare}
for b in "$old" "$new"; do [ -x "$b" ] || { echo "bench-compare: $b is not an executable" >&2; exit 1; }; done
mkdir -p "$out"
attention=(bench --methods softmax-flash,oal,global --n 1024,4096,16384 --dtype fp32 --repeats 5
           --json --quiet)
model=(bench --model synthetic:qwen2.5-0.5b --variants softmax,oal --prefill-n 1024 --n 1024 --repeats 2
       --decode-steps 8 --json --quiet)
for simd in native avx2; do
  flag=(); [ "$simd" = avx2 ] && flag=(--simd avx2)
  for round in 1 2; do
    for side in old new; do
      bin=$old; [ "$side" = new ] && bin=$new
      echo "bench-compare: $simd round $round $side" >&2
      "$bin" "${attention[@]}" "${flag[@]}" > "$out/attention-$simd-$side-$round.json"
      "$bin" "${model[@]}" "${flag[@]}" > "$out/model-$simd-$side-$round.json"
    done
  done
  for kind in attention model; do
    python3 scripts/bench_compare.py --label "$kind bench, $simd" \
      --old "$out/$kind-$simd-old-"{1,2}.json --new "$out/$kind-$simd-new-"{1,2}.json
    echo
  done
done | tee "$out/compare.md"
