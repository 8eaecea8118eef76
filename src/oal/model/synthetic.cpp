#include "oal/io/json_file.h"
#include "oal/model/synthetic.h"

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "oal/core/error.h"
#include "oal/io/atomic_file.h"
#include "oal/io/safetensors.h"
#include "oal/model/hf_config.h"
#include "oal/model/synthetic_tokenizer.h"
#include "oal/model/weight_layout.h"

namespace oal::model {
namespace {

namespace fs = std::filesystem;
constexpr std::string_view k_op = "synthetic";
constexpr const char* k_generator = "oal-synthetic-1";

// Counter-based normal generator: splitmix64 over (stream key, index), Box–Muller in
// double. Defined entirely here, so values do not depend on the LibTorch version.
class Normal {
 public:
  Normal(uint64_t seed, const std::string& stream) : state_(seed ^ 0x9E3779B97F4A7C15ull) {
    for (unsigned char ch : stream) state_ = mix(state_ ^ ch);  // FNV-like absorb
  }
  double next() {
    const double u1 = (static_cast<double>(bits() >> 11) + 1.0) * 0x1.0p-53;  // (0, 1]
    const double u2 = static_cast<double>(bits() >> 11) * 0x1.0p-53;          // [0, 1)
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  }
  uint64_t bits() { return mix(state_ += 0x9E3779B97F4A7C15ull); }

 private:
  static uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  uint64_t state_;
};

// fp32 tensor of `shape` with entries mean + std·N(0, 1) from stream `name`.
at::Tensor normal_tensor(uint64_t seed, const std::string& name, std::vector<int64_t> shape,
                         double mean, double std) {
  at::Tensor t = at::empty(shape, at::kFloat);
  float* p = t.data_ptr<float>();
  Normal g(seed, name);
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<float>(mean + std * g.next());
  return t;
}

// Unit vector û [hidden] shared by all token embeddings. Computed in double with
// plain loops (as is every value below) so the bytes do not depend on ATen kernels.
std::vector<double> common_direction(const SyntheticOptions& o) {
  Normal g(o.seed, "oal.common_direction");
  std::vector<double> u(static_cast<size_t>(o.hidden_size));
  double norm2 = 0;
  for (double& x : u) {
    x = g.next();
    norm2 += x * x;
  }
  for (double& x : u) x /= std::sqrt(norm2);
  return u;
}

// t[row, :] += scale · v (t fp32 [rows, v.size()]), computed in double.
void add_scaled_row(at::Tensor& t, int64_t row, const std::vector<double>& v, double scale,
                    double keep) {
  float* p = t.data_ptr<float>() + row * t.size(1);
  for (size_t i = 0; i < v.size(); ++i)
    p[i] = static_cast<float>(keep * static_cast<double>(p[i]) + scale * v[i]);
}

ModelConfig synthetic_config(const SyntheticOptions& o) {
  ModelConfig c;
  const bool qwen2 = o.architecture == SyntheticArch::qwen2;
  c.architecture = qwen2 ? "Qwen2ForCausalLM" : "LlamaForCausalLM";
  c.hidden_size = o.hidden_size;
  c.intermediate_size = o.intermediate_size;
  c.num_layers = o.num_layers;
  c.num_heads = o.num_heads;
  c.num_kv_heads = o.num_kv_heads;
  check(o.num_heads > 0 && (o.head_dim > 0 || o.hidden_size % o.num_heads == 0), k_op,
        "hidden_size {} must be divisible by num_heads {} when head_dim is not given",
        o.hidden_size, o.num_heads);
  c.head_dim = o.head_dim > 0 ? o.head_dim : o.hidden_size / o.num_heads;
  const int64_t tok = synthetic_tokenizer_size();
  check(o.vocab_size == 0 || o.vocab_size >= tok, k_op,
        "vocab_size {} is smaller than the synthetic tokenizer ({} tokens)", o.vocab_size, tok);
  c.vocab_size = o.vocab_size > 0 ? o.vocab_size : tok;
  c.max_position_embeddings = o.max_position_embeddings;
  c.rope_theta = o.rope_theta;
  c.rms_norm_eps = o.rms_norm_eps;
  c.attention_bias = qwen2;
  c.tie_word_embeddings = o.tie_word_embeddings;
  if (o.llama3_rope_scaling)
    c.rope_scaling = RopeScaling{8.0, 1.0, 4.0, std::max<int64_t>(1, o.max_position_embeddings / 4)};
  c.bos_token_id = synthetic_endoftext_id();
  c.eos_token_id = synthetic_endoftext_id();
  c.eos_token_ids = {synthetic_endoftext_id()};
  validate_config(c, std::string(k_op), "options");
  return c;
}

void check_options(const SyntheticOptions& o, const ModelConfig& c) {
  check(o.dtype == at::kFloat || o.dtype == at::kBFloat16, k_op,
        "dtype {} not supported (expected float32 or bfloat16)", c10::toString(o.dtype));
  check(o.shards >= 1, k_op, "shards must be >= 1, got {}", o.shards);
  check(o.planted_pairs >= 0 && o.planted_pairs <= c.head_dim / 4, k_op,
        "planted_pairs {} must lie in [0, head_dim/4 = {}] (pairs come from the low-frequency "
        "half of the head)",
        o.planted_pairs, c.head_dim / 4);
  check(std::isfinite(o.planted_scale) && o.planted_scale > 0, k_op,
        "planted_scale must be positive and finite, got {}", o.planted_scale);
}

// Rows r of a [heads·D, hidden] projection for every head and planted dim become
// scale·(0.8·û + 0.6·noise), noise ~ N(0, 1/hidden).
void plant_rows(at::Tensor& w, int64_t heads, int64_t head_dim, const std::vector<int64_t>& dims,
                const std::vector<double>& u, double scale, uint64_t seed,
                const std::string& name) {
  const int64_t hidden = w.size(1);
  at::Tensor noise = normal_tensor(seed, name + ".planted", {heads * head_dim, hidden}, 0.0,
                                   1.0 / std::sqrt(static_cast<double>(hidden)));
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t r : dims) {
      const int64_t row = h * head_dim + r;
      w[row].copy_(noise[row]);
      add_scaled_row(w, row, u, scale * 0.8, scale * 0.6);
    }
}

at::Tensor init_tensor(const SyntheticOptions& o, const ModelConfig& c, const std::string& name,
                       const std::vector<int64_t>& shape, const std::vector<double>& u) {
  auto ends_with = [&](const char* s) {
    const std::string suf(s);
    return name.size() >= suf.size() && name.compare(name.size() - suf.size(), suf.size(), suf) == 0;
  };
  const double in = static_cast<double>(shape.size() == 2 ? shape[1] : shape[0]);
  if (name == "model.embed_tokens.weight") {
    at::Tensor e = normal_tensor(o.seed, name, shape, 0.0, 1.0);
    for (int64_t v = 0; v < shape[0]; ++v)
      add_scaled_row(e, v, u, std::sqrt(static_cast<double>(c.hidden_size)), 1.0);
    return e;
  }
  if (ends_with("norm.weight")) return normal_tensor(o.seed, name, shape, 1.0, 0.1);
  if (ends_with(".bias")) return normal_tensor(o.seed, name, shape, 0.0, 0.1);
  if (ends_with("o_proj.weight") || ends_with("down_proj.weight"))
    return normal_tensor(o.seed, name, shape, 0.0, 0.5 / std::sqrt(in));
  return normal_tensor(o.seed, name, shape, 0.0, 1.0 / std::sqrt(in));
}

std::string layer_of(const std::string& name, int64_t layer) {
  return fmt::format("model.layers.{}.self_attn.", layer) + name;
}

}  // namespace

