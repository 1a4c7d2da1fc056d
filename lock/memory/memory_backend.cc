// The memory backend keeps the three things of lock/backend.h in maps under one
// mutex, so every call is one atomic step, like the Lua script / transaction of the
// real stores:
//   - ticks_: (job, T) → record {state, owner, node, fence, lease_until, completion};
//   - the lease is record.lease_until on the injected clock's Steady() line, so a
//     FakeClock drives expiry and a wall-clock step changes nothing;
//   - fences_: job → last fence handed out (strictly increasing per job);
//   - heads_: job → the latest tick of the job ever claimed (never pruned).
// Claim decides in this order, because an existing record is a stronger answer than
// the deadline: a replica that arrives late at a finished tick hears who won it.
//  −1. the request's max_lead is set and Wall() is before T + due_offset − max_lead →
//      early: this replica's clock is ahead of the store's (docs/design.md §1 rule 15);
//   0. the request knows a later claimed tick than heads_ holds → store-reset (the
//      store lost data: in tests, a backend swapped for an empty one);
//   1. a record for (job, T) exists: done or live → lost (names the holder); running
//      with an expired lease and recover → re-claim with a new token and a higher
//      fence while now ≤ expiry + starting_deadline (else missed); otherwise lost;
//   2. a record of a later tick of the job exists (running or done) → superseded,
//      naming the latest one: claims are monotonic per job. With max_lead, records
//      further than max_lead ahead of Wall() are passed over (claimed by a wrong
//      clock, or unchecked, for the future: they must not hold the job back);
//   3. Wall() > T + starting_deadline → missed;
//   4. forbid and another tick of the job runs with a live lease → busy;
//   5. won: new record, lease = now + req.lease, fence = ++fences_[job]. Fences are
//      plain counters here (no epoch, lock/backend.h): nothing outlives the instance.
// Refence (a retry's new fence) draws ++fences_[job] into a running record whose owner
// is the caller and whose lease is live.
// ForceRelease marks a running record whose lease expired as done ("released") and
// clears its owner token, so the old holder's Renew and Complete are refused.
#include "lock/memory/memory_backend.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <set>
#include <tuple>
#include <utility>

namespace tickd::lock {
namespace {

using Key = std::pair<std::string, std::int64_t>;  // (job, T)

struct TickRecord {
  bool done = false;
  std::string owner;
  std::string node;
  std::uint64_t fence = 0;
  SteadyTime lease_until;
  std::string config_hash;
  Completion completion;
};

class MemoryBackend final : public Backend {
 public:
  explicit MemoryBackend(Clock& clock) : clock_(clock) {}

  std::string_view name() const override { return "memory"; }

  std::vector<std::string> StartupWarnings() override {
    return {"lock backend memory: claims are shared only inside this process and are lost "
            "at exit"};
  }

  Result<ClaimOutcome> Claim(const ClaimRequest& req) override {
    std::lock_guard lock(mu_);
    const SteadyTime now = clock_.Steady();
    const Key key{req.job, req.tick_unix};
    ClaimOutcome out;
    const std::int64_t wall_ms = clock_.Wall().time_since_epoch().count();
    if (req.max_lead) {
      out.store_ms = wall_ms;
      if (wall_ms < req.tick_unix * 1000 + (req.due_offset - *req.max_lead).count()) {
        out.status = ClaimStatus::kEarly;
        return out;
      }
    }
    const std::int64_t head = heads_.contains(req.job) ? heads_[req.job] : 0;
    if (req.known_tick > head) {
      out.status = ClaimStatus::kStoreReset;
      out.holder_tick_unix = head;
      return out;
    }
    auto it = ticks_.find(key);
    if (it != ticks_.end()) {
      TickRecord& rec = it->second;
      const bool live = !rec.done && rec.lease_until > now;
      if (rec.done || live || !req.recover) {
        return Stamped(HolderOutcome(ClaimStatus::kLost, key, rec), out.store_ms);
      }
      // Recovery: the holder stopped renewing; the deadline counts from the expiry.
      if (req.starting_deadline && now > rec.lease_until + *req.starting_deadline) {
        out.status = ClaimStatus::kMissed;
        return out;
      }
      if (auto busy = BusyOutcome(req, now)) return Stamped(*busy, out.store_ms);
      rec = NewRecord(req, now);
      return Stamped(Won(rec), out.store_ms);
    }
    if (auto superseded = SupersededOutcome(req, wall_ms)) return Stamped(*superseded, out.store_ms);
    if (req.starting_deadline &&
        clock_.Wall() > WallTime(std::chrono::seconds(req.tick_unix)) + *req.starting_deadline) {
      out.status = ClaimStatus::kMissed;
      return out;
    }
    if (auto busy = BusyOutcome(req, now)) return Stamped(*busy, out.store_ms);
    TickRecord& rec = ticks_[key] = NewRecord(req, now);
    return Stamped(Won(rec), out.store_ms);
  }

