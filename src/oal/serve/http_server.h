#pragma once
// The OpenAI-compatible HTTP front of `oal serve`, over cpp-httplib:
//   POST /v1/completions, POST /v1/chat/completions  (JSON, or SSE with "stream": true)
//   GET  /v1/models, GET /health, GET /metrics (Prometheus text)
//   POST /tokenize, POST /detokenize  (llama-server's: text <-> the model's token ids)
//   GET  /  the chat page (chat_page.h), which uses the routes above
// Every error is answered as OpenAI's {"error": {...}} JSON with its status; requests
// above max_body_bytes get 413, bodies without a Content-Length 411 (http_connection.h).
// With an api_key, /v1/*, /tokenize and /detokenize need "Authorization: Bearer KEY".
// Connections are accepted by http_listener.h (idle ones parked without a thread; at most
// http_threads requests served and http_queue waiting, one more gets 503 at once) and read
// by http_connection.h (a request must arrive whole within request_timeout_s, else 408).
#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "oal/serve/chat_format.h"
#include "oal/serve/engine.h"
#include "oal/serve/openai_request.h"
#include "oal/serve/openai_response.h"

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace oal::serve {

class HttpListener;
class RoutedHttp;

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;               // 0: any free port (see bound_port())
  std::string api_key;           // "" → no authentication
  std::string model_name;        // the id /v1/models lists and requests may name
  size_t max_body_bytes = 1 << 20;
  int http_threads = 64;         // requests served at once (a stream holds its thread)
  int http_queue = 64;           // requests waiting for a thread; beyond: 503 at once
  int request_timeout_s = 30;    // to read one whole request (line, headers, body); then 408
  RequestLimits limits;
};

class Server {
 public:
  // engine, tokenizer must outlive the server. stop_tokens: ids ending every generation
  // (end of sequence); chat requests also stop at the chat format's end-of-turn token.
  Server(Engine& engine, const text::Tokenizer& tokenizer, ChatFormat chat,
         std::vector<int32_t> stop_tokens, ServerOptions options);
  ~Server();
  // Binds the socket. Throws oal::Error("[serve] ...") when host:port cannot be bound.
  void bind();
  int bound_port() const { return port_; }
  // Serves until stop() (from another thread or a signal handler's thread).
  void run();
  void stop();

 private:
  using HttpHandler = std::function<void(const httplib::Request&, httplib::Response&)>;
  using Route = void (Server::*)(const httplib::Request&, httplib::Response&);

  // The route table: each path to its handler below.
  void routes();
  // A /v1 route: authentication first; an ApiError is answered and counted as `route`.
  HttpHandler api(const std::string& route, Route handler);

  // The handlers, one per route.
  void completions(const httplib::Request& req, httplib::Response& res);
  void chat_completions(const httplib::Request& req, httplib::Response& res);
  void models(const httplib::Request& req, httplib::Response& res);
  void tokenize(const httplib::Request& req, httplib::Response& res);
  void detokenize(const httplib::Request& req, httplib::Response& res);
  void page(const httplib::Request& req, httplib::Response& res);  // the chat page at /
  void health(const httplib::Request& req, httplib::Response& res);
  void metrics(const httplib::Request& req, httplib::Response& res);
  // What httplib answers itself (404, 413, bad framing) and what escapes a handler, in
  // OpenAI's error shape.
  void http_error(const httplib::Request& req, httplib::Response& res);
  void uncaught(const httplib::Request& req, httplib::Response& res, std::exception_ptr ep);

  // Throw ApiError 401 / 404 unless the key / model is the server's.
  void check_auth(const httplib::Request& req) const;
  void check_model(const std::string& model) const;
  // The id, model and time of a new answer.
  ResponseShape next_shape(bool chat);
  // Runs a generation and answers it whole, or as SSE for "stream": true.
  void answer(const std::string& route, httplib::Response& res, GenerationJob job,
              ResponseShape shape);
  void answer_whole(const std::string& route, httplib::Response& res,
                    std::shared_ptr<RequestStream> events, const ResponseShape& shape);
  void answer_stream(const std::string& route, httplib::Response& res,
                     std::shared_ptr<RequestStream> events, ResponseShape shape);

  // Counts a finished request by route and status (for /metrics).
  void count(const std::string& route, int status);
  std::string metrics_text() const;

  Engine& engine_;
  const text::Tokenizer& tokenizer_;
  ChatFormat chat_;
  std::vector<int32_t> stop_tokens_;
  std::vector<int32_t> chat_stop_tokens_;
  ServerOptions options_;
  std::unique_ptr<RoutedHttp> http_;          // routes and request handling
  std::unique_ptr<HttpListener> listener_;   // accepts connections for http_
  int port_ = 0;
  std::atomic<int64_t> next_id_{1};
  mutable std::mutex counts_mutex_;
  std::map<std::pair<std::string, int>, int64_t> counts_;
};

}  // namespace oal::serve
