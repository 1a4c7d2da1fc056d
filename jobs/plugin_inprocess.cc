// isolation: none — a plugin run on a worker thread of the daemon (see
// plugin_execution.h for what this costs and what it cannot do).
#include <string>
#include <utility>

#include "jobs/plugin_call.h"
#include "jobs/plugin_execution.h"
#include "jobs/thread_execution.h"

namespace tickd::jobs {
namespace {

// One run's call of the plugin and its options; or, when the library cannot be
// opened, the finished kFailed run that says so.
struct InProcessCall {
  ThreadCall call;
  ThreadCallOptions options;
  std::unique_ptr<Execution> cannot_start;
};

InProcessCall MakeCall(PluginRegistry& registry, const PluginJob& plugin,
                       const ProcessSpec& spec, OutputSink sink) {
  InProcessCall out;
  auto loaded = registry.Get(plugin.path);
  if (!loaded) {
    RunResult r;
    r.outcome = RunOutcome::kFailed;
    r.error = loaded.error().ToString();
    out.cannot_start = FinishedExecution(std::move(r));
    return out;
  }
  // The plugin's log lines, bounded as a process's output is.
  auto output = std::make_shared<CallOutput>(std::move(sink), spec);
  // The call holds the library (loaded) until it returns, even past its Execution.
  out.call = [output, library = std::move(*loaded),
              params = RunParamsFromEnv(spec.env, plugin.config_json)](std::stop_token stop) {
    PluginCallResult r = CallPlugin(
        library->plugin(), params,
        [&output](int level, std::string_view message) {
          output->Line("plugin." + std::string(PluginLogLevelName(level)), message);
        },
        [&stop] { return stop.stop_requested(); });
    const int status = PluginExitStatus(r.status);
    return CallEnd{status == 0, status, std::move(r.error)};
  };
  out.options.ignored_stop =
      "the plugin did not return within kill_grace of its cancellation; its thread "
      "keeps running (isolation: none cannot kill it)";
  out.options.output = std::move(output);
  return out;
}

}  // namespace

Result<std::unique_ptr<Execution>> StartPluginInProcess(PluginRegistry& registry,
                                                        const PluginJob& plugin,
                                                        const ProcessSpec& spec, OutputSink sink) {
  InProcessCall c = MakeCall(registry, plugin, spec, std::move(sink));
  if (c.cannot_start) return std::move(c.cannot_start);
  return StartThreadCall(spec, std::move(c.call), std::move(c.options));
}

Result<std::unique_ptr<PreparedStart>> PreparePluginInProcess(
    PluginRegistry& registry, const PluginJob& plugin, const ProcessSpec& spec, OutputSink sink,
    std::chrono::system_clock::time_point start_at,
    std::chrono::steady_clock::time_point start_bound) {
  InProcessCall c = MakeCall(registry, plugin, spec, std::move(sink));
  if (c.cannot_start) {
    auto finished = std::make_shared<std::unique_ptr<Execution>>(std::move(c.cannot_start));
    return StartOnRelease(
        [finished]() -> Result<std::unique_ptr<Execution>> { return std::move(*finished); });
  }
  return PrepareThreadCall(spec, std::move(c.call), std::move(c.options), start_at, start_bound);
}

}  // namespace tickd::jobs
