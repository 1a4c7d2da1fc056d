#include "jobs/plugin_call.h"

#include <array>
#include <charconv>

namespace tickd::jobs {
namespace {

constexpr std::size_t kErrorBufferBytes = 1024;

template <typename T>
T Number(const std::map<std::string, std::string>& env, const char* name, T fallback) {
  auto it = env.find(name);
  if (it == env.end()) return fallback;
  T value{};
  const char* begin = it->second.data();
  const char* end = begin + it->second.size();
  auto [ptr, ec] = std::from_chars(begin, end, value);
  return ec == std::errc() && ptr == end ? value : fallback;
}

std::string Text(const std::map<std::string, std::string>& env, const char* name) {
  auto it = env.find(name);
  return it == env.end() ? "" : it->second;
}

struct Callbacks {
  PluginLogFn log;
  PluginCancelledFn cancelled;
};

void LogTrampoline(void* ctx, int level, const char* message) {
  auto* cb = static_cast<Callbacks*>(ctx);
  if (cb->log) cb->log(level, message != nullptr ? message : "");
}

int CancelledTrampoline(void* ctx) {
  auto* cb = static_cast<Callbacks*>(ctx);
  return cb->cancelled && cb->cancelled() ? 1 : 0;
}

// The err buffer as text: up to its first NUL, and never past its end.
std::string ErrorText(const std::array<char, kErrorBufferBytes>& err) {
  std::size_t n = 0;
  while (n < err.size() && err[n] != '\0') ++n;
  return std::string(err.data(), n);
}

}  // namespace

PluginRunParams RunParamsFromEnv(const std::map<std::string, std::string>& env,
                                 std::string config_json) {
  PluginRunParams p;
  p.job = Text(env, "TICKD_JOB");
  p.node = Text(env, "TICKD_NODE");
  p.tick_unix = Number<std::int64_t>(env, "TICKD_TICK_UNIX", 0);
  p.fence = Number<std::uint64_t>(env, "TICKD_FENCE", 0);
  p.attempt = Number<std::uint32_t>(env, "TICKD_ATTEMPT", 1);
  p.config_json = config_json.empty() ? "{}" : std::move(config_json);
  return p;
}

std::string_view PluginLogLevelName(int level) {
  if (level <= TICKD_LOG_DEBUG) return "debug";
  if (level == TICKD_LOG_INFO) return "info";
  if (level == TICKD_LOG_WARN) return "warn";
  return "error";
}

int PluginExitStatus(int status) { return status >= 0 && status <= 255 ? status : 1; }

PluginCallResult CallPlugin(const tickd_plugin& plugin, const PluginRunParams& params,
                            PluginLogFn log, PluginCancelledFn cancelled) {
  Callbacks callbacks{std::move(log), std::move(cancelled)};
  std::array<char, kErrorBufferBytes> err{};
  PluginCallResult result;
  if (plugin.init != nullptr) {
    const int rc = plugin.init(params.config_json.c_str(), err.data(), err.size());
    if (rc != 0) {
      result.status = rc;
      result.error = "init: " + ErrorText(err);
      return result;
    }
  }
  tickd_run run{};
  run.abi_version = TICKD_PLUGIN_ABI_VERSION;
  run.job = params.job.c_str();
  run.node = params.node.c_str();
  run.tick_unix = params.tick_unix;
  run.fence = params.fence;
  run.attempt = params.attempt;
  run.config_json = params.config_json.c_str();
  run.log = &LogTrampoline;
  run.log_ctx = &callbacks;
  run.cancelled = &CancelledTrampoline;
  run.cancel_ctx = &callbacks;
  err.fill('\0');
  result.status = plugin.run(&run, err.data(), err.size());
  if (result.status != 0) result.error = ErrorText(err);
  if (plugin.shutdown != nullptr) plugin.shutdown();
  return result;
}

}  // namespace tickd::jobs
