#include "oal/serve/http_server.h"

#include <httplib.h>

#include <cstring>
#include <ctime>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "oal/core/error.h"
#include "oal/serve/api_error.h"
#include "oal/serve/chat_page.h"
#include "oal/serve/http_connection.h"
#include "oal/serve/http_listener.h"

namespace oal::serve {
namespace {

using nlohmann::json;
constexpr auto k_wait = std::chrono::milliseconds(200);

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(dump_json(body), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e) { send_json(res, e.status(), e.body()); }

// Per-slot gauges, one sample per active sequence (labels: slot, and phase on the first).
std::string slot_metrics(const std::vector<SlotStats>& slots) {
  std::string out;
  auto family = [&](const char* name, const char* help, auto value, bool with_phase) {
    out += fmt::format("# HELP {} {}\n# TYPE {} gauge\n", name, help, name);
    for (const SlotStats& s : slots)
      out += with_phase ? fmt::format("{}{{slot=\"{}\",phase=\"{}\"}} {}\n", name, s.slot,
                                      s.prefilling ? "prefill" : "decode", value(s))
                        : fmt::format("{}{{slot=\"{}\"}} {}\n", name, s.slot, value(s));
  };
  family("oal_slot_tokens", "Tokens in each active sequence's layer states.",
         [](const SlotStats& s) { return s.tokens_held; }, true);
  family("oal_slot_prompt_tokens", "Prompt tokens of each active sequence.",
         [](const SlotStats& s) { return s.prompt_tokens; }, false);
  family("oal_slot_cached_tokens", "Prompt tokens each active sequence took from a saved state.",
         [](const SlotStats& s) { return s.cached_tokens; }, false);
  family("oal_slot_generated_tokens", "Tokens each active sequence has generated.",
         [](const SlotStats& s) { return s.generated; }, false);
  family("oal_slot_state_bytes", "Bytes of each active sequence's layer states.",
         [](const SlotStats& s) { return s.state_bytes; }, false);
  return out;
}

// A whole HTTP response written by the listener or the connection loop themselves (a
// connection refused, a request too slow), outside httplib's response writer.
std::string raw_response(const ApiError& e, const char* reason) {
  const std::string body = dump_json(e.body());
  return fmt::format(
      "HTTP/1.1 {} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n"
      "Connection: close\r\n{}\r\n{}",
      e.status(), reason, body.size(), e.status() == 503 ? "Retry-After: 1\r\n" : "", body);
}

// For a connection with a request beyond --http-threads + --http-queue.
std::string busy_response(const ServerOptions& o) {
  return raw_response(
      ApiError(503, "server_error", "",
               fmt::format("the server is busy: {} requests are being served and {} wait "
                           "(--http-threads, --http-queue); retry later",
                           o.http_threads, o.http_queue),
               "server_busy"),
      "Service Unavailable");
}

// For a request whose first line did not arrive within --request-timeout.
std::string timeout_response(const ServerOptions& o) {
  return raw_response(
      ApiError(408, "invalid_request_error", "",
               fmt::format("the request did not arrive within {} s (--request-timeout)",
                           o.request_timeout_s),
               "request_timeout"),
      "Request Timeout");
}

ApiError generation_failed(const std::string& why) {
  return ApiError(500, "server_error", "", "generation failed: " + why);
}

}  // namespace

Server::Server(Engine& engine, const text::Tokenizer& tokenizer, ChatFormat chat,
               std::vector<int32_t> stop_tokens, ServerOptions options)
    : engine_(engine), tokenizer_(tokenizer), chat_(std::move(chat)),
      stop_tokens_(std::move(stop_tokens)), options_(std::move(options)),
      http_(std::make_unique<RoutedHttp>()) {
  chat_stop_tokens_ = stop_tokens_;
  if (!chat_.end_of_turn().empty())
    if (auto id = tokenizer_.token_id(chat_.end_of_turn())) chat_stop_tokens_.push_back(*id);
  check(options_.request_timeout_s >= 1, "serve",
        "the request timeout must be at least 1 s, got {}", options_.request_timeout_s);
  http_->limit_bodies(options_.max_body_bytes,
                      [this](const auto& req, auto& res) { http_error(req, res); });
  ConnectionLimits limits;
  limits.request_deadline = std::chrono::seconds(options_.request_timeout_s);
  ListenerOptions lo;
  lo.host = options_.host;
  lo.port = options_.port;
  lo.workers = options_.http_threads;
  lo.max_waiting = options_.http_queue;
  // What httplib's responses announce in their Keep-Alive header.
  http_->set_keep_alive_timeout(lo.keep_alive.count() / 1000);
  http_->set_keep_alive_max_count(static_cast<size_t>(limits.max_requests));
  listener_ = std::make_unique<HttpListener>(
      lo,
      [this, limits, slow = timeout_response(options_)](int fd, int& requests) {
        return http_->serve_connection(fd, requests, limits, listener_->stopping(), slow);
      },
      busy_response(options_));
  routes();
}

Server::~Server() = default;

void Server::bind() {
  listener_->bind();
  port_ = listener_->port();
}

void Server::run() { listener_->run(); }
void Server::stop() {
  http_->shut_down();
  listener_->stop();
}

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
      out += fmt::format("oal_requests_total{{route=\"{}\",status=\"{}\"}} {}\n", key.first,
                         key.second, n);
  }
  metric("oal_sequences_active", "gauge", "Sequences being generated.", s.active);
  metric("oal_sequences_queued", "gauge", "Requests waiting for a sequence slot.", s.queued);
  metric("oal_state_bytes", "gauge",
         "Bytes held by the active sequences' layer states (KV caches and OAL states).",
         s.state_bytes);
  metric("oal_generations_finished_total", "counter", "Generations that ended normally.",
         s.requests_finished);
  metric("oal_generations_cancelled_total", "counter",
         "Generations dropped because the client went away.", s.requests_cancelled);
  metric("oal_generations_failed_total", "counter", "Generations that ended with an error.",
         s.requests_failed);
  metric("oal_prompt_tokens_total", "counter", "Prompt tokens read.", s.prompt_tokens);
  metric("oal_completion_tokens_total", "counter", "Tokens generated.", s.completion_tokens);
  metric("oal_steps_total", "counter",
         "Batched steps (each advances every running sequence and reads a chunk of prompts).",
         s.steps);
  metric("oal_decode_rows_total", "counter", "Sequence-steps those steps advanced past a prompt.",
         s.decode_rows);
  metric("oal_step_prompt_tokens_total", "counter", "Prompt tokens those steps read.",
         s.step_prompt_tokens);
  metric("oal_step_seconds_total", "counter",
         "Seconds spent in batched steps (model, logits, picking and streaming tokens).",
         s.step_seconds);
  metric("oal_sample_seconds_total", "counter",
         "Of those, seconds spent picking tokens, detokenizing and queueing their text.",
         s.sample_seconds);
  const ListenerStats l = listener_->stats();
  metric("oal_connections_idle", "gauge", "Open connections with no request pending.", l.idle);
  metric("oal_connections_serving", "gauge", "Connections whose request a thread serves.",
         l.serving);
  metric("oal_connections_waiting", "gauge", "Connections with a request waiting for a thread.",
         l.waiting);
  metric("oal_connections_accepted_total", "counter", "Connections accepted.", l.accepted);
  metric("oal_connections_refused_total", "counter",
         "Requests answered 503 at once because --http-threads and --http-queue were full.",
         l.refused);
  metric("oal_connections_evicted_total", "counter",
         "Idle connections closed to make room for new ones (more than 512 idle).", l.evicted);
  const StoreStats& c = s.conversations;
  metric("oal_conversations_in_memory", "gauge", "Saved conversations held in memory.",
         c.in_memory);
  metric("oal_conversation_state_bytes", "gauge",
         "Bytes held by the saved conversations in memory.", c.memory_bytes);
  metric("oal_conversations_on_disk", "gauge", "Saved conversations in the state directory.",
         c.on_disk);
  metric("oal_conversation_hits_total", "counter", "Requests that continued a saved conversation.",
         c.hits);
  metric("oal_conversation_reused_tokens_total", "counter",
         "Prompt tokens not read again thanks to saved states.", c.reused_tokens);
  metric("oal_conversation_evictions_total", "counter",
         "Conversations moved out of memory (to disk, or dropped without --state-dir).",
         c.evictions);
  metric("oal_state_restore_failures_total", "counter",
         "State files refused (corrupt, truncated, another model).", c.restore_failures);
  metric("oal_state_write_failures_total", "counter",
         "Conversations that could not be written to the state directory.", c.write_failures);
  out += slot_metrics(s.slots);
  metric("oal_decode_tokens_per_second", "gauge",
         "Sequence-steps past a prompt per second of step time so far.",
         s.step_seconds > 0 ? s.decode_rows / s.step_seconds : 0.0);
  return out;
}

