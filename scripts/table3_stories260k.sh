#!/usr/bin/env bash
# Table 3-style comparison on stories260K (paper §5.2 protocol scaled down to a 5-layer
# model on 2 CPU cores): convert layers 1-3 with every calibrated method, adapt each with
# LoRA (+ joint kernel training) on tinystories-dev.txt blocks for several seeds, and
# measure held-out perplexity before and after adaptation. Softmax-LoRA adapts the
# unconverted model. Baselines start LoRA from their initial values, OAL and the learned
# global kernel from their calibration (oal finetune --init initial, paper App. F).
#
# Block layout of tinystories-dev.txt at ctx 256 (915 blocks, one token stream, no BOS):
#   0-15   held-out perplexity (oal ppl --max-blocks 16)
#   16-25  kernel calibration (oal calibrate's default train 16-23 / val 24-25)
#   26-57  validation for checkpoint selection and early stopping (32 blocks)
#   58-    LoRA training blocks
# Grouping prompts: the paragraphs after the first 58 x 256 tokens (oal analyze
# --after-tokens), disjoint from every block above except training ones.
#
# Environment (all optional):
#   OAL=build/release/oal  OUT=runs/table3  SEEDS="1 2"  CAP=400 (update cap; the
#   cosine schedule ends there)  EVAL_EVERY=25  PATIENCE=100  MIN_DELTA=0.001
#   RESUME=1 keeps finished rows (a finetune.json present) and redoes the others.
# Writes $OUT/seed<S>/<method>-finetune.json, $OUT/unadapted.json and, through
# scripts/table3_aggregate.py, $OUT/table.md (mean ± spread over seeds).
set -euo pipefail
OAL=${OAL:-build/release/oal}
OUT=${OUT:-runs/table3}
SEEDS=${SEEDS:-1 2}
CAP=${CAP:-400}
EVAL_EVERY=${EVAL_EVERY:-25}
PATIENCE=${PATIENCE:-100}
MIN_DELTA=${MIN_DELTA:-0.001}
RESUME=${RESUME:-0}
D=../shared/data
M=$D/stories260K.bin
T=$D/tinystories-dev.txt
METHODS="softmax performer spectraformer dijiang taylorshift global oal"
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"

if [ "$RESUME" != 1 ] || [ ! -f "$OUT/calib/calibration.json" ]; then
  "$OAL" analyze --model "$M" --text "$T" --layers 1-3 --after-tokens $((58 * 256)) \
    --out "$OUT/analysis" --quiet
  "$OAL" group --analysis "$OUT/analysis/analysis.json" --out "$OUT/groups.json" --quiet
  "$OAL" calibrate --model "$M" --text "$T" --groups "$OUT/groups.json" \
    --methods oal,global,taylorshift,performer,dijiang,spectraformer --layers 1-3 --ctx 256 \
    --out "$OUT/calib" --quiet
fi

ppl() { "$OAL" ppl --model "$1" --text "$T" --ctx 256 --max-blocks 16 --quiet --json |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["ppl"])'; }

# Converted, unadapted: one value per method (no seed enters the conversion).
if [ "$RESUME" != 1 ] || [ ! -f "$OUT/unadapted.json" ]; then
  echo "{" > "$OUT/unadapted.json.part"
  sep=""
  for m in $METHODS; do
    "$OAL" convert --model "$M" --calib "$OUT/calib" --method "$m" --layers 1-3 \
      --out "$OUT/$m-converted" --json > /dev/null
    printf '%s"%s": %s\n' "$sep" "$m" "$(ppl "$OUT/$m-converted")" >> "$OUT/unadapted.json.part"
    sep=","
  done
  echo "}" >> "$OUT/unadapted.json.part"
  mv "$OUT/unadapted.json.part" "$OUT/unadapted.json"
fi

for s in $SEEDS; do
  mkdir -p "$OUT/seed$s"
  for m in $METHODS; do
    f="$OUT/seed$s/$m-finetune.json"
    if [ "$RESUME" = 1 ] && [ -f "$f" ]; then continue; fi
    rm -rf "$OUT/seed$s/$m-lora"
    start=$(date +%s)
    "$OAL" finetune --model "$M" --calib "$OUT/calib" --method "$m" --layers 1-3 \
      --train "$T" --val "$T" --train-blocks 58: --val-blocks 26:58 --steps "$CAP" \
      --eval-every "$EVAL_EVERY" --patience "$PATIENCE" --min-delta "$MIN_DELTA" \
      --seed "$s" --ctx 256 --out "$OUT/seed$s/$m-lora" --quiet --json > "$f.part"
    after=$(ppl "$OUT/seed$s/$m-lora/model")
    python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); j["heldout_ppl"]=float(sys.argv[2]); j["seconds"]=int(sys.argv[3]); json.dump(j, open(sys.argv[1],"w"), indent=1)' \
      "$f.part" "$after" $(( $(date +%s) - start ))
    mv "$f.part" "$f"
    echo "seed $s $m: held-out PPL after LoRA $after"
  done
done
python3 "$HERE/table3_aggregate.py" "$OUT" $SEEDS | tee "$OUT/table.md"
