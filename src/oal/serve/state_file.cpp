#include "oal/serve/state_file.h"

#include <cctype>
#include <cstring>

#include <nlohmann/json.hpp>

#include "oal/core/error.h"
#include "oal/core/fnv1a.h"
#include "oal/io/atomic_file.h"
#include "oal/io/mapped_file.h"

namespace oal::serve {
namespace {

using nlohmann::json;
constexpr std::string_view k_op = "state_file";
constexpr std::string_view k_magic = "OALSTATE";
constexpr uint32_t k_version = 1;
constexpr size_t k_prefix = 8 + 4 + 8;            // magic, version, header length
constexpr uint64_t k_max_header = 64ull << 20;    // 32K tokens of ids are < 1 MB of JSON
constexpr int64_t k_max_dims = 8;

struct DtypeName {
  at::ScalarType type;
  const char* name;
};
constexpr DtypeName k_dtypes[] = {{at::kFloat, "f32"}, {at::kDouble, "f64"},
                                  {at::kBFloat16, "bf16"}, {at::kHalf, "f16"}};

const char* dtype_name(at::ScalarType t) {
  for (const auto& d : k_dtypes)
    if (d.type == t) return d.name;
  fail(k_op, "cannot save a {} tensor (f32, f64, bf16 and f16 can be saved)", c10::toString(t));
}

at::ScalarType dtype_of(const std::string& name, std::string_view source) {
  for (const auto& d : k_dtypes)
    if (name == d.name) return d.type;
  fail(k_op, "{}: unknown dtype '{}'", source, name);
}

template <typename T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof(T));
}
template <typename T>
T get(std::string_view bytes, size_t at) {
  T v;
  std::memcpy(&v, bytes.data() + at, sizeof(T));
  return v;
}

// The header JSON of a file's first bytes, after checking magic, version and length.
json parse_header(std::string_view bytes, std::string_view source, size_t& header_end) {
  check(bytes.size() >= k_prefix && bytes.substr(0, 8) == k_magic, k_op,
        "{}: not an oal state file (no OALSTATE magic)", source);
  const auto version = get<uint32_t>(bytes, 8);
  check(version == k_version, k_op, "{}: version {} (this oal reads version {})", source, version,
        k_version);
  const auto n = get<uint64_t>(bytes, 12);
  check(n <= k_max_header && n <= bytes.size() - k_prefix, k_op,
        "{}: header of {} bytes does not fit in the {} bytes read (truncated?)", source, n,
        bytes.size());
  header_end = k_prefix + n;
  json h = json::parse(bytes.substr(k_prefix, n), nullptr, /*allow_exceptions=*/false);
  check(h.is_object(), k_op, "{}: the header is not a JSON object", source);
  return h;
}

// A field of the header with the expected JSON type, or an error naming it.
const json& field(const json& j, const char* name, json::value_t type, std::string_view source) {
  auto it = j.find(name);
  const bool ok = it != j.end() &&
                  (it->type() == type || (type == json::value_t::number_unsigned &&
                                          it->type() == json::value_t::number_integer && *it >= 0));
  check(ok, k_op, "{}: header field '{}' is missing or of the wrong type", source, name);
  return *it;
}

StateFileHeader header_fields(const json& h, std::string_view source) {
  StateFileHeader out;
  out.identity = field(h, "identity", json::value_t::string, source).get<std::string>();
  out.id = field(h, "id", json::value_t::string, source).get<std::string>();
  check(valid_conversation_id(out.id), k_op, "{}: invalid conversation id in the header", source);
  for (const json& t : field(h, "tokens", json::value_t::array, source)) {
    check(t.is_number_integer() && t >= 0 && t <= INT32_MAX, k_op,
          "{}: token ids must be integers in [0, 2^31)", source);
    out.tokens.push_back(t.get<int32_t>());
  }
  return out;
}

// One tensor described by the header, its bytes copied out of the payload.
at::Tensor read_tensor(const json& d, std::string_view payload, uint64_t& expected_offset,
                       std::string_view source) {
  const auto dtype =
      dtype_of(field(d, "dtype", json::value_t::string, source).get<std::string>(), source);
  const json& shape = field(d, "shape", json::value_t::array, source);
  check(shape.size() <= k_max_dims, k_op, "{}: a tensor with {} dimensions", source, shape.size());
  std::vector<int64_t> sizes;
  uint64_t numel = 1;
  for (const json& s : shape) {
    check(s.is_number_integer() && s >= 0 && s <= (int64_t{1} << 40), k_op,
          "{}: tensor sizes must be integers in [0, 2^40]", source);
    sizes.push_back(s.get<int64_t>());
    check(numel <= (uint64_t{1} << 40) / std::max<uint64_t>(1, sizes.back()), k_op,
          "{}: a tensor of more than 2^40 elements", source);
    numel *= static_cast<uint64_t>(sizes.back());
  }
  const auto offset = field(d, "offset", json::value_t::number_unsigned, source).get<uint64_t>();
  const auto nbytes = field(d, "bytes", json::value_t::number_unsigned, source).get<uint64_t>();
  const uint64_t want = numel * c10::elementSize(dtype);
  check(nbytes == want, k_op, "{}: tensor of {} elements stores {} bytes, expected {}", source,
        numel, nbytes, want);
  check(offset == expected_offset && offset <= payload.size() && nbytes <= payload.size() - offset,
        k_op, "{}: tensor bytes [{}, +{}) are not the next ones of the {}-byte payload", source,
        offset, nbytes, payload.size());
  expected_offset += nbytes;
  at::Tensor t = at::empty(sizes, at::TensorOptions().dtype(dtype));
  if (nbytes > 0) std::memcpy(t.data_ptr(), payload.data() + offset, nbytes);
  return t;
}

