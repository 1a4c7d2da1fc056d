// The completes the store did not take while their run's lease lasted (docs/design.md
// §1 rule 4), sent again after it. A run whose store could not be reached is killed
// at its lease's end, and its complete — sent then — fails for the same reason; left
// there, the tick would read `running` in the ledger for as long as it is kept,
// although its run is long gone. A complete is owner-checked, so sending it late is
// safe: it lands only while the claim is still this replica's.
//
// Only for jobs with recover: false. With recover: true another replica re-runs a
// tick left running once its lease expired (rule 5); a late complete landing first
// would stop that.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

#include "app/log.h"
#include "base/clock.h"
#include "lock/backend.h"

namespace tickd::app {

// Thread-safe. Its thread starts with the first Add().
class LateCompletes {
 public:
  // The most completes kept waiting; beyond it the oldest is given up.
  static constexpr std::size_t kMaxPending = 1'024;
  // The wait after a try the store did not answer: from the first, doubling to the last.
  static constexpr std::chrono::milliseconds kFirstWait{1'000};
  static constexpr std::chrono::milliseconds kLongestWait{30'000};

  // `retention`: a tick older than this (lock.retention) is given up, its record being
  // pruned anyway. `max_real_wait` bounds each real-time wait before the Clock is read
  // again (for a FakeClock).
  LateCompletes(Clock& clock, lock::Backend& backend, Logger& log, std::string node,
                std::chrono::milliseconds retention, std::chrono::milliseconds max_real_wait);
  ~LateCompletes();  // Stop()
  LateCompletes(const LateCompletes&) = delete;
  LateCompletes& operator=(const LateCompletes&) = delete;

  // Takes a complete over; its first try is kFirstWait from now, after the ones
  // waiting before it. After Stop() it is given up at once.
  void Add(lock::CompleteRequest complete);
  // No more tries: each complete still waiting is given up (logged), the thread ends.
  void Stop();
  std::size_t pending() const;

 private:
  struct Waiting {
    lock::CompleteRequest complete;
    SteadyTime since;  // handed over
  };
  void Loop();
  // Logs `complete … outcome=given-up reason=…` for one that will not be sent again.
  void GiveUp(const Waiting& w, std::string_view reason);

  Clock& clock_;
  lock::Backend& backend_;
  Logger& log_;
  const std::string node_;
  const std::chrono::milliseconds retention_;
  const std::chrono::milliseconds max_real_wait_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Waiting> pending_;  // oldest first; the front is tried
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace tickd::app
