#include "oal/io/gguf_writer.h"

#include <cstring>

#include "oal/core/error.h"
#include "oal/io/atomic_file.h"
#include "oal/io/gguf_quants.h"

namespace oal::io {
namespace {

constexpr std::string_view k_op = "gguf write";

template <typename T>
void put(std::string& out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.append(b, sizeof(T));
}

void put_string(std::string& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  out += s;
}

void put_value(std::string& out, const GgufValue& v) {
  switch (v.type) {
    case GgufValueType::uint8:
      put<uint8_t>(out, static_cast<uint8_t>(std::get<uint64_t>(v.value)));
      break;
    case GgufValueType::int8:
      put<int8_t>(out, static_cast<int8_t>(std::get<int64_t>(v.value)));
      break;
    case GgufValueType::uint16:
      put<uint16_t>(out, static_cast<uint16_t>(std::get<uint64_t>(v.value)));
      break;
    case GgufValueType::int16:
      put<int16_t>(out, static_cast<int16_t>(std::get<int64_t>(v.value)));
      break;
    case GgufValueType::uint32:
      put<uint32_t>(out, static_cast<uint32_t>(std::get<uint64_t>(v.value)));
      break;
    case GgufValueType::int32:
      put<int32_t>(out, static_cast<int32_t>(std::get<int64_t>(v.value)));
      break;
    case GgufValueType::uint64: put<uint64_t>(out, std::get<uint64_t>(v.value)); break;
    case GgufValueType::int64: put<int64_t>(out, std::get<int64_t>(v.value)); break;
    case GgufValueType::float32:
      put<float>(out, static_cast<float>(std::get<double>(v.value)));
      break;
    case GgufValueType::float64: put<double>(out, std::get<double>(v.value)); break;
    case GgufValueType::boolean: put<uint8_t>(out, std::get<bool>(v.value) ? 1 : 0); break;
    case GgufValueType::string: put_string(out, std::get<std::string>(v.value)); break;
    case GgufValueType::array: {
      const auto& items = std::get<std::vector<GgufValue>>(v.value);
      put<uint32_t>(out, static_cast<uint32_t>(v.element_type));
      put<uint64_t>(out, items.size());
      for (const auto& item : items) put_value(out, item);
      break;
    }
  }
}

void pad(std::string& out, uint64_t alignment) {
  out.append((alignment - out.size() % alignment) % alignment, '\0');
}

GgufValue array_of(GgufValueType t, std::vector<GgufValue> items) {
  GgufValue v;
  v.type = GgufValueType::array;
  v.element_type = t;
  v.value = std::move(items);
  return v;
}

}  // namespace

std::string encode_gguf(const GgufMetadata& metadata, const std::vector<GgufTensorData>& tensors,
                        uint64_t alignment) {
  check(alignment > 0 && (alignment & (alignment - 1)) == 0, k_op,
        "alignment {} is not a power of two", alignment);
  GgufMetadata kv = metadata;
  bool has_alignment = false;
  for (const auto& [k, v] : kv) has_alignment = has_alignment || k == "general.alignment";
  if (alignment != 32 && !has_alignment)
    kv.emplace_back("general.alignment", gguf_u32(static_cast<uint32_t>(alignment)));
  std::string out = "GGUF";
  put<uint32_t>(out, 3);
  put<uint64_t>(out, tensors.size());
  put<uint64_t>(out, kv.size());
  for (const auto& [k, v] : kv) {
    put_string(out, k);
    put<uint32_t>(out, static_cast<uint32_t>(v.type));
    put_value(out, v);
  }
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    int64_t n = 1;
    for (int64_t d : t.ne) n *= d;
    check(t.data.size() == ggml_nbytes(t.type, n), k_op,
          "tensor '{}': {} bytes of data, {} × {} needs {}", t.name, t.data.size(), n,
          ggml_type_name(t.type), ggml_nbytes(t.type, n));
    put_string(out, t.name);
    put<uint32_t>(out, static_cast<uint32_t>(t.ne.size()));
    for (int64_t d : t.ne) put<uint64_t>(out, static_cast<uint64_t>(d));
    put<uint32_t>(out, t.type);
    put<uint64_t>(out, offset);
    offset += t.data.size();
    offset += (alignment - offset % alignment) % alignment;
  }
  pad(out, alignment);
  for (const auto& t : tensors) {
    out += t.data;
    pad(out, alignment);
  }
  return out;
}

void write_gguf(const std::filesystem::path& path, const GgufMetadata& metadata,
                const std::vector<GgufTensorData>& tensors, uint64_t alignment) {
  write_file_atomic(path, encode_gguf(metadata, tensors, alignment));
}

GgufValue gguf_u32(uint32_t v) {
  return {GgufValueType::uint32, GgufValueType::uint8, uint64_t{v}};
}
GgufValue gguf_i32(int32_t v) { return {GgufValueType::int32, GgufValueType::uint8, int64_t{v}}; }
GgufValue gguf_f32(float v) { return {GgufValueType::float32, GgufValueType::uint8, double{v}}; }
GgufValue gguf_bool(bool v) { return {GgufValueType::boolean, GgufValueType::uint8, v}; }
GgufValue gguf_str(std::string v) {
  return {GgufValueType::string, GgufValueType::uint8, std::move(v)};
}

GgufValue gguf_str_array(const std::vector<std::string>& v) {
  std::vector<GgufValue> items;
  for (const auto& s : v) items.push_back(gguf_str(s));
  return array_of(GgufValueType::string, std::move(items));
}

GgufValue gguf_i32_array(const std::vector<int32_t>& v) {
  std::vector<GgufValue> items;
  for (int32_t x : v) items.push_back(gguf_i32(x));
  return array_of(GgufValueType::int32, std::move(items));
}

GgufValue gguf_f32_array(const std::vector<float>& v) {
  std::vector<GgufValue> items;
  for (float x : v) items.push_back(gguf_f32(x));
  return array_of(GgufValueType::float32, std::move(items));
}

}  // namespace oal::io
