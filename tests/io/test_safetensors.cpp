// safetensors reader/writer: round trips for every dtype, and each kind of corrupt
// file producing a clear oal::Error (never a crash).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/temp_dir.h"
#include "oal/core/error.h"
#include "oal/io/safetensors.h"

namespace fs = std::filesystem;
using oal::io::read_safetensors;
using oal::io::write_safetensors;

namespace {

fs::path temp_dir() { return oal::test::test_dir("safetensors"); }

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void write_bytes(const fs::path& p, const std::string& s) {
  std::ofstream(p, std::ios::binary).write(s.data(), static_cast<std::streamsize>(s.size()));
}

// A file with a hand-written header and `data_bytes` zero bytes of data.
std::string make_file(const std::string& header, size_t data_bytes) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  return out + header + std::string(data_bytes, '\0');
}

// Expects reading `bytes` to throw an oal::Error containing every part of `expect`.
void expect_read_error(const std::string& bytes, std::initializer_list<std::string> expect) {
  auto p = temp_dir() / "bad.safetensors";
  write_bytes(p, bytes);
  try {
    read_safetensors(p);
    FAIL() << "expected an error for " << p;
  } catch (const oal::Error& e) {
    std::string msg = e.what();
    EXPECT_EQ(msg.rfind("[safetensors] ", 0), 0u) << msg;
    EXPECT_NE(msg.find(p.string()), std::string::npos) << msg;
    for (const auto& part : expect) EXPECT_NE(msg.find(part), std::string::npos) << msg;
  }
}

}  // namespace

TEST(Safetensors, RoundTripsEveryDtype) {
  std::map<std::string, at::Tensor> in;
  in["f64"] = at::randn({3, 5}, at::kDouble);
  in["f32"] = at::randn({2, 3, 4});
  in["f16"] = at::randn({7}).to(at::kHalf);
  in["bf16"] = at::randn({4, 4}).to(at::kBFloat16);
  in["i64"] = at::arange(-5, 6, at::kLong);
  in["i32"] = at::arange(-3, 3, at::kInt).reshape({2, 3});
  in["i16"] = at::arange(0, 9, at::kShort);
  in["i8"] = at::arange(-8, 8, at::kChar);
  in["u8"] = at::arange(0, 255, at::kByte);
  in["bool"] = at::arange(0, 5, at::kLong).remainder(2).to(at::kBool);
  in["scalar"] = at::full({}, 3.5f);
  in["empty"] = at::empty({0, 4});
  in["transposed"] = at::randn({3, 4}).t();  // non-contiguous input is written contiguous
  auto p = temp_dir() / "all.safetensors";
  write_safetensors(p, in, {{"format", "pt"}, {"note", "x"}});
  auto f = read_safetensors(p);
  ASSERT_EQ(f.tensors.size(), in.size());
  for (const auto& [name, t] : in) {
    ASSERT_TRUE(f.tensors.count(name)) << name;
    const auto& r = f.tensors.at(name);
    EXPECT_EQ(r.scalar_type(), t.scalar_type()) << name;
    EXPECT_EQ(r.sizes(), t.sizes()) << name;
    EXPECT_TRUE(at::equal(r, t)) << name;  // bit-exact: the bytes are copied verbatim
  }
  EXPECT_EQ(f.metadata.at("format"), "pt");
  EXPECT_EQ(f.metadata.at("note"), "x");
}

