#pragma once
// The one list of attention methods the project compares (paper Tables 1-3): name, kind,
// what `oal calibrate` fits, parameter and feature sizes, and how to build a layer of it.
// calibrate, convert, bench, diagnose, fidelity and every --help read this list; adding a
// method means adding one entry here (and, for a new kind of fit, its calibrator in
// calib/calibrators.cpp).
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "oal/attention/method.h"
#include "oal/attention/oal/kernel_json.h"
#include "oal/attention/windowed/window.h"

namespace oal::attn {

// One layer's attention shape, and the exact window its linear method runs beside
// (attention/windowed/window.h; none: the plain method).
struct MethodShape {
  int64_t layer = 0, q_heads = 0, kv_heads = 0, head_dim = 0;
  Window window{};
};

enum class MethodKind {
  exact,        // softmax
  quadratic,    // OAL and the learned global kernel (HD state, attention/oal/chunked_attention.h)
  feature_map,  // the linear baselines (attention/baselines/feature_method.h)
  window,       // exact weights on the sinks and the recent window only (StreamingLLM)
};

// What calibration fits (calib/calibrators.cpp builds one calibrator per value; a switch
// over this enum, so a new value without a calibrator does not compile quietly).
enum class Fit {
  none,                    // nothing: the method is used as built (softmax, performer)
  grouped_kernel,          // L per query head over the outlier groups (oal)
  global_kernel,           // L per query head with one group (global)
  taylorshift_tau,         // a temperature per query head
  dijiang_theta,           // DCT feature weights per query head
  spectraformer_fastfood,  // one FastFood projection per layer
};

// Size of a method's per-token feature vectors, for memory estimates: `dim` values of
// `element_bytes` each (0 for softmax, which has no feature map).
struct FeatureSize {
  int64_t dim = 0, element_bytes = 0;
};

struct MethodSpec {
  const char* name;     // stable: CLI, run directories, reports
  const char* summary;  // one line for --help and docs
  MethodKind kind;
  Fit fit;
  bool needs_kernels;   // can only be built from fitted kernels (oal)
  bool stochastic;      // initial parameters are random draws from the seed (random features)
  // Trainable parameters of one layer (`groups`: OAL groups per head, 1 elsewhere).
  int64_t (*parameter_count)(const MethodShape& shape, int64_t groups);
  FeatureSize (*features)(int64_t head_dim);
  // One layer with initial parameters, or from `kernels` (oal, global) when given.
  std::shared_ptr<AttentionMethod> (*make)(const MethodShape& shape, uint64_t seed,
                                           const ModelKernels* kernels);
  // The method whose fitted parameters initialise this one's fit (oal starts from the
  // fitted global kernel), fitted first when not requested itself; nullptr: none.
  const char* starts_from = nullptr;
};

// Every method, in table order: softmax, oal, global, taylorshift, performer, dijiang,
// spectraformer, window.
const std::vector<MethodSpec>& method_registry();
// Throws oal::Error("method") naming the known methods.
const MethodSpec& method_spec(std::string_view name);
std::vector<std::string> method_names();
// The methods that can run with `window` (the default of the commands that take a method
// list): every method but "window" without a window, and every method with one.
std::vector<std::string> method_names(const Window& window);
std::vector<std::string> method_names(MethodKind kind);
// "softmax, oal, ..." (sep between names), for --help and error messages.
std::string method_list(std::string_view sep = ", ");
// Throws oal::Error(op) for the first name that is not a method.
void check_method_names(const std::vector<std::string>& names, std::string_view op);
// The exact method every linearisation is measured against (softmax).
const MethodSpec& reference_method();

// method_spec(name).make(...) after checking the shape (oal::Error("make_method")).
// "oal" without kernels is an error; "global" without kernels is Taylor 1 + s + s²/2.
// With shape.window set, every linear method (quadratic kernel or feature-map baseline)
// becomes a WindowedAttention over it (c_h = 0 until fitted or loaded); "window" needs
// shape.window.recent >= 1; softmax ignores the window.
std::shared_ptr<AttentionMethod> make_method(std::string_view name, const MethodShape& shape,
                                             uint64_t seed, const ModelKernels* kernels);
// Inference-only QuadraticAttention over one kernel per query head (fp64 L).
std::shared_ptr<AttentionMethod> make_quadratic_method(const std::vector<QuadraticKernel>& kernels);

}  // namespace oal::attn
