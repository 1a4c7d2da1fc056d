#include "app/run_supervisor.h"

#include <signal.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <utility>

#include "app/backend_call.h"

namespace tickd::app {

using std::chrono::milliseconds;

namespace {

// The `output` log lines of one run, both streams together: the rest is counted in
// the run line's dropped_lines (docs/design.md §5). The stored tail sees every line.
constexpr std::size_t kLoggedLinesPerRun = 1'000;
// What the wall clock may gain on the monotonic one between a claim and its start
// before the start waits for the monotonic clock (NotBefore): more than the clocks'
// millisecond readings can disagree by, so a clock that is right starts on its own
// timer at T, not a millisecond or two later.
constexpr milliseconds kWallGainIgnored{5};

// How soon to try again after a renewal that failed (not answered kLost): often
// enough that a short backend hiccup does not cost the lease. Also how often the
// supervisor looks for the answer of a renewal in flight.
milliseconds RenewRetryDelay(milliseconds lease) { return std::max(milliseconds(10), lease / 15); }

// What the starts of an instant cost the machine, each: what an exec costs on the
// 2-core benchmark VM (bench/README.md "The daemon").
milliseconds StartsCost(std::size_t starts) {
  return milliseconds(static_cast<std::int64_t>(starts) / 10);
}

// How long after T the supervisor of a run prepared ahead of T looks at it: at once
// when its Release starts it; when it starts itself, once the starts of its instant
// are likely done (its settle(), plus StartsCost), so the supervisors do not take the
// CPUs from the starts still going. An instant of a few claims is looked at sooner,
// 2 ms a claim up to settle(): a job that exits before the first look is seen exiting
// then, and its duration would be that long (a `true` read 0.020s before 2026-11-29).
milliseconds LookAfter(const jobs::PreparedStart* prepared, std::size_t instant_starts) {
  if (prepared == nullptr || prepared->settle() == milliseconds(0)) return milliseconds(0);
  constexpr milliseconds kLookPerStart{2};
  const auto starts = static_cast<std::int64_t>(std::max<std::size_t>(instant_starts, 1));
  return std::min(prepared->settle(), kLookPerStart * starts) + StartsCost(instant_starts);
}

}  // namespace

milliseconds InstantStartsDone(std::size_t instant_claims) {
  return jobs::kSettleAfterStart + StartsCost(instant_claims);
}

std::map<std::string, std::string> JobEnvironment(const WonTick& tick, int attempt) {
  std::map<std::string, std::string> env = tick.job->job.env;
  env["TICKD_JOB"] = tick.job->job.name;
  env["TICKD_TICK"] = FormatTick(tick.held.tick_unix);
  env["TICKD_TICK_UNIX"] = std::to_string(tick.held.tick_unix);
  env["TICKD_NODE"] = tick.node;
  env["TICKD_FENCE"] = std::to_string(tick.held.fence);
  env["TICKD_ATTEMPT"] = std::to_string(attempt);
  return env;
}

jobs::ProcessSpec MakeProcessSpec(const WonTick& tick, int attempt) {
  const config::Job& job = tick.job->job;
  jobs::ProcessSpec spec;
  // Every line reaches the supervisor's sink, which logs the first kLoggedLinesPerRun
  // and keeps the tail of all of them (the end of a long output is what matters).
  spec.max_output_lines = SIZE_MAX;
  if (job.shell) {
    spec.argv = jobs::ShellArgv(*job.shell);
  } else {
    spec.argv = job.argv;
  }
  spec.env = JobEnvironment(tick, attempt);
  spec.workdir = job.workdir;
  spec.timeout = job.timeout;
  spec.kill_grace = job.kill_grace;
  return spec;
}

// A renewal's answer, handed from the thread that sent it to the supervisor.
struct RunSupervisor::RenewSlot {
  std::mutex mu;
  RunSupervisor* owner = nullptr;  // null once the supervisor no longer listens
  bool in_flight = false;
  std::optional<std::pair<SteadyTime, Result<lock::RenewStatus>>> answer;  // sent, answer
};

// What the run line and the completion report; filled as the run goes. The defaults
// are what an unexpected exit (an exception) reports.
struct RunSupervisor::Outcome {
  jobs::RunOutcome outcome = jobs::RunOutcome::kFailed;
  std::optional<int> exit_code;
  std::optional<int> signal;
  std::string error = "the supervisor ended before the run did";
  int attempts = 0;
  std::size_t dropped_lines = 0;
  // The run was still going when its lease ended: "killed" (SIGKILL to its process
  // group) or "running" (an in-process call, left on its thread); "": it was not.
  std::string lease_end;
  // An attempt's process exited leaving others in its process group, which were ended.
  bool leftovers_ended = false;
};

RunSupervisor::RunSupervisor(Clock& clock, lock::Backend& backend, Runner& runner, Logger& log,
                             WonTick tick, milliseconds max_real_wait,
                             std::function<void()> on_done)
    : clock_(clock),
      backend_(backend),
      runner_(runner),
      log_(log),
      tick_(std::move(tick)),
      tick_text_(FormatTick(tick_.held.tick_unix)),
      max_real_wait_(std::max(milliseconds(1), max_real_wait)),
      on_done_(std::move(on_done)),
      output_tail_(tick_.output_bytes),
      notify_tail_(kNotifyOutputBytes),
      stop_grace_(std::clamp(tick_.stop_grace.value_or(config::DefaultStopGrace(tick_.held.lease)),
                             milliseconds(0), tick_.held.lease / 3)),
      renew_(std::make_shared<RenewSlot>()) {
  renew_->owner = this;
  if (tick_.renew_threads == nullptr) {
    own_renew_threads_ = std::make_unique<ThreadPool>(std::chrono::seconds(60), kMaxRenewThreads);
  }
}

RunSupervisor::~RunSupervisor() { Join(); }

void RunSupervisor::Start(ThreadPool& threads) {
  {
    std::lock_guard lock(mu_);
    started_ = true;
  }
  Result<void> posted = threads.Post([this] {
    Main();
    std::lock_guard lock(mu_);
    returned_ = true;
    cv_.notify_all();  // the last use of `this` on the pool's thread
  });
  if (!posted) {
    Outcome out;
    out.error = "cannot start the run: " + posted.error().ToString();
    Finish(out, /*may_wait=*/false);
    std::lock_guard lock(mu_);
    returned_ = true;
  }
}

void RunSupervisor::Join() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [this] { return !started_ || returned_; });
}

