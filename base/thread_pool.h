// Threads kept for reuse. Each won tick runs on a thread of its own for as long as its
// job runs (app/run_supervisor.h); when 100 jobs start in the same second, creating
// and ending 100 threads cost more than the runs' own bookkeeping: every thread maps
// and guards a stack and hands it back at exit, and each of those changes the
// daemon's address space, which on a multi-core machine interrupts the other cores
// to flush their TLBs. A pool thread does that once.
//
// Post never queues: a task goes to an idle thread, or to a new thread when none is
// idle, so a task never waits for another to end (a run must not wait for another
// run). A thread idle for `keep_idle` ends (or up to twice that: the threads idle
// since one burst end spread out). With `max_threads`, no more threads than that
// exist: a task beyond them is refused, as when the system can create no thread.
// Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <limits>
#include <mutex>

#include "base/error.h"

namespace tickd {

class ThreadPool {
 public:
  explicit ThreadPool(std::chrono::milliseconds keep_idle = std::chrono::seconds(60),
                      int max_threads = std::numeric_limits<int>::max());
  // Waits for the tasks that run to end, then ends every thread.
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Runs `task` on an idle thread or a new one. An Error (and `task` not run) only
  // when no thread is idle and none can be created (the system refuses, or
  // max_threads exist). A task must not throw.
  Result<void> Post(std::function<void()> task);

  // Threads that exist now, busy or idle; and those of them waiting for a task.
  int threads() const;
  int idle_threads() const;

 private:
  void Work(std::function<void()> task);

  const std::chrono::milliseconds keep_idle_;
  const int max_threads_;
  mutable std::mutex mu_;
  std::condition_variable handed_over_;       // a task in handed_, or stopping_
  std::condition_variable ended_;             // a thread ended
  std::deque<std::function<void()>> handed_;  // posted to idle threads, not yet taken
  int idle_ = 0;     // threads waiting for a task (handed_.size() of them are spoken for)
  int threads_ = 0;  // threads that exist
  // Turns idle so far, which spread the idle threads' ends (Work).
  static constexpr unsigned kIdleSpread = 64;
  unsigned idle_turns_ = 0;
  bool stopping_ = false;
};

}  // namespace tickd
