// The engine's continuous batching against the plain reference: every request of a batch
// that runs at once (prompts of different lengths, so rows sit at different positions,
// prefilled in chunks) must produce exactly the tokens generate::generate produces for it
// alone. Greedy decoding on a tiny synthetic model (random weights, labelled so): the
// argmax is compared, and the reference and the batch compute the same fp32 values up
// to GEMM summation order, so ties are not a concern at these logit scales.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "common/temp_dir.h"
#include "common/tiny_model.h"
#include "oal/core/error.h"
#include "oal/fixtures/synthetic_tokenizer.h"
#include "oal/generate/generate.h"
#include "oal/model/transformer.h"
#include "oal/serve/api_error.h"
#include "oal/serve/engine.h"
#include "oal/text/tokenizer.h"

using namespace oal;

namespace {

// All events of one request until done, with a deadline so a hang fails the test.
std::vector<serve::StreamEvent> drain(serve::RequestStream& s) {
  std::vector<serve::StreamEvent> out;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    auto e = s.next(std::chrono::milliseconds(100));
    if (!e) continue;
    out.push_back(*e);
    if (e->done) return out;
  }
  ADD_FAILURE() << "no done event within 60 s";
  return out;
}

// The synthetic byte-level tokenizer (its first 32 ids cover the tiny model's vocab).
std::unique_ptr<text::Tokenizer> tiny_tokenizer() {
  const auto dir = test::make_temp_dir("serve_engine_tok");
  fixtures::write_synthetic_tokenizer(dir, 128);
  return text::load_tokenizer(dir / "tokenizer.json");
}

// The tiny synthetic model (random weights, labelled so) with `context` positions.
model::Transformer tiny_model(int64_t context) {
  model::ModelWeights w = test::tiny_weights(5);
  w.config.max_position_embeddings = context;
  return model::Transformer(w);
}

}  // namespace

// extend_rows against each sequence alone through extend_hidden: decode rows (one token)
// and prompt pieces (several) in the same step, at different positions, on the row path
// (rowwise_decode, the server's) and on the tensor layer.
void expect_extend_rows_equals_alone(bool rowwise) {
  model::Transformer m(test::tiny_weights(3), {.rowwise_decode = rowwise});
  at::NoGradGuard ng;
  // Three sequences at lengths 1, 4 and 7.
  std::vector<model::Transformer::LayerStates> batched, single;
  const std::vector<int64_t> lengths = {1, 4, 7};
  for (int64_t n : lengths) {
    at::Tensor prompt = (at::arange(n, at::kLong) * 5 + n) % 32;
    batched.push_back(m.new_states(1));
    single.push_back(m.new_states(1));
    m.extend_hidden(prompt.view({1, n}), batched.back());
    m.extend_hidden(prompt.view({1, n}), single.back());
  }
  std::vector<model::Transformer::LayerStates*> rows;
  for (auto& s : batched) rows.push_back(&s);
  // Step 0: all decode; step 1: row 1 reads 5 tokens; step 2: rows 0 and 2 read 3 and 2.
  const std::vector<std::vector<int64_t>> counts = {{1, 1, 1}, {1, 5, 1}, {3, 1, 2}};
  for (int step = 0; step < 3; ++step) {
    std::vector<at::Tensor> tokens;
    for (int64_t r = 0; r < 3; ++r)
      tokens.push_back((at::arange(counts[step][r], at::kLong) * 7 + 3 * step + r) % 32);
    at::Tensor h = m.extend_rows(tokens, rows);
    ASSERT_EQ(h.sizes(), (at::IntArrayRef{3, 16}));
    for (int64_t r = 0; r < 3; ++r) {
      const int64_t n = counts[step][r];
      at::Tensor ref = m.extend_hidden(tokens[r].view({1, n}), single[r]).select(1, n - 1).view({16});
      // Same operations on the same rows; the GEMM's blocking over the ΣT rows, and on the
      // row path its fp64 norm against the tensor layer's, change fp32 rounding only.
      EXPECT_TRUE(at::allclose(h[r], ref, 1e-5, 1e-5)) << "row " << r << " step " << step;
    }
  }
  EXPECT_EQ(batched[2][0]->tokens(), 7 + 1 + 1 + 2);
  EXPECT_EQ(batched[1][0]->tokens(), 4 + 1 + 5 + 1);
  // A row whose layer states disagree on their length is refused, and so are an empty
  // row and a count mismatch.
  auto bad = m.new_states(1);
  std::vector<model::Transformer::LayerStates*> mixed = {&bad};
  m.extend_hidden(at::zeros({1, 2}, at::kLong), single[0]);
  bad[1] = std::move(single[0][1]);
  EXPECT_THROW(m.extend_rows({at::zeros({1}, at::kLong)}, mixed), Error);
  auto fresh = m.new_states(1);
  std::vector<model::Transformer::LayerStates*> one = {&fresh};
  EXPECT_THROW(m.extend_rows({at::zeros({0}, at::kLong)}, one), Error);
  EXPECT_THROW(m.extend_rows({at::zeros({1}, at::kLong), at::zeros({1}, at::kLong)}, one), Error);
}