void RunSupervisor::StopRetries() {
  std::lock_guard lock(mu_);
  stop_retries_ = true;
  cv_.notify_all();
}

void RunSupervisor::Terminate(jobs::RunOutcome reason) {
  std::lock_guard lock(mu_);
  stop_retries_ = true;
  terminate_reason_ = reason;
  if (exec_ != nullptr) exec_->Terminate(reason);
  cv_.notify_all();
}

void RunSupervisor::Main() {
  Outcome out;
  // The scope guard: whatever way Supervise ends, the claim is completed and the run
  // line logged. (An exception escaping a std::thread would end the daemon.)
  struct Completer {
    RunSupervisor* self;
    Outcome& out;
    ~Completer() { self->Finish(out, /*may_wait=*/true); }
  } completer{this, out};
  try {
    Supervise(out);
  } catch (const std::exception& e) {
    out.outcome = jobs::RunOutcome::kFailed;
    out.error = std::string("exception: ") + e.what();
  } catch (...) {
    out.outcome = jobs::RunOutcome::kFailed;
    out.error = "unknown exception";
  }
}

void RunSupervisor::Supervise(Outcome& out) {
  const config::Job& job = tick_.job->job;
  const milliseconds lease = tick_.held.lease;
  valid_until_ = tick_.claim_sent + LeaseValidity(tick_.lead + lease);
  next_renew_ = tick_.claim_sent + tick_.lead + lease / 3;

  const int attempts = std::max(1, job.retries.attempts);
  // Retries end at the job's next instant (docs/design.md §1 rule 14); max(): never.
  const WallTime retries_end =
      attempts > 1 ? NextInstant().value_or(WallTime::max()) : WallTime::max();
  for (int attempt = 1; attempt <= attempts; ++attempt) {
    std::optional<milliseconds> cut_timeout;  // a retry's timeout, cut at the next instant
    if (attempt > 1 && !PrepareRetry(attempt, retries_end, cut_timeout)) break;
    {
      std::lock_guard lock(mu_);
      if (terminate_reason_) {
        out.outcome = *terminate_reason_;
        break;
      }
    }
    out.attempts = attempt;
    out.exit_code.reset();
    out.signal.reset();
    out.error.clear();
    jobs::ProcessSpec spec = MakeProcessSpec(tick_, attempt);
    if (cut_timeout) spec.timeout = *cut_timeout;
    if (log_.Enabled(LogLevel::kDebug)) {
      std::string env_text;
      for (const auto& [key, value] : job.env) {
        env_text += (env_text.empty() ? "" : " ") + key + "=" + MaskEnvValue(key, value);
      }
      log_.Log(LogLevel::kDebug, "attempt",
               {{"job", job.name},
                {"tick", tick_text_},
                {"node", tick_.node},
                {"attempt", attempt},
                {"env", env_text}});
    }
    jobs::OutputSink sink = [this](std::string_view stream, std::string_view line) {
      {
        std::lock_guard lock(output_mu_);
        output_tail_.Add(stream, line);
        // Only a notification reads notify_tail_ (Notify); without a notifier, skip it.
        if (tick_.notifier != nullptr) notify_tail_.Add(stream, line);
        if (logged_lines_ >= kLoggedLinesPerRun) {
          ++dropped_lines_;
          return;
        }
        ++logged_lines_;
      }
      log_.Log(LogLevel::kInfo, "output",
               {{"job", tick_.job->job.name},
                {"tick", tick_text_},
                {"node", tick_.node},
                {"stream", stream},
                {"line", line}});
    };
    // Claimed ahead of T, or won on a clock ahead of the store's: the process is made
    // ready now and starts at T by the store's clock (a prepared process on its own
    // timer; anything else when this thread releases it).
    std::unique_ptr<jobs::PreparedStart> prepared;
    // Its due instant (T, or later with jitter) on this replica's clock, moved by what
    // this clock may be ahead of the store's (docs/design.md §1 rule 15).
    const WallTime at =
        WallTime(milliseconds(tick_.job->DueMs(tick_.held.tick_unix))) + tick_.start_delay;
    if (attempt == 1 && (tick_.lead > milliseconds(0) || tick_.start_delay > milliseconds(0))) {
      // Claimed long before T (an adaptive lead): made ready only prepare_ahead before it.
      if (tick_.prepare_ahead && tick_.lead > *tick_.prepare_ahead &&
          !WaitForInstant(at - *tick_.prepare_ahead, nullptr)) {
        std::lock_guard lock(mu_);
        out.outcome = terminate_reason_.value_or(jobs::RunOutcome::kKilled);
        out.error = "ended before its instant";
        break;
      }
      // A start that checks the lease itself (an in-process call) gets its bound:
      // the same as the check below makes. Its instant on the wall clock is moved by
      // what that clock gained on the monotonic one since the claim (stepped ahead,
      // running fast); the prepared start keeps to the monotonic clock from now on.
      const WallTime start_at =
          std::max(at, clock_.Wall() + std::max(milliseconds(0), NotBefore(at) - clock_.Steady()));
      Result<std::unique_ptr<jobs::PreparedStart>> p =
          runner_.Prepare(job, spec, sink, start_at, LossAt());
      if (p) prepared = std::move(*p);  // else: started at T the ordinary way
      if (prepared) Guard(prepared->process_group());
      // A run that starts itself at T is looked at once the other starts of T are
      // done: this thread sleeps through T rather than waking at it (at a busy instant
      // the supervisors' wake-ups took the CPUs from the starts). Ended before T
      // (shutdown), the run never starts; ended after, it is released and terminated
      // as any run going.
      const milliseconds look_after = LookAfter(prepared.get(), tick_.instant_claims);
      if (!WaitForInstant(at + look_after, prepared.get()) && clock_.Wall() < at) {
        prepared.reset();  // kills the child, cancels the call: before T, the job never ran
        std::lock_guard lock(mu_);
        out.outcome = terminate_reason_.value_or(jobs::RunOutcome::kKilled);
        out.error = "ended before its instant";
        break;
      }
    }
    // A claim can expire before its job starts (the daemon was paused, or the machine
    // starved this thread): starting then could run beside the replica that took the
    // tick over, whatever on_lease_lost says for a run already going. Only the clock
    // is asked here; a renewal already due goes out once the job runs (WaitRun), so a
    // store slow to answer, or cut off, cannot hold up a start the lease still covers.
    // A prepared call made the same check itself at T (checks_start_bound): it was
    // not made past the bound (Release says lease-lost), and one made in time is a
    // run going, which a lease lost since then terminates as any.
    const bool checked_at_start = prepared && prepared->checks_start_bound();
    CheckLease();
    if (lease_lost_ && !checked_at_start) {
      out.outcome = jobs::RunOutcome::kLeaseLost;
      out.error = "the lease ran out before the job started";
      break;  // `prepared` goes unreleased: its child is killed
    }
    SteadyTime attempt_started = clock_.Steady();
    Result<std::unique_ptr<jobs::Execution>> started =
        prepared ? prepared->Release() : runner_.Start(job, spec, std::move(sink));
    // A prepared start that started itself at its instant read the wall clock then.
    const std::optional<std::chrono::system_clock::time_point> self_started =
        prepared ? prepared->started() : std::nullopt;
    if (started && self_started) {
      // Taken back to the monotonic line from a reading of both now.
      const SteadyTime now = clock_.Steady();
      const milliseconds ago =
          clock_.Wall() - std::chrono::time_point_cast<milliseconds>(*self_started);
      const milliseconds most = std::max(milliseconds(0), now - NotBefore(at));
      attempt_started = now - std::clamp(ago, milliseconds(0), most);
    }
    if (started && !job_started_) job_started_ = attempt_started;
    if (prepared && tick_.metrics && (self_started || !checked_at_start)) {
      const auto tick_at = std::chrono::system_clock::time_point(at.time_since_epoch());
      const auto started_at = self_started.value_or(
          std::chrono::system_clock::time_point(clock_.Wall().time_since_epoch()));
      tick_.metrics->FireLateness(job.name, started_at - tick_at);
    }
    prepared.reset();
    if (!started) {
      out.outcome = jobs::RunOutcome::kFailed;
      out.error = started.error().ToString();
    } else {
      std::unique_ptr<jobs::Execution> exec = std::move(*started);
      Guard(exec->process_group());
      {
        std::lock_guard lock(mu_);
        exec_ = exec.get();
        if (terminate_reason_) exec->Terminate(*terminate_reason_);
      }
      if (lease_lost_ && job.on_lease_lost == config::OnLeaseLost::kTerminate) {
        exec->Terminate(jobs::RunOutcome::kLeaseLost);
      }
      jobs::RunResult r = WaitRun(*exec);
      // The attempt's end as the execution measured it (its process's exit, or the
      // call's return), not when this thread looked; with leftovers, when they ended.
      job_ended_ = r.leftovers_ended ? clock_.Steady() : attempt_started + r.duration;
      {
        std::lock_guard lock(mu_);
        exec_ = nullptr;
      }
      // SIGKILLed, not by us, once the guard's deadline had passed: the lease guard
      // ended it while this daemon was stopped (its line says so). A lease end, not a
      // failure of the job, and never retried.
      const bool guard_killed = guard_knows_ && !killed_ && r.signal == SIGKILL &&
                                clock_.Steady() >= *guard_knows_;
      Unguard();
      CheckLease();  // a refusal that stopped the run is logged before its run line
      out.outcome = r.outcome;
      out.exit_code = r.exit_code;
      out.signal = r.signal;
      out.error = r.error;
      out.dropped_lines += r.dropped_lines;
      out.leftovers_ended = out.leftovers_ended || r.leftovers_ended;
      if (guard_killed) {
        out.outcome = jobs::RunOutcome::kLeaseLost;
        out.lease_end = "killed";
        out.error = "the lease guard killed it at its valid_until while the daemon was stopped";
        break;
      }
      if (killed_) {
        out.lease_end = r.left_running ? "running" : "killed";
        if (r.left_running) {
          out.error = "ignored its stop token until its lease ended; its thread keeps running";
        }
      }
    }
    if (out.outcome != jobs::RunOutcome::kFailed && out.outcome != jobs::RunOutcome::kTimeout) {
      break;  // done, or ended by the daemon (lease lost, shutdown): never retried
    }
    if (lease_lost_) break;  // the claim is no longer ours: nothing may run under it
    std::lock_guard lock(mu_);
    if (stop_retries_) break;
  }
  Unguard();  // a prepared child left unreleased (killed with its PreparedStart)
  if (lease_lost_ && job.on_lease_lost == config::OnLeaseLost::kTerminate &&
      out.outcome != jobs::RunOutcome::kDone) {
    out.outcome = jobs::RunOutcome::kLeaseLost;
  }
}

