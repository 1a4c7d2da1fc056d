#include "jobs/thread_execution.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <utility>

#include "base/thread_pool.h"
#include "base/wall_alarm.h"

namespace tickd::jobs {
namespace {

using SteadyClock = std::chrono::steady_clock;

// The threads calls run on, kept for reuse: at a busy instant a thousand calls start
// together, and a thread created for each, ended as its call returns, unmaps its
// stack then — each unmap interrupts the other cores to flush their TLBs, while the
// instant's other calls are still starting (base/thread_pool.h). Idle threads stay
// a minute or more, so a job due every few seconds or minutes reuses them, and a
// burst's threads end long after its instant, not during it. Never destroyed: a call
// that ignores its stop keeps its thread, and must not hold the daemon's exit.
ThreadPool& CallThreads() {
  static ThreadPool* const threads = new ThreadPool(std::chrono::seconds(60));
  return *threads;
}

Result<void> OnCallThread(std::function<void()> task) {
  Result<void> posted = CallThreads().Post(std::move(task));
  if (!posted) return MakeError("jobs: run thread", posted.error().detail);
  return {};
}

// Where a prepared call (PrepareThreadCall) stands; a call started at once is kStarted.
enum class StartState { kWaiting, kStarted, kDeclined, kCancelled };

// Shared by the calling thread and the Execution; it outlives whichever ends last.
struct CallState {
  std::stop_source stop;
  std::mutex mu;
  std::condition_variable cv;
  bool finished = false;  // guarded by mu
  CallEnd end;            // guarded by mu; valid once finished
  SteadyClock::time_point end_time;
  // A prepared call, guarded by mu:
  StartState start = StartState::kStarted;
  SteadyClock::time_point start_bound = SteadyClock::time_point::max();
  SteadyClock::time_point started_steady;  // when the call was made (not declined)
  std::chrono::system_clock::time_point started_wall;
  // What the thread of a prepared call waits on until its instant; rung when the call
  // is cancelled before it.
  WallAlarm alarm;
};

// Makes the call on the calling thread and tells the Execution when it has ended.
void RunCall(CallState& state, ThreadCall& call) {
  CallEnd end = call(state.stop.get_token());
  call = nullptr;  // what it captured goes before anyone hears the call ended
  {
    std::lock_guard lock(state.mu);
    state.end = std::move(end);
    state.end_time = SteadyClock::now();
    state.finished = true;
  }
  state.cv.notify_all();
}

class ThreadExecution final : public Execution {
 public:
  ThreadExecution(std::shared_ptr<CallState> state, const ProcessSpec& spec,
                  ThreadCallOptions options, SteadyClock::time_point start)
      : state_(std::move(state)),
        options_(std::move(options)),
        start_(start),
        timeout_(std::max(spec.timeout, milliseconds(0))),
        kill_grace_(std::max(spec.kill_grace, milliseconds(0))) {}

  ~ThreadExecution() override {
    Terminate(RunOutcome::kKilled);
    WaitFor(kill_grace_ + milliseconds(1));
    if (options_.output) options_.output->Detach();
  }

  void Terminate(RunOutcome reason) override {
    if (reason != RunOutcome::kTimeout && reason != RunOutcome::kLeaseLost) {
      reason = RunOutcome::kKilled;
    }
    std::lock_guard lock(state_->mu);
    TerminateLocked(reason, SteadyClock::now());
  }

  void Kill(RunOutcome reason) override {
    if (reason != RunOutcome::kTimeout && reason != RunOutcome::kLeaseLost) {
      reason = RunOutcome::kKilled;
    }
    std::lock_guard lock(state_->mu);
    TerminateLocked(reason, SteadyClock::now());
    given_up_ = true;  // a thread cannot be killed: stop waiting for it
    state_->cv.notify_all();
  }

  std::optional<RunResult> WaitFor(milliseconds d) override {
    const SteadyClock::time_point until =
        SteadyClock::now() + std::min(d, milliseconds(std::chrono::hours(24)));
    std::unique_lock lock(state_->mu);
    while (true) {
      const SteadyClock::time_point now = SteadyClock::now();
      if (!reason_ && now >= start_ + timeout_) TerminateLocked(RunOutcome::kTimeout, now);
      if (result_) return result_;
      if (state_->finished) {
        result_ = Finished();
      } else if (reason_ && (given_up_ || now >= stopped_at_ + kill_grace_)) {
        result_ = Ignored(now);
      }
      if (result_) {
        lock.unlock();
        const std::size_t dropped = options_.output ? options_.output->dropped() : 0;
        lock.lock();
        result_->dropped_lines = dropped;
        return result_;
      }
      if (now >= until) return std::nullopt;
      state_->cv.wait_until(
          lock, std::min(until, reason_ ? stopped_at_ + kill_grace_ : start_ + timeout_));
    }
  }

 private:
  // REQUIRES: state_->mu held.
  void TerminateLocked(RunOutcome reason, SteadyClock::time_point now) {
    if (reason_ || state_->finished) return;
    reason_ = reason;
    stopped_at_ = now;
    state_->stop.request_stop();
    state_->cv.notify_all();
  }

  // REQUIRES: state_->mu held, state_->finished.
  RunResult Finished() const {
    RunResult r;
    r.exit_code = state_->end.exit_code;
    r.error = state_->end.error;
    r.duration = std::chrono::duration_cast<milliseconds>(state_->end_time - start_);
    if (reason_) {
      r.outcome = *reason_;
    } else if (state_->end.ok) {
      r.outcome = RunOutcome::kDone;
    } else {
      r.outcome = state_->end.timed_out ? RunOutcome::kTimeout : RunOutcome::kFailed;
    }
    return r;
  }

