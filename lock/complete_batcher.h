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

#include <condition_variable>
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
    Waiter me{CompleteRequest{held, completion}, std::nullopt};
    std::unique_lock lock(mu_);
    queue_.push_back(&me);
    if (leader_active_) {
      done_cv_.wait(lock, [&] { return me.result.has_value(); });
      return std::move(*me.result);
    }
    leader_active_ = true;
    while (!queue_.empty()) {
      std::vector<Waiter*> batch = std::exchange(queue_, {});
      lock.unlock();
      WriteOne(batch);
      lock.lock();
      done_cv_.notify_all();
    }
    leader_active_ = false;
    return std::move(*me.result);
  }

 private:
  struct Waiter {
    CompleteRequest request;
    std::optional<Result<CompleteStatus>> result;  // set under mu_
  };

  // Called by the leader without mu_; stores the answers under mu_.
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
    std::lock_guard lock(mu_);
    for (std::size_t i = 0; i < batch.size(); ++i) {
      batch[i]->result = i < answers.size()
                             ? std::move(answers[i])
                             : Result<CompleteStatus>(MakeError(
                                   "complete", "the backend gave no answer for this claim"));
    }
  }

  const WriteBatch write_batch_;
  std::mutex mu_;
  std::condition_variable done_cv_;
  std::vector<Waiter*> queue_;  // guarded by mu_
  bool leader_active_ = false;  // guarded by mu_
};

}  // namespace tickd::lock

#endif  // TICKD_LOCK_COMPLETE_BATCHER_H_
