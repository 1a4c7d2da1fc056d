#include "app/runner.h"

namespace tickd::app {
namespace {

class ProcessRunner final : public Runner {
 public:
  Result<std::unique_ptr<jobs::Execution>> Start(const config::Job& job,
                                                 const jobs::ProcessSpec& spec,
                                                 jobs::OutputSink sink) override {
    if (job.plugin) {
      return MakeError("plugin " + job.plugin->path, "plugin jobs are not supported yet");
    }
    return jobs::StartProcess(spec, std::move(sink));
  }
};

}  // namespace

std::unique_ptr<Runner> NewProcessRunner() { return std::make_unique<ProcessRunner>(); }

}  // namespace tickd::app