TEST(ExtendRows, EqualsOneSequenceAtATimeOnTheRowPath) { expect_extend_rows_equals_alone(true); }

TEST(ExtendRows, EqualsOneSequenceAtATimeOnTheTensorLayer) {
  expect_extend_rows_equals_alone(false);
}

TEST(Engine, ConcurrentRequestsMatchGenerateAlone) {
  model::Transformer m = tiny_model(128);
  auto tok = tiny_tokenizer();
  serve::Engine engine(m, *tok, {.max_sequences = 3, .max_queued = 8, .prefill_chunk = 4});
  std::vector<std::vector<int32_t>> prompts = {{1, 2, 3}, {5}, {7, 8, 9, 10, 11, 12, 13, 14, 15}, {2, 2}, {30, 1, 4, 1, 5}};
  std::vector<std::shared_ptr<serve::RequestStream>> streams;
  const int64_t n_new = 12;
  for (const auto& p : prompts) {
    serve::GenerationJob job{.prompt = p, .params = {}, .stop_tokens = {}};
    job.params.max_tokens = n_new;
    job.params.temperature = 0;
    streams.push_back(engine.submit(job));  // 5 requests, 3 slots: two wait in the queue
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    const auto events = drain(*streams[i]);
    ASSERT_FALSE(events.empty());
    const auto& done = events.back();
    EXPECT_EQ(done.finish_reason, "length");
    EXPECT_EQ(done.completion_tokens, n_new);
    EXPECT_EQ(done.prompt_tokens, static_cast<int64_t>(prompts[i].size()));
    std::string text;
    for (const auto& e : events) text += e.text;
    generate::GenerateOptions o;
    o.max_new_tokens = n_new;
    const auto ref = generate::generate(m, prompts[i], o);
    EXPECT_EQ(text, tok->decode(ref.tokens)) << "request " << i;
  }
  const auto s = engine.stats();
  EXPECT_EQ(s.requests_finished, 5);
  EXPECT_EQ(s.active, 0);
  EXPECT_EQ(s.completion_tokens, 5 * n_new);
  EXPECT_GT(s.decode_rows, s.steps);  // some steps advanced several sequences
  // Every prompt token was read by a step, once.
  EXPECT_EQ(s.step_prompt_tokens, 3 + 1 + 9 + 2 + 5);
}

// The prompt budget of a step: 512 when nobody decodes; beside decoding rows, one prompt
// token per running sequence (decoding or reading its prompt), at least 4, at most
// --prefill-chunk.
TEST(Engine, StepPromptBudgetFollowsTheRunningRows) {
  EXPECT_EQ(serve::step_prompt_budget(0, 5, 16), 512);
  EXPECT_EQ(serve::step_prompt_budget(0, 5, 2048), 2048);
  EXPECT_EQ(serve::step_prompt_budget(1, 2, 16), 4);
  EXPECT_EQ(serve::step_prompt_budget(3, 4, 16), 4);
  EXPECT_EQ(serve::step_prompt_budget(1, 16, 16), 16);  // a burst beside one decoding row
  EXPECT_EQ(serve::step_prompt_budget(5, 9, 16), 9);
  EXPECT_EQ(serve::step_prompt_budget(30, 30, 16), 16);
  EXPECT_EQ(serve::step_prompt_budget(3, 3, 2), 2);  // the chunk caps even the floor
  EXPECT_EQ(serve::step_prompt_budget(3, 3, 1), 1);
}

