#include "base/wall_alarm.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

namespace tickd {
namespace {

using namespace std::chrono_literals;
using std::chrono::system_clock;

TEST_CASE("a wall alarm waits until the wall clock reads its instant", "[base]") {
  WallAlarm alarm;
  const system_clock::time_point at = system_clock::now() + 50ms;
  CHECK(alarm.WaitUntil(at));
  CHECK(system_clock::now() >= at);
  // An instant already past ends the wait at once.
  CHECK(alarm.WaitUntil(system_clock::now() - 1s));
}

TEST_CASE("a wall alarm's ring ends the wait before its instant", "[base]") {
  WallAlarm alarm;
  const system_clock::time_point far = system_clock::now() + 10min;
  SECTION("rung while it waits") {
    std::thread ringer([&] {
      std::this_thread::sleep_for(20ms);
      alarm.Ring();
    });
    CHECK_FALSE(alarm.WaitUntil(far));
    ringer.join();
  }
  SECTION("rung before the wait: counts once") {
    alarm.Ring();
    CHECK_FALSE(alarm.WaitUntil(far));
    CHECK(alarm.WaitUntil(system_clock::now() + 20ms));
  }
  CHECK(system_clock::now() < far);
}

}  // namespace
}  // namespace tickd
