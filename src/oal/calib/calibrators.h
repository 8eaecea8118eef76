#pragma once
// Per-method calibration (paper App. B, App. F.1): what each method fits for one layer,
// as a list of independent fits (tasks), and how the finished fits become the layer's
// method. calibrate() (calibrate.h) runs the tasks of every requested method in
// parallel; the tasks are the unit that can be spread over threads or processes.
#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "oal/attention/method.h"
#include "oal/attention/oal/kernel_json.h"
#include "oal/calib/fit.h"

namespace oal::calib {

// Frozen tensors of one layer: q [N, Hq, T, D], k, v [N, Hkv, T, D|Dv], y (softmax
// outputs) [N, Hq, T, Dv] for the training and validation blocks.
struct LayerFitInput {
  int64_t layer = 0;
  FitData data;
};

struct CalibrationOptions;

// One finished fit (one head or layer, one initialisation).
struct FitReport {
  std::string method, init;
  int64_t layer = 0, head = -1;  // head -1: a per-layer fit
  double initial_val = 0, best_val = 0;
  int64_t best_update = 0, updates = 0;
  bool selected = false;         // the candidate kept for this head
};

// What a calibrator sees of one layer. `global` is filled before the tasks of a method
// that starts from another's fit (the registry's starts_from: OAL's initialisations
// embed the learned global kernel) run.
struct LayerContext {
  const LayerFitInput* input = nullptr;
  const CalibrationOptions* options = nullptr;
  const std::vector<attn::QuadraticKernel>* groups = nullptr;  // per query head (OAL)
  const std::vector<attn::QuadraticKernel>* global = nullptr;  // fitted global per head
  const std::vector<double>* global_log_scales = nullptr;      // its c_h when windowed
};

// One independent fit: a query head (head >= 0) or a whole layer (head -1) of one
// method from one initialisation.
struct FitTask {
  std::string method, init;
  int64_t layer = 0, head = -1;
  std::function<FitResult()> run;
  double cost = 1;  // relative work (one head's fit = 1), for spreading tasks over ranks
};

// One method's calibrated layer.
struct LayerFit {
  std::shared_ptr<attn::AttentionMethod> method;
  std::vector<attn::QuadraticKernel> kernels;  // oal / global: the kept kernel per head
  std::vector<double> log_scales;              // windowed oal / global: the kept c_h per head
  std::vector<FitReport> reports;
};

class MethodCalibrator {
 public:
  virtual ~MethodCalibrator() = default;
  // The layer's independent fits (none for methods with nothing to fit). The tasks refer
  // to `ctx`, which must outlive them; they read it (ctx.global) only when run.
  virtual std::vector<FitTask> tasks(const LayerContext& ctx) const = 0;
  // The layer's method from the tasks' results (tasks() order).
  virtual LayerFit finish(const LayerContext& ctx, const std::vector<FitTask>& tasks,
                          const std::vector<FitResult>& results) const = 0;
};

// The calibrator of a registered method (attention/registry.h); oal::Error("calibrate")
// for unknown names.
std::unique_ptr<MethodCalibrator> make_calibrator(const std::string& method);

}  // namespace oal::calib