TEST(Engine, StopTokenAndRefusedJobs) {
  model::Transformer m = tiny_model(40);
  auto tok = tiny_tokenizer();
  serve::Engine engine(m, *tok, {.max_sequences = 1, .max_queued = 1, .prefill_chunk = 8});
  // The greedy continuation's first new token after the start that did not occur before
  // it, as a stop token: generation ends exactly there, and the stop token is not sent.
  generate::GenerateOptions o;
  o.max_new_tokens = 10;
  const auto ref = generate::generate(m, {4, 5, 6}, o);
  size_t k = 1;
  while (k < ref.tokens.size() &&
         std::find(ref.tokens.begin(), ref.tokens.begin() + k, ref.tokens[k]) != ref.tokens.begin() + k)
    ++k;
  if (k == ref.tokens.size()) k = 0;  // every later token repeats one: stop at the first
  serve::GenerationJob job{.prompt = {4, 5, 6}, .params = {}, .stop_tokens = {ref.tokens[k]}};
  job.params.max_tokens = 20;
  job.params.temperature = 0;
  const auto ev = drain(*engine.submit(job));
  EXPECT_EQ(ev.back().finish_reason, "stop");
  EXPECT_EQ(ev.back().completion_tokens, static_cast<int64_t>(k + 1));
  std::string text;
  for (const auto& e : ev) text += e.text;
  EXPECT_EQ(text, tok->decode(std::vector<int32_t>(ref.tokens.begin(), ref.tokens.begin() + k)));
  // Prompt + max_tokens beyond the context (40), ids outside the vocabulary, empty prompt.
  job.stop_tokens = {};
  job.params.max_tokens = 38;
  EXPECT_THROW(engine.submit(job), serve::ApiError);
  job.params.max_tokens = 4;
  job.prompt = {1, 99};
  EXPECT_THROW(engine.submit(job), serve::ApiError);
  job.prompt = {};
  EXPECT_THROW(engine.submit(job), serve::ApiError);
}