  // REQUIRES: state_->mu held, reason_.
  RunResult Ignored(SteadyClock::time_point now) const {
    RunResult r;
    r.outcome = *reason_;
    r.duration = std::chrono::duration_cast<milliseconds>(now - start_);
    r.error = options_.ignored_stop;
    r.left_running = true;
    return r;
  }

  std::shared_ptr<CallState> state_;
  const ThreadCallOptions options_;
  const SteadyClock::time_point start_;
  const milliseconds timeout_;
  const milliseconds kill_grace_;
  // Guarded by state_->mu:
  std::optional<RunOutcome> reason_;
  SteadyClock::time_point stopped_at_{};
  bool given_up_ = false;  // Kill(): WaitFor reports the call without waiting for it
  std::optional<RunResult> result_;
};

// A call whose thread waits for its instant (PrepareThreadCall).
class PreparedCall final : public PreparedStart {
 public:
  PreparedCall(std::shared_ptr<CallState> state, const ProcessSpec& spec, ThreadCallOptions options)
      : state_(std::move(state)), spec_(spec), options_(std::move(options)) {}

  ~PreparedCall() override {
    if (released_) return;
    bool started = false;
    bool cancelled = false;
    {
      std::lock_guard lock(state_->mu);
      if (state_->start == StartState::kWaiting) {
        state_->start = StartState::kCancelled;
        cancelled = true;
      }
      started = state_->start == StartState::kStarted;
    }
    if (cancelled) state_->alarm.Ring();
    if (started) {
      // Stopped (kKilled) and waited for as a run's Execution is when it goes.
      const ThreadExecution stopping(state_, spec_, options_, state_->started_steady);
    } else if (options_.output) {
      options_.output->Detach();
    }
  }

  milliseconds settle() const override { return kSettleAfterStart; }

  Result<std::unique_ptr<Execution>> Release() override {
    released_ = true;
    std::unique_lock lock(state_->mu);
    state_->cv.wait(lock, [this] { return state_->start != StartState::kWaiting; });
    if (state_->start != StartState::kStarted) {
      lock.unlock();
      if (options_.output) options_.output->Detach();
      RunResult r;
      r.outcome = RunOutcome::kLeaseLost;
      r.error = "the lease ran out before the job started";
      return FinishedExecution(std::move(r));
    }
    started_ = state_->started_wall;
    return std::unique_ptr<Execution>(std::make_unique<ThreadExecution>(
        state_, spec_, std::move(options_), state_->started_steady));
  }

  std::optional<std::chrono::system_clock::time_point> started() const override { return started_; }

  bool checks_start_bound() const override { return true; }

  void ExtendStartBound(SteadyClock::time_point bound) override {
    std::lock_guard lock(state_->mu);
    state_->start_bound = std::max(state_->start_bound, bound);
  }

 private:
  const std::shared_ptr<CallState> state_;
  const ProcessSpec spec_;
  ThreadCallOptions options_;
  bool released_ = false;
  std::optional<std::chrono::system_clock::time_point> started_;
};

}  // namespace

void CallOutput::Line(std::string_view stream, std::string_view text) {
  std::lock_guard lock(mu_);
  lines_.Deliver(stream, FitLine(text, max_line_bytes_));
}

void CallOutput::CutLine(std::string_view stream, std::string_view prefix) {
  std::lock_guard lock(mu_);
  lines_.Deliver(stream, jobs::CutLine(prefix, max_line_bytes_));
}

std::size_t CallOutput::dropped() const {
  std::lock_guard lock(mu_);
  return lines_.dropped();
}

void CallOutput::Detach() {
  std::lock_guard lock(mu_);
  lines_.Detach();
}

Result<std::unique_ptr<Execution>> StartThreadCall(const ProcessSpec& spec, ThreadCall call,
                                                   ThreadCallOptions options) {
  auto state = std::make_shared<CallState>();
  const SteadyClock::time_point start = SteadyClock::now();
  Result<void> posted =
      OnCallThread([state, call = std::move(call)]() mutable { RunCall(*state, call); });
  if (!posted) return tl::unexpected(posted.error());
  return std::unique_ptr<Execution>(
      std::make_unique<ThreadExecution>(std::move(state), spec, std::move(options), start));
}

Result<std::unique_ptr<PreparedStart>> PrepareThreadCall(
    const ProcessSpec& spec, ThreadCall call, ThreadCallOptions options,
    std::chrono::system_clock::time_point start_at, SteadyClock::time_point start_bound) {
  auto state = std::make_shared<CallState>();
  state->start = StartState::kWaiting;
  state->start_bound = start_bound;
  const SteadyClock::time_point start_steady = SteadyDeadline(start_at);
  Result<void> posted = OnCallThread([state, call = std::move(call), start_at,
                                      start_steady]() mutable {
    // Both clocks' instants (SteadyDeadline), or until cancelled.
    if (state->alarm.WaitUntil(start_at)) state->alarm.WaitUntilSteady(start_steady);
    StartState start;
    {
      std::lock_guard lock(state->mu);
      if (state->start == StartState::kWaiting) {
        const SteadyClock::time_point now = SteadyClock::now();
        state->start = now < state->start_bound ? StartState::kStarted : StartState::kDeclined;
        state->started_steady = now;
        state->started_wall = std::chrono::system_clock::now();
      }
      start = state->start;
    }
    state->cv.notify_all();  // a Release made early waits for this
    if (start == StartState::kStarted) {
      RunCall(*state, call);
    } else {
      call = nullptr;  // never made: what it holds goes now
    }
  });
  if (!posted) return tl::unexpected(posted.error());
  return std::unique_ptr<PreparedStart>(
      std::make_unique<PreparedCall>(std::move(state), spec, std::move(options)));
}

}  // namespace tickd::jobs
