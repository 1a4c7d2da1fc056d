#include "lib/callable_runner.h"

#include <algorithm>
#include <exception>
#include <stop_token>
#include <thread>

#include "app/log.h"

namespace tickd::lib {
namespace {

using std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;

// Shared by the calling thread and the Execution; outlives whichever ends last.
struct CallState {
  std::stop_source stop;
  std::mutex mu;
  std::condition_variable cv;
  bool finished = false;    // guarded by mu
  std::string error;        // guarded by mu; the exception, if the function threw
  SteadyClock::time_point end;
};

std::int64_t EnvInt(const std::map<std::string, std::string>& env, const char* key) {
  auto it = env.find(key);
  if (it == env.end()) return 0;
  try {
    return std::stoll(it->second);
  } catch (const std::exception&) {
    return 0;
  }
}

class CallExecution final : public jobs::Execution {
 public:
  CallExecution(std::shared_ptr<CallState> state, const jobs::ProcessSpec& spec)
      : state_(std::move(state)),
        start_(SteadyClock::now()),
        timeout_(std::max(spec.timeout, milliseconds(0))),
        stop_grace_(std::max(spec.kill_grace, milliseconds(0))) {}

  // A call still going is asked to stop and waited for up to its stop grace; past it
  // the thread is left running (it holds its own references).
  ~CallExecution() override {
    Terminate(jobs::RunOutcome::kKilled);
    WaitFor(stop_grace_ + milliseconds(1));
  }

  void Terminate(jobs::RunOutcome reason) override {
    if (reason != jobs::RunOutcome::kTimeout && reason != jobs::RunOutcome::kLeaseLost) {
      reason = jobs::RunOutcome::kKilled;
    }
    std::lock_guard lock(state_->mu);
    TerminateLocked(reason, SteadyClock::now());
  }

  std::optional<jobs::RunResult> WaitFor(milliseconds d) override {
    const SteadyClock::time_point until =
        SteadyClock::now() + std::min(d, milliseconds(std::chrono::hours(24)));
    std::unique_lock lock(state_->mu);
    while (true) {
      const SteadyClock::time_point now = SteadyClock::now();
      if (!reason_ && now >= start_ + timeout_) TerminateLocked(jobs::RunOutcome::kTimeout, now);
      if (result_) return result_;
      if (state_->finished) {
        result_ = Finished();
        return result_;
      }
      if (reason_ && now >= stopped_at_ + stop_grace_) {
        result_ = Ignored(now);
        return result_;
      }
      if (now >= until) return std::nullopt;
      state_->cv.wait_until(lock, std::min(until, reason_ ? stopped_at_ + stop_grace_
                                                          : start_ + timeout_));
    }
  }

 private:
  // REQUIRES: state_->mu held.
  void TerminateLocked(jobs::RunOutcome reason, SteadyClock::time_point now) {
    if (reason_ || state_->finished) return;
    reason_ = reason;
    stopped_at_ = now;
    state_->stop.request_stop();
  }

  // REQUIRES: state_->mu held, state_->finished.
  jobs::RunResult Finished() const {
    jobs::RunResult r;
    r.error = state_->error;
    r.duration = std::chrono::duration_cast<milliseconds>(state_->end - start_);
    if (reason_) {
      r.outcome = *reason_;
    } else {
      r.outcome = r.error.empty() ? jobs::RunOutcome::kDone : jobs::RunOutcome::kFailed;
    }
    return r;
  }

  // REQUIRES: state_->mu held.
  jobs::RunResult Ignored(SteadyClock::time_point now) const {
    jobs::RunResult r;
    r.outcome = *reason_;
    r.duration = std::chrono::duration_cast<milliseconds>(now - start_);
    r.error = "the function ignored its stop token for " + app::FormatSeconds(stop_grace_) +
              " (stop_grace); its claim is completed without it, its thread keeps running";
    return r;
  }

  std::shared_ptr<CallState> state_;
  const SteadyClock::time_point start_;
  const milliseconds timeout_;
  const milliseconds stop_grace_;
  // Guarded by state_->mu:
  std::optional<jobs::RunOutcome> reason_;
  SteadyClock::time_point stopped_at_{};
  std::optional<jobs::RunResult> result_;
};

}  // namespace

void CallableRunner::Add(const std::string& name, JobFunction fn) {
  std::lock_guard lock(mu_);
  fns_[name] = std::make_shared<const JobFunction>(std::move(fn));
}

Result<std::unique_ptr<jobs::Execution>> CallableRunner::Start(const config::Job& job,
                                                               const jobs::ProcessSpec& spec,
                                                               jobs::OutputSink /*sink*/) {
  std::shared_ptr<const JobFunction> fn;
  {
    std::lock_guard lock(mu_);
    auto it = fns_.find(job.name);
    if (it != fns_.end()) fn = it->second;
  }
  if (!fn) {
    jobs::RunResult r;
    r.error = "no function registered for job " + job.name;
    return jobs::FinishedExecution(std::move(r));
  }
  RunContext ctx;
  ctx.job = job.name;
  ctx.tick = std::chrono::sys_seconds(std::chrono::seconds(EnvInt(spec.env, "TICKD_TICK_UNIX")));
  ctx.fence = static_cast<std::uint64_t>(EnvInt(spec.env, "TICKD_FENCE"));
  if (auto it = spec.env.find("TICKD_NODE"); it != spec.env.end()) ctx.node = it->second;
  ctx.attempt = static_cast<int>(std::max<std::int64_t>(1, EnvInt(spec.env, "TICKD_ATTEMPT")));

  auto state = std::make_shared<CallState>();
  ctx.stop = state->stop.get_token();
  auto exec = std::make_unique<CallExecution>(state, spec);
  {
    std::lock_guard lock(calls_->mu);
    ++calls_->running;
  }
  try {
    std::thread([state, fn, ctx = std::move(ctx), calls = calls_]() mutable {
      std::string error;
      try {
        (*fn)(ctx);
      } catch (const std::exception& e) {
        error = std::string("exception: ") + e.what();
      } catch (...) {
        error = "exception: (not a std::exception)";
      }
      fn.reset();  // what it captured goes before WaitForCalls returns
      {
        std::lock_guard lock(state->mu);
        state->error = std::move(error);
        state->end = SteadyClock::now();
        state->finished = true;
      }
      state->cv.notify_all();
      std::lock_guard lock(calls->mu);
      --calls->running;
      calls->cv.notify_all();
    }).detach();
  } catch (const std::system_error& e) {
    {
      std::lock_guard lock(calls_->mu);
      --calls_->running;
    }
    std::lock_guard lock(state->mu);
    state->finished = true;  // no thread: the execution must not wait for one
    return MakeError("tickd: job thread", e.what());
  }
  return std::unique_ptr<jobs::Execution>(std::move(exec));
}

void CallableRunner::WaitForCalls() {
  std::unique_lock lock(calls_->mu);
  calls_->cv.wait(lock, [this] { return calls_->running == 0; });
}

}  // namespace tickd::lib
