#!/usr/bin/env bash
# Table 3-style comparison on stories260K (paper §5.2 protocol scaled down to a 5-layer
# model on 2 CPU cores): convert layers 1-3 with every calibrated method, adapt each with
# LoRA (+ joint kernel training) on tinystories-dev.txt blocks, and measure held-out
# perplexity before and after adaptation. Softmax-LoRA adapts the unconverted model.
#
# Block layout of tinystories-dev.txt at ctx 256 (915 blocks, one token stream, no BOS):
#   0-15   held-out perplexity (oal ppl --max-blocks 16)
#   16-25  kernel calibration (oal calibrate's default train 16-23 / val 24-25)
#   26-57  validation for checkpoint selection (32 blocks, as the paper)
#   58-    LoRA training blocks
# Usage: scripts/table3_stories260k.sh [OAL binary] [out dir] [steps]
set -euo pipefail
OAL=${1:-build/release/oal}
OUT=${2:-runs/table3}
STEPS=${3:-200}
D=../shared/data
M=$D/stories260K.bin
T=$D/tinystories-dev.txt
mkdir -p "$OUT"
"$OAL" analyze --model "$M" --text "$T" --layers 1-3 --out "$OUT/analysis" --quiet
"$OAL" group --analysis "$OUT/analysis/analysis.json" --out "$OUT/groups.json" --quiet
"$OAL" calibrate --model "$M" --text "$T" --groups "$OUT/groups.json" \
  --methods oal,global,taylorshift,performer,dijiang,spectraformer --layers 1-3 --ctx 256 \
  --out "$OUT/calib" --quiet
ppl() { "$OAL" ppl --model "$1" --text "$T" --ctx 256 --max-blocks 16 --quiet --json |
        python3 -c 'import json,sys; print("%.4f" % json.load(sys.stdin)["ppl"])'; }
echo "| method | PPL converted, unadapted | PPL after LoRA | best val NLL (update) |" > "$OUT/table.md"
echo "|---|---|---|---|" >> "$OUT/table.md"
for m in softmax performer spectraformer dijiang taylorshift global oal; do
  "$OAL" convert --model "$M" --calib "$OUT/calib" --method "$m" --layers 1-3 --out "$OUT/$m-converted" --json > /dev/null
  before=$(ppl "$OUT/$m-converted")
  rm -rf "$OUT/$m-lora"
  "$OAL" finetune --model "$M" --calib "$OUT/calib" --method "$m" --layers 1-3 \
    --train "$T" --val "$T" --train-blocks 58: --val-blocks 26:58 --steps "$STEPS" \
    --eval-every 50 --ctx 256 --out "$OUT/$m-lora" --quiet --json > "$OUT/$m-finetune.json"
  after=$(ppl "$OUT/$m-lora/model")
  best=$(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print("%.4f (%d)" % (j["best_val_nll"], j["best_step"]))' "$OUT/$m-finetune.json")
  echo "| $m | $before | $after | $best |" >> "$OUT/table.md"
done
cat "$OUT/table.md"
