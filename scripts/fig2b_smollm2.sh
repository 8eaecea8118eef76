#!/usr/bin/env bash
# Fig. 2(b) on SmolLM2-135M-Instruct: frozen attention-output MSE of OAL against the
# group budget G (the G - 1 largest adjacent gaps of the sorted chi profile become the
# group boundaries, `oal group --budget G`; paper App. B), and the parameter count
# (G + 1)(G + 2) / 2 of the lower-triangular L per head. One layer (LAYER), every head
# of it, the block layout of scripts/smollm2_paper.sh (ctx 1024: evaluation 0-15,
# fitting 16-23, validation 24-25; grouping prompts after 26 x 1024 tokens), OAL fitted
# from its three initialisations at UPDATES Adam updates for each budget.
#
# Environment: OAL=build/release/oal OUT=runs/smollm2-fig2b LAYER=5 HEAD=0 (the head the
#   figure draws; the table lists every head) BUDGETS="1 2 3 4 5 6 8 12" UPDATES=1000
#   VAL_EVERY=100 PATIENCE=400 (the paper's fitting budget)
# Writes $OUT/G<g>/fidelity.json per budget, then $OUT/table.md and $OUT/fig2b.svg
# (scripts/fig2b_plot.py).
set -euo pipefail
cd "$(dirname "$0")/.."
OAL=${OAL:-build/release/oal}
OUT=${OUT:-runs/smollm2-fig2b}
LAYER=${LAYER:-5}
HEAD=${HEAD:-0}
BUDGETS=${BUDGETS:-1 2 3 4 5 6 8 12}
UPDATES=${UPDATES:-1000}
VAL_EVERY=${VAL_EVERY:-100}
PATIENCE=${PATIENCE:-400}
CTX=1024
M=${OAL_MODEL_CACHE:-.cache/models}/SmolLM2-135M-Instruct.Q4_1.gguf
T=../shared/data/wikitext2-test.raw
[ -f "$M" ] || bash scripts/fetch-models.sh
mkdir -p "$OUT"

[ -f "$OUT/analysis/analysis.json" ] ||
  "$OAL" analyze --model "$M" --text "$T" --layers "$LAYER" --ctx "$CTX" --prompts 40 \
    --after-tokens $((26 * CTX)) --out "$OUT/analysis" --quiet
for g in $BUDGETS; do
  d="$OUT/G$g"
  [ -f "$d/fidelity.json" ] && continue
  rm -rf "$d"; mkdir -p "$d"
  "$OAL" group --analysis "$OUT/analysis/analysis.json" --budget "$g" --out "$d/groups.json" --quiet
  "$OAL" calibrate --model "$M" --text "$T" --groups "$d/groups.json" --methods oal \
    --layers "$LAYER" --ctx "$CTX" --max-updates "$UPDATES" --val-every "$VAL_EVERY" \
    --patience "$PATIENCE" --out "$d/calib" --quiet
  "$OAL" fidelity --model "$M" --text "$T" --calib "$d/calib" --layers "$LAYER" --ctx "$CTX" \
    --out "$d/fidelity.json" --json --quiet > /dev/null   # written atomically: present = done
  echo "fig2b: G = $g done" >&2
done
python3 scripts/fig2b_plot.py "$OUT" "$HEAD" $BUDGETS
