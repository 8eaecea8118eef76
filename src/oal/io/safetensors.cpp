#include "oal/io/safetensors.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "oal/core/error.h"
#include "oal/io/json_file.h"
#include "oal/io/atomic_file.h"
#include "oal/io/mapped_file.h"

namespace oal::io {
namespace {

static_assert(std::endian::native == std::endian::little,
              "safetensors is little-endian; big-endian hosts would need byte swaps");

constexpr std::string_view k_op = "safetensors";
// The format's reference implementation caps the header at 100 MB; a larger value is
// a corrupt length field, not a real header.
constexpr uint64_t k_max_header_bytes = 100'000'000;

struct DtypeInfo {
  const char* name;
  uint64_t size;
  std::optional<at::ScalarType> scalar;  // nullopt: valid safetensors, not representable here
};

const std::array<DtypeInfo, 15>& dtype_table() {
  static const std::array<DtypeInfo, 15> table{{
      {"F64", 8, at::kDouble},
      {"F32", 4, at::kFloat},
      {"F16", 2, at::kHalf},
      {"BF16", 2, at::kBFloat16},
      {"I64", 8, at::kLong},
      {"I32", 4, at::kInt},
      {"I16", 2, at::kShort},
      {"I8", 1, at::kChar},
      {"U8", 1, at::kByte},
      {"BOOL", 1, at::kBool},
      {"U16", 2, std::nullopt},
      {"U32", 4, std::nullopt},
      {"U64", 8, std::nullopt},
      {"F8_E4M3", 1, std::nullopt},
      {"F8_E5M2", 1, std::nullopt},
  }};
  return table;
}

const DtypeInfo* find_dtype(const std::string& name) {
  for (const auto& d : dtype_table())
    if (name == d.name) return &d;
  return nullptr;
}

std::string known_dtype_list() {
  std::string s;
  for (const auto& d : dtype_table()) s += (s.empty() ? "" : ", ") + std::string(d.name);
  return s;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// A non-negative JSON integer (io::json_uint), or an error naming the file and field.
uint64_t json_u64(const nlohmann::json& v, const std::string& file, const std::string& what) {
  return json_uint(v, k_op, file + ": " + what);
}

SafetensorsEntry parse_entry(const std::string& name, const nlohmann::json& v,
                             uint64_t data_size, const std::string& file) {
  const std::string ctx = fmt::format("tensor '{}'", name);
  check(v.is_object(), k_op, "{}: {}: expected an object with dtype, shape, data_offsets",
        file, ctx);
  for (const char* key : {"dtype", "shape", "data_offsets"})
    check(v.contains(key), k_op, "{}: {}: missing field '{}'", file, ctx, key);
  SafetensorsEntry e;
  check(v["dtype"].is_string(), k_op, "{}: {}: dtype must be a string", file, ctx);
  e.dtype = v["dtype"].get<std::string>();
  const DtypeInfo* info = find_dtype(e.dtype);
  check(info != nullptr, k_op, "{}: {}: unknown dtype '{}' (expected one of {})", file, ctx,
        e.dtype, known_dtype_list());

  const auto& shape = v["shape"];
  check(shape.is_array(), k_op, "{}: {}: shape must be an array", file, ctx);
  uint64_t numel = 1;
  bool overflow = false, has_zero = false;
  for (const auto& s : shape) {
    uint64_t n = json_u64(s, file, ctx + " shape entry");
    check(n <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()), k_op,
          "{}: {}: shape entry {} too large", file, ctx, n);
    e.shape.push_back(static_cast<int64_t>(n));
    if (n == 0) has_zero = true;
    else if (numel > std::numeric_limits<uint64_t>::max() / n) overflow = true;
    numel *= n;
  }
  if (has_zero) {  // any zero dimension: an empty tensor, whatever the other sizes
    overflow = false;
    numel = 0;
  }

  const auto& off = v["data_offsets"];
  check(off.is_array() && off.size() == 2, k_op,
        "{}: {}: data_offsets must be [begin, end], got {}", file, ctx, off.dump());
  e.begin = json_u64(off[0], file, ctx + " data_offsets[0]");
  e.end = json_u64(off[1], file, ctx + " data_offsets[1]");
  check(e.begin <= e.end, k_op, "{}: {}: data_offsets [{}, {}] have begin > end", file, ctx,
        e.begin, e.end);
  check(e.end <= data_size, k_op,
        "{}: {}: data_offsets [{}, {}] run past the end of the data section ({} bytes; "
        "file truncated?)",
        file, ctx, e.begin, e.end, data_size);
  check(!overflow && numel <= std::numeric_limits<uint64_t>::max() / info->size, k_op,
        "{}: {}: shape {} is too large", file, ctx, shape_text(e.shape));
  const uint64_t bytes = numel * info->size;
  check(bytes == e.end - e.begin, k_op,
        "{}: {}: shape {} x {} ({} bytes each) = {} bytes, but data_offsets [{}, {}] span {}",
        file, ctx, shape_text(e.shape), e.dtype, info->size, bytes, e.begin, e.end,
        e.end - e.begin);
  return e;
}

std::map<std::string, std::string> parse_metadata(const nlohmann::json& v,
                                                  const std::string& file) {
  check(v.is_object(), k_op, "{}: __metadata__ must be an object of strings", file);
  std::map<std::string, std::string> out;
  for (auto it = v.begin(); it != v.end(); ++it) {
    check(it.value().is_string(), k_op, "{}: __metadata__ '{}': expected a string value, got {}",
          file, it.key(), it.value().dump());
    out[it.key()] = it.value().get<std::string>();
  }
  return out;
}

// No two non-empty byte ranges may share a byte.
void check_no_overlap(const std::map<std::string, SafetensorsEntry>& tensors,
                      const std::string& file) {
  std::vector<std::pair<const std::string*, const SafetensorsEntry*>> order;
  for (const auto& [name, e] : tensors)
    if (e.end > e.begin) order.push_back({&name, &e});
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return a.second->begin != b.second->begin ? a.second->begin < b.second->begin
                                              : a.second->end < b.second->end;
  });
  for (size_t i = 1; i < order.size(); ++i) {
    const auto& [pn, p] = order[i - 1];
    const auto& [cn, c] = order[i];
    check(p->end <= c->begin, k_op,
          "{}: tensors '{}' [{}, {}] and '{}' [{}, {}] overlap (expected disjoint data_offsets)",
          file, *pn, p->begin, p->end, *cn, c->begin, c->end);
  }
}

