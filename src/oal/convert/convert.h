#pragma once
// Converting a model: hybrid attention from a calibration run, converted-model
// directories (export and load).
//
// Converted directory (an HF model directory that `oal ppl` / `oal generate` load):
//   config.json         HF config + "oal_conversion": {"format": "oal-converted",
//                       "version": 1, "method", "layers", "source_model"} (+
//                       "oal_rope_style": "adjacent" for llama2.c-layout models)
//   model.safetensors   backbone weights (LoRA merged into q/k/v/o when adapted)
//   oal_attention/      the converted layers' method parameters as a calibration run
//                       directory (calib/run_dir.h) holding only `method` and `layers`
//   tokenizer file      copied from the source (tokenizer.json, tok512.bin, ...)
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "oal/attention/method.h"
#include "oal/calib/run_dir.h"
#include "oal/model/load.h"
#include "oal/model/transformer.h"
#include "oal/model/weights.h"

namespace oal::convert {

// Checks, before any work, that calibration run `run` can convert `layers` of the model
// `weights` to `method`: the method was calibrated, every layer was calibrated and is
// < num_layers, and each layer's recorded shape (query heads, KV heads, head_dim) equals
// the model's. A "model_fingerprint" in calibration.json (model/fingerprint.h; written
// by `oal calibrate`) must equal the model's. Throws oal::Error("[convert] ...") naming
// the mismatch.
void validate_calibration(const calib::LoadedRun& run, const model::ModelWeights& weights,
                          const std::string& method, const std::vector<int64_t>& layers);

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

// The methods of `layers` from a calibration run (validated as above): the fitted ones,
// or for a baseline under KernelInit::initial its initial parameters built with the
// run's seed (same random draws as the run). With `trainable`, kernel parameters require
// grad (OAL/global L rebuilt as a trainable leaf; baselines' parameters() switched to
// requires_grad); "softmax" needs no run and returns an empty map.
std::map<int64_t, std::shared_ptr<attn::AttentionMethod>> methods_from_calibration(
    const std::filesystem::path& calib_dir, const model::ModelWeights& weights,
    const std::string& method, const std::vector<int64_t>& layers, bool trainable,
    KernelInit init = KernelInit::initial);

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

// True when `path` is a directory whose config.json carries "oal_conversion".
bool is_converted_dir(const std::filesystem::path& path);

// Loads any model path: a converted directory builds its hybrid attention, anything
// else loads as load_model() does. Weights are moved to `device`.
std::unique_ptr<model::Transformer> load_transformer(const std::string& path,
                                                     model::TransformerOptions options = {},
                                                     at::Device device = at::kCPU);

// load_model(path, options) with every float tensor moved to `device` (CPU: unchanged).
model::ModelWeights load_weights_on(const std::string& path, at::Device device,
                                    model::LoadOptions options = {});

}  // namespace oal::convert
