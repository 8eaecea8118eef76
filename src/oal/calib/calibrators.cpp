#include "oal/calib/calibrators.h"

#include "oal/attention/baselines/random_draws.h"
#include "oal/attention/method_names.h"
#include "oal/attention/registry.h"
#include "oal/attention/windowed/windowed_attention.h"
#include "oal/calib/calibrate.h"
#include "oal/calib/problems.h"
#include "oal/core/error.h"

namespace oal::calib {
namespace {

int64_t q_heads(const LayerContext& c) { return c.input->data.q_train.size(1); }
int64_t kv_heads(const LayerContext& c) { return c.input->data.k_train.size(1); }
int64_t head_dim(const LayerContext& c) { return c.input->data.q_train.size(3); }
uint64_t seed(const LayerContext& c) { return c.options->seed; }

attn::MethodShape shape(const LayerContext& c) {
  return {c.input->layer, q_heads(c), kv_heads(c), head_dim(c), c.options->window};
}

// c_h of a window-heavy start: the exact part outweighs the kernel by e^8 per key, so
// the fit starts next to the windowed-only method.
constexpr double k_window_heavy_log_scale = -8.0;
// The windowed-only candidate's c_h (attn::k_window_only_log_scale) is kept beside the
// fits: it makes the windowed-only method reachable at any context, which the
// window-heavy start is not (its κ weight, e^-8 per key, grows with the number of keys
// beyond the window).
using attn::k_window_only_log_scale;

// Query head h's tensors (and its KV head's) as a one-head problem.
FitData head_data(const FitData& d, int64_t h) {
  const int64_t kv = h / (d.q_train.size(1) / d.k_train.size(1));
  auto hs = [](const at::Tensor& t, int64_t i) { return t.narrow(1, i, 1).contiguous(); };
  return {hs(d.q_train, h), hs(d.k_train, kv), hs(d.v_train, kv), hs(d.y_train, h),
          hs(d.q_val, h),   hs(d.k_val, kv),   hs(d.v_val, kv),   hs(d.y_val, h)};
}

FitReport report(const FitTask& t, const FitResult& r, bool selected) {
  return {t.method, t.init, t.layer, t.head, r.initial_val, r.best_val, r.best_update,
          r.updates, selected};
}

// One fit over the whole layer (parameters shared by its heads): `problem` built in the
// task, seeded by (layer, salt).
FitTask layer_task(std::string method, std::string init, const LayerContext& c, int64_t salt,
                   std::function<FitProblem()> problem) {
  FitTask t{std::move(method), std::move(init), c.input->layer, -1, [&c, salt, problem] {
    return fit(problem(), c.input->data, c.options->fit,
               attn::derive_seed(seed(c), {c.input->layer, salt}));
  }};
  t.cost = double(q_heads(c));  // evaluates every head of the layer per update
  return t;
}

// A feature-map baseline beside the window, when the run has one: `plain` with c_h from
// the fits (the last parameter of each result, in head order).
std::shared_ptr<attn::AttentionMethod> windowed(const LayerContext& c,
                                                std::shared_ptr<attn::AttentionMethod> plain,
                                                const std::vector<FitResult>& results) {
  if (c.options->window.none()) return plain;
  std::vector<at::Tensor> cs;
  for (const FitResult& r : results) cs.push_back(r.best.back().reshape({-1}));
  return std::make_shared<attn::WindowedAttention>(std::move(plain), c.options->window,
                                                   at::cat(cs).to(at::kFloat));
}

// A method with nothing to fit (softmax, the windowed-only method, Performer's fixed
// draws); beside a window Performer's c_h is fitted, one fit per layer.
class FixedCalibrator : public MethodCalibrator {
 public:
  explicit FixedCalibrator(std::string name) : name_(std::move(name)) {}
  std::vector<FitTask> tasks(const LayerContext& c) const override {
    if (!fits_log_scale(c)) return {};
    return {layer_task(name_, "window-heavy", c, 0xc4, [&c, name = name_] {
      return fixed_feature_problem(plain(name, c), c.options->window, k_window_heavy_log_scale);
    })};
  }
  LayerFit finish(const LayerContext& c, const std::vector<FitTask>& tasks,
                  const std::vector<FitResult>& results) const override {
    if (!fits_log_scale(c)) return {attn::make_method(name_, shape(c), seed(c), nullptr), {}, {}};
    LayerFit lf;
    lf.method = windowed(c, plain(name_, c), results);
    lf.reports.push_back(report(tasks.at(0), results.at(0), true));
    return lf;
  }

