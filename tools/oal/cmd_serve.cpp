// `oal serve`: an OpenAI-compatible HTTP server for one model (softmax, hybrid or
// all-OAL), with continuous batching across requests (src/oal/serve/).
#include <fmt/core.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <thread>

#include "command.h"
#include "oal/core/error.h"
#include "oal/formats/open_model.h"
#include "oal/serve/chat_format.h"
#include "oal/serve/engine.h"
#include "oal/serve/http_server.h"
#include "oal/text/tokenizer.h"
#include "weights_option.h"

namespace {

namespace fs = std::filesystem;

struct ServeArgs {
  std::string model, tokenizer, name, chat_format = "auto", port_file;
  oal::serve::ServerOptions server;
  oal::serve::EngineOptions engine;
  oal::model::TransformerOptions weights;
};

volatile std::sig_atomic_t g_stop_requested = 0;
std::atomic<bool> server_running{true};
extern "C" void on_stop_signal(int) { g_stop_requested = 1; }

bool is_loopback(const std::string& host) {
  return host == "127.0.0.1" || host == "localhost" || host == "::1";
}

oal::serve::ChatFormat chat_format(const ServeArgs& a, const std::string& stored_template) {
  using oal::serve::ChatFormatKind;
  if (a.chat_format == "auto") return oal::serve::chat_format_from_template(stored_template);
  if (a.chat_format == "chatml") return {ChatFormatKind::chatml, {}};
  if (a.chat_format == "llama3") return {ChatFormatKind::llama3, {}};
  return {ChatFormatKind::plain, {}};
}

// Written once the socket is bound (a script or test started with --port 0 reads it):
// via a temporary file and a rename, so a reader never sees a partial number.
void write_port_file(const std::string& path, int port) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << port << "\n";
    oal::check(static_cast<bool>(out), "serve", "could not write --port-file {}", path);
  }
  fs::rename(tmp, path);
}

void run(const ServeArgs& a) {
  oal::check(is_loopback(a.server.host) || !a.server.api_key.empty(), "serve",
             "--host {} is reachable from other machines; give --api-key KEY as well (or keep "
             "the default 127.0.0.1)",
             a.server.host);
  // SIGINT / SIGTERM end the server cleanly: the handler only sets a flag (LibTorch's
  // threads exist already, so the signal may land on any thread); a watcher stops it.
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  // A client that closes its connection mid-stream must cost a failed write, not the process.
  std::signal(SIGPIPE, SIG_IGN);

  // One read of the model's files (a GGUF is parsed once for all of this).
  const oal::formats::OpenedModel opened =
      oal::formats::open_model(a.model, {.tokenizer = a.tokenizer, .transformer = a.weights});
  const oal::model::Transformer& model = *opened.model;
  const oal::text::Tokenizer& tok = *opened.tokenizer;
  const oal::serve::ChatFormat chat = chat_format(a, opened.chat_template);
  oal::serve::ServerOptions so = a.server;
  so.model_name = a.name.empty() ? fs::path(a.model).filename().string() : a.name;
  if (so.model_name.empty()) so.model_name = fs::path(a.model).parent_path().filename().string();

  oal::serve::EngineOptions eo = a.engine;
  eo.store.identity = oal::serve::state_identity(model);
  eo.log = [](const std::string& notice) { fmt::print(stderr, "oal serve: {}\n", notice); };
  oal::serve::Engine engine(model, tok, eo);
  oal::serve::Server server(engine, tok, chat, opened.stop_tokens, so);
  server.bind();
  if (!a.port_file.empty()) write_port_file(a.port_file, server.bound_port());
  fmt::print(stderr,
             "oal serve: {} on http://{}:{} (chat format {}, context {}, up to {} sequences at "
             "once); Ctrl-C stops\n",
             so.model_name, so.host, server.bound_port(), chat.name(), engine.context_length(),
             a.engine.max_sequences);
  std::thread watcher([&server] {
    while (!g_stop_requested && server_running)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    server.stop();
  });
  server.run();
  server_running = false;
  watcher.join();
  fmt::print(stderr, "oal serve: stopping{}\n",
             a.engine.store.state_dir.empty() ? "" : " (saving conversations to --state-dir)");
}

