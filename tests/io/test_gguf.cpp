// GGUF container reader: round trips through the writer (every metadata type, nested
// arrays, alignment, tensor placement), and each kind of corrupt header producing a
// clear "[gguf]" oal::Error — never a crash, never a partial result.
#include <gtest/gtest.h>

#include <cstring>

#include "common/temp_dir.h"
#include "oal/core/error.h"
#include "oal/io/gguf.h"
#include "oal/io/gguf_quants.h"
#include "oal/io/gguf_summary.h"
#include "oal/io/gguf_writer.h"

using namespace oal::io;

namespace {

constexpr uint32_t k_f32 = static_cast<uint32_t>(GgmlType::F32);
constexpr uint32_t k_q8_0 = static_cast<uint32_t>(GgmlType::Q8_0);

std::string f32_bytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

// One Q8_0 block (32 values): fp16 scale 0.5 (0x3800) then int8 quants 0..31.
std::string q8_0_block() {
  std::string b = {'\x00', '\x38'};
  for (int i = 0; i < 32; ++i) b += static_cast<char>(i);
  return b;
}

GgufMetadata sample_metadata() {
  GgufValue nested;
  nested.type = GgufValueType::array;
  nested.element_type = GgufValueType::array;
  nested.value = std::vector<GgufValue>{gguf_i32_array({1, 2}), gguf_i32_array({3})};
  return {
      {"general.architecture", gguf_str("llama")},
      {"u8", {GgufValueType::uint8, GgufValueType::uint8, uint64_t{200}}},
      {"i8", {GgufValueType::int8, GgufValueType::uint8, int64_t{-100}}},
      {"u16", {GgufValueType::uint16, GgufValueType::uint8, uint64_t{60000}}},
      {"i16", {GgufValueType::int16, GgufValueType::uint8, int64_t{-30000}}},
      {"u32", gguf_u32(4000000000u)},
      {"i32", gguf_i32(-2000000000)},
      {"u64", {GgufValueType::uint64, GgufValueType::uint8, uint64_t{1} << 40}},
      {"i64", {GgufValueType::int64, GgufValueType::uint8, -(int64_t{1} << 40)}},
      {"f32", gguf_f32(0.25f)},
      {"f64", {GgufValueType::float64, GgufValueType::uint8, 1e-300}},
      {"flag", gguf_bool(true)},
      {"words", gguf_str_array({"a", "", "ccc"})},
      {"nested", nested},
  };
}

std::vector<GgufTensorData> sample_tensors() {
  return {{"norm", {3}, k_f32, f32_bytes({1.f, 2.f, 3.f})},
          {"matrix", {32, 2}, k_q8_0, q8_0_block() + q8_0_block()}};
}

GgufHeader parse(const std::string& bytes) {
  return parse_gguf_header(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "test.gguf");
}

// Runs parse and returns the oal::Error message ("" if it parsed).
std::string parse_error(const std::string& bytes) {
  try {
    parse(bytes);
  } catch (const oal::Error& e) {
    return e.what();
  }
  return "";
}

// Byte position of the u64 offset field in the tensor info named `name`.
size_t offset_field(const std::string& bytes, const std::string& name, size_t n_dims) {
  const size_t at = bytes.find(name);
  return at + name.size() + 4 + 8 * n_dims + 4;
}

template <typename T>
void poke(std::string& bytes, size_t pos, T v) {
  std::memcpy(bytes.data() + pos, &v, sizeof(T));
}

}  // namespace

