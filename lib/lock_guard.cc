// Store::try_lock and LockGuard (include/tickd/store.h): an ad-hoc lock is a claim of
// a tick of the job "lock.<key>", made and renewed with the claim protocol every
// backend already has (docs/design.md §1 "Locks"):
//   - each acquisition claims a fresh tick: the wall second, or one past the latest
//     tick of the key the store has seen claimed when that is later (a superseded
//     answer names it; after a lost answer for a tick already done, the store's
//     newest record of the key, History(job, 1), does), so a key released is
//     acquired again at once although its ticks are remembered for the retention
//     period and claims are monotonic per job;
//   - concurrency forbid makes it exclusive: while one tick of the key runs with a
//     live lease, a claim of another answers busy;
//   - no starting deadline (ticks running ahead of the clock are never missed); no
//     ledger observations (only the tick records).
#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "app/run_supervisor.h"
#include "app/scheduler.h"
#include "app/status_cli.h"
#include "lib/store_impl.h"

namespace tickd {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kMinLockLease{100};
constexpr std::size_t kMaxKeyBytes = 58;  // "lock." + key stays within a job name's 64
// Claims per try_lock: each retry follows a release (or a later acquisition) seen in
// the store, so more than a few means the key changes hands faster than we ask.
constexpr int kClaimsPerTry = 4;

void CheckKey(std::string_view key) {
  const bool ok =
      !key.empty() && key.size() <= kMaxKeyBytes && std::all_of(key.begin(), key.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
      });
  if (!ok) {
    throw std::invalid_argument("tickd::Store::try_lock: key '" + std::string(key) +
                                "' is not [a-z0-9._-]{1,58}");
  }
}

}  // namespace

struct LockGuard::Impl {
  std::shared_ptr<Store::Impl> store;
  std::string key;
  lock::HeldClaim held;
  SteadyTime claim_sent;
  std::stop_source lost;

  std::mutex mu;
  std::condition_variable cv;
  bool releasing = false;  // guarded by mu
  bool released = false;   // guarded by mu
  // The lease (app/run_supervisor.h's rule), guarded by mu: renewed every lease/3; it
  // counts as held until the last confirmed renewal's send time + LeaseValidity(lease).
  SteadyTime valid_until;
  SteadyTime next_renew;
  bool refused = false;  // a renewal was answered kLost
  // Two threads, so that a store that does not answer never delays lost(): the
  // watchdog keeps the deadline, the renewer waits on the store.
  std::thread watchdog;
  std::thread renewer;

  void Start() {
    valid_until = claim_sent + app::LeaseValidity(held.lease);
    next_renew = claim_sent + held.lease / 3;
    watchdog = std::thread([this] { Watch(); });
    renewer = std::thread([this] { Renew(); });
  }

  // lost() fires DefaultStopGrace(lease) before the validity ends unless a renewal was
  // confirmed (docs/design.md §1 "Locks"), or at once when a renewal is refused.
  void Watch() {
    Clock& clock = *store->clock;
    const milliseconds stop_grace = config::DefaultStopGrace(held.lease);
    std::unique_lock lock(mu);
    while (!releasing) {
      const SteadyTime now = clock.Steady();
      const SteadyTime stop_at = valid_until - stop_grace;
      if (refused || now >= stop_at) {
        lock.unlock();  // the token's callbacks run here, and may ask held()
        lost.request_stop();
        cv.notify_all();  // the renewer stops
        return;
      }
      const milliseconds wait = std::min<milliseconds>(
          {std::chrono::duration_cast<milliseconds>(stop_at - now), store->max_real_wait});
      cv.wait_for(lock, std::max(wait, milliseconds(1)));
    }
  }

  void Renew() {
    Clock& clock = *store->clock;
    std::unique_lock lock(mu);
    while (!releasing && !lost.stop_requested()) {
      const SteadyTime now = clock.Steady();
      if (now >= next_renew) {
        lock.unlock();
        const SteadyTime sent = clock.Steady();
        auto renewed = store->backend->Renew(held);
        lock.lock();
        if (renewed && *renewed == lock::RenewStatus::kLost) {
          refused = true;
          cv.notify_all();
          return;
        }
        if (renewed) {
          valid_until = std::max(valid_until, sent + app::LeaseValidity(held.lease));
          next_renew = sent + held.lease / 3;
        } else {
          next_renew = clock.Steady() + std::max(milliseconds(10), held.lease / 15);
        }
        continue;
      }
      const milliseconds wait = std::min<milliseconds>(
          {std::chrono::duration_cast<milliseconds>(next_renew - now), store->max_real_wait});
      cv.wait_for(lock, std::max(wait, milliseconds(1)));
    }
  }

