// oal::io::dequantize against the gguf Python package (gguf.quants.dequantize, the
// reference): scripts/gguf_quant_reference.py writes random blocks of every type the
// package decodes, and, when the real model is in the model cache, the package's
// dequantization of four tensors of SmolLM2-135M-Instruct.Q4_1.gguf.
//
// Tolerance: none; outputs must be bitwise equal (NaN only has to be NaN). Why that is
// right for each kind of type:
//  * F32 is a copy. F16 and BF16 convert exactly (every fp16/bf16 value is a float32);
//    all 65536 bit patterns of each are compared. A NaN need only stay a NaN: numpy
//    may convert halfs with the CPU's F16C/AVX-512 instructions, which quiet signalling
//    NaNs, where dequantize keeps the payload bit for bit.
//  * The block types compute each output as at most two products and one sum, in the
//    order gguf/quants.py uses: (d·sc)·q, d·q + m, (d·sc)·q − dmin·m. Every product
//    is exact in float32: a fp16 scale has at most 11 significant bits, a sub-block
//    scale at most 7 (Q6_K's int8) and a quant at most 6, so a product of all three
//    needs at most 24 bits, and a non-zero one lies between 2^-24 and 2^28 in magnitude
//    (no underflow, no overflow). Each output is therefore rounded exactly once, at
//    its final sum, with IEEE round-to-nearest, on both sides, and whether or not
//    either side fuses the sum into an FMA.
// Any difference is a layout or formula error, not rounding.
#include <gtest/gtest.h>

#include <bit>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <unistd.h>
#include <vector>

#include "common/shared_data.h"
#include "oal/io/gguf_quants.h"

namespace fs = std::filesystem;

namespace {

constexpr const char* k_model = "SmolLM2-135M-Instruct.Q4_1.gguf";
constexpr const char* k_python_what = "the project venv's python (scripts/python-venv.sh)";
constexpr const char* k_model_what = "model file (scripts/fetch-models.sh)";

struct ModelTensor {
  const char* name;
  oal::io::GgmlType type;
};
const ModelTensor k_model_tensors[] = {
    {"token_embd.weight", oal::io::GgmlType::Q8_0},
    {"blk.0.attn_q.weight", oal::io::GgmlType::Q4_1},
    {"blk.29.ffn_down.weight", oal::io::GgmlType::Q4_1},
    {"blk.0.attn_norm.weight", oal::io::GgmlType::F32},
};
void PrintTo(const ModelTensor& t, std::ostream* os) { *os << t.name; }

struct Reference {
  fs::path dir;
  nlohmann::json manifest;
  std::string error;  // non-empty when the script failed
};

// One directory per process, removed at exit: the script runs once (a few seconds)
// and every test reads its output.
fs::path process_temp_dir() {
  static const fs::path dir =
      fs::temp_directory_path() / ("oal_test_gguf_quants_reference_" + std::to_string(::getpid()));
  static const struct Remover {
    ~Remover() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } remover;
  return dir;
}

std::string quoted(const fs::path& p) { return "'" + p.string() + "'"; }

Reference run_script() {
  Reference ref;
  ref.dir = process_temp_dir();
  std::error_code ec;
  fs::remove_all(ref.dir, ec);
  fs::create_directories(ref.dir);
  std::string cmd = quoted(oal::test::venv_python()) + " " +
                    quoted(fs::path(OAL_SOURCE_DIR) / "scripts" / "gguf_quant_reference.py") +
                    " --out " + quoted(ref.dir) + " --seed 20240611";
  const fs::path model = oal::test::model_cache_file(k_model);
  if (fs::exists(model)) {
    std::string names;
    for (const auto& t : k_model_tensors) names += (names.empty() ? "" : ",") + std::string(t.name);
    cmd += " --model " + quoted(model) + " --tensors " + names;
  }
  const fs::path log = ref.dir / "script.log";
  cmd += " > " + quoted(log) + " 2>&1";
  if (std::system(cmd.c_str()) != 0) {
    std::ifstream in(log);
    ref.error = "command failed: " + cmd + "\n" +
                std::string(std::istreambuf_iterator<char>(in), {});
    return ref;
  }
  std::ifstream in(ref.dir / "manifest.json");
  ref.manifest = nlohmann::json::parse(in);
  return ref;
}

const Reference& reference() {
  static const Reference ref = run_script();
  return ref;
}

std::vector<uint8_t> read_bytes(const fs::path& path, uint64_t offset, uint64_t size) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  in.seekg(std::streamoff(offset));
  std::vector<uint8_t> out(size);
  in.read(reinterpret_cast<char*>(out.data()), std::streamsize(size));
  EXPECT_EQ(uint64_t(in.gcount()), size) << path << " at " << offset;
  return out;
}

std::vector<float> read_floats(const fs::path& path, int64_t n) {
  const auto bytes = read_bytes(path, 0, uint64_t(n) * 4);
  std::vector<float> out(static_cast<size_t>(n));
  std::memcpy(out.data(), bytes.data(), bytes.size());
  EXPECT_EQ(fs::file_size(path), uint64_t(n) * 4) << path;
  return out;
}

const nlohmann::json* find_entry(const Reference& ref, const std::string& kind,
                                 const std::string& key, const std::string& value) {
  for (const auto& e : ref.manifest.at("entries"))
    if (e.at("kind") == kind && e.at(key) == value) return &e;
  return nullptr;
}

