#include "oal/calib/calibrate.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <functional>
#include <mutex>

#include "oal/attention/oal_method.h"
#include "oal/attention/random_draws.h"
#include "oal/calib/method_factory.h"
#include "oal/calib/problems.h"
#include "oal/core/blas_threads.h"
#include "oal/core/error.h"

namespace oal::calib {
namespace {

constexpr std::string_view k_op = "calibrate";

struct Job {
  std::string method;
  std::function<void()> run;
};

// Runs jobs in parallel batches, reporting progress from the calling thread.
void run_jobs(std::vector<Job>& jobs, const ProgressFn& progress, int64_t& done, int64_t total) {
  const int64_t batch = std::max<int64_t>(1, at::get_num_threads());
  const ScopedSingleThreadBlas one_blas_thread;  // the fits already use every thread
  for (size_t start = 0; start < jobs.size(); start += batch) {
    const int64_t n = std::min<int64_t>(batch, int64_t(jobs.size() - start));
    at::parallel_for(0, n, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) jobs[start + i].run();
    });
    done += n;
    report(progress, done, total, "fits", jobs[start + n - 1].method);
  }
}

FitData head_data(const LayerFitInput& in, int64_t h) {
  const int64_t kv = h / (in.q_train.size(1) / in.k_train.size(1));
  auto hs = [](const at::Tensor& t, int64_t i) { return t.narrow(1, i, 1).contiguous(); };
  return {hs(in.q_train, h), hs(in.k_train, kv), hs(in.v_train, kv), hs(in.y_train, h),
          hs(in.q_val, h),   hs(in.k_val, kv),   hs(in.v_val, kv),   hs(in.y_val, h)};
}

FitData layer_data(const LayerFitInput& in) {
  return {in.q_train, in.k_train, in.v_train, in.y_train,
          in.q_val,   in.k_val,   in.v_val,   in.y_val};
}

FitReport make_report(const std::string& method, const std::string& init, int64_t layer,
                      int64_t head, const FitResult& r) {
  return {method, init, layer, head, r.initial_val, r.best_val, r.best_update, r.updates, false};
}

bool wants(const CalibrationOptions& o, const std::string& m) {
  return std::find(o.methods.begin(), o.methods.end(), m) != o.methods.end();
}

// Per-head quadratic candidates: fit each, keep the best validation per head.
struct QuadCandidates {
  std::vector<std::vector<attn::QuadraticKernel>> fitted;  // [head][init]
  std::vector<std::vector<FitReport>> reports;
};

}  // namespace

const std::vector<std::string>& method_names() {
  static const std::vector<std::string> names{"softmax",     "oal",       "global",
                                              "taylorshift", "performer", "dijiang",
                                              "spectraformer"};
  return names;
}

