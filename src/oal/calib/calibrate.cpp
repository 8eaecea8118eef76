#include "oal/calib/calibrate.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <memory>

#include "oal/attention/registry.h"
#include "oal/calib/fit_exchange.h"
#include "oal/core/blas_threads.h"
#include "oal/core/error.h"

namespace oal::calib {
namespace {

constexpr std::string_view k_op = "calibrate";

// Runs tasks in parallel batches, reporting progress from the calling thread. Every
// task runs single-threaded (inside the parallel batch, or alone with ATen at one
// thread), so its numbers do not depend on how tasks were batched or spread over ranks.
void run_tasks(const std::vector<const FitTask*>& tasks, std::vector<FitResult*> out,
               const ProgressFn& progress, int64_t& done, int64_t total) {
  const int64_t batch = std::max<int64_t>(1, at::get_num_threads());
  const ScopedSingleThreadBlas one_blas_thread;  // the fits already use every thread
  for (size_t start = 0; start < tasks.size(); start += batch) {
    const int64_t n = std::min<int64_t>(batch, int64_t(tasks.size() - start));
    if (n == 1) {
      const int threads = at::get_num_threads();
      at::set_num_threads(1);
      *out[start] = tasks[start]->run();
      at::set_num_threads(threads);
    } else {
      at::parallel_for(0, n, 1, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) *out[start + i] = tasks[start + i]->run();
      });
    }
    done += n;
    report(progress, done, total, "fits", tasks[start + n - 1]->method);
  }
}

// One method over every layer: its calibrator, contexts, tasks and finished fits.
struct MethodRun {
  std::string name;
  std::unique_ptr<MethodCalibrator> calibrator;
  std::vector<LayerContext> contexts;       // per layer
  std::vector<std::vector<FitTask>> tasks;  // per layer
  std::vector<LayerFit> fits;               // per layer, after finish
};

// The tasks of `runs` in one list (the order every rank agrees on).
std::vector<const FitTask*> stage_tasks(const std::vector<MethodRun*>& runs) {
  std::vector<const FitTask*> all;
  for (auto* r : runs)
    for (const auto& layer : r->tasks)
      for (const auto& t : layer) all.push_back(&t);
  return all;
}

// Which rank runs each task of a stage (fit_exchange.h).
std::vector<int> stage_owners(const std::vector<const FitTask*>& tasks, int ranks) {
  std::vector<double> costs;
  for (const auto* t : tasks) costs.push_back(t->cost);
  return assign_tasks(costs, ranks);
}

// Runs this rank's tasks of `runs`, exchanges the results with the other ranks, then
// finishes every layer of each method (on every rank: later stages start from them).
void run_stage(const std::vector<MethodRun*>& runs, dist::World& world,
               const ProgressFn& progress, int64_t& done, int64_t total) {
  const std::vector<const FitTask*> all = stage_tasks(runs);
  const std::vector<int> owner = stage_owners(all, world.size());
  std::vector<FitResult> results(all.size());
  std::vector<const FitTask*> mine;
  std::vector<FitResult*> slots;
  for (size_t i = 0; i < all.size(); ++i)
    if (owner[i] == world.rank()) {
      mine.push_back(all[i]);
      slots.push_back(&results[i]);
    }
  run_tasks(mine, slots, progress, done, total);
  if (world.size() > 1) {
    std::vector<std::pair<int64_t, const FitResult*>> own;
    for (size_t i = 0; i < all.size(); ++i)
      if (owner[i] == world.rank()) own.emplace_back(int64_t(i), &results[i]);
    const std::vector<std::string> gathered = world.all_gather(pack_results(own));
    for (int r = 0; r < world.size(); ++r) {
      if (r == world.rank()) continue;
      for (auto& [i, f] : unpack_results(gathered[r])) {
        check(i >= 0 && i < int64_t(all.size()) && owner[i] == r, k_op,
              "rank {} sent a result for task {} it does not own", r, i);
        results[i] = std::move(f);
      }
    }
  }
  size_t next = 0;
  for (auto* r : runs)
    for (size_t li = 0; li < r->tasks.size(); ++li) {
      const size_t n = r->tasks[li].size();
      std::vector<FitResult> layer(std::make_move_iterator(results.begin() + next),
                                   std::make_move_iterator(results.begin() + next + n));
      next += n;
      r->fits.push_back(r->calibrator->finish(r->contexts[li], r->tasks[li], layer));
    }
}

}  // namespace

