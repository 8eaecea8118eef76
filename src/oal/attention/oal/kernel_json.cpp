#include "oal/io/json_file.h"
#include "oal/attention/oal/kernel_json.h"

#include <fstream>
#include <sstream>

#include "oal/core/error.h"
#include "oal/io/atomic_file.h"

namespace oal::attn {
namespace {

constexpr std::string_view k_op = "kernel_json";
constexpr const char* k_format = "oal-kernels";
constexpr int k_version = 1;

int64_t parse_index(const std::string& key, std::string_view what) {
  try {
    size_t used = 0;
    long long v = std::stoll(key, &used);
    if (used == key.size() && v >= 0) return v;
  } catch (const std::exception&) {
  }
  fail(k_op, "{} key '{}' is not a non-negative integer", what, key);
}

// JSON integers only (io::json_int: a huge float such as 3.5e32 as a group index was
// undefined behaviour, found by fuzz/fuzz_kernel_json).
int64_t get_int(const nlohmann::json& j, const char* key) {
  return io::json_int(j.at(key), k_op, fmt::format("'{}'", key));
}

// "groups": lists of integer dimension indices.
std::vector<std::vector<int64_t>> get_groups(const nlohmann::json& j) {
  const nlohmann::json& g = j.at("groups");
  check(g.is_array(), k_op, "'groups' must be a list of lists of dimension indices");
  std::vector<std::vector<int64_t>> out;
  for (const auto& group : g)
    out.push_back(
        io::json_int_list(group, k_op, "each 'groups' entry (integer dimension indices)"));
  return out;
}

// Runs `fn`, turning nlohmann type/shape errors into an oal::Error that says where.
template <typename Fn>
auto located(const std::string& where, Fn&& fn) {
  try {
    return fn();
  } catch (const oal::Error& e) {
    fail(k_op, "{}: {}", where, e.what());
  } catch (const nlohmann::json::exception& e) {
    fail(k_op, "{}: malformed entry ({})", where, e.what());
  }
}

// Heads stored as an object "0".."H-1" -> vector ordered by head index (contiguous).
template <typename Fn>
std::vector<QuadraticKernel> read_head_object(const nlohmann::json& heads, int64_t layer,
                                              Fn&& read_head) {
  check(heads.is_object() && !heads.empty(), k_op,
        "layer {}: 'heads' must be a non-empty object", layer);
  std::map<int64_t, QuadraticKernel> by_index;
  // Not a structured binding: clang 14 cannot capture one in a lambda.
  for (const auto& item : heads.items()) {
    const nlohmann::json& hj = item.value();
    int64_t h = parse_index(item.key(), "head");
    by_index.emplace(h, located(fmt::format("layer {} head {}", layer, h),
                                [&] { return read_head(hj); }));
  }
  std::vector<QuadraticKernel> out;
  for (auto& [h, k] : by_index) {
    check(h == static_cast<int64_t>(out.size()), k_op,
          "layer {}: head indices must be 0..{} without gaps, missing {}", layer,
          by_index.size() - 1, out.size());
    out.push_back(k);
  }
  return out;
}

void check_head_dims(const ModelKernels& mk) {
  for (const auto& [layer, heads] : mk.layers) {
    check(!heads.empty(), k_op, "layer {} has no heads", layer);
    for (size_t h = 0; h < heads.size(); ++h)
      check(heads[h].dim() == mk.head_dim, k_op,
            "layer {} head {}: groups cover d = {}, file says head_dim {}", layer, h,
            heads[h].dim(), mk.head_dim);
  }
}

}  // namespace

const std::vector<QuadraticKernel>& ModelKernels::layer(int64_t layer) const {
  auto it = layers.find(layer);
  check(it != layers.end(), k_op, "no kernels for layer {} ({} layers present)", layer,
        layers.size());
  return it->second;
}

nlohmann::json kernels_to_json(const ModelKernels& mk) {
  check_head_dims(mk);
  nlohmann::json j;
  j["format"] = k_format;
  j["version"] = k_version;
  j["head_dim"] = mk.head_dim;
  j["parameterization"] =
      "kappa = epsilon + ||L^T [1, s_1, ..., s_G]||^2, L packed row-major lower";
  nlohmann::json layers = nlohmann::json::object();
  for (const auto& [layer, heads] : mk.layers) {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& k : heads)
      arr.push_back({{"groups", k.groups()}, {"L", k.packed_lower()}, {"epsilon", k.eps()}});
    layers[std::to_string(layer)] = std::move(arr);
  }
  j["layers"] = std::move(layers);
  j["meta"] = mk.meta;
  return j;
}