TEST(Gguf, MetadataRoundTripsEveryType) {
  const GgufHeader h = parse(encode_gguf(sample_metadata(), sample_tensors()));
  EXPECT_EQ(h.version, 3u);
  ASSERT_EQ(h.metadata.size(), sample_metadata().size());
  EXPECT_EQ(h.at("general.architecture").as_string("k"), "llama");
  EXPECT_EQ(h.at("u8").as_int("k"), 200);
  EXPECT_EQ(h.at("i8").as_int("k"), -100);
  EXPECT_EQ(h.at("u16").as_int("k"), 60000);
  EXPECT_EQ(h.at("i16").as_int("k"), -30000);
  EXPECT_EQ(h.at("u32").as_int("k"), 4000000000LL);
  EXPECT_EQ(h.at("i32").as_int("k"), -2000000000LL);
  EXPECT_EQ(h.at("u64").as_int("k"), int64_t{1} << 40);
  EXPECT_EQ(h.at("i64").as_int("k"), -(int64_t{1} << 40));
  EXPECT_EQ(h.at("f32").as_float("k"), 0.25);
  EXPECT_EQ(h.at("f64").as_float("k"), 1e-300);
  EXPECT_TRUE(h.at("flag").as_bool("k"));
  EXPECT_EQ(h.at("words").as_string_array("k"), (std::vector<std::string>{"a", "", "ccc"}));
  const auto& nested = h.at("nested").as_array("k");
  ASSERT_EQ(nested.size(), 2u);
  EXPECT_EQ(nested[0].as_int_array("k"), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(nested[1].as_int_array("k"), (std::vector<int64_t>{3}));
  EXPECT_EQ(h.find("absent"), nullptr);
  EXPECT_EQ(h.at("words").summary(), "[\"a\", \"\", \"ccc\"]");
}

TEST(Gguf, AccessorsNameTheKeyAndTheStoredType) {
  const GgufHeader h = parse(encode_gguf(sample_metadata(), {}));
  try {
    h.at("words").as_int("words");
    FAIL() << "expected an error";
  } catch (const oal::Error& e) {
    EXPECT_NE(std::string(e.what()).find("key 'words': expected an integer, file has array[string]"),
              std::string::npos) << e.what();
  }
  EXPECT_THROW(h.at("u32").as_string("u32"), oal::Error);
  EXPECT_THROW(h.at("absent"), oal::Error);
  // A uint64 above int64's range does not wrap.
  GgufMetadata big = {{"big", {GgufValueType::uint64, GgufValueType::uint8, ~uint64_t{0}}}};
  EXPECT_THROW(parse(encode_gguf(big, {})).at("big").as_int("big"), oal::Error);
}

TEST(Gguf, TensorsArePlacedAtAlignedAbsoluteOffsets) {
  for (uint64_t alignment : {32u, 64u, 8u}) {
    const std::string bytes = encode_gguf(sample_metadata(), sample_tensors(), alignment);
    const GgufHeader h = parse(bytes);
    EXPECT_EQ(h.alignment, alignment);
    EXPECT_EQ(h.data_start % alignment, 0u);
    ASSERT_EQ(h.tensors.size(), 2u);
    const GgufTensorInfo& norm = h.tensors[0];
    EXPECT_EQ(norm.name, "norm");
    EXPECT_EQ(norm.offset, h.data_start);
    EXPECT_EQ(norm.nbytes, 12u);
    float first = 0;
    std::memcpy(&first, bytes.data() + norm.offset, 4);
    EXPECT_EQ(first, 1.f);
    const GgufTensorInfo& m = *h.find_tensor("matrix");
    EXPECT_EQ(m.ne, (std::vector<int64_t>{32, 2}));
    EXPECT_EQ(m.shape(), (std::vector<int64_t>{2, 32}));
    EXPECT_EQ(m.nbytes, 68u);  // 2 blocks × (2 + 32)
    EXPECT_EQ((m.offset - h.data_start) % alignment, 0u);
  }
}

TEST(Gguf, ReadsAFileAndDequantizesItsTensors) {
  const auto dir = oal::test::make_temp_dir("gguf");
  write_gguf(dir / "m.gguf", sample_metadata(), sample_tensors());
  EXPECT_TRUE(is_gguf_file(dir / "m.gguf"));
  const GgufFile g = read_gguf(dir / "m.gguf");
  const at::Tensor norm = gguf_tensor_f32(g, *g.header.find_tensor("norm"));
  EXPECT_TRUE(norm.equal(at::tensor({1.f, 2.f, 3.f})));
  const at::Tensor m = gguf_tensor_f32(g, *g.header.find_tensor("matrix"));
  ASSERT_EQ(m.sizes(), (std::vector<int64_t>{2, 32}));
  // Q8_0: value = scale 0.5 × quant (0..31), the same in both rows.
  for (int i = 0; i < 32; ++i) {
    EXPECT_EQ(m[0][i].item<float>(), 0.5f * i);
    EXPECT_EQ(m[1][i].item<float>(), 0.5f * i);
  }
  oal::test::write_file(dir / "not.gguf", "GGUX");
  EXPECT_FALSE(is_gguf_file(dir / "not.gguf"));
}

TEST(Gguf, EveryTruncationIsANamedError) {
  const std::string bytes = encode_gguf(sample_metadata(), sample_tensors());
  const GgufHeader whole = parse(bytes);
  // Every prefix that cuts into the header or the tensor data must be refused.
  const uint64_t last_needed = whole.tensors[1].offset + whole.tensors[1].nbytes;
  for (size_t n = 0; n < last_needed; ++n) {
    const std::string msg = parse_error(bytes.substr(0, n));
    EXPECT_NE(msg.find("[gguf] test.gguf"), std::string::npos) << "prefix " << n << ": " << msg;
  }
}

TEST(Gguf, CorruptHeadersAreRefusedWithTheirReason) {
  const std::string good = encode_gguf(sample_metadata(), sample_tensors());
  auto expect = [](std::string bytes, const std::string& want) {
    const std::string msg = parse_error(bytes);
    EXPECT_NE(msg.find(want), std::string::npos) << "wanted '" << want << "', got '" << msg << "'";
  };
  std::string b = good;
  b[3] = 'X';
  expect(b, "not a GGUF file");
  b = good;
  poke<uint32_t>(b, 4, 1);
  expect(b, "GGUF version 1");
  b = good;
  poke<uint64_t>(b, 8, uint64_t{1} << 60);
  expect(b, "tensor infos cannot fit");
  b = good;
  poke<uint64_t>(b, 16, uint64_t{1} << 60);
  expect(b, "metadata pairs cannot fit");
  // The first key's length: far past the end.
  b = good;
  poke<uint64_t>(b, 24, uint64_t{1} << 62);
  expect(b, "truncated or corrupt");
  // The matrix tensor's offset: unaligned, then overlapping the norm tensor.
  b = good;
  poke<uint64_t>(b, offset_field(b, "matrix", 2), 3);
  expect(b, "not a multiple of the alignment");
  b = good;
  poke<uint64_t>(b, offset_field(b, "matrix", 2), 0);
  expect(b, "overlap");
  b = good;
  poke<uint64_t>(b, offset_field(b, "matrix", 2), uint64_t{1} << 40);
  expect(b, "of the data section");
  // The matrix's ggml type (just before its offset field): unknown.
  b = good;
  poke<uint32_t>(b, offset_field(b, "matrix", 2) - 4, 77);
  expect(b, "unknown ggml type 77");
  // Its dimension count.
  b = good;
  poke<uint32_t>(b, b.find("matrix") + 6, 5);
  expect(b, "5 dimensions");
  // ne[0] = 31 is not a multiple of Q8_0's 32-element block.
  b = good;
  poke<uint64_t>(b, b.find("matrix") + 10, 31);
  expect(b, "not a multiple of Q8_0's block of 32");
}

TEST(Gguf, BadMetadataIsRefused) {
  auto msg_for = [](GgufMetadata md, std::vector<GgufTensorData> t = {}) {
    return parse_error(encode_gguf(md, t));
  };
  EXPECT_NE(msg_for({{"a", gguf_u32(1)}, {"a", gguf_u32(2)}}).find("duplicate metadata key 'a'"),
            std::string::npos);
  EXPECT_NE(msg_for({{"general.alignment", gguf_u32(48)}}).find("power of two"), std::string::npos);
  EXPECT_NE(msg_for({{"general.alignment", gguf_i32(32)}}).find("must be a uint32"), std::string::npos);
  auto t = sample_tensors();
  t.push_back(t[0]);
  EXPECT_NE(msg_for({}, t).find("duplicate tensor 'norm'"), std::string::npos);
  // Arrays nested deeper than 8.
  GgufValue v = gguf_i32_array({1});
  for (int i = 0; i < 9; ++i) {
    GgufValue outer;
    outer.type = GgufValueType::array;
    outer.element_type = GgufValueType::array;
    outer.value = std::vector<GgufValue>{v};
    v = outer;
  }
  EXPECT_NE(msg_for({{"deep", v}}).find("nested deeper than 8"), std::string::npos);
  // A bool byte other than 0/1, an unknown value type.
  // (The key "flag" is followed by its u32 type and the value byte.)
  std::string b = encode_gguf({{"flag", gguf_bool(true)}}, {});
  b[b.find("flag") + 4 + 4] = 7;
  EXPECT_NE(parse_error(b).find("bool value 7"), std::string::npos);
  b = encode_gguf({{"flag", gguf_bool(true)}}, {});
  poke<uint32_t>(b, b.find("flag") + 4, 13);
  EXPECT_NE(parse_error(b).find("unknown value type 13"), std::string::npos);
}

TEST(Gguf, HugeArrayCountsNeverAllocate) {
  std::string b = encode_gguf({{"words", gguf_str_array({"x"})}}, {});
  // After the key: u32 value type (array), u32 element type, then the u64 count.
  const size_t count_at = b.find("words") + 5 + 4 + 4;
  poke<uint64_t>(b, count_at, uint64_t{1} << 61);
  EXPECT_NE(parse_error(b).find("cannot fit"), std::string::npos);
}

TEST(Gguf, SummaryJsonEscapesBytesThatAreNotUtf8) {
  // fuzz_gguf: nlohmann::json::dump threw type_error 316 on a metadata string with a
  // stray 0x91 byte (GGUF does not require valid UTF-8).
  GgufMetadata md = {{std::string("key\x91"), gguf_str(std::string("caf\xc3\xa9 \x91\xff ok"))},
                     {"words", gguf_str_array({"\xe0\x80\x80", "\xf0\x9f\x98\x80"})}};
  const GgufHeader h = parse(encode_gguf(md, sample_tensors()));
  std::string dumped;
  ASSERT_NO_THROW(dumped = gguf_summary_json(h, true).dump());
  const auto j = nlohmann::json::parse(dumped);
  EXPECT_EQ(j["metadata"]["key\\x91"], "caf\xc3\xa9 \\x91\\xff ok");  // valid é kept
  // An overlong encoding is escaped byte by byte; a valid 4-byte emoji is kept.
  EXPECT_EQ(j["metadata"]["words"][0], "\\xe0\\x80\\x80");
  EXPECT_EQ(j["metadata"]["words"][1], "\xf0\x9f\x98\x80");
  EXPECT_NO_THROW((void)describe_gguf(h, true));
}
