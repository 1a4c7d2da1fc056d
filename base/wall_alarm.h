// A wait that ends at an instant of the wall clock, or sooner when someone rings.
#pragma once

#include <semaphore.h>

#include <chrono>

namespace tickd {

// The wait of a run made ready ahead of its instant (jobs/thread_execution.h): an
// absolute CLOCK_REALTIME wait, so a step of the wall clock moves its end, and one
// that clock fakers translate (libfaketime wraps sem_timedwait, as it wraps
// pthread_cond_timedwait). Not a condition variable: after a timed wait on one, the
// thread takes its mutex back marked as contended, and so every unlock after it is a
// futex_wake system call — at a busy instant a thousand of them, one per start, all
// in the same few milliseconds. Thread-safe.
class WallAlarm {
 public:
  WallAlarm();
  ~WallAlarm();
  WallAlarm(const WallAlarm&) = delete;
  WallAlarm& operator=(const WallAlarm&) = delete;

  // Ends the wait of WaitUntil (the one going, or the next one) at once.
  void Ring();
  // Waits until the wall clock reads `at` or later (true), or Ring (false; a ring that
  // came before the call counts, once).
  bool WaitUntil(std::chrono::system_clock::time_point at);
  // The same on the monotonic clock.
  bool WaitUntilSteady(std::chrono::steady_clock::time_point at);

 private:
  sem_t sem_;
};

}  // namespace tickd