 private:
  bool fits_log_scale(const LayerContext& c) const {
    return !c.options->window.none() &&
           attn::method_spec(name_).kind == attn::MethodKind::feature_map;
  }
  // The method without its window (the same seeded draws).
  static std::shared_ptr<attn::FeatureMapMethod> plain(const std::string& name,
                                                      const LayerContext& c) {
    attn::MethodShape s = shape(c);
    s.window = {};
    return std::dynamic_pointer_cast<attn::FeatureMapMethod>(
        attn::make_method(name, s, seed(c), nullptr));
  }
  std::string name_;
};

// OAL and the learned global kernel: three initialisations per query head, the best
// validation MSE kept (calibrate.h says which three).
class QuadraticCalibrator : public MethodCalibrator {
 public:
  // `method`: the registry name reports carry; `grouped`: OAL's groups (else one group).
  QuadraticCalibrator(std::string method, bool grouped)
      : method_(std::move(method)), grouped_(grouped) {}

  std::vector<FitTask> tasks(const LayerContext& c) const override {
    std::vector<FitTask> out;
    const int64_t L = c.input->layer;
    const int n = candidates(c);
    for (int64_t h = 0; h < q_heads(c); ++h)
      for (int i = 0; i < n; ++i)
        out.push_back({method_, names(grouped_, n > 3)[i], L, h, [&c, h, i, g = grouped_] {
                         const QuadraticProblem qp = problem(g, c, h, i);
                         const FitData data = head_data(c.input->data, h);
                         if (i == 3) return scored_unfitted(qp.problem, data);
                         const uint64_t s =
                             attn::derive_seed(seed(c), {c.input->layer, h, i, g ? 0x0b : 0x61});
                         return fit(qp.problem, data, c.options->fit, s);
                       }});
    return out;
  }

  LayerFit finish(const LayerContext& c, const std::vector<FitTask>& tasks,
                  const std::vector<FitResult>& results) const override {
    LayerFit lf;
    const int n = candidates(c);
    for (int64_t h = 0; h < q_heads(c); ++h) {
      int best = 0;
      for (int i = 1; i < n; ++i)
        if (results[n * h + i].best_val < results[n * h + best].best_val) best = i;
      for (int i = 0; i < n; ++i)
        lf.reports.push_back(report(tasks[n * h + i], results[n * h + i], i == best));
      const FitResult& r = results[n * h + best];
      lf.kernels.push_back(problem(grouped_, c, h, best).kernel_from(r.best));
      if (r.best.size() > 1) lf.log_scales.push_back(r.best[1].item<double>());
    }
    lf.method = attn::make_quadratic_method(lf.kernels);
    if (!c.options->window.none()) {
      auto base = std::dynamic_pointer_cast<const attn::QuadraticAttention>(lf.method);
      lf.method = std::make_shared<attn::WindowedAttention>(
          base, c.options->window, at::tensor(lf.log_scales, at::kDouble).to(at::kFloat));
    }
    return lf;
  }

