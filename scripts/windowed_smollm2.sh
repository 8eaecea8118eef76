#!/usr/bin/env bash
# Windowed OAL on SmolLM2-135M-Instruct (GGUF Q4_1, scripts/fetch-models.sh), WikiText-2
# test as one token stream (no BOS): the measurements of docs/results.md "Windowed OAL".
# Every step skips outputs that already exist, so an interrupted run resumes where it
# stopped (rerun the same command).
#
# Steps (STEPS="table2 calib convert ppl passkey sweep plain" by default):
#   table2   frozen fidelity (Table 2 protocol, layers LAYERS, ctx 1024, the paper's fitting
#            budget) of oal, global and the windowed-only method beside S = 4, W = 64
#   sweep    the same for oal (and global, which it starts from) at W = 16 and W = 256
#   heldout  the long step's models paired at ctx 4096 on 20 more held-out blocks (7-26 of
#            4096: past the calibration's 4-6; unadapted models never saw them), per-block
#            NLL differences by scripts/paired_ppl.py (windowed OAL vs windowed-only, per W
#            of LONG_WINDOWS)
#   balance  the long step's windowed OAL converted again with its balance chosen by the
#            converted model's perplexity (oal convert --balance-text: one offset on every
#            c_h, or the windowed-only rule) on the calibration's 4096-token blocks 4-6;
#            perplexity at ctx 1024 and 4096, the 20 held-out blocks, paired against the
#            windowed-only rule at 1024 and on the held-out blocks, passkey (per W of
#            LONG_WINDOWS; needs long and heldout)
#   auto     the 24 layers that need full attention least (oal layer-scores beside S = 4 and
#            each W of LONG_WINDOWS, ctx 1024 blocks 16-23) converted from the every-layer
#            ctx-4096 fit (LONG_LAYERS=0-29 long step) with the balance step's rule, beside
#            the windowed-only rule on the same layers; perplexity at 1024, 4096 and on the
#            held-out blocks, paired against the balanced paper range (same K, same fits:
#            the fits are per layer) and against windowed-only
#   baselines  the same for the feature-map baselines (taylorshift, performer, dijiang,
#            spectraformer) beside S = 4, W = 64: their parameters and c_h fitted jointly
#   groups   the analysis of all layers (runs/smollm2/analysis) and the groups of every
#            layer from it (groups-all.json), each made when missing
#   calib    oal and global fitted on all 30 layers beside S = SINKS, W = WINDOW (4 and 64
#            unless set; into calib-all-sSwW; a tenth of the
#            paper's budget, as the plain Table 3 conversion), after the groups step
#   plain-fit  the plain fit alone (calib-all: the plain step without its conversions)
#   convert  paper range (3-26) and every layer: windowed oal and global, the
#            windowed-only method (no fit); unadapted
#   plain    the plain fit of all 30 layers (calib-all), the plain oal and global
#            conversions of the paper range and of every layer (conv-{oal,global}-{hybrid,all}),
#            unadapted, and their perplexity at ctx 1024 and 4096 as the ppl step's
#   ppl      perplexity at ctx 1024 (blocks 0-15) and ctx 4096 (blocks 0-3: the same text)
#   passkey  recall at 1K/4K/8K (key depths 0-0.75 lie outside the window; depth 1 inside)
#   long     fitted at the run's context: oal (and the global fit it starts from) on
#            4096-token blocks 4-5 (validation 6, disjoint from the evaluated blocks 0-3),
#            layers 3-26, 50 updates, at W = 64 and 256; converted with the windowed-only
#            rule at the same W; perplexity at ctx 1024 and 4096; Table 2 of the
#            windowed-only rule at W = 256 (not in the default STEPS: ~45 min; LONG_WINDOWS
#            picks the windows, "64 256" unless set; LONG_LAYERS=0-29 fits and converts every
#            layer instead, into calib-oal-all-... / conv-*-all-...; LONG_METHOD=global
#            fits the learned global kernel instead, into calib-global-... / conv-global-...;
#            SHARDS=n fits it as n `--shard i/n` parts merged afterwards, each kept when
#            done, so that a stopped run resumes at its first unfinished part);
#            heldout and balance take the oal models)
#
# Environment: OAL=build/release/oal OUT=runs/smollm2 LAYERS=5,15,25 UPDATES=1000
#   VAL_EVERY=100 PATIENCE=400 STEPS=... SINKS=4 WINDOW=64 (the calib step's)
set -euo pipefail
cd "$(dirname "$0")/.."
OAL=${OAL:-build/release/oal}
OUT=${OUT:-runs/smollm2}
LAYERS=${LAYERS:-5,15,25}
UPDATES=${UPDATES:-1000}
VAL_EVERY=${VAL_EVERY:-100}
PATIENCE=${PATIENCE:-400}
STEPS=${STEPS:-table2 calib convert ppl passkey sweep plain}
SINKS=${SINKS:-4}
WINDOW=${WINDOW:-64}
LONG_WINDOWS=${LONG_WINDOWS:-64 256}
LONG_LAYERS=${LONG_LAYERS:-3-26}
LONG_METHOD=${LONG_METHOD:-oal}
case $LONG_LAYERS in
  3-26) LONG_TAG=hybrid ;;
  0-29) LONG_TAG=all ;;
  *) echo "windowed_smollm2: LONG_LAYERS must be 3-26 (paper range) or 0-29 (every layer)" >&2; exit 2 ;;