// Bitwise equality, NaN matching NaN (see the file comment); reports the first few.
void expect_same(const std::vector<float>& got, const std::vector<float>& want,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const bool same = (std::isnan(got[i]) && std::isnan(want[i])) ||
                      std::bit_cast<uint32_t>(got[i]) == std::bit_cast<uint32_t>(want[i]);
    if (!same && ++bad <= 5)
      ADD_FAILURE() << what << " element " << i << " (block element " << i % 256
                    << " of 256): got " << got[i] << ", gguf " << want[i];
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.size() << " elements differ";
}

}  // namespace

class GgufQuantsReference : public ::testing::TestWithParam<std::string> {};

TEST_P(GgufQuantsReference, RandomBlocksMatchGguf) {
  OAL_REQUIRE_PATH(oal::test::venv_python(), k_python_what);
  const Reference& ref = reference();
  ASSERT_TRUE(ref.error.empty()) << ref.error;
  const auto* e = find_entry(ref, "random", "type", GetParam());
  ASSERT_NE(e, nullptr) << "manifest has no random blocks of " << GetParam();
  const auto id = e->at("ggml_type_id").get<uint32_t>();
  ASSERT_EQ(oal::io::ggml_type_name(id), GetParam());
  const auto n = e->at("n_elements").get<int64_t>();
  ASSERT_EQ(oal::io::ggml_nbytes(id, n), e->at("n_bytes").get<uint64_t>());
  const fs::path blocks = ref.dir / e->at("files").at("blocks").get<std::string>();
  const auto src = read_bytes(blocks, 0, fs::file_size(blocks));
  ASSERT_EQ(src.size(), oal::io::ggml_nbytes(id, n));
  std::vector<float> got(static_cast<size_t>(n));
  oal::io::dequantize(id, src.data(), n, got.data());
  const auto want = read_floats(ref.dir / e->at("files").at("reference").get<std::string>(), n);
  expect_same(got, want, GetParam());
}

// Every type dequantize supports, except Q8_K, which the gguf package does not decode
// (test_gguf_quants.cpp checks it by hand).
INSTANTIATE_TEST_SUITE_P(AllTypes, GgufQuantsReference,
                         ::testing::Values("F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1",
                                           "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"),
                         [](const auto& info) { return info.param; });

// io::quantize to Q8_0 (what --weights q8_0 converts with) against gguf.quants.quantize:
// bitwise equal bytes (the same fp32 operations in the same order: amax / 127, 1 / d,
// x · (1/d) rounded half away from zero, d rounded to fp16 to nearest even).
TEST(GgufQuantizeReference, Q8_0MatchesGguf) {
  OAL_REQUIRE_PATH(oal::test::venv_python(), k_python_what);
  const Reference& ref = reference();
  ASSERT_TRUE(ref.error.empty()) << ref.error;
  const auto* e = find_entry(ref, "quantize", "type", "Q8_0");
  ASSERT_NE(e, nullptr) << "manifest has no quantize entry";
  const auto n = e->at("n_elements").get<int64_t>();
  const auto src = read_floats(ref.dir / e->at("files").at("source").get<std::string>(), n);
  const fs::path want_path = ref.dir / e->at("files").at("reference").get<std::string>();
  const auto want = read_bytes(want_path, 0, fs::file_size(want_path));
  std::vector<uint8_t> got(oal::io::ggml_nbytes(uint32_t(oal::io::GgmlType::Q8_0), n));
  oal::io::quantize(uint32_t(oal::io::GgmlType::Q8_0), src.data(), n, got.data());
  ASSERT_EQ(got.size(), want.size());
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i] && ++bad <= 5)
      ADD_FAILURE() << "byte " << i << " (block " << i / 34 << ", offset " << i % 34
                    << "): got " << int(got[i]) << ", gguf " << int(want[i]);
  EXPECT_EQ(bad, 0) << bad << " of " << got.size() << " bytes differ";
}

class GgufQuantsReferenceModel : public ::testing::TestWithParam<ModelTensor> {};

TEST_P(GgufQuantsReferenceModel, TensorMatchesGguf) {
  const ModelTensor& t = GetParam();
  OAL_REQUIRE_PATH(oal::test::venv_python(), k_python_what);
  const fs::path model = oal::test::model_cache_file(k_model);
  OAL_REQUIRE_PATH(model, k_model_what);
  const Reference& ref = reference();
  ASSERT_TRUE(ref.error.empty()) << ref.error;
  const auto* e = find_entry(ref, "model", "name", t.name);
  ASSERT_NE(e, nullptr) << "manifest has no entry for " << t.name;
  const auto id = e->at("ggml_type_id").get<uint32_t>();
  EXPECT_EQ(id, uint32_t(t.type)) << t.name << " is " << oal::io::ggml_type_name(id);
  const auto n = e->at("n_elements").get<int64_t>();
  const uint64_t nbytes = oal::io::ggml_nbytes(id, n);
  ASSERT_EQ(nbytes, e->at("n_bytes").get<uint64_t>());
  const auto offset = e->at("offset").get<uint64_t>();  // absolute, checked by the script
  ASSERT_LE(offset + nbytes, fs::file_size(model));
  const auto src = read_bytes(model, offset, nbytes);
  std::vector<float> got(static_cast<size_t>(n));
  oal::io::dequantize(id, src.data(), n, got.data());
  const auto want = read_floats(ref.dir / e->at("files").at("reference").get<std::string>(), n);
  expect_same(got, want, t.name);
}

INSTANTIATE_TEST_SUITE_P(SmolLM2, GgufQuantsReferenceModel, ::testing::ValuesIn(k_model_tensors),
                         [](const auto& info) {
                           std::string s = info.param.name;
                           for (char& c : s)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return s;
                         });
