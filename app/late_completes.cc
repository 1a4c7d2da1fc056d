// LateCompletes (app/late_completes.h): one thread sends the oldest waiting complete
// until the store answers it, then the next; a try the store does not answer waits
// kFirstWait, doubling to kLongestWait, before the next (the others would fail alike).
#include "app/late_completes.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "app/backend_call.h"

namespace tickd::app {

using std::chrono::milliseconds;

LateCompletes::LateCompletes(Clock& clock, lock::Backend& backend, Logger& log, std::string node,
                             milliseconds retention, milliseconds max_real_wait)
    : clock_(clock),
      backend_(backend),
      log_(log),
      node_(std::move(node)),
      retention_(retention),
      max_real_wait_(max_real_wait) {}

LateCompletes::~LateCompletes() { Stop(); }

void LateCompletes::Add(lock::CompleteRequest complete) {
  Waiting w{std::move(complete), clock_.Steady()};
  std::unique_lock lock(mu_);
  if (stopping_) {
    lock.unlock();
    GiveUp(w, "shutdown");
    return;
  }
  pending_.push_back(std::move(w));
  std::optional<Waiting> dropped;
  if (pending_.size() > kMaxPending) {
    dropped = std::move(pending_.front());
    pending_.pop_front();
  }
  if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
  cv_.notify_all();
  lock.unlock();
  if (dropped) GiveUp(*dropped, std::to_string(kMaxPending) + " completes waiting");
}

void LateCompletes::Stop() {
  std::deque<Waiting> left;
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    stopping_ = true;
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();  // a try in flight ends within op_timeout
  {
    std::lock_guard lock(mu_);
    left.swap(pending_);
  }
  for (const Waiting& w : left) GiveUp(w, "shutdown");
}

std::size_t LateCompletes::pending() const {
  std::lock_guard lock(mu_);
  return pending_.size();
}

void LateCompletes::GiveUp(const Waiting& w, std::string_view reason) {
  log_.Log(LogLevel::kWarn, "complete",
           {{"job", w.complete.held.job},
            {"tick", FormatTick(w.complete.held.tick_unix)},
            {"node", node_},
            {"outcome", "given-up"},
            {"reason", reason},
            {"fence", w.complete.held.fence}});
}

void LateCompletes::Loop() {
  milliseconds wait = kFirstWait;
  std::unique_lock lock(mu_);
  std::optional<SteadyTime> next_try;
  while (!stopping_) {
    if (pending_.empty()) {
      next_try.reset();
      cv_.wait(lock);
      continue;
    }
    SteadyTime due = pending_.front().since + kFirstWait;
    if (next_try) due = std::max(due, *next_try);
    const SteadyTime now = clock_.Steady();
    if (now < due) {
      cv_.wait_for(lock, std::clamp<milliseconds>(due - now, milliseconds(1), max_real_wait_));
      continue;
    }
    Waiting w = std::move(pending_.front());
    pending_.pop_front();
    const std::int64_t oldest_kept_ms =
        std::chrono::duration_cast<milliseconds>((clock_.Wall() - retention_).time_since_epoch())
            .count();
    if (w.complete.held.tick_unix * 1000 < oldest_kept_ms) {
      lock.unlock();
      GiveUp(w, "older than lock.retention");
      lock.lock();
      continue;
    }
    lock.unlock();
    const Result<lock::CompleteStatus> done = CallBackend(
        "complete", [&] { return backend_.Complete(w.complete.held, w.complete.completion); });
    const std::string tick = FormatTick(w.complete.held.tick_unix);
    if (!done) {
      if (log_.Enabled(LogLevel::kDebug)) {
        LogBackendError(log_, LogLevel::kDebug, "complete", w.complete.held.job, tick, node_,
                        done.error());
      }
    } else {
      const bool landed = *done == lock::CompleteStatus::kCompleted;
      log_.Log(landed ? LogLevel::kInfo : LogLevel::kWarn, "complete",
               {{"job", w.complete.held.job},
                {"tick", tick},
                {"node", node_},
                {"outcome", landed ? "completed" : "not-owner"},
                {"late", FormatSeconds(clock_.Steady() - w.since)},
                {"fence", w.complete.held.fence}});
    }
    lock.lock();
    if (done) {
      wait = kFirstWait;
      next_try = clock_.Steady();  // the next one at once
    } else {
      pending_.push_front(std::move(w));
      next_try = clock_.Steady() + wait;
      wait = std::min(wait * 2, kLongestWait);
    }
  }
}

}  // namespace tickd::app
