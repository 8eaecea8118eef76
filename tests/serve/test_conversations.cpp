// Saved conversations: the state file format (round trip; corruption, truncation and a
// foreign model refused), the conversation store (prefix rules, the memory budget, disk,
// restart, a corrupt file), and the engine resuming a conversation after a restart with
// the identical greedy continuation. Tiny synthetic model (random weights, labelled so),
// with one softmax, one OAL and one Performer layer so that a KV cache, the HD state and
// a feature-map state are all saved.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/temp_dir.h"
#include "common/tiny_model.h"
#include "oal/attention/registry.h"
#include "oal/core/error.h"
#include "oal/fixtures/synthetic_tokenizer.h"
#include "oal/generate/generate.h"
#include "oal/model/transformer.h"
#include "oal/serve/conversation_store.h"
#include "oal/serve/engine.h"
#include "oal/serve/state_file.h"
#include "oal/text/tokenizer.h"

using namespace oal;
namespace fs = std::filesystem;

namespace {

// Layer 0 softmax, layer 1 the learned global kernel (an HD state), layer 2 Performer,
// layer 3 the global kernel beside 1 sink and a 2-token window (sinks, ring, HD state).
std::unique_ptr<model::Transformer> mixed_model(int64_t context = 128) {
  model::ModelWeights w = test::tiny_weights(5, 4);
  w.config.max_position_embeddings = context;
  auto m = std::make_unique<model::Transformer>(w);
  const attn::MethodShape shape{.layer = 1, .q_heads = 2, .kv_heads = 1, .head_dim = 8};
  m->set_attention(1, attn::make_method("global", shape, 3, nullptr));
  m->set_attention(2, attn::make_method("performer", {.layer = 2, .q_heads = 2, .kv_heads = 1, .head_dim = 8}, 3, nullptr));
  m->set_attention(3, attn::make_method("global", {.layer = 3, .q_heads = 2, .kv_heads = 1, .head_dim = 8, .window = {1, 2}}, 3, nullptr));
  return m;
}

std::vector<int32_t> ids(std::initializer_list<int32_t> l) { return l; }

// The model's states after reading `tokens`.
serve::Conversation read(const model::Transformer& m, const std::string& id, std::vector<int32_t> tokens) {
  at::NoGradGuard ng;
  serve::Conversation c{.id = id, .tokens = tokens, .states = m.new_states(1)};
  at::Tensor t = at::tensor(std::vector<int64_t>(tokens.begin(), tokens.end()), at::kLong);
  m.extend_hidden(t.view({1, -1}), c.states);
  return c;
}

// Hidden state after feeding `next` to `states` (what a continuation computes).
at::Tensor continue_with(const model::Transformer& m, model::Transformer::LayerStates& states,
                         std::vector<int64_t> next) {
  at::NoGradGuard ng;
  return m.extend_hidden(at::tensor(next, at::kLong).view({1, -1}), states);
}

serve::SavedConversation saved(const serve::Conversation& c) {
  serve::SavedConversation s{.id = c.id, .tokens = c.tokens};
  for (const auto& st : c.states) s.layers.push_back(st->snapshot());
  return s;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

}  // namespace

TEST(StateFile, RoundTripsEveryLayerKind) {
  auto m = mixed_model();
  const auto c = read(*m, "conv-a", ids({1, 2, 3, 4, 5}));
  const std::string id = serve::state_identity(*m);
  const std::string bytes = serve::encode_state_file(saved(c), id);
  const serve::SavedConversation back = serve::decode_state_file(bytes, id);
  EXPECT_EQ(back.id, "conv-a");
  EXPECT_EQ(back.tokens, c.tokens);
  ASSERT_EQ(back.layers.size(), 4u);
  const auto want = saved(c);
  for (size_t l = 0; l < 4; ++l) {
    ASSERT_EQ(back.layers[l].tensors.size(), want.layers[l].tensors.size());
    for (size_t i = 0; i < want.layers[l].tensors.size(); ++i) {
      EXPECT_EQ(back.layers[l].tensors[i].first, want.layers[l].tensors[i].first);
      EXPECT_TRUE(at::equal(back.layers[l].tensors[i].second, want.layers[l].tensors[i].second));
    }
  }
  const auto header = serve::decode_state_header(bytes);
  EXPECT_EQ(header.identity, id);
  EXPECT_EQ(header.tokens, c.tokens);
}

TEST(StateFile, RefusesCorruptTruncatedAndForeignFiles) {
  auto m = mixed_model();
  const std::string id = serve::state_identity(*m);
  const std::string good = serve::encode_state_file(saved(read(*m, "c", ids({3, 1, 4}))), id);
  auto refused = [&](const std::string& bytes, const std::string& identity, const char* what) {
    try {
      serve::decode_state_file(bytes, identity);
      ADD_FAILURE() << "accepted: " << what;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("[state_file]"), std::string::npos) << e.what();
    }
  };
  std::string flipped = good;
  flipped[good.size() / 2] ^= 0x40;  // inside the payload
  refused(flipped, id, "a flipped payload byte");
  refused(good.substr(0, good.size() - 1), id, "the last byte cut");
  refused(good.substr(0, 30), id, "only the start");
  refused("", id, "an empty file");
  refused(good, "another-model", "another identity");
  std::string version = good;
  version[8] = 2;
  refused(version, id, "another version");
  // Ids name files: nothing but [A-Za-z0-9_-].
  serve::SavedConversation bad{.id = "../escape"};
  EXPECT_THROW(serve::encode_state_file(bad, id), Error);
  EXPECT_FALSE(serve::valid_conversation_id(""));
  EXPECT_FALSE(serve::valid_conversation_id(std::string(65, 'a')));
  EXPECT_TRUE(serve::valid_conversation_id("user_42-chat"));
}