uint64_t read_le_u64(const uint8_t* p) {
  uint64_t v = 0;
  std::memcpy(&v, p, 8);
  return v;
}

}  // namespace

uint64_t safetensors_dtype_size(const std::string& dtype) {
  const DtypeInfo* d = find_dtype(dtype);
  return d ? d->size : 0;
}

at::ScalarType safetensors_dtype_to_scalar(const std::string& dtype, const std::string& context) {
  const DtypeInfo* d = find_dtype(dtype);
  check(d != nullptr, k_op, "{}: unknown dtype '{}' (expected one of {})", context, dtype,
        known_dtype_list());
  check(d->scalar.has_value(), k_op,
        "{}: dtype '{}' is valid safetensors but has no LibTorch type in this build", context,
        dtype);
  return *d->scalar;
}

std::string scalar_to_safetensors_dtype(at::ScalarType t) {
  for (const auto& d : dtype_table())
    if (d.scalar && *d.scalar == t) return d.name;
  fail(k_op, "cannot store dtype {} (expected fp64, fp32, fp16, bf16, int64, int32, int16, "
       "int8, uint8 or bool)", c10::toString(t));
}

SafetensorsHeader parse_safetensors_header(const uint8_t* prefix, uint64_t prefix_size,
                                           uint64_t file_size, const std::string& file) {
  check(file_size >= 8 && prefix_size >= 8, k_op,
        "{}: file has {} bytes, expected at least 8 (the header length field)", file, file_size);
  const uint64_t n = read_le_u64(prefix);
  check(n <= file_size - 8, k_op,
        "{}: header length {} runs past the end of the file ({} bytes; truncated or not a "
        "safetensors file?)",
        file, n, file_size);
  check(n <= k_max_header_bytes, k_op, "{}: header length {} exceeds the {} byte limit", file, n,
        k_max_header_bytes);
  check(n >= 2, k_op, "{}: header length {} is too small for a JSON object", file, n);
  check(prefix_size >= 8 + n, k_op, "{}: internal: header not fully read", file);

  nlohmann::json header;
  try {
    header = nlohmann::json::parse(prefix + 8, prefix + 8 + n);
  } catch (const nlohmann::json::exception& e) {
    fail(k_op, "{}: header is not valid JSON: {}", file, e.what());
  }
  check(header.is_object(), k_op, "{}: header must be a JSON object, got {}", file,
        header.type_name());

  SafetensorsHeader out;
  out.data_start = 8 + n;
  const uint64_t data_size = file_size - out.data_start;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      out.metadata = parse_metadata(it.value(), file);
      continue;
    }
    out.tensors[it.key()] = parse_entry(it.key(), it.value(), data_size, file);
  }
  check_no_overlap(out.tensors, file);
  return out;
}