TEST(Safetensors, HeaderIsAlignedSortedAndDeterministic) {
  std::map<std::string, at::Tensor> in{{"b", at::ones({3})}, {"a", at::zeros({1}, at::kHalf)}};
  auto d = temp_dir();
  write_safetensors(d / "x.safetensors", in);
  write_safetensors(d / "y.safetensors", in);
  std::string x = read_bytes(d / "x.safetensors"), y = read_bytes(d / "y.safetensors");
  EXPECT_EQ(x, y);
  uint64_t n = 0;
  std::memcpy(&n, x.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(x.size(), 8 + n + 2 + 12);
  auto h = nlohmann::json::parse(x.substr(8, n));
  // Sorted order: 'a' (2 bytes) first, then 'b'.
  EXPECT_EQ(h["a"]["data_offsets"], nlohmann::json::array({0, 2}));
  EXPECT_EQ(h["b"]["data_offsets"], nlohmann::json::array({2, 14}));
  EXPECT_FALSE(fs::exists(d / ("x.safetensors.tmp." + std::to_string(::getpid()))));
}

TEST(Safetensors, ViewsOutliveTheirFileObjectAndDoNotWriteBack) {
  auto p = temp_dir() / "v.safetensors";
  write_safetensors(p, {{"w", at::arange(6, at::kFloat)}});
  const std::string before = read_bytes(p);
  at::Tensor w;
  {
    auto f = read_safetensors(p);
    w = f.tensors.at("w");
  }
  EXPECT_FLOAT_EQ(w[5].item<float>(), 5.0f);  // mapping still alive through the tensor
  w.add_(1.0f);                                // copy-on-write: the file is unchanged
  EXPECT_FLOAT_EQ(w[5].item<float>(), 6.0f);
  EXPECT_EQ(read_bytes(p), before);
}

TEST(Safetensors, UnalignedTensorIsCopiedCorrectly) {
  // A U8 tensor of 1 byte puts the following F32 tensor at data offset 1.
  std::string header =
      R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
      R"("b":{"dtype":"F32","shape":[2],"data_offsets":[1,9]}})";
  std::string bytes = make_file(header, 0);
  bytes.push_back('\x07');
  float vals[2] = {1.5f, -2.25f};
  bytes.append(reinterpret_cast<const char*>(vals), 8);
  auto p = temp_dir() / "u.safetensors";
  write_bytes(p, bytes);
  auto f = read_safetensors(p);
  EXPECT_EQ(f.tensors.at("a").item<uint8_t>(), 7);
  EXPECT_FLOAT_EQ(f.tensors.at("b")[0].item<float>(), 1.5f);
  EXPECT_FLOAT_EQ(f.tensors.at("b")[1].item<float>(), -2.25f);
}

TEST(Safetensors, TruncatedFile) {
  auto p = temp_dir() / "t.safetensors";
  write_safetensors(p, {{"w", at::ones({4, 4})}});
  std::string bytes = read_bytes(p);
  expect_read_error(bytes.substr(0, bytes.size() - 4), {"tensor 'w'", "run past the end", "truncated"});
  expect_read_error(bytes.substr(0, 5), {"expected at least 8"});
  expect_read_error("", {"expected at least 8"});
}

TEST(Safetensors, HeaderLengthPastEnd) {
  std::string bytes = make_file(R"({})", 0);
  uint64_t n = 1000;
  std::memcpy(bytes.data(), &n, 8);
  expect_read_error(bytes, {"header length 1000 runs past the end"});
}

TEST(Safetensors, InvalidJson) {
  expect_read_error(make_file(R"({"w": {"dtype": "F32",)", 0), {"not valid JSON"});
  expect_read_error(make_file(R"([1, 2])", 0), {"must be a JSON object"});
}

TEST(Safetensors, UnknownDtype) {
  expect_read_error(make_file(R"({"w":{"dtype":"Q4","shape":[2],"data_offsets":[0,2]}})", 2),
                    {"tensor 'w'", "unknown dtype 'Q4'", "F32"});
}

TEST(Safetensors, ShapeTimesDtypeMismatch) {
  expect_read_error(make_file(R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})", 20),
                    {"tensor 'w'", "[2, 3] x F32", "24 bytes", "span 20"});
}