TEST(Engine, BusyAnswers503AndCancelFreesTheSlot) {
  model::Transformer m = tiny_model(8192);
  auto tok = tiny_tokenizer();
  serve::Engine engine(m, *tok, {.max_sequences = 1, .max_queued = 1, .prefill_chunk = 8});
  // Long generations (8000 tokens, seconds each), so that the first still runs and the
  // second still waits when the third arrives.
  serve::GenerationJob job{.prompt = {1, 2}, .params = {}, .stop_tokens = {}};
  job.params.max_tokens = 8000;
  auto a = engine.submit(job);
  auto b = engine.submit(job);
  try {
    engine.submit(job);
    ADD_FAILURE() << "no 503 with the one slot and the one queue place taken";
  } catch (const serve::ApiError& e) {
    EXPECT_EQ(e.status(), 503);
  }
  // Cancelled requests get no done event; their slots and states are freed.
  a->cancel();
  b->cancel();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while ((engine.stats().requests_cancelled < 2 || engine.stats().active > 0) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(engine.stats().active, 0);
  EXPECT_EQ(engine.stats().queued, 0);
  EXPECT_EQ(engine.stats().state_bytes, 0);
  EXPECT_EQ(engine.stats().requests_cancelled, 2);
}

TEST(Engine, SlotsAreNumberedAndReportTheirSequences) {
  model::Transformer m = tiny_model(8192);
  auto tok = tiny_tokenizer();
  serve::Engine engine(m, *tok, {.max_sequences = 3, .max_queued = 4, .prefill_chunk = 8});
  serve::GenerationJob job{.prompt = {1, 2, 3}, .params = {}, .stop_tokens = {}};
  job.params.max_tokens = 8000;  // long enough to still run while the test looks
  auto a = engine.submit(job);
  job.prompt = {4, 5, 6, 7, 8};
  auto b = engine.submit(job);
  // Wait until both decode (each has generated a token).
  auto wait_for = [&](auto done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!done(engine.stats()) && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return engine.stats();
  };
  serve::EngineStats s = wait_for([](const serve::EngineStats& st) {
    return st.slots.size() == 2 && st.slots[0].generated > 0 && st.slots[1].generated > 0;
  });
  ASSERT_EQ(s.slots.size(), 2u);
  EXPECT_EQ(s.slots[0].slot, 0);
  EXPECT_EQ(s.slots[1].slot, 1);
  EXPECT_EQ(s.slots[0].prompt_tokens, 3);
  EXPECT_EQ(s.slots[1].prompt_tokens, 5);
  int64_t bytes = 0;
  for (const serve::SlotStats& slot : s.slots) {
    EXPECT_FALSE(slot.prefilling);
    // The states hold the prompt and every token fed back (all but the newest one).
    EXPECT_EQ(slot.tokens_held, slot.prompt_tokens + slot.generated - 1) << slot.slot;
    EXPECT_GT(slot.state_bytes, 0);
    bytes += slot.state_bytes;
  }
  EXPECT_EQ(bytes, s.state_bytes);  // the slots add up to the total
  // Slot 0 freed, then a new sequence takes the lowest free slot: 0 again, beside 1.
  a->cancel();
  wait_for([](const serve::EngineStats& st) { return st.slots.size() == 1; });
  auto c = engine.submit(job);
  s = wait_for([](const serve::EngineStats& st) { return st.slots.size() == 2; });
  ASSERT_EQ(s.slots.size(), 2u);
  EXPECT_EQ(s.slots[0].slot, 0);
  EXPECT_EQ(s.slots[1].slot, 1);
  b->cancel();
  c->cancel();
}

// While a sequence decodes, a new prompt is read prefill_chunk tokens per step (so the
// running sequence's tokens keep coming); with none decoding it is read in one step.
TEST(Engine, PromptsAreReadInChunksWhileOthersDecode) {
  model::Transformer m = tiny_model(8192);
  auto tok = tiny_tokenizer();
  serve::Engine engine(m, *tok, {.max_sequences = 2, .max_queued = 2, .prefill_chunk = 4});
  auto run_alone = [&](std::vector<int32_t> prompt) {
    serve::GenerationJob job{.prompt = std::move(prompt), .params = {}, .stop_tokens = {}};
    job.params.max_tokens = 1;
    const int64_t before = engine.stats().steps;
    drain(*engine.submit(job));
    return engine.stats().steps - before;
  };
  std::vector<int32_t> prompt(41);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>(i % 30 + 1);
  // Alone: one step reads the whole prompt (the count may include a step still in
  // flight when it was read).
  EXPECT_LE(run_alone(prompt), 2);
  serve::GenerationJob long_job{.prompt = {1, 2}, .params = {}, .stop_tokens = {}};
  long_job.params.max_tokens = 8000;  // decodes for seconds
  auto a = engine.submit(long_job);
  ASSERT_TRUE(a->next(std::chrono::seconds(20)));  // its first token: it decodes now
  // Beside it: 41 tokens at 4 per step take 11 steps (one may be in flight at each read).
  EXPECT_GE(run_alone(prompt), 9);
  a->cancel();
}

// Shared prefixes: a saved system prompt is continued by several unnamed requests at
// once; each reads only its own part, and each answer equals the unshared one (greedy,
// exactly).
TEST(Engine, ASavedPrefixIsSharedByManyRequests) {
  model::Transformer m = tiny_model(256);
  auto tok = tiny_tokenizer();
  serve::Engine engine(m, *tok, {.max_sequences = 4, .max_queued = 8, .prefill_chunk = 8});
  const std::vector<int32_t> system = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3, 2, 3, 8, 4};
  serve::GenerationJob job{.prompt = system, .params = {}, .stop_tokens = {}};
  job.params.max_tokens = 1;  // the sampled token is not fed: the saved tokens are `system`
  job.params.temperature = 0;
  drain(*engine.submit(job));
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::shared_ptr<serve::RequestStream>> streams;
  for (int32_t u = 0; u < 6; ++u) {
    prompts.push_back(system);
    prompts.back().insert(prompts.back().end(), {10 + u, 20 - u, u + 1});
    job.prompt = prompts.back();
    job.params.max_tokens = 8;
    streams.push_back(engine.submit(job));  // 6 requests, 4 slots: all continue `system`
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    const auto events = drain(*streams[i]);
    ASSERT_FALSE(events.empty());
    EXPECT_EQ(events.back().cached_tokens, static_cast<int64_t>(system.size())) << i;
    std::string text;
    for (const auto& e : events) text += e.text;
    generate::GenerateOptions o;
    o.max_new_tokens = 8;
    EXPECT_EQ(text, tok->decode(generate::generate(m, prompts[i], o).tokens)) << "request " << i;
  }
  const auto s = engine.stats();
  EXPECT_EQ(s.conversations.hits, 6);
  EXPECT_EQ(s.conversations.reused_tokens, 6 * static_cast<int64_t>(system.size()));
  // The system prompt was read once; every request read only its 3 own tokens.
  EXPECT_EQ(s.step_prompt_tokens, static_cast<int64_t>(system.size()) + 6 * 3);
}
