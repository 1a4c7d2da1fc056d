// Time reaches tickd through a Clock so that the scheduler, the lease watchdog and
// the memory backend can run in simulated time in tests (LevelDB's Env idea).
//
// Two time lines, never mixed:
//   - Wall(): UTC wall-clock time. Ticks are wall instants; it may jump.
//   - Steady(): a monotonic time line for timeouts and lease validity.
// Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <condition_variable>
#include <mutex>

namespace tickd {

using WallTime = std::chrono::time_point<std::chrono::system_clock, std::chrono::milliseconds>;
using SteadyTime = std::chrono::time_point<std::chrono::steady_clock, std::chrono::milliseconds>;

class Clock {
 public:
  virtual ~Clock() = default;
  virtual WallTime Wall() const = 0;
  virtual SteadyTime Steady() const = 0;
  // Blocks until Steady() >= deadline or Wake() is called; returns early on Wake().
  // Spurious early returns are allowed: callers re-check their condition.
  virtual void SleepUntil(SteadyTime deadline) = 0;
  // Ends the current and the next SleepUntil early (used for reload/shutdown).
  virtual void Wake() = 0;
  // Blocks on `cv` until Wall() >= t, a notify of `cv`, or `max_wait` of real time;
  // spurious early returns are allowed. REQUIRES: `lock` holds `cv`'s mutex. The
  // RealClock waits on the wall clock itself (an absolute CLOCK_REALTIME timeout:
  // no rounding to ms, no drift from a relative wait, and a step of the clock moves
  // it); a FakeClock cannot wake anyone's `cv` when it moves, so it waits max_wait.
  virtual void WaitUntilWall(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                             WallTime t, std::chrono::milliseconds max_wait) = 0;
};

// The real clocks: system_clock and steady_clock.
class RealClock final : public Clock {
 public:
  WallTime Wall() const override;
  SteadyTime Steady() const override;
  void SleepUntil(SteadyTime deadline) override;
  void Wake() override;
  void WaitUntilWall(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, WallTime t,
                     std::chrono::milliseconds max_wait) override;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool woken_ = false;
};

// The host's clocks as its kernel keeps them, read by system call: a preload library
// that gives one process a clock of its own (libfaketime replaces clock_gettime,
// time and gettimeofday in the process) does not reach them. What every process on
// the host shares, and so the clock of a store that lives on the host (SQLite,
// docs/backends.md). Wall() is CLOCK_REALTIME, Steady() CLOCK_MONOTONIC; the waits
// are RealClock's (a process whose own monotonic clock is faked is refused at start:
// base/steady_waits.h). Instance() lives as long as the process.
class HostClock final : public Clock {
 public:
  static HostClock& Instance();
  WallTime Wall() const override;
  SteadyTime Steady() const override;
  void SleepUntil(SteadyTime deadline) override { waits_.SleepUntil(deadline); }
  void Wake() override { waits_.Wake(); }
  void WaitUntilWall(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, WallTime t,
                     std::chrono::milliseconds max_wait) override {
    waits_.WaitUntilWall(cv, lock, t, max_wait);
  }

 private:
  RealClock waits_;
};

// The host's CLOCK_BOOTTIME in ms, read as HostClock reads its clocks, and taken back
// to the host's own time line when this process runs in a time namespace of its own
// (`unshare --time`: /proc/self/timens_offsets). Processes of one boot compare leases
// on it however their clocks are faked.
std::int64_t HostBootMs();

// Simulated time for tests. Starts at `start`; time moves only through Advance()
// (or AdvanceTo()), which also wakes sleepers whose deadline has passed. Wall and
// Steady move together unless StepWall() jumps the wall clock alone.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(WallTime start);
  WallTime Wall() const override;
  SteadyTime Steady() const override;
  void SleepUntil(SteadyTime deadline) override;
  void Wake() override;
  void WaitUntilWall(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, WallTime t,
                     std::chrono::milliseconds max_wait) override;

  void Advance(std::chrono::milliseconds by);
  void StepWall(std::chrono::milliseconds by);  // a wall-clock step (NTP), steady unchanged
  // Number of threads currently blocked in SleepUntil (lets tests wait for quiescence).
  int sleepers() const;

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  WallTime wall_;
  SteadyTime steady_;
  bool woken_ = false;
  int sleepers_ = 0;
};

}  // namespace tickd
