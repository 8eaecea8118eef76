#include "oal/formats/llama2c.h"

#include <cstring>

#include "oal/core/error.h"
#include "oal/formats/hf_config.h"
#include "oal/formats/weight_layout.h"
#include "oal/io/mapped_file.h"

namespace oal::formats {
namespace {

constexpr std::string_view k_op = "llama2c";
constexpr uint64_t k_header_bytes = 7 * sizeof(int32_t);
// llama2.c's newer exports ("version 1/2") start with this magic instead of a header.
constexpr uint32_t k_export_magic = 0x616b3432;  // "ak42"
// Upper bound on any single header field, and on the float count the header implies
// (the file's byte count must fit in 64 bits; no real checkpoint comes near either).
constexpr int64_t k_max_field = 1 << 24;
constexpr int64_t k_max_floats = int64_t{1} << 60;

Llama2cHeader parse_header(const uint8_t* p) {
  int32_t v[7];
  std::memcpy(v, p, sizeof(v));
  return {v[0], v[1], v[2], v[3], v[4], v[5], v[6]};
}

// Reads the tensors in file order, each a view into the mapping, advancing `offset`.
class Cursor {
 public:
  Cursor(std::shared_ptr<io::MappedFile> f, uint64_t offset) : f_(std::move(f)), off_(offset) {}
  at::Tensor next(const std::vector<int64_t>& shape) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    at::Tensor t = io::view_tensor(f_, off_, at::kFloat, shape);
    off_ += static_cast<uint64_t>(n) * sizeof(float);
    return t;
  }
  void skip_floats(uint64_t n) { off_ += n * sizeof(float); }
  uint64_t offset() const { return off_; }

 private:
  std::shared_ptr<io::MappedFile> f_;
  uint64_t off_;
};

// A per-layer block [L, rows, cols] stored contiguously, split into L tensors.
void read_layers(Cursor& cur, model::ModelWeights& w, int64_t layers, const std::string& suffix,
                 const std::vector<int64_t>& shape) {
  for (int64_t l = 0; l < layers; ++l)
    w.tensors[fmt::format("model.layers.{}.{}", l, suffix)] = cur.next(shape);
}

}  // namespace

uint64_t llama2c_expected_size(const Llama2cHeader& h, const std::string& src) {
  const int64_t vocab = h.vocab_size < 0 ? -static_cast<int64_t>(h.vocab_size) : h.vocab_size;
  for (int64_t v : {int64_t{h.dim}, int64_t{h.hidden_dim}, int64_t{h.n_layers}, int64_t{h.n_heads},
                    int64_t{h.n_kv_heads}, vocab, int64_t{h.seq_len}})
    check(v > 0 && v <= k_max_field, k_op,
          "{}: header (dim {}, hidden {}, layers {}, heads {}, kv_heads {}, vocab {}, seq_len {}) "
          "has a field outside 1..{}: not a llama2.c legacy checkpoint?",
          src, h.dim, h.hidden_dim, h.n_layers, h.n_heads, h.n_kv_heads, h.vocab_size, h.seq_len,
          k_max_field);
  check(h.dim % h.n_heads == 0 && h.n_heads % h.n_kv_heads == 0, k_op,
        "{}: dim {} must be divisible by heads {}, and heads by kv_heads {}", src, h.dim, h.n_heads,
        h.n_kv_heads);
  // Fields up to 2^24 make products up to 2^72 (layers x dim x dim): sum in 128 bits,
  // then bound the total so the byte count and every tensor size fit in 64 bits.
  using wide = __int128;
  const wide d = h.dim, f = h.hidden_dim, L = h.n_layers, hs = d / h.n_heads,
             kv = wide{h.n_kv_heads} * hs;
  check(hs % 2 == 0, k_op, "{}: head_dim {} must be even", src, static_cast<int64_t>(hs));
  wide floats = wide{vocab} * d                     // token embedding
                + L * d                             // rms_att
                + L * d * d                         // wq
                + 2 * L * kv * d                    // wk, wv
                + L * d * d                         // wo
                + L * d                             // rms_ffn
                + 3 * L * f * d                     // w1, w2, w3
                + d                                 // rms_final
                + wide{h.seq_len} * hs;             // legacy RoPE table (cos + sin halves)
  if (h.vocab_size < 0) floats += wide{vocab} * d;  // untied classifier
  check(floats <= k_max_floats, k_op,
        "{}: header (dim {}, hidden {}, layers {}, heads {}, kv_heads {}, vocab {}, seq_len {}) "
        "implies more than 2^60 floats: not a llama2.c legacy checkpoint?",
        src, h.dim, h.hidden_dim, h.n_layers, h.n_heads, h.n_kv_heads, h.vocab_size, h.seq_len);
  return k_header_bytes + static_cast<uint64_t>(floats) * sizeof(float);
}

