// Calls on a thread made ready ahead of their instant (PrepareThreadCall): the call
// is made at its instant on its own thread, never before it, never when cancelled
// before it, never past its start bound (the lease). Real clocks; the instants are
// near and no assertion depends on how long anything takes.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "jobs/execution.h"
#include "jobs/thread_execution.h"

namespace tickd::jobs {
namespace {

using namespace std::chrono_literals;
using SystemClock = std::chrono::system_clock;
using SteadyClock = std::chrono::steady_clock;

// What the call saw; shared with its thread, which may outlive the test's scope.
struct Seen {
  std::atomic<bool> called{false};
  std::atomic<bool> stop_seen{false};
  std::atomic<bool> let_go{true};
  std::mutex mu;
  std::optional<SystemClock::time_point> called_at;  // guarded by mu
};

// A call that notes when it was made, prints a line and (unless let_go) waits for its
// stop; `alive` goes when the call's thread lets go of the call.
ThreadCall NoteCall(std::shared_ptr<Seen> seen, std::shared_ptr<int> alive = nullptr) {
  return [seen, alive](std::stop_token stop) {
    {
      std::lock_guard lock(seen->mu);
      seen->called_at = SystemClock::now();
    }
    seen->called = true;
    while (!seen->let_go) {
      if (stop.stop_requested()) {
        seen->stop_seen = true;
        break;
      }
      std::this_thread::sleep_for(1ms);
    }
    return CallEnd{true, std::nullopt, ""};
  };
}

// Waits (bounded, generously) until `cond` holds.
template <typename Cond>
bool Eventually(Cond cond, std::chrono::milliseconds d = 20s) {
  const auto until = SteadyClock::now() + d;
  while (!cond()) {
    if (SteadyClock::now() >= until) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

RunResult Wait(Execution& e) {
  for (int i = 0; i < 2'000; ++i) {
    if (std::optional<RunResult> r = e.WaitFor(10ms)) return *r;
  }
  FAIL("the run did not end");
  return {};
}

TEST_CASE("a prepared call is made at its instant, not before, on its own", "[jobs]") {
  auto seen = std::make_shared<Seen>();
  ProcessSpec spec;
  const auto start_at = SystemClock::now() + 300ms;
  auto prepared =
      PrepareThreadCall(spec, NoteCall(seen), {"ignored", nullptr}, start_at,
                        SteadyClock::now() + std::chrono::hours(1));
  REQUIRE(prepared.has_value());
  CHECK((*prepared)->checks_start_bound());
  CHECK((*prepared)->settle() > 0ms);
  // Made without anyone releasing it: its own thread wakes at the instant.
  REQUIRE(Eventually([&] { return seen->called.load(); }));
  {
    std::lock_guard lock(seen->mu);
    REQUIRE(seen->called_at.has_value());
    CHECK(*seen->called_at >= start_at);  // never before its instant
  }
  auto started = (*prepared)->Release();
  REQUIRE(started.has_value());
  REQUIRE((*prepared)->started().has_value());
  CHECK(*(*prepared)->started() >= start_at);
  RunResult r = Wait(**started);
  CHECK(r.outcome == RunOutcome::kDone);
  CHECK(r.error.empty());
}

TEST_CASE("a prepared call released before its instant waits for it", "[jobs]") {
  auto seen = std::make_shared<Seen>();
  const auto start_at = SystemClock::now() + 200ms;
  auto prepared = PrepareThreadCall(ProcessSpec{}, NoteCall(seen), {"ignored", nullptr},
                                    start_at, SteadyClock::now() + std::chrono::hours(1));
  REQUIRE(prepared.has_value());
  auto started = (*prepared)->Release();
  CHECK(SystemClock::now() >= start_at);
  REQUIRE(started.has_value());
  CHECK(Wait(**started).outcome == RunOutcome::kDone);
  std::lock_guard lock(seen->mu);
  REQUIRE(seen->called_at.has_value());
  CHECK(*seen->called_at >= start_at);
}

TEST_CASE("a prepared call cancelled before its instant is never made", "[jobs]") {
  auto seen = std::make_shared<Seen>();
  auto alive = std::make_shared<int>(0);
  std::weak_ptr<int> held = alive;
  auto output = std::make_shared<CallOutput>(nullptr, ProcessSpec{});
  {
    auto prepared = PrepareThreadCall(ProcessSpec{}, NoteCall(seen, std::move(alive)),
                                      {"ignored", output}, SystemClock::now() + 60s,
                                      SteadyClock::now() + std::chrono::hours(1));
    REQUIRE(prepared.has_value());
  }  // destroyed unreleased: shutdown's grace ended, Terminate
  // The thread woke, let the call go without making it, and ended.
  REQUIRE(Eventually([&] { return held.expired(); }));
  CHECK_FALSE(seen->called);
}

TEST_CASE("a prepared call past its start bound is never made: the run is lease-lost", "[jobs]") {
  // The bound already passed when the instant comes (the lease ran out before the start:
  // a paused daemon, a starved machine).
  auto seen = std::make_shared<Seen>();
  auto alive = std::make_shared<int>(0);
  std::weak_ptr<int> held = alive;
  auto prepared = PrepareThreadCall(ProcessSpec{}, NoteCall(seen, std::move(alive)),
                                    {"ignored", nullptr}, SystemClock::now() + 50ms,
                                    SteadyClock::now());
  REQUIRE(prepared.has_value());
  auto started = (*prepared)->Release();
  REQUIRE(started.has_value());
  RunResult r = Wait(**started);
  CHECK(r.outcome == RunOutcome::kLeaseLost);
  CHECK(r.error == "the lease ran out before the job started");
  CHECK_FALSE((*prepared)->started().has_value());
  REQUIRE(Eventually([&] { return held.expired(); }));
  CHECK_FALSE(seen->called);
}

TEST_CASE("a prepared call's start bound moves with ExtendStartBound", "[jobs]") {
  // A renewal confirmed before the start (the wall clock was set back) moves the bound.
  auto seen = std::make_shared<Seen>();
  auto prepared = PrepareThreadCall(ProcessSpec{}, NoteCall(seen), {"ignored", nullptr},
                                    SystemClock::now() + 200ms, SteadyClock::now());
  REQUIRE(prepared.has_value());
  (*prepared)->ExtendStartBound(SteadyClock::now() + std::chrono::hours(1));
  auto started = (*prepared)->Release();
  REQUIRE(started.has_value());
  CHECK(Wait(**started).outcome == RunOutcome::kDone);
  CHECK(seen->called);
}

TEST_CASE("a prepared call made and then dropped unreleased is stopped", "[jobs]") {
  auto seen = std::make_shared<Seen>();
  seen->let_go = false;
  ProcessSpec spec;
  spec.kill_grace = 60s;
  {
    auto prepared = PrepareThreadCall(spec, NoteCall(seen), {"ignored", nullptr},
                                      SystemClock::now(), SteadyClock::now() + std::chrono::hours(1));
    REQUIRE(prepared.has_value());
    REQUIRE(Eventually([&] { return seen->called.load(); }));
  }  // its stop fires; the call returns on it and is waited for
  CHECK(seen->stop_seen);
}

TEST_CASE("a prepared call's output reaches the sink until it is dropped", "[jobs]") {
  std::mutex mu;
  std::vector<std::string> lines;
  ProcessSpec spec;
  auto output = std::make_shared<CallOutput>(
      [&](std::string_view, std::string_view line) {
        std::lock_guard lock(mu);
        lines.emplace_back(line);
      },
      spec);
  ThreadCall call = [output](std::stop_token) {
    output->Line("stdout", "hello");
    return CallEnd{false, 3, "it failed"};
  };
  auto prepared = PrepareThreadCall(spec, std::move(call), {"ignored", output},
                                    SystemClock::now() + 20ms,
                                    SteadyClock::now() + std::chrono::hours(1));
  REQUIRE(prepared.has_value());
  auto started = (*prepared)->Release();
  REQUIRE(started.has_value());
  RunResult r = Wait(**started);
  CHECK(r.outcome == RunOutcome::kFailed);
  CHECK(r.exit_code == 3);
  CHECK(r.error == "it failed");
  std::lock_guard lock(mu);
  CHECK(lines == std::vector<std::string>{"hello"});
}

}  // namespace
}  // namespace tickd::jobs