void RunSupervisor::Guard(std::optional<int> process_group) {
  if (tick_.lease_guard == nullptr || !process_group ||
      tick_.job->job.on_lease_lost != config::OnLeaseLost::kTerminate) {
    return;
  }
  guarded_ = process_group;
  const std::uint64_t generation = tick_.lease_guard->generation();
  if (tick_.lease_guard->Arm(*guarded_, LossAt(), valid_until_, tick_.job->job.name,
                             tick_text_, tick_.held.fence)) {
    guard_knows_ = valid_until_;
    // Read before the arm: a restart in between makes the next Upkeep arm again
    // (harmless), where one read after could hide a guard that never got it.
    guard_generation_ = generation;
  }
}

void RunSupervisor::Unguard() {
  if (!guarded_) return;
  tick_.lease_guard->Disarm(*guarded_);
  guarded_.reset();
  guard_knows_.reset();
}

bool RunSupervisor::PrepareRetry(int attempt, WallTime retries_end,
                                 std::optional<milliseconds>& cut_timeout) {
  const config::Job& job = tick_.job->job;
  const milliseconds backoff = job.retries.BackoffBefore(attempt);
  if (clock_.Wall() + backoff >= retries_end) {
    RetryNotStarted(
        attempt, backoff, "next-instant",
        "its backoff would end at or after the job's next instant " + FormatTimestamp(retries_end));
    return false;
  }
  if (!Backoff(clock_.Steady() + backoff)) return false;
  if (clock_.Wall() >= retries_end) {  // the wall clock stepped meanwhile
    RetryNotStarted(attempt, backoff, "next-instant",
                    "the job's next instant " + FormatTimestamp(retries_end) + " has come");
    return false;
  }
  if (!Refence(attempt, backoff)) return false;
  if (retries_end != WallTime::max()) {
    const auto left = std::chrono::duration_cast<milliseconds>(retries_end - clock_.Wall());
    if (left < job.timeout) cut_timeout = std::max(milliseconds(1), left);
  }
  std::vector<Field> fields = {{"job", job.name},           {"tick", tick_text_},
                               {"node", tick_.node},        {"outcome", "started"},
                               {"attempt", attempt},        {"backoff", FormatSeconds(backoff)},
                               {"fence", tick_.held.fence}, {"previous_fence", previous_fence_}};
  if (cut_timeout) fields.emplace_back("timeout", FormatSeconds(*cut_timeout));
  log_.Log(LogLevel::kInfo, "retry", fields);
  if (tick_.metrics) tick_.metrics->RunRetry(job.name, "started");
  return true;
}

