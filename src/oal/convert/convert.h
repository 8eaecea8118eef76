#pragma once
// Converting a model: hybrid attention from a calibration run, and the export of
// converted-model directories (their layout and loader: formats/converted.h).
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "oal/attention/method.h"
#include "oal/attention/windowed/window.h"
#include "oal/model/transformer.h"
#include "oal/model/weights.h"

namespace oal::convert {

// Where the converted layers' kernel parameters start (paper App. F): `initial` = the
// baselines (TaylorShift, Performer, DiJiang, SpectraFormer) start from their own initial
// values (tau 1, theta 0, upstream init; the calibration run's random draws) and are
// optimised jointly with LoRA from there, while OAL and the learned global kernel start
// from their calibration; `calibrated` = every method from its calibration.
enum class KernelInit { initial, calibrated };

// "initial" | "calibrated" ↔ KernelInit; parse throws oal::Error("[convert] ...").
std::string kernel_init_name(KernelInit init);
KernelInit parse_kernel_init(const std::string& name);

// The rule above: true when `method` takes its calibrated parameters under `init`.
bool starts_from_calibration(const std::string& method, KernelInit init);
// True for the exact reference (softmax): nothing to convert or calibrate. Throws
// oal::Error("method") for an unknown name.
bool is_exact_method(const std::string& method);

// The methods of `layers` from a calibration run (validated by
// model::validate_stored_methods: the method, the layers, their shapes and the model
// fingerprint must match the model `weights`): the fitted ones,
// or for a baseline under KernelInit::initial its initial parameters built with the
// run's seed (same random draws as the run). With `trainable`, kernel parameters require
// grad (OAL/global L rebuilt as a trainable leaf; baselines' parameters() switched to
// requires_grad); "softmax" needs no run and returns an empty map. The layers run beside
// the run's window (calibration.json "sinks", "window"); `window`, when set, must equal
// it. The windowed-only method "window" needs no run: without one it is built from
// `window` (W >= 1).
std::map<int64_t, std::shared_ptr<attn::AttentionMethod>> methods_from_calibration(
    const std::filesystem::path& calib_dir, const model::ModelWeights& weights,
    const std::string& method, const std::vector<int64_t>& layers, bool trainable,
    KernelInit init = KernelInit::initial, const attn::Window& window = {});

// Trainable kernel tensors of the model's layers, named "attention.layers.<l>.<j>" (j the
// index in the method's parameters()); only tensors with requires_grad.
std::map<std::string, at::Tensor> kernel_parameters(const model::Transformer& model,
                                                    const std::vector<int64_t>& layers);

// Writes a converted directory (layout above) atomically file by file into `out`
// (created; an existing converted directory there is replaced file by file).
// `weights`: backbone (with any LoRA already merged); `model`: the hybrid model whose
// layers `layers` hold the trained methods; `tokenizer`: file to copy (may be empty).
void export_converted(const std::filesystem::path& out, const model::ModelWeights& weights,
                      const model::Transformer& model, const std::string& method,
                      const std::vector<int64_t>& layers, const std::string& source_model,
                      const std::filesystem::path& tokenizer);

}  // namespace oal::convert
