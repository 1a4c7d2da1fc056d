#include "lib/callable_runner.h"

#include <exception>

#include "app/log.h"
#include "jobs/plugin_call.h"
#include "jobs/thread_execution.h"

namespace tickd::lib {

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
  // The run's parameters as the supervisor gives every run (app::JobEnvironment).
  const jobs::PluginRunParams params = jobs::RunParamsFromEnv(spec.env, "{}");
  RunContext ctx;
  ctx.job = job.name;
  ctx.tick = std::chrono::sys_seconds(std::chrono::seconds(params.tick_unix));
  ctx.fence = params.fence;
  ctx.node = params.node;
  ctx.attempt = static_cast<int>(params.attempt);

  {
    std::lock_guard lock(calls_->mu);
    ++calls_->running;
  }
  auto call_ended = [calls = calls_] {
    std::lock_guard lock(calls->mu);
    --calls->running;
    calls->cv.notify_all();
  };
  jobs::ThreadCall call = [fn = std::move(fn), ctx = std::move(ctx),
                           call_ended](std::stop_token stop) mutable {
    jobs::CallEnd end{true, std::nullopt, ""};
    ctx.stop = std::move(stop);
    try {
      (*fn)(ctx);
    } catch (const std::exception& e) {
      end = jobs::CallEnd{false, std::nullopt, std::string("exception: ") + e.what()};
    } catch (...) {
      end = jobs::CallEnd{false, std::nullopt, "exception: (not a std::exception)"};
    }
    fn.reset();  // what it captured goes before WaitForCalls returns
    call_ended();
    return end;
  };
  jobs::ThreadCallOptions options;
  options.ignored_stop = "the function ignored its stop token for " +
                         app::FormatSeconds(spec.kill_grace) +
                         " (stop_grace); its claim is completed without it, its thread "
                         "keeps running";
  auto started = jobs::StartThreadCall(spec, std::move(call), std::move(options));
  if (!started) call_ended();  // the call was never made
  return started;
}

void CallableRunner::WaitForCalls() {
  std::unique_lock lock(calls_->mu);
  calls_->cv.wait(lock, [this] { return calls_->running == 0; });
}

}  // namespace tickd::lib
