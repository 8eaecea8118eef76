#include "oal/io/json_file.h"
#include "oal/train/checkpoint.h"

#include <fmt/format.h>

#include <fstream>
#include <set>
#include <sstream>

#include "oal/core/error.h"
#include "oal/io/atomic_file.h"
#include "oal/io/safetensors.h"

namespace oal::train {
namespace fs = std::filesystem;
namespace {

constexpr const char* k_op = "checkpoint";

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  check(in.good(), k_op, "cannot open '{}'", p.string());
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

nlohmann::json read_json(const fs::path& p) { return io::read_json_file(p, k_op); }

void call(const CheckpointFaultHook& hook, std::string_view stage) {
  if (hook) hook(stage);
}

// Deletes step-* directories named by neither pointer, and leftover *.tmp directories.
void prune(const fs::path& run_dir) {
  std::set<fs::path> keep;
  for (const char* which : {"last", "best"})
    if (auto d = checkpoint_dir(run_dir, which)) keep.insert(fs::weakly_canonical(*d));
  const fs::path dir = run_dir / "checkpoints";
  if (!fs::exists(dir)) return;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (!e.is_directory()) continue;
    if (!keep.count(fs::weakly_canonical(e.path()))) fs::remove_all(e.path());
  }
}

}  // namespace

std::optional<fs::path> checkpoint_dir(const fs::path& run_dir, std::string_view which) {
  const fs::path ptr = run_dir / (std::string(which) + ".json");
  if (!fs::exists(ptr)) return std::nullopt;
  const auto j = read_json(ptr);
  check(j.is_object() && j.contains("dir") && j["dir"].is_string(), k_op,
        "'{}' must hold {{\"dir\": ...}}", ptr.string());
  // A checkpoint lives inside the run directory: a relative path without "..".
  const fs::path dir = j["dir"].get<std::string>();
  bool inside = !dir.empty() && dir.is_relative();
  for (const auto& part : dir) inside = inside && part != "..";
  check(inside, k_op, "'{}' names '{}', expected a directory inside the run directory",
        ptr.string(), dir.string());
  return run_dir / dir;
}

void save_checkpoint(const fs::path& run_dir, const Checkpoint& ckpt, bool is_best,
                     double val_nll, const CheckpointFaultHook& hook) {
  check(ckpt.step >= 0, k_op, "step must be >= 0, got {}", ckpt.step);
  const std::string name = fmt::format("step-{:06d}", ckpt.step);
  const fs::path rel = fs::path("checkpoints") / name;
  const fs::path final_dir = run_dir / rel;
  const fs::path tmp = run_dir / "checkpoints" / (name + ".tmp");
  std::error_code ec;
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp, ec);
  check(!ec, k_op, "cannot create '{}': {}", tmp.string(), ec.message());

  std::map<std::string, at::Tensor> cpu;
  for (const auto& [n, t] : ckpt.tensors) cpu[n] = t.detach().to(at::kCPU).contiguous();
  io::write_safetensors(tmp / "trainable.safetensors", cpu, {{"step", std::to_string(ckpt.step)}});
  call(hook, "tensors");
  io::write_file_atomic(tmp / "optimizer.bin", ckpt.optimizer_state);
  call(hook, "optimizer");
  nlohmann::json state = ckpt.state;
  state["step"] = ckpt.step;
  io::write_file_atomic(tmp / "state.json", state.dump(2));
  call(hook, "state");

  fs::remove_all(final_dir, ec);
  fs::rename(tmp, final_dir, ec);
  check(!ec, k_op, "cannot rename '{}' to '{}': {}", tmp.string(), final_dir.string(),
        ec.message());
  call(hook, "renamed");

  nlohmann::json last = {{"dir", rel.generic_string()}, {"step", ckpt.step}};
  io::write_file_atomic(run_dir / "last.json", last.dump(2));
  call(hook, "last");
  if (is_best) {
    nlohmann::json best = {
        {"dir", rel.generic_string()}, {"step", ckpt.step}, {"val_nll", val_nll}};
    io::write_file_atomic(run_dir / "best.json", best.dump(2));
    call(hook, "best");
  }
  prune(run_dir);
}

std::optional<Checkpoint> load_checkpoint(const fs::path& run_dir, std::string_view which) {
  const auto dir = checkpoint_dir(run_dir, which);
  if (!dir) return std::nullopt;
  std::error_code ec;  // the throwing overload fails on e.g. over-long names (fuzz_checkpoint)
  check(fs::is_directory(*dir, ec), k_op, "'{}.json' names '{}', which is not a directory{}",
        which, dir->string(), ec ? " (" + ec.message() + ")" : "");
  Checkpoint c;
  c.state = read_json(*dir / "state.json");
  check(c.state.contains("step") && c.state["step"].is_number_integer(), k_op,
        "'{}' has no integer 'step'", (*dir / "state.json").string());
  c.step = c.state["step"].get<int64_t>();
  const io::SafetensorsFile file = io::read_safetensors(*dir / "trainable.safetensors");
  for (const auto& [n, t] : file.tensors)
    c.tensors[n] = t.clone();  // own the memory, independent of the mapping
  c.optimizer_state = read_all(*dir / "optimizer.bin");
  return c;
}

}  // namespace oal::train