esac
M=${OAL_MODEL_CACHE:-.cache/models}/SmolLM2-135M-Instruct.Q4_1.gguf
T=../shared/data/wikitext2-test.raw
[ -f "$M" ] || bash scripts/fetch-models.sh
mkdir -p "$OUT"

timed() {  # timed NAME CMD...: JSON to $OUT/NAME.json, wall time to $OUT/NAME.seconds; skips a done step
  local name=$1; shift
  if [ -f "$OUT/$name.json" ]; then echo "windowed_smollm2: $name already done" >&2; return; fi
  local t0=$(date +%s)
  "$@" > "$OUT/$name.json.part"
  mv "$OUT/$name.json.part" "$OUT/$name.json"
  echo $(( $(date +%s) - t0 )) > "$OUT/$name.seconds"
  echo "windowed_smollm2: $name done in $(cat "$OUT/$name.seconds") s" >&2
}

linearize() {  # linearize NAME SINKS WINDOW METHODS
  timed "$1" "$OAL" linearize --model "$M" --text "$T" --ctx 1024 --layers "$LAYERS" \
    --max-updates "$UPDATES" --val-every "$VAL_EVERY" --patience "$PATIENCE" \
    --sinks "$2" --window "$3" --methods "$4" --out "$OUT/$1" --quiet --json
}

calibrate() {  # calibrate NAME SINKS WINDOW
  [ -f "$OUT/$1/calibration.json" ] && return
  timed "$1" "$OAL" calibrate --model "$M" --text "$T" --groups "$OUT/groups-all.json" \
    --methods oal,global --ctx 1024 --max-updates 100 --val-every 50 --patience 100 \
    --sinks "$2" --window "$3" --out "$OUT/$1" --quiet --json
}

make_groups() {  # the analysis of every layer and its groups, each when missing
  if [ ! -f "$OUT/analysis/analysis.json" ]; then
    timed analyze "$OAL" analyze --model "$M" --text "$T" --ctx 1024 --prompts 40 \
      --after-tokens $((26 * 1024)) --out "$OUT/analysis" --quiet --json
  fi
  [ -f "$OUT/groups-all.json" ] || "$OAL" group --analysis "$OUT/analysis/analysis.json" \
    --out "$OUT/groups-all.json" --quiet
}

convert() {  # convert DIR ARGS...
  [ -f "$OUT/$1/config.json" ] && return
  "$OAL" convert --model "$M" --out "$OUT/$1" "${@:2}" --json > /dev/null
}

MODELS="conv-oal-hybrid-s4w64 conv-global-hybrid-s4w64 conv-window-hybrid-s4w64
conv-oal-all-s4w64 conv-global-all-s4w64 conv-window-all-s4w64"

perplexity() {  # perplexity MODEL...: ctx 1024 (blocks 0-15) and 4096 (blocks 0-3) of each
  local m path
  for m in "$@"; do
    path="$OUT/$m"; [ "$m" = original ] && path="$M"
    [ -e "$path" ] || continue
    timed "ppl1024-$m" "$OAL" ppl --model "$path" --text "$T" --ctx 1024 --max-blocks 16 --quiet --json
    timed "ppl4096-$m" "$OAL" ppl --model "$path" --text "$T" --ctx 4096 --max-blocks 4 --quiet --json
  done
}