TEST(ConversationStore, TakesTheLongestStrictPrefix) {
  auto m = mixed_model();
  serve::ConversationStore store(*m, {.identity = serve::state_identity(*m)});
  store.put(read(*m, "short", ids({1, 2})));
  store.put(read(*m, "long", ids({1, 2, 3, 4})));
  // The prompt equals "long": no logits would be left to compute, so "short" is taken.
  auto c = store.take("", ids({1, 2, 3, 4}));
  ASSERT_TRUE(c);
  EXPECT_EQ(c->id, "short");
  store.put(std::move(*c));
  c = store.take("", ids({1, 2, 3, 4, 9}));
  ASSERT_TRUE(c);
  EXPECT_EQ(c->id, "long");
  EXPECT_EQ(c->states.front()->tokens(), 4);
  // Found by its prefix, "long" was copied, not moved (shared prefixes): it is still
  // there for the next request, untouched by what the first copy reads.
  EXPECT_EQ(store.stats().in_memory, 2);
  const at::Tensor first = continue_with(*m, c->states, {9, 5});
  auto again = store.take("", ids({1, 2, 3, 4, 9}));
  ASSERT_TRUE(again);
  EXPECT_EQ(again->states.front()->tokens(), 4);
  EXPECT_TRUE(at::equal(continue_with(*m, again->states, {9, 5}), first));
  EXPECT_FALSE(store.take("", ids({7, 7, 7})));  // no prefix
  // A named conversation moves into its request; one whose history changed is
  // discarded (it restarts).
  EXPECT_FALSE(store.take("short", ids({1, 5, 6})));
  EXPECT_FALSE(store.take("", ids({1, 2, 3})));
  auto named = store.take("long", ids({1, 2, 3, 4, 8}));
  ASSERT_TRUE(named);
  EXPECT_EQ(store.stats().in_memory, 0);
  EXPECT_EQ(store.stats().hits, 4);
}

TEST(ConversationStore, EvictsToDiskAndRestoresAfterARestart) {
  auto m = mixed_model();
  const auto dir = test::make_temp_dir("store");
  const std::string identity = serve::state_identity(*m);
  const int64_t one = read(*m, "x", ids({1, 2, 3})).bytes();
  {
    // Room for one idle conversation of this size: the older ones go to disk.
    serve::ConversationStore store(*m, {.max_state_memory = one + one / 2, .state_dir = dir, .identity = identity});
    store.put(read(*m, "a", ids({1, 2, 3})));
    store.put(read(*m, "b", ids({4, 5, 6})));
    store.put(read(*m, "c", ids({7, 8, 9})));
    store.enforce_budget(0);
    EXPECT_EQ(store.stats().in_memory, 1);
    EXPECT_EQ(store.stats().on_disk, 2);
    EXPECT_EQ(store.stats().evictions, 2);
    EXPECT_TRUE(fs::exists(dir / "a.state"));
    EXPECT_TRUE(fs::exists(dir / "b.state"));
  }  // no flush: "c" is lost with the process, as after a crash
  serve::ConversationStore store(*m, {.state_dir = dir, .identity = identity});
  EXPECT_EQ(store.stats().on_disk, 2);
  auto a = store.take("", ids({1, 2, 3, 10, 11}));
  ASSERT_TRUE(a);
  EXPECT_EQ(a->id, "a");
  EXPECT_FALSE(fs::exists(dir / "a.state"));  // it lives in memory again
  // The restored states continue exactly as states that never left memory.
  auto ref = read(*m, "a", ids({1, 2, 3}));
  EXPECT_TRUE(at::equal(continue_with(*m, a->states, {10, 11}), continue_with(*m, ref.states, {10, 11})));
  // A corrupt file is refused, set aside, and the conversation starts afresh.
  {
    std::string bytes = slurp(dir / "b.state");
    bytes[bytes.size() - 20] ^= 1;
    test::write_file(dir / "b.state", bytes);
  }
  EXPECT_FALSE(store.take("b", ids({4, 5, 6, 1})));
  EXPECT_EQ(store.stats().restore_failures, 1);
  EXPECT_TRUE(fs::exists(dir / "b.state.corrupt"));
  EXPECT_EQ(store.stats().on_disk, 0);
  // flush() writes what is in memory.
  store.put(std::move(*a));
  store.flush();
  EXPECT_TRUE(fs::exists(dir / "a.state"));
}

