#include "base/wall_alarm.h"

#include <cerrno>
#include <ctime>

#include "base/timespec.h"

namespace tickd {

WallAlarm::WallAlarm() { sem_init(&sem_, /*pshared=*/0, 0); }

WallAlarm::~WallAlarm() { sem_destroy(&sem_); }

void WallAlarm::Ring() { sem_post(&sem_); }

bool WallAlarm::WaitUntil(std::chrono::system_clock::time_point at) {
  const timespec deadline = ToTimespec(at.time_since_epoch());
  while (std::chrono::system_clock::now() < at) {
    if (sem_timedwait(&sem_, &deadline) == 0) return false;
    // ETIMEDOUT: the clock is read again (a step back moves the instant away);
    // EINTR: a signal, wait again.
  }
  return true;
}

bool WallAlarm::WaitUntilSteady(std::chrono::steady_clock::time_point at) {
  const timespec deadline = ToTimespec(at.time_since_epoch());
  while (std::chrono::steady_clock::now() < at) {
    if (sem_clockwait(&sem_, CLOCK_MONOTONIC, &deadline) == 0) return false;
  }
  return true;
}

}  // namespace tickd
