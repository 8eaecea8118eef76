// Requests served through httplib's parser and routes with our deadlines
// (serve/http_connection.h), behind the listener, over loopback sockets: several requests
// on one connection (one after the other, and pipelined) and no more than max_requests, a
// chunked answer streamed whole, a request line too slow answered 408, headers or a body
// too slow answered 400, from the headers alone a body announced over the limit answered
// 413 and one of unannounced size 411, a stop seen while a connection is idle. The limits
// are a few hundred ms so the tests stay short; each wait below is an upper bound with
// room for a loaded machine, not a measurement.
#include <gtest/gtest.h>

#include <cstdio>
#include <thread>

#include "oal/serve/http_connection.h"
#include "oal/serve/http_listener.h"
#include "raw_socket.h"

using namespace oal;
using namespace std::chrono_literals;
using test::RawSocket;

namespace {

const std::string k_timeout = "HTTP/1.1 408 Request Timeout\r\nContent-Length: 4\r\n\r\nslow";
constexpr size_t k_max_body = 1000;

struct Served {
  serve::RoutedHttp http;
  serve::ConnectionLimits limits;
  std::unique_ptr<serve::HttpListener> listener;
  std::thread thread;

  // keep_alive long: no connection of a test expires between its requests on a loaded machine.
  explicit Served(std::chrono::milliseconds keep_alive = 10000ms) {
    limits.read_timeout = 1000ms;
    limits.write_timeout = 1000ms;
    limits.request_deadline = 400ms;
    limits.max_requests = 2;
    http.Get("/hello", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("hi", "text/plain");
    });
    http.Post("/echo", [](const httplib::Request& req, httplib::Response& res) {
      res.set_content(req.body, "text/plain");
    });
    http.limit_bodies(k_max_body, [](const httplib::Request&, httplib::Response& res) {
      res.set_content(res.status == 413 ? "too large" : "length required", "text/plain");
    });
    http.Get("/stream", [](const httplib::Request&, httplib::Response& res) {
      auto left = std::make_shared<int>(3);
      res.set_chunked_content_provider("text/plain", [left](size_t, httplib::DataSink& sink) {
        const std::string piece = "piece" + std::to_string(*left);
        if (!sink.write(piece.data(), piece.size())) return false;
        if (--*left == 0) sink.done();
        return true;
      });
    });
    serve::ListenerOptions o;
    o.port = 0;
    o.workers = 2;
    o.keep_alive = keep_alive;
    listener = std::make_unique<serve::HttpListener>(
        o,
        [this](int fd, int& requests) {
          return http.serve_connection(fd, requests, limits, listener->stopping(), k_timeout);
        },
        "BUSY");
    listener->bind();
    thread = std::thread([this] { listener->run(); });
  }
  ~Served() {
    listener->stop();
    thread.join();
  }
  int port() const { return listener->port(); }
};

const std::string k_get_hello = "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n";

int count_of(const std::string& text, const std::string& part) {
  int n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

}  // namespace

TEST(HttpConnection, ServesRequestsOnOneConnectionUpToMaxRequests) {
  Served s;
  RawSocket c(s.port());
  ASSERT_TRUE(c.send(k_get_hello));
  const std::string first = c.read(3000ms, "\r\n\r\nhi");
  EXPECT_EQ(first.rfind("HTTP/1.1 200", 0), 0u) << first;
  ASSERT_TRUE(c.send(k_get_hello));  // the same connection, kept alive
  bool closed = false;
  const std::string second = c.read(3000ms, {}, &closed);
  EXPECT_EQ(count_of(second, "HTTP/1.1 200"), 1) << second;
  EXPECT_TRUE(closed);  // max_requests = 2 answered: the server closes
}

TEST(HttpConnection, PipelinedRequestsAreBothAnswered) {
  Served s;
  RawSocket c(s.port());
  ASSERT_TRUE(c.send(k_get_hello + k_get_hello));  // the second sits in the read buffer
  EXPECT_EQ(count_of(c.read(3000ms), "\r\n\r\nhi"), 2);
}