std::optional<WallTime> RunSupervisor::NextInstant() const {
  const ScheduledJob& job = *tick_.job;
  if (!job.next) return std::nullopt;
  const std::optional<std::int64_t> next = job.next(tick_.held.tick_unix);
  if (!next) return std::nullopt;
  return WallTime(milliseconds(job.DueMs(*next)));
}

bool RunSupervisor::Refence(int attempt, milliseconds backoff) {
  const std::uint64_t previous = tick_.held.fence;
  const Result<lock::RefenceOutcome> refenced =
      CallBackend("refence", [&] { return backend_.Refence(tick_.held); });
  if (!refenced) {
    if (tick_.metrics) tick_.metrics->BackendError(backend_.name());
    RetryNotStarted(attempt, backoff, "error", "no new fence: " + refenced.error().ToString());
    return false;
  }
  if (refenced->status != lock::RefenceStatus::kRefenced) {
    RetryNotStarted(attempt, backoff, "lease-lost", "the backend says the claim is no longer ours");
    LoseLease("the backend refused a new fence: the claim is no longer ours");
    return false;
  }
  tick_.held.fence = refenced->fence;  // the supervisor's thread alone reads the fence
  previous_fence_ = previous;
  return true;
}

void RunSupervisor::RetryNotStarted(int attempt, milliseconds backoff, std::string_view outcome,
                                    const std::string& reason) {
  log_.Log(LogLevel::kWarn, "retry",
           {{"job", tick_.job->job.name},
            {"tick", tick_text_},
            {"node", tick_.node},
            {"outcome", "not-started"},
            {"attempt", attempt},
            {"backoff", FormatSeconds(backoff)},
            {"reason", reason},
            {"fence", tick_.held.fence}});
  if (tick_.metrics) tick_.metrics->RunRetry(tick_.job->job.name, outcome);
}

