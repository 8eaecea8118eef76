#pragma once
// The one decode loop: sequences advanced together, one batched model step at a time.
// Each step runs Transformer::extend_rows once (one pass over the weights for every
// row, each row attending through its own layer states): every decoding sequence reads
// the token it picked last, and sequences still reading their prompts share a budget of
// prompt tokens, first come first served. The rows that end their prompt or decoded get
// logits and pick their next token by their TokenPicker. `generate` runs it with one
// sequence, the server's engine with many; they differ only in how sequences come and go
// and in what they do with each token.
#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "oal/generate/token_picker.h"
#include "oal/model/transformer.h"

namespace oal::generate {

// One sequence of the loop.
struct DecodeRow {
  DecodeRow(std::vector<int32_t> prompt_tokens, model::Transformer::LayerStates layer_states,
            TokenPicker token_picker)
      : prompt(std::move(prompt_tokens)),
        states(std::move(layer_states)),
        picker(std::move(token_picker)) {}

  std::vector<int32_t> prompt;            // the tokens to read before the first pick
  model::Transformer::LayerStates states; // what the sequence has read
  TokenPicker picker;
  std::vector<int32_t> fed;    // tokens the states absorbed through this loop and before it
  int64_t prefilled = 0;       // prompt tokens in the states (a caller may start it above 0
                               // for a prompt prefix its states already hold)
  int32_t next_token = -1;     // picked, read at the next step (-1: none; the row waits)
  bool finished = false;       // the caller ended it; steps skip it

  int64_t prompt_size() const { return static_cast<int64_t>(prompt.size()); }
  bool prefilling() const { return prefilled < prompt_size(); }
  bool decoding() const { return !finished && !prefilling() && next_token >= 0; }
};

// What one step reads: the rows it advances and the tokens each reads.
struct StepPlan {
  std::vector<DecodeRow*> rows;
  std::vector<at::Tensor> tokens;  // [T_r] int64 per row
  int64_t prompt_tokens = 0;       // prompt tokens read in this step
  int64_t decoding = 0;            // rows that read one picked token
};

// One row's pick in a step.
struct StepPick {
  DecodeRow* row = nullptr;
  TokenPicker::Pick pick;
};

struct StepResult {
  std::vector<StepPick> picks;  // in plan order
  double pick_seconds = 0;      // of the step's time, spent in the lm head's sampling
};

// The next step over `rows` (finished rows are skipped): every decoding row reads its
// next token; prefilling rows share `prompt_budget` tokens (>= 1) in order. Empty when no
// row can advance.
StepPlan plan_step(const std::vector<DecodeRow*>& rows, int64_t prompt_budget);

// Runs `plan` (non-empty) on `model` under at::NoGradGuard: the rows' states absorb their
// tokens (and `fed` records them), and every row that ends its prompt or decoded picks its
// next token (next_token is set to it, unless the pick ends the sequence: then -1).
// Throws what the model throws; the rows' states are then
// undefined, so a caller ends every row of the plan.
StepResult run_step(const model::Transformer& model, const StepPlan& plan);

}  // namespace oal::generate
