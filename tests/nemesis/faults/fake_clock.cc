#include "tests/nemesis/faults/fake_clock.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>

namespace tickd::nemesis {
namespace {

std::atomic<int> clock_serial{0};

// libfaketime's relative format: a sign, seconds, no unit ("+3600.000", "-0.750").
std::string Format(FakeClock::Seconds offset) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%+.3f\n", offset.count());
  return buf;
}

}  // namespace

bool FakeClock::Available(std::string* why) {
  if (::access(kLibrary, R_OK) == 0) return true;
  if (why != nullptr) *why = std::string("no ") + kLibrary + " (Debian package faketime)";
  return false;
}

Result<std::unique_ptr<FakeClock>> FakeClock::Create(const std::string& dir) {
  std::string why;
  if (!Available(&why)) return MakeError("fake clock", why);
  const std::string path = dir + "/faketime-" + std::to_string(clock_serial++) + ".rc";
  std::unique_ptr<FakeClock> clock(new FakeClock(path));
  {
    std::lock_guard<std::mutex> lock(clock->mu_);
    if (auto written = clock->WriteLocked(Seconds(0)); !written)
      return tl::unexpected(written.error());
  }
  clock->drifter_ = std::thread([raw = clock.get()] { raw->DriftLoop(); });
  return clock;
}

FakeClock::FakeClock(std::string path)
    : path_(std::move(path)), since_(std::chrono::steady_clock::now()) {}

FakeClock::~FakeClock() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (drifter_.joinable()) drifter_.join();
}

std::vector<std::string> FakeClock::Env() const {
  return {std::string("LD_PRELOAD=") + kLibrary, "FAKETIME_TIMESTAMP_FILE=" + path_,
          "FAKETIME_NO_CACHE=1", "FAKETIME_DONT_FAKE_MONOTONIC=1", "FAKETIME_DONT_RESET=1"};
}

FakeClock::Seconds FakeClock::OffsetLocked(std::chrono::steady_clock::time_point now) const {
  return base_ + Seconds(now - since_) * (rate_ - 1.0);
}

Result<void> FakeClock::WriteLocked(Seconds offset) {
  const std::string tmp = path_ + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << Format(offset);
    out.flush();
    if (!out) return MakeError("fake clock: write " + tmp, std::strerror(errno));
  }
  if (std::rename(tmp.c_str(), path_.c_str()) != 0)
    return MakeError("fake clock: rename to " + path_, std::strerror(errno));
  return {};
}

Result<void> FakeClock::Step(Seconds delta) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto now = std::chrono::steady_clock::now();
  const Seconds stepped = OffsetLocked(now) + delta;
  if (auto written = WriteLocked(stepped); !written) return written;
  base_ = stepped;
  since_ = now;
  return {};
}

Result<void> FakeClock::Drift(double rate) {
  if (!(rate > 0) || std::isinf(rate))
    return MakeError("fake clock",
                     "drift rate must be > 0 and finite, not " + std::to_string(rate));
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto now = std::chrono::steady_clock::now();
    const Seconds offset = OffsetLocked(now);
    if (auto written = WriteLocked(offset); !written) return written;
    base_ = offset;
    since_ = now;
    rate_ = rate;
  }
  wake_.notify_all();
  return {};
}

FakeClock::Seconds FakeClock::offset() const {
  std::lock_guard<std::mutex> lock(mu_);
  return OffsetLocked(std::chrono::steady_clock::now());
}

double FakeClock::rate() const {
  std::lock_guard<std::mutex> lock(mu_);
  return rate_;
}

void FakeClock::DriftLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (rate_ == 1.0) {
      wake_.wait(lock, [this] { return stop_ || rate_ != 1.0; });
      continue;
    }
    // A failed write is retried at the next period; Step/Drift report their own.
    (void)WriteLocked(OffsetLocked(std::chrono::steady_clock::now()));
    wake_.wait_for(lock, kDriftPeriod, [this] { return stop_; });
  }
}

}  // namespace tickd::nemesis
