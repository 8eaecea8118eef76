#pragma once
// safetensors (https://huggingface.co/docs/safetensors) reader and writer.
//
// File layout: u64 little-endian header length N, N bytes of JSON header
//   {"__metadata__": {str: str}?, "<name>": {"dtype": "F32", "shape": [..],
//    "data_offsets": [begin, end]}, ...}
// then the data section; offsets are relative to the start of the data section.
//
// Reading memory-maps the file: every returned tensor is a zero-copy at::from_blob
// view into a shared copy-on-write mapping, kept alive by the tensors themselves (a
// tensor whose offset is not aligned for its element type is copied instead).
// In-place changes to a returned tensor never reach the file.
//
// Validation (each failure is an oal::Error "[safetensors] <file>: ..."): header
// length within the file, header is a JSON object, every tensor entry has a known
// dtype, a shape of non-negative integers, data_offsets [begin, end] with
// begin <= end <= data size, shape x dtype size == end - begin, and no two tensors
// overlap. "__metadata__" must map strings to strings. Gaps between tensors are
// accepted (the format's own reader rejects them; nothing here depends on it).
#include <ATen/ATen.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace oal::io {

// One header entry, validated. `dtype` is the safetensors name ("F32", "BF16", ...).
struct SafetensorsEntry {
  std::string dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // byte offsets into the data section
  uint64_t end = 0;
};

struct SafetensorsHeader {
  std::map<std::string, SafetensorsEntry> tensors;
  std::map<std::string, std::string> metadata;  // "__metadata__"
  uint64_t data_start = 0;                      // 8 + header length
};

struct SafetensorsFile {
  std::map<std::string, at::Tensor> tensors;    // CPU, dtype as stored
  std::map<std::string, std::string> metadata;
};

// Parses and validates the header of a file of `file_size` bytes whose first bytes
// are `prefix` (at least the 8-byte length + header). `file` is only used in messages.
SafetensorsHeader parse_safetensors_header(const uint8_t* prefix, uint64_t prefix_size,
                                           uint64_t file_size, const std::string& file);

// Reads only the header (cheap: for `oal info` and index checks).
SafetensorsHeader read_safetensors_header(const std::filesystem::path& path);

// Memory-maps and validates `path`; tensors are views as described above.
SafetensorsFile read_safetensors(const std::filesystem::path& path);

// Writes `tensors` (any device/layout; copied to contiguous CPU) in sorted name order
// with the header padded by spaces to a multiple of 8 bytes, atomically (temp file +
// rename). Supported dtypes: fp64, fp32, fp16, bf16, int64, int32, int16, int8, uint8,
// bool. Same input → byte-identical file.
void write_safetensors(const std::filesystem::path& path,
                       const std::map<std::string, at::Tensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// The same bytes in memory, for tensors stored inside another file (e.g. optimizer
// state): encode gives exactly what write_safetensors writes; decode validates as
// read_safetensors does and returns tensors that own their memory. `source` names the
// bytes in errors.
std::string encode_safetensors(const std::map<std::string, at::Tensor>& tensors,
                               const std::map<std::string, std::string>& metadata = {});
SafetensorsFile decode_safetensors(const std::string& bytes, const std::string& source);

// "F32" → at::kFloat etc. Throws for names this build cannot represent.
at::ScalarType safetensors_dtype_to_scalar(const std::string& dtype, const std::string& context);
// at::kFloat → "F32" etc. Throws for unsupported scalar types.
std::string scalar_to_safetensors_dtype(at::ScalarType t);
// Size in bytes of one element of a safetensors dtype (0 when unknown).
uint64_t safetensors_dtype_size(const std::string& dtype);

}  // namespace oal::io
