#include "base/steady_waits.h"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace tickd {

using std::chrono::milliseconds;

Result<void> CheckSteadyWaits(milliseconds limit) {
  constexpr milliseconds kWait{20};
  constexpr int kMaxTurns = 100;  // a wait that ends before its deadline this often is broken
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
  int turns = 0;
  std::atomic<bool> done{false};
  std::thread waiter([&] {
    std::unique_lock lock(mu);
    const auto deadline = std::chrono::steady_clock::now() + kWait;
    while (!stop && std::chrono::steady_clock::now() < deadline && turns < kMaxTurns) {
      cv.wait_until(lock, deadline);
      ++turns;
    }
    done = true;
  });
  // Relative sleeps: they do not depend on what the clock reads.
  for (milliseconds waited{0}; !done && waited < limit; waited += milliseconds(1)) {
    std::this_thread::sleep_for(milliseconds(1));
  }
  const bool ended = done;
  {
    std::lock_guard lock(mu);
    stop = true;
  }
  cv.notify_all();
  waiter.join();
  const std::string hint =
      " (a clock faker such as libfaketime changes CLOCK_MONOTONIC? set "
      "FAKETIME_DONT_FAKE_MONOTONIC=1 to fake the wall clock alone)";
  if (!ended) {
    return MakeError("clock", "a " + std::to_string(kWait.count()) +
                                  " ms wait on the monotonic clock did not end within " +
                                  std::to_string(limit.count()) + " ms" + hint);
  }
  if (turns >= kMaxTurns) {
    return MakeError("clock", "waits on the monotonic clock end at once, before their deadline" +
                                  hint);
  }
  return {};
}

}  // namespace tickd