SafetensorsHeader read_safetensors_header(const std::filesystem::path& path) {
  const std::string file = path.string();
  std::ifstream in(path, std::ios::binary);
  check(in.is_open(), k_op, "{}: cannot open", file);
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(path, ec);
  check(!ec, k_op, "{}: cannot stat: {}", file, ec.message());
  std::vector<uint8_t> buf(8, 0);
  if (size >= 8) in.read(reinterpret_cast<char*>(buf.data()), 8);
  if (size >= 8 && read_le_u64(buf.data()) <= size - 8 &&
      read_le_u64(buf.data()) <= k_max_header_bytes) {
    buf.resize(8 + read_le_u64(buf.data()));
    in.read(reinterpret_cast<char*>(buf.data() + 8), static_cast<std::streamsize>(buf.size() - 8));
    check(in.good(), k_op, "{}: read error in header", file);
  }
  return parse_safetensors_header(buf.data(), buf.size(), size, file);
}

SafetensorsFile read_safetensors(const std::filesystem::path& path) {
  const std::string file = path.string();
  auto mapped = MappedFile::open(path, std::string(k_op));
  SafetensorsHeader h =
      parse_safetensors_header(mapped->data(), mapped->size(), mapped->size(), file);
  SafetensorsFile out;
  out.metadata = std::move(h.metadata);
  for (const auto& [name, e] : h.tensors) {
    const at::ScalarType st =
        safetensors_dtype_to_scalar(e.dtype, fmt::format("{}: tensor '{}'", file, name));
    out.tensors[name] = view_tensor(mapped, h.data_start + e.begin, st, e.shape);
  }
  return out;
}

namespace {

// The whole file (length, header, data) onto `os`; `file` names it in errors.
void stream_safetensors(std::ostream& os, const std::map<std::string, at::Tensor>& tensors,
                        const std::map<std::string, std::string>& metadata,
                        const std::string& file) {
  std::vector<at::Tensor> data;
  nlohmann::json header = nlohmann::json::object();
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {  // std::map: sorted, deterministic order
    check(name != "__metadata__", k_op, "{}: '__metadata__' is reserved, not a tensor name", file);
    check(t.defined(), k_op, "{}: tensor '{}' is undefined", file, name);
    at::Tensor c = t.detach().to(at::kCPU).contiguous();
    const std::string dtype = scalar_to_safetensors_dtype(c.scalar_type());
    const uint64_t bytes = static_cast<uint64_t>(c.numel()) * c.element_size();
    header[name] = {{"dtype", dtype},
                    {"shape", c.sizes().vec()},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    data.push_back(std::move(c));
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // data section starts 8-byte aligned

  const uint64_t n = text.size();
  os.write(reinterpret_cast<const char*>(&n), 8);
  os.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const auto& c : data)
    os.write(static_cast<const char*>(c.data_ptr()),
             static_cast<std::streamsize>(c.numel() * c.element_size()));
}

}  // namespace

void write_safetensors(const std::filesystem::path& path,
                       const std::map<std::string, at::Tensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  AtomicFileWriter w(path);
  stream_safetensors(w.stream(), tensors, metadata, path.string());
  w.commit();
}

std::string encode_safetensors(const std::map<std::string, at::Tensor>& tensors,
                               const std::map<std::string, std::string>& metadata) {
  std::ostringstream os;
  stream_safetensors(os, tensors, metadata, "(in memory)");
  return os.str();
}

SafetensorsFile decode_safetensors(const std::string& bytes, const std::string& source) {
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  const SafetensorsHeader h = parse_safetensors_header(p, bytes.size(), bytes.size(), source);
  SafetensorsFile out;
  out.metadata = h.metadata;
  for (const auto& [name, e] : h.tensors) {
    const at::ScalarType st =
        safetensors_dtype_to_scalar(e.dtype, fmt::format("{}: tensor '{}'", source, name));
    at::Tensor t = at::empty(e.shape, at::TensorOptions().dtype(st));
    // The header check guarantees end - begin == numel x element size.
    if (e.end > e.begin) std::memcpy(t.data_ptr(), p + h.data_start + e.begin, e.end - e.begin);
    out.tensors[name] = t;
  }
  return out;
}

}  // namespace oal::io