 private:
  // Three fitted starts per head; with a window also the windowed-only candidate, scored
  // on the validation data and kept when no fit beats it.
  static int candidates(const LayerContext& c) { return c.options->window.none() ? 3 : 4; }
  static const char* const* names(bool grouped, bool windowed) {
    static const char* const global[3] = {"taylor", "perturbed-1", "perturbed-2"};
    static const char* const oal[3] = {"global-embedded", "taylor", "global-perturbed"};
    static const char* const oal_w[4] = {"global-embedded", "taylor", "global-perturbed",
                                         "window-only"};
    // Windowed: the global kernel's third start is window-heavy (k_window_heavy_log_scale).
    static const char* const global_w[4] = {"taylor", "perturbed-1", "window-heavy",
                                            "window-only"};
    if (grouped) return windowed ? oal_w : oal;
    return windowed ? global_w : global;
  }
  // The candidate's parameters as they are, scored like a fit's validation.
  static FitResult scored_unfitted(const FitProblem& p, const FitData& data) {
    FitResult r;
    r.initial_val = r.best_val = validation_mse(p, data);
    for (const auto& t : p.params) r.best.push_back(t.detach().clone());
    r.history.push_back({0, r.best_val});
    return r;
  }
  // Start i of head h: the plain problem, or with a window the joint (L, c_h) problem,
  // c_h from the fitted global kernel's (OAL), 0 (Taylor, perturbed), window-heavy, or
  // the windowed-only candidate's (i = 3, with start 0's kernel).
  static QuadraticProblem problem(bool grouped, const LayerContext& c, int64_t h, int i) {
    const attn::Window& w = c.options->window;
    if (w.none()) return quadratic_problem(init(grouped, c, h, i));
    if (i == 3) return windowed_quadratic_problem(init(grouped, c, h, 0), k_window_only_log_scale, w);
    double c0 = 0;
    if (grouped && i != 1) {
      check(c.global_log_scales != nullptr && size_t(h) < c.global_log_scales->size(),
            "calibrate", "windowed OAL starts from the fitted windowed global kernel's c_h");
      c0 = c.global_log_scales->at(h);
    }
    if (!grouped && i == 2) {
      return windowed_quadratic_problem(
          attn::QuadraticKernel::taylor(attn::QuadraticKernel::single_group(head_dim(c))),
          k_window_heavy_log_scale, w);
    }
    return windowed_quadratic_problem(init(grouped, c, h, i), c0, w);
  }
  // Initialisation i of head h. Global: Taylor, then two perturbations of it. OAL: the
  // fitted global embedded into the head's groups, Taylor in the groups, the embedded
  // global perturbed.
  static attn::QuadraticKernel init(bool grouped, const LayerContext& c, int64_t h, int i) {
    const int64_t L = c.input->layer;
    const double sigma = c.options->perturb_sigma;
    if (!grouped) {
      auto k = attn::QuadraticKernel::taylor(attn::QuadraticKernel::single_group(head_dim(c)));
      return i == 0 ? k : k.perturbed(sigma, attn::derive_seed(seed(c), {L, h, i, 0x91}));
    }
    const auto grp = c.groups->at(h).groups();
    if (i == 1) return attn::QuadraticKernel::taylor(grp);
    check(c.global != nullptr, "calibrate", "OAL's initialisation needs the fitted global kernel");
    auto k = attn::QuadraticKernel::embed_global(c.global->at(h), grp);
    return i == 0 ? k : k.perturbed(sigma, attn::derive_seed(seed(c), {L, h, i, 0x0a}));
  }

