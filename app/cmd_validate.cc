// `tickd validate -c FILE` (docs/design.md §3): load the job file exactly as the daemon
// would, then say "ok" with the warnings, or list every error and exit 2.
#include <iostream>

#include "app/commands.h"
#include "app/reload.h"
#include "config/config.h"

namespace tickd::app {

int CmdValidate(const ValidateArgs& args) {
  auto config = config::LoadConfig(args.config_path, CommandLoadOptions());
  if (!config) {
    for (const config::ConfigError& e : config.error()) std::cerr << e.ToString() << "\n";
    return kExitBadInput;
  }
  std::size_t disabled = 0;
  for (const config::Job& job : config->jobs) disabled += job.enabled ? 0 : 1;
  std::cout << args.config_path << ": ok, " << config->jobs.size()
            << (config->jobs.size() == 1 ? " job" : " jobs");
  if (disabled > 0) std::cout << " (" << disabled << " disabled)";
  std::cout << "\n";
  for (const config::ConfigError& w : config->warnings) {
    std::cout << w.file;
    if (w.line > 0) std::cout << ":" << w.line << ":" << w.column;
    std::cout << ": warning: " << w.message << "\n";
  }
  return kExitOk;
}

}  // namespace tickd::app