TEST(ConversationStore, RefusesStatesOfAnotherModel) {
  auto m = mixed_model();
  const auto dir = test::make_temp_dir("store_foreign");
  {
    serve::ConversationStore store(*m, {.state_dir = dir, .identity = serve::state_identity(*m)});
    store.put(read(*m, "a", ids({1, 2, 3})));
    store.flush();
  }
  // Same weights and methods, but layer 2's Performer draws other random features: its
  // saved state means something else there.
  auto other = mixed_model();
  other->set_attention(2, attn::make_method("performer", {.layer = 2, .q_heads = 2, .kv_heads = 1, .head_dim = 8}, 4, nullptr));
  EXPECT_NE(serve::state_identity(*other), serve::state_identity(*m));
  std::vector<std::string> notices;
  serve::ConversationStore store(*other, {.state_dir = dir, .identity = serve::state_identity(*other)},
                                 [&](const std::string& n) { notices.push_back(n); });
  EXPECT_EQ(store.stats().on_disk, 0);
  ASSERT_EQ(notices.size(), 1u);
  EXPECT_NE(notices[0].find("another model"), std::string::npos) << notices[0];
}

namespace {

std::unique_ptr<text::Tokenizer> tiny_tokenizer() {
  const auto dir = test::make_temp_dir("conv_tok");
  fixtures::write_synthetic_tokenizer(dir, 128);
  return text::load_tokenizer(dir / "tokenizer.json");
}

// One greedy request to its end: the text and the done event.
std::pair<std::string, serve::StreamEvent> run(serve::Engine& e, std::vector<int32_t> prompt,
                                               const std::string& conversation, int64_t n) {
  serve::GenerationJob job{.prompt = std::move(prompt), .params = {}, .stop_tokens = {}};
  job.params.max_tokens = n;
  job.params.temperature = 0;
  job.params.conversation_id = conversation;
  auto s = e.submit(job);
  std::string text;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    auto ev = s->next(std::chrono::milliseconds(100));
    if (!ev) continue;
    text += ev->text;
    if (ev->done) return {text, *ev};
  }
  ADD_FAILURE() << "no done event within 60 s";
  return {};
}

}  // namespace

TEST(Engine, ResumesASavedConversationAfterARestart) {
  auto m = mixed_model();
  auto tok = tiny_tokenizer();
  const std::vector<int32_t> turn1 = {3, 1, 4, 1, 5};
  generate::GenerateOptions o;
  o.max_new_tokens = 6;
  const auto reply =
      generate::generate(*m, turn1, o).tokens;  // what the engine answers (test_engine)
  ASSERT_EQ(reply.size(), 6u);
  // Turn 2: the history (prompt and reply) and a new user turn.
  std::vector<int32_t> turn2 = turn1;
  turn2.insert(turn2.end(), reply.begin(), reply.end());
  turn2.insert(turn2.end(), {9, 2, 6});
  // The states absorbed the prompt and all but the last reply token (sampled, never fed).
  const int64_t saved_tokens = static_cast<int64_t>(turn1.size() + reply.size() - 1);
  serve::EngineOptions opts{.max_sequences = 2, .max_queued = 4, .prefill_chunk = 3};

  std::string uninterrupted;
  {
    serve::Engine e(*m, *tok, opts);
    const auto [t1, d1] = run(e, turn1, "chat-1", 6);
    EXPECT_EQ(d1.conversation_id, "chat-1");
    EXPECT_EQ(d1.cached_tokens, 0);
    // Counted before the done event went out (a client's next /metrics includes it).
    EXPECT_EQ(e.stats().conversations.in_memory, 1);
    EXPECT_EQ(e.stats().requests_finished, 1);
    const auto [t2, d2] = run(e, turn2, "chat-1", 8);
    EXPECT_EQ(d2.cached_tokens, saved_tokens);
    EXPECT_EQ(e.stats().prompt_tokens, static_cast<int64_t>(turn1.size() + turn2.size()) - saved_tokens);
    uninterrupted = t2;
  }
  const auto dir = test::make_temp_dir("engine_restart");
  opts.store.state_dir = dir;
  {
    serve::Engine e(*m, *tok, opts);
    run(e, turn1, "chat-1", 6);
  }  // shutdown writes the conversation
  ASSERT_TRUE(fs::exists(dir / "chat-1.state"));
  {
    serve::Engine e(*m, *tok, opts);
    EXPECT_EQ(e.stats().conversations.on_disk, 1);
    const auto [t2, d2] = run(e, turn2, "chat-1", 8);
    EXPECT_EQ(d2.cached_tokens, saved_tokens);
    EXPECT_EQ(t2, uninterrupted);
  }
  // Without a saved state the whole turn-2 prompt is read: the same greedy answer (the
  // tiny model's logit gaps are far above the fp32 differences of chunked vs stepwise).
  opts.store.state_dir.clear();
  serve::Engine fresh(*m, *tok, opts);
  const auto [t2, d2] = run(fresh, turn2, "", 8);
  EXPECT_EQ(d2.cached_tokens, 0);
  EXPECT_EQ(t2, uninterrupted);
}