  Result<RenewStatus> Renew(const HeldClaim& held) override {
    std::lock_guard lock(mu_);
    const SteadyTime now = clock_.Steady();
    auto it = ticks_.find(Key{held.job, held.tick_unix});
    if (it == ticks_.end()) return RenewStatus::kLost;
    TickRecord& rec = it->second;
    if (rec.done || rec.owner != held.owner_token || rec.lease_until <= now) {
      return RenewStatus::kLost;
    }
    rec.lease_until = now + held.lease;
    return RenewStatus::kRenewed;
  }

  // Under the one mutex: the owner test and the new fence are one step.
  Result<RefenceOutcome> Refence(const HeldClaim& held) override {
    std::lock_guard lock(mu_);
    auto it = ticks_.find(Key{held.job, held.tick_unix});
    if (it == ticks_.end()) return RefenceOutcome{};
    TickRecord& rec = it->second;
    if (rec.done || rec.owner != held.owner_token || rec.lease_until <= clock_.Steady()) {
      return RefenceOutcome{};
    }
    rec.fence = ++fences_[held.job];
    return RefenceOutcome{RefenceStatus::kRefenced, rec.fence};
  }

  Result<CompleteStatus> Complete(const HeldClaim& held, const Completion& completion) override {
    std::lock_guard lock(mu_);
    auto it = ticks_.find(Key{held.job, held.tick_unix});
    if (it == ticks_.end() || it->second.owner != held.owner_token) {
      return CompleteStatus::kNotOwner;
    }
    TickRecord& rec = it->second;
    if (rec.done) return CompleteStatus::kCompleted;  // a repeated Complete changes nothing
    rec.done = true;
    rec.completion = completion;
    rec.completion.output = std::string(OutputToStore(completion.output));
    rec.lease_until = clock_.Steady();
    if (!rec.completion.output.empty()) KeepNewestOutputs(held.job, completion.keep_outputs);
    return CompleteStatus::kCompleted;
  }

  Result<void> Record(const Observation& obs) override {
    std::lock_guard lock(mu_);
    std::vector<Observation>& seen = ledger_[Key{obs.job, obs.tick_unix}];
    // One observation per replica and tick: a later one from the same node replaces it.
    auto same_node = std::find_if(seen.begin(), seen.end(),
                                  [&](const Observation& o) { return o.node == obs.node; });
    if (same_node != seen.end()) {
      *same_node = obs;
    } else {
      seen.push_back(obs);
    }
    return {};
  }

  Result<std::vector<TickHistory>> History(std::string_view job, int limit) override {
    std::lock_guard lock(mu_);
    // Newest first: order keys by T descending, then job name.
    auto newer = [](const Key& a, const Key& b) {
      return std::tie(b.second, a.first) < std::tie(a.second, b.first);
    };
    std::set<Key, decltype(newer)> keys(newer);
    for (const auto& [key, rec] : ticks_) {
      if (job.empty() || key.first == job) keys.insert(key);
    }
    for (const auto& [key, obs] : ledger_) {
      if (job.empty() || key.first == job) keys.insert(key);
    }
    std::vector<TickHistory> out;
    for (const Key& key : keys) {
      if (limit >= 0 && static_cast<int>(out.size()) >= limit) break;
      TickHistory h;
      h.job = key.first;
      h.tick_unix = key.second;
      if (auto it = ticks_.find(key); it != ticks_.end()) {
        const TickRecord& rec = it->second;
        h.winner = rec.node;
        h.state = rec.done ? "done" : "running";
        h.run_outcome = rec.completion.outcome;
        h.exit_code = rec.completion.exit_code;
        h.duration = rec.completion.duration;
        h.fence = rec.fence;
        h.config_hash = rec.config_hash;
      }
      if (auto it = ledger_.find(key); it != ledger_.end()) h.observations = it->second;
      out.push_back(std::move(h));
    }
    return out;
  }

