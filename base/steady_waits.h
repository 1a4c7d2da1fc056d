// A check the daemon makes at start: that waits on the monotonic clock end when due.
#pragma once

#include <chrono>

#include "base/error.h"

namespace tickd {

// Whether this process's timed waits on the monotonic clock wake when due: a short
// std::condition_variable wait on steady_clock must end after its deadline, not
// never, not at once. The kernel judges such a deadline (pthread_cond_clockwait,
// which libstdc++ uses for every steady_clock wait) on the real CLOCK_MONOTONIC, so
// an LD_PRELOAD clock faker that changes what CLOCK_MONOTONIC reads without
// translating those deadlines breaks every wait of the daemon: libfaketime 0.9.10
// without FAKETIME_DONT_FAKE_MONOTONIC reads CLOCK_MONOTONIC as its fake wall time
// (~1.8e9 s instead of the time since boot), so each wait sleeps for decades (or,
// with a fake time before the boot time, returns at once, forever). Takes ~20 ms when
// they work, at most `limit` of real time (relative sleeps) when they do not. Errors
// say which of the two it was.
Result<void> CheckSteadyWaits(std::chrono::milliseconds limit = std::chrono::seconds(3));

}  // namespace tickd
