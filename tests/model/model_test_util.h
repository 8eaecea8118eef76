#pragma once
// Helpers shared by the transformer / generation / capture tests.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "oal/model/load.h"
#include "oal/model/synthetic.h"

namespace oal::test {

// A fresh directory per test (removed first), under the system temp dir.
inline std::filesystem::path model_test_dir(const std::string& tag) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  auto dir = std::filesystem::temp_directory_path() /
             ("oal_model_" + std::to_string(::getpid()) + "_" + info->test_suite_name() + "_" +
              info->name() + "_" + tag);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// Writes a synthetic HF checkpoint and loads it back through the real loader.
inline oal::model::ModelWeights synthetic_checkpoint(const oal::model::SyntheticOptions& o,
                                                     const std::string& tag) {
  const auto dir = model_test_dir(tag);
  oal::model::write_synthetic_model(dir, o);
  return oal::model::load_model(dir.string());
}

// The small two-layer model of the transformer and decode-path tests: hidden 64, 4 query
// / 2 KV heads of dim 16, planted outlier pairs of scale 4 (so attention is not flat).
inline oal::model::SyntheticOptions small_synthetic(oal::model::SyntheticArch arch,
                                                    uint64_t seed) {
  oal::model::SyntheticOptions o;
  o.architecture = arch;
  o.hidden_size = 64;
  o.intermediate_size = 96;
  o.num_layers = 2;
  o.num_heads = 4;
  o.num_kv_heads = 2;
  o.max_position_embeddings = 128;
  o.planted_scale = 4.0;
  o.seed = seed;
  return o;
}

// Deterministic token ids in [0, vocab): [rows, len] int64.
inline at::Tensor test_tokens(int64_t rows, int64_t len, int64_t vocab, uint64_t seed = 1) {
  std::vector<int64_t> ids(rows * len);
  uint64_t s = seed;
  for (auto& id : ids) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    id = static_cast<int64_t>((s >> 33) % static_cast<uint64_t>(vocab));
  }
  return at::tensor(ids, at::kLong).view({rows, len});
}

inline std::vector<int64_t> row(const at::Tensor& tokens, int64_t r) {
  at::Tensor t = tokens[r].contiguous();
  return {t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel()};
}

}  // namespace oal::test
