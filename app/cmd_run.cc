#include "app/commands.h"
namespace tickd::app {
int CmdRun(const RunArgs&) { return kExitFailure; }  // placeholder: the scheduler work fills it in
}
