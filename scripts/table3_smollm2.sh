#!/usr/bin/env bash
# Table 3 on the real head_dim-64 model SmolLM2-135M-Instruct (GGUF Q4_1,
# scripts/fetch-models.sh; docs/results.md): the protocol of scripts/table3.sh with the
# paper's replacement rule (layers 3-26 of 30 converted: all but three softmax layers
# at each end), ctx 512, on WikiText-2 test read as one token stream (no BOS, 589 blocks
# of 512 tokens; the only WikiText text here, so the paper's WikiText-103 training is
# replaced by disjoint blocks of it):
#   0-15   held-out perplexity (8,192 tokens)
#   16-25  kernel calibration (train 16-23 / validation 24-25)
#   26-41  LoRA validation (16 blocks, 8,192 tokens)
#   42-    LoRA training blocks (547)
# Grouping prompts: the paragraphs after the first 42 x 512 tokens.
# Budget (this 2-core machine, where one LoRA update of this model costs ~10 s at 512
# tokens and ~21 s at 1024): calibration at most CALIB_UPDATES=100 Adam updates per fit
# (a tenth of the paper's), LoRA capped at CAP updates of one block.
# Environment: as scripts/table3.sh (OUT, SEEDS, CAP, EVAL_EVERY, PATIENCE, MIN_DELTA,
# METHODS, RESUME, CALIB_UPDATES).
set -euo pipefail
cd "$(dirname "$0")/.."
M=${OAL_MODEL_CACHE:-.cache/models}/SmolLM2-135M-Instruct.Q4_1.gguf
[ -f "$M" ] || bash scripts/fetch-models.sh
export MODEL=$M TEXT=../shared/data/wikitext2-test.raw CTX=512 LAYERS=3-26
export EVAL_BLOCKS=16 CALIB_TRAIN=16-23 CALIB_VAL=24-25 VAL_BLOCKS=26-41 TRAIN_BLOCKS=42:
export AFTER_TOKENS=$((42 * 512))
export OUT=${OUT:-runs/smollm2-table3} CALIB_UPDATES=${CALIB_UPDATES:-100}
exec bash scripts/table3.sh
