#include "oal/train/trainer_state.h"


#include "oal/core/error.h"
#include "oal/io/json_file.h"

namespace oal::train {
namespace {

constexpr std::string_view k_op = "finetune";
using nlohmann::json;

const json& field(const json& j, const char* key, const std::string& where) {
  check(j.is_object() && j.contains(key), k_op, "{}: missing field '{}'", where, key);
  return j.at(key);
}

double number(const json& v, const std::string& what) {
  if (!v.is_number()) fail(k_op, "{} must be a number, got {}", what, v.dump());
  return v.get<double>();
}

// A log row must be an array of exactly `n` entries (read with operator[] after this).
void check_row(const json& r, size_t n, const std::string& what) {
  if (!r.is_array() || r.size() != n)
    fail(k_op, "{}: each entry must be a list of {} numbers, got {}", what, n, r.dump());
}

}  // namespace

json trainer_state_to_json(const TrainerState& s) {
  json steps = json::array(), val = json::array();
  for (const auto& r : s.steps_log) steps.push_back({r.step, r.loss, r.lr, r.grad_norm});
  for (const auto& r : s.val_log) val.push_back({r.step, r.nll});
  return {{"signature", s.signature},
          {"history", {{"steps", steps}, {"val", val}}},
          {"best_step", s.best_step},
          {"best_val_nll", s.best_val_nll},
          {"improved_step", s.improved_step},
          {"stopped_early", s.stopped_early}};
}

TrainerState trainer_state_from_json(const json& j, const std::string& where) {
  TrainerState s;
  s.signature = field(j, "signature", where);
  const json& history = field(j, "history", where);
  const std::string steps_what = where + ": history.steps", val_what = where + ": history.val";
  const json& steps = field(history, "steps", where + ": history");
  const json& val = field(history, "val", where + ": history");
  check(steps.is_array() && val.is_array(), k_op, "{}: history.steps and history.val must be lists",
        where);
  for (const json& r : steps) {
    check_row(r, 4, steps_what);
    s.steps_log.push_back({io::json_int(r[0], k_op, steps_what + " step"), number(r[1], steps_what),
                           number(r[2], steps_what), number(r[3], steps_what)});
  }
  for (const json& r : val) {
    check_row(r, 2, val_what);
    s.val_log.push_back({io::json_int(r[0], k_op, val_what + " step"), number(r[1], val_what)});
  }
  s.best_step = io::json_int(field(j, "best_step", where), k_op, where + ": best_step");
  s.best_val_nll = number(field(j, "best_val_nll", where), where + ": best_val_nll");
  s.improved_step =
      io::json_int_or(j, "improved_step", s.best_step, k_op, where + ": improved_step");
  s.stopped_early = false;
  if (j.contains("stopped_early")) {
    check(j["stopped_early"].is_boolean(), k_op, "{}: stopped_early must be true or false", where);
    s.stopped_early = j["stopped_early"].get<bool>();
  }
  return s;
}

}  // namespace oal::train