model::ModelConfig llama2c_config(const Llama2cHeader& h) {
  model::ModelConfig c;
  c.architecture = "LlamaForCausalLM";
  c.hidden_size = h.dim;
  c.intermediate_size = h.hidden_dim;
  c.num_layers = h.n_layers;
  c.num_heads = h.n_heads;
  c.num_kv_heads = h.n_kv_heads;
  c.head_dim = h.dim / h.n_heads;
  c.vocab_size = h.vocab_size < 0 ? -static_cast<int64_t>(h.vocab_size) : h.vocab_size;
  c.max_position_embeddings = h.seq_len;
  c.rope_theta = 10000.0;
  c.rms_norm_eps = 1e-5;
  c.attention_bias = false;
  c.tie_word_embeddings = h.vocab_size > 0;
  c.rope_style = model::RopeStyle::adjacent;
  if (c.vocab_size > 2) {  // llama2.c tokenizer convention: 1 = <s>, 2 = </s>
    c.bos_token_id = 1;
    c.eos_token_id = 2;
    c.eos_token_ids = {2};
  }
  return c;
}

model::ModelWeights load_llama2c(const std::filesystem::path& path) {
  const std::string src = path.string();
  auto file = io::MappedFile::open(path, std::string(k_op));
  check(file->size() >= k_header_bytes, k_op,
        "{}: file has {} bytes, expected at least {} (the 7 x int32 header)", src, file->size(),
        k_header_bytes);
  uint32_t magic = 0;
  std::memcpy(&magic, file->data(), 4);
  check(magic != k_export_magic, k_op,
        "{}: this is a llama2.c 'ak42' export (version 1/2), expected the legacy format "
        "(version 0, as written by export.py --version 0)",
        src);
  const Llama2cHeader h = parse_header(file->data());
  const uint64_t expected = llama2c_expected_size(h, src);
  check(file->size() >= expected, k_op,
        "{}: truncated: the header (dim {}, layers {}, vocab {}) implies {} bytes, file has {}",
        src, h.dim, h.n_layers, h.vocab_size, expected, file->size());
  check(file->size() == expected, k_op,
        "{}: {} trailing bytes after the {} the header implies (not a legacy llama2.c file?)", src,
        file->size() - expected, expected);

  model::ModelWeights w;
  w.config = llama2c_config(h);
  validate_config(w.config, std::string(k_op), src);
  const auto& c = w.config;
  const int64_t d = c.hidden_size, f = c.intermediate_size, L = c.num_layers,
                kv = c.num_kv_heads * c.head_dim;
  Cursor cur(file, k_header_bytes);
  w.tensors["model.embed_tokens.weight"] = cur.next({c.vocab_size, d});
  read_layers(cur, w, L, "input_layernorm.weight", {d});
  read_layers(cur, w, L, "self_attn.q_proj.weight", {d, d});
  read_layers(cur, w, L, "self_attn.k_proj.weight", {kv, d});
  read_layers(cur, w, L, "self_attn.v_proj.weight", {kv, d});
  read_layers(cur, w, L, "self_attn.o_proj.weight", {d, d});
  read_layers(cur, w, L, "post_attention_layernorm.weight", {d});
  read_layers(cur, w, L, "mlp.gate_proj.weight", {f, d});  // w1
  read_layers(cur, w, L, "mlp.down_proj.weight", {d, f});  // w2
  read_layers(cur, w, L, "mlp.up_proj.weight", {f, d});    // w3
  w.tensors["model.norm.weight"] = cur.next({d});
  cur.skip_floats(static_cast<uint64_t>(c.max_position_embeddings * c.head_dim));
  if (!c.tie_word_embeddings) w.tensors["lm_head.weight"] = cur.next({c.vocab_size, d});
  check(cur.offset() == file->size(), k_op, "{}: internal: consumed {} of {} bytes", src,
        cur.offset(), file->size());
  validate_weights(w, src);
  return w;
}

}  // namespace oal::formats
