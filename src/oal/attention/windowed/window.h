#pragma once
// Which keys a windowed layer attends exactly (DESIGN.md §1 "Windowed OAL", after
// StreamingLLM's sink tokens and LoLCATs' sliding window): for query position i,
//
//   E_i = { j <= i : j < sinks  or  i - j < recent }      (exact softmax weights)
//   R_i = { j <= i : j not in E_i } = [sinks, i - recent]  (the linear method's kernel)
//
// recent counts the query itself: recent = 1 attends i exactly, recent = 0 only the
// sinks. sinks = recent = 0 is the plain linear method; sinks + recent >= T is softmax.
#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace oal::attn {

struct Window {
  int64_t sinks = 0;   // S: the first S tokens of the sequence
  int64_t recent = 0;  // W: the last W tokens up to and including the query

  // True for S = W = 0 (no exact part: the plain method).
  bool none() const { return sinks == 0 && recent == 0; }
  // Throws oal::Error naming `op` unless 0 <= S, W <= k_max_window.
  void validate(std::string_view op) const;
  // "S=4,W=64" (reports, fingerprints).
  std::string describe() const;
  // Whether key position j is in E_i / R_i of query position i (j <= i assumed).
  bool exact(int64_t i, int64_t j) const { return j < sinks || i - j < recent; }

  bool operator==(const Window&) const = default;
};

// Upper bound on S and on W (a ring of 1M rows per KV head is no longer "constant").
inline constexpr int64_t k_max_window = int64_t(1) << 20;

// Masks of query positions `qpos` [P] (int64) against key positions `kpos` [T] (int64):
// [P, T] bool, true where the key is causal and in E (exact) / in R (linear).
at::Tensor exact_mask(const at::Tensor& qpos, const at::Tensor& kpos, const Window& w);
at::Tensor linear_mask(const at::Tensor& qpos, const at::Tensor& kpos, const Window& w);

}  // namespace oal::attn
