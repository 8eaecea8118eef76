#pragma once
// An error answered to an HTTP client in OpenAI's shape:
//   {"error": {"message": ..., "type": ..., "param": ..., "code": ...}} with an HTTP status.
// Thrown by request parsing and the engine's admission; the server turns it into the
// response (it never reaches the user as a crash).
#include <fmt/core.h>

#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace oal::serve {

class ApiError : public std::runtime_error {
 public:
  // status: 400 bad request, 401 unauthorized, 404 unknown model/route, 413 too large,
  // 503 busy. type: OpenAI's error type ("invalid_request_error", "authentication_error",
  // "server_error", ...). param: the request field at fault ("" when none).
  ApiError(int status, std::string type, std::string param, const std::string& message,
           std::string code = {})
      : std::runtime_error(message), status_(status), type_(std::move(type)),
        param_(std::move(param)), code_(std::move(code)) {}

  int status() const { return status_; }
  // The response body.
  nlohmann::json body() const {
    auto opt = [](const std::string& s) {
      return s.empty() ? nlohmann::json() : nlohmann::json(s);
    };
    return {{"error",
             {{"message", what()}, {"type", type_}, {"param", opt(param_)}, {"code", opt(code_)}}}};
  }

 private:
  int status_;
  std::string type_, param_, code_;
};

// 400 invalid_request_error naming the field.
template <typename... Args>
ApiError bad_request(const std::string& param, fmt::format_string<Args...> f, Args&&... args) {
  return ApiError(400, "invalid_request_error", param, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace oal::serve