SteadyTime RunSupervisor::NotBefore(WallTime at) const {
  if (tick_.claim_wall == WallTime{}) return SteadyTime{};
  return tick_.claim_sent + (at - tick_.claim_wall) - kWallGainIgnored;
}

bool RunSupervisor::WaitForInstant(WallTime at, jobs::PreparedStart* prepared) {
  const SteadyTime not_before = NotBefore(at);
  while (clock_.Wall() < at || clock_.Steady() < not_before) {
    if (clock_.Steady() >= next_renew_) {  // only after a step back of the wall clock
      Upkeep();
      if (prepared != nullptr && lease_held_) {
        prepared->ExtendStartBound(
            std::chrono::steady_clock::time_point(LossAt().time_since_epoch()));
      }
    }
    milliseconds wait = RealWait(WatchdogDeadline());  // not under mu_ (RenewSlot's first)
    WallTime wall_at = at;
    if (const milliseconds left = not_before - clock_.Steady(); left > milliseconds(0)) {
      // The wall clock is past `at` early, or may get there early: the monotonic one
      // decides.
      wall_at = std::max(at, clock_.Wall() + left);
      wait = std::min(wait, left);
    }
    std::unique_lock lock(mu_);
    if (terminate_reason_) return false;
    clock_.WaitUntilWall(cv_, lock, wall_at, wait);
  }
  std::lock_guard lock(mu_);
  return !terminate_reason_;
}

