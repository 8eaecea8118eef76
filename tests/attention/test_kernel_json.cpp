// Kernel JSON: our format round-trips; the official OAL release (Qwen2.5-0.5B) loads, its
// L expands to the released M = L Lᵀ, and it survives a trip through our format.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include <unistd.h>

#include "common/shared_data.h"
#include "oal/attention/oal/kernel_json.h"
#include "test_util.h"

namespace oal::attn {
namespace {

using oal::test::expect_error;

std::filesystem::path temp_path(const std::string& name) {
  return std::filesystem::temp_directory_path() /
         ("oal_test_" + std::to_string(::getpid()) + "_" + name);
}

void expect_same(const ModelKernels& a, const ModelKernels& b) {
  EXPECT_EQ(a.head_dim, b.head_dim);
  ASSERT_EQ(a.layers.size(), b.layers.size());
  for (const auto& [layer, heads] : a.layers) {
    const auto& other = b.layer(layer);
    ASSERT_EQ(heads.size(), other.size());
    for (size_t h = 0; h < heads.size(); ++h) {
      EXPECT_EQ(heads[h].groups(), other[h].groups());
      EXPECT_EQ(heads[h].packed_lower(), other[h].packed_lower());  // bit-exact doubles
      EXPECT_EQ(heads[h].eps(), other[h].eps());
    }
  }
}

TEST(KernelJson, OurFormatRoundTrips) {
  ModelKernels mk;
  mk.head_dim = 16;
  mk.layers[3] = oal::test::random_kernels(4, 16, 5, 1);
  mk.layers[7] = oal::test::random_kernels(4, 16, 2, 2, 1e-6);
  mk.meta = {{"note", "synthetic"}};
  auto path = temp_path("kernels.json");
  write_kernels(path, mk);
  auto back = read_kernels(path);
  expect_same(mk, back);
  EXPECT_EQ(back.meta.at("note"), "synthetic");
  std::filesystem::remove(path);
  expect_error([&] { back.layer(5); }, {"[kernel_json]", "no kernels for layer 5"});
}

TEST(KernelJson, CorruptFilesAreErrors) {
  ModelKernels mk;
  mk.head_dim = 8;
  mk.layers[0] = oal::test::random_kernels(2, 8, 2, 3);
  auto j = kernels_to_json(mk);
  auto bad = j;
  bad["layers"]["0"][1]["groups"][0][0] = 99;
  expect_error([&] { kernels_from_json(bad); }, {"[kernel_json]", "layer 0 head 1", "partition"});
  bad = j;
  bad["layers"]["0"][0]["L"].push_back(1.0);
  expect_error([&] { kernels_from_json(bad); }, {"[kernel_json]", "layer 0 head 0", "values"});
  bad = j;
  bad["layers"]["0"][0]["epsilon"] = 0.0;
  expect_error([&] { kernels_from_json(bad); }, {"[kernel_json]", "eps"});
  bad = j;
  bad["layers"]["0"][0].erase("L");
  expect_error([&] { kernels_from_json(bad); }, {"[kernel_json]", "malformed"});
  bad = j;
  bad["head_dim"] = 9;
  expect_error([&] { kernels_from_json(bad); }, {"[kernel_json]", "head_dim 9"});
  bad = j;
  bad["format"] = "something-else";
  expect_error([&] { kernels_from_json(bad); }, {"[kernel_json]", "format"});
  auto path = temp_path("broken.json");
  {
    std::ofstream(path) << "{\"format\": \"oal-kernels\", \"layers\": {";
  }
  expect_error([&] { read_kernels(path); }, {"[kernel_json]", "not valid JSON"});
  std::filesystem::remove(path);
  expect_error([&] { read_kernels(temp_path("missing.json")); }, {"[kernel_json]", "cannot open"});
}

TEST(KernelJson, OfficialReleaseLoadsAndExpandsCorrectly) {
  auto path = OAL_REQUIRE_SHARED_FILE("official-oal-qwen2.5-0.5b.json");
  auto mk = read_kernels(path);
  EXPECT_EQ(mk.head_dim, 64);
  ASSERT_EQ(mk.layers.size(), 24u);
  std::map<int64_t, int> histogram;
  nlohmann::json raw = nlohmann::json::parse(std::ifstream(path));
  int checked = 0, broken_by_full_matrix = 0;
  for (const auto& [layer, heads] : mk.layers) {
    ASSERT_EQ(heads.size(), 14u) << "layer " << layer;
    const auto& lj = raw["layers"][std::to_string(layer)];
    for (size_t h = 0; h < heads.size(); ++h) {
      const auto& k = heads[h];
      ++histogram[k.num_groups()];
      EXPECT_EQ(k.eps(), 1e-6);
      const auto& hj = lj["heads"][std::to_string(h)];
      EXPECT_EQ(k.groups(), hj["groups"].get<std::vector<std::vector<int64_t>>>());
      // The released expanded matrix is zero-padded to max_groups + 1.
      auto released = hj["expanded_quadratic_matrix"].get<std::vector<std::vector<double>>>();
      int64_t n = k.num_groups() + 1;
      auto M = k.matrix();
      double scale = M.abs().max().item<double>(), worst = 0;
      for (size_t i = 0; i < released.size(); ++i)
        for (size_t j = 0; j < released.size(); ++j) {
          double ours = (static_cast<int64_t>(i) < n && static_cast<int64_t>(j) < n)
                            ? M[i][j].item<double>() : 0.0;
          worst = std::max(worst, std::abs(ours - released[i][j]));
        }
      // The release stores fp32 numbers (L and M each rounded, M computed in fp32):
      // observed up to 1.1e-6 of max|M|; a wrong block or a wrong mapping is O(1).
      EXPECT_LT(worst / scale, 3e-6) << "layer " << layer << " head " << h;
      // Reading the whole padded triangle as L instead breaks the heads whose padding
      // holds leftovers (86 of 336 per the data README).
      int64_t nmax = lj["max_groups"].get<int64_t>() + 1;
      auto full = QuadraticKernel::unpack_lower(
          hj["packed_lower_triangular"].get<std::vector<double>>(), nmax);
      auto Mfull = at::matmul(full, full.t());
      double worst_full = 0;
      for (int64_t i = 0; i < nmax; ++i)
        for (int64_t j = 0; j < nmax; ++j)
          worst_full = std::max(worst_full, std::abs(Mfull[i][j].item<double>() - released[i][j]));
      if (worst_full / scale > 1e-5) ++broken_by_full_matrix;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 336);
  EXPECT_EQ(broken_by_full_matrix, 86);
  EXPECT_EQ(histogram, (std::map<int64_t, int>{{2, 178}, {3, 125}, {4, 28}, {5, 5}}));
  EXPECT_EQ(mk.meta.at("model_name"), "Qwen/Qwen2.5-0.5B");
  // Through our format and back: identical kernels.
  auto out = temp_path("official_roundtrip.json");
  write_kernels(out, mk);
  expect_same(mk, read_kernels(out));
  std::filesystem::remove(out);
}

TEST(KernelJson, OfficialLayoutRejectsBadPadding) {
  nlohmann::json j = {{"epsilon", 1e-6}, {"head_dim", 2},
                      {"layers", {{"0", {{"max_groups", 2}, {"heads", {{"0", {
                          {"group_count", 2}, {"groups", {{0}, {1}}},
                          {"packed_lower_triangular", {1, 0, 1, 0, 0}}}}}}}}}}};
  expect_error([&] { official_kernels_from_json(j); },
               {"[kernel_json]", "layer 0 head 0", "has 5 values"});
  j["layers"]["0"]["heads"]["0"]["packed_lower_triangular"] = {1, 0, 1, 0, 0, 1};
  auto mk = official_kernels_from_json(j);
  EXPECT_EQ(mk.layer(0)[0].num_groups(), 2);
  j["layers"]["0"]["heads"]["2"] = j["layers"]["0"]["heads"]["0"];
  expect_error([&] { official_kernels_from_json(j); }, {"[kernel_json]", "without gaps"});
}

// Found by fuzz/fuzz_kernel_json: an integer field holding a huge float (3.5e32) was
// converted by nlohmann's get<int64_t>(), a float-to-integer cast out of range
// (undefined behaviour; UBSan aborts). Integer fields must now be JSON integers.
TEST(KernelJson, IntegerFieldsRejectFloats) {
  nlohmann::json official = {{"epsilon", 1e-6}, {"head_dim", 2},
                             {"layers", {{"0", {{"max_groups", 2}, {"heads", {{"0", {
                                 {"group_count", 2}, {"groups", {{0}, {1}}},
                                 {"packed_lower_triangular", {1, 0, 1, 0, 0, 1}}}}}}}}}}};
  auto bad = official;
  bad["layers"]["0"]["heads"]["0"]["groups"][1][0] = 3.48889e+32;
  expect_error([&] { official_kernels_from_json(bad); },
               {"[kernel_json]", "layer 0 head 0", "integer dimension indices"});
  bad = official;
  bad["head_dim"] = 1e300;
  expect_error([&] { official_kernels_from_json(bad); }, {"[kernel_json]", "'head_dim' must be an integer"});
  bad = official;
  bad["layers"]["0"]["max_groups"] = -1e30;
  expect_error([&] { official_kernels_from_json(bad); }, {"[kernel_json]", "'max_groups' must be an integer"});
  bad = official;
  bad["layers"]["0"]["heads"]["0"]["group_count"] = 2.5;
  expect_error([&] { official_kernels_from_json(bad); }, {"[kernel_json]", "'group_count' must be an integer"});

  ModelKernels mk;
  mk.head_dim = 8;
  mk.layers[0] = oal::test::random_kernels(2, 8, 2, 3);
  auto ours = kernels_to_json(mk);
  ours["version"] = 1e40;
  expect_error([&] { kernels_from_json(ours); }, {"[kernel_json]", "'version' must be an integer"});
  ours = kernels_to_json(mk);
  ours["layers"]["0"][0]["groups"][0][0] = -9e99;
  expect_error([&] { kernels_from_json(ours); }, {"[kernel_json]", "integer dimension indices"});
}

}  // namespace
}  // namespace oal::attn