ModelKernels kernels_from_json(const nlohmann::json& j) {
  return located("kernel file", [&] {
    check(j.is_object() && j.value("format", nlohmann::json()) == k_format, k_op,
          "expected format '{}' (field \"format\")", k_format);
    const int64_t ver = get_int(j, "version");
    check(ver == k_version, k_op, "unsupported version {}, expected {}", ver, k_version);
    ModelKernels mk;
    mk.head_dim = get_int(j, "head_dim");
    check(mk.head_dim >= 1, k_op, "head_dim must be >= 1, got {}", mk.head_dim);
    if (j.contains("meta")) mk.meta = j.at("meta");
    for (const auto& item : j.at("layers").items()) {  // lj is captured below
      const nlohmann::json& lj = item.value();
      int64_t layer = parse_index(item.key(), "layer");
      check(lj.is_array() && !lj.empty(), k_op, "layer {} must be a non-empty array of heads",
            layer);
      std::vector<QuadraticKernel> heads;
      for (size_t h = 0; h < lj.size(); ++h)
        heads.push_back(located(fmt::format("layer {} head {}", layer, h), [&] {
          const auto& hj = lj[h];
          return QuadraticKernel(get_groups(hj),
                                 hj.at("L").get<std::vector<double>>(),
                                 hj.at("epsilon").get<double>());
        }));
      mk.layers[layer] = std::move(heads);
    }
    check_head_dims(mk);
    return mk;
  });
}

ModelKernels official_kernels_from_json(const nlohmann::json& j) {
  return located("official kernel file", [&] {
    ModelKernels mk;
    double eps = j.at("epsilon").get<double>();
    mk.head_dim = get_int(j, "head_dim");
    mk.meta = {{"source", "official OAL release"}};
    for (const char* key : {"model_name", "seq_len", "parameterization", "method"})
      if (j.contains(key)) mk.meta[key] = j[key];
    for (const auto& item : j.at("layers").items()) {  // lj is captured below
      const nlohmann::json& lj = item.value();
      int64_t layer = parse_index(item.key(), "layer");
      int64_t max_groups = get_int(lj, "max_groups");
      check(max_groups >= 1, k_op, "layer {}: max_groups must be >= 1, got {}", layer,
            max_groups);
      const int64_t n = max_groups + 1;
      mk.layers[layer] = read_head_object(lj.at("heads"), layer, [&](const nlohmann::json& hj) {
        auto groups = get_groups(hj);
        int64_t gc = get_int(hj, "group_count");
        check(gc == static_cast<int64_t>(groups.size()), k_op,
              "group_count {} but {} groups listed", gc, groups.size());
        check(gc <= max_groups, k_op, "group_count {} exceeds the layer's max_groups {}", gc,
              max_groups);
        auto packed = hj.at("packed_lower_triangular").get<std::vector<double>>();
        check(static_cast<int64_t>(packed.size()) == n * (n + 1) / 2, k_op,
              "packed_lower_triangular has {} values, max_groups {} needs {}", packed.size(),
              max_groups, n * (n + 1) / 2);
        // Only the leading (G+1) x (G+1) block is this head's L; the rest may hold
        // leftovers that are not part of the kernel (see ../shared/data/README.md).
        auto full = QuadraticKernel::unpack_lower(packed, n);
        auto L = full.narrow(0, 0, gc + 1).narrow(1, 0, gc + 1);
        return QuadraticKernel::from_lower(std::move(groups), L, eps);
      });
    }
    check_head_dims(mk);
    return mk;
  });
}

void write_kernels(const std::filesystem::path& path, const ModelKernels& kernels) {
  io::write_file_atomic(path, kernels_to_json(kernels).dump(1) + "\n");
}

ModelKernels read_kernels(const std::filesystem::path& path) {
  const nlohmann::json j = io::read_json_file(path, k_op, "kernel JSON");
  try {
    bool official = j.is_object() && !j.contains("format") && j.contains("layers") &&
                    j["layers"].is_object() && !j["layers"].empty() &&
                    j["layers"].begin()->is_object() &&
                    j["layers"].begin()->contains("max_groups");
    return official ? official_kernels_from_json(j) : kernels_from_json(j);
  } catch (const oal::Error& e) {
    fail(k_op, "'{}': {}", path.string(), e.what());
  }
}

}  // namespace oal::attn