jobs::RunResult RunSupervisor::WaitRun(jobs::Execution& exec) {
  while (true) {
    Upkeep();
    if (std::optional<jobs::RunResult> r = exec.WaitFor(RealWait(WatchdogDeadline()))) return *r;
  }
}

bool RunSupervisor::Backoff(SteadyTime until) {
  while (true) {
    Upkeep();
    if (lease_lost_) return false;
    if (clock_.Steady() >= until) return true;
    const std::optional<SteadyTime> deadline = WatchdogDeadline();
    if (!WaitUnlessStopped(deadline ? std::min(*deadline, until) : until)) return false;
  }
}

bool RunSupervisor::WaitUnlessStopped(SteadyTime until) {
  std::unique_lock lock(mu_);
  if (stop_retries_) return false;
  cv_.wait_for(lock, RealWait(until));
  return !stop_retries_;
}

std::optional<SteadyTime> RunSupervisor::WatchdogDeadline() const {
  std::optional<SteadyTime> deadline;
  const auto at = [&deadline](SteadyTime t) { deadline = deadline ? std::min(*deadline, t) : t; };
  if (lease_held_) {
    at(LossAt());
    // A renewal in flight: look for its answer now and then (it cannot wake us).
    at(RenewalInFlight() ? clock_.Steady() + RenewRetryDelay(tick_.held.lease) : next_renew_);
  }
  if (kill_at_ && !killed_) at(*kill_at_);
  return deadline;
}

milliseconds RunSupervisor::RealWait(std::optional<SteadyTime> deadline) const {
  if (!deadline) return max_real_wait_;
  return std::clamp<milliseconds>(*deadline - clock_.Steady(), milliseconds(1), max_real_wait_);
}

SteadyTime RunSupervisor::LossAt() const {
  return tick_.job->job.on_lease_lost == config::OnLeaseLost::kTerminate
             ? valid_until_ - stop_grace_
             : valid_until_;
}

bool RunSupervisor::RenewalInFlight() const {
  std::lock_guard lock(renew_->mu);
  return renew_->in_flight;
}

void RunSupervisor::CheckLease() {
  if (!lease_held_) return;
  std::optional<std::pair<SteadyTime, Result<lock::RenewStatus>>> answer;
  {
    std::lock_guard lock(renew_->mu);
    answer.swap(renew_->answer);
  }
  if (answer) {
    const auto& [sent, renewed] = *answer;
    if (renewed && *renewed == lock::RenewStatus::kRenewed) {
      valid_until_ = std::max(valid_until_, sent + LeaseValidity(tick_.held.lease));
      next_renew_ = sent + tick_.held.lease / 3;
      if (guarded_) Guard(guarded_);  // the guard's deadline moves with the lease
    } else if (renewed) {
      LoseLease("the backend says the claim is no longer ours");
      return;
    } else {
      if (tick_.metrics) tick_.metrics->BackendError(backend_.name());
      LogBackendError(log_, LogLevel::kWarn, "renew", tick_.job->job.name, tick_text_, tick_.node,
                      renewed.error());
      next_renew_ = sent + RenewRetryDelay(tick_.held.lease);
    }
  }
  const SteadyTime now = clock_.Steady();
  if (now >= valid_until_) {
    LoseLease("the lease ran out without a confirmed renewal");
  } else if (now >= LossAt()) {
    LoseLease("no renewal confirmed by " + FormatSeconds(stop_grace_) +
              " (lock.stop_grace) before the lease's end");
  }
}