CalibrationResult calibrate(const std::vector<LayerFitInput>& inputs,
                            const attn::ModelKernels* groups, const CalibrationOptions& options) {
  options.fit.validate();
  for (const auto& m : options.methods)
    check(std::find(method_names().begin(), method_names().end(), m) != method_names().end(),
          k_op, "unknown method '{}' (known: softmax, oal, global, taylorshift, performer, "
          "dijiang, spectraformer)", m);
  const bool want_oal = wants(options, "oal");
  check(!want_oal || groups, k_op, "method 'oal' needs a groups file");
  const bool want_global = wants(options, "global") || want_oal;
  const uint64_t seed = options.seed;
  const char* init_names[3] = {"taylor", "perturbed-1", "perturbed-2"};
  const char* oal_init_names[3] = {"global-embedded", "taylor", "global-perturbed"};

  const size_t nl = inputs.size();
  std::vector<QuadCandidates> glob(nl), oal(nl);
  std::vector<std::vector<FitResult>> ts(nl), dj(nl);
  std::vector<FitResult> sf(nl);
  std::vector<std::shared_ptr<attn::DiJiangAttention>> dj_init(nl);
  std::vector<std::shared_ptr<attn::SpectraFormerAttention>> sf_init(nl);
  std::vector<FitProblem> sf_problem(nl);
  std::mutex mu;

  std::vector<Job> phase1, phase2;
  for (size_t li = 0; li < nl; ++li) {
    const auto& in = inputs[li];
    const int64_t L = in.layer, Hq = in.q_train.size(1), Hkv = in.k_train.size(1),
                  D = in.q_train.size(3);
    if (groups) check(int64_t(groups->layer(L).size()) == Hq, k_op,
                      "groups file has {} heads for layer {}, model has {}",
                      groups->layer(L).size(), L, Hq);
    glob[li].fitted.assign(Hq, std::vector<attn::QuadraticKernel>(3, attn::QuadraticKernel::taylor(attn::QuadraticKernel::single_group(D))));
    glob[li].reports.assign(Hq, std::vector<FitReport>(3));
    oal[li] = glob[li];
    ts[li].resize(Hq);
    dj[li].resize(Hq);
    for (int64_t h = 0; h < Hq; ++h) {
      if (want_global)
        for (int i = 0; i < 3; ++i)
          phase1.push_back({"global", [&, li, h, i, D, L] {
            auto init = attn::QuadraticKernel::taylor(attn::QuadraticKernel::single_group(D));
            if (i > 0) init = init.perturbed(options.perturb_sigma, attn::derive_seed(seed, {L, h, i, 0x91}));
            QuadraticProblem qp = quadratic_problem(init);
            FitResult r = fit(qp.problem, head_data(inputs[li], h), options.fit,
                              attn::derive_seed(seed, {L, h, i, 0x61}));
            glob[li].fitted[h][i] = qp.kernel_from(r.best);
            glob[li].reports[h][i] = make_report("global", init_names[i], L, h, r);
          }});
      if (wants(options, "taylorshift"))
        phase1.push_back({"taylorshift", [&, li, h, D, L] {
          FitProblem p = taylorshift_problem(1.0, D);
          ts[li][h] = fit(p, head_data(inputs[li], h), options.fit, attn::derive_seed(seed, {L, h, 0x75}));
        }});
    }
    if (wants(options, "dijiang")) {
      dj_init[li] = attn::DiJiangAttention::init(Hq, Hkv, D, L, seed);
      for (int64_t h = 0; h < Hq; ++h)
        phase1.push_back({"dijiang", [&, li, h, L, D] {
          FitProblem p = dijiang_problem(dj_init[li]->projection(), at::zeros({D}, at::kFloat));
          dj[li][h] = fit(p, head_data(inputs[li], h), options.fit, attn::derive_seed(seed, {L, h, 0xd1}));
        }});
    }
    if (wants(options, "spectraformer")) {
      sf_init[li] = attn::SpectraFormerAttention::init(Hq, Hkv, D, L, seed);
      phase1.push_back({"spectraformer", [&, li, L] {
        sf_problem[li] = spectraformer_problem(*sf_init[li]);
        sf[li] = fit(sf_problem[li], layer_data(inputs[li]), options.fit, attn::derive_seed(seed, {L, 0x5f}));
      }});
    }
  }
  int64_t done = 0;
  const int64_t total = int64_t(phase1.size()) +
                        (want_oal ? 3 * int64_t(nl) * (nl ? inputs[0].q_train.size(1) : 0) : 0);
  run_jobs(phase1, options.progress, done, total);

  CalibrationResult res;
  auto select = [&](QuadCandidates& c, std::vector<attn::QuadraticKernel>& out) {
    for (size_t h = 0; h < c.fitted.size(); ++h) {
      size_t best = 0;
      for (size_t i = 1; i < 3; ++i)
        if (c.reports[h][i].best_val < c.reports[h][best].best_val) best = i;
      c.reports[h][best].selected = true;
      out.push_back(c.fitted[h][best]);
      for (auto& r : c.reports[h]) res.reports.push_back(r);
    }
  };
  std::vector<std::vector<attn::QuadraticKernel>> global_best(nl);
  if (want_global)
    for (size_t li = 0; li < nl; ++li) select(glob[li], global_best[li]);

  if (want_oal) {
    for (size_t li = 0; li < nl; ++li) {
      const int64_t L = inputs[li].layer, Hq = inputs[li].q_train.size(1);
      for (int64_t h = 0; h < Hq; ++h)
        for (int i = 0; i < 3; ++i)
          phase2.push_back({"oal", [&, li, h, i, L] {
            auto grp = groups->layer(L)[h].groups();
            attn::QuadraticKernel init =
                i == 1 ? attn::QuadraticKernel::taylor(grp)
                       : attn::QuadraticKernel::embed_global(global_best[li][h], grp);
            if (i == 2) init = init.perturbed(options.perturb_sigma, attn::derive_seed(seed, {L, h, i, 0x0a}));
            QuadraticProblem qp = quadratic_problem(init);
            FitResult r = fit(qp.problem, head_data(inputs[li], h), options.fit,
                              attn::derive_seed(seed, {L, h, i, 0x0b}));
            oal[li].fitted[h][i] = qp.kernel_from(r.best);
            oal[li].reports[h][i] = make_report("oal", oal_init_names[i], L, h, r);
          }});
    }
    run_jobs(phase2, options.progress, done, total);
  }

  for (size_t li = 0; li < nl; ++li) {
    const auto& in = inputs[li];
    const int64_t L = in.layer, Hq = in.q_train.size(1), Hkv = in.k_train.size(1),
                  D = in.q_train.size(3);
    LayerMethods lm;
    lm.layer = L;
    MethodShape shape{L, Hq, Hkv, D};
    for (const auto& name : options.methods) {
      if (name == "oal") {
        std::vector<attn::QuadraticKernel> best;
        select(oal[li], best);
        res.oal.layers[L] = best;
        lm.methods[name] = make_quadratic_method(best);
      } else if (name == "global") {
        res.global.layers[L] = global_best[li];
        lm.methods[name] = make_quadratic_method(global_best[li]);
      } else if (name == "taylorshift") {
        std::vector<at::Tensor> taus;
        for (int64_t h = 0; h < Hq; ++h) {
          taus.push_back(ts[li][h].best.at(0).reshape({1}));
          auto r = make_report(name, "tau=1", L, h, ts[li][h]);
          r.selected = true;
          res.reports.push_back(r);
        }
        lm.methods[name] = std::make_shared<attn::TaylorShiftAttention>(at::cat(taus), Hkv, D);
      } else if (name == "dijiang") {
        std::vector<at::Tensor> thetas;
        for (int64_t h = 0; h < Hq; ++h) {
          thetas.push_back(dj[li][h].best.at(0).reshape({1, D}));
          auto r = make_report(name, "theta=0", L, h, dj[li][h]);
          r.selected = true;
          res.reports.push_back(r);
        }
        lm.methods[name] = std::make_shared<attn::DiJiangAttention>(dj_init[li]->projection(),
                                                                    at::cat(thetas), Hkv);
      } else if (name == "spectraformer") {
        const auto& b = sf[li].best;
        lm.methods[name] = std::make_shared<attn::SpectraFormerAttention>(
            b.at(0).clone(), b.at(1).clone(), b.at(2).clone(), sf_init[li]->state_dict().at("perm"),
            Hq, Hkv);
        auto r = make_report(name, "upstream", L, -1, sf[li]);
        r.selected = true;
        res.reports.push_back(r);
      } else {
        lm.methods[name] = make_method(name, shape, seed, nullptr);
      }
    }
    res.layers.push_back(std::move(lm));
  }
  if (want_oal && groups) res.oal.head_dim = groups->head_dim;
  if (!inputs.empty()) {
    res.oal.head_dim = res.global.head_dim = inputs[0].q_train.size(3);
  }
  return res;
}

}  // namespace oal::calib
