#pragma once
// The generation engine behind `oal serve`: one scheduler thread owns the model and
// every active sequence; HTTP threads submit requests and read their events.
//
// Each scheduler iteration (continuous batching):
//   1. admits queued requests while fewer than max_sequences are active;
//   2. runs one batched step (Transformer::extend_rows, the weights read once): every
//      sequence past its prompt reads its next token, and sequences still reading their
//      prompts read up to prefill_chunk prompt tokens between them, first come first
//      served — so a new prompt costs the running sequences one chunk's worth of time
//      per step, never its whole length at once (when no sequence is decoding, nobody
//      waits, and a step reads up to 512 prompt tokens).
// Each sequence keeps its own layer states (a KV cache for softmax layers, the
// constant-size state for OAL layers). A sequence that ends normally leaves them in the
// conversation store (conversation_store.h) under its conversation id; a request that
// continues a saved conversation (same id, or the longest saved token prefix of its
// prompt) starts from those states and reads only the rest of its prompt.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "oal/generate/token_picker.h"
#include "oal/model/transformer.h"
#include "oal/serve/conversation_store.h"
#include "oal/serve/openai_request.h"
#include "oal/text/tokenizer.h"

namespace oal::serve {

// Prompt tokens one step reads (all waiting prompts together) beside `decoding_rows`
// sequences that each read one picked token, of `running_rows` that are decoding or
// reading a prompt: with none decoding, up to 512 (nobody waits for the step); otherwise
// one per running sequence, at least 4 and at most prefill_chunk. A step then carries
// about as many prompt rows as it has sequences, so a token gap stays within about twice
// a decode step, and a burst of new prompts is still read 16 tokens a step at 16
// sequences (measured, docs/serve.md: a fixed 16 gave 4 clients a p99 of 79 ms against
// llama-server's 45; a fixed 4, or one per decoding sequence, cost 16 clients their lead
// in tokens/s: prompts arriving beside few decoding rows were read 4 tokens a step).
int64_t step_prompt_budget(int64_t decoding_rows, int64_t running_rows, int64_t prefill_chunk);

struct EngineOptions {
  int64_t max_sequences = 16;  // decoded at once; > 0
  int64_t max_queued = 64;     // waiting for a slot beyond these → 503; >= 0
  int64_t prefill_chunk = 16;  // most prompt tokens per step while others decode (all
                               // together; step_prompt_budget); > 0
  StoreOptions store{};        // saved conversations: memory budget, state directory
  Log log{};                   // receives notices (state files refused, saves failed)
};

// One generation to run.
struct GenerationJob {
  std::vector<int32_t> prompt;       // non-empty token ids
  GenerationParams params;
  std::vector<int32_t> stop_tokens;  // ids that end the generation (not part of the text)
};

// What a request receives, in order: text pieces, then one event with done = true.
struct StreamEvent {
  std::string text{};          // valid UTF-8, without stop strings
  bool done = false;
  std::string finish_reason{}; // done: "stop" | "length" | "error"
  std::string error{};         // finish_reason "error": what went wrong
  int64_t prompt_tokens = 0, completion_tokens = 0;  // done: usage
  int64_t cached_tokens = 0;       // done: prompt tokens taken from a saved conversation
  std::string conversation_id{};   // done: where this conversation's states are kept
};

// One request's events: written by the scheduler thread, read by an HTTP thread.
class RequestStream {
 public:
  void push(StreamEvent e);
  // The next event, waiting at most `timeout`; nullopt when none came.
  std::optional<StreamEvent> next(std::chrono::milliseconds timeout);
  // The client went away: the scheduler drops the sequence at its next iteration.
  void cancel() { cancelled_ = true; }
  bool cancelled() const { return cancelled_; }

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<StreamEvent> events_;
  std::atomic<bool> cancelled_{false};
};

// One slot's sequence as /metrics shows it: slots are numbered 0..max_sequences-1, a
// new sequence takes the lowest free one, and keeps it until it ends.
struct SlotStats {
  int64_t slot = 0;
  bool prefilling = false;     // still reading its prompt (else: decoding)
  int64_t prompt_tokens = 0;   // its prompt
  int64_t cached_tokens = 0;   // taken from a saved conversation
  int64_t tokens_held = 0;     // in its layer states now
  int64_t generated = 0;       // tokens produced so far
  int64_t state_bytes = 0;     // its layer states
};

struct EngineStats {
  int64_t active = 0, queued = 0;
  std::vector<SlotStats> slots;  // the active sequences, by slot
  int64_t state_bytes = 0;  // all active sequences' layer states
  int64_t requests_finished = 0, requests_cancelled = 0, requests_failed = 0;
  int64_t prompt_tokens = 0, completion_tokens = 0;  // prompt tokens read (not reused), generated
  int64_t steps = 0;               // batched steps (extend_rows calls)
  int64_t decode_rows = 0;         // sequences past their prompt those steps advanced
  int64_t step_prompt_tokens = 0;  // prompt tokens those steps read
  double step_seconds = 0;         // in batched steps: model, logits, picking, streaming
  double sample_seconds = 0;       // of which picking tokens, detokenizing and queueing text
  StoreStats conversations;  // saved conversations (memory, disk, reuse)
};

class Engine {
 public:
  // `model` and `tokenizer` must outlive the engine. Starts the scheduler thread.
  Engine(const model::Transformer& model, const text::Tokenizer& tokenizer, EngineOptions options);
  // Stops the scheduler; requests still running end with an error event; saved
  // conversations still in memory are written to the state directory.
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a job. Throws ApiError 400 for an empty prompt, ids outside the vocabulary or
  // prompt + max_tokens beyond the context; 503 when max_queued requests already wait.
  std::shared_ptr<RequestStream> submit(GenerationJob job);
  EngineStats stats() const;
  // Positions the model can hold (max_position_embeddings).
  int64_t context_length() const;

 private:
  struct Sequence;
  void loop();
  void admit();
  // The lowest slot number no active sequence holds.
  int64_t free_slot() const;
  // One batched step over the active sequences (the class comment's point 2), by the
  // decode loop of generate/decode_loop.h.
  void step();
  // Sends what the token `pick` of `s` produces, and ends `s` where the pick, or the
  // request's stop strings, say so.
  void take_token(Sequence& s, const generate::TokenPicker::Pick& pick);
  void finish(Sequence& s, const std::string& reason, const std::string& error = {});
  void remove_finished();
  // Bytes held by the active sequences' layer states now.
  int64_t active_state_bytes() const;
  // Takes the states for a newly admitted sequence (saved conversation or fresh).
  void start(Sequence& s);

  const model::Transformer& model_;
  const text::Tokenizer& tokenizer_;
  EngineOptions options_;

  mutable std::mutex mutex_;  // guards pending_, stop_, stats_
  std::condition_variable wake_;
  std::deque<std::unique_ptr<Sequence>> pending_;
  bool stop_ = false;
  bool idle_ = false;  // trimmed the heap since the last work
  EngineStats stats_;
  uint64_t next_seed_;

  std::vector<std::unique_ptr<Sequence>> active_;  // scheduler thread only
  ConversationStore store_;                        // scheduler thread only
  std::thread thread_;
};

}  // namespace oal::serve
