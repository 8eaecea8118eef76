#pragma once
// GGUF (llama.cpp's model file format, versions 2 and 3) reader.
//
// File layout (all little-endian):
//   "GGUF", u32 version, u64 tensor_count, u64 kv_count,
//   kv_count × { string key, u32 value_type, value },
//   tensor_count × { string name, u32 n_dims, u64 ne[n_dims], u32 ggml_type, u64 offset },
//   padding to `general.alignment` (default 32), then the data section.
// A string is u64 length + bytes (no terminator); an array value is u32 element type,
// u64 count, then the elements (arrays may nest). `ne[0]` is the fastest-varying
// dimension (ggml order: the reverse of a row-major shape); `offset` is relative to the
// start of the data section and a multiple of the alignment.
//
// Validation (each failure is an oal::Error "[gguf] <file>: ..."): magic and version,
// every length and count within the bytes that remain (a hostile count never allocates),
// value types known, arrays nested at most 8 deep, keys and tensor names unique,
// general.alignment a u32 power of two, 1..4 dimensions each ≥ 0 with an element count
// that fits in int64, a ggml type this build knows, ne[0] a multiple of the type's block,
// offsets aligned, every tensor's bytes inside the data section, no two tensors overlap.
// Tensors of types that cannot be dequantized are still listed (`oal info` shows them);
// only dequantizing them fails.
#include <ATen/ATen.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "oal/io/mapped_file.h"

namespace oal::io {

// GGUF metadata value types (gguf.h enum gguf_type).
enum class GgufValueType : uint32_t {
  uint8 = 0, int8 = 1, uint16 = 2, int16 = 3, uint32 = 4, int32 = 5, float32 = 6,
  boolean = 7, string = 8, array = 9, uint64 = 10, int64 = 11, float64 = 12,
};

// "uint32", "array[string]", ...
std::string gguf_value_type_name(GgufValueType t);

// One metadata value. Integers keep their signedness in `uint64_t` / `int64_t`, floats
// are widened to double; `type` says what the file stored.
struct GgufValue {
  GgufValueType type = GgufValueType::uint8;
  GgufValueType element_type = GgufValueType::uint8;  // arrays only
  std::variant<uint64_t, int64_t, double, bool, std::string, std::vector<GgufValue>> value;

  bool is_integer() const;
  // Checked accessors: throw "[gguf] key '<key>': expected <what>, file has <type>".
  int64_t as_int(const std::string& key) const;        // any integer type within int64
  double as_float(const std::string& key) const;       // float32/float64 or an integer
  bool as_bool(const std::string& key) const;
  const std::string& as_string(const std::string& key) const;
  const std::vector<GgufValue>& as_array(const std::string& key) const;
  std::vector<std::string> as_string_array(const std::string& key) const;
  std::vector<int64_t> as_int_array(const std::string& key) const;
  std::vector<double> as_float_array(const std::string& key) const;  // floats or integers
  // Short text for listings: strings quoted and cut at `max_chars`, arrays as
  // "array[string] of 49152", numbers as written.
  std::string summary(size_t max_chars = 60) const;
};

// One tensor info, validated. `ne` in ggml order (ne[0] fastest); `offset` is absolute
// (from the start of the file).
struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> ne;
  uint32_t type = 0;  // ggml type id (see gguf_quants.h)
  uint64_t offset = 0;
  uint64_t nbytes = 0;
  int64_t numel() const;
  // Row-major shape as LibTorch sees it: ne reversed ([ne1, ne0] for a matrix).
  std::vector<int64_t> shape() const;
};

struct GgufHeader {
  uint32_t version = 0;
  uint64_t alignment = 32;
  uint64_t data_start = 0;  // absolute offset of the data section
  std::vector<std::pair<std::string, GgufValue>> metadata;  // in file order
  std::vector<GgufTensorInfo> tensors;                      // in file order

  const GgufValue* find(const std::string& key) const;          // nullptr if absent
  const GgufValue& at(const std::string& key) const;            // throws if absent
  const GgufTensorInfo* find_tensor(const std::string& name) const;
};

struct GgufFile {
  GgufHeader header;
  std::shared_ptr<MappedFile> file;
};

// Parses and validates the whole header of a file of `file_size` bytes held in
// `bytes` (the data section must be inside `file_size`; only the header bytes are read).
// `file` is only used in messages.
GgufHeader parse_gguf_header(const uint8_t* bytes, uint64_t file_size, const std::string& file);

// Memory-maps and validates `path`.
GgufFile read_gguf(const std::filesystem::path& path);

// How many GGUF headers this process has parsed (parse_gguf_header calls, read_gguf's
// included): how tests check that a model is opened with one read of its file.
uint64_t gguf_headers_parsed();

// True when `path` starts with the GGUF magic (cheap: reads 4 bytes).
bool is_gguf_file(const std::filesystem::path& path);

// The tensor as fp32, row-major shape `info.shape()`, dequantized from its stored type
// (a fresh tensor that owns its memory). Throws for types that cannot be dequantized.
at::Tensor gguf_tensor_f32(const GgufFile& gguf, const GgufTensorInfo& info);

}  // namespace oal::io
