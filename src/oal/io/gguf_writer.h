#pragma once
// GGUF (version 3) writer: metadata in the given order, tensors in the given order at
// offsets aligned to `alignment`. Used to write test models and fuzz seeds, and to
// export models for llama.cpp. See gguf.h for the layout.
#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "oal/io/gguf.h"

namespace oal::io {

// One tensor to write: `ne` in ggml order (ne[0] fastest), `data` exactly
// ggml_nbytes(type, numel) bytes of the stored type.
struct GgufTensorData {
  std::string name;
  std::vector<int64_t> ne;
  uint32_t type = 0;
  std::string data;
};

using GgufMetadata = std::vector<std::pair<std::string, GgufValue>>;

// The file's bytes. Writes general.alignment when it is not 32 (unless the metadata
// already holds it). Throws "[gguf write] ..." for a data size that does not match.
std::string encode_gguf(const GgufMetadata& metadata, const std::vector<GgufTensorData>& tensors,
                        uint64_t alignment = 32);

// encode_gguf written atomically (temp file + rename).
void write_gguf(const std::filesystem::path& path, const GgufMetadata& metadata,
                const std::vector<GgufTensorData>& tensors, uint64_t alignment = 32);

// Value builders for metadata.
GgufValue gguf_u32(uint32_t v);
GgufValue gguf_i32(int32_t v);
GgufValue gguf_f32(float v);
GgufValue gguf_bool(bool v);
GgufValue gguf_str(std::string v);
GgufValue gguf_str_array(const std::vector<std::string>& v);
GgufValue gguf_i32_array(const std::vector<int32_t>& v);
GgufValue gguf_f32_array(const std::vector<float>& v);

}  // namespace oal::io
