// tickd::version(): compiled into libtickd.so itself (TICKD_VERSION from the project).
#include "tickd/tickd.h"

std::string_view tickd::version() { return TICKD_VERSION; }
