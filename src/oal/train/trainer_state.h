#pragma once
// The trainer's bookkeeping in a checkpoint's state.json (beside the "step" that
// checkpoint.h writes): the options signature a resume must match, the update and
// validation logs, and the best/early-stopping state. finetune() writes it at every
// checkpoint and reads it back on --resume; state.json is a file a user can edit, so
// reading it checks every field (fuzz/fuzz_checkpoint feeds it hostile bytes).
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace oal::train {

struct StepRecord {
  int64_t step = 0;  // updates completed after this one (1-based)
  double loss = 0;   // mean NLL of the update's batch
  double lr = 0;
  double grad_norm = 0;  // before clipping
};

struct ValRecord {
  int64_t step = 0;  // updates completed (0 = before training)
  double nll = 0;    // mean NLL per target over the validation blocks
};

struct TrainerState {
  nlohmann::json signature;  // options and trainable tensors the run was started with
  std::vector<StepRecord> steps_log;
  std::vector<ValRecord> val_log;
  int64_t best_step = 0;
  double best_val_nll = 0;
  int64_t improved_step = 0;   // last update that improved by more than min_delta
  bool stopped_early = false;
};

// {"signature", "history": {"steps": [[step, loss, lr, grad_norm]...],
//  "val": [[step, nll]...]}, "best_step", "best_val_nll", "improved_step", "stopped_early"}
nlohmann::json trainer_state_to_json(const TrainerState& s);

// The inverse. `where` names the file in errors. Files written before early stopping
// existed have no "improved_step" (taken as best_step) or "stopped_early" (false).
// Throws oal::Error("[finetune] <where>: ...") naming the first missing or mistyped field.
TrainerState trainer_state_from_json(const nlohmann::json& j, const std::string& where);

}  // namespace oal::train
