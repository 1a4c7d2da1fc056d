#include "base/wall_alarm.h"

#include <cerrno>
#include <ctime>

namespace tickd {

WallAlarm::WallAlarm() { sem_init(&sem_, /*pshared=*/0, 0); }

WallAlarm::~WallAlarm() { sem_destroy(&sem_); }

void WallAlarm::Ring() { sem_post(&sem_); }

bool WallAlarm::WaitUntil(std::chrono::system_clock::time_point at) {
  const auto since_epoch = at.time_since_epoch();
  const auto secs = std::chrono::floor<std::chrono::seconds>(since_epoch);
  timespec deadline{};
  deadline.tv_sec = static_cast<time_t>(secs.count());
  deadline.tv_nsec = static_cast<long>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(since_epoch - secs).count());
  while (std::chrono::system_clock::now() < at) {
    if (sem_timedwait(&sem_, &deadline) == 0) return false;
    // ETIMEDOUT: the clock is read again (a step back moves the instant away);
    // EINTR: a signal, wait again.
  }
  return true;
}

}  // namespace tickd
