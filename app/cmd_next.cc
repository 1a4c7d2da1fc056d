#include "app/commands.h"
namespace tickd::app {
int CmdNext(const NextArgs&) { return kExitFailure; }  // placeholder: the cron issue fills it in
}
