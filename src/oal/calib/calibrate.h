#pragma once
// Fitting every requested method's kernel parameters for some layers (paper App. B,
// App. F.1): per query head for OAL, learned global, TaylorShift and DiJiang, per layer
// for SpectraFormer; Performer has nothing to fit (fixed seeded draws). Each method's
// calibrator (calibrators.h) lists its independent fits; they run in parallel
// (at::parallel_for; ATen ops inside run single-threaded), the global kernel's before
// OAL's, which start from it.
//
// Learned global: three initialisations per head — Taylor (1 + s + s²/2) and two
// Gaussian perturbations of it (sigma `perturb_sigma` on every packed L entry, seeds
// derived from the run seed) — best validation MSE wins. OAL: the fitted global
// embedded into the head's groups, Taylor in the groups, and the embedded global
// perturbed; best validation per head. (The paper names the three OAL candidates; for
// the global's own three it only says "three initialization candidates".)
// With a window, the global's third start is window-heavy (c_h = -8), and both methods
// keep a fourth, unfitted candidate per head: the windowed-only method (c_h = -30), so
// that adding the kernel can never make a head worse on the validation data than the
// window alone, at any fitted context.
#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "oal/attention/method.h"
#include "oal/attention/method_store.h"
#include "oal/attention/oal/kernel_json.h"
#include "oal/calib/calibrators.h"
#include "oal/calib/fit.h"
#include "oal/core/progress.h"
#include "oal/dist/world.h"

namespace oal::calib {

struct CalibrationOptions {
  std::vector<std::string> methods;  // registered names (attention/registry.h)
  FitSettings fit;
  uint64_t seed = 0;                 // draws (Performer, DiJiang, SpectraFormer) and sampling
  double perturb_sigma = 0.1;        // perturbed-initialisation noise
  // The exact window beside every linear method (attention/windowed/window.h): with one,
  // oal and global fit L and c_h jointly on the windowed output, the feature-map
  // baselines their parameters and c_h (from the window-heavy -8), and "window" is the
  // windowed-only method.
  attn::Window window{};
  ProgressFn progress;               // ("fits", detail = method): this rank's fits
  // The processes sharing the fits (dist/world.h); null = this process alone. Every
  // rank calls calibrate() with the same inputs and options; each runs its share of the
  // fits, the results are exchanged after each stage, and every rank returns the same
  // result — equal to a single-process run (each fit is seeded by its identity and runs
  // single-threaded either way).
  std::shared_ptr<dist::World> world;
};

using attn::LayerMethods;  // attention/method_store.h: a layer's methods by name

struct CalibrationResult {
  std::vector<LayerMethods> layers;
  // Fitted kernels of the requested quadratic-kernel methods (registry kind quadratic:
  // OAL, the learned global kernel), by method name; a run directory writes each as
  // kernels-<name>.json.
  std::map<std::string, attn::ModelKernels> kernels;
  std::vector<FitReport> reports;
  // Wall time of each phase on this rank (s): "capture" (forward passes, softmax targets
  // and their exchange; calibrate_model only), "fits". Not written to the run directory.
  double capture_seconds = 0, fit_seconds = 0;
};

// The methods calibrate() fits, in the order it runs and reports them: the requested
// ones, each preceded by the method it starts from (the registry's starts_from: the
// learned global kernel before OAL) when that was not requested before it. Throws
// oal::Error("method") naming an unknown method.
std::vector<std::string> calibration_order(const std::vector<std::string>& requested);

// `groups`: per layer, one kernel per query head whose groups define OAL's partition
// (their coefficients are not used). Required when "oal" is requested.
CalibrationResult calibrate(const std::vector<LayerFitInput>& inputs,
                            const attn::ModelKernels* groups, const CalibrationOptions& options);

}  // namespace oal::calib
