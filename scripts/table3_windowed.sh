#!/usr/bin/env bash
# Table 3 at 256K training tokens per method (issue 44) on SmolLM2-135M-Instruct (GGUF
# Q4_1, scripts/fetch-models.sh), WikiText-2 test as one token stream (no BOS), ctx 1024:
#   blocks 0-15    held-out perplexity (ctx 1024; ctx 4096 reads the same 16K tokens)
#   blocks 16-25   kernel calibration (scripts/windowed_smollm2.sh STEPS=calib / plain)
#   blocks 26-33   LoRA validation (8 blocks, every 32 updates)
#   blocks 34-     LoRA training (260 blocks; 256 updates of one block = 262,144 tokens,
#                  one block order for every method: --seed 1)
# Methods (METHODS, each NAME = method[-sSwW]):
#   softmax        LoRA on the original model
#   oal-s4w64      windowed OAL (calib-all-s4w64), L and c_h trained with LoRA; any S and
#                  W (oal-s4w256: calib-all-s4w256, fitted here when missing)
#   global-s4w64   windowed learned global kernel
#   window-s4w64   windowed-only (no kernel; LoRA only)
#   oal, global    the plain methods (calib-all: windowed_smollm2.sh's plain-fit step)
# on RANGE layers: 3-26 (the paper's), 0-29 (every layer) or auto:24 (runs/smollm2
# layer-scores). Per run: $OUT/<range>/<name>/ (checkpoints, the adapted model), and the
# records (finetune JSON with the validation curve, PPL at ctx 1024 and 4096, passkey at
# 1K/4K/8K) in $RECORDS/<range>/<name>-*.json, which are committed.
# Resumable: a finished record is skipped; an interrupted finetune continues from its
# last checkpoint (every 32 updates) when the command is rerun.
#
# TRAIN_CTX=4096 trains on 4096-token blocks instead (same 262,144 tokens: 64 updates; the
# names get "-t4096"): validation blocks 7-8 of 4096 (tokens 28,672-36,863, between the
# calibration blocks and training), training blocks 9- (64 blocks to the text's end),
# held-out perplexity and calibration blocks as above.
#
# FULL_HEADS=M keeps the M KV heads that retrieve most exact beside every windowed layer
# (oal convert --full-heads auto:M; the names get "-fM"): scored by `oal layer-scores
# --retrieval-probes 8` on passkey prompts of 2048 tokens (seed 1; the evaluation's
# passkey prompts use seed 0) into runs/smollm2/layer-scores-sSwW-retrieval.json.
#
# Environment: OAL=build/release/oal OUT=runs/table3-windowed RECORDS=docs/records/table3-windowed
#   METHODS="oal-s4w64 softmax" RANGE=3-26 STEPS=256|64 EVAL=ppl,passkey TRAIN_CTX=1024
#   FULL_HEADS=M
#   BALANCE=1 (the adapted windowed model rebalanced: see the step at the end)
#   CALIB=DIR (a calibration run to start the kernels from instead of calib-all-sSwW, e.g.
#   runs/smollm2/calib-oal-hybrid-s4w256-ctx4096 of windowed_smollm2.sh's long step)
set -euo pipefail
cd "$(dirname "$0")/.."
OAL=${OAL:-build/release/oal}
OUT=${OUT:-runs/table3-windowed}
RECORDS=${RECORDS:-docs/records/table3-windowed}
METHODS=${METHODS:-oal-s4w64 softmax}
RANGE=${RANGE:-3-26}
EVAL=${EVAL:-ppl,passkey}
TRAIN_CTX=${TRAIN_CTX:-1024}
case $TRAIN_CTX in
  1024) blocks=(--train-blocks 34: --val-blocks 26-33) tag="" every=32 STEPS=${STEPS:-256} ;;
  4096) blocks=(--train-blocks 9: --val-blocks 7-8) tag="-t4096" every=16 STEPS=${STEPS:-64} ;;
  *) echo "table3_windowed: TRAIN_CTX must be 1024 or 4096, got '$TRAIN_CTX'" >&2; exit 2 ;;
esac
M=${OAL_MODEL_CACHE:-.cache/models}/SmolLM2-135M-Instruct.Q4_1.gguf
T=../shared/data/wikitext2-test.raw
[ -f "$M" ] || bash scripts/fetch-models.sh
range_dir=${RANGE//:/}
mkdir -p "$OUT/$range_dir" "$RECORDS/$range_dir"

record() {  # record NAME CMD...: JSON to $RECORDS/<range>/NAME.json unless present
  local f="$RECORDS/$range_dir/$1.json"; shift
  if [ -f "$f" ]; then echo "table3_windowed: $(basename "$f") already done" >&2; return; fi
  local t0=$(date +%s)
  "$@" > "$f.part"
  python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); j["wall_seconds"]=int(sys.argv[2]); json.dump(j, open(sys.argv[1],"w"), indent=1)' \
    "$f.part" $(( $(date +%s) - t0 ))
  mv "$f.part" "$f"
  echo "table3_windowed: $(basename "$f") done" >&2
}

