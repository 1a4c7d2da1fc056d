// `tickd plugin-host PATH` (hidden): the child process of a plugin run with
// isolation: process; with --check, the child in which the validator loads a plugin
// (jobs::CheckPluginInHost). tickd starts it; people do not.
#include <unistd.h>

#include <cstdio>

#include "app/commands.h"
#include "jobs/plugin_execution.h"

namespace tickd::app {

int CmdPluginHost(const PluginHostArgs& args) {
  const int status = args.check ? jobs::RunPluginCheck(args.plugin_path)
                                : jobs::RunPluginHost(args.plugin_path);
  std::fflush(nullptr);
  // Not exit(): threads the plugin left running must not meet static destructors.
  ::_exit(status);
}

}  // namespace tickd::app
