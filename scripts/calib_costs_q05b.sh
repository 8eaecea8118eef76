#!/usr/bin/env bash
# Per-phase calibration costs at model scale (docs/calibration.md, "Costs at model
# scale"): a synthetic checkpoint with Qwen2.5-0.5B's shapes (random bf16 weights — the
# costs depend on shapes only), the real Qwen tokenizer, WikiText-2 text, 4096-token
# blocks as in the paper, one layer, a reduced number of blocks and updates; the
# calibration once in one process and once on each of NPROCS local rank counts.
#
# Environment (optional): OAL=build/release/oal OUT=runs/q05b-costs LAYER=4 NPROCS="2 3"
#   MAX_UPDATES=50  TRAIN=0-1 VAL=2 EVAL=3 (block ranges of the text at ctx 4096)
# Prints one JSON line per phase: {"phase", "seconds", ...}; also $OUT/costs.jsonl.
set -euo pipefail
OAL=${OAL:-build/release/oal}
OUT=${OUT:-runs/q05b-costs}
LAYER=${LAYER:-4}
NPROCS=${NPROCS:-2 3}
MAX_UPDATES=${MAX_UPDATES:-50}
TRAIN=${TRAIN:-0-1}
VAL=${VAL:-2}
EVAL=${EVAL:-3}
D=../shared/data
TOK=$D/qwen-tokenizer/tokenizer.json
TEXT=$D/wikitext2-test.raw
mkdir -p "$OUT"
: > "$OUT/costs.jsonl"
record() { echo "$1" | tee -a "$OUT/costs.jsonl"; }
now() { date +%s.%N; }
secs() { python3 -c "import sys; print(round(float(sys.argv[2]) - float(sys.argv[1]), 1))" "$1" "$2"; }

t0=$(now)
[ -f "$OUT/model/config.json" ] || "$OAL" synth --shape qwen2.5-0.5b --out "$OUT/model" > /dev/null
record "{\"phase\": \"synth\", \"seconds\": $(secs "$t0" "$(now)")}"

t0=$(now)
"$OAL" analyze --model "$OUT/model" --tokenizer "$TOK" --text "$TEXT" --layers "$LAYER" \
  --ctx 4096 --prompts 40 --after-tokens $((4 * 4096)) --out "$OUT/analysis" --quiet > /dev/null
record "{\"phase\": \"analyze (40 prompts, layer $LAYER)\", \"seconds\": $(secs "$t0" "$(now)")}"
"$OAL" group --analysis "$OUT/analysis/analysis.json" --out "$OUT/groups.json" --quiet > /dev/null

calibrate() {  # $1 = label, rest = extra options
  local label=$1; shift
  rm -rf "$OUT/calib-$label"
  t0=$(now)
  "$OAL" calibrate --model "$OUT/model" --tokenizer "$TOK" --text "$TEXT" \
    --groups "$OUT/groups.json" --methods oal --layers "$LAYER" --ctx 4096 \
    --train-blocks "$TRAIN" --val-blocks "$VAL" --eval-blocks "$EVAL" \
    --max-updates "$MAX_UPDATES" --val-every 25 --patience "$MAX_UPDATES" \
    --out "$OUT/calib-$label" --quiet --json "$@" > "$OUT/calib-$label.json"
  local wall; wall=$(secs "$t0" "$(now)")
  python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
print(json.dumps({"phase": "calibrate " + sys.argv[2], "seconds": float(sys.argv[3]),
                  "capture_seconds": round(j["seconds"]["capture"], 1),
                  "fit_seconds": round(j["seconds"]["fits"], 1), "fits": len(j["fits"]),
                  "updates": sum(f["updates"] for f in j["fits"])}))' \
    "$OUT/calib-$label.json" "$label" "$wall" | tee -a "$OUT/costs.jsonl"
}
calibrate "1proc"
for n in $NPROCS; do
  calibrate "${n}proc" --nproc "$n"
  cmp "$OUT/calib-1proc/kernels-oal.json" "$OUT/calib-${n}proc/kernels-oal.json" &&
    echo "kernels-oal.json: identical for 1 and $n processes"
done

t0=$(now)
"$OAL" fidelity --model "$OUT/model" --tokenizer "$TOK" --text "$TEXT" --calib "$OUT/calib-1proc" \
  --layers "$LAYER" --ctx 4096 --train-blocks "$TRAIN" --val-blocks "$VAL" --eval-blocks "$EVAL" \
  --out "$OUT/fidelity.json" --quiet > /dev/null
record "{\"phase\": \"fidelity (eval blocks $EVAL)\", \"seconds\": $(secs "$t0" "$(now)")}"
