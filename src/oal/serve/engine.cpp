#include "oal/serve/engine.h"

#include <algorithm>
#include <random>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "oal/core/error.h"
#include "oal/generate/decode_loop.h"
#include "oal/serve/api_error.h"
#include "oal/serve/text_stream.h"

namespace oal::serve {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace

void RequestStream::push(StreamEvent e) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    events_.push_back(std::move(e));
  }
  ready_.notify_one();
}

std::optional<StreamEvent> RequestStream::next(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!ready_.wait_for(lock, timeout, [&] { return !events_.empty(); })) return std::nullopt;
  StreamEvent e = std::move(events_.front());
  events_.pop_front();
  return e;
}

// A sequence of the decode loop (its prompt, states, picker and progress), and what the
// server does with it: the client's stream and stop strings, its conversation and slot.
struct Engine::Sequence : generate::DecodeRow {
  GenerationJob job;  // the request (its prompt moved into the row)
  std::shared_ptr<RequestStream> out = std::make_shared<RequestStream>();
  TextStream text;
  std::string conversation_id;
  int64_t slot = -1;    // its slot while active (SlotStats)
  int64_t cached = 0;   // prompt tokens taken from a saved conversation
  int32_t prev = -1;    // the last token, for decode_token

  Sequence(GenerationJob j, generate::SamplerOptions so, int64_t context)
      : generate::DecodeRow(std::move(j.prompt), {},
                            generate::TokenPicker(so, j.stop_tokens, j.params.max_tokens, context)),
        job(std::move(j)), text(job.params.stop) {
    prev = prompt.back();
  }
};

Engine::Engine(const model::Transformer& model, const text::Tokenizer& tokenizer,
               EngineOptions options)
    : model_(model), tokenizer_(tokenizer), options_(options), next_seed_(std::random_device{}()),
      store_(model, options.store, options.log) {
  stats_.conversations = store_.stats();
  check(options.max_sequences > 0 && options.max_queued >= 0 && options.prefill_chunk > 0, "serve",
        "engine options: expected max_sequences > 0, max_queued >= 0, prefill_chunk > 0; got {}, "
        "{}, {}",
        options.max_sequences, options.max_queued, options.prefill_chunk);
  thread_ = std::thread([this] { loop(); });
}

Engine::~Engine() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
  auto fail = [](Sequence& s) {
    s.out->push({.done = true, .finish_reason = "error", .error = "the server is shutting down"});
  };
  for (auto& s : active_) if (!s->finished) fail(*s);
  for (auto& s : pending_) fail(*s);
  store_.flush();
}

int64_t Engine::context_length() const { return model_.config().max_position_embeddings; }

std::shared_ptr<RequestStream> Engine::submit(GenerationJob job) {
  const int64_t n = static_cast<int64_t>(job.prompt.size());
  if (n == 0) throw bad_request("prompt", "the prompt has no tokens");
  const int32_t vocab = model_.config().vocab_size;
  for (int32_t id : job.prompt)
    if (id < 0 || id >= vocab)
      throw bad_request("prompt", "token id {} is outside the vocabulary [0, {})", id, vocab);
  const int64_t ctx = context_length();
  if (!generate::fits_context(n, job.params.max_tokens, ctx))
    throw bad_request(
        "max_tokens",
        "this model's maximum context length is {} tokens; the request needs {} "
        "({} in the prompt, {} for the completion): shorten the prompt or lower max_tokens",
        ctx, n + job.params.max_tokens, n, job.params.max_tokens);
  generate::SamplerOptions so{
      .temperature = job.params.temperature, .top_p = job.params.top_p, .top_k = job.params.top_k};
  std::lock_guard<std::mutex> lock(mutex_);
  // Slots and queue places together: the scheduler may not have admitted earlier
  // submissions yet, so the two are not counted apart.
  if (static_cast<int64_t>(pending_.size()) + stats_.active >=
      options_.max_queued + options_.max_sequences)
    throw ApiError(503, "server_error", "",
                   fmt::format("the server is busy ({} sequences running, {} waiting); retry later",
                               stats_.active, pending_.size()),
                   "server_busy");
  so.seed = job.params.seed.value_or(next_seed_++);
  auto s = std::make_unique<Sequence>(std::move(job), so, ctx);
  auto out = s->out;
  pending_.push_back(std::move(s));
  stats_.queued = static_cast<int64_t>(pending_.size());
  wake_.notify_one();
  return out;
}

