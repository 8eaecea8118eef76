#include "oal/formats/hf_config.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "oal/core/error.h"
#include "oal/io/atomic_file.h"
#include "oal/io/json_file.h"
#include "oal/model/rope.h"

namespace oal::formats {
namespace {

constexpr std::string_view k_op = "hf_config";
constexpr const char* k_llama = "LlamaForCausalLM";
constexpr const char* k_qwen2 = "Qwen2ForCausalLM";

using nlohmann::json;

bool has(const json& j, const char* key) {
  return j.contains(key) && !j[key].is_null();
}

int64_t get_int(const json& j, const char* key, const std::string& src) {
  check(has(j, key), k_op, "{}: missing required field '{}'", src, key);
  return io::json_int(j[key], k_op, fmt::format("{}: field '{}'", src, key));
}

int64_t get_int_or(const json& j, const char* key, int64_t def, const std::string& src) {
  return has(j, key) ? get_int(j, key, src) : def;
}

double get_num(const json& j, const char* key, const std::string& src) {
  check(has(j, key), k_op, "{}: missing required field '{}'", src, key);
  check(j[key].is_number(), k_op, "{}: field '{}' must be a number, got {}", src, key,
        j[key].dump());
  return j[key].get<double>();
}

double get_num_or(const json& j, const char* key, double def, const std::string& src) {
  return has(j, key) ? get_num(j, key, src) : def;
}

bool get_bool_or(const json& j, const char* key, bool def, const std::string& src) {
  if (!has(j, key)) return def;
  check(j[key].is_boolean(), k_op, "{}: field '{}' must be true or false, got {}", src, key,
        j[key].dump());
  return j[key].get<bool>();
}

std::string architecture_of(const json& j, const std::string& src) {
  if (has(j, "architectures")) {
    check(j["architectures"].is_array() && !j["architectures"].empty() &&
              j["architectures"][0].is_string(),
          k_op, "{}: 'architectures' must be a non-empty list of strings", src);
    std::string a = j["architectures"][0].get<std::string>();
    check(a == k_llama || a == k_qwen2, k_op,
          "{}: unsupported architecture '{}' (expected {} or {})", src, a, k_llama, k_qwen2);
    return a;
  }
  check(has(j, "model_type"), k_op, "{}: missing 'architectures' (and no 'model_type')", src);
  std::string t = j["model_type"].is_string() ? j["model_type"].get<std::string>() : "";
  if (t == "llama") return k_llama;
  if (t == "qwen2") return k_qwen2;
  fail(k_op, "{}: unsupported model_type '{}' (expected llama or qwen2)", src,
       j["model_type"].dump());
}

std::optional<model::RopeScaling> parse_rope_scaling(const json& j, const std::string& src) {
  if (!has(j, "rope_scaling")) return std::nullopt;
  const json& r = j["rope_scaling"];
  check(r.is_object(), k_op, "{}: rope_scaling must be an object or null", src);
  std::string type;
  if (has(r, "rope_type") && r["rope_type"].is_string())
    type = r["rope_type"].get<std::string>();
  else if (has(r, "type") && r["type"].is_string())
    type = r["type"].get<std::string>();
  if (type == "default") return std::nullopt;
  check(type == "llama3", k_op,
        "{}: unsupported rope_scaling type '{}' (expected llama3 or default)", src, type);
  const std::string ctx = src + ": rope_scaling";
  model::RopeScaling s;
  s.factor = get_num(r, "factor", ctx);
  s.low_freq_factor = get_num(r, "low_freq_factor", ctx);
  s.high_freq_factor = get_num(r, "high_freq_factor", ctx);
  s.original_max_position_embeddings = get_int(r, "original_max_position_embeddings", ctx);
  check(s.factor > 0 && s.low_freq_factor > 0 && s.high_freq_factor > s.low_freq_factor &&
            s.original_max_position_embeddings > 0,
        k_op,
        "{}: expected factor > 0, 0 < low_freq_factor < high_freq_factor, "
        "original_max_position_embeddings > 0",
        ctx);
  return s;
}

void parse_special_ids(const json& j, model::ModelConfig& c, const std::string& src) {
  if (has(j, "bos_token_id")) c.bos_token_id = get_int(j, "bos_token_id", src);
  if (!has(j, "eos_token_id")) return;
  const json& e = j["eos_token_id"];
  if (e.is_array()) {
    for (const auto& v : e)
      c.eos_token_ids.push_back(io::json_int(v, k_op, fmt::format("{}: each eos_token_id", src)));
  } else {
    c.eos_token_ids.push_back(get_int(j, "eos_token_id", src));
  }
  if (!c.eos_token_ids.empty()) c.eos_token_id = c.eos_token_ids.front();
}

// Settings that would change the computation but that the transformer does not model.
void reject_unsupported(const json& j, const std::string& src) {
  if (has(j, "hidden_act")) {
    check(j["hidden_act"] == "silu", k_op, "{}: hidden_act {} is not supported (expected \"silu\")",
          src, j["hidden_act"].dump());
  }
  check(!get_bool_or(j, "mlp_bias", false, src), k_op, "{}: mlp_bias true is not supported", src);
  check(!get_bool_or(j, "use_sliding_window", false, src), k_op,
        "{}: use_sliding_window true is not supported (full attention only)", src);
}

}  // namespace

void validate_config(const model::ModelConfig& c, const std::string& op, const std::string& src) {
  check(c.hidden_size > 0 && c.intermediate_size > 0 && c.num_layers > 0 && c.num_heads > 0 &&
            c.num_kv_heads > 0 && c.head_dim > 0 && c.vocab_size > 0 &&
            c.max_position_embeddings > 0,
        op,
        "{}: expected positive sizes, got hidden {} intermediate {} layers {} heads {} kv_heads "
        "{} head_dim {} vocab {} max_positions {}",
        src, c.hidden_size, c.intermediate_size, c.num_layers, c.num_heads, c.num_kv_heads,
        c.head_dim, c.vocab_size, c.max_position_embeddings);
  check(c.num_heads % c.num_kv_heads == 0, op,
        "{}: num_attention_heads {} must be a multiple of num_key_value_heads {}", src, c.num_heads,
        c.num_kv_heads);
  check(c.head_dim % 2 == 0, op, "{}: head_dim {} must be even (RoPE rotates pairs)", src,
        c.head_dim);
  check(c.rope_theta > 0 && c.rms_norm_eps > 0, op,
        "{}: expected rope_theta > 0 and rms_norm_eps > 0, got {} and {}", src, c.rope_theta,
        c.rms_norm_eps);
  (void)model::rope_freq_divisors(
      c);  // RoPE scaling: one form, factors of the right length and sign
  auto in_vocab = [&](int64_t id) { return id >= 0 && id < c.vocab_size; };
  check(!c.bos_token_id || in_vocab(*c.bos_token_id), op, "{}: bos_token_id {} outside vocab {}",
        src, c.bos_token_id.value_or(-1), c.vocab_size);
  for (int64_t id : c.eos_token_ids)
    check(in_vocab(id), op, "{}: eos_token_id {} outside vocab {}", src, id, c.vocab_size);
}

model::ModelConfig parse_hf_config(const json& j, const std::string& src) {
  check(j.is_object(), k_op, "{}: expected a JSON object", src);
  model::ModelConfig c;
  c.architecture = architecture_of(j, src);
  const bool qwen2 = c.architecture == k_qwen2;
  reject_unsupported(j, src);
  c.hidden_size = get_int(j, "hidden_size", src);
  c.intermediate_size = get_int(j, "intermediate_size", src);
  c.num_layers = get_int(j, "num_hidden_layers", src);
  c.num_heads = get_int(j, "num_attention_heads", src);
  check(c.num_heads > 0, k_op, "{}: num_attention_heads must be positive", src);
  c.num_kv_heads = get_int_or(j, "num_key_value_heads", c.num_heads, src);
  if (has(j, "head_dim")) {
    c.head_dim = get_int(j, "head_dim", src);
  } else {
    check(c.hidden_size % c.num_heads == 0, k_op,
          "{}: hidden_size {} is not divisible by num_attention_heads {} (and no head_dim given)",
          src, c.hidden_size, c.num_heads);
    c.head_dim = c.hidden_size / c.num_heads;
  }
  c.vocab_size = get_int(j, "vocab_size", src);
  c.max_position_embeddings = get_int_or(j, "max_position_embeddings", qwen2 ? 32768 : 2048, src);
  c.rope_theta = get_num_or(j, "rope_theta", 10000.0, src);
  if (has(j, "rope_parameters") && j["rope_parameters"].is_object())  // transformers >= 5
    c.rope_theta = get_num_or(j["rope_parameters"], "rope_theta", c.rope_theta, src);
  c.rms_norm_eps = get_num_or(j, "rms_norm_eps", 1e-6, src);
  c.attention_bias = qwen2 ? true : get_bool_or(j, "attention_bias", false, src);
  c.tie_word_embeddings = get_bool_or(j, "tie_word_embeddings", false, src);
  // "oal_rope_style": "adjacent" marks a llama2.c-layout model exported as an HF
  // directory by `oal finetune`/`oal convert` (HF itself has only the half layout).
  c.rope_style = has(j, "oal_rope_style") && j["oal_rope_style"] == "adjacent"
                     ? model::RopeStyle::adjacent
                     : model::RopeStyle::half;
  c.rope_scaling = parse_rope_scaling(j, src);
  if (!c.rope_scaling && has(j, "rope_parameters") && j["rope_parameters"].is_object()) {
    json wrapped = {{"rope_scaling", j["rope_parameters"]}};
    c.rope_scaling = parse_rope_scaling(wrapped, src + ": rope_parameters");
  }
  // "oal_rope_freq_factors": [...] carries a GGUF model's rope_freqs through an HF
  // directory written by `oal convert`/`oal finetune` (HF has no such field).
  if (has(j, "oal_rope_freq_factors")) {
    const json& f = j["oal_rope_freq_factors"];
    check(f.is_array(), k_op, "{}: oal_rope_freq_factors must be an array of numbers", src);
    for (const auto& v : f) {
      check(v.is_number(), k_op, "{}: oal_rope_freq_factors must be an array of numbers", src);
      c.rope_freq_factors.push_back(v.get<double>());
    }
  }
  parse_special_ids(j, c, src);
  validate_config(c, std::string(k_op), src);
  return c;
}

model::ModelConfig read_hf_config(const std::filesystem::path& path) {
  return parse_hf_config(io::read_json_file(path, k_op, "an HF config.json"), path.string());
}

nlohmann::json rope_scaling_to_json(const model::RopeScaling& r) {
  return {{"rope_type", "llama3"},
          {"factor", r.factor},
          {"low_freq_factor", r.low_freq_factor},
          {"high_freq_factor", r.high_freq_factor},
          {"original_max_position_embeddings", r.original_max_position_embeddings}};
}

json hf_config_to_json(const model::ModelConfig& c) {
  validate_config(c, std::string(k_op), "config to write");
  check(c.rope_style == model::RopeStyle::half, k_op,
        "config to write: adjacent-pair RoPE (llama2.c) has no HF config.json form");
  check(c.architecture == k_llama || c.architecture == k_qwen2, k_op,
        "config to write: unsupported architecture '{}'", c.architecture);
  const bool qwen2 = c.architecture == k_qwen2;
  check(!qwen2 || c.attention_bias, k_op, "config to write: Qwen2 always has attention biases");
  json j = {{"architectures", {c.architecture}},
            {"model_type", qwen2 ? "qwen2" : "llama"},
            {"hidden_size", c.hidden_size},
            {"intermediate_size", c.intermediate_size},
            {"num_hidden_layers", c.num_layers},
            {"num_attention_heads", c.num_heads},
            {"num_key_value_heads", c.num_kv_heads},
            {"head_dim", c.head_dim},
            {"vocab_size", c.vocab_size},
            {"max_position_embeddings", c.max_position_embeddings},
            {"rope_theta", c.rope_theta},
            {"rms_norm_eps", c.rms_norm_eps},
            {"tie_word_embeddings", c.tie_word_embeddings},
            {"hidden_act", "silu"},
            {"torch_dtype", "float32"}};
  if (!qwen2) j["attention_bias"] = c.attention_bias;
  if (c.rope_scaling) {
    j["rope_scaling"] = rope_scaling_to_json(*c.rope_scaling);
  } else {
    j["rope_scaling"] = nullptr;
  }
  if (!c.rope_freq_factors.empty()) j["oal_rope_freq_factors"] = c.rope_freq_factors;
  if (c.bos_token_id) j["bos_token_id"] = *c.bos_token_id;
  if (c.eos_token_ids.size() > 1)
    j["eos_token_id"] = c.eos_token_ids;
  else if (c.eos_token_id)
    j["eos_token_id"] = *c.eos_token_id;
  return j;
}

void write_hf_config(const std::filesystem::path& path, const model::ModelConfig& config,
                     const json& extra) {
  json j = hf_config_to_json(config);
  if (extra.is_object())
    for (auto it = extra.begin(); it != extra.end(); ++it) j[it.key()] = it.value();
  io::write_file_atomic(path, j.dump(2) + "\n");
}

}  // namespace oal::formats
