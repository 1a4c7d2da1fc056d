// isolation: none — a plugin run on a worker thread of the daemon (see
// plugin_execution.h for what this costs and what it cannot do).
#include <mutex>
#include <string>
#include <utility>

#include "jobs/plugin_call.h"
#include "jobs/plugin_execution.h"
#include "jobs/thread_execution.h"

namespace tickd::jobs {
namespace {

// Where the plugin's log lines go, bounded as a process's output is. Shared by the
// calling thread and the Execution (through the options' hooks).
struct PluginOutput {
  std::mutex mu;
  OutputSink sink;  // guarded by mu; cleared when the Execution goes
  std::size_t max_lines = 0;
  std::size_t max_line_bytes = 0;
  std::size_t lines = 0;    // guarded by mu
  std::size_t dropped = 0;  // guarded by mu

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
  auto output = std::make_shared<PluginOutput>();
  output->sink = std::move(sink);
  output->max_lines = spec.max_output_lines;
  output->max_line_bytes = spec.max_line_bytes;
  // The call holds the library (loaded) until it returns, even past its Execution.
  ThreadCall call = [output, library = std::move(*loaded),
                     params =
                         RunParamsFromEnv(spec.env, plugin.config_json)](std::stop_token stop) {
    PluginCallResult r = CallPlugin(
        library->plugin(), params,
        [&output](int level, std::string_view message) { output->Log(level, message); },
        [&stop] { return stop.stop_requested(); });
    const int status = PluginExitStatus(r.status);
    return CallEnd{status == 0, status, std::move(r.error)};
  };
  ThreadCallOptions options;
  options.ignored_stop =
      "the plugin did not return within kill_grace of its cancellation; its thread "
      "keeps running (isolation: none cannot kill it)";
  options.on_destroy = [output] {
    std::lock_guard lock(output->mu);
    output->sink = nullptr;  // the sink's owner may be gone once the Execution is
  };
  options.dropped_lines = [output] {
    std::lock_guard lock(output->mu);
    return output->dropped;
  };
  return StartThreadCall(spec, std::move(call), std::move(options));
}

}  // namespace tickd::jobs
