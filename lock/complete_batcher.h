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
#include <string>
#include <utility>
#include <vector>

#include "lock/backend.h"

namespace tickd::lock {

// The same for any call whose requests can go to the store together (GroupCommit:
// a request type, the answer it gets): ZooKeeper's renewals use it too.
template <typename Request, typename Answer>
class GroupCommit {
 public:
  // Writes the requests of one batch; answers in the order of the requests (a
  // shorter answer gives the rest an error).
  using WriteBatch = std::function<std::vector<Result<Answer>>(std::span<const Request>)>;

  // `what` names the call in the errors the batcher makes itself ("complete").
  GroupCommit(WriteBatch write_batch, std::string what)
      : write_batch_(std::move(write_batch)), what_(std::move(what)) {}

  GroupCommit(const GroupCommit&) = delete;
  GroupCommit& operator=(const GroupCommit&) = delete;

  // Returns once this request's batch is written.
  Result<Answer> Submit(Request request) {
    Waiter me{std::move(request)};
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
    Request request;
    std::optional<Result<Answer>> result;  // written by the leader before `answered`
    // Not a condition variable shared by all waiters: when a hundred runs end together,
    // notify_all woke every waiter to queue again for mu_, one after the other.
    // An int: libstdc++ waits on an int's own address (a futex); a bool's waiters share
    // a proxy that every notify wakes all of.
    std::atomic<int> answered{0};
  };

  // Called by the leader without mu_: stores each answer, then wakes its waiter.
  void WriteOne(const std::vector<Waiter*>& batch) {
    std::vector<Request> requests;
    requests.reserve(batch.size());
    for (const Waiter* w : batch) requests.push_back(w->request);
    std::vector<Result<Answer>> answers;
    try {
      answers = write_batch_(requests);
    } catch (const std::exception& e) {
      answers.clear();
      answers.resize(batch.size(), MakeError(what_, e.what()));
    }
    for (std::size_t i = 0; i < batch.size(); ++i) {
      Waiter* w = batch[i];
      w->result = i < answers.size()
                      ? std::move(answers[i])
                      : Result<Answer>(
                            MakeError(what_, "the backend gave no answer for this claim"));
      w->answered.store(1, std::memory_order_release);
      // The waiter may return, and its Waiter go, as soon as the store is seen; the
      // notify then wakes by address only (a private futex: no read of the memory),
      // as POSIX allows sem_post's semaphore to be destroyed by the waiter it wakes.
      w->answered.notify_one();
    }
  }

  const WriteBatch write_batch_;
  const std::string what_;
  std::mutex mu_;
  std::vector<Waiter*> queue_;  // guarded by mu_
  bool leader_active_ = false;  // guarded by mu_
};

class CompleteBatcher : public GroupCommit<CompleteRequest, CompleteStatus> {
 public:
  explicit CompleteBatcher(WriteBatch write_batch)
      : GroupCommit(std::move(write_batch), "complete") {}

  // As Backend::Complete; returns once this request's batch is written.
  Result<CompleteStatus> Complete(const HeldClaim& held, const Completion& completion) {
    return Submit(CompleteRequest{held, completion});
  }
};

}  // namespace tickd::lock

#endif  // TICKD_LOCK_COMPLETE_BATCHER_H_
