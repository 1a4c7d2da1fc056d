#include "base/clock.h"

#include <string>

#include "base/steady_waits.h"

#include <thread>

#include <catch2/catch.hpp>

using namespace std::chrono_literals;

TEST_CASE("fake clock moves only when advanced and wakes sleepers past their deadline") {
  tickd::FakeClock clock(tickd::WallTime(1'000'000ms));
  const auto start = clock.Steady();
  std::atomic<bool> done{false};
  std::thread sleeper([&] {
    clock.SleepUntil(start + 5s);
    done = true;
  });
  while (clock.sleepers() == 0) std::this_thread::yield();
  clock.Advance(4s);
  std::this_thread::sleep_for(20ms);
  CHECK_FALSE(done.load());
  clock.Advance(1s);
  sleeper.join();
  CHECK(done.load());
  CHECK(clock.Wall() == tickd::WallTime(1'005'000ms));
}

TEST_CASE("a wall-clock step leaves the steady clock alone") {
  tickd::FakeClock clock(tickd::WallTime(0ms));
  const auto steady = clock.Steady();
  clock.StepWall(-3s);
  CHECK(clock.Steady() == steady);
  CHECK(clock.Wall() == tickd::WallTime(-3s));
}

TEST_CASE("timed waits on the monotonic clock wake when due in this process") {
  // Under libfaketime with a faked CLOCK_MONOTONIC it fails (tests/ops: the daemon
  // refuses to start then); here the clocks are real.
  const tickd::Result<void> waits = tickd::CheckSteadyWaits();
  INFO((waits ? std::string("ok") : waits.error().ToString()));
  CHECK(waits.has_value());
}