std::vector<std::vector<int64_t>> synthetic_planted_dims(const SyntheticOptions& o) {
  const ModelConfig c = synthetic_config(o);
  check_options(o, c);
  const int64_t half = c.head_dim / 2, lo = c.head_dim / 4;
  std::vector<std::vector<int64_t>> out;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    // Partial Fisher–Yates over the low-frequency pair indices [lo, half).
    std::vector<int64_t> pool;
    for (int64_t i = lo; i < half; ++i) pool.push_back(i);
    Normal g(o.seed, fmt::format("oal.planted.{}", l));
    std::vector<int64_t> dims;
    for (int64_t k = 0; k < o.planted_pairs; ++k) {
      const int64_t pick = k + static_cast<int64_t>(g.bits() % static_cast<uint64_t>(pool.size() - k));
      std::swap(pool[k], pool[pick]);
      dims.push_back(pool[k]);
      dims.push_back(pool[k] + half);  // the RoPE partner in HF's half layout
    }
    std::sort(dims.begin(), dims.end());
    out.push_back(dims);
  }
  return out;
}

ModelWeights make_synthetic_weights(const SyntheticOptions& o) {
  ModelWeights w;
  w.config = synthetic_config(o);
  check_options(o, w.config);
  const ModelConfig& c = w.config;
  const std::vector<double> u = common_direction(o);
  for (const auto& [name, shape] : expected_tensor_shapes(c))
    w.tensors[name] = init_tensor(o, c, name, shape, u);
  const auto planted = synthetic_planted_dims(o);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    plant_rows(w.tensors[layer_of("q_proj.weight", l)], c.num_heads, c.head_dim, planted[l], u,
               o.planted_scale, o.seed, layer_of("q_proj.weight", l));
    plant_rows(w.tensors[layer_of("k_proj.weight", l)], c.num_kv_heads, c.head_dim, planted[l], u,
               o.planted_scale, o.seed, layer_of("k_proj.weight", l));
  }
  if (o.dtype != at::kFloat)
    for (auto& [name, t] : w.tensors) t = t.to(o.dtype);
  validate_weights(w, "synthetic");
  return w;
}