EngineStats Engine::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void Engine::loop() {
  at::NoGradGuard no_grad;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (pending_.empty() && active_.empty() && !idle_) {
        // Nothing to do: hand freed state memory back to the system. glibc keeps freed
        // blocks in its per-thread arenas otherwise, so a server's RSS would stay at its
        // busiest level after the load is gone.
        idle_ = true;
#if defined(__GLIBC__)
        malloc_trim(0);
#endif
      }
      wake_.wait(lock, [&] { return stop_ || !pending_.empty() || !active_.empty(); });
      idle_ = false;
      if (stop_) return;
    }
    admit();
    for (auto& s : active_)
      if (!s->finished && s->out->cancelled()) finish(*s, "cancelled");
    step();
    remove_finished();
  }
}

void Engine::admit() {
  std::lock_guard<std::mutex> lock(mutex_);
  while (!pending_.empty() && static_cast<int64_t>(active_.size()) < options_.max_sequences) {
    active_.push_back(std::move(pending_.front()));
    pending_.pop_front();
    active_.back()->slot = free_slot();
    start(*active_.back());
  }
  stats_.active = static_cast<int64_t>(active_.size());
  stats_.queued = static_cast<int64_t>(pending_.size());
}

int64_t Engine::free_slot() const {
  std::vector<bool> used(static_cast<size_t>(options_.max_sequences), false);
  for (const auto& s : active_)
    if (s->slot >= 0) used[static_cast<size_t>(s->slot)] = true;
  return std::find(used.begin(), used.end(), false) - used.begin();
}

void Engine::start(Sequence& s) {
  const std::string& id = s.job.params.conversation_id;
  // A request that named no conversation gets an id of its own even when it continues
  // another's saved prefix: an id names one client's conversation.
  s.conversation_id = id.empty() ? store_.new_id() : id;
  if (auto saved = store_.take(id, s.prompt)) {
    s.fed = std::move(saved->tokens);
    s.states = std::move(saved->states);
    s.cached = s.prefilled = static_cast<int64_t>(s.fed.size());
  } else {
    s.states = model_.new_states(1);
  }
}

// Prompt tokens one step reads when no sequence is decoding (nobody waits for the step):
// llama.cpp's default ubatch, large enough that the weights are read once per 512 tokens.
constexpr int64_t k_idle_prefill = 512;
// The least a step reads of waiting prompts while sequences decode.
constexpr int64_t k_min_shared_prefill = 4;

int64_t step_prompt_budget(int64_t decoding_rows, int64_t running_rows, int64_t prefill_chunk) {
  if (decoding_rows == 0) return std::max(prefill_chunk, k_idle_prefill);
  return std::min(prefill_chunk, std::max(k_min_shared_prefill, running_rows));
}

void Engine::step() {
  // Every decoding sequence reads its next token; sequences still reading their prompts
  // share the step_prompt_budget (engine.h says why it grows with the running rows).
  std::vector<generate::DecodeRow*> rows;
  for (auto& s : active_) rows.push_back(s.get());
  const auto count = [&](auto pred) { return std::count_if(rows.begin(), rows.end(), pred); };
  const int64_t decoding = count([](const generate::DecodeRow* r) { return r->decoding(); });
  const int64_t running = count([](const generate::DecodeRow* r) {
    return r->decoding() || (!r->finished && r->prefilling());
  });
  const generate::StepPlan plan =
      generate::plan_step(rows, step_prompt_budget(decoding, running, options_.prefill_chunk));
  if (plan.rows.empty()) return;
  // Every row of the plan is a Sequence: the rows above are the active sequences.
  auto sequence = [](generate::DecodeRow* row) { return static_cast<Sequence*>(row); };
  const auto t0 = Clock::now();
  double sample_seconds = 0;
  try {
    const generate::StepResult r = generate::run_step(model_, plan);
    const auto t1 = Clock::now();
    for (const generate::StepPick& p : r.picks) take_token(*sequence(p.row), p.pick);
    sample_seconds = r.pick_seconds + seconds_since(t1);
  } catch (const std::exception& e) {
    for (generate::DecodeRow* row : plan.rows)
      if (!row->finished) finish(*sequence(row), "error", e.what());
  }
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.steps += 1;
  stats_.step_seconds += seconds_since(t0);
  stats_.sample_seconds += sample_seconds;
  stats_.decode_rows += plan.decoding;
  stats_.step_prompt_tokens += plan.prompt_tokens;
}

