// tickd::run_command_line (include/tickd/command_line.h): the daemon's command line
// (app/main.cc) exported from libtickd.so for the tickd executable.
#include "tickd/command_line.h"

#include "app/commands.h"

int tickd::run_command_line(int argc, char** argv) { return app::RunCommandLine(argc, argv); }