void Server::routes() {
  http_->set_error_handler([this](const auto& req, auto& res) { http_error(req, res); });
  http_->set_exception_handler(
      [this](const auto& req, auto& res, std::exception_ptr ep) { uncaught(req, res, ep); });
  http_->Post("/v1/completions", api("/v1/completions", &Server::completions));
  http_->Post("/v1/chat/completions", api("/v1/chat/completions", &Server::chat_completions));
  http_->Get("/v1/models", api("/v1/models", &Server::models));
  http_->Post("/tokenize", api("/tokenize", &Server::tokenize));
  http_->Post("/detokenize", api("/detokenize", &Server::detokenize));
  http_->Get("/", [this](const auto& req, auto& res) { page(req, res); });
  http_->Get("/health", [this](const auto& req, auto& res) { health(req, res); });
  http_->Get("/metrics", [this](const auto& req, auto& res) { metrics(req, res); });
}

Server::HttpHandler Server::api(const std::string& route, Route handler) {
  return [this, route, handler](const httplib::Request& req, httplib::Response& res) {
    try {
      check_auth(req);
      (this->*handler)(req, res);
    } catch (const ApiError& e) {
      send_error(res, e);
      count(route, e.status());
    }
  };
}

void Server::completions(const httplib::Request& req, httplib::Response& res) {
  CompletionRequest r = parse_completion_request(req.body, options_.limits);
  check_model(r.model);
  GenerationJob job{
      .prompt = r.prompt ? tokenizer_.encode(*r.prompt, /*add_bos=*/true) : r.prompt_tokens,
      .params = r.params,
      .stop_tokens = r.params.ignore_eos ? std::vector<int32_t>{} : stop_tokens_};
  answer("/v1/completions", res, std::move(job), next_shape(false));
}

