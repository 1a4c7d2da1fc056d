#include "base/thread_pool.h"

#include <algorithm>
#include <string>
#include <system_error>
#include <thread>
#include <utility>

namespace tickd {

ThreadPool::ThreadPool(std::chrono::milliseconds keep_idle, int max_threads)
    : keep_idle_(keep_idle), max_threads_(max_threads) {}

ThreadPool::~ThreadPool() {
  std::unique_lock lock(mu_);
  stopping_ = true;
  // The idle threads are handed nothing, which ends them; the busy ones end after
  // their task (Work sees stopping_).
  for (Idle* idle : std::exchange(idle_, {})) idle->handed.release();
  ended_.wait(lock, [this] { return threads_ == 0; });
}

Result<void> ThreadPool::Post(std::function<void()> task) {
  std::unique_lock lock(mu_);
  if (!idle_.empty()) {
    Idle* idle = idle_.back();
    idle_.pop_back();
    idle->task = std::move(task);
    // Released after the unlock: a thread woken under the lock would only go back to
    // sleep on mu_ (a burst of runs posts a hundred tasks in a row).
    lock.unlock();
    idle->handed.release();
    return {};
  }
  if (threads_ >= max_threads_) {
    return MakeError("thread pool: new thread",
                     "all " + std::to_string(max_threads_) + " threads are busy");
  }
  try {
    // Detached: a thread ends on its own once idle long enough; the destructor waits
    // for threads_ to reach 0 instead of joining.
    std::thread([this, first = std::move(task)]() mutable { Work(std::move(first)); }).detach();
  } catch (const std::system_error& e) {
    return MakeError("thread pool: new thread", e.what());
  }
  ++threads_;
  return {};
}

int ThreadPool::threads() const {
  std::lock_guard lock(mu_);
  return threads_;
}

int ThreadPool::idle_threads() const {
  std::lock_guard lock(mu_);
  return static_cast<int>(idle_.size());
}

void ThreadPool::EndThreadLocked() {
  --threads_;
  // The last use of the pool: once the destructor sees threads_ == 0 it may go.
  ended_.notify_all();
}

void ThreadPool::Work(std::function<void()> task) {
  Idle me;
  while (true) {
    task();
    task = nullptr;  // whatever the task holds goes now, not when the next one comes
    std::unique_lock lock(mu_);
    if (stopping_) return EndThreadLocked();
    idle_.push_back(&me);
    // Idle from one busy instant, a thousand threads would end together keep_idle
    // later, each unmapping its stack (above): each waits keep_idle plus up to as long
    // again, by the order it came in, so their ends are spread out.
    const auto keep = keep_idle_ + keep_idle_ * (++idle_turns_ % kIdleSpread) / kIdleSpread;
    lock.unlock();
    if (!me.handed.try_acquire_for(keep)) {
      lock.lock();
      const auto it = std::find(idle_.begin(), idle_.end(), &me);
      if (it != idle_.end()) {  // nobody handed it anything: it ends
        idle_.erase(it);
        return EndThreadLocked();
      }
      lock.unlock();
      me.handed.acquire();  // taken meanwhile: the release is on its way
    }
    task = std::move(me.task);
    if (!task) {  // the pool is going
      lock.lock();
      return EndThreadLocked();
    }
  }
}

}  // namespace tickd
