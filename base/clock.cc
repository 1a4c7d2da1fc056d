#include "base/clock.h"

#include <algorithm>

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