if [[ $RANGE == auto:* ]] && [ -n "${FULL_HEADS:-}" ]; then
  echo "table3_windowed: FULL_HEADS with an auto RANGE is not supported (two scores files)" >&2; exit 2
fi
layer_args=(--layers "$RANGE")
if [[ $RANGE == auto:* ]]; then
  scores=runs/smollm2/layer-scores-s4w64.json
  [ -f "$scores" ] || "$OAL" layer-scores --model "$M" --text "$T" --ctx 1024 --blocks 16-23 \
    --sinks 4 --window 64 --out "$scores" --quiet
  layer_args+=(--layer-scores "$scores")
fi

for name in $METHODS; do
  method=${name%%-*}
  window_args=() calib_dir=""
  case $name in
    softmax) ;;
    *-s[0-9]*w[0-9]*)
      sw=${name#*-s} sinks=${sw%%w*} window=${sw#*w}
      window_args=(--sinks "$sinks" --window "$window")
      if [ "$method" != window ]; then
        calib_dir=${CALIB:-runs/smollm2/calib-all-s${sinks}w$window}
        [ -n "${CALIB:-}" ] || SINKS=$sinks WINDOW=$window STEPS=calib bash scripts/windowed_smollm2.sh
      fi ;;
    oal|global)
      calib_dir=runs/smollm2/calib-all
      STEPS=plain-fit bash scripts/windowed_smollm2.sh ;;   # groups and the plain fit
    *) echo "table3_windowed: unknown method '$name'" >&2; exit 2 ;;
  esac
  full_args=() ftag=""
  if [ -n "${FULL_HEADS:-}" ] && [ -n "${window_args[*]}" ]; then
    rscores=runs/smollm2/layer-scores-s${sinks}w$window-retrieval.json
    mkdir -p runs/smollm2
    [ -f "$rscores" ] || "$OAL" layer-scores --model "$M" --text "$T" --ctx 1024 --blocks 16-23 \
      --sinks "$sinks" --window "$window" --retrieval-probes 8 --probe-length 2048 \
      --out "$rscores" --quiet > /dev/null
    full_args=(--full-heads "auto:$FULL_HEADS" --layer-scores "$rscores") ftag="-f$FULL_HEADS"
  fi
  name=$name$ftag
  run="$OUT/$range_dir/$name$tag"
  calib=()
  [ -z "$calib_dir" ] || calib=(--calib "$calib_dir")
  resume=()
  [ -f "$run/last.json" ] && resume=(--resume)
  if [ "$method" = softmax ]; then layers=(--layers "3-26"); else layers=("${layer_args[@]}"); fi
  record "$name$tag-finetune" "$OAL" finetune --model "$M" "${calib[@]}" --method "$method" \
    "${layers[@]}" "${window_args[@]}" "${full_args[@]}" --train "$T" --val "$T" "${blocks[@]}" \
    --steps "$STEPS" --eval-every "$every" --patience 0 --seed 1 --ctx "$TRAIN_CTX" \
    --out "$run" "${resume[@]}" --quiet --json
  adapted="$run/model"
  if [[ $EVAL == *ppl* ]]; then
    record "$name$tag-ppl1024" "$OAL" ppl --model "$adapted" --text "$T" --ctx 1024 --max-blocks 16 --quiet --json
    record "$name$tag-ppl4096" "$OAL" ppl --model "$adapted" --text "$T" --ctx 4096 --max-blocks 4 --quiet --json
  fi
  if [[ $EVAL == *passkey* ]]; then
    record "$name$tag-passkey" "$OAL" eval --model "$adapted" --task passkey --lengths 1024,4096,8192 \
      --trials 1 --quiet --json
  fi
  # BALANCE=1: the adapted model's balance chosen by its own perplexity (oal convert
  # --balance-text on the adapted directory: its own kernels and layers) on the 4096-token
  # blocks 4-6 (tokens 16,384-28,671: calibration and LoRA validation text, apart from
  # the evaluated blocks 0-15 and from training); the chosen model in $run/model-bal.
  if [ "${BALANCE:-0}" = 1 ] && [ -n "$calib_dir" ]; then
    record "$name$tag-balance" "$OAL" convert --model "$adapted" --method "$method" \
      --out "$run/model-bal" --balance-text "$T" --balance-ctx 4096 --balance-blocks 4-6 --quiet --json
    record "$name$tag-bal-ppl1024" "$OAL" ppl --model "$run/model-bal" --text "$T" --ctx 1024 --max-blocks 16 --quiet --json
    record "$name$tag-bal-ppl4096" "$OAL" ppl --model "$run/model-bal" --text "$T" --ctx 4096 --max-blocks 4 --quiet --json
    if [[ $EVAL == *passkey* ]]; then
      record "$name$tag-bal-passkey" "$OAL" eval --model "$run/model-bal" --task passkey \
        --lengths 1024,4096,8192 --trials 1 --quiet --json
    fi
  fi
done