namespace {

// Splits sorted names into `k` contiguous runs of roughly equal bytes; writes the
// shards and the index.
void write_sharded(const fs::path& dir, const std::map<std::string, at::Tensor>& tensors,
                   int64_t k) {
  int64_t total = 0;
  for (const auto& [n, t] : tensors) total += t.numel() * static_cast<int64_t>(t.element_size());
  std::vector<std::map<std::string, at::Tensor>> shards(static_cast<size_t>(k));
  nlohmann::json weight_map = nlohmann::json::object();
  int64_t seen = 0;
  for (const auto& [name, t] : tensors) {
    const int64_t idx = std::min<int64_t>(k - 1, seen * k / std::max<int64_t>(total, 1));
    seen += t.numel() * static_cast<int64_t>(t.element_size());
    shards[static_cast<size_t>(idx)][name] = t;
    weight_map[name] = fmt::format("model-{:05d}-of-{:05d}.safetensors", idx + 1, k);
  }
  for (int64_t i = 0; i < k; ++i)
    io::write_safetensors(dir / fmt::format("model-{:05d}-of-{:05d}.safetensors", i + 1, k),
                          shards[static_cast<size_t>(i)], {{"format", "pt"}});
  const nlohmann::json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  io::write_file_atomic(dir / "model.safetensors.index.json", index.dump(2) + "\n");
}

}  // namespace

void write_synthetic_model(const fs::path& dir, const SyntheticOptions& o) {
  const ModelWeights w = make_synthetic_weights(o);
  std::error_code ec;
  fs::create_directories(dir, ec);
  check(fs::is_directory(dir), k_op, "{}: cannot create directory: {}", dir.string(), ec.message());
  const nlohmann::json extra = {
      {"torch_dtype", o.dtype == at::kBFloat16 ? "bfloat16" : "float32"},
      {"oal_synthetic",
       {{"generator", k_generator},
        {"seed", o.seed},
        {"planted_dims", synthetic_planted_dims(o)},
        {"planted_scale", o.planted_scale}}}};
  // Replace whichever layout a previous run left, so the loader sees one checkpoint.
  fs::remove(dir / "model.safetensors.index.json", ec);
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind("model-", 0) == 0 &&
        e.path().extension() == ".safetensors")
      fs::remove(e.path(), ec);
  if (o.shards > 1) {
    fs::remove(dir / "model.safetensors", ec);
    write_sharded(dir, w.tensors, o.shards);
  } else {
    io::write_safetensors(dir / "model.safetensors", w.tensors, {{"format", "pt"}});
  }
  write_synthetic_tokenizer(dir, w.config.max_position_embeddings);
  write_hf_config(dir / "config.json", w.config, extra);
}

std::vector<std::vector<int64_t>> read_planted_dims(const fs::path& dir) {
  const fs::path p = dir / "config.json";
  const nlohmann::json j = io::read_json_file(p, k_op);
  if (!j.is_object() || !j.contains("oal_synthetic")) return {};
  const nlohmann::json& s = j["oal_synthetic"];
  const std::string what = p.string() + ": oal_synthetic.planted_dims";
  check(s.is_object() && s.contains("planted_dims") && s["planted_dims"].is_array(), k_op,
        "{} must be a list of integer lists", what);
  std::vector<std::vector<int64_t>> dims;
  for (const auto& layer : s["planted_dims"]) dims.push_back(io::json_int_list(layer, k_op, what));
  return dims;
}

SyntheticOptions qwen25_05b_shape() {
  SyntheticOptions o;
  o.architecture = SyntheticArch::qwen2;
  o.hidden_size = 896;
  o.intermediate_size = 4864;
  o.num_layers = 24;
  o.num_heads = 14;
  o.num_kv_heads = 2;
  o.head_dim = 64;
  o.vocab_size = 151936;
  o.max_position_embeddings = 131072;
  o.rope_theta = 1000000.0;
  o.tie_word_embeddings = true;
  o.dtype = at::kBFloat16;
  return o;
}

}  // namespace oal::model
