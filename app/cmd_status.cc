// `tickd status -c FILE [JOB] [--last N] [--json]` (docs/design.md §9): the ledger as
// the cluster saw it, read from the lock backend; `tickd status -c FILE JOB --runs
// [--limit N] [--json]`: the job's last runs with the tail of what they printed.
#include <unistd.h>

#include <iostream>

#include "app/commands.h"
#include "app/status.h"
#include "app/status_cli.h"

namespace tickd::app {
namespace {

int ShowRuns(const StatusArgs& args, OpsContext& ctx, Clock& clock, bool color) {
  if (args.job.empty()) {
    std::cerr << "tickd: status --runs needs a job: tickd status -c FILE JOB --runs\n";
    return kExitBadInput;
  }
  Result<RunsReport> report =
      CollectRuns(ctx.config.jobs, *ctx.backend, clock.Wall(), args.job, args.limit);
  if (!report) {
    std::cerr << "tickd: " << report.error().ToString() << "\n";
    return report.error().context == "job" ? kExitBadInput : kExitFailure;
  }
  std::cout << (args.json ? FormatRunsJson(*report) : FormatRunsText(*report, color));
  return kExitOk;
}

}  // namespace

int CmdStatus(const StatusArgs& args) {
  RealClock clock;
  auto opened = OpenOpsContext(args.config_path, clock);
  if (const int* status = std::get_if<int>(&opened)) return *status;
  OpsContext& ctx = std::get<OpsContext>(opened);
  const bool color = UseColor(::isatty(STDOUT_FILENO) == 1, std::getenv("NO_COLOR"));
  if (args.runs) return ShowRuns(args, ctx, clock, color);
  Result<StatusReport> report =
      CollectStatus(ctx.config.jobs, *ctx.backend, clock.Wall(), args.job, args.last);
  if (!report) {
    std::cerr << "tickd: " << report.error().ToString() << "\n";
    return report.error().context == "job" ? kExitBadInput : kExitFailure;
  }
  if (args.json) {
    std::cout << FormatStatusJson(*report);
  } else {
    std::cout << FormatStatusText(*report, color);
  }
  return kExitOk;
}

}  // namespace tickd::app