heldout() {  # heldout MODEL...: ctx 4096 on the 20 held-out blocks 7-26 of each
  local m
  for m in "$@"; do
    timed "ppl4096h-$m" "$OAL" ppl --model "$OUT/$m" --text "$T" --ctx 4096 --first-block 7 \
      --max-blocks 20 --quiet --json
  done
}

for step in $STEPS; do
  case $step in
    table2) linearize linearize-s4w64 4 64 oal,global,window ;;
    heldout)
      for W in $LONG_WINDOWS; do
        for m in "conv-oal-$LONG_TAG-s4w$W-ctx4096" "conv-window-$LONG_TAG-s4w$W"; do
          [ -e "$OUT/$m" ] || { echo "windowed_smollm2: $m missing: run the long step" >&2; exit 2; }
          heldout "$m"
        done
        python3 scripts/paired_ppl.py --json "$OUT/ppl4096h-conv-window-$LONG_TAG-s4w$W.json" \
          "$OUT/ppl4096h-conv-oal-$LONG_TAG-s4w$W-ctx4096.json" > "$OUT/paired4096h-$LONG_TAG-s4w$W.json"
      done ;;
    balance)
      for W in $LONG_WINDOWS; do
        run="calib-oal-$LONG_TAG-s4w$W-ctx4096" m="conv-oal-$LONG_TAG-s4w$W-ctx4096-bal" w="conv-window-$LONG_TAG-s4w$W"
        [ -f "$OUT/$run/calibration.json" ] || { echo "windowed_smollm2: $run missing: run the long step" >&2; exit 2; }
        timed "$m" "$OAL" convert --model "$M" --calib "$OUT/$run" --method oal --layers "$LONG_LAYERS" --out "$OUT/$m" \
          --balance-text "$T" --balance-ctx 4096 --balance-blocks 4-6 --quiet --json
        perplexity "$m"
        heldout "$m"
        timed "passkey-$m" "$OAL" eval --model "$OUT/$m" --task passkey --lengths 1024,4096,8192 \
          --trials 1 --quiet --json
        python3 scripts/paired_ppl.py --json "$OUT/ppl1024-$w.json" "$OUT/ppl1024-$m.json" \
          > "$OUT/paired1024-$LONG_TAG-s4w$W-bal.json"
        python3 scripts/paired_ppl.py --json "$OUT/ppl4096h-$w.json" "$OUT/ppl4096h-$m.json" \
          > "$OUT/paired4096h-$LONG_TAG-s4w$W-bal.json"
      done ;;
    auto)
      for W in $LONG_WINDOWS; do
        scores="$OUT/layer-scores-s4w$W.json" run="calib-oal-all-s4w$W-ctx4096"
        m="conv-oal-auto24-s4w$W-ctx4096-bal" w="conv-window-auto24-s4w$W" f="conv-oal-hybrid-s4w$W-ctx4096-bal"
        [ -f "$OUT/$run/calibration.json" ] || { echo "windowed_smollm2: $run missing: run the long step with LONG_LAYERS=0-29" >&2; exit 2; }
        [ -f "$scores" ] || "$OAL" layer-scores --model "$M" --text "$T" --ctx 1024 --blocks 16-23 \
          --sinks 4 --window "$W" --out "$scores" --quiet
        timed "$m" "$OAL" convert --model "$M" --calib "$OUT/$run" --method oal --layers auto:24 \
          --layer-scores "$scores" --out "$OUT/$m" --balance-text "$T" --balance-ctx 4096 \
          --balance-blocks 4-6 --quiet --json
        convert "$w" --method window --sinks 4 --window "$W" --layers auto:24 --layer-scores "$scores"
        perplexity "$m" "$w"
        heldout "$m" "$w"
        [ -f "$OUT/ppl4096h-$f.json" ] || { echo "windowed_smollm2: $f missing: run the balance step" >&2; exit 2; }
        python3 scripts/paired_ppl.py --json "$OUT/ppl1024-$f.json" "$OUT/ppl1024-$m.json" \
          > "$OUT/paired1024-auto24-vs-hybrid-s4w$W-bal.json"
        python3 scripts/paired_ppl.py --json "$OUT/ppl4096h-$f.json" "$OUT/ppl4096h-$m.json" \
          > "$OUT/paired4096h-auto24-vs-hybrid-s4w$W-bal.json"
        python3 scripts/paired_ppl.py --json "$OUT/ppl4096h-$w.json" "$OUT/ppl4096h-$m.json" \
          > "$OUT/paired4096h-auto24-s4w$W-bal.json"
      done ;;
    baselines) linearize linearize-s4w64-baselines 4 64 taylorshift,performer,dijiang,spectraformer ;;
    sweep)
      linearize linearize-s4w16 4 16 oal,global
      linearize linearize-s4w256 4 256 oal,global ;;
    groups) make_groups ;;
    calib)
      make_groups
      calibrate "calib-all-s${SINKS}w$WINDOW" "$SINKS" "$WINDOW" ;;
    plain-fit) make_groups; calibrate calib-all 0 0 ;;
    plain)
      make_groups
      calibrate calib-all 0 0
      for m in oal global; do
        convert "conv-$m-hybrid" --calib "$OUT/calib-all" --method $m
        convert "conv-$m-all" --calib "$OUT/calib-all" --method $m --layers 0-29
      done
      perplexity conv-oal-hybrid conv-global-hybrid conv-oal-all conv-global-all ;;
    convert)
      for m in oal global; do
        convert "conv-$m-hybrid-s4w64" --calib "$OUT/calib-all-s4w64" --method $m
        convert "conv-$m-all-s4w64" --calib "$OUT/calib-all-s4w64" --method $m --layers 0-29
      done
      convert conv-window-hybrid-s4w64 --method window --sinks 4 --window 64
      convert conv-window-all-s4w64 --method window --sinks 4 --window 64 --layers 0-29 ;;
    ppl) perplexity original $MODELS ;;
    passkey)
      for m in original conv-oal-hybrid-s4w64 conv-window-hybrid-s4w64 conv-global-hybrid-s4w64; do
        path="$OUT/$m"; [ "$m" = original ] && path="$M"
        timed "passkey-$m" "$OAL" eval --model "$path" --task passkey --lengths 1024,4096,8192 \
          --trials 1 --quiet --json
      done ;;
    long)
      for W in $LONG_WINDOWS; do
        run="calib-$LONG_METHOD-$LONG_TAG-s4w$W-ctx4096"
        long_fit=("$OAL" calibrate --model "$M" --text "$T" --groups "$OUT/groups-all.json"
          --methods "$LONG_METHOD" --ctx 4096 --layers "$LONG_LAYERS" --train-blocks 4-5
          --val-blocks 6 --eval-blocks 0-3 --max-updates 50 --val-every 25 --patience 50
          --sinks 4 --window "$W" --quiet --json)
        if [ -f "$OUT/$run/calibration.json" ]; then :
        elif [ -n "${SHARDS:-}" ]; then  # resumable: each finished part is kept
          parts=()
          for ((i = 0; i < SHARDS; i++)); do
            part="$run-part$i-of-$SHARDS"
            parts+=("$OUT/$part")
            [ -f "$OUT/$part/calibration.json" ] || { rm -rf "${OUT:?}/$part"
              timed "$part" "${long_fit[@]}" --shard "$i/$SHARDS" --out "$OUT/$part"; }
          done
          timed "$run" "$OAL" merge-calibration --out "$OUT/$run" "${parts[@]}" --json
        else
          timed "$run" "${long_fit[@]}" --out "$OUT/$run"
        fi
        convert "conv-$LONG_METHOD-$LONG_TAG-s4w$W-ctx4096" --calib "$OUT/$run" --method "$LONG_METHOD" --layers "$LONG_LAYERS"
        convert "conv-window-$LONG_TAG-s4w$W" --method window --sinks 4 --window "$W" --layers "$LONG_LAYERS"
        perplexity "conv-$LONG_METHOD-$LONG_TAG-s4w$W-ctx4096" "conv-window-$LONG_TAG-s4w$W"
      done
      linearize linearize-s4w256-window 4 256 window ;;
    *) echo "windowed_smollm2: unknown step '$step'" >&2; exit 2 ;;
  esac
done
