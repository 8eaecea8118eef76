#include "oal/model/fast_paths.h"

#include <c10/core/GradMode.h>

#include <utility>

#include "oal/model/decode_layer.h"

namespace oal::model {
namespace {

bool same_path(const attn::PathChoice& a, const attn::PathChoice& b) {
  return a.simd == b.simd && a.detail == b.detail && a.reason == b.reason;
}

// Adds `layer` to the entry of (op, path), or a new entry after the others.
void add(std::vector<FastPath>& out, const std::string& op, int64_t layer,
         attn::PathChoice path) {
  for (FastPath& f : out)
    if (f.op == op && same_path(f.path, path)) {
      f.layers.push_back(layer);
      return;
    }
  out.push_back({op, {layer}, std::move(path)});
}

// Entries of different ops with the same layers and path become one ("q_proj, k_proj").
std::vector<FastPath> merge_ops(std::vector<FastPath> in) {
  std::vector<FastPath> out;
  for (FastPath& f : in) {
    bool merged = false;
    for (FastPath& g : out)
      if (g.layers == f.layers && same_path(g.path, f.path)) {
        g.op += ", " + f.op;
        merged = true;
        break;
      }
    if (!merged) out.push_back(std::move(f));
  }
  return out;
}

attn::PathChoice decode_step_path(const Transformer& model, const TransformerLayer& L) {
  if (!model.options().rowwise_decode)
    return {false, "tensor layer", "TransformerOptions::rowwise_decode is off"};
  return attn::path_choice("one pass over rows (decode_layer)", decode_layer_blocker(L));
}

}  // namespace

std::vector<FastPath> fast_paths(const Transformer& model) {
  c10::NoGradGuard inference;
  const bool cpu = model.device().is_cpu();
  const std::string off_cpu = "the model is on " + model.device().str();
  std::vector<FastPath> projections, steps, attention;
  for (int64_t i = 0; i < model.num_layers(); ++i) {
    const TransformerLayer& L = model.layer(i);
    const std::pair<const char*, const Linear*> linears[] = {
        {"q_proj", &L.q_proj},       {"k_proj", &L.k_proj},   {"v_proj", &L.v_proj},
        {"o_proj", &L.o_proj},       {"gate_proj", &L.gate_proj}, {"up_proj", &L.up_proj},
        {"down_proj", &L.down_proj}};
    for (const auto& [name, p] : linears) add(projections, name, i, p->cpu_path());
    add(steps, "decode step", i, decode_step_path(model, L));
    attn::PathChoice a = L.attention->cpu_path();
    if (!cpu) a = {false, a.detail, off_cpu};
    add(attention, "attention", i, std::move(a));
  }
  std::vector<FastPath> out = merge_ops(std::move(projections));
  for (auto* part : {&steps, &attention})
    out.insert(out.end(), std::make_move_iterator(part->begin()),
               std::make_move_iterator(part->end()));
  out.push_back({"lm_head", {}, model.lm_head().cpu_path()});
  return out;
}

}  // namespace oal::model
