#include "oal/serve/http_server.h"

#include <httplib.h>

#include <ctime>
#include <functional>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "oal/core/error.h"
#include "oal/serve/api_error.h"

namespace oal::serve {
namespace {

using nlohmann::json;
constexpr auto k_wait = std::chrono::milliseconds(200);

// JSON text that never throws on bytes that are not UTF-8 (they become U+FFFD).
std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(dump(body), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e) { send_json(res, e.status(), e.body()); }

// The pieces of a request the OpenAI shapes differ in.
struct Shape {
  bool chat = false;
  std::string id, model;
  int64_t created = 0;

  json usage(const StreamEvent& done) const {
    return {{"prompt_tokens", done.prompt_tokens},
            {"completion_tokens", done.completion_tokens},
            {"total_tokens", done.prompt_tokens + done.completion_tokens},
            {"prompt_tokens_details", {{"cached_tokens", done.cached_tokens}}}};
  }
  json head(const char* object) const {
    return {{"id", id}, {"object", object}, {"created", created}, {"model", model}};
  }
  // The whole answer (stream: false).
  json response(const std::string& text, const StreamEvent& done) const {
    json j = head(chat ? "chat.completion" : "text_completion");
    json choice = {{"index", 0}, {"finish_reason", done.finish_reason}};
    if (chat) choice["message"] = {{"role", "assistant"}, {"content", text}};
    else choice["text"] = text, choice["logprobs"] = nullptr;
    j["choices"] = json::array({choice});
    j["usage"] = usage(done);
    j["conversation_id"] = done.conversation_id;  // an extension: continue it by this id
    return j;
  }
  // One SSE chunk: a piece of text, or (finish non-empty) the last chunk.
  json chunk(const std::string& text, const std::string& finish, bool first) const {
    json j = head(chat ? "chat.completion.chunk" : "text_completion");
    json choice = {{"index", 0}, {"finish_reason", finish.empty() ? json() : json(finish)}};
    if (chat) {
      json delta = json::object();
      if (first) delta["role"] = "assistant";
      if (!text.empty() || first) delta["content"] = text;
      choice["delta"] = delta;
    } else {
      choice["text"] = text;
      choice["logprobs"] = nullptr;
    }
    j["choices"] = json::array({choice});
    return j;
  }
};

ApiError generation_failed(const std::string& why) {
  return ApiError(500, "server_error", "", "generation failed: " + why);
}

}  // namespace

Server::Server(Engine& engine, const text::Tokenizer& tokenizer, ChatFormat chat,
               std::vector<int32_t> stop_tokens, ServerOptions options)
    : engine_(engine), tokenizer_(tokenizer), chat_(std::move(chat)),
      stop_tokens_(std::move(stop_tokens)), options_(std::move(options)),
      http_(std::make_unique<httplib::Server>()) {
  chat_stop_tokens_ = stop_tokens_;
  if (!chat_.end_of_turn().empty())
    if (auto id = tokenizer_.token_id(chat_.end_of_turn())) chat_stop_tokens_.push_back(*id);
  const int threads = options_.http_threads;
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http_->set_payload_max_length(options_.max_body_bytes);
  // Short: stop() waits for idle keep-alive connections to time out.
  http_->set_keep_alive_timeout(2);
  routes();
}

Server::~Server() = default;

void Server::bind() {
  if (options_.port == 0) {
    port_ = http_->bind_to_any_port(options_.host);
    check(port_ > 0, "serve", "could not bind {} to any port", options_.host);
  } else {
    check(http_->bind_to_port(options_.host, options_.port), "serve",
          "could not listen on {}:{} (in use, or not an address of this machine); pick another "
          "--port or --host",
          options_.host, options_.port);
    port_ = options_.port;
  }
}

void Server::run() { http_->listen_after_bind(); }
void Server::stop() { http_->stop(); }

void Server::count(const std::string& route, int status) {
  std::lock_guard<std::mutex> lock(counts_mutex_);
  counts_[{route, status}] += 1;
}

std::string Server::metrics_text() const {
  const EngineStats s = engine_.stats();
  std::string out;
  auto metric = [&](const char* name, const char* type, const char* help, auto value) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n{} {}\n", name, help, name, type, name, value);
  };
  out += "# HELP oal_requests_total HTTP requests answered, by route and status.\n"
         "# TYPE oal_requests_total counter\n";
  {
    std::lock_guard<std::mutex> lock(counts_mutex_);
    for (const auto& [key, n] : counts_)
      out += fmt::format("oal_requests_total{{route=\"{}\",status=\"{}\"}} {}\n", key.first, key.second, n);
  }
  metric("oal_sequences_active", "gauge", "Sequences being generated.", s.active);
  metric("oal_sequences_queued", "gauge", "Requests waiting for a sequence slot.", s.queued);
  metric("oal_state_bytes", "gauge", "Bytes held by the active sequences' layer states (KV caches and OAL states).", s.state_bytes);
  metric("oal_generations_finished_total", "counter", "Generations that ended normally.", s.requests_finished);
  metric("oal_generations_cancelled_total", "counter", "Generations dropped because the client went away.", s.requests_cancelled);
  metric("oal_generations_failed_total", "counter", "Generations that ended with an error.", s.requests_failed);
  metric("oal_prompt_tokens_total", "counter", "Prompt tokens read.", s.prompt_tokens);
  metric("oal_completion_tokens_total", "counter", "Tokens generated.", s.completion_tokens);
  metric("oal_decode_steps_total", "counter", "Batched decode steps.", s.decode_steps);
  metric("oal_decode_rows_total", "counter", "Sequence-steps those decode steps advanced.", s.decode_rows);
  metric("oal_prefill_seconds_total", "counter", "Seconds spent reading prompts.", s.prefill_seconds);
  metric("oal_decode_seconds_total", "counter", "Seconds spent in decode steps.", s.decode_seconds);
  const StoreStats& c = s.conversations;
  metric("oal_conversations_in_memory", "gauge", "Saved conversations held in memory.", c.in_memory);
  metric("oal_conversation_state_bytes", "gauge", "Bytes held by the saved conversations in memory.", c.memory_bytes);
  metric("oal_conversations_on_disk", "gauge", "Saved conversations in the state directory.", c.on_disk);
  metric("oal_conversation_hits_total", "counter", "Requests that continued a saved conversation.", c.hits);
  metric("oal_conversation_reused_tokens_total", "counter", "Prompt tokens not read again thanks to saved states.", c.reused_tokens);
  metric("oal_conversation_evictions_total", "counter", "Conversations moved out of memory (to disk, or dropped without --state-dir).", c.evictions);
  metric("oal_state_restore_failures_total", "counter", "State files refused (corrupt, truncated, another model).", c.restore_failures);
  metric("oal_state_write_failures_total", "counter", "Conversations that could not be written to the state directory.", c.write_failures);
  metric("oal_decode_tokens_per_second", "gauge", "Tokens per second over all decode steps so far.",
         s.decode_seconds > 0 ? s.decode_rows / s.decode_seconds : 0.0);
  return out;
}

