#include "oal/io/gguf.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>
#include <unordered_set>

#include "oal/core/error.h"
#include "oal/io/gguf_quants.h"

namespace oal::io {
namespace {

static_assert(std::endian::native == std::endian::little,
              "GGUF files here are little-endian; big-endian hosts would need byte swaps");

constexpr std::string_view k_op = "gguf";
constexpr int k_max_depth = 8;     // nested arrays; real files use depth 1
constexpr int k_max_dims = 4;      // GGML_MAX_DIMS
// Each parsed value costs ~80 bytes of memory: a cap keeps a small hostile file from
// asking for gigabytes (the largest real vocabularies have ~260K tokens and merges).
constexpr uint64_t k_max_values = 16'000'000;

// Smallest encoded size of one value of `t` (arrays: their own type + count header).
uint64_t min_value_bytes(GgufValueType t) {
  switch (t) {
    case GgufValueType::uint8: case GgufValueType::int8: case GgufValueType::boolean: return 1;
    case GgufValueType::uint16: case GgufValueType::int16: return 2;
    case GgufValueType::uint32: case GgufValueType::int32: case GgufValueType::float32: return 4;
    case GgufValueType::uint64: case GgufValueType::int64: case GgufValueType::float64: return 8;
    case GgufValueType::string: return 8;
    case GgufValueType::array: return 12;
  }
  return 1;
}

bool known_value_type(uint32_t t) { return t <= 12; }

// Reads the header bytes in order; every read is bounds-checked against the file.
class Cursor {
 public:
  Cursor(const uint8_t* bytes, uint64_t size, const std::string& file)
      : bytes_(bytes), size_(size), file_(file) {}

  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return size_ - pos_; }
  const std::string& file() const { return file_; }

