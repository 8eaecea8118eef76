#pragma once
// JSON files holding the OAL kernels of a model (layer -> query head -> groups, L, eps).
// Our format is documented in docs/formats.md ("Kernel JSON"); the official release
// layout of the paper's authors (configs/oal_qwen_n4096.json, see
// ../shared/data/README.md) is read as well.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "oal/attention/oal/quadratic.h"

namespace oal::attn {

// Kernels for (some of) the layers of one model.
struct ModelKernels {
  int64_t head_dim = 0;                                   // d of every kernel
  std::map<int64_t, std::vector<QuadraticKernel>> layers;  // layer -> one per query head
  nlohmann::json meta = nlohmann::json::object();          // provenance, free-form

  // The kernels of `layer`; throws oal::Error("kernel_json") when absent.
  const std::vector<QuadraticKernel>& layer(int64_t layer) const;
};

// Our format (format "oal-kernels", version 1) to and from JSON. from_json validates
// every kernel and throws oal::Error("kernel_json", ...) naming the layer/head at fault.
nlohmann::json kernels_to_json(const ModelKernels& kernels);
ModelKernels kernels_from_json(const nlohmann::json& j);
// The official release layout: top-level "epsilon", "head_dim", "layers" -> "<i>" ->
// "max_groups", "heads" -> "<h>" -> "group_count", "groups", "packed_lower_triangular"
// (row-major lower triangle of (max_groups+1)²; only the leading (group_count+1)² block
// is the head's L). meta keeps model_name, seq_len, parameterization and source.
ModelKernels official_kernels_from_json(const nlohmann::json& j);

// Writes our format atomically (temp file + rename), pretty-printed.
void write_kernels(const std::filesystem::path& path, const ModelKernels& kernels);
// Reads either format (the official one is recognised by its per-layer "max_groups").
ModelKernels read_kernels(const std::filesystem::path& path);

}  // namespace oal::attn
