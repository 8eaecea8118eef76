#pragma once
// The message of the oal::Error a call throws, for tests of refusals: "" when it returns
// (so a missing refusal fails the test's find() with the empty string printed).
#include <functional>
#include <string>

#include "oal/core/error.h"

namespace oal::test {

inline std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace oal::test
