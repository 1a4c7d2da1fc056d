#include "base/clock.h"

#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <sstream>
#include <string>

namespace tickd {

using std::chrono::milliseconds;

WallTime RealClock::Wall() const {
  return std::chrono::time_point_cast<milliseconds>(std::chrono::system_clock::now());
}

SteadyTime RealClock::Steady() const {
  return std::chrono::time_point_cast<milliseconds>(std::chrono::steady_clock::now());
}

void RealClock::SleepUntil(SteadyTime deadline) {
  std::unique_lock lock(mu_);
  cv_.wait_until(lock, deadline, [this] { return woken_; });
  woken_ = false;
}

void RealClock::Wake() {
  {
    std::lock_guard lock(mu_);
    woken_ = true;
  }
  cv_.notify_all();
}

void RealClock::WaitUntilWall(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                              WallTime t, milliseconds max_wait) {
  // A system_clock deadline makes libstdc++ wait with pthread_cond_clockwait on
  // CLOCK_REALTIME: one absolute timer, exact to the thread's timer slack.
  const auto at = std::chrono::system_clock::time_point(t.time_since_epoch());
  cv.wait_until(lock, std::min(at, std::chrono::system_clock::now() + max_wait));
}

namespace {

// clock_gettime by system call, not through libc (whose symbol a preload library can
// replace, and whose vDSO path it reads from).
std::int64_t KernelClockMs(clockid_t id) {
  timespec ts{};
  ::syscall(SYS_clock_gettime, id, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

// This process's time namespace's CLOCK_BOOTTIME offset in ms (0 in the host's own, or
// on a kernel without time namespaces): the `boottime <s> <ns>` line of
// /proc/self/timens_offsets.
std::int64_t BoottimeOffsetMs() {
  std::ifstream in("/proc/self/timens_offsets");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string clock;
    long long sec = 0, nsec = 0;
    if (fields >> clock >> sec >> nsec && clock == "boottime") return sec * 1000 + nsec / 1'000'000;
  }
  return 0;
}

}  // namespace

HostClock& HostClock::Instance() {
  static HostClock* const clock = new HostClock;  // never destroyed: used until exit
  return *clock;
}

WallTime HostClock::Wall() const { return WallTime(milliseconds(KernelClockMs(CLOCK_REALTIME))); }

SteadyTime HostClock::Steady() const {
  return SteadyTime(milliseconds(KernelClockMs(CLOCK_MONOTONIC)));
}

std::int64_t HostBootMs() {
  // A process's time namespace is fixed once it runs, but a child forked after its
  // parent's unshare(CLONE_NEWTIME) is in another one: read again in a new process.
  static std::atomic<pid_t> read_by{0};
  static std::atomic<std::int64_t> offset_ms{0};
  const pid_t self = ::getpid();
  if (read_by.load(std::memory_order_acquire) != self) {
    offset_ms.store(BoottimeOffsetMs(), std::memory_order_relaxed);
    read_by.store(self, std::memory_order_release);
  }
  return KernelClockMs(CLOCK_BOOTTIME) - offset_ms.load(std::memory_order_relaxed);
}

FakeClock::FakeClock(WallTime start) : wall_(start), steady_(SteadyTime(milliseconds(1'000'000))) {}

WallTime FakeClock::Wall() const {
  std::lock_guard lock(mu_);
  return wall_;
}

SteadyTime FakeClock::Steady() const {
  std::lock_guard lock(mu_);
  return steady_;
}

void FakeClock::SleepUntil(SteadyTime deadline) {
  std::unique_lock lock(mu_);
  ++sleepers_;
  cv_.notify_all();  // AdvanceTo-style waiters may watch sleepers()
  cv_.wait(lock, [&] { return woken_ || steady_ >= deadline; });
  woken_ = false;
  --sleepers_;
}

void FakeClock::Wake() {
  {
    std::lock_guard lock(mu_);
    woken_ = true;
  }
  cv_.notify_all();
}

void FakeClock::Advance(milliseconds by) {
  {
    std::lock_guard lock(mu_);
    wall_ += by;
    steady_ += by;
  }
  cv_.notify_all();
}

void FakeClock::StepWall(milliseconds by) {
  {
    std::lock_guard lock(mu_);
    wall_ += by;
  }
  cv_.notify_all();
}

void FakeClock::WaitUntilWall(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                              WallTime t, milliseconds max_wait) {
  if (Wall() >= t) return;
  cv.wait_for(lock, max_wait);
}

int FakeClock::sleepers() const {
  std::lock_guard lock(mu_);
  return sleepers_;
}

}  // namespace tickd