oal::cli::Registrar reg{
    "serve",
    "OpenAI-compatible HTTP server (completions, chat, streaming) with continuous batching",
    [](CLI::App& app) {
      auto a = std::make_shared<ServeArgs>();
      app.add_option("--model", a->model,
                     "HF model directory, .gguf file, llama2.c checkpoint or converted directory")
          ->required();
      app.add_option("--tokenizer", a->tokenizer,
                     "Tokenizer file (default: found beside the model)");
      app.add_option("--name", a->name,
                     "Model id the API reports and requests may name (default: the file name)");
      app.add_option("--host", a->server.host,
                     "Address to listen on; anything but loopback needs --api-key")
          ->capture_default_str();
      app.add_option("--port", a->server.port, "Port (0 = any free port; see --port-file)")
          ->capture_default_str()
          ->check(CLI::Range(0, 65535));
      app.add_option("--port-file", a->port_file,
                     "Write the bound port to this file once listening");
      app.add_option("--api-key", a->server.api_key,
                     "Require 'Authorization: Bearer KEY' on /v1/*, /tokenize and /detokenize");
      app.add_option(
             "--chat-format", a->chat_format,
             "Chat prompt format: auto (from the model's chat template), chatml, llama3, plain")
          ->capture_default_str()
          ->check(CLI::IsMember({"auto", "chatml", "llama3", "plain"}));
      app.add_option("--max-sequences", a->engine.max_sequences, "Sequences decoded at once")
          ->capture_default_str()
          ->check(CLI::Range(int64_t{1}, int64_t{4096}));
      app.add_option("--max-queued", a->engine.max_queued,
                     "Requests that may wait for a slot (beyond: 503)")
          ->capture_default_str()
          ->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
      app.add_option("--prefill-chunk", a->engine.prefill_chunk,
                     "Most prompt tokens a step reads while other sequences decode: one per "
                     "running sequence, at least 4, at most this (smaller: shorter gaps between their "
                     "tokens, a later first token for the new prompt); with none decoding a step "
                     "reads up to 512")
          ->capture_default_str()
          ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
      app.add_option("--max-tokens", a->server.limits.max_tokens,
                     "Largest max_tokens a request may ask for")
          ->capture_default_str()
          ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
      app.add_option("--default-max-tokens", a->server.limits.default_max_tokens,
                     "max_tokens of requests that give none")
          ->capture_default_str()
          ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
      app.add_option("--max-body", a->server.max_body_bytes,
                     "Largest request body in bytes (beyond: 413)")
          ->capture_default_str()
          ->check(CLI::Range(size_t{64}, size_t{1} << 30));
      app.add_option("--http-threads", a->server.http_threads,
                     "Requests served at once (a streamed answer holds its thread until it ends; "
                     "idle connections hold none)")
          ->capture_default_str()
          ->check(CLI::Range(2, 4096));
      app.add_option("--http-queue", a->server.http_queue,
                     "Requests waiting for an HTTP thread; one more is answered 503 (server_busy) "
                     "at once")
          ->capture_default_str()
          ->check(CLI::Range(0, 1 << 16));
      app.add_option("--request-timeout", a->server.request_timeout_s,
                     "Seconds to receive one whole request (line, headers, body); slower clients "
                     "get 408 or 400 and are disconnected")
          ->capture_default_str()
          ->check(CLI::Range(1, 3600));
      app.add_option("--max-state-memory", a->engine.store.max_state_memory,
                     "Bytes for the states of active sequences and saved conversations (e.g. 2GB); "
                     "beyond it the least recently used saved conversation goes to --state-dir, "
                     "or is dropped without one (0: none stays in memory)")
          ->transform(CLI::AsSizeValue(false))
          ->capture_default_str();
      app.add_option("--state-dir", a->engine.store.state_dir,
                     "Directory for saved conversations (one checksummed file each; read back "
                     "after a restart)");
      oal::cli::add_weights_option(app, a->weights);
      app.footer(
          "Routes: POST /v1/completions, /v1/chat/completions, /tokenize, /detokenize; GET "
          "/v1/models, /health, /metrics (docs/serve.md).\n"
          "Limits: a request's prompt + max_tokens must fit the model's context "
          "(max_position_embeddings, printed at start; beyond: 400); --max-sequences run at "
          "once and --max-queued wait (beyond: 503); bodies above --max-body get 413 (without "
          "a Content-Length: 411); --http-threads requests are served at once and --http-queue wait (beyond: 503 at "
          "once); a request must arrive within --request-timeout (else 408); an idle "
          "connection closes after 2 s (the longest idle first beyond 512), a connection after "
          "100 requests; states beyond --max-state-memory move to --state-dir, least recently "
          "used first.");
      return [a] { run(*a); };
    }};

}  // namespace
