// `oal bench` library (bench/bench.h): the rows a small run produces, what they claim
// (state sizes, FLOP rates), the three output formats, and bad configurations. Speeds
// themselves are not asserted (benchmarks, not timed tests).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "oal/bench/bench.h"
#include "oal/bench/bench_methods.h"
#include "oal/core/error.h"
#include "oal/simd/oal_plan.h"

namespace oal::bench {
namespace {

BenchConfig small_config() {
  BenchConfig c;
  c.methods = {"softmax-flash", "oal", "taylorshift"};
  c.lengths = {32, 64};
  c.dtypes = {at::kFloat};
  c.repeats = 1;
  c.warmup = 0;
  c.decode_steps = 2;
  c.shape.q_heads = 4;
  c.shape.kv_heads = 2;
  c.shape.dim = 16;
  c.shape.value_dim = 16;
  c.shape.chunk = 16;
  c.shape.oal_groups = 3;
  return c;
}

const BenchRow& find(const BenchReport& r, const std::string& method, const std::string& mode,
                     int64_t n) {
  for (const auto& row : r.rows)
    if (row.method == method && row.mode == mode && row.n == n) return row;
  throw std::runtime_error("row not found: " + method + " " + mode + " " + std::to_string(n));
}

TEST(Bench, SmallRunReportsEveryCellWithConsistentSizes) {
  const BenchReport r = run_bench(small_config());
  ASSERT_EQ(r.rows.size(), 12u);  // 3 methods x 2 lengths x (prefill, decode)
  for (const auto& row : r.rows) {
    EXPECT_FALSE(row.skipped) << row.method << " " << row.note;
    EXPECT_GT(row.ms_median, 0.0) << row.method;
    EXPECT_LE(row.ms_min, row.ms_median);
    EXPECT_GE(row.ms_max, row.ms_median);
    // The path each row ran: fp32 CPU inputs take the kernels; baselines are ATen code.
    const std::string want = row.method == "taylorshift" ? "aten" : "simd (";
    EXPECT_EQ(row.note.rfind(want, 0), 0u) << row.method << ": " << row.note;
  }
  // OAL's state is Df x (Dv + 1) fp32 per KV head whatever the context; the softmax KV
  // cache is N x (D + Dv) per KV head and doubles with N.
  const int64_t oal_state = 2 * simd::oal_feature_dim(16) * 17 * 4;
  EXPECT_EQ(find(r, "oal", "decode", 32).state_bytes, oal_state);
  EXPECT_EQ(find(r, "oal", "decode", 64).state_bytes, oal_state);
  EXPECT_GT(find(r, "softmax-flash", "decode", 64).state_bytes,
            find(r, "softmax-flash", "decode", 32).state_bytes);
  // FLOP models exist for the kernels' methods, not for the baselines.
  EXPECT_GT(find(r, "oal", "prefill", 64).gflops, 0.0);
  EXPECT_GT(find(r, "softmax-flash", "prefill", 64).gflops, 0.0);
  EXPECT_EQ(find(r, "taylorshift", "prefill", 64).gflops, 0.0);
  EXPECT_GT(r.gemm_gflops_fp32, 0.0);
  EXPECT_GT(r.gemm_gflops_simd, 0.0);
  // The own-shape GEMM fraction likewise (a positive share of a measured time).
  EXPECT_GT(find(r, "oal", "prefill", 64).own_gemm_fraction, 0.0);
  EXPECT_GT(find(r, "softmax-flash", "prefill", 64).own_gemm_fraction, 0.0);
  EXPECT_EQ(find(r, "taylorshift", "prefill", 64).own_gemm_fraction, 0.0);

  const auto j = nlohmann::json::parse(bench_json(r));
  ASSERT_EQ(j.at("rows").size(), 12u);
  for (const auto& row : j.at("rows"))
    for (const char* key : {"method", "mode", "n", "ms_median", "gflops"})
      EXPECT_TRUE(row.contains(key)) << key;
  EXPECT_TRUE(j.at("gemm_gflops").contains("fp32_kernels"));
  // The evidence behind the GEMM backend rule: four shapes, both backends measured.
  ASSERT_EQ(j.at("gemm_backends").size(), 4u);
  for (const auto& g : j.at("gemm_backends")) {
    EXPECT_GT(g.at("own").get<double>(), 0.0);
    EXPECT_GT(g.at("blas").get<double>(), 0.0);
  }
  EXPECT_EQ(j.at("gemm_backends")[0].at("chosen"), "own") << "flash tiles stay on the own kernel";
  // CSV: "# " provenance lines, then the header and one line per row.
  const std::string csv = bench_csv(r);
  EXPECT_NE(csv.find("\nmethod,mode,dtype,n,"), std::string::npos);
  int data_lines = 0;
  for (size_t at = 0; at < csv.size();) {
    const size_t eol = csv.find('\n', at);
    if (csv.compare(at, 2, "# ") != 0) ++data_lines;
    at = eol == std::string::npos ? csv.size() : eol + 1;
  }
  EXPECT_EQ(data_lines, 13);
  EXPECT_NE(bench_svg(r).find("<svg"), std::string::npos);
  EXPECT_NE(bench_markdown(r).find("| oal | fp32 | 64 |"), std::string::npos);
}

// --interleave: the decode cells of one N stepped in turn. Each method still gets its own
// row with every timed step and its own decoder (state sizes as in a sequential run), and
// the rows say that peak memory was not measured.
TEST(Bench, InterleavedDecodeKeepsOneRowPerMethod) {
  BenchConfig c = small_config();
  c.prefill = false;
  c.decode_steps = 5;
  c.measure_gemm = false;
  const BenchReport seq = run_bench(c);
  c.interleave_decode = true;
  const BenchReport r = run_bench(c);
  ASSERT_EQ(r.rows.size(), 6u);  // 3 methods x 2 lengths
  for (const auto& row : r.rows) {
    EXPECT_EQ(row.mode, "decode");
    EXPECT_EQ(row.samples, 5) << row.method;
    EXPECT_GT(row.ms_median, 0.0) << row.method;
    EXPECT_NE(row.note.find("interleaved (no peak memory)"), std::string::npos) << row.note;
    EXPECT_EQ(row.peak_rss_bytes, 0) << row.method;
    EXPECT_EQ(row.state_bytes, find(seq, row.method, "decode", row.n).state_bytes) << row.method;
  }
  EXPECT_GT(find(r, "softmax-flash", "decode", 64).state_bytes,
            find(r, "softmax-flash", "decode", 32).state_bytes);
}

TEST(Bench, GemmSplitsAddUpToTheFlopModels) {
  // The own-shape reference divides each method's FLOP model among the GEMM shapes its
  // kernel issues; the parts must add up to the whole, at lengths below, at and past a
  // chunk / block, or the fraction would be against the wrong work.
  BenchShape s = small_config().shape;
  for (const char* name : {"softmax-flash", "oal", "global"}) {
    const BenchMethod m = make_bench_method(name, s);
    ASSERT_TRUE(m.prefill_gemms) << name;
    for (int64_t n : {1, 15, 16, 17, 100, 1000}) {
      double sum = 0;
      for (const GemmWork& w : m.prefill_gemms(n)) {
        EXPECT_GT(w.shape.m * w.shape.n * w.shape.k, 0) << name << " " << n;
        sum += w.flops;
      }
      EXPECT_NEAR(sum, m.prefill_flops(n), 1e-9 * m.prefill_flops(n)) << name << " N " << n;
    }
  }
}

TEST(Bench, BadConfigurationsAreErrors) {
  auto expect_bench_error = [](BenchConfig c, const std::string& needle) {
    try {
      run_bench(c);
      ADD_FAILURE() << "expected an error containing " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  BenchConfig c = small_config();
  c.methods = {"flashier"};
  expect_bench_error(c, "unknown method 'flashier'");
  c = small_config();
  c.repeats = 0;
  expect_bench_error(c, "repeats");
  c = small_config();
  c.dtypes = {at::kDouble};
  expect_bench_error(c, "expected bf16 or fp32");
  c = small_config();
  c.shape.kv_heads = 3;  // 4 query heads do not split over 3 KV heads
  expect_bench_error(c, "inconsistent shape");
}


// The FLOP models against their closed forms, worked by hand for the paper's Fig. 3 shape
// (B 1, Hq 14, Hkv 2, d = Dv = 64, chunk 64): the test above only checks that the GEMM
// split adds up to the code's own totals, so a wrong total would pass it. Exact: every
// count is an integer far below 2^53.
TEST(Bench, FlopModelsMatchTheirClosedForms) {
  BenchShape s;
  s.batch = 1, s.q_heads = 14, s.kv_heads = 2, s.dim = 64, s.value_dim = 64, s.chunk = 64;
  // Df = 1 + d + d(d+1)/2 = 1 + 64 + 2080.
  EXPECT_EQ(simd::oal_feature_dim(64), 2145);
  // Causal softmax prefill, N = 128: Hq · N(N+1)/2 pairs · (2d + 2Dv) = 14 · 8256 · 256.
  EXPECT_EQ(softmax_prefill_flops(s, 128), 29589504.0);
  // Softmax decode at context 100: Hq · 100 · 256.
  EXPECT_EQ(softmax_decode_flops(s, 100), 358400.0);
  // OAL decode: 2 · (Hq + Hkv) · Df · (Dv + 1) = 2 · 16 · 2145 · 65.
  EXPECT_EQ(oal_decode_flops(s), 4461600.0);
  // OAL prefill of 100 tokens in chunks of 64 and 36: state 100 · 4,461,600 plus the
  // intra-chunk blocks Hq · (64² + 36²) · (2d + 2(Dv + 1)) = 14 · 5392 · 258.
  const double oal_100 = 446160000.0 + 19475904.0;
  EXPECT_EQ(make_bench_method("oal", s).prefill_flops(100), oal_100);
  EXPECT_EQ(make_bench_method("softmax-flash", s).prefill_flops(128), 29589504.0);
  EXPECT_EQ(make_bench_method("oal", s).decode_flops(100), 4461600.0);
}

}  // namespace
}  // namespace oal::bench

namespace oal::bench {
namespace {

// Train mode: one row per method and length, fp32 only; the methods without a training
// path are listed as skipped; bf16 without fp32 is refused.
TEST(Bench, TrainModeTimesForwardAndBackward) {
  BenchConfig c = small_config();
  c.methods = {"softmax-flash", "oal", "oal+window", "window", "taylorshift"};
  c.dtypes = {at::kBFloat16, at::kFloat};  // bf16 gets no train rows
  c.shape.window = {2, 8};
  c.prefill = c.decode = false;
  c.train = true;
  c.measure_gemm = false;
  c.repeats = 2;
  const BenchReport r = run_bench(c);
  ASSERT_EQ(r.rows.size(), 10u);  // 5 methods x 2 lengths
  for (const auto& row : r.rows) {
    EXPECT_EQ(row.mode, "train");
    EXPECT_EQ(row.dtype, "fp32");
    if (row.method == "taylorshift") {
      EXPECT_TRUE(row.skipped);
      EXPECT_EQ(row.note, "no training path");
      continue;
    }
    EXPECT_FALSE(row.skipped) << row.method;
    EXPECT_EQ(row.samples, 2) << row.method;
    EXPECT_GT(row.ms_median, 0.0) << row.method;
    EXPECT_NEAR(row.tokens_per_s, row.n / (row.ms_median * 1e-3), 1e-6 * row.tokens_per_s);
  }
  c.dtypes = {at::kBFloat16};
  EXPECT_THROW(run_bench(c), Error);
}

// The layer timed in train mode is the prefill's layer with its parameters trainable: the
// same output (fp32, the training kernels and the inference kernels sum in different
// orders: 1e-4), recording a graph, through the pairwise kernel or the chunked form.
TEST(Bench, TrainModeRunsTheSameLayerWithAGraph) {
  BenchShape s = small_config().shape;
  s.window = {2, 8};
  const at::Tensor q = at::randn({1, 4, 40, 16}), k = at::randn({1, 2, 40, 16}),
                   v = at::randn({1, 2, 40, 16});
  for (int64_t from : {int64_t{16}, int64_t{1000}})
    for (const char* name : {"oal", "oal+window", "softmax-flash"}) {
      s.chunked_train_from = from;
      const BenchMethod m = make_bench_method(name, s);
      ASSERT_TRUE(m.train) << name;
      const at::Tensor y = m.train(q.detach().requires_grad_(true), k, v);
      EXPECT_TRUE(y.requires_grad()) << name;
      const at::Tensor ref = m.prefill(q, k, v);
      EXPECT_LT((y.detach() - ref).norm().item<double>() / ref.norm().item<double>(), 1e-4)
          << name << " from " << from;
    }
}

}  // namespace
}  // namespace oal::bench