void RunSupervisor::Upkeep() {
  CheckLease();
  // The guard's pipe was full when valid_until_ last moved, or the guard process that
  // knew it is gone and another took its place: tell it again.
  if (guarded_) {
    tick_.lease_guard->Check();
    if (guard_knows_ != valid_until_ || guard_generation_ != tick_.lease_guard->generation()) {
      Guard(guarded_);
    }
  }
  if (lease_held_ && clock_.Steady() >= next_renew_ && !RenewalInFlight()) SendRenewal();
  if (kill_at_ && !killed_ && clock_.Steady() >= *kill_at_) {
    // exec_ changes on this thread only: no lock needed to read it here.
    if (exec_ != nullptr && !exec_->WaitFor(milliseconds(0))) {
      exec_->Kill(jobs::RunOutcome::kLeaseLost);
      killed_ = true;
    }
    kill_at_.reset();
  }
}

void RunSupervisor::SendRenewal() {
  {
    std::lock_guard lock(renew_->mu);
    renew_->in_flight = true;
  }
  ThreadPool& threads = tick_.renew_threads ? *tick_.renew_threads : *own_renew_threads_;
  Result<void> posted =
      threads.Post([slot = renew_, held = tick_.held, &clock = clock_, &backend = backend_] {
        const SteadyTime sent = clock.Steady();
        Result<lock::RenewStatus> renewed =
            CallBackend("renew", [&] { return backend.Renew(held); });
        const bool refused = renewed && *renewed != lock::RenewStatus::kRenewed;
        std::lock_guard lock(slot->mu);
        slot->in_flight = false;
        slot->answer.emplace(sent, std::move(renewed));
        if (refused && slot->owner != nullptr) slot->owner->RenewRefused();
      });
  if (!posted) {
    std::lock_guard lock(renew_->mu);
    renew_->in_flight = false;
    renew_->answer.emplace(
        clock_.Steady(), MakeError("renew", "no thread to send it: " + posted.error().ToString()));
  }
}

void RunSupervisor::RenewRefused() {
  if (tick_.job->job.on_lease_lost != config::OnLeaseLost::kTerminate) return;
  std::lock_guard lock(mu_);
  if (exec_ != nullptr) exec_->Terminate(jobs::RunOutcome::kLeaseLost);
  cv_.notify_all();
}

void RunSupervisor::LoseLease(std::string_view reason) {
  lease_held_ = false;
  lease_lost_ = true;
  const bool keep_going = tick_.job->job.on_lease_lost == config::OnLeaseLost::kContinue;
  log_.Log(LogLevel::kWarn, "lease",
           {{"job", tick_.job->job.name},
            {"tick", tick_text_},
            {"node", tick_.node},
            {"outcome", "lost"},
            {"action", keep_going ? "continue" : "terminate"},
            {"reason", reason},
            {"fence", tick_.held.fence}});
  if (keep_going) return;
  kill_at_ = valid_until_;  // whatever happens to the SIGTERM, the run is gone by then
  std::lock_guard lock(mu_);
  if (exec_ != nullptr) exec_->Terminate(jobs::RunOutcome::kLeaseLost);
  cv_.notify_all();
}

Result<lock::CompleteStatus> RunSupervisor::CompleteClaim(const lock::Completion& completion,
                                                          bool may_wait) {
  const auto send = [&] {
    return CallBackend("complete", [&] { return backend_.Complete(tick_.held, completion); });
  };
  milliseconds backoff(250);
  for (Result<lock::CompleteStatus> completed = send();; completed = send()) {
    if (completed) return completed;
    LogBackendError(log_, LogLevel::kWarn, "complete", tick_.job->job.name, tick_text_,
                    tick_.node, completed.error());
    const SteadyTime next = clock_.Steady() + backoff;
    if (!may_wait || lease_lost_ || next >= valid_until_) return completed;
    while (clock_.Steady() < next) {
      if (!WaitUnlessStopped(next)) return completed;
    }
    backoff = std::min<milliseconds>(backoff * 2, std::chrono::seconds(5));
  }
}

