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
#include <functional>
#include <limits>
#include <mutex>
#include <semaphore>
#include <vector>

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
  // An idle thread's place to be handed its next task: on its own stack, waited on by
  // it alone (one shared condition variable made a burst's thousand threads going
  // idle queue on one futex).
  struct Idle {
    std::function<void()> task;  // empty when handed over: the pool is going
    std::binary_semaphore handed{0};
  };

  void Work(std::function<void()> task);
  // REQUIRES: mu_ held. This thread ends: the destructor may go once none is left.
  void EndThreadLocked();

  const std::chrono::milliseconds keep_idle_;
  const int max_threads_;
  mutable std::mutex mu_;
  std::condition_variable ended_;  // a thread ended
  std::vector<Idle*> idle_;        // guarded by mu_; the newest last (taken first)
  int threads_ = 0;                // guarded by mu_; threads that exist
  // Turns idle so far, which spread the idle threads' ends (Work).
  static constexpr unsigned kIdleSpread = 64;
  unsigned idle_turns_ = 0;  // guarded by mu_
  bool stopping_ = false;    // guarded by mu_
};

}  // namespace tickd
