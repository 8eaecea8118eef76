#!/usr/bin/env bash
# Table 3-style comparison (paper §5.2 protocol at a budget this machine finishes): convert
# LAYERS with every method, adapt each with LoRA (+ joint kernel training) for several
# seeds, and measure held-out perplexity before and after adaptation. Softmax-LoRA adapts
# the unconverted model. Baselines start LoRA from their initial values, OAL and the
# learned global kernel from their calibration (oal finetune --init initial, paper App. F).
# The presets scripts/table3_stories260k.sh and scripts/table3_smollm2.sh set the model,
# the text and the block layout; this script is the protocol they share.
#
# Every block range refers to TEXT read as one token stream at CTX tokens per block:
#   EVAL_BLOCKS    held-out perplexity (oal ppl --max-blocks EVAL_BLOCKS: blocks 0..N-1)
#   CALIB_TRAIN / CALIB_VAL   kernel calibration (oal calibrate --train/--val-blocks)
#   VAL_BLOCKS     LoRA validation: checkpoint selection and early stopping
#   TRAIN_BLOCKS   LoRA training blocks
#   AFTER_TOKENS   grouping prompts are the paragraphs after this many tokens (oal analyze
#                  --after-tokens): disjoint from every block but training ones
#
# Environment: MODEL TEXT CTX LAYERS EVAL_BLOCKS CALIB_TRAIN CALIB_VAL VAL_BLOCKS
#   TRAIN_BLOCKS AFTER_TOKENS (required, set by the presets); OAL=build/release/oal
#   OUT=runs/table3 SEEDS="1 2" CAP=400 (update cap; the cosine schedule ends there)
#   EVAL_EVERY=25 PATIENCE=100 MIN_DELTA=0.001 METHODS (default all seven)
#   CALIB_UPDATES (oal calibrate --max-updates; empty: its default) BATCH=1
#   RESUME=1 keeps finished rows (a finetune.json present) and redoes the others.
# Writes $OUT/seed<S>/<method>-finetune.json (with the held-out PPL after LoRA),
# $OUT/unadapted.json and, through scripts/table3_aggregate.py, $OUT/table.md.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
cd "$HERE/.."
: "${MODEL:?} ${TEXT:?} ${CTX:?} ${LAYERS:?} ${EVAL_BLOCKS:?} ${CALIB_TRAIN:?} ${CALIB_VAL:?}"
: "${VAL_BLOCKS:?} ${TRAIN_BLOCKS:?} ${AFTER_TOKENS:?}"
OAL=${OAL:-build/release/oal}
OUT=${OUT:-runs/table3}
SEEDS=${SEEDS:-1 2}
CAP=${CAP:-400}
EVAL_EVERY=${EVAL_EVERY:-25}
PATIENCE=${PATIENCE:-100}
MIN_DELTA=${MIN_DELTA:-0.001}
BATCH=${BATCH:-1}
RESUME=${RESUME:-0}
METHODS=${METHODS:-softmax performer spectraformer dijiang taylorshift global oal}
CALIB_UPDATES=${CALIB_UPDATES:-}
mkdir -p "$OUT"

# Every method but softmax needs its calibration (baselines too: finetune and convert
# read their shapes and settings from it).
calib_methods=$(for m in $METHODS; do [ "$m" = softmax ] || printf '%s,' "$m"; done)
calib_methods=${calib_methods%,}
if [ -n "$calib_methods" ] && { [ "$RESUME" != 1 ] || [ ! -f "$OUT/calib/calibration.json" ]; }; then
  "$OAL" analyze --model "$MODEL" --text "$TEXT" --layers "$LAYERS" --ctx "$CTX" \
    --after-tokens "$AFTER_TOKENS" --out "$OUT/analysis" --quiet
  "$OAL" group --analysis "$OUT/analysis/analysis.json" --out "$OUT/groups.json" --quiet
  "$OAL" calibrate --model "$MODEL" --text "$TEXT" --groups "$OUT/groups.json" \
    --methods "$calib_methods" --layers "$LAYERS" --ctx "$CTX" \
    --train-blocks "$CALIB_TRAIN" --val-blocks "$CALIB_VAL" \
    ${CALIB_UPDATES:+--max-updates "$CALIB_UPDATES"} --out "$OUT/calib" --quiet
fi

ppl() { "$OAL" ppl --model "$1" --text "$TEXT" --ctx "$CTX" --max-blocks "$EVAL_BLOCKS" --quiet --json |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["ppl"])'; }

# Converted, unadapted: one value per method (no seed enters the conversion).
if [ "$RESUME" != 1 ] || [ ! -f "$OUT/unadapted.json" ]; then
  echo "{" > "$OUT/unadapted.json.part"
  sep=""
  for m in $METHODS; do
    if [ "$m" = softmax ]; then
      value=$(ppl "$MODEL")
    else
      "$OAL" convert --model "$MODEL" --calib "$OUT/calib" --method "$m" --layers "$LAYERS" \
        --out "$OUT/$m-converted" --json > /dev/null
      value=$(ppl "$OUT/$m-converted")
      rm -rf "$OUT/$m-converted"   # a whole model per method; the PPL is what is kept
    fi
    printf '%s"%s": %s\n' "$sep" "$m" "$value" >> "$OUT/unadapted.json.part"
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
    calib=()
    [ "$m" = softmax ] || calib=(--calib "$OUT/calib")
    "$OAL" finetune --model "$MODEL" "${calib[@]}" --method "$m" --layers "$LAYERS" \
      --train "$TEXT" --val "$TEXT" --train-blocks "$TRAIN_BLOCKS" --val-blocks "$VAL_BLOCKS" \
      --steps "$CAP" --batch "$BATCH" --eval-every "$EVAL_EVERY" --patience "$PATIENCE" \
      --min-delta "$MIN_DELTA" --seed "$s" --ctx "$CTX" --out "$OUT/seed$s/$m-lora" \
      --quiet --json > "$f.part"
    after=$(ppl "$OUT/seed$s/$m-lora/model")
    python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); j["heldout_ppl"]=float(sys.argv[2]); j["seconds"]=int(sys.argv[3]); json.dump(j, open(sys.argv[1],"w"), indent=1)' \
      "$f.part" "$after" $(( $(date +%s) - start ))
    mv "$f.part" "$f"
    echo "table3: seed $s $m: held-out PPL after LoRA $after" >&2
  done
done
python3 "$HERE/table3_aggregate.py" "$OUT" $SEEDS | tee "$OUT/table.md"
