#include "oal/analysis/capture.h"

#include <set>

#include "oal/core/error.h"
#include "oal/core/ranges.h"
#include "oal/core/tensor_checks.h"
#include "oal/io/safetensors.h"

namespace oal::analysis {
namespace {

constexpr const char* k_op = "capture";
constexpr const char* k_format = "oal-capture";
constexpr const char* k_version = "1";

// Collects per-batch pieces of the requested parts of the chosen layers.
class CaptureObserver : public model::ForwardObserver {
 public:
  explicit CaptureObserver(const CaptureOptions& o)
      : o_(o), wanted_(o.layers.begin(), o.layers.end()) {}
  bool wants(int64_t layer) const override { return wanted_.count(layer) > 0; }
  void attention(int64_t layer, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                 const at::Tensor& head_out) override {
    auto& p = pieces_[layer];
    if (o_.q) p["q"].push_back(q.to(at::kFloat).contiguous().clone());
    if (o_.k) p["k"].push_back(k.to(at::kFloat).contiguous().clone());
    if (o_.v) p["v"].push_back(v.to(at::kFloat).contiguous().clone());
    if (o_.head_out) p["head_out"].push_back(head_out.to(at::kFloat).contiguous().clone());
  }
  void layer_output(int64_t layer, const at::Tensor& x) override {
    if (o_.resid) pieces_[layer]["resid"].push_back(x.to(at::kFloat).contiguous().clone());
  }
  // Concatenates the pieces along the sequence axis.
  at::Tensor joined(int64_t layer, const std::string& part) {
    auto& v = pieces_[layer][part];
    if (v.empty()) return {};
    at::Tensor t = v.size() == 1 ? v[0] : at::cat(v, 0);
    v.clear();
    return t;
  }

 private:
  const CaptureOptions& o_;
  std::set<int64_t> wanted_;
  std::map<int64_t, std::map<std::string, std::vector<at::Tensor>>> pieces_;
};

std::map<std::string, std::string> model_metadata(const model::ModelConfig& c,
                                                  const std::vector<int64_t>& layers,
                                                  const at::Tensor& tokens) {
  return {{"format", k_format},
          {"version", k_version},
          {"architecture", c.architecture},
          {"layers", format_index_list(layers)},
          {"sequences", std::to_string(tokens.size(0))},
          {"seq_len", std::to_string(tokens.size(1))},
          {"hidden_size", std::to_string(c.hidden_size)},
          {"num_heads", std::to_string(c.num_heads)},
          {"num_kv_heads", std::to_string(c.num_kv_heads)},
          {"head_dim", std::to_string(c.head_dim)},
          {"rope_style", c.rope_style == model::RopeStyle::half ? "half" : "adjacent"}};
}

const char* const k_parts[] = {"q", "k", "v", "head_out", "wo", "resid"};

at::Tensor& part_of(LayerCapture& l, const std::string& part) {
  if (part == "q") return l.q;
  if (part == "k") return l.k;
  if (part == "v") return l.v;
  if (part == "head_out") return l.head_out;
  if (part == "wo") return l.wo;
  return l.resid;
}

}  // namespace

Capture capture(const model::Transformer& model, const at::Tensor& tokens,
                const CaptureOptions& o) {
  check_dim(tokens, 2, k_op, "tokens");
  check(tokens.size(0) > 0 && tokens.size(1) > 0, k_op,
        "tokens: expected at least one sequence of at least one token, got {}", shape_str(tokens));
  check(!o.layers.empty(), k_op, "no layers chosen; expected at least one");
  check(o.batch > 0, k_op, "batch must be positive, got {}", o.batch);
  std::set<int64_t> seen;
  for (int64_t l : o.layers) {
    check(l >= 0 && l < model.num_layers(), k_op, "layer {} out of range; expected 0..{}", l,
          model.num_layers() - 1);
    check(seen.insert(l).second, k_op, "layer {} chosen twice", l);
  }
  at::NoGradGuard no_grad;
  CaptureObserver obs(o);
  const int64_t n = tokens.size(0);
  for (int64_t start = 0; start < n; start += o.batch) {
    const int64_t b = std::min(o.batch, n - start);
    model.observe(tokens.narrow(0, start, b), obs);
    report(o.progress, start + b, n, "sequences");
  }
  Capture c;
  c.tokens = tokens.to(at::kLong).contiguous();
  c.metadata = model_metadata(model.config(), o.layers, tokens);
  for (int64_t l : o.layers) {
    LayerCapture& lc = c.layers[l];
    for (const char* part : k_parts) {
      if (std::string(part) == "wo") continue;
      part_of(lc, part) = obs.joined(l, part);
    }
    lc.wo = model.layer(l).o_proj.dense_weight().contiguous().clone();
  }
  return c;
}

void write_capture(const std::filesystem::path& path, const Capture& c) {
  check(c.tokens.defined() && !c.layers.empty(), k_op,
        "{}: nothing captured; expected tokens "
        "and at least one layer",
        path.string());
  std::map<std::string, at::Tensor> tensors{{"tokens", c.tokens}};
  for (const auto& [i, lc] : c.layers) {
    LayerCapture copy = lc;
    for (const char* part : k_parts) {
      const at::Tensor& t = part_of(copy, part);
      if (t.defined()) tensors[fmt::format("layers.{}.{}", i, part)] = t;
    }
  }
  io::write_safetensors(path, tensors, c.metadata);
}

Capture read_capture(const std::filesystem::path& path) {
  io::SafetensorsFile f = io::read_safetensors(path);
  const std::string file = path.string();
  auto meta = [&](const std::string& key) {
    auto it = f.metadata.find(key);
    check(it != f.metadata.end(), k_op,
          "{}: metadata '{}' missing; expected a file written by "
          "oal capture",
          file, key);
    return it->second;
  };
  check(meta("format") == k_format, k_op, "{}: metadata format is '{}', expected '{}'", file,
        meta("format"), k_format);
  check(meta("version") == k_version, k_op, "{}: capture version '{}', this build reads '{}'", file,
        meta("version"), k_version);
  Capture c;
  c.metadata = f.metadata;
  auto tok = f.tensors.find("tokens");
  check(tok != f.tensors.end() && tok->second.dim() == 2, k_op,
        "{}: expected a 2-D 'tokens' tensor", file);
  c.tokens = tok->second;
  const int64_t n = c.tokens.size(0), t = c.tokens.size(1);
  for (int64_t l : parse_index_list(meta("layers"), "capture")) {
    LayerCapture& lc = c.layers[l];
    for (const char* part : k_parts) {
      auto it = f.tensors.find(fmt::format("layers.{}.{}", l, part));
      if (it == f.tensors.end()) continue;
      check(it->second.scalar_type() == at::kFloat, k_op, "{}: layers.{}.{}: expected F32", file, l,
            part);
      part_of(lc, part) = it->second;
    }
    check(lc.wo.defined(), k_op, "{}: layers.{}.wo missing", file, l);
    for (const at::Tensor* x : {&lc.q, &lc.k, &lc.v, &lc.head_out})
      check(!x->defined() || (x->dim() == 4 && x->size(0) == n && x->size(2) == t), k_op,
            "{}: layer {}: expected [{}, H, {}, D] tensors, got {}", file, l, n, t, shape_str(*x));
    check(!lc.resid.defined() ||
              (lc.resid.dim() == 3 && lc.resid.size(0) == n && lc.resid.size(1) == t),
          k_op, "{}: layers.{}.resid: expected [{}, {}, hidden], got {}", file, l, n, t,
          shape_str(lc.resid));
  }
  return c;
}

}  // namespace oal::analysis
