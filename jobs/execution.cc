// The parts of execution.h that do not touch processes (those live in process.cc).
#include <utility>

#include "jobs/execution.h"

namespace tickd::jobs {
namespace {

class FinishedExecutionImpl final : public Execution {
 public:
  explicit FinishedExecutionImpl(RunResult result) : result_(std::move(result)) {}
  void Terminate(RunOutcome /*reason*/) override {}
  void Kill(RunOutcome /*reason*/) override {}
  std::optional<RunResult> WaitFor(milliseconds /*d*/) override { return result_; }

 private:
  const RunResult result_;
};

class StartOnReleaseImpl final : public PreparedStart {
 public:
  explicit StartOnReleaseImpl(std::function<Result<std::unique_ptr<Execution>>()> start)
      : start_(std::move(start)) {}
  Result<std::unique_ptr<Execution>> Release() override { return start_(); }

 private:
  std::function<Result<std::unique_ptr<Execution>>()> start_;
};

}  // namespace

std::string_view RunOutcomeName(RunOutcome o) {
  switch (o) {
    case RunOutcome::kDone:
      return "done";
    case RunOutcome::kFailed:
      return "failed";
    case RunOutcome::kTimeout:
      return "timeout";
    case RunOutcome::kLeaseLost:
      return "lease-lost";
    case RunOutcome::kKilled:
      return "killed";
  }
  return "failed";
}

std::vector<std::string> ShellArgv(const std::string& cmd) { return {"/bin/sh", "-c", cmd}; }

std::unique_ptr<Execution> FinishedExecution(RunResult result) {
  return std::make_unique<FinishedExecutionImpl>(std::move(result));
}

std::chrono::steady_clock::time_point SteadyDeadline(
    std::chrono::system_clock::time_point start_at) {
  const auto wall_now = std::chrono::system_clock::now();
  const auto steady_now = std::chrono::steady_clock::now();
  constexpr std::chrono::milliseconds kWallTimerFirst{1};
  if (start_at <= wall_now + kWallTimerFirst) return steady_now;
  return steady_now + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                          start_at - wall_now - kWallTimerFirst);
}

std::unique_ptr<PreparedStart> StartOnRelease(
    std::function<Result<std::unique_ptr<Execution>>()> start) {
  return std::make_unique<StartOnReleaseImpl>(std::move(start));
}

}  // namespace tickd::jobs
