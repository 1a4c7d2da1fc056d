// The tickd command line (docs/design.md §3) as a function: the tickd executable is a
// `main` that calls it, so the daemon runs on the engine inside libtickd.so
// (docs/design.md §10). Not for applications.
#pragma once

#include "tickd/export.h"

namespace tickd {

// Parses argv and runs one subcommand; returns the process exit status (0, 1, or 2
// for bad input). `tickd run` blocks SIGTERM, SIGINT and SIGHUP and serves them.
TICKD_API int run_command_line(int argc, char** argv);

}  // namespace tickd