void Engine::take_token(Sequence& s, const generate::TokenPicker::Pick& pick) {
  using generate::EndReason;
  if (pick.end == EndReason::stop) return finish(s, "stop");  // a stop token is not text
  const std::string piece = tokenizer_.decode_token(s.prev, pick.token);
  s.prev = pick.token;
  const std::string text = s.text.push(piece);
  if (!text.empty()) s.out->push({.text = text});
  if (s.text.stopped()) return finish(s, "stop");
  if (pick.end == EndReason::length) return finish(s, "length");
}

void Engine::finish(Sequence& s, const std::string& reason, const std::string& error) {
  s.finished = true;
  // What the states absorbed is consistent after a normal end: keep it for a follow-up.
  const bool normal = reason == "stop" || reason == "length";
  if (normal) {
    store_.put(Conversation{
        .id = s.conversation_id, .tokens = std::move(s.fed), .states = std::move(s.states)});
    // Within the budget before the client hears that it is done: a conversation the
    // budget sends to the state directory is there when the client's next request, to
    // this server or another one over the same directory, asks for it.
    store_.enforce_budget(active_state_bytes());
  }
  s.states.clear();
  {
    // Counted before the client hears that it is done, so that what it asks next
    // (/metrics) already includes this request.
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.conversations = store_.stats();
    if (reason == "cancelled") stats_.requests_cancelled += 1;
    else if (reason == "error") stats_.requests_failed += 1;
    else stats_.requests_finished += 1;
    stats_.prompt_tokens += s.prefilled - s.cached;
    stats_.completion_tokens += s.picker.picked();
  }
  if (reason == "cancelled") return;
  const std::string rest = normal ? s.text.finish() : "";
  if (!rest.empty()) s.out->push({.text = rest});
  s.out->push({.done = true, .finish_reason = reason, .error = error,
               .prompt_tokens = s.prompt_size(),
               .completion_tokens = s.picker.picked(), .cached_tokens = s.cached,
               .conversation_id = normal ? s.conversation_id : ""});
}

int64_t Engine::active_state_bytes() const {
  int64_t bytes = 0;
  for (const auto& s : active_)
    for (const auto& st : s->states) bytes += st->state_bytes();
  return bytes;
}

void Engine::remove_finished() {
  active_.erase(
      std::remove_if(active_.begin(), active_.end(), [](const auto& s) { return s->finished; }),
      active_.end());
  int64_t bytes = 0;
  std::vector<SlotStats> slots;
  for (const auto& s : active_) {
    SlotStats slot{.slot = s->slot,
                   .prefilling = s->prefilling(),
                   .prompt_tokens = s->prompt_size(),
                   .cached_tokens = s->cached,
                   .tokens_held = s->states.empty() ? 0 : s->states.front()->tokens(),
                   .generated = s->picker.picked()};
    for (const auto& st : s->states) slot.state_bytes += st->state_bytes();
    bytes += slot.state_bytes;
    slots.push_back(slot);
  }
  std::sort(slots.begin(), slots.end(),
            [](const SlotStats& a, const SlotStats& b) { return a.slot < b.slot; });
  store_.enforce_budget(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.active = static_cast<int64_t>(active_.size());
  stats_.slots = std::move(slots);
  stats_.state_bytes = bytes;
  stats_.conversations = store_.stats();
}

}  // namespace oal::serve