  Result<std::vector<std::string>> Outputs(std::string_view job,
                                           std::span<const std::int64_t> ticks) override {
    std::lock_guard lock(mu_);
    std::vector<std::string> out;
    for (const std::int64_t tick : ticks) {
      auto it = ticks_.find(Key{std::string(job), tick});
      out.push_back(it == ticks_.end() ? std::string() : it->second.completion.output);
    }
    return out;
  }

  Result<int> Prune(WallTime older_than) override {
    std::lock_guard lock(mu_);
    const SteadyTime now = clock_.Steady();
    const std::int64_t cutoff =
        std::chrono::duration_cast<std::chrono::seconds>(older_than.time_since_epoch()).count();
    int removed = 0;
    for (auto it = ticks_.begin(); it != ticks_.end();) {
      const bool live = !it->second.done && it->second.lease_until > now;
      if (it->first.second < cutoff && !live) {
        it = ticks_.erase(it);
        ++removed;
      } else {
        ++it;
      }
    }
    std::erase_if(ledger_, [&](const auto& entry) { return entry.first.second < cutoff; });
    return removed;
  }

  Result<std::vector<RunningClaim>> ListRunning() override {
    std::lock_guard lock(mu_);
    const SteadyTime now = clock_.Steady();
    std::vector<RunningClaim> out;
    for (const auto& [key, rec] : ticks_) {
      if (rec.done) continue;
      RunningClaim c{key.first,
                     key.second,
                     rec.node,
                     rec.fence,
                     rec.config_hash,
                     std::max(milliseconds(0),
                              std::chrono::duration_cast<milliseconds>(rec.lease_until - now)),
                     rec.lease_until > now};
      out.push_back(std::move(c));
    }
    std::stable_sort(out.begin(), out.end(), [](const RunningClaim& a, const RunningClaim& b) {
      return a.tick_unix < b.tick_unix;
    });
    return out;
  }

  // Under the one mutex, so no renew or complete can slip between the check and the
  // change. The owner token is cleared: the old holder's Renew and Complete are refused.
  Result<ForceReleaseStatus> ForceRelease(std::string_view job, std::int64_t tick_unix) override {
    std::lock_guard lock(mu_);
    const SteadyTime now = clock_.Steady();
    auto it = ticks_.find(Key{std::string(job), tick_unix});
    if (it == ticks_.end() || it->second.done) return ForceReleaseStatus::kNotRunning;
    TickRecord& rec = it->second;
    if (rec.lease_until > now) return ForceReleaseStatus::kHolderAlive;
    rec.done = true;
    rec.owner.clear();
    rec.completion = Completion{"released", std::nullopt, milliseconds(0)};
    return ForceReleaseStatus::kReleased;
  }

  Result<void> SetPause(const Pause& pause) override {
    std::lock_guard lock(mu_);
    pauses_[pause.job] = pause;
    return {};
  }

  Result<bool> ClearPause(std::string_view job) override {
    std::lock_guard lock(mu_);
    return pauses_.erase(std::string(job)) > 0;
  }

  Result<std::vector<Pause>> ListPauses() override {
    std::lock_guard lock(mu_);
    std::vector<Pause> out;
    for (const auto& [job, pause] : pauses_) out.push_back(pause);
    return out;
  }

 private:
  // Retention by count (Completion::keep_outputs): the outputs of `job` but its newest
  // `keep` are dropped; their records stay.
  void KeepNewestOutputs(const std::string& job, int keep) {
    if (keep <= 0) return;
    int kept = 0;
    for (auto it = ticks_.upper_bound(Key{job, INT64_MAX});
         it != ticks_.begin() && std::prev(it)->first.first == job;) {
      --it;
      std::string& output = it->second.completion.output;
      if (output.empty()) continue;
      if (kept < keep) {
        ++kept;
      } else {
        output.clear();
      }
    }
  }

  TickRecord NewRecord(const ClaimRequest& req, SteadyTime now) {
    TickRecord rec;
    rec.owner = req.owner_token;
    rec.node = req.node;
    rec.fence = ++fences_[req.job];
    std::int64_t& head = heads_[req.job];
    head = std::max(head, req.tick_unix);
    rec.lease_until = now + req.lease;
    rec.config_hash = req.config_hash;
    return rec;
  }

  static ClaimOutcome Won(const TickRecord& rec) {
    ClaimOutcome out;
    out.status = ClaimStatus::kWon;
    out.fence = rec.fence;
    return out;
  }

  static ClaimOutcome Stamped(ClaimOutcome out, std::int64_t store_ms) {
    out.store_ms = store_ms;
    return out;
  }

