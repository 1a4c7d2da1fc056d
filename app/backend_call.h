// Backend calls from the daemon's threads: an exception thrown by a backend (they
// should return errors, but a scheduler thread must never die of one) becomes an
// Error, and a failed call is logged in one shape: `<event> job= tick= node=
// outcome=error error="…"`.
#pragma once

#include <exception>
#include <string>
#include <string_view>

#include "app/log.h"
#include "base/error.h"

namespace tickd::app {

// Runs `call` (returning a Result<T>); an exception becomes an Error named `op`.
template <typename Call>
auto CallBackend(std::string_view op, Call&& call) -> decltype(call()) {
  try {
    return call();
  } catch (const std::exception& e) {
    return MakeError(std::string(op), e.what());
  } catch (...) {
    return MakeError(std::string(op), "unknown exception");
  }
}

inline void LogBackendError(Logger& log, LogLevel level, std::string_view event,
                            std::string_view job, std::string_view tick, std::string_view node,
                            const Error& error) {
  log.Log(level, event,
          {{"job", job},
           {"tick", tick},
           {"node", node},
           {"outcome", "error"},
           {"error", error.ToString()}});
}

}  // namespace tickd::app
