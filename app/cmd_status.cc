// `tickd status -c FILE [--job NAME] [--last N] [--json]` (docs/design.md §9): the ledger as
// the cluster saw it, read from the lock backend.
#include <unistd.h>

#include <iostream>

#include "app/commands.h"
#include "app/status.h"
#include "app/status_cli.h"

namespace tickd::app {

int CmdStatus(const StatusArgs& args) {
  RealClock clock;
  auto opened = OpenOpsContext(args.config_path, clock);
  if (const int* status = std::get_if<int>(&opened)) return *status;
  OpsContext& ctx = std::get<OpsContext>(opened);
  Result<StatusReport> report =
      CollectStatus(ctx.config.jobs, *ctx.backend, clock.Wall(), args.job, args.last);
  if (!report) {
    std::cerr << "tickd: " << report.error().ToString() << "\n";
    return report.error().context == "job" ? kExitBadInput : kExitFailure;
  }
  if (args.json) {
    std::cout << FormatStatusJson(*report);
  } else {
    const bool color = ::isatty(STDOUT_FILENO) == 1 && std::getenv("NO_COLOR") == nullptr;
    std::cout << FormatStatusText(*report, color);
  }
  return kExitOk;
}

}  // namespace tickd::app
