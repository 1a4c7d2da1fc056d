#include "app/runner.h"

#include <utility>

#include "jobs/http_execution.h"
#include "jobs/plugin_execution.h"
#include "jobs/plugin_loader.h"

namespace tickd::app {
namespace {

jobs::HttpJob HttpJobOf(const config::HttpJobSpec& http) {
  jobs::HttpJob out;
  out.request.method = http.method;
  out.request.url = http.url;
  out.request.headers = http.headers;
  out.request.body = http.body;
  out.request.timeout = http.timeout;
  out.expect_status = http.expect_status;
  return out;
}

class ProcessRunner final : public Runner {
 public:
  explicit ProcessRunner(std::string plugin_host) : plugin_host_(std::move(plugin_host)) {}

  Result<std::unique_ptr<jobs::Execution>> Start(const config::Job& job,
                                                 const jobs::ProcessSpec& spec,
                                                 jobs::OutputSink sink) override {
    if (job.http) return jobs::StartHttp(HttpJobOf(*job.http), spec, std::move(sink));
    if (!job.plugin) return jobs::StartProcess(spec, std::move(sink));
    const jobs::PluginJob plugin{job.plugin->path, job.plugin->config_json};
    if (job.plugin->isolation == config::Isolation::kNone) {
      return jobs::StartPluginInProcess(registry_, plugin, spec, std::move(sink));
    }
    if (plugin_host_.empty()) {
      return MakeError("plugin " + plugin.path, "no plugin host: /proc/self/exe is unreadable");
    }
    return jobs::StartPluginProcess(plugin_host_, plugin, spec, std::move(sink));
  }

  Result<std::unique_ptr<jobs::PreparedStart>> Prepare(const config::Job& job,
                                                       const jobs::ProcessSpec& spec,
                                                       jobs::OutputSink sink, WallTime start_at,
                                                       SteadyTime start_bound) override {
    const std::chrono::system_clock::time_point at(start_at.time_since_epoch());
    const std::chrono::steady_clock::time_point bound(start_bound.time_since_epoch());
    if (job.http) return jobs::PrepareHttp(HttpJobOf(*job.http), spec, std::move(sink), at, bound);
    if (!job.plugin) return jobs::PrepareProcess(spec, std::move(sink), at);
    const jobs::PluginJob plugin{job.plugin->path, job.plugin->config_json};
    if (job.plugin->isolation == config::Isolation::kNone) {
      return jobs::PreparePluginInProcess(registry_, plugin, spec, std::move(sink), at, bound);
    }
    if (plugin_host_.empty()) {  // Start says why
      return Runner::Prepare(job, spec, std::move(sink), start_at, start_bound);
    }
    return jobs::PreparePluginProcess(plugin_host_, plugin, spec, std::move(sink), at);
  }

 private:
  const std::string plugin_host_;
  jobs::PluginRegistry registry_;  // isolation: none — each library opened once
};

}  // namespace

std::unique_ptr<Runner> NewProcessRunner() {
  return NewProcessRunner(jobs::CurrentExecutable().value_or(std::string()));
}

std::unique_ptr<Runner> NewProcessRunner(std::string plugin_host) {
  return std::make_unique<ProcessRunner>(std::move(plugin_host));
}

}  // namespace tickd::app
