// Group commit for Backend::Complete: completes that arrive while another batch is
// being written go to the store together, in one CompleteBatch (one transaction,
// one pipeline). The daemon completes each run from the run's own supervisor
// thread; when many runs end together (jobs due at the same instant) each Complete
// would otherwise be its own transaction with its own fsync, and the next tick's
// claims would queue behind them.
//
// How: the first caller that finds no batch in flight becomes the leader. It takes
// everything queued (its own request and those that arrived before it), calls
// `write_batch` without holding the queue's lock, hands out the answers, and goes on
// while more requests arrived meanwhile; then it returns its own answer. The others
// wait for theirs. A lone Complete costs what it did before: a batch of one.
#ifndef TICKD_LOCK_COMPLETE_BATCHER_H_
#define TICKD_LOCK_COMPLETE_BATCHER_H_

#include <atomic>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "lock/backend.h"

namespace tickd::lock {

class CompleteBatcher {
 public:
  // Writes the completes of one batch; answers in the order of the requests (a
  // shorter answer gives the rest an error).
  using WriteBatch =
      std::function<std::vector<Result<CompleteStatus>>(std::span<const CompleteRequest>)>;

  explicit CompleteBatcher(WriteBatch write_batch) : write_batch_(std::move(write_batch)) {}

  CompleteBatcher(const CompleteBatcher&) = delete;
  CompleteBatcher& operator=(const CompleteBatcher&) = delete;

  // As Backend::Complete; returns once this request's batch is written.
  Result<CompleteStatus> Complete(const HeldClaim& held, const Completion& completion) {
    Waiter me{CompleteRequest{held, completion}};
    std::unique_lock lock(mu_);
    queue_.push_back(&me);
    if (leader_active_) {
      lock.unlock();
      me.answered.wait(0);  // the leader wakes each waiter on its own flag
      return std::move(*me.result);
    }
    leader_active_ = true;
    while (!queue_.empty()) {
      std::vector<Waiter*> batch = std::exchange(queue_, {});
      lock.unlock();
      WriteOne(batch);
      lock.lock();
    }
    leader_active_ = false;
    return std::move(*me.result);
  }

 private:
  struct Waiter {
    CompleteRequest request;
    std::optional<Result<CompleteStatus>> result;  // written by the leader before `answered`
    // Not a condition variable shared by all waiters: when a hundred runs end together,
    // notify_all woke every waiter to queue again for mu_, one after the other.
    // An int: libstdc++ waits on an int's own address (a futex); a bool's waiters share
    // a proxy that every notify wakes all of.
    std::atomic<int> answered{0};
  };

  // Called by the leader without mu_: stores each answer, then wakes its waiter.
  void WriteOne(const std::vector<Waiter*>& batch) {
    std::vector<CompleteRequest> requests;
    requests.reserve(batch.size());
    for (const Waiter* w : batch) requests.push_back(w->request);
    std::vector<Result<CompleteStatus>> answers;
    try {
      answers = write_batch_(requests);
    } catch (const std::exception& e) {
      answers.clear();
      answers.resize(batch.size(), MakeError("complete", e.what()));
    }
    for (std::size_t i = 0; i < batch.size(); ++i) {
      Waiter* w = batch[i];
      w->result = i < answers.size()
                      ? std::move(answers[i])
                      : Result<CompleteStatus>(
                            MakeError("complete", "the backend gave no answer for this claim"));
      w->answered.store(1, std::memory_order_release);
      // The waiter may return, and its Waiter go, as soon as the store is seen; the
      // notify then wakes by address only (a private futex: no read of the memory),
      // as POSIX allows sem_post's semaphore to be destroyed by the waiter it wakes.
      w->answered.notify_one();
    }
  }

  const WriteBatch write_batch_;
  std::mutex mu_;
  std::vector<Waiter*> queue_;  // guarded by mu_
  bool leader_active_ = false;  // guarded by mu_
};

}  // namespace tickd::lock

#endif  // TICKD_LOCK_COMPLETE_BATCHER_H_