  void Release() {
    {
      std::lock_guard lock(mu);
      if (released) return;
      releasing = true;
      released = true;
    }
    cv.notify_all();
    if (watchdog.joinable()) watchdog.join();
    if (renewer.joinable()) renewer.join();  // a renewal in flight: within op_timeout
    const bool was_lost = lost.stop_requested();
    lost.request_stop();
    lock::Completion completion;
    completion.outcome = was_lost ? "lease-lost" : "done";
    completion.duration =
        std::chrono::duration_cast<milliseconds>(store->clock->Steady() - claim_sent);
    // Refused (kNotOwner) or unanswered: the lease expires by itself.
    (void)store->backend->Complete(held, completion);
  }
};

LockGuard::LockGuard(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
LockGuard::LockGuard(LockGuard&&) noexcept = default;
LockGuard& LockGuard::operator=(LockGuard&& other) noexcept {
  if (this != &other) {
    release();
    impl_ = std::move(other.impl_);
  }
  return *this;
}
LockGuard::~LockGuard() { release(); }

const std::string& LockGuard::key() const { return impl_->key; }
std::uint64_t LockGuard::fence() const { return impl_->held.fence; }
std::stop_token LockGuard::lost() const { return impl_->lost.get_token(); }
bool LockGuard::held() const {
  if (!impl_) return false;
  std::lock_guard lock(impl_->mu);
  return !impl_->released && !impl_->lost.stop_requested();
}
void LockGuard::release() {
  if (impl_) impl_->Release();
}

LockGuard& LockAttempt::guard() {
  if (!guard_) throw std::logic_error("tickd::LockAttempt::guard(): the lock was not acquired");
  return *guard_;
}

LockAttempt Store::try_lock(std::string_view key, std::chrono::milliseconds lease,
                            std::string_view node) {
  CheckKey(key);
  if (lease < kMinLockLease) {
    throw std::invalid_argument("tickd::Store::try_lock: lease below 100 ms");
  }
  Clock& clock = *impl_->clock;
  lock::ClaimRequest req;
  req.job = "lock." + std::string(key);
  req.node = node.empty() ? app::DefaultNodeId() : std::string(node);
  req.lease = lease;
  req.starting_deadline = std::nullopt;
  req.forbid_overlap = true;
  req.config_hash = "lock";
  req.tick_unix =
      std::chrono::duration_cast<std::chrono::seconds>(clock.Wall().time_since_epoch()).count();
  LockAttempt out;
  for (int i = 0; i < kClaimsPerTry; ++i) {
    req.owner_token = app::NewOwnerToken();
    req.node_wall = clock.Wall();
    const SteadyTime sent = clock.Steady();
    auto claimed = impl_->backend->Claim(req);
    if (!claimed) {
      out.status_ = LockAttempt::Status::kFailed;
      out.error_ = StoreError{claimed.error().ToString()};
      return out;
    }
    const lock::ClaimOutcome& o = *claimed;
    switch (o.status) {
      case lock::ClaimStatus::kWon: {
        auto g = std::make_unique<LockGuard::Impl>();
        g->store = impl_;
        g->key = std::string(key);
        g->held = lock::HeldClaim{req.job, req.tick_unix, req.owner_token, o.fence, lease};
        g->claim_sent = sent;
        g->Start();
        out.status_ = LockAttempt::Status::kAcquired;
        out.guard_.emplace(LockGuard(std::move(g)));
        return out;
      }
      case lock::ClaimStatus::kBusy:
        out.status_ = LockAttempt::Status::kHeld;
        out.holder_ = o.holder_node;
        return out;
      case lock::ClaimStatus::kLost:
        if (o.holder_running) {
          out.status_ = LockAttempt::Status::kHeld;
          out.holder_ = o.holder_node;
          return out;
        }
        // Released within this second, maybe acquired since: claim past the newest
        // acquisition the store remembers.
        if (auto newest = impl_->backend->History(req.job, 1); newest && !newest->empty()) {
          req.tick_unix = std::max(req.tick_unix, newest->front().tick_unix) + 1;
        } else {
          ++req.tick_unix;
        }
        break;
      case lock::ClaimStatus::kSuperseded:
        // A later acquisition exists (running or done): claim past it.
        req.tick_unix = std::max(req.tick_unix, o.holder_tick_unix) + 1;
        break;
      case lock::ClaimStatus::kMissed:
      case lock::ClaimStatus::kStoreReset:
      case lock::ClaimStatus::kEarly:
        // None is asked for (no deadline, no known tick, no clock check): a store that says so
        // is not one we understand; fail closed.
        out.status_ = LockAttempt::Status::kFailed;
        out.error_ = StoreError{impl_->url + ": unexpected claim answer " +
                                std::string(lock::ClaimStatusName(o.status))};
        return out;
    }
  }
  out.status_ = LockAttempt::Status::kHeld;  // changed hands every time we asked
  return out;
}

}  // namespace tickd
