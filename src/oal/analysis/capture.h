#pragma once
// Capture of a layer's attention internals during a forward, for analysis and fitting:
// post-RoPE queries and keys, values, per-head attention outputs before W_o, W_o itself
// and the residual stream after the layer. In memory (capture()) and as a safetensors
// file (write_capture / read_capture; names and shapes in docs/formats.md, "Capture
// files").
#include <ATen/ATen.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "oal/core/progress.h"
#include "oal/model/transformer.h"

namespace oal::analysis {

// One layer's tensors for N sequences of T tokens (fp32). A part not requested is
// undefined.
struct LayerCapture {
  at::Tensor q;         // [N, Hq, T, D]   post-RoPE queries
  at::Tensor k;         // [N, Hkv, T, D]  post-RoPE keys
  at::Tensor v;         // [N, Hkv, T, Dv] values
  at::Tensor head_out;  // [N, Hq, T, Dv]  attention output per head, before W_o
  at::Tensor wo;        // [hidden, Hq*Dv] o_proj weight (column block h*Dv.. is head h)
  at::Tensor resid;     // [N, T, hidden]  residual stream after the layer
};

struct CaptureOptions {
  std::vector<int64_t> layers;  // which layers (each in [0, num_layers), no repeats)
  bool q = true, k = true, v = true, head_out = true, resid = true;
  int64_t batch = 1;    // sequences per forward
  ProgressFn progress;  // called per batch with ("sequences")
};

struct Capture {
  at::Tensor tokens;                            // [N, T] int64, the inputs
  std::map<int64_t, LayerCapture> layers;       // by layer index
  std::map<std::string, std::string> metadata;  // see write_capture
};

// Runs `model` over tokens [N, T] (int64) `batch` rows at a time, under NoGradGuard, and
// records the chosen layers. metadata gets format/version/model shape entries.
Capture capture(const model::Transformer& model, const at::Tensor& tokens,
                const CaptureOptions& options);

// Writes "tokens" and, per captured layer i, "layers.{i}.q|k|v|head_out|wo|resid" (those
// defined) with capture.metadata, atomically.
void write_capture(const std::filesystem::path& path, const Capture& capture);

// Reads a file written by write_capture; checks the format tag and that the shapes agree
// with each other (oal::Error "[capture] <file>: ..." otherwise). Tensors are fp32 views.
Capture read_capture(const std::filesystem::path& path);

}  // namespace oal::analysis