  template <typename T>
  T read(std::string_view what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, bytes_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  std::string read_string(std::string_view what) {
    const uint64_t n = read<uint64_t>(what);
    need(n, what);
    std::string s(reinterpret_cast<const char*>(bytes_ + pos_), n);
    pos_ += n;
    return s;
  }

  [[noreturn]] void fail_at(const std::string& what) const {
    fail(k_op, "{}: {} (at byte {})", file_, what, pos_);
  }

 private:
  void need(uint64_t n, std::string_view what) const {
    if (n > remaining())
      fail(k_op, "{}: {} needs {} bytes at byte {}, the file has {} left (truncated or corrupt)",
           file_, what, n, pos_, remaining());
  }

  const uint8_t* bytes_;
  uint64_t size_;
  uint64_t pos_ = 0;
  const std::string& file_;
};

struct ParseState {
  uint64_t values = 0;
};

GgufValue read_value(Cursor& c, GgufValueType type, const std::string& key, int depth,
                     ParseState& st);

GgufValue read_array(Cursor& c, const std::string& key, int depth, ParseState& st) {
  if (depth >= k_max_depth)
    c.fail_at(fmt::format("key '{}': arrays nested deeper than {}", key, k_max_depth));
  const uint32_t elem = c.read<uint32_t>("array element type");
  if (!known_value_type(elem))
    c.fail_at(fmt::format("key '{}': unknown array element type {}", key, elem));
  const uint64_t count = c.read<uint64_t>("array length");
  const auto et = static_cast<GgufValueType>(elem);
  if (count > c.remaining() / min_value_bytes(et))
    c.fail_at(fmt::format("key '{}': array of {} {} values cannot fit in the {} bytes left",
                          key, count, gguf_value_type_name(et), c.remaining()));
  st.values += count;
  if (st.values > k_max_values)
    c.fail_at(fmt::format("more than {} metadata values in all", k_max_values));
  std::vector<GgufValue> items;
  items.reserve(count);
  for (uint64_t i = 0; i < count; ++i) items.push_back(read_value(c, et, key, depth + 1, st));
  GgufValue v;
  v.type = GgufValueType::array;
  v.element_type = et;
  v.value = std::move(items);
  return v;
}

GgufValue read_value(Cursor& c, GgufValueType type, const std::string& key, int depth,
                     ParseState& st) {
  GgufValue v;
  v.type = type;
  switch (type) {
    case GgufValueType::uint8: v.value = uint64_t{c.read<uint8_t>("uint8")}; break;
    case GgufValueType::int8: v.value = int64_t{c.read<int8_t>("int8")}; break;
    case GgufValueType::uint16: v.value = uint64_t{c.read<uint16_t>("uint16")}; break;
    case GgufValueType::int16: v.value = int64_t{c.read<int16_t>("int16")}; break;
    case GgufValueType::uint32: v.value = uint64_t{c.read<uint32_t>("uint32")}; break;
    case GgufValueType::int32: v.value = int64_t{c.read<int32_t>("int32")}; break;
    case GgufValueType::uint64: v.value = c.read<uint64_t>("uint64"); break;
    case GgufValueType::int64: v.value = c.read<int64_t>("int64"); break;
    case GgufValueType::float32: v.value = double{c.read<float>("float32")}; break;
    case GgufValueType::float64: v.value = c.read<double>("float64"); break;
    case GgufValueType::boolean: {
      const uint8_t b = c.read<uint8_t>("bool");
      if (b > 1) c.fail_at(fmt::format("key '{}': bool value {} (expected 0 or 1)", key, b));
      v.value = b == 1;
      break;
    }
    case GgufValueType::string: v.value = c.read_string("string"); break;
    case GgufValueType::array: return read_array(c, key, depth, st);
  }
  return v;
}

void read_metadata(Cursor& c, uint64_t kv_count, GgufHeader& h) {
  // Each pair takes at least 8 (key length) + 4 (type) + 1 bytes.
  if (kv_count > c.remaining() / 13)
    c.fail_at(fmt::format("{} metadata pairs cannot fit in the file", kv_count));
  std::unordered_set<std::string> seen;
  ParseState st;
  for (uint64_t i = 0; i < kv_count; ++i) {
    std::string key = c.read_string("metadata key");
    const uint32_t type = c.read<uint32_t>("metadata value type");
    if (!known_value_type(type))
      c.fail_at(fmt::format("key '{}': unknown value type {}", key, type));
    if (!seen.insert(key).second) c.fail_at(fmt::format("duplicate metadata key '{}'", key));
    GgufValue v = read_value(c, static_cast<GgufValueType>(type), key, 0, st);
    h.metadata.emplace_back(std::move(key), std::move(v));
  }
}

uint64_t read_alignment(const GgufHeader& h, const std::string& file) {
  const GgufValue* a = h.find("general.alignment");
  if (a == nullptr) return 32;
  check(a->type == GgufValueType::uint32, k_op,
        "{}: general.alignment must be a uint32, file has {}", file, gguf_value_type_name(a->type));
  const uint64_t v = std::get<uint64_t>(a->value);
  check(v > 0 && std::has_single_bit(v), k_op,
        "{}: general.alignment must be a power of two, file has {}", file, v);
  return v;
}

GgufTensorInfo read_tensor_info(Cursor& c) {
  GgufTensorInfo t;
  t.name = c.read_string("tensor name");
  const uint32_t n_dims = c.read<uint32_t>("tensor dimension count");
  if (n_dims < 1 || n_dims > k_max_dims)
    c.fail_at(fmt::format("tensor '{}': {} dimensions (expected 1..{})", t.name, n_dims,
                          k_max_dims));
  int64_t numel = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    const uint64_t ne = c.read<uint64_t>("tensor dimension");
    if (ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
        (ne > 0 && numel > std::numeric_limits<int64_t>::max() / static_cast<int64_t>(ne)))
      c.fail_at(fmt::format("tensor '{}': element count overflows int64", t.name));
    t.ne.push_back(static_cast<int64_t>(ne));
    numel *= static_cast<int64_t>(ne);
  }
  t.type = c.read<uint32_t>("tensor type");
  const auto info = ggml_type_info(t.type);
  if (!info) c.fail_at(fmt::format("tensor '{}': unknown ggml type {}", t.name, t.type));
  if (t.ne[0] % info->block_size != 0)
    c.fail_at(fmt::format("tensor '{}': first dimension {} is not a multiple of {}'s block of {}",
                          t.name, t.ne[0], info->name, info->block_size));
  t.nbytes = ggml_nbytes(t.type, numel);
  t.offset = c.read<uint64_t>("tensor offset");
  return t;
}

// Offsets are relative on disk; make them absolute once every bound is checked.
void place_tensors(GgufHeader& h, uint64_t file_size, const std::string& file) {
  check(h.data_start <= file_size, k_op,
        "{}: the data section would start at byte {}, past the end of the file ({} bytes)", file,
        h.data_start, file_size);
  const uint64_t data_size = file_size - h.data_start;
  std::vector<std::pair<uint64_t, size_t>> order;
  for (size_t i = 0; i < h.tensors.size(); ++i) {
    GgufTensorInfo& t = h.tensors[i];
    check(t.offset % h.alignment == 0, k_op,
          "{}: tensor '{}': offset {} is not a multiple of the alignment {}", file, t.name,
          t.offset, h.alignment);
    check(t.offset <= data_size && t.nbytes <= data_size - t.offset, k_op,
          "{}: tensor '{}': bytes [{}, {}) of the data section, which has {} (truncated file?)",
          file, t.name, t.offset, t.offset + t.nbytes, data_size);
    order.emplace_back(t.offset, i);
    t.offset += h.data_start;
  }
  std::sort(order.begin(), order.end());
  for (size_t k = 1; k < order.size(); ++k) {
    const GgufTensorInfo& prev = h.tensors[order[k - 1].second];
    const GgufTensorInfo& cur = h.tensors[order[k].second];
    check(prev.offset + prev.nbytes <= cur.offset, k_op, "{}: tensors '{}' and '{}' overlap",
          file, prev.name, cur.name);
  }
}

std::string quoted(const std::string& s, size_t max_chars) {
  std::string out;
  for (char ch : s) {
    if (out.size() >= max_chars) return "\"" + out + "…\"";
    if (ch == '\n') out += "\\n";
    else if (static_cast<unsigned char>(ch) < 0x20) out += fmt::format("\\x{:02x}", ch);
    else out += ch;
  }
  return "\"" + out + "\"";
}

}  // namespace

