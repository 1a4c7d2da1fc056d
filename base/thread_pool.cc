#include "base/thread_pool.h"

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
  handed_over_.notify_all();
  // Tasks already handed over still run: their threads take them before seeing
  // stopping_ (Work checks handed_ first).
  ended_.wait(lock, [this] { return threads_ == 0; });
}

Result<void> ThreadPool::Post(std::function<void()> task) {
  std::unique_lock lock(mu_);
  if (idle_ > static_cast<int>(handed_.size())) {
    handed_.push_back(std::move(task));
    // Woken after the unlock: a thread woken under the lock would only go back to
    // sleep on mu_ (a burst of runs posts a hundred tasks in a row).
    lock.unlock();
    handed_over_.notify_one();
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
  return idle_ - static_cast<int>(handed_.size());
}

void ThreadPool::Work(std::function<void()> task) {
  while (true) {
    task();
    task = nullptr;  // whatever the task holds goes now, not when the next one comes
    std::unique_lock lock(mu_);
    ++idle_;
    // Idle from one busy instant, a thousand threads would end together keep_idle
    // later, each unmapping its stack (above): each waits keep_idle plus up to as long
    // again, by the order it came in, so their ends are spread out.
    const auto keep = keep_idle_ + keep_idle_ * (++idle_turns_ % kIdleSpread) / kIdleSpread;
    handed_over_.wait_for(lock, keep, [this] { return !handed_.empty() || stopping_; });
    --idle_;
    if (handed_.empty()) {
      --threads_;
      // The last use of the pool: once the destructor sees threads_ == 0 it may go.
      ended_.notify_all();
      return;
    }
    task = std::move(handed_.front());
    handed_.pop_front();
  }
}

}  // namespace tickd
