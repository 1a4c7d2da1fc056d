#include "lib/callable_runner.h"

#include <exception>
#include <optional>
#include <utility>

#include "app/log.h"
#include "jobs/plugin_call.h"
#include "jobs/thread_execution.h"

namespace tickd::lib {

void CallableRunner::Add(const std::string& name, JobFunction fn) {
  std::lock_guard lock(mu_);
  fns_[name] = std::make_shared<const JobFunction>(std::move(fn));
}

// Counts one call in Calls::running for as long as it lives: until the call drops it
// (after its function returned), or goes unmade with it.
class CallableRunner::Counted {
 public:
  explicit Counted(std::shared_ptr<Calls> calls) : calls_(std::move(calls)) {
    std::lock_guard lock(calls_->mu);
    ++calls_->running;
  }
  ~Counted() {
    std::lock_guard lock(calls_->mu);
    --calls_->running;
    calls_->cv.notify_all();
  }
  Counted(const Counted&) = delete;
  Counted& operator=(const Counted&) = delete;

 private:
  std::shared_ptr<Calls> calls_;
};

std::optional<jobs::ThreadCall> CallableRunner::MakeCall(const config::Job& job,
                                                         const jobs::ProcessSpec& spec) {
  std::shared_ptr<const JobFunction> fn;
  {
    std::lock_guard lock(mu_);
    auto it = fns_.find(job.name);
    if (it != fns_.end()) fn = it->second;
  }
  if (!fn) return std::nullopt;
  // The run's parameters as the supervisor gives every run (app::JobEnvironment).
  const jobs::PluginRunParams params = jobs::RunParamsFromEnv(spec.env, "{}");
  RunContext ctx;
  ctx.job = job.name;
  ctx.tick = std::chrono::sys_seconds(std::chrono::seconds(params.tick_unix));
  ctx.fence = params.fence;
  ctx.node = params.node;
  ctx.attempt = static_cast<int>(params.attempt);
  return [fn = std::move(fn), ctx = std::move(ctx),
          counted = std::make_shared<Counted>(calls_)](std::stop_token stop) mutable {
    jobs::CallEnd end{true, std::nullopt, ""};
    ctx.stop = std::move(stop);
    try {
      (*fn)(ctx);
    } catch (const std::exception& e) {
      end = jobs::CallEnd{false, std::nullopt, std::string("exception: ") + e.what()};
    } catch (...) {
      end = jobs::CallEnd{false, std::nullopt, "exception: (not a std::exception)"};
    }
    fn.reset();       // what it captured goes before WaitForCalls returns
    counted.reset();  // the call has ended
    return end;
  };
}

namespace {

jobs::RunResult NoFunction(const config::Job& job) {
  jobs::RunResult r;
  r.error = "no function registered for job " + job.name;
  return r;
}

jobs::ThreadCallOptions CallOptions(const jobs::ProcessSpec& spec) {
  jobs::ThreadCallOptions options;
  options.ignored_stop = "the function ignored its stop token for " +
                         app::FormatSeconds(spec.kill_grace) +
                         " (stop_grace); its claim is completed without it, its thread "
                         "keeps running";
  return options;
}

}  // namespace

Result<std::unique_ptr<jobs::Execution>> CallableRunner::Start(const config::Job& job,
                                                               const jobs::ProcessSpec& spec,
                                                               jobs::OutputSink /*sink*/) {
  std::optional<jobs::ThreadCall> call = MakeCall(job, spec);
  if (!call) return jobs::FinishedExecution(NoFunction(job));
  return jobs::StartThreadCall(spec, std::move(*call), CallOptions(spec));
}

Result<std::unique_ptr<jobs::PreparedStart>> CallableRunner::Prepare(
    const config::Job& job, const jobs::ProcessSpec& spec, jobs::OutputSink sink,
    WallTime start_at, SteadyTime start_bound) {
  if (!prepare_ahead_) return Runner::Prepare(job, spec, std::move(sink), start_at, start_bound);
  std::optional<jobs::ThreadCall> call = MakeCall(job, spec);
  if (!call) {
    return jobs::StartOnRelease([r = NoFunction(job)]() -> Result<std::unique_ptr<jobs::Execution>> {
      return jobs::FinishedExecution(r);
    });
  }
  return jobs::PrepareThreadCall(
      spec, std::move(*call), CallOptions(spec),
      std::chrono::system_clock::time_point(start_at.time_since_epoch()),
      std::chrono::steady_clock::time_point(start_bound.time_since_epoch()));
}

void CallableRunner::WaitForCalls() {
  std::unique_lock lock(calls_->mu);
  calls_->cv.wait(lock, [this] { return calls_->running == 0; });
}

}  // namespace tickd::lib
