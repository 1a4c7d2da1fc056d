// One call of a plugin's run (init, run, shutdown), shared by both isolation modes:
// `tickd plugin-host` (process) and the daemon's worker thread (none). The run's
// parameters come from the job environment the supervisor builds (docs/design.md §5), so
// both modes see exactly what a shell job would.
#pragma once

#include <tickd/plugin.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>

namespace tickd::jobs {

struct PluginRunParams {
  std::string job;
  std::string node;
  std::int64_t tick_unix = 0;
  std::uint64_t fence = 0;
  std::uint32_t attempt = 1;
  std::string config_json = "{}";
};

// Reads TICKD_JOB, TICKD_NODE, TICKD_TICK_UNIX, TICKD_FENCE, TICKD_ATTEMPT from
// `env` (missing or malformed numbers read as 0, attempt as 1).
PluginRunParams RunParamsFromEnv(const std::map<std::string, std::string>& env,
                                 std::string config_json);

// "debug" "info" "warn" "error" for levels 0..3; lower clamps to debug, higher to error.
std::string_view PluginLogLevelName(int level);

struct PluginCallResult {
  int status = 0;     // 0 success; else init's or run's return value
  std::string error;  // the plugin's err buffer when status != 0 ("init: ..." for init)
};

using PluginLogFn = std::function<void(int level, std::string_view message)>;
using PluginCancelledFn = std::function<bool()>;

// init (if set) with the config, then run, then shutdown (if set, also after a
// failed run; not after a failed init). `log` and `cancelled` are called from
// inside the plugin, on the calling thread or any thread the plugin starts.
PluginCallResult CallPlugin(const tickd_plugin& plugin, const PluginRunParams& params,
                            PluginLogFn log, PluginCancelledFn cancelled);

// An exit status (0..255) for a plugin's return value: 0 stays 0, 1..255 stay,
// anything else (negative, ≥ 256) becomes 1 so that a failure never reads as success.
int PluginExitStatus(int status);

}  // namespace tickd::jobs
