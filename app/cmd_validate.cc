#include "app/commands.h"
namespace tickd::app {
int CmdValidate(const ValidateArgs&) { return kExitFailure; }  // placeholder: the config work fills it in
}