  static ClaimOutcome HolderOutcome(ClaimStatus status, const Key& key, const TickRecord& rec) {
    ClaimOutcome out;
    out.status = status;
    out.holder_node = rec.node;
    out.holder_tick_unix = key.second;
    out.holder_config_hash = rec.config_hash;
    out.holder_running = !rec.done;
    return out;
  }

  // The latest tick of the job after req's that has a record, if any; with max_lead,
  // records further than it ahead of the store's clock (wall_ms) do not count.
  std::optional<ClaimOutcome> SupersededOutcome(const ClaimRequest& req,
                                                std::int64_t wall_ms) const {
    auto latest = ticks_.upper_bound(Key{req.job, INT64_MAX});
    while (true) {
      if (latest == ticks_.begin()) return std::nullopt;
      --latest;
      if (latest->first.first != req.job || latest->first.second <= req.tick_unix) {
        return std::nullopt;
      }
      if (!req.max_lead || latest->first.second * 1000 - req.max_lead->count() <= wall_ms) break;
    }
    ClaimOutcome out = HolderOutcome(ClaimStatus::kSuperseded, latest->first, latest->second);
    out.holder_running = false;
    return out;
  }

  // forbid: another tick of the job still running with a live lease makes this one busy.
  std::optional<ClaimOutcome> BusyOutcome(const ClaimRequest& req, SteadyTime now) const {
    if (!req.forbid_overlap) return std::nullopt;
    for (auto it = ticks_.lower_bound(Key{req.job, INT64_MIN});
         it != ticks_.end() && it->first.first == req.job; ++it) {
      const TickRecord& rec = it->second;
      if (it->first.second != req.tick_unix && !rec.done && rec.lease_until > now) {
        return HolderOutcome(ClaimStatus::kBusy, it->first, rec);
      }
    }
    return std::nullopt;
  }

  Clock& clock_;
  std::mutex mu_;
  std::map<Key, TickRecord> ticks_;
  std::map<std::string, std::uint64_t> fences_;
  std::map<std::string, std::int64_t> heads_;
  std::map<Key, std::vector<Observation>> ledger_;
  std::map<std::string, Pause> pauses_;
};

// Forwards to a shared backend; see NewSharedBackendHandle.
class SharedBackendHandle final : public Backend {
 public:
  explicit SharedBackendHandle(std::shared_ptr<Backend> shared) : shared_(std::move(shared)) {}
  std::string_view name() const override { return shared_->name(); }
  std::vector<std::string> StartupWarnings() override { return shared_->StartupWarnings(); }
  Result<ClaimOutcome> Claim(const ClaimRequest& req) override { return shared_->Claim(req); }
  std::vector<Result<ClaimOutcome>> ClaimBatch(std::span<const ClaimRequest> reqs) override {
    return shared_->ClaimBatch(reqs);
  }
  Result<RenewStatus> Renew(const HeldClaim& held) override { return shared_->Renew(held); }
  Result<RefenceOutcome> Refence(const HeldClaim& held) override { return shared_->Refence(held); }
  Result<CompleteStatus> Complete(const HeldClaim& held, const Completion& c) override {
    return shared_->Complete(held, c);
  }
  Result<void> Record(const Observation& obs) override { return shared_->Record(obs); }
  Result<std::vector<TickHistory>> History(std::string_view job, int limit) override {
    return shared_->History(job, limit);
  }
  Result<std::vector<std::string>> Outputs(std::string_view job,
                                           std::span<const std::int64_t> ticks) override {
    return shared_->Outputs(job, ticks);
  }
  Result<int> Prune(WallTime older_than) override { return shared_->Prune(older_than); }
  Result<std::vector<RunningClaim>> ListRunning() override { return shared_->ListRunning(); }
  Result<ForceReleaseStatus> ForceRelease(std::string_view job, std::int64_t tick_unix) override {
    return shared_->ForceRelease(job, tick_unix);
  }
  Result<void> SetPause(const Pause& pause) override { return shared_->SetPause(pause); }
  Result<bool> ClearPause(std::string_view job) override { return shared_->ClearPause(job); }
  Result<std::vector<Pause>> ListPauses() override { return shared_->ListPauses(); }

 private:
  std::shared_ptr<Backend> shared_;
};

}  // namespace

std::unique_ptr<Backend> NewMemoryBackend(Clock& clock) {
  return std::make_unique<MemoryBackend>(clock);
}

std::unique_ptr<Backend> NewSharedBackendHandle(std::shared_ptr<Backend> shared) {
  return std::make_unique<SharedBackendHandle>(std::move(shared));
}

}  // namespace tickd::lock