void Server::chat_completions(const httplib::Request& req, httplib::Response& res) {
  ChatRequest r = parse_chat_request(req.body, options_.limits);
  check_model(r.model);
  GenerationJob job{
      .prompt = tokenizer_.encode(render_chat(chat_, r.messages), /*add_bos=*/true),
      .params = r.params,
      .stop_tokens = r.params.ignore_eos ? std::vector<int32_t>{} : chat_stop_tokens_};
  answer("/v1/chat/completions", res, std::move(job), next_shape(true));
}

void Server::models(const httplib::Request&, httplib::Response& res) {
  const json model = {
      {"id", options_.model_name}, {"object", "model"}, {"created", 0}, {"owned_by", "oal"}};
  send_json(res, 200, {{"object", "list"}, {"data", json::array({model})}});
  count("/v1/models", 200);
}

void Server::tokenize(const httplib::Request& req, httplib::Response& res) {
  const TokenizeRequest r = parse_tokenize_request(req.body);
  const std::vector<int32_t> ids = tokenizer_.encode(r.content, r.add_special);
  json tokens = json::array();
  int32_t prev = -1;
  for (int32_t id : ids) {
    if (r.with_pieces)
      tokens.push_back({{"id", id}, {"piece", tokenizer_.decode_token(prev, id)}});
    else
      tokens.push_back(id);
    prev = id;
  }
  send_json(res, 200, {{"tokens", tokens}});
  count("/tokenize", 200);
}

void Server::detokenize(const httplib::Request& req, httplib::Response& res) {
  const DetokenizeRequest r = parse_detokenize_request(req.body, tokenizer_.vocab_size());
  send_json(res, 200, {{"content", tokenizer_.decode(r.tokens)}});
  count("/detokenize", 200);
}

void Server::page(const httplib::Request&, httplib::Response& res) {
  const std::string_view html = chat_page_html();
  res.set_content(html.data(), html.size(), "text/html; charset=utf-8");
  count("/", 200);
}

