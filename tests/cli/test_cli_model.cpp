// The model commands of the built `oal` binary: info, generate, ppl, capture — outputs,
// exit codes and error messages.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "common/shared_data.h"
#include "oal/analysis/capture.h"

namespace fs = std::filesystem;

namespace {

struct CliResult {
  int status = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

// A fresh directory per test and tag ("io" holds the command's captured output, so
// creating it never wipes the test's own input files).
fs::path cli_temp_dir(const std::string& tag = "data") {
  auto d = fs::temp_directory_path() /
           ("oal_cli_model_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name() + "_" + tag);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// Runs `oal <args>` through the shell with `env` ("NAME=value ...") prepended, stdout
// and stderr to files.
CliResult oal_run(const std::string& args, const std::string& env = "") {
  const fs::path dir = cli_temp_dir("io");
  const std::string cmd = env + " '" + OAL_CLI_PATH + "' " + args + " >'" +
                          (dir / "out").string() + "' 2>'" + (dir / "err").string() + "'";
  const int raw = std::system(cmd.c_str());
  CliResult r;
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  r.out = slurp(dir / "out");
  r.err = slurp(dir / "err");
  return r;
}

std::string q(const fs::path& p) { return "'" + p.string() + "'"; }

}  // namespace

TEST(CliModel, HelpForEveryCommand) {
  for (const char* cmd : {"info", "generate", "ppl", "capture"}) {
    const CliResult r = oal_run(std::string(cmd) + " --help");
    EXPECT_EQ(r.status, 0) << cmd;
    EXPECT_NE(r.out.find("--model"), std::string::npos) << cmd;
  }
}

TEST(CliModel, InfoJsonDescribesStories260k) {
  auto model = OAL_REQUIRE_SHARED_FILE("stories260K.bin");
  const CliResult r = oal_run("info --model " + q(model) + " --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("num_layers"), 5);
  EXPECT_EQ(j.at("hidden_size"), 64);
  EXPECT_EQ(j.at("num_kv_heads"), 4);
  EXPECT_EQ(j.at("vocab_size"), 512);
  EXPECT_EQ(j.at("rope_style"), "adjacent");
  EXPECT_NE(j.at("tokenizer").get<std::string>().find("tok512.bin"), std::string::npos);
  const CliResult text = oal_run("info --model " + q(model));
  EXPECT_EQ(text.status, 0);
  EXPECT_NE(text.out.find("layers"), std::string::npos);
}

// `oal synth` writes a loadable HF directory whose config says what --json reported.
TEST(CliModel, SynthWritesALoadableModel) {
  const fs::path dir = cli_temp_dir() / "tiny";
  const CliResult r = oal_run("synth --shape tiny --layers 3 --out " + q(dir) + " --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("layers"), 3);
  EXPECT_EQ(j.at("planted_dims").size(), 3u);
  const CliResult info = oal_run("info --model " + q(dir) + " --json");
  ASSERT_EQ(info.status, 0) << info.err;
  const auto ij = nlohmann::json::parse(info.out);
  EXPECT_EQ(ij.at("num_layers"), 3);
  EXPECT_EQ(ij.at("num_heads"), j.at("heads"));
  EXPECT_EQ(ij.at("head_dim"), j.at("head_dim"));
  const CliResult bad = oal_run("synth --shape huge --out " + q(cli_temp_dir() / "x"));
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.err.find("--shape"), std::string::npos) << bad.err;
}

// `oal synth --gguf` writes the same model as one GGUF file: with f32 matrices it
// tokenizes and generates exactly as the HF directory of the same seed (the tokenizer
// padded to the embedding's rows with unused tokens, as llama.cpp requires); Q8_0
// loads with the same shapes; --shards with --gguf is refused.
TEST(CliModel, SynthGgufIsTheSameModelAsTheDirectory) {
  const fs::path dir = cli_temp_dir();
  const fs::path hf = dir / "tiny", f32 = dir / "tiny-f32.gguf", q8 = dir / "tiny-q8_0.gguf";
  ASSERT_EQ(oal_run("synth --shape tiny --seed 3 --out " + q(hf)).status, 0);
  const CliResult w = oal_run("synth --shape tiny --seed 3 --gguf f32 --out " + q(f32));
  ASSERT_EQ(w.status, 0) << w.err;
  ASSERT_EQ(oal_run("synth --shape tiny --seed 3 --gguf q8_0 --out " + q(q8)).status, 0);
  const std::string text = "The quick brown fox, 12 jumps!";
  const CliResult t_hf = oal_run("tokenize --tokenizer " + q(hf) + " --text " + q(text) + " --ids-only");
  const CliResult t_gguf = oal_run("tokenize --tokenizer " + q(f32) + " --text " + q(text) + " --ids-only");
  ASSERT_EQ(t_hf.status, 0) << t_hf.err;
  ASSERT_EQ(t_gguf.status, 0) << t_gguf.err;
  EXPECT_EQ(t_gguf.out, t_hf.out);
  const std::string gen = " --prompt 'Once upon a time' -n 12 --ignore-eos";
  const CliResult g_hf = oal_run("generate --model " + q(hf) + gen);
  const CliResult g_gguf = oal_run("generate --model " + q(f32) + gen);
  ASSERT_EQ(g_hf.status, 0) << g_hf.err;
  ASSERT_EQ(g_gguf.status, 0) << g_gguf.err;
  EXPECT_EQ(g_gguf.out, g_hf.out);
  const CliResult info = oal_run("info --model " + q(q8) + " --json");
  ASSERT_EQ(info.status, 0) << info.err;
  const auto hf_info = nlohmann::json::parse(oal_run("info --model " + q(hf) + " --json").out);
  const auto q8_info = nlohmann::json::parse(info.out);
  for (const char* k : {"num_layers", "num_heads", "num_kv_heads", "head_dim", "vocab_size"})
    EXPECT_EQ(q8_info.at(k), hf_info.at(k)) << k;
  const CliResult bad = oal_run("synth --gguf q8_0 --shards 2 --out " + q(dir / "x.gguf"));
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.err.find("--shards"), std::string::npos) << bad.err;
  EXPECT_FALSE(fs::exists(dir / "x.gguf"));
}

// `oal info` builds the model with the weight options and reports each op's path: a
// Q8_0 file's projections run the quantized kernels as stored (and its dtypes say Q8_0),
// --weights f32 moves them to the fp32 GEMM, --quant-dot int8 is named.
TEST(CliModel, InfoReportsTheFastPathOfEachOp) {
  const fs::path q8 = cli_temp_dir() / "tiny-q8_0.gguf";
  ASSERT_EQ(oal_run("synth --shape tiny --seed 4 --gguf q8_0 --out " + q(q8)).status, 0);
  auto ops_of = [&](const std::string& options) {
    const CliResult r = oal_run("info --model " + q(q8) + " --json" + options);
    EXPECT_EQ(r.status, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_TRUE(j.at("dtypes").contains("Q8_0")) << j.at("dtypes").dump();
    EXPECT_FALSE(j.at("fast_paths").at("simd_target").get<std::string>().empty());
    return j.at("fast_paths").at("ops");
  };
  const auto stored = ops_of(""), f32 = ops_of(" --weights f32"), int8 = ops_of(" --quant-dot int8");
  ASSERT_FALSE(stored.empty());
  EXPECT_EQ(stored[0].at("op"), "q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj");
  EXPECT_EQ(stored[0].at("path"), "simd");
  EXPECT_TRUE(stored[0].at("reason").is_null());
  EXPECT_EQ(stored[0].at("detail"), "Q8_0 blocks, dequant dot when decoding");
  EXPECT_EQ(int8[0].at("detail"), "Q8_0 blocks, int8 dot when decoding");
  EXPECT_NE(f32[0].at("detail").get<std::string>().find("fp32 GEMM"), std::string::npos);
  const CliResult text = oal_run("info --model " + q(q8));
  EXPECT_NE(text.out.find("fast paths"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("attention"), std::string::npos);
}

TEST(CliModel, GenerateGreedyStreamsTheReference) {
  auto model = OAL_REQUIRE_SHARED_FILE("stories260K.bin");
  OAL_REQUIRE_SHARED_FILE("tok512.bin");
  const CliResult r = oal_run("generate --model " + q(model) + " --prompt 'Once upon a time' -n 60");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out,
            "Once upon a time, there was a little girl named Lily. She loved to play outside in "
            "the park. One day, she saw a big, red ball. She wanted to play with it, but it was "
            "too high.\nLily\n");
  EXPECT_NE(r.err.find("tokens/s"), std::string::npos);
}

TEST(CliModel, GenerateSamplingIsSeeded) {
  auto model = OAL_REQUIRE_SHARED_FILE("stories260K.bin");
  const std::string base = "generate --model " + q(model) + " --prompt 'Once upon a time' -n 30 "
                           "--temp 0.9 --top-p 0.9 --json --ignore-eos ";
  const CliResult a = oal_run(base + "--seed 1"), b = oal_run(base + "--seed 1"), c = oal_run(base + "--seed 2");
  ASSERT_EQ(a.status, 0) << a.err;
  const auto ja = nlohmann::json::parse(a.out), jb = nlohmann::json::parse(b.out),
             jc = nlohmann::json::parse(c.out);
  EXPECT_EQ(ja.at("tokens"), jb.at("tokens"));
  EXPECT_NE(ja.at("tokens"), jc.at("tokens"));
  EXPECT_EQ(ja.at("tokens").size(), 30u);
}

TEST(CliModel, PplMatchesTinyStoriesReference) {
  auto model = OAL_REQUIRE_SHARED_FILE("stories260K.bin");
  auto text = OAL_REQUIRE_SHARED_FILE("tinystories-dev.txt");
  const CliResult r = oal_run("ppl --model " + q(model) + " --text " + q(text) + " --ctx 256 --batch 8 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_NEAR(j.at("ppl").get<double>(), 5.0078, 5.0078e-3);  // within 0.1%
  EXPECT_EQ(j.at("blocks"), 915);
  EXPECT_EQ(j.at("tokens"), 233325);
  EXPECT_NEAR(j.at("nll").get<double>(), 1.610987, 2e-4);
  EXPECT_GT(j.at("ppl_stderr").get<double>(), 0.0);
  EXPECT_GT(j.at("tokens_per_second").get<double>(), 0.0);
}

TEST(CliModel, PplTextOutputAndMaxBlocks) {
  auto model = OAL_REQUIRE_SHARED_FILE("stories260K.bin");
  auto text = OAL_REQUIRE_SHARED_FILE("tinystories-dev.txt");
  const CliResult r = oal_run("ppl --model " + q(model) + " --text " + q(text) + " --ctx 128 --max-blocks 10");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("ppl "), std::string::npos);
  EXPECT_NE(r.out.find(" ± "), std::string::npos);
  EXPECT_NE(r.out.find("1270 targets in 10 blocks"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tokens/s"), std::string::npos);
}

TEST(CliModel, PplErrors) {
  auto model = OAL_REQUIRE_SHARED_FILE("stories260K.bin");
  auto text = OAL_REQUIRE_SHARED_FILE("tinystories-dev.txt");
  const fs::path dir = cli_temp_dir();
  std::ofstream(dir / "empty.txt").close();
  std::ofstream(dir / "short.txt") << "Once upon a time.";
  struct Case { std::string args, needle; };
  for (const Case& c : std::vector<Case>{
           {"--text " + q(dir / "empty.txt") + " --ctx 256", "empty"},
           {"--text " + q(dir / "short.txt") + " --ctx 256", "shorter than one block"},
           {"--text " + q(text) + " --ctx 1024", "max_position_embeddings"},
           {"--text " + q(dir / "missing.txt") + " --ctx 256", "missing.txt"},
       }) {
    const CliResult r = oal_run("ppl --model " + q(model) + " " + c.args);
    EXPECT_EQ(r.status, 1) << c.args;
    EXPECT_EQ(r.err.rfind("error: [", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << r.err;
  }
  const CliResult no_model = oal_run("ppl --model " + q(dir / "nothing.bin") + " --text " + q(text) +
                               " --ctx 256 --tokenizer " + q(oal::test::shared_file("tok512.bin")));
  EXPECT_EQ(no_model.status, 1);
  // Without --tokenizer, a missing model is named as such (not as a missing tokenizer).
  const CliResult missing = oal_run("ppl --model /nonexistent/model --text " + q(text) + " --ctx 256");
  EXPECT_EQ(missing.status, 1);
  EXPECT_EQ(missing.err.rfind("error: [model] /nonexistent/model: no such file or directory", 0), 0u)
      << missing.err;
}

TEST(CliModel, UnknownCommandIsNamed) {
  const CliResult r = oal_run("pll --model x");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("unknown command 'pll'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("ppl"), std::string::npos) << r.err;  // the list names the real ones
  EXPECT_NE(r.err.find("serve"), std::string::npos) << r.err;
}

TEST(CliModel, GenerateErrors) {
  auto model = OAL_REQUIRE_SHARED_FILE("stories260K.bin");
  const CliResult empty = oal_run("generate --model " + q(model) + " --prompt '' -n 5");
  EXPECT_EQ(empty.status, 1);
  EXPECT_NE(empty.err.find("empty --prompt"), std::string::npos) << empty.err;
  const CliResult too_long = oal_run("generate --model " + q(model) + " --prompt 'Hi' -n 600");
  EXPECT_EQ(too_long.status, 1);
  EXPECT_NE(too_long.err.find("max_position_embeddings"), std::string::npos) << too_long.err;
  const fs::path dir = cli_temp_dir();
  fs::copy_file(model, dir / "alone.bin");
  const CliResult no_tok = oal_run("generate --model " + q(dir / "alone.bin") + " --prompt 'Hi' -n 5");
  EXPECT_EQ(no_tok.status, 1);
  EXPECT_NE(no_tok.err.find("--tokenizer"), std::string::npos) << no_tok.err;
  const CliResult bad_p = oal_run("generate --model " + q(model) + " --prompt 'Hi' -n 5 --temp 1 --top-p 2");
  EXPECT_EQ(bad_p.status, 1);
}

TEST(CliModel, GenerateOnTheRealGgufInEveryWeightFormat) {
  // SmolLM2 Q4_1 as stored (default), decoded to fp32, and re-quantized to Q8_0: the
  // first two hold the same weight values (logits within 3e-5,
  // tests/model/test_quantized_weights.cpp), so greedy decoding gives the same text;
  // Q8_0 of the decoded Q4_1 values is another model and only has to run.
  const fs::path model = oal::test::model_cache_file("SmolLM2-135M-Instruct.Q4_1.gguf");
  OAL_REQUIRE_PATH(model, "model file (scripts/fetch-models.sh)");
  const std::string base = "generate --model " + q(model) + " --prompt 'The capital of France is' -n 8";
  const CliResult stored = oal_run(base);
  const CliResult f32 = oal_run(base + " --weights f32");
  const CliResult q8 = oal_run(base + " --weights q8_0");
  ASSERT_EQ(stored.status, 0) << stored.err;
  ASSERT_EQ(f32.status, 0) << f32.err;
  ASSERT_EQ(q8.status, 0) << q8.err;
  EXPECT_EQ(stored.out, f32.out);
  EXPECT_EQ(stored.out.rfind("The capital of France is", 0), 0u) << stored.out;
  EXPECT_GT(q8.out.size(), std::string("The capital of France is").size());
  const CliResult bad = oal_run(base + " --weights q4");
  EXPECT_EQ(bad.status, 105) << bad.err;  // CLI11's status for a failed option check
  EXPECT_NE(bad.err.find("--weights"), std::string::npos) << bad.err;
  // The f16 KV cache: 8 greedy tokens after a 6-token prompt move logits by hundredths
  // (tests/model/test_kv_cache_type.cpp), so it runs and continues the prompt; an
  // unknown cache type is refused by name.
  const CliResult f16 = oal_run(base + " --kv-cache f16");
  ASSERT_EQ(f16.status, 0) << f16.err;
  EXPECT_EQ(f16.out.rfind("The capital of France is", 0), 0u) << f16.out;
  // The q8_0 cache (keys and values rounded per 32 values: logits move by about half a
  // unit, tests/model/test_kv_cache_type.cpp) runs and continues the prompt too.
  const CliResult q8kv = oal_run(base + " --kv-cache q8_0");
  ASSERT_EQ(q8kv.status, 0) << q8kv.err;
  EXPECT_EQ(q8kv.out.rfind("The capital of France is", 0), 0u) << q8kv.out;
  const CliResult bad_kv = oal_run(base + " --kv-cache q4");
  EXPECT_EQ(bad_kv.status, 105) << bad_kv.err;
  EXPECT_NE(bad_kv.err.find("--kv-cache"), std::string::npos) << bad_kv.err;
  // The prompt prefilled two tokens at a time is the same prefill (fp32 summation order
  // aside: tests/model/test_transformer.cpp), so greedy decoding gives the same text.
  const CliResult ub = oal_run(base + " --ubatch 2");
  ASSERT_EQ(ub.status, 0) << ub.err;
  EXPECT_EQ(ub.out, stored.out);
  const CliResult bad_ub = oal_run(base + " --ubatch -3");
  EXPECT_EQ(bad_ub.status, 105) << bad_ub.err;
  EXPECT_NE(bad_ub.err.find("--ubatch"), std::string::npos) << bad_ub.err;
}

TEST(CliModel, QuantDotInt8RunsTheRealModelAndBeatsTheEnvironment) {
  // The int8 route rounds the decode step's activations to 8 bits per 32 values (as
  // llama.cpp does), so greedy text may part from the exact route after a few tokens;
  // the model's answer to the prompt survives it (measured: both say "Paris.").
  const fs::path model = oal::test::model_cache_file("SmolLM2-135M-Instruct.Q4_1.gguf");
  OAL_REQUIRE_PATH(model, "model file (scripts/fetch-models.sh)");
  const std::string base = "generate --model " + q(model) + " --prompt 'The capital of France is' -n 3";
  const CliResult int8 = oal_run(base + " --quant-dot int8");
  ASSERT_EQ(int8.status, 0) << int8.err;
  EXPECT_EQ(int8.out.rfind("The capital of France is Paris", 0), 0u) << int8.out;
  // The flag wins over OAL_QUANT_DOT, and the bench names the route it ran.
  const CliResult b = oal_run(
      "bench --model " + q(model) +
          " --variants softmax --prefill-n '' --n 16 --decode-steps 1 --repeats 1 --warmup 0"
          " --quant-dot int8 --json --quiet",
      "OAL_QUANT_DOT=dequant");
  ASSERT_EQ(b.status, 0) << b.err;
  EXPECT_NE(b.out.find("\"quant_dot\": \"int8\""), std::string::npos) << b.out;
  const CliResult bad = oal_run("version", "OAL_QUANT_DOT=int4");
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.err.find("OAL_QUANT_DOT='int4': expected dequant or int8"), std::string::npos) << bad.err;
}

TEST(CliModel, BenchTrainTimesLoraUpdatesOfEachVariant) {
  auto model = OAL_REQUIRE_SHARED_FILE("stories260K.bin");
  const CliResult r = oal_run("bench --model " + q(model) +
                              " --train --variants softmax,hybrid --sinks 1 --window 4 --n 16,32 --groups 2"
                              " --repeats 1 --warmup 0 --json --quiet");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["rows"].size(), 4u);
  EXPECT_EQ(j["rows"][0]["variant"], "softmax");
  EXPECT_EQ(j["rows"][2]["variant"], "hybrid");
  EXPECT_EQ(j["rows"][3]["ctx"], 32);
  EXPECT_GT(j["rows"][2]["kernel_parameters"].get<int64_t>(), 0);  // L and c_h trained
  EXPECT_EQ(j["window"], "S=1,W=4");
  const CliResult big = oal_run("bench --model " + q(model) + " --train --n 16 --groups 5 --quiet");
  EXPECT_EQ(big.status, 1);
  EXPECT_NE(big.err.find("use --groups 4 or fewer"), std::string::npos) << big.err;
  const CliResult no_model = oal_run("bench --train --quiet");
  EXPECT_EQ(no_model.status, 1);
  EXPECT_NE(no_model.err.find("--train needs --model"), std::string::npos) << no_model.err;
  const CliResult csv = oal_run("bench --model " + q(model) + " --train --format csv --quiet");
  EXPECT_EQ(csv.status, 1);
  EXPECT_NE(csv.err.find("md or json"), std::string::npos) << csv.err;
}

TEST(CliModel, CaptureWritesReadableFile) {
  auto model = OAL_REQUIRE_SHARED_FILE("stories260K.bin");
  auto text = OAL_REQUIRE_SHARED_FILE("tinystories-dev.txt");
  const fs::path out = cli_temp_dir() / "cap.safetensors";
  const CliResult r = oal_run("capture --model " + q(model) + " --text " + q(text) +
                        " --layers 0,2-3 --ctx 64 --blocks 1-3 --out " + q(out));
  ASSERT_EQ(r.status, 0) << r.err;
  const auto c = oal::analysis::read_capture(out);
  EXPECT_EQ(c.metadata.at("layers"), "0,2-3");
  EXPECT_EQ(c.metadata.at("blocks"), "1-3");
  EXPECT_EQ(c.metadata.at("ctx"), "64");
  EXPECT_EQ(c.tokens.sizes(), (std::vector<int64_t>{3, 64}));
  ASSERT_EQ(c.layers.size(), 3u);
  EXPECT_EQ(c.layers.at(2).q.sizes(), (std::vector<int64_t>{3, 8, 64, 8}));
  EXPECT_EQ(c.layers.at(2).k.sizes(), (std::vector<int64_t>{3, 4, 64, 8}));
  EXPECT_EQ(c.layers.at(3).resid.sizes(), (std::vector<int64_t>{3, 64, 64}));
  EXPECT_EQ(c.layers.at(0).wo.sizes(), (std::vector<int64_t>{64, 64}));

  for (const std::string bad : {"--layers 5", "--layers 2-1", "--blocks 5000"}) {
    const std::string args = bad.rfind("--layers", 0) == 0 ? bad + " --blocks 0" : "--layers 0 " + bad;
    const CliResult e = oal_run("capture --model " + q(model) + " --text " + q(text) + " --ctx 64 " +
                          args + " --out " + q(out.string() + ".bad"));
    EXPECT_EQ(e.status, 1) << bad;
    EXPECT_FALSE(fs::exists(out.string() + ".bad")) << bad;
  }
}