// A server killed while saving (kill -9 between write and rename) leaves
// `<id>.state.tmp.<pid>`: the next store over the directory removes it, says so in its
// log, and indexes the complete files as before.
TEST(ConversationStore, HalfWrittenStatesOfAKilledServerAreRemoved) {
  auto m = mixed_model();
  const auto dir = test::make_temp_dir("store_killed");
  const serve::StoreOptions o{.max_state_memory = 0, .state_dir = dir,
                              .identity = serve::state_identity(*m)};
  {
    serve::ConversationStore a(*m, o);
    a.put(read(*m, "x", ids({1, 2, 3})));
    a.enforce_budget(0);
  }
  // pid 2^22 + 1 is above Linux's pid_max limit (2^22): never a running process.
  const auto leftover = dir / "y.state.tmp.4194305";
  std::ofstream(leftover) << "half a state";
  std::vector<std::string> log;
  serve::ConversationStore b(*m, o, [&](const std::string& line) { log.push_back(line); });
  EXPECT_FALSE(std::filesystem::exists(leftover));
  ASSERT_EQ(log.size(), 1u);
  EXPECT_NE(log[0].find("y.state.tmp.4194305"), std::string::npos) << log[0];
  auto x = b.take("x", ids({1, 2, 3, 4}));
  ASSERT_TRUE(x);
  EXPECT_EQ(x->states.front()->tokens(), 3);
}

// Two stores over one directory (two servers): a named conversation written by one after
// the other indexed the directory is still found; one the other took first (its file
// gone) or continued differently (its file changed) restarts without counting a fault,
// and the changed file stays for the prompts it does start.
TEST(ConversationStore, TwoStoresOverOneDirectory) {
  auto m = mixed_model();
  const auto dir = test::make_temp_dir("store_fleet");
  const serve::StoreOptions o{.max_state_memory = 0, .state_dir = dir,
                              .identity = serve::state_identity(*m)};
  serve::ConversationStore a(*m, o), b(*m, o);
  a.put(read(*m, "x", ids({1, 2, 3})));
  a.put(read(*m, "y", ids({4, 5, 6})));
  a.enforce_budget(0);  // budget 0: both written now
  auto x = b.take("x", ids({1, 2, 3, 7}));  // b indexed an empty directory
  ASSERT_TRUE(x);
  EXPECT_EQ(x->states.front()->tokens(), 3);
  EXPECT_FALSE(a.take("x", ids({1, 2, 3, 7})));  // b took it: the file is gone
  // b writes "y" again after continuing it with other tokens: a's index says 4 5 6.
  auto y = b.take("y", ids({4, 5, 6, 8}));
  ASSERT_TRUE(y);
  b.put(read(*m, "y", ids({4, 5, 9, 9})));
  b.enforce_budget(0);
  EXPECT_FALSE(a.take("y", ids({4, 5, 6, 8, 1})));  // the file no longer starts the prompt
  auto y2 = a.take("y", ids({4, 5, 9, 9, 2}));       // b's version, still on disk
  ASSERT_TRUE(y2);
  EXPECT_EQ(y2->states.front()->tokens(), 4);
  EXPECT_EQ(a.stats().restore_failures, 0);
  EXPECT_EQ(b.stats().restore_failures, 0);
}