void Server::health(const httplib::Request&, httplib::Response& res) {
  const EngineStats s = engine_.stats();
  send_json(res, 200, {{"status", "ok"}, {"active", s.active}, {"queued", s.queued}});
}

void Server::metrics(const httplib::Request&, httplib::Response& res) {
  res.set_content(metrics_text(), "text/plain; version=0.0.4");
}

void Server::http_error(const httplib::Request& req, httplib::Response& res) {
  if (!res.body.empty()) return;
  const int st = res.status;
  const std::string msg =
      st == 404 ? fmt::format("no route {} {}; the routes are /v1/completions, "
                              "/v1/chat/completions, /v1/models, /tokenize, /detokenize, / (the chat "
                              "page), /health, /metrics",
                              req.method, req.path)
      : st == 413 ? fmt::format("the request body is larger than {} bytes", options_.max_body_bytes)
      : st == 411 ? fmt::format("a request body needs a Content-Length header (at most {} bytes; "
                                "chunked bodies are not accepted)",
                                options_.max_body_bytes)
      : st == 400 ? fmt::format("the request could not be read: malformed HTTP, or its headers "
                                "and body did not arrive within {} s (--request-timeout)",
                                options_.request_timeout_s)
                  : fmt::format("HTTP error {}", st);
  send_error(res, ApiError(st, "invalid_request_error", "", msg));
  // Arbitrary paths would make unbounded metric labels.
  count(st == 404 ? "(unknown route)" : req.path, st);
}

void Server::uncaught(const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
  std::string what = "unknown error";
  try {
    std::rethrow_exception(ep);
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
  }
  send_error(res, ApiError(500, "server_error", "", what));
  count(req.path, 500);
}

void Server::check_auth(const httplib::Request& req) const {
  if (options_.api_key.empty()) return;
  if (req.get_header_value("Authorization") != "Bearer " + options_.api_key)
    throw ApiError(401, "authentication_error", "",
                   "invalid or missing API key; send the header 'Authorization: Bearer <key>'",
                   "invalid_api_key");
}

void Server::check_model(const std::string& model) const {
  if (!model.empty() && model != options_.model_name)
    throw ApiError(404, "invalid_request_error", "model",
                   fmt::format("the model '{}' does not exist; this server serves '{}'", model,
                               options_.model_name),
                   "model_not_found");
}

ResponseShape Server::next_shape(bool chat) {
  const int64_t n = next_id_++;
  return ResponseShape{chat, fmt::format("{}-{}", chat ? "chatcmpl" : "cmpl", n),
                       options_.model_name, static_cast<int64_t>(std::time(nullptr))};
}

void Server::answer(const std::string& route, httplib::Response& res, GenerationJob job,
                    ResponseShape shape) {
  const bool stream = job.params.stream;
  std::shared_ptr<RequestStream> events = engine_.submit(std::move(job));
  if (stream)
    answer_stream(route, res, std::move(events), std::move(shape));
  else
    answer_whole(route, res, std::move(events), shape);
}

void Server::answer_whole(const std::string& route, httplib::Response& res,
                          std::shared_ptr<RequestStream> events, const ResponseShape& shape) {
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

void Server::answer_stream(const std::string& route, httplib::Response& res,
                           std::shared_ptr<RequestStream> events, ResponseShape shape) {
  res.set_header("Cache-Control", "no-cache");
  auto first = std::make_shared<bool>(true);
  // httplib calls the provider until it says done: one event (or a wait) per call.
  auto provide = [events, shape, first](size_t, httplib::DataSink& sink) {
    auto e = events->next(k_wait);
    if (!e) return true;  // nothing yet; httplib calls again
    auto send = [&](const json& j) {
      const std::string line = sse_event(j);
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
      send(shape.last_chunk(*e));
    }
    sink.write(k_sse_done, std::strlen(k_sse_done));
    sink.done();
    return true;
  };
  auto release = [this, events, route](bool success) {
    events->cancel();  // a no-op for a generation that already ended
    count(route, success ? 200 : 499);
  };
  res.set_chunked_content_provider("text/event-stream", provide, release);
}

}  // namespace oal::serve