std::string gguf_value_type_name(GgufValueType t) {
  switch (t) {
    case GgufValueType::uint8: return "uint8";
    case GgufValueType::int8: return "int8";
    case GgufValueType::uint16: return "uint16";
    case GgufValueType::int16: return "int16";
    case GgufValueType::uint32: return "uint32";
    case GgufValueType::int32: return "int32";
    case GgufValueType::float32: return "float32";
    case GgufValueType::boolean: return "bool";
    case GgufValueType::string: return "string";
    case GgufValueType::array: return "array";
    case GgufValueType::uint64: return "uint64";
    case GgufValueType::int64: return "int64";
    case GgufValueType::float64: return "float64";
  }
  return fmt::format("type {}", static_cast<uint32_t>(t));
}

namespace {
std::string type_text(const GgufValue& v) {
  if (v.type != GgufValueType::array) return gguf_value_type_name(v.type);
  return fmt::format("array[{}]", gguf_value_type_name(v.element_type));
}
}  // namespace

bool GgufValue::is_integer() const {
  return std::holds_alternative<uint64_t>(value) || std::holds_alternative<int64_t>(value);
}

int64_t GgufValue::as_int(const std::string& key) const {
  if (const auto* u = std::get_if<uint64_t>(&value)) {
    check(*u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()), k_op,
          "key '{}': value {} does not fit in int64", key, *u);
    return static_cast<int64_t>(*u);
  }
  if (const auto* i = std::get_if<int64_t>(&value)) return *i;
  fail(k_op, "key '{}': expected an integer, file has {}", key, type_text(*this));
}

double GgufValue::as_float(const std::string& key) const {
  if (const auto* d = std::get_if<double>(&value)) return *d;
  if (is_integer()) return static_cast<double>(as_int(key));
  fail(k_op, "key '{}': expected a number, file has {}", key, type_text(*this));
}

bool GgufValue::as_bool(const std::string& key) const {
  if (const auto* b = std::get_if<bool>(&value)) return *b;
  fail(k_op, "key '{}': expected a bool, file has {}", key, type_text(*this));
}

const std::string& GgufValue::as_string(const std::string& key) const {
  if (const auto* s = std::get_if<std::string>(&value)) return *s;
  fail(k_op, "key '{}': expected a string, file has {}", key, type_text(*this));
}

const std::vector<GgufValue>& GgufValue::as_array(const std::string& key) const {
  if (const auto* a = std::get_if<std::vector<GgufValue>>(&value)) return *a;
  fail(k_op, "key '{}': expected an array, file has {}", key, type_text(*this));
}

std::vector<std::string> GgufValue::as_string_array(const std::string& key) const {
  const auto& a = as_array(key);
  check(element_type == GgufValueType::string, k_op,
        "key '{}': expected array[string], file has {}", key, type_text(*this));
  std::vector<std::string> out;
  out.reserve(a.size());
  for (const auto& v : a) out.push_back(std::get<std::string>(v.value));
  return out;
}

std::vector<int64_t> GgufValue::as_int_array(const std::string& key) const {
  const auto& a = as_array(key);
  std::vector<int64_t> out;
  out.reserve(a.size());
  for (const auto& v : a) out.push_back(v.as_int(key));
  return out;
}

