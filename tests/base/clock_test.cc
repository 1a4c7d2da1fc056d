#include "base/clock.h"

#include <sched.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
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

TEST_CASE("the host's clocks read what this process's real clocks read, when nothing fakes them") {
  tickd::RealClock real;
  tickd::HostClock& host = tickd::HostClock::Instance();
  // Bounded by reading in order: real ≤ host ≤ real again (ms truncation aside).
  const auto wall_before = real.Wall();
  const auto host_wall = host.Wall();
  const auto wall_after = real.Wall();
  CHECK(host_wall >= wall_before);
  CHECK(host_wall <= wall_after);
  const auto steady_before = real.Steady();
  const auto host_steady = host.Steady();
  const auto steady_after = real.Steady();
  CHECK(host_steady >= steady_before);
  CHECK(host_steady <= steady_after);
  timespec ts{};
  ::clock_gettime(CLOCK_BOOTTIME, &ts);
  const std::int64_t boot_before = ts.tv_sec * 1000 + ts.tv_nsec / 1'000'000;
  const std::int64_t host_boot = tickd::HostBootMs();
  ::clock_gettime(CLOCK_BOOTTIME, &ts);
  const std::int64_t boot_after = ts.tv_sec * 1000 + ts.tv_nsec / 1'000'000;
  CHECK(host_boot >= boot_before);
  CHECK(host_boot <= boot_after);
}

// In a time namespace of its own (`unshare --time`, here CLONE_NEWTIME with an hour of
// boottime offset) a process's CLOCK_BOOTTIME reads an hour ahead of the host's; the
// SQLite backend compares leases across processes on HostBootMs, which takes the offset
// back out. Needs root (CAP_SYS_ADMIN) and a kernel with time namespaces.
TEST_CASE("HostBootMs reads the host's boottime from inside a time namespace (root)") {
  if (::geteuid() != 0) {
    WARN("skipped: needs root to make a time namespace");
    return;
  }
  int pipe_fds[2];
  REQUIRE(::pipe(pipe_fds) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {  // unshare, set the offset, fork into the namespace, report back
    ::close(pipe_fds[0]);
    std::int64_t answer[2] = {-1, -1};  // {the namespace's raw boottime, HostBootMs}
    if (::unshare(CLONE_NEWTIME) == 0) {
      if (FILE* f = std::fopen("/proc/self/timens_offsets", "w")) {
        const bool set = std::fputs("boottime 3600 0\n", f) >= 0;
        if (std::fclose(f) == 0 && set) {
          const pid_t inside = ::fork();
          if (inside == 0) {
            timespec ts{};
            ::clock_gettime(CLOCK_BOOTTIME, &ts);
            answer[0] = ts.tv_sec * 1000 + ts.tv_nsec / 1'000'000;
            answer[1] = tickd::HostBootMs();
            (void)!::write(pipe_fds[1], answer, sizeof(answer));
            ::_exit(0);
          }
          int status = 0;
          if (inside > 0) ::waitpid(inside, &status, 0);
          ::_exit(0);
        }
      }
    }
    (void)!::write(pipe_fds[1], answer, sizeof(answer));  // could not: -1s
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  std::int64_t answer[2] = {0, 0};
  const ssize_t got = ::read(pipe_fds[0], answer, sizeof(answer));
  ::close(pipe_fds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  REQUIRE(got == static_cast<ssize_t>(sizeof(answer)));
  if (answer[0] == -1) {
    WARN("skipped: this kernel made no time namespace (CLONE_NEWTIME)");
    return;
  }
  timespec ts{};
  ::clock_gettime(CLOCK_BOOTTIME, &ts);
  const std::int64_t host_now = ts.tv_sec * 1000 + ts.tv_nsec / 1'000'000;
  // Inside, the raw clock is an hour ahead; HostBootMs is the host's (read before now).
  CHECK(answer[0] - answer[1] >= 3'599'000);
  CHECK(answer[0] - answer[1] <= 3'601'000);
  CHECK(answer[1] <= host_now);
  CHECK(answer[1] > host_now - 60'000);
}