  std::string method_;
  bool grouped_;
};

// TaylorShift: tau per query head from 1.
class TaylorShiftCalibrator : public MethodCalibrator {
 public:
  std::vector<FitTask> tasks(const LayerContext& c) const override {
    std::vector<FitTask> out;
    for (int64_t h = 0; h < q_heads(c); ++h)
      out.push_back({attn::names::taylorshift, "tau=1", c.input->layer, h, [&c, h] {
        return fit(taylorshift_problem(1.0, head_dim(c), c.options->window,
                                       k_window_heavy_log_scale),
                   head_data(c.input->data, h), c.options->fit,
                   attn::derive_seed(seed(c), {c.input->layer, h, 0x75}));
      }});
    return out;
  }
  LayerFit finish(const LayerContext& c, const std::vector<FitTask>& tasks,
                  const std::vector<FitResult>& results) const override {
    LayerFit lf;
    std::vector<at::Tensor> taus;
    for (size_t h = 0; h < results.size(); ++h) {
      taus.push_back(results[h].best.at(0).reshape({1}));
      lf.reports.push_back(report(tasks[h], results[h], true));
    }
    lf.method = windowed(
        c, std::make_shared<attn::TaylorShiftAttention>(at::cat(taus), kv_heads(c), head_dim(c)),
        results);
    return lf;
  }
};

// DiJiang: theta per query head from 0 over the layer's fixed seeded projection.
class DiJiangCalibrator : public MethodCalibrator {
 public:
  std::vector<FitTask> tasks(const LayerContext& c) const override {
    std::vector<FitTask> out;
    for (int64_t h = 0; h < q_heads(c); ++h)
      out.push_back({attn::names::dijiang, "theta=0", c.input->layer, h, [&c, h] {
        const FitProblem p =
            dijiang_problem(initial(c)->projection(), at::zeros({head_dim(c)}, at::kFloat),
                            c.options->window, k_window_heavy_log_scale);
        return fit(p, head_data(c.input->data, h), c.options->fit,
                   attn::derive_seed(seed(c), {c.input->layer, h, 0xd1}));
      }});
    return out;
  }
  LayerFit finish(const LayerContext& c, const std::vector<FitTask>& tasks,
                  const std::vector<FitResult>& results) const override {
    LayerFit lf;
    std::vector<at::Tensor> thetas;
    for (size_t h = 0; h < results.size(); ++h) {
      thetas.push_back(results[h].best.at(0).reshape({1, head_dim(c)}));
      lf.reports.push_back(report(tasks[h], results[h], true));
    }
    lf.method = windowed(c,
                         std::make_shared<attn::DiJiangAttention>(initial(c)->projection(),
                                                                  at::cat(thetas), kv_heads(c)),
                         results);
    return lf;
  }

 private:
  // The seeded draws are a pure function of (shape, layer, seed): rebuilt where needed.
  static std::shared_ptr<attn::DiJiangAttention> initial(const LayerContext& c) {
    return attn::DiJiangAttention::init(q_heads(c), kv_heads(c), head_dim(c), c.input->layer,
                                        seed(c));
  }
};

// SpectraFormer: B, G, S shared by the layer's heads, one fit per layer.
class SpectraFormerCalibrator : public MethodCalibrator {
 public:
  std::vector<FitTask> tasks(const LayerContext& c) const override {
    return {layer_task(attn::names::spectraformer, "upstream", c, 0x5f, [&c] {
      return spectraformer_problem(*initial(c), c.options->window, k_window_heavy_log_scale);
    })};
  }
  LayerFit finish(const LayerContext& c, const std::vector<FitTask>& tasks,
                  const std::vector<FitResult>& results) const override {
    const auto& b = results.at(0).best;
    LayerFit lf;
    lf.method = windowed(c,
                         std::make_shared<attn::SpectraFormerAttention>(
                             b.at(0).clone(), b.at(1).clone(), b.at(2).clone(),
                             initial(c)->state_dict().at("perm"), q_heads(c), kv_heads(c)),
                         results);
    lf.reports.push_back(report(tasks.at(0), results.at(0), true));
    return lf;
  }

 private:
  static std::shared_ptr<attn::SpectraFormerAttention> initial(const LayerContext& c) {
    return attn::SpectraFormerAttention::init(q_heads(c), kv_heads(c), head_dim(c), c.input->layer,
                                              seed(c));
  }
};

}  // namespace

std::unique_ptr<MethodCalibrator> make_calibrator(const std::string& method) {
  attn::check_method_names({method}, "calibrate");
  switch (attn::method_spec(method).fit) {  // what the registry says the method fits
    case attn::Fit::grouped_kernel:
      return std::make_unique<QuadraticCalibrator>(method, true);
    case attn::Fit::global_kernel:
      return std::make_unique<QuadraticCalibrator>(method, false);
    case attn::Fit::taylorshift_tau:
      return std::make_unique<TaylorShiftCalibrator>();
    case attn::Fit::dijiang_theta:
      return std::make_unique<DiJiangCalibrator>();
    case attn::Fit::spectraformer_fastfood:
      return std::make_unique<SpectraFormerCalibrator>();
    case attn::Fit::none:
      return std::make_unique<FixedCalibrator>(method);
  }
  fail("calibrate", "method '{}' has an unknown fit kind", method);
}

}  // namespace oal::calib