std::vector<double> GgufValue::as_float_array(const std::string& key) const {
  const auto& a = as_array(key);
  std::vector<double> out;
  out.reserve(a.size());
  for (const auto& v : a) out.push_back(v.as_float(key));
  return out;
}

std::string GgufValue::summary(size_t max_chars) const {
  if (const auto* a = std::get_if<std::vector<GgufValue>>(&value)) {
    if (a->size() <= 4 && element_type != GgufValueType::array) {
      std::string s = "[";
      for (size_t i = 0; i < a->size(); ++i) s += (i ? ", " : "") + (*a)[i].summary(max_chars);
      return s + "]";
    }
    return fmt::format("{} of {}", type_text(*this), a->size());
  }
  if (const auto* s = std::get_if<std::string>(&value)) return quoted(*s, max_chars);
  if (const auto* b = std::get_if<bool>(&value)) return *b ? "true" : "false";
  if (const auto* d = std::get_if<double>(&value)) return fmt::format("{}", *d);
  if (const auto* u = std::get_if<uint64_t>(&value)) return fmt::format("{}", *u);
  return fmt::format("{}", std::get<int64_t>(value));
}

int64_t GgufTensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : ne) n *= d;
  return n;
}

std::vector<int64_t> GgufTensorInfo::shape() const { return {ne.rbegin(), ne.rend()}; }

const GgufValue* GgufHeader::find(const std::string& key) const {
  for (const auto& [k, v] : metadata)
    if (k == key) return &v;
  return nullptr;
}

const GgufValue& GgufHeader::at(const std::string& key) const {
  const GgufValue* v = find(key);
  check(v != nullptr, k_op, "metadata key '{}' is missing", key);
  return *v;
}

const GgufTensorInfo* GgufHeader::find_tensor(const std::string& name) const {
  for (const auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

namespace {
std::atomic<uint64_t> g_headers_parsed{0};
}  // namespace

uint64_t gguf_headers_parsed() { return g_headers_parsed.load(std::memory_order_relaxed); }

GgufHeader parse_gguf_header(const uint8_t* bytes, uint64_t file_size, const std::string& file) {
  g_headers_parsed.fetch_add(1, std::memory_order_relaxed);
  Cursor c(bytes, file_size, file);
  const uint32_t magic = c.read<uint32_t>("magic");
  check(std::memcmp(&magic, "GGUF", 4) == 0, k_op, "{}: not a GGUF file (expected magic 'GGUF')",
        file);
  GgufHeader h;
  h.version = c.read<uint32_t>("version");
  check(h.version == 2 || h.version == 3, k_op,
        "{}: GGUF version {} (this reader supports 2 and 3; version 1 predates 64-bit counts, "
        "a byte-swapped number means a big-endian file)", file, h.version);
  const uint64_t tensor_count = c.read<uint64_t>("tensor count");
  const uint64_t kv_count = c.read<uint64_t>("metadata count");
  read_metadata(c, kv_count, h);
  h.alignment = read_alignment(h, file);
  // A tensor info takes at least 8 (name) + 4 + 8 + 4 + 8 bytes.
  if (tensor_count > c.remaining() / 32)
    c.fail_at(fmt::format("{} tensor infos cannot fit in the file", tensor_count));
  std::unordered_set<std::string> names;
  for (uint64_t i = 0; i < tensor_count; ++i) {
    GgufTensorInfo t = read_tensor_info(c);
    if (!names.insert(t.name).second) c.fail_at(fmt::format("duplicate tensor '{}'", t.name));
    h.tensors.push_back(std::move(t));
  }
  const uint64_t end = c.pos();
  h.data_start = end % h.alignment == 0 ? end : end + (h.alignment - end % h.alignment);
  place_tensors(h, file_size, file);
  return h;
}

GgufFile read_gguf(const std::filesystem::path& path) {
  GgufFile g;
  g.file = MappedFile::open(path, std::string(k_op));
  g.header = parse_gguf_header(g.file->data(), g.file->size(), path.string());
  return g;
}

bool is_gguf_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, 4) && std::memcmp(magic, "GGUF", 4) == 0;
}

at::Tensor gguf_tensor_f32(const GgufFile& gguf, const GgufTensorInfo& info) {
  at::Tensor out = at::empty(info.shape(), at::TensorOptions().dtype(at::kFloat));
  dequantize(info.type, gguf.file->data() + info.offset, info.numel(), out.data_ptr<float>());
  return out;
}

}  // namespace oal::io
