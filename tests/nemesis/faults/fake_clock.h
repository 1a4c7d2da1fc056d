// A wall clock of its own for a replica: libfaketime driven through a control file.
//
// FakeClock owns a control file; Env() gives the environment that makes a process
// (and its children) read its wall clock (CLOCK_REALTIME, time(), gettimeofday) as
// real time + the file's offset. libfaketime re-reads the file on every call
// (FAKETIME_NO_CACHE=1), so a running process sees each change at its next call.
// CLOCK_MONOTONIC stays real (FAKETIME_DONT_FAKE_MONOTONIC=1): a step moves the wall
// clock only, as an NTP step or an operator's `date -s` would.
//
// Step(delta) adds to the offset at once (forward or back). Drift(rate) makes the fake
// clock run at `rate` times real speed from now on: a thread of this object rewrites
// the offset every kDriftPeriod. (libfaketime's own "x<rate>" is not used: it scales
// the time since the process started, so setting it on a running process jumps the
// clock by age × (rate − 1), and it also speeds up sleeps; its FAKETIME_XRESET, meant
// to smooth that, made 0.9.10 ignore offsets.) Every write replaces the file whole
// (rename), so a reader never sees half of it.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"

namespace tickd::nemesis {

class FakeClock {
 public:
  static constexpr const char* kLibrary = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";
  static constexpr std::chrono::milliseconds kDriftPeriod{50};
  using Seconds = std::chrono::duration<double>;

  // Whether libfaketime is installed (Debian package faketime); if not, `why` says so.
  static bool Available(std::string* why);

  // Creates `dir`/faketime-<n>.rc with offset 0 (real time). REQUIRES: `dir` exists.
  // Errors: libfaketime missing, the file cannot be written.
  static Result<std::unique_ptr<FakeClock>> Create(const std::string& dir);

  // Stops drifting; the file stays (processes still running keep their last offset).
  ~FakeClock();
  FakeClock(const FakeClock&) = delete;
  FakeClock& operator=(const FakeClock&) = delete;

  // "NAME=value" entries to add to a process's environment: LD_PRELOAD,
  // FAKETIME_TIMESTAMP_FILE, FAKETIME_NO_CACHE, FAKETIME_DONT_FAKE_MONOTONIC,
  // FAKETIME_DONT_RESET.
  std::vector<std::string> Env() const;
  const std::string& control_file() const { return path_; }

  // Moves the fake wall clock by `delta` (cumulative: Step(+10s), Step(-10s) is real
  // time again). Errors: the file cannot be written (the offset is unchanged).
  Result<void> Step(Seconds delta);
  // From now on the fake clock runs at `rate` × real speed (1.0: real speed; drift
  // accumulated so far stays in the offset). REQUIRES: 0 < rate, rate != inf.
  // Errors: the rate is out of range, the file cannot be written.
  Result<void> Drift(double rate);

  Seconds offset() const;  // fake − real, now
  double rate() const;

 private:
  explicit FakeClock(std::string path);
  Seconds OffsetLocked(std::chrono::steady_clock::time_point now) const;
  Result<void> WriteLocked(Seconds offset);
  void DriftLoop();

  const std::string path_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  Seconds base_{0};                              // offset at since_
  std::chrono::steady_clock::time_point since_;  // when the rate was last set
  double rate_ = 1.0;
  bool stop_ = false;
  std::thread drifter_;  // runs while the object lives; idle at rate 1
};

}  // namespace tickd::nemesis