TEST(Safetensors, OffsetsOutOfRange) {
  expect_read_error(make_file(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8),
                    {"tensor 'w'", "[0, 16]", "run past the end of the data section (8 bytes"});
  expect_read_error(make_file(R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", 8),
                    {"tensor 'w'", "begin > end"});
  expect_read_error(make_file(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})", 8),
                    {"tensor 'w'", "non-negative integer"});
}

TEST(Safetensors, OverlappingOffsets) {
  expect_read_error(
      make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                12),
      {"'a' [0, 8]", "'b' [4, 12]", "overlap"});
}

TEST(Safetensors, MalformedEntries) {
  expect_read_error(make_file(R"({"w":{"dtype":"F32","shape":[1]}})", 4),
                    {"tensor 'w'", "missing field 'data_offsets'"});
  expect_read_error(make_file(R"({"w":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", 4),
                    {"tensor 'w'", "shape entry"});
  expect_read_error(make_file(R"({"__metadata__":{"k":3}})", 0), {"__metadata__ 'k'"});
  // A shape whose byte count overflows 64 bits must be rejected, not wrap around.
  expect_read_error(
      make_file(R"({"w":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,0]}})", 0),
      {"tensor 'w'", "too large"});
}

TEST(Safetensors, HeaderOnlyReadMatchesFullRead) {
  auto p = temp_dir() / "h.safetensors";
  write_safetensors(p, {{"x", at::ones({2, 2}, at::kBFloat16)}}, {{"k", "v"}});
  auto h = oal::io::read_safetensors_header(p);
  ASSERT_EQ(h.tensors.size(), 1u);
  EXPECT_EQ(h.tensors.at("x").dtype, "BF16");
  EXPECT_EQ(h.tensors.at("x").shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(h.tensors.at("x").end - h.tensors.at("x").begin, 8u);
  EXPECT_EQ(h.metadata.at("k"), "v");
}

TEST(Safetensors, WriterRejectsUnsupportedInput) {
  auto p = temp_dir() / "w.safetensors";
  EXPECT_THROW(write_safetensors(p, {{"c", at::ones({2}, at::kComplexFloat)}}), oal::Error);
  EXPECT_THROW(write_safetensors(p, {{"__metadata__", at::ones({2})}}), oal::Error);
  EXPECT_FALSE(fs::exists(p));  // no partial output
}

// Corrupting any header byte, or cutting the file anywhere, must give either a valid
// read or an oal::Error — never a crash or another exception type. Deterministic
// mutations (a fixed LCG), 400 cases: cheap enough for CI.
TEST(Safetensors, RandomCorruptionNeverCrashes) {
  auto dir = temp_dir();
  write_safetensors(dir / "ok.safetensors",
                    {{"a", at::randn({3, 4})}, {"b", at::ones({5}, at::kBFloat16)},
                     {"c", at::arange(7, at::kLong)}},
                    {{"k", "v"}});
  const std::string good = read_bytes(dir / "ok.safetensors");
  uint64_t n = 0;
  std::memcpy(&n, good.data(), 8);
  uint64_t state = 12345;
  auto next = [&] { return (state = state * 6364136223846793005ull + 1442695040888963407ull) >> 33; };
  int errors = 0;
  for (int i = 0; i < 400; ++i) {
    std::string bad = good;
    if (i % 4 == 3) {
      bad.resize(next() % good.size());  // truncation anywhere
    } else {
      for (int m = 0; m < 1 + i % 3; ++m)  // 1-3 byte changes in length field or header
        bad[next() % (8 + n)] = static_cast<char>(next() & 0xFF);
    }
    const auto p = dir / "fuzz.safetensors";
    write_bytes(p, bad);
    try {
      auto f = read_safetensors(p);
      for (const auto& [name, t] : f.tensors) (void)t.sum();  // touch every view
    } catch (const oal::Error& e) {
      ++errors;
      EXPECT_EQ(std::string(e.what()).rfind("[safetensors] ", 0), 0u) << e.what();
    }
  }
  EXPECT_GT(errors, 100);  // most corruptions must be detected
}