std::vector<std::string> calibration_order(const std::vector<std::string>& requested) {
  std::vector<std::string> order;
  const auto add = [&](const std::string& m) {
    if (std::find(order.begin(), order.end(), m) == order.end()) order.push_back(m);
  };
  for (const auto& m : requested) {
    if (const char* first = attn::method_spec(m).starts_from) add(first);
    add(m);
  }
  return order;
}

CalibrationResult calibrate(const std::vector<LayerFitInput>& inputs,
                            const attn::ModelKernels* groups, const CalibrationOptions& options) {
  options.fit.validate();
  attn::check_method_names(options.methods, k_op);
  options.window.validate(k_op);
  for (const auto& m : options.methods) {
    const attn::MethodKind kind = attn::method_spec(m).kind;
    check(kind != attn::MethodKind::window || options.window.recent >= 1, k_op,
          "method '{}' needs --window W >= 1", m);
  }
  const auto wanted = [&](const std::string& m) {
    return std::find(options.methods.begin(), options.methods.end(), m) != options.methods.end();
  };
  for (const auto& m : options.methods)
    check(attn::method_spec(m).fit != attn::Fit::grouped_kernel || groups, k_op,
          "method '{}' needs a groups file", m);
  for (const auto& in : inputs)
    if (groups)
      check(int64_t(groups->layer(in.layer).size()) == in.data.q_train.size(1), k_op,
            "groups file has {} heads for layer {}, model has {}",
            groups->layer(in.layer).size(), in.layer, in.data.q_train.size(1));

  std::vector<MethodRun> runs;
  for (const auto& name : calibration_order(options.methods)) {
    MethodRun r{name, make_calibrator(name), {}, {}, {}};
    for (const auto& in : inputs)
      r.contexts.push_back({&in, &options, groups ? &groups->layer(in.layer) : nullptr, nullptr});
    runs.push_back(std::move(r));
  }
  // Tasks are listed up front (for the progress total); the ones that build on the
  // global kernel read it when they run, after the first stage.
  for (auto& r : runs)
    for (const auto& c : r.contexts) r.tasks.push_back(r.calibrator->tasks(c));
  // Methods that start from another's fit (registry starts_from) run in the second stage.
  std::vector<MethodRun*> first, second;
  for (auto& r : runs) (attn::method_spec(r.name).starts_from ? second : first).push_back(&r);
  const std::shared_ptr<dist::World> world_ptr =
      options.world ? options.world : dist::single_process();
  dist::World& world = *world_ptr;
  int64_t total = 0, done = 0;  // this rank's fits
  for (const auto* stage : {&first, &second})
    for (int o : stage_owners(stage_tasks(*stage), world.size())) total += o == world.rank();
  run_stage(first, world, options.progress, done, total);
  for (auto* r : second) {
    const std::string from = attn::method_spec(r->name).starts_from;
    const auto base =
        std::find_if(runs.begin(), runs.end(), [&](const MethodRun& b) { return b.name == from; });
    for (size_t li = 0; li < r->contexts.size(); ++li) {
      r->contexts[li].global = &base->fits[li].kernels;
      r->contexts[li].global_log_scales = &base->fits[li].log_scales;
    }
  }
  run_stage(second, world, options.progress, done, total);

  CalibrationResult res;
  for (size_t li = 0; li < inputs.size(); ++li) {
    LayerMethods lm{inputs[li].layer, {}};
    for (auto& r : runs) {
      if (!wanted(r.name)) continue;  // the global kernel fitted only as OAL's start
      lm.methods[r.name] = r.fits[li].method;
      if (attn::method_spec(r.name).kind == attn::MethodKind::quadratic)
        res.kernels[r.name].layers[inputs[li].layer] = r.fits[li].kernels;
    }
    res.layers.push_back(std::move(lm));
  }
  for (const auto& r : runs)
    for (const auto& f : r.fits)
      res.reports.insert(res.reports.end(), f.reports.begin(), f.reports.end());
  for (auto& [name, k] : res.kernels) k.head_dim = inputs[0].data.q_train.size(3);
  return res;
}

}  // namespace oal::calib
