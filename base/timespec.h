// std::chrono to the timespec of POSIX's absolute waits (clock_nanosleep,
// sem_timedwait, sem_clockwait).
#pragma once

#include <time.h>

#include <chrono>

namespace tickd {

// An instant given as its time since its clock's epoch; not before the epoch.
inline timespec ToTimespec(std::chrono::nanoseconds since_epoch) {
  const auto whole = std::chrono::floor<std::chrono::seconds>(since_epoch);
  timespec t{};
  t.tv_sec = static_cast<time_t>(whole.count());
  t.tv_nsec = static_cast<long>((since_epoch - whole).count());
  return t;
}

}  // namespace tickd
