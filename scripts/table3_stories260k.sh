#!/usr/bin/env bash
# Table 3 on stories260K (a 5-layer, head_dim-8 sanity check; docs/results.md): the
# protocol of scripts/table3.sh with layers 1-3 converted (the default range for a
# 5-layer model), ctx 256, on tinystories-dev.txt (one token stream, no BOS, 915 blocks):
#   0-15   held-out perplexity
#   16-25  kernel calibration (train 16-23 / validation 24-25)
#   26-57  LoRA validation (32 blocks, as the paper's 32 validation blocks)
#   58-    LoRA training blocks
# Grouping prompts: the paragraphs after the first 58 x 256 tokens.
# Environment: as scripts/table3.sh (OUT, SEEDS, CAP, EVAL_EVERY, PATIENCE, MIN_DELTA,
# METHODS, RESUME); the measured runs used SEEDS="1 2" and CAP=400 or 1600.
set -euo pipefail
D=$(cd "$(dirname "$0")/.." && pwd)/../shared/data
export MODEL=$D/stories260K.bin TEXT=$D/tinystories-dev.txt CTX=256 LAYERS=1-3
export EVAL_BLOCKS=16 CALIB_TRAIN=16-23 CALIB_VAL=24-25 VAL_BLOCKS=26:58 TRAIN_BLOCKS=58:
export AFTER_TOKENS=$((58 * 256))
exec bash "$(dirname "$0")/table3.sh"
