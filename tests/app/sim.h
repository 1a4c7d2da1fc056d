// Simulated replicas for scheduler tests: one FakeClock, one memory backend shared
// by every replica (through TestBackend, which can fail renewals and records every
// completion), a Runner whose runs end on command, and captured log lines.
#pragma once

#include <atomic>
#include <catch2/catch.hpp>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "app/log.h"
#include "app/runner.h"
#include "app/scheduled_job.h"
#include "app/scheduler.h"
#include "base/clock.h"
#include "lock/memory/memory_backend.h"

namespace tickd::app::testing {

using std::chrono::milliseconds;
using std::chrono::seconds;

// 2026-11-21T14:00:00Z
inline constexpr std::int64_t kT0 = 1795269600;

inline WallTime WallAt(std::int64_t unix_s, std::int64_t extra_ms = 0) {
  return WallTime(milliseconds(unix_s * 1000 + extra_ms));
}

// Polls `pred` (1 ms real steps) for up to `limit` of real time.
inline bool Eventually(const std::function<bool()>& pred, milliseconds limit = seconds(20)) {
  for (auto i = limit.count(); i > 0; --i) {
    if (pred()) return true;
    std::this_thread::sleep_for(milliseconds(1));
  }
  return pred();
}

// Holds back whoever waits on it until Open() (or, so a test cannot hang, `limit`).
class Gate {
 public:
  void Wait(milliseconds limit = seconds(10)) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, limit, [&] { return open_; });
  }
  void Open() {
    std::lock_guard lock(mu_);
    open_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

// A run that ends when the test says so (or when terminated).
struct FakeRunState {
  std::mutex mu;
  std::condition_variable cv;
  std::optional<jobs::RunResult> result;
  std::optional<jobs::RunOutcome> terminated;
  int kills = 0;              // Kill() calls
  bool ignores_term = false;  // Terminate() is noted but the run goes on (until Kill)
  bool kill_leaves_running = false;  // Kill() ends the wait, not the run (left_running)

  void Finish(jobs::RunResult r) {
    std::lock_guard lock(mu);
    if (!result) result = std::move(r);
    cv.notify_all();
  }
  // `duration`: how long the execution says the process ran (RunResult::duration).
  void FinishWithExit(int code, milliseconds duration = milliseconds(0)) {
    jobs::RunResult r;
    r.outcome = code == 0 ? jobs::RunOutcome::kDone : jobs::RunOutcome::kFailed;
    r.exit_code = code;
    r.duration = duration;
    Finish(r);
  }
  bool was_terminated() {
    std::lock_guard lock(mu);
    return terminated.has_value();
  }
};

class FakeExecution final : public jobs::Execution {
 public:
  explicit FakeExecution(std::shared_ptr<FakeRunState> s) : s_(std::move(s)) {}
  void Terminate(jobs::RunOutcome reason) override {
    std::lock_guard lock(s_->mu);
    if (s_->result) return;
    if (!s_->terminated) s_->terminated = reason;
    if (s_->ignores_term) return;
    jobs::RunResult r;
    r.outcome = reason;
    r.signal = 15;
    s_->result = r;
    s_->cv.notify_all();
  }
  void Kill(jobs::RunOutcome reason) override {
    std::lock_guard lock(s_->mu);
    ++s_->kills;
    if (s_->result) return;
    jobs::RunResult r;
    r.outcome = s_->terminated.value_or(reason);
    s_->terminated = r.outcome;
    if (s_->kill_leaves_running) {
      r.left_running = true;
    } else {
      r.signal = 9;
    }
    s_->result = r;
    s_->cv.notify_all();
  }
  std::optional<jobs::RunResult> WaitFor(milliseconds d) override {
    std::unique_lock lock(s_->mu);
    s_->cv.wait_for(lock, d, [&] { return s_->result.has_value(); });
    return s_->result;
  }

 private:
  std::shared_ptr<FakeRunState> s_;
};

class FakeRunner final : public Runner {
 public:
  // Per start: an exit code to end with at once, or nullopt to hold until the test
  // finishes it. Default: exit 0 at once.
  std::function<std::optional<int>(const jobs::ProcessSpec&)> plan = [](const auto&) {
    return std::optional<int>(0);
  };
  // The runs started from now on ignore Terminate (noted in `terminated`) until Kill;
  // with kill_leaves_running, Kill gives up on them as on a call on a thread.
  std::atomic<bool> runs_ignore_term{false};
  std::atomic<bool> kill_leaves_running{false};
  std::atomic<bool> throw_on_start{false};
  std::atomic<bool> fail_to_start{false};
  // Called at each start after its "hello" line, to print more (set before the run).
  std::function<void(const jobs::OutputSink&)> print;

  Result<std::unique_ptr<jobs::Execution>> Start(const config::Job&, const jobs::ProcessSpec& spec,
                                                 jobs::OutputSink sink) override {
    if (throw_on_start || fail_to_start) {
      {
        std::lock_guard lock(mu_);
        specs_.push_back(spec);
      }
      if (throw_on_start) throw std::runtime_error("boom");
      return MakeError("spawn", "no such workdir");
    }
    auto state = std::make_shared<FakeRunState>();
    state->ignores_term = runs_ignore_term;
    state->kill_leaves_running = kill_leaves_running;
    std::optional<int> code = plan(spec);
    if (sink) sink("stdout", "hello from " + spec.env.at("TICKD_NODE"));
    if (sink && print) print(sink);
    if (code) state->FinishWithExit(*code);
    // The spec and its run appear together: a test that saw starts() == n can use run(n - 1).
    std::lock_guard lock(mu_);
    specs_.push_back(spec);
    runs_.push_back(state);
    return std::make_unique<FakeExecution>(state);
  }

  std::vector<jobs::ProcessSpec> specs() {
    std::lock_guard lock(mu_);
    return specs_;
  }
  std::size_t starts() {
    std::lock_guard lock(mu_);
    return specs_.size();
  }
  std::shared_ptr<FakeRunState> run(std::size_t i) {
    std::lock_guard lock(mu_);
    return i < runs_.size() ? runs_[i] : nullptr;
  }

 private:
  std::mutex mu_;
  std::vector<jobs::ProcessSpec> specs_;
  std::vector<std::shared_ptr<FakeRunState>> runs_;
};

// Forwards to the shared memory store; can fail renewals and records completions.
class TestBackend final : public lock::Backend {
 public:
  explicit TestBackend(std::shared_ptr<lock::Backend> inner) : inner_(std::move(inner)) {}
  std::atomic<bool> renew_lost{false};
  std::atomic<bool> renew_error{false};
  std::atomic<bool> claim_error{false};
  // A crashed replica: its renewals and completions never reach the store.
  std::atomic<bool> dead{false};
  std::atomic<int> renewals{0};
  // Run at the start of each renewal / ledger write (a store slow to answer).
  std::function<void()> before_renew;
  std::function<void()> before_record;
  // Run at the start of each claim, on the claiming thread (a store slow to decide).
  std::function<void()> before_claim;

  std::string_view name() const override { return "test"; }
  Result<lock::ClaimOutcome> Claim(const lock::ClaimRequest& req) override {
    if (claim_error) return MakeError("test", "backend down");
    if (before_claim) before_claim();
    {
      std::lock_guard lock(mu_);
      claims_.push_back(req);
    }
    return store()->Claim(req);
  }
  // A store that lost its data: from now on every call goes to `empty` instead.
  void ForgetEverything(std::shared_ptr<lock::Backend> empty) {
    std::lock_guard lock(mu_);
    amnesia_ = std::move(empty);
  }
  // Answers one claim after the other, as a streaming backend does; runs
  // `after_first_answer` (when set) between the first answer and the rest. With
  // `observe_in_claim`, a claim records its observation itself (as SQLite's and
  // Redis's do) and says so.
  std::function<void()> after_first_answer;
  bool observe_in_claim = false;
  void ClaimBatchAsAnswered(std::span<const lock::ClaimRequest> reqs,
                            const ClaimAnswer& on_answer) override {
    for (std::size_t i = 0; i < reqs.size(); ++i) {
      Result<lock::ClaimOutcome> r = Claim(reqs[i]);
      if (r && observe_in_claim && reqs[i].observe) {
        r->observed = static_cast<bool>(store()->Record(
            lock::Observation{reqs[i].job, reqs[i].tick_unix, reqs[i].node,
                              std::string(lock::ClaimStatusName(r->status)),
                              reqs[i].node_wall, reqs[i].config_hash, r->fence}));
      }
      on_answer(i, std::move(r));
      if (i == 0 && after_first_answer) after_first_answer();
    }
  }
  Result<lock::RenewStatus> Renew(const lock::HeldClaim& held) override {
    ++renewals;
    if (before_renew) before_renew();
    if (renew_error || dead) return MakeError("test", "renew timed out");
    if (renew_lost) return lock::RenewStatus::kLost;
    return store()->Renew(held);
  }
  // Refences fail (the store did not answer) / are refused (kNotOwner) while set.
  std::atomic<bool> refence_error{false};
  std::atomic<bool> refence_not_owner{false};
  Result<lock::RefenceOutcome> Refence(const lock::HeldClaim& held) override {
    {
      std::lock_guard lock(mu_);
      refences_.push_back(held);
    }
    if (refence_error || dead) return MakeError("test", "refence timed out");
    if (refence_not_owner) return lock::RefenceOutcome{};
    return store()->Refence(held);
  }
  // The next this many completes fail (the store did not answer).
  std::atomic<int> complete_errors{0};
  Result<lock::CompleteStatus> Complete(const lock::HeldClaim& held,
                                        const lock::Completion& c) override {
    {
      std::lock_guard lock(mu_);
      completions_.emplace_back(held, c);
    }
    if (dead) return MakeError("test", "connection lost");
    if (complete_errors.fetch_sub(1) > 0) return MakeError("test", "complete timed out");
    return store()->Complete(held, c);
  }
  Result<void> Record(const lock::Observation& obs) override {
    if (before_record) before_record();
    return store()->Record(obs);
  }
  Result<std::vector<lock::TickHistory>> History(std::string_view job, int limit) override {
    return store()->History(job, limit);
  }
  Result<int> Prune(WallTime older_than) override {
    ++prunes;
    return store()->Prune(older_than);
  }
  // What SizeWarnings answers, and how often the scheduler asked.
  std::atomic<int> prunes{0};
  std::atomic<int> size_asks{0};
  std::vector<std::string> size_warnings;  // set before the replicas start
  std::vector<std::string> SizeWarnings() override {
    ++size_asks;
    return size_warnings;
  }
  Result<std::vector<std::string>> Outputs(std::string_view job,
                                           std::span<const std::int64_t> ticks) override {
    return store()->Outputs(job, ticks);
  }
  Result<std::vector<lock::RunningClaim>> ListRunning() override { return store()->ListRunning(); }
  Result<lock::ForceReleaseStatus> ForceRelease(std::string_view job, std::int64_t t) override {
    return store()->ForceRelease(job, t);
  }
  std::atomic<bool> pauses_error{false};
  Result<void> SetPause(const lock::Pause& p) override { return store()->SetPause(p); }
  Result<bool> ClearPause(std::string_view job) override { return store()->ClearPause(job); }
  Result<std::vector<lock::Pause>> ListPauses() override {
    if (pauses_error) return MakeError("test", "pauses unreadable");
    return store()->ListPauses();
  }

  std::vector<std::pair<lock::HeldClaim, lock::Completion>> completions() {
    std::lock_guard lock(mu_);
    return completions_;
  }
  std::vector<lock::ClaimRequest> claims() {
    std::lock_guard lock(mu_);
    return claims_;
  }
  // The claims each Refence was asked for, in order.
  std::vector<lock::HeldClaim> refences() {
    std::lock_guard lock(mu_);
    return refences_;
  }

 private:
  // The store calls go to: the shared one, or the empty one after ForgetEverything.
  std::shared_ptr<lock::Backend> store() {
    std::lock_guard lock(mu_);
    return amnesia_ ? amnesia_ : inner_;
  }
  std::shared_ptr<lock::Backend> amnesia_;  // ForgetEverything
  std::shared_ptr<lock::Backend> inner_;
  std::mutex mu_;
  std::vector<std::pair<lock::HeldClaim, lock::Completion>> completions_;
  std::vector<lock::ClaimRequest> claims_;
  std::vector<lock::HeldClaim> refences_;
};

inline std::int64_t FloorDiv(std::int64_t a, std::int64_t b) {
  return a / b - ((a % b != 0) && ((a < 0) != (b < 0)) ? 1 : 0);
}

// A job ticking every `period` seconds since the epoch (as @every does), `true` as
// its command, starting_deadline 10 s unless `edit` says otherwise.
inline std::shared_ptr<const ScheduledJob> EveryJob(
    const std::string& name, std::int64_t period,
    const std::function<void(config::Job&)>& edit = nullptr) {
  auto sj = std::make_shared<ScheduledJob>();
  sj->job.name = name;
  sj->job.schedule_text = "@every " + std::to_string(period) + "s";
  sj->job.shell = "true";
  sj->job.starting_deadline = std::min<milliseconds>(seconds(10), seconds(period));
  if (edit) edit(sj->job);
  sj->config_hash = "hash-" + name;
  sj->next = [period](std::int64_t after) -> std::optional<std::int64_t> {
    return (FloorDiv(after, period) + 1) * period;
  };
  sj->prev = [period](std::int64_t before) -> std::optional<std::int64_t> {
    return (FloorDiv(before - 1, period)) * period;
  };
  return sj;
}

class Sim;

// A memory store on a clock of its own, `behind` the Sim's (whose replicas' clocks are
// then that far ahead of the store's), moved on together with it. Made by
// Sim::NewStoreBehind, which keeps it until the replicas that use it are gone.
struct StoreBehind {
  StoreBehind(Sim& of, WallTime wall)
      : sim(of), clock(wall), store(lock::NewMemoryBackend(clock)) {}
  // The store's clock first: no claim sees the replica's moved and the store's not.
  void Step(milliseconds by, bool runs_done = true);
  Sim& sim;
  FakeClock clock;
  std::unique_ptr<lock::Backend> store;
};

class Sim {
 public:
  explicit Sim(WallTime start, LogFormat format = LogFormat::kLogfmt)
      : clock(start),
        store(lock::NewMemoryBackend(clock)),
        backend(store),
        log(clock, format, LogLevel::kInfo, [this](std::string_view line) {
          std::lock_guard lock(mu_);
          lines_.emplace_back(line);
        }) {}
  ~Sim() {
    for (auto& r : replicas_) r->Shutdown(milliseconds(0));
  }

  // `own_backend`: this replica's view of the store (default: the shared TestBackend).
  Scheduler& AddReplica(const std::string& node, JobSet jobs,
                        const std::function<void(SchedulerOptions&)>& edit = nullptr,
                        lock::Backend* own_backend = nullptr) {
    SchedulerOptions o;
    o.node = node;
    o.max_real_wait = milliseconds(1);
    if (edit) edit(o);
    replicas_.push_back(std::make_unique<Scheduler>(
        clock, own_backend != nullptr ? *own_backend : backend, runner, log, o));
    replicas_.back()->Start(std::move(jobs));
    return *replicas_.back();
  }
  Scheduler& replica(std::size_t i) { return *replicas_.at(i); }
  StoreBehind& NewStoreBehind(milliseconds behind) {
    stores_behind_.push_back(std::make_unique<StoreBehind>(*this, clock.Wall() - behind));
    return *stores_behind_.back();
  }
  // Another view of the shared store for one replica (to make it fail alone); it
  // outlives the replicas.
  TestBackend& NewView() {
    views_.push_back(std::make_unique<TestBackend>(store));
    return *views_.back();
  }

  // Waits until every replica's loop sleeps having looked at the current time (and,
  // with runs_done, every run has completed), so advancing the clock now cannot race
  // with work still due at this instant.
  void WaitQuiet(bool runs_done = true) {
    bool ok = Eventually([&] {
      const SteadyTime now = clock.Steady();
      for (auto& r : replicas_) {
        const std::optional<SteadyTime> until = r->sleeping_until();
        if (!until || *until <= now) return false;
        if (runs_done && r->active_runs() != 0) return false;
      }
      return clock.sleepers() >= static_cast<int>(replicas_.size());
    });
    if (!ok) {
      for (auto& r : replicas_) {
        auto until = r->sleeping_until();
        UNSCOPED_INFO("replica sleeping_until=" << (until ? until->time_since_epoch().count() : -1)
                                                << " now="
                                                << clock.Steady().time_since_epoch().count()
                                                << " active_runs=" << r->active_runs());
      }
      for (const auto& l : lines()) UNSCOPED_INFO(l);
    }
    REQUIRE(ok);
  }
  void Step(milliseconds by, bool runs_done = true) {
    WaitQuiet(runs_done);
    clock.Advance(by);
  }

  std::vector<std::string> lines() {
    std::lock_guard lock(mu_);
    return lines_;
  }
  // Lines containing every one of `parts`.
  std::vector<std::string> Grep(std::initializer_list<std::string> parts) {
    std::vector<std::string> out;
    for (const std::string& l : lines()) {
      bool all = true;
      for (const std::string& p : parts) all = all && l.find(p) != std::string::npos;
      if (all) out.push_back(l);
    }
    return out;
  }

  FakeClock clock;
  std::shared_ptr<lock::Backend> store;
  TestBackend backend;
  FakeRunner runner;
  Logger log;

 private:
  std::mutex mu_;
  std::vector<std::string> lines_;
  // Before replicas_: destroyed after them.
  std::vector<std::unique_ptr<TestBackend>> views_;
  std::vector<std::unique_ptr<StoreBehind>> stores_behind_;
  std::vector<std::unique_ptr<Scheduler>> replicas_;
};

inline void StoreBehind::Step(milliseconds by, bool runs_done) {
  sim.WaitQuiet(runs_done);
  clock.Advance(by);
  sim.clock.Advance(by);
}

}  // namespace tickd::app::testing
