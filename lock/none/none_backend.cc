#include "lock/none/none_backend.h"

#include <atomic>

#include "lock/memory/memory_backend.h"

namespace tickd::lock {
namespace {

class NoneBackend final : public Backend {
 public:
  explicit NoneBackend(Clock& clock) : ledger_(NewMemoryBackend(clock)) {}

  std::string_view name() const override { return "none"; }

  std::vector<std::string> StartupWarnings() override {
    return {"lock backend none: nothing is shared between replicas, so every job runs on "
            "every replica; use it only with a single replica"};
  }

  Result<ClaimOutcome> Claim(const ClaimRequest&) override {
    ClaimOutcome out;
    out.status = ClaimStatus::kWon;
    out.fence = ++fence_;
    return out;
  }

  Result<RenewStatus> Renew(const HeldClaim&) override { return RenewStatus::kRenewed; }

  // Nothing is shared: every retry gets the next fence of this process.
  Result<RefenceOutcome> Refence(const HeldClaim&) override {
    return RefenceOutcome{RefenceStatus::kRefenced, ++fence_};
  }

  Result<CompleteStatus> Complete(const HeldClaim&, const Completion&) override {
    return CompleteStatus::kCompleted;
  }

  // The ledger lives in this process: `tickd status` shows what this replica saw.
  Result<void> Record(const Observation& obs) override { return ledger_->Record(obs); }
  Result<std::vector<TickHistory>> History(std::string_view job, int limit) override {
    return ledger_->History(job, limit);
  }
  Result<int> Prune(WallTime older_than) override { return ledger_->Prune(older_than); }

  // No claims are ever held, so nothing runs and nothing can be released.
  Result<std::vector<RunningClaim>> ListRunning() override { return std::vector<RunningClaim>{}; }
  Result<ForceReleaseStatus> ForceRelease(std::string_view, std::int64_t) override {
    return ForceReleaseStatus::kNotRunning;
  }

  // Nothing is shared, so a pause would hold on no other replica: refused, and
  // nothing is ever paused.
  Result<void> SetPause(const Pause&) override {
    return MakeError("none", "lock backend none keeps no shared state: nothing can be paused");
  }
  Result<bool> ClearPause(std::string_view) override { return false; }
  Result<std::vector<Pause>> ListPauses() override { return std::vector<Pause>{}; }

 private:
  std::atomic<std::uint64_t> fence_{0};
  std::unique_ptr<Backend> ledger_;
};

}  // namespace

std::unique_ptr<Backend> NewNoneBackend(Clock& clock) {
  return std::make_unique<NoneBackend>(clock);
}

}  // namespace tickd::lock
