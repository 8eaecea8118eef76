#pragma once
// The OpenAI-compatible HTTP front of `oal serve`, over cpp-httplib:
//   POST /v1/completions, POST /v1/chat/completions  (JSON, or SSE with "stream": true)
//   GET  /v1/models, GET /health, GET /metrics (Prometheus text)
// Every error is answered as OpenAI's {"error": {...}} JSON with its status; requests
// above max_body_bytes get 413. With an api_key, /v1/* needs "Authorization: Bearer KEY".
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "oal/serve/chat_format.h"
#include "oal/serve/engine.h"
#include "oal/serve/openai_request.h"

namespace httplib {
class Server;
}

namespace oal::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;               // 0: any free port (see bound_port())
  std::string api_key;           // "" → no authentication
  std::string model_name;        // the id /v1/models lists and requests may name
  size_t max_body_bytes = 1 << 20;
  int http_threads = 64;         // connections served at once (streams hold one each)
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
  void routes();
  // Counts a finished request by route and status (for /metrics).
  void count(const std::string& route, int status);
  std::string metrics_text() const;

  Engine& engine_;
  const text::Tokenizer& tokenizer_;
  ChatFormat chat_;
  std::vector<int32_t> stop_tokens_;
  std::vector<int32_t> chat_stop_tokens_;
  ServerOptions options_;
  std::unique_ptr<httplib::Server> http_;
  int port_ = 0;
  std::atomic<int64_t> next_id_{1};
  mutable std::mutex counts_mutex_;
  std::map<std::pair<std::string, int>, int64_t> counts_;
};

}  // namespace oal::serve