TEST(HttpConnection, ChunkedAnswerStreamsWhole) {
  Served s;
  RawSocket c(s.port());
  ASSERT_TRUE(c.send("GET /stream HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  const std::string r = c.read(3000ms);
  for (const char* piece : {"piece3", "piece2", "piece1"})
    EXPECT_NE(r.find(piece), std::string::npos) << r;
  EXPECT_NE(r.find("\r\n0\r\n\r\n"), std::string::npos) << "no last chunk: " << r;
}

TEST(HttpConnection, SlowRequestLineIsAnswered408) {
  Served s;  // a request must arrive within 400 ms
  RawSocket c(s.port());
  ASSERT_TRUE(c.send("GET /hel"));
  bool closed = false;
  EXPECT_EQ(c.read(3000ms, {}, &closed), k_timeout);
  EXPECT_TRUE(closed);
}

TEST(HttpConnection, SlowHeadersOrBodyAreAnswered400) {
  Served s;
  RawSocket h(s.port()), b(s.port());
  ASSERT_TRUE(h.send("GET /hello HTTP/1.1\r\nHost: x\r\n"));  // headers not ended
  ASSERT_TRUE(b.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789"));
  for (RawSocket* c : {&h, &b}) {
    bool closed = false;
    const std::string r = c->read(3000ms, {}, &closed);
    EXPECT_EQ(r.rfind("HTTP/1.1 400", 0), 0u) << r;
    EXPECT_TRUE(closed);
  }
}

// The server answers 413 from the headers alone: the 100 MB announced are never sent, so
// a server that read the body first would answer only at its 400 ms deadline, and with
// 400, not 413. The connection then closes (cleanly, after the linger: the client reads
// the whole answer, not a reset).
TEST(HttpConnection, BodyOverTheLimitIsRefusedFromItsHeaders) {
  Served s;
  RawSocket c(s.port());
  ASSERT_TRUE(c.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 104857600\r\n\r\nabc"));
  const auto t0 = std::chrono::steady_clock::now();
  bool closed = false;
  const std::string r = c.read(3000ms, {}, &closed);
  EXPECT_EQ(r.rfind("HTTP/1.1 413", 0), 0u) << r;
  EXPECT_NE(r.find("Connection: close"), std::string::npos) << r;
  EXPECT_NE(r.find("too large"), std::string::npos) << r;
  EXPECT_TRUE(closed);
  // Well before the 400 ms request deadline (the answer does not wait for the body); the
  // close follows within the 1 s linger, as the client stopped sending.
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1500ms);
}

TEST(HttpConnection, ExpectContinueOverTheLimitGets413InsteadOfContinue) {
  Served s;
  RawSocket c(s.port());
  ASSERT_TRUE(c.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n"
                     "Expect: 100-continue\r\n\r\n"));
  const std::string r = c.read(3000ms, "too large");
  EXPECT_EQ(r.rfind("HTTP/1.1 413", 0), 0u) << r;
  EXPECT_EQ(r.find("100 Continue"), std::string::npos) << r;
}

// cpp-httplib 0.11.4 reads a chunked body, or one without a length until the client
// closes, whole and without any limit (10 MB against a 1 MB limit went through before
// this): both are refused from the headers. The chunks sent here exceed k_max_body, so a
// server that read them would answer 200 (the echo) instead.
TEST(HttpConnection, BodiesOfUnannouncedSizeAreRefused411) {
  Served s;
  RawSocket chunked(s.port()), unsized(s.port());
  const std::string chunk(2 * k_max_body, 'x');
  char size_line[32];
  std::snprintf(size_line, sizeof size_line, "%zx\r\n", chunk.size());
  ASSERT_TRUE(chunked.send("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" +
                           std::string(size_line) + chunk + "\r\n0\r\n\r\n"));
  ASSERT_TRUE(unsized.send("POST /echo HTTP/1.1\r\nHost: x\r\n\r\n" + chunk));
  for (RawSocket* c : {&chunked, &unsized}) {
    bool closed = false;
    const std::string r = c->read(3000ms, {}, &closed);
    EXPECT_EQ(r.rfind("HTTP/1.1 411", 0), 0u) << r.substr(0, 200);
    EXPECT_NE(r.find("length required"), std::string::npos) << r.substr(0, 200);
    EXPECT_TRUE(closed);
  }
}

TEST(HttpConnection, BodyAtTheLimitIsReadAndTheConnectionKept) {
  Served s;
  RawSocket c(s.port());
  const std::string body(k_max_body, 'x');
  std::string request = "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: ";
  request += std::to_string(k_max_body);  // appended: GCC 12 warns falsely on a + chain here
  request += "\r\n\r\n" + body;
  ASSERT_TRUE(c.send(request));
  const std::string r = c.read(3000ms, body);
  EXPECT_EQ(r.rfind("HTTP/1.1 200", 0), 0u) << r.substr(0, 200);
  ASSERT_TRUE(c.send(k_get_hello));  // the same connection serves the next request
  EXPECT_NE(c.read(3000ms, "\r\n\r\nhi").find("hi"), std::string::npos);
}

TEST(HttpConnection, StopEndsAnIdleConnectionWithoutWaitingForKeepAlive) {
  auto s = std::make_unique<Served>(/*keep_alive=*/60000ms);
  RawSocket c(s->port());
  ASSERT_TRUE(c.send(k_get_hello));
  ASSERT_NE(c.read(3000ms, "\r\n\r\nhi").find("hi"), std::string::npos);
  const auto t0 = std::chrono::steady_clock::now();
  s.reset();  // stop(), then run() waits for the worker holding the idle connection
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  bool closed = false;
  c.read(1000ms, {}, &closed);
  EXPECT_TRUE(closed);
}
