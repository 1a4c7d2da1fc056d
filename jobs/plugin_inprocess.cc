// isolation: none — a plugin run on a worker thread of the daemon (see
// plugin_execution.h for what this costs and what it cannot do).
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>

#include "jobs/plugin_call.h"
#include "jobs/plugin_execution.h"

namespace tickd::jobs {
namespace {

using SteadyClock = std::chrono::steady_clock;

// Shared by the worker thread and the Execution; it outlives whichever ends last
// (a plugin that ignores cancellation keeps its thread, and this, alive).
struct RunState {
  std::atomic<bool> cancelled{false};
  std::mutex mu;
  std::condition_variable cv;
  OutputSink sink;  // guarded by mu; cleared when the Execution goes
  std::size_t max_lines = 0;
  std::size_t max_line_bytes = 0;
  std::size_t lines = 0;
  std::size_t dropped = 0;
  bool finished = false;  // guarded by mu
  PluginCallResult call;  // guarded by mu; valid once finished
  SteadyClock::time_point end;

  void Log(int level, std::string_view message) {
    std::lock_guard lock(mu);
    if (!sink) return;
    if (lines >= max_lines) {
      ++dropped;
      return;
    }
    ++lines;
    const std::string stream = "plugin." + std::string(PluginLogLevelName(level));
    sink(stream, message.substr(0, max_line_bytes));
  }
};

class InProcessExecution final : public Execution {
 public:
  InProcessExecution(std::shared_ptr<RunState> state, const ProcessSpec& spec)
      : state_(std::move(state)),
        start_(SteadyClock::now()),
        timeout_(std::max(spec.timeout, milliseconds(0))),
        kill_grace_(std::max(spec.kill_grace, milliseconds(0))) {}

  ~InProcessExecution() override {
    Terminate(RunOutcome::kKilled);
    WaitFor(kill_grace_ + milliseconds(1));
    {
      std::lock_guard lock(state_->mu);
      state_->sink = nullptr;  // the sink's owner may be gone once we are
    }
    if (!thread_.joinable()) return;
    bool finished;
    {
      std::lock_guard lock(state_->mu);
      finished = state_->finished;
    }
    if (finished) {
      thread_.join();
    } else {
      thread_.detach();  // it holds its own references to the state and the library
    }
  }

  void Start(std::shared_ptr<LoadedPlugin> plugin, PluginRunParams params) {
    thread_ = std::thread([state = state_, plugin = std::move(plugin), params = std::move(params)] {
      PluginCallResult r = CallPlugin(
          plugin->plugin(), params,
          [&state](int level, std::string_view message) { state->Log(level, message); },
          [&state] { return state->cancelled.load(); });
      std::lock_guard lock(state->mu);
      state->call = std::move(r);
      state->end = SteadyClock::now();
      state->finished = true;
      state->cv.notify_all();
    });
  }

  void Terminate(RunOutcome reason) override {
    if (reason != RunOutcome::kTimeout && reason != RunOutcome::kLeaseLost) {
      reason = RunOutcome::kKilled;
    }
    std::lock_guard lock(state_->mu);
    TerminateLocked(reason, SteadyClock::now());
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
        return result_;
      }
      if (reason_ && now >= terminated_at_ + kill_grace_) {
        result_ = Abandoned(now);
        return result_;
      }
      if (now >= until) return std::nullopt;
      SteadyClock::time_point wake =
          std::min(until, reason_ ? terminated_at_ + kill_grace_ : start_ + timeout_);
      state_->cv.wait_until(lock, wake);
    }
  }

 private:
  // REQUIRES: state_->mu held.
  void TerminateLocked(RunOutcome reason, SteadyClock::time_point now) {
    if (reason_ || state_->finished) return;
    reason_ = reason;
    terminated_at_ = now;
    state_->cancelled.store(true);
    state_->cv.notify_all();
  }

  // REQUIRES: state_->mu held, state_->finished.
  RunResult Finished() const {
    RunResult r;
    r.exit_code = PluginExitStatus(state_->call.status);
    r.error = state_->call.error;
    r.duration = std::chrono::duration_cast<milliseconds>(state_->end - start_);
    r.dropped_lines = state_->dropped;
    if (reason_) {
      r.outcome = *reason_;
    } else {
      r.outcome = *r.exit_code == 0 ? RunOutcome::kDone : RunOutcome::kFailed;
    }
    return r;
  }

  // REQUIRES: state_->mu held.
  RunResult Abandoned(SteadyClock::time_point now) const {
    RunResult r;
    r.outcome = *reason_;
    r.duration = std::chrono::duration_cast<milliseconds>(now - start_);
    r.dropped_lines = state_->dropped;
    r.error =
        "the plugin did not return within kill_grace of its cancellation; its thread "
        "keeps running (isolation: none cannot kill it)";
    return r;
  }

  std::shared_ptr<RunState> state_;
  const SteadyClock::time_point start_;
  const milliseconds timeout_;
  const milliseconds kill_grace_;
  // Guarded by state_->mu:
  std::optional<RunOutcome> reason_;
  SteadyClock::time_point terminated_at_{};
  std::optional<RunResult> result_;
  std::thread thread_;  // started once, joined or detached by the destructor
};

}  // namespace

Result<std::unique_ptr<Execution>> StartPluginInProcess(PluginRegistry& registry,
                                                        const PluginJob& plugin,
                                                        const ProcessSpec& spec, OutputSink sink) {
  auto loaded = registry.Get(plugin.path);
  if (!loaded) {
    RunResult r;
    r.outcome = RunOutcome::kFailed;
    r.error = loaded.error().ToString();
    return FinishedExecution(std::move(r));
  }
  auto state = std::make_shared<RunState>();
  state->sink = std::move(sink);
  state->max_lines = spec.max_output_lines;
  state->max_line_bytes = spec.max_line_bytes;
  auto exec = std::make_unique<InProcessExecution>(state, spec);
  try {
    exec->Start(std::move(*loaded), RunParamsFromEnv(spec.env, plugin.config_json));
  } catch (const std::system_error& e) {
    std::lock_guard lock(state->mu);
    state->finished = true;  // no thread: the destructor must not wait for one
    return MakeError("jobs: plugin thread", e.what());
  }
  return std::unique_ptr<Execution>(std::move(exec));
}

}  // namespace tickd::jobs