// The mapped file's bytes (io::MappedFile keeps them alive while `f` lives).
std::string_view bytes_of(const io::MappedFile& f) {
  return {reinterpret_cast<const char*>(f.data()), static_cast<size_t>(f.size())};
}

}  // namespace

bool valid_conversation_id(std::string_view id) {
  if (id.empty() || id.size() > 64) return false;
  for (char c : id)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') return false;
  return true;
}

std::string encode_state_file(const SavedConversation& c, const std::string& identity) {
  check(valid_conversation_id(c.id), k_op, "invalid conversation id '{}'", c.id);
  json layers = json::array();
  std::string payload;
  for (const auto& layer : c.layers) {
    json tensors = json::array();
    for (const auto& [name, t] : layer.tensors) {
      const at::Tensor ct = t.to(at::kCPU).contiguous();
      const size_t nbytes = static_cast<size_t>(ct.numel()) * ct.element_size();
      tensors.push_back({{"name", name},
                         {"dtype", dtype_name(ct.scalar_type())},
                         {"shape", ct.sizes().vec()},
                         {"offset", payload.size()},
                         {"bytes", nbytes}});
      payload.append(static_cast<const char*>(ct.data_ptr()), nbytes);
    }
    layers.push_back({{"tokens", layer.tokens}, {"tensors", tensors}});
  }
  const json header = {
      {"identity", identity}, {"id", c.id}, {"tokens", c.tokens}, {"layers", layers}};
  const std::string h = header.dump();
  std::string out(k_magic);
  put(out, k_version);
  put(out, static_cast<uint64_t>(h.size()));
  out += h;
  out += payload;
  uint64_t sum = k_fnv1a_offset;
  fnv1a(sum, out);
  put(out, sum);
  return out;
}

StateFileHeader decode_state_header(std::string_view bytes, std::string_view source) {
  size_t end = 0;
  return header_fields(parse_header(bytes, source, end), source);
}

SavedConversation decode_state_file(std::string_view bytes, const std::string& identity,
                                    std::string_view source) {
  size_t end = 0;
  const json h = parse_header(bytes, source, end);
  check(bytes.size() >= end + 8, k_op, "{}: truncated (no checksum after the header)", source);
  uint64_t sum = k_fnv1a_offset;
  fnv1a(sum, bytes.substr(0, bytes.size() - 8));
  check(sum == get<uint64_t>(bytes, bytes.size() - 8), k_op,
        "{}: checksum mismatch (the file is corrupt or truncated)", source);
  StateFileHeader head = header_fields(h, source);
  check(head.identity == identity, k_op,
        "{}: written for another model or attention ({}; this server is {})", source, head.identity,
        identity);
  SavedConversation c{.id = head.id, .tokens = std::move(head.tokens)};
  const std::string_view payload = bytes.substr(end, bytes.size() - 8 - end);
  uint64_t offset = 0;
  for (const json& layer : field(h, "layers", json::value_t::array, source)) {
    check(layer.is_object(), k_op, "{}: a layer entry is not an object", source);
    attn::StateSnapshot snap;
    snap.tokens = field(layer, "tokens", json::value_t::number_unsigned, source).get<int64_t>();
    check(snap.tokens == static_cast<int64_t>(c.tokens.size()), k_op,
          "{}: a layer holds {} tokens, the conversation {}", source, snap.tokens, c.tokens.size());
    for (const json& d : field(layer, "tensors", json::value_t::array, source)) {
      check(d.is_object(), k_op, "{}: a tensor entry is not an object", source);
      const auto name = field(d, "name", json::value_t::string, source).get<std::string>();
      snap.tensors.emplace_back(name, read_tensor(d, payload, offset, source));
    }
    c.layers.push_back(std::move(snap));
  }
  check(offset == payload.size(), k_op, "{}: {} payload bytes, the tensors account for {}", source,
        payload.size(), offset);
  return c;
}

void write_state_file(const std::filesystem::path& path, const SavedConversation& c,
                      const std::string& identity) {
  io::write_file_atomic(path, encode_state_file(c, identity));
}

SavedConversation read_state_file(const std::filesystem::path& path, const std::string& identity) {
  const auto f = io::MappedFile::open(path, std::string(k_op));
  return decode_state_file(bytes_of(*f), identity, path.string());
}

StateFileHeader read_state_header(const std::filesystem::path& path) {
  // Mapped, so only the pages of the prefix and the header are read from disk.
  const auto f = io::MappedFile::open(path, std::string(k_op));
  return decode_state_header(bytes_of(*f), path.string());
}

}  // namespace oal::serve
