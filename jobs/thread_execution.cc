#include "jobs/thread_execution.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>

namespace tickd::jobs {
namespace {

using SteadyClock = std::chrono::steady_clock;

// Shared by the calling thread and the Execution; it outlives whichever ends last.
struct CallState {
  std::stop_source stop;
  std::mutex mu;
  std::condition_variable cv;
  bool finished = false;  // guarded by mu
  CallEnd end;            // guarded by mu; valid once finished
  SteadyClock::time_point end_time;
};

class ThreadExecution final : public Execution {
 public:
  ThreadExecution(std::shared_ptr<CallState> state, const ProcessSpec& spec,
                  ThreadCallOptions options)
      : state_(std::move(state)),
        options_(std::move(options)),
        start_(SteadyClock::now()),
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
  try {
    std::thread([state, call = std::move(call)]() mutable {
      CallEnd end = call(state->stop.get_token());
      call = nullptr;  // what it captured goes before anyone hears the call ended
      {
        std::lock_guard lock(state->mu);
        state->end = std::move(end);
        state->end_time = SteadyClock::now();
        state->finished = true;
      }
      state->cv.notify_all();
    }).detach();
  } catch (const std::system_error& e) {
    return MakeError("jobs: run thread", e.what());
  }
  return std::unique_ptr<Execution>(
      std::make_unique<ThreadExecution>(std::move(state), spec, std::move(options)));
}

}  // namespace tickd::jobs