void Server::routes() {
  // Errors httplib answers itself (404 unknown route, 413 body too large, 400 bad
  // framing) get an OpenAI-shaped body too.
  http_->set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    const int st = res.status;
    const std::string msg =
        st == 404 ? fmt::format("no route {} {}; the routes are /v1/completions, "
                                "/v1/chat/completions, /v1/models, /health, /metrics", req.method, req.path)
        : st == 413 ? fmt::format("the request body is larger than {} bytes", options_.max_body_bytes)
                    : fmt::format("HTTP error {}", st);
    send_error(res, ApiError(st, "invalid_request_error", "", msg));
    count(st == 404 ? "(unknown route)" : req.path, st);  // arbitrary paths would be unbounded labels
  });
  http_->set_exception_handler([this](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    send_error(res, ApiError(500, "server_error", "", what));
    count(req.path, 500);
  });

  auto check_auth = [this](const httplib::Request& req) {
    if (options_.api_key.empty()) return;
    if (req.get_header_value("Authorization") != "Bearer " + options_.api_key)
      throw ApiError(401, "authentication_error", "",
                     "invalid or missing API key; send the header 'Authorization: Bearer <key>'",
                     "invalid_api_key");
  };
  auto check_model = [this](const std::string& model) {
    if (!model.empty() && model != options_.model_name)
      throw ApiError(404, "invalid_request_error", "model",
                     fmt::format("the model '{}' does not exist; this server serves '{}'", model,
                                 options_.model_name),
                     "model_not_found");
  };

  // Runs a generation and answers it (whole, or as SSE).
  auto generate = [this](const std::string& route, httplib::Response& res, GenerationJob job,
                         Shape shape) {
    const bool stream = job.params.stream;
    std::shared_ptr<RequestStream> events = engine_.submit(std::move(job));
    if (!stream) {
      std::string text;
      for (;;) {
        auto e = events->next(k_wait);
        if (!e) continue;
        if (!e->done) {
          text += e->text;
          continue;
        }
        if (e->finish_reason == "error") throw generation_failed(e->error);
        send_json(res, 200, shape.response(text, *e));
        count(route, 200);
        return;
      }
    }
    res.set_header("Cache-Control", "no-cache");
    auto first = std::make_shared<bool>(true);
    res.set_chunked_content_provider(
        "text/event-stream",
        [events, shape, first](size_t, httplib::DataSink& sink) {
          auto e = events->next(k_wait);
          if (!e) return true;  // nothing yet; httplib calls again
          auto send = [&](const json& j) {
            const std::string line = "data: " + dump(j) + "\n\n";
            return sink.write(line.data(), line.size());
          };
          if (!e->done) {
            const bool ok = send(shape.chunk(e->text, "", *first));
            *first = false;
            return ok;  // false: the client went away (the releaser cancels)
          }
          if (e->finish_reason == "error") {
            send(generation_failed(e->error).body());
          } else {
            if (*first) send(shape.chunk("", "", true));
            json last = shape.chunk("", e->finish_reason, false);
            last["usage"] = shape.usage(*e);
            last["conversation_id"] = e->conversation_id;
            send(last);
          }
          const std::string end = "data: [DONE]\n\n";
          sink.write(end.data(), end.size());
          sink.done();
          return true;
        },
        [this, events, route](bool success) {
          events->cancel();  // a no-op for a generation that already ended
          count(route, success ? 200 : 499);
        });
  };

  auto shape_for = [this](bool chat) {
    const int64_t n = next_id_++;
    return Shape{chat, fmt::format("{}-{}", chat ? "chatcmpl" : "cmpl", n), options_.model_name,
                 static_cast<int64_t>(std::time(nullptr))};
  };

  // A /v1 route: authentication first, and any ApiError answered and counted.
  using Body = std::function<void(const httplib::Request&, httplib::Response&)>;
  auto api_route = [=, this](const std::string& route, Body body) {
    return [=, this](const httplib::Request& req, httplib::Response& res) {
      try {
        check_auth(req);
        body(req, res);
      } catch (const ApiError& e) {
        send_error(res, e);
        count(route, e.status());
      }
    };
  };

  http_->Post("/v1/completions", api_route("/v1/completions", [=, this](const httplib::Request& req,
                                                                         httplib::Response& res) {
    CompletionRequest r = parse_completion_request(req.body, options_.limits);
    check_model(r.model);
    GenerationJob job{.prompt = r.prompt ? tokenizer_.encode(*r.prompt, /*add_bos=*/true) : r.prompt_tokens,
                      .params = r.params,
                      .stop_tokens = r.params.ignore_eos ? std::vector<int32_t>{} : stop_tokens_};
    generate("/v1/completions", res, std::move(job), shape_for(false));
  }));

  http_->Post("/v1/chat/completions", api_route("/v1/chat/completions", [=, this](const httplib::Request& req,
                                                                                   httplib::Response& res) {
    ChatRequest r = parse_chat_request(req.body, options_.limits);
    check_model(r.model);
    GenerationJob job{.prompt = tokenizer_.encode(render_chat(chat_, r.messages), /*add_bos=*/true),
                      .params = r.params,
                      .stop_tokens = r.params.ignore_eos ? std::vector<int32_t>{} : chat_stop_tokens_};
    generate("/v1/chat/completions", res, std::move(job), shape_for(true));
  }));

  http_->Get("/v1/models", api_route("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200,
              {{"object", "list"},
               {"data", json::array({{{"id", options_.model_name}, {"object", "model"},
                                      {"created", 0}, {"owned_by", "oal"}}})}});
    count("/v1/models", 200);
  }));

  http_->Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    const EngineStats s = engine_.stats();
    send_json(res, 200, {{"status", "ok"}, {"active", s.active}, {"queued", s.queued}});
  });

  http_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_text(), "text/plain; version=0.0.4");
  });
}

}  // namespace oal::serve