void RunSupervisor::Finish(const Outcome& out, bool may_wait) {
  try {
    const milliseconds duration =
        job_started_
            ? std::max(milliseconds(0), job_ended_.value_or(clock_.Steady()) - *job_started_)
            : milliseconds(0);
    lock::Completion completion;
    completion.outcome = std::string(jobs::RunOutcomeName(out.outcome));
    completion.exit_code = out.exit_code;
    completion.duration = duration;
    std::size_t dropped_lines = out.dropped_lines;
    {
      std::lock_guard lock(output_mu_);
      completion.output = output_tail_.Text();
      dropped_lines += dropped_lines_;
    }
    completion.keep_outputs = tick_.keep_outputs;
    const Result<lock::CompleteStatus> completed = CompleteClaim(completion, may_wait);
    if (!completed && tick_.late_completes != nullptr && !tick_.job->job.recover) {
      tick_.late_completes->Add({tick_.held, completion});
    }
    if (completed && *completed == lock::CompleteStatus::kNotOwner) {
      log_.Log(LogLevel::kWarn, "complete",
               {{"job", tick_.job->job.name},
                {"tick", tick_text_},
                {"node", tick_.node},
                {"outcome", "not-owner"},
                {"fence", tick_.held.fence}});
    }

    std::vector<Field> fields = {{"job", tick_.job->job.name},
                                 {"tick", tick_text_},
                                 {"node", tick_.node},
                                 {"outcome", jobs::RunOutcomeName(out.outcome)}};
    if (out.exit_code) fields.emplace_back("exit", *out.exit_code);
    fields.emplace_back("duration", FormatSeconds(duration));
    fields.emplace_back("fence", tick_.held.fence);
    if (out.signal) fields.emplace_back("signal", *out.signal);
    if (out.attempts > 1) fields.emplace_back("attempts", out.attempts);
    if (!out.lease_end.empty()) fields.emplace_back("lease_end", out.lease_end);
    if (!out.error.empty()) fields.emplace_back("error", out.error);
    if (dropped_lines > 0) fields.emplace_back("dropped_lines", dropped_lines);
    if (out.leftovers_ended) fields.emplace_back("leftovers", "ended");
    if (tick_.manual) fields.emplace_back("manual", "true");
    const LogLevel level =
        out.outcome == jobs::RunOutcome::kDone ? LogLevel::kInfo : LogLevel::kWarn;
    log_.Log(level, "run", fields);
    final_outcome_ = out.outcome;
    if (tick_.metrics) {
      tick_.metrics->RunOutcome(tick_.job->job.name, jobs::RunOutcomeName(out.outcome), duration);
      if (lease_lost_) tick_.metrics->LeaseLost(tick_.job->job.name);
      if (!out.lease_end.empty()) tick_.metrics->RunLeaseEnd(tick_.job->job.name, out.lease_end);
    }
    Notify(out, duration);
  } catch (...) {
    // Nothing may escape a scope guard; the claim's lease expires on its own.
  }
  {
    std::lock_guard lock(renew_->mu);
    renew_->owner = nullptr;  // a renewal still in flight no longer reaches us
  }
  done_.store(true);
  if (on_done_) on_done_();
}

void RunSupervisor::Notify(const Outcome& out, milliseconds duration) {
  if (tick_.notifier == nullptr) return;
  NotifyEvent e;
  e.job = tick_.job->job.name;
  e.tick_unix = tick_.held.tick_unix;
  e.node = tick_.node;
  e.fence = tick_.held.fence;
  e.outcome = std::string(jobs::RunOutcomeName(out.outcome));
  e.exit_code = out.exit_code;
  e.signal = out.signal;
  e.duration = duration;
  e.attempts = out.attempts;
  e.error = out.error;
  {
    std::lock_guard lock(output_mu_);
    e.output = NotifyOutputText(notify_tail_, &e.output_truncated);
  }
  tick_.notifier->RunEnded(tick_.job->job, std::move(e));
}

}  // namespace tickd::app
