// libtickd: once-per-tick scheduling and fenced locks for C++ services.
// Start with tickd/expected.h (how outcomes are reported), then tickd/store.h and
// tickd/scheduler.h. Depends only on the C++20 standard library; link tickd::tickd
// (CMake: find_package(tickd CONFIG)) or `pkg-config --libs tickd`.
#pragma once

#include <string_view>

#include "tickd/expected.h"
#include "tickd/export.h"
#include "tickd/scheduler.h"
#include "tickd/store.h"

namespace tickd {

// The library's version, "MAJOR.MINOR.PATCH" (the tickd release it comes from).
TICKD_API std::string_view version();

}  // namespace tickd
