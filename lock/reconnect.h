// When a network backend (Redis, PostgreSQL) may try to connect again after a
// failure: the first retry at once, then after 100 ms doubling to 2 s. A dead server
// then costs a replica one connection attempt per pause instead of one per call,
// while every call in between still fails closed at once (an Error, never a run).
// Not thread-safe: the backend's own mutex guards it.
#pragma once

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>

#include "base/error.h"

namespace tickd::lock {

class ReconnectBackoff {
 public:
  using SteadyClock = std::chrono::steady_clock;
  static constexpr std::chrono::milliseconds kFirst{100};
  static constexpr std::chrono::milliseconds kMax{2'000};

  // Ok when a connection attempt may be made now; otherwise the error for the call.
  Result<void> MayConnect(const std::string& context) const {
    const auto now = SteadyClock::now();
    if (now >= retry_at_) return {};
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(retry_at_ - now);
    return MakeError(context, "not connected (" + last_error_ + "); reconnecting in " +
                                  std::to_string(wait.count()) + "ms");
  }

  // A call or attempt failed (`detail` must hold no secret): the next attempt waits
  // 0, 100 ms, 200 ms, … up to 2 s after consecutive failures.
  void Failed(std::string detail) {
    const std::chrono::milliseconds pause =
        failures_ == 0 ? std::chrono::milliseconds(0)
                       : std::min(kMax, std::chrono::milliseconds(kFirst.count()
                                                                  << std::min(failures_ - 1, 5)));
    Note(pause, std::move(detail));
  }

  // A failure that retrying soon will not mend (refused credentials, a schema error):
  // the next attempt waits the longest pause.
  void FailedHard(std::string detail) { Note(kMax, std::move(detail)); }

  void Succeeded() { failures_ = 0; }

 private:
  void Note(std::chrono::milliseconds pause, std::string detail) {
    ++failures_;
    retry_at_ = SteadyClock::now() + pause;
    last_error_ = std::move(detail);
  }

  int failures_ = 0;               // consecutive failed calls/attempts
  SteadyClock::time_point retry_at_{};
  std::string last_error_;
};

}  // namespace tickd::lock
