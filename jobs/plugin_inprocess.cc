// isolation: none — a plugin run on a worker thread of the daemon (see
// plugin_execution.h for what this costs and what it cannot do).
#include <string>
#include <utility>

#include "jobs/plugin_call.h"
#include "jobs/plugin_execution.h"
#include "jobs/thread_execution.h"

namespace tickd::jobs {
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
  // The plugin's log lines, bounded as a process's output is.
  auto output = std::make_shared<CallOutput>(std::move(sink), spec);
  // The call holds the library (loaded) until it returns, even past its Execution.
  ThreadCall call = [output, library = std::move(*loaded),
                     params =
                         RunParamsFromEnv(spec.env, plugin.config_json)](std::stop_token stop) {
    PluginCallResult r = CallPlugin(
        library->plugin(), params,
        [&output](int level, std::string_view message) {
          output->Line("plugin." + std::string(PluginLogLevelName(level)), message);
        },
        [&stop] { return stop.stop_requested(); });
    const int status = PluginExitStatus(r.status);
    return CallEnd{status == 0, status, std::move(r.error)};
  };
  ThreadCallOptions options;
  options.ignored_stop =
      "the plugin did not return within kill_grace of its cancellation; its thread "
      "keeps running (isolation: none cannot kill it)";
  options.output = std::move(output);
  return StartThreadCall(spec, std::move(call), std::move(options));
}

}  // namespace tickd::jobs
