// The scheduler loop's watch (docs/design.md §9): a loop that oversleeps the wake-up
// it planned, or makes no progress inside a turn, is judged stuck from another
// thread — loop_health() (/healthz), the stuck gauge and `loop` lines — and seen to
// recover; a loop sleeping until a far tick is not stuck.
#include <atomic>
#include <regex>

#include "app/metrics.h"
#include "app/scheduler.h"
#include "tests/app/sim.h"

namespace tickd::app::testing {
namespace {

// A FakeClock whose SleepUntil ends on Wake() alone, never at its deadline: what
// libfaketime did to the daemon with a faked CLOCK_MONOTONIC (issue #24 point 4).
class OversleepingClock final : public Clock {
 public:
  explicit OversleepingClock(FakeClock& inner) : inner_(inner) {}
  WallTime Wall() const override { return inner_.Wall(); }
  SteadyTime Steady() const override { return inner_.Steady(); }
  void SleepUntil(SteadyTime) override { inner_.SleepUntil(SteadyTime::max()); }
  void Wake() override { inner_.Wake(); }
  void WaitUntilWall(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, WallTime t,
                     milliseconds max_wait) override {
    inner_.WaitUntilWall(cv, lock, t, max_wait);
  }

 private:
  FakeClock& inner_;
};

double StuckGauge(const PrometheusMetrics& metrics) {
  std::smatch m;
  const std::string text = metrics.Render();
  REQUIRE(std::regex_search(text, m,
                            std::regex("\ntickd_scheduler_loop_stuck_seconds ([0-9.e+-]+)\n")));
  return std::stod(m[1]);
}

// `s` is stuck now: CheckLoop logs `line` (once so far) and sets the gauge to `gauge`.
void CheckStuck(Sim& sim, Scheduler& s, const PrometheusMetrics& metrics, const std::string& line,
                double gauge) {
  CHECK(s.loop_health().stuck);
  s.CheckLoop();
  CHECK(sim.Grep({line}).size() == 1);
  CHECK(StuckGauge(metrics) == Approx(gauge));
}

TEST_CASE("loop watch: a loop that oversleeps its planned wake-up is stuck, and recovers") {
  Sim sim(WallAt(kT0, 1'000));
  OversleepingClock clock(sim.clock);
  PrometheusMetrics metrics(sim.clock);
  SchedulerOptions o;
  o.node = "a";
  o.max_real_wait = milliseconds(1);
  o.metrics = &metrics;
  o.max_sleep = seconds(3600);
  o.loop_slack = seconds(5);
  Scheduler s(clock, sim.backend, sim.runner, sim.log, o);
  // Every 2 h: 14:00 is claimed at start, then the loop sleeps its longest (1 h).
  s.Start({EveryJob("bihourly", 7200)});
  REQUIRE(Eventually([&] { return s.sleeping_until() && sim.clock.sleepers() == 1; }));
  CHECK(sim.Grep({"tick=2026-11-21T14:00:00Z", "outcome=won"}).size() == 1);
  s.CheckLoop();
  CHECK_FALSE(s.loop_health().stuck);
  CHECK(StuckGauge(metrics) == 0);

  // Sleeping until a far wake-up is not stuck, nor is waking a little late.
  sim.clock.Advance(std::chrono::minutes(59));
  CHECK_FALSE(s.loop_health().stuck);
  CHECK(s.loop_health().behind == milliseconds(0));
  sim.clock.Advance(seconds(65));  // 5 s past the planned wake-up: the slack, not more
  CHECK(s.loop_health().sleeping);
  CHECK(s.loop_health().behind == seconds(5));
  CHECK_FALSE(s.loop_health().stuck);
  s.CheckLoop();
  CHECK(sim.Grep({" loop "}).empty());

  sim.clock.Advance(milliseconds(1));
  CheckStuck(sim, s, metrics,
             " warn loop node=a outcome=stuck state=sleeping stuck_for=5.001s limit=5.000s", 5.001);
  sim.clock.Advance(seconds(30));
  s.CheckLoop();
  CHECK(sim.Grep({" loop "}).size() == 1);  // once a minute while it stays stuck
  CHECK(StuckGauge(metrics) == Approx(35.001));
  sim.clock.Advance(seconds(30));
  s.CheckLoop();
  CHECK(sim.Grep({" warn loop ", "outcome=stuck", "stuck_for=65.001s"}).size() == 1);

  // Woken (as a reload or shutdown would), it turns and plans its next sleep.
  const SteadyTime planned = *s.sleeping_until();
  sim.clock.Wake();
  REQUIRE(Eventually([&] {
    const auto until = s.sleeping_until();
    return until && *until != planned && sim.clock.sleepers() == 1;
  }));
  CHECK_FALSE(s.loop_health().stuck);
  s.CheckLoop();
  CHECK(sim.Grep({" info loop node=a outcome=recovered stuck_for=65.001s"}).size() == 1);
  CHECK(StuckGauge(metrics) == 0);
  s.Shutdown(milliseconds(0));
  CHECK_FALSE(s.loop_health().stuck);
}

TEST_CASE("loop watch: a turn without progress (a claim that hangs) is stuck, and recovers") {
  Sim sim(WallAt(kT0, -1'000));
  PrometheusMetrics metrics(sim.clock);
  Gate gate;
  std::atomic<bool> hanging{false};
  sim.backend.after_first_answer = [&] {
    hanging = true;
    gate.Wait(seconds(60));
  };
  // A deadline and a lease that outlast the hang: both ticks are still won and run.
  const auto patient = [](config::Job& j) { j.starting_deadline = seconds(45); };
  Scheduler& s = sim.AddReplica("a", {EveryJob("x", 60, patient), EveryJob("y", 60, patient)},
                                [&](SchedulerOptions& o) {
                                  o.metrics = &metrics;
                                  o.turn_stall = seconds(30);
                                  o.lease = std::chrono::minutes(10);
                                });
  sim.WaitQuiet();
  sim.clock.Advance(seconds(1));  // 14:00:00: the batch's second claim hangs
  REQUIRE(Eventually([&] { return hanging.load(); }));
  CHECK_FALSE(s.loop_health().sleeping);
  sim.clock.Advance(seconds(30));
  CHECK(s.loop_health().behind == seconds(30));
  CHECK_FALSE(s.loop_health().stuck);
  sim.clock.Advance(seconds(1));
  CheckStuck(sim, s, metrics,
             " warn loop node=a outcome=stuck state=working stuck_for=31.000s limit=30.000s", 31);

  gate.Open();
  sim.WaitQuiet();
  s.CheckLoop();
  CHECK(sim.Grep({" info loop node=a outcome=recovered stuck_for=31.000s"}).size() == 1);
  CHECK(StuckGauge(metrics) == 0);
  CHECK(sim.Grep({"tick=2026-11-21T14:00:00Z", "outcome=won"}).size() == 2);
  s.Shutdown(milliseconds(0));  // before `metrics` goes
}

TEST_CASE("shutdown: a turn with a backlog of due instants claims none after the stop") {
  Sim sim(WallAt(kT0, -1'000));
  Gate gate;
  std::atomic<bool> armed{false};
  std::atomic<int> claims{0};
  sim.backend.before_claim = [&] {
    if (armed && ++claims == 1) gate.Wait(seconds(60));  // the store is slow: it hangs
  };
  const auto patient = [](config::Job& j) { j.starting_deadline = seconds(60); };
  Scheduler& s = sim.AddReplica("a", {EveryJob("x", 10, patient), EveryJob("y", 15, patient)});
  sim.WaitQuiet();  // the ticks before 14:00 still startable were claimed at start
  armed = true;
  // The loop wakes 25 s late: x's 14:00:00, :10, :20 and y's :00, :15 are due in one
  // turn, four instants. The first claim hangs; SIGTERM comes meanwhile.
  sim.clock.Advance(seconds(26));
  REQUIRE(Eventually([&] { return claims.load() == 1; }));
  std::thread stopping([&] { s.Shutdown(milliseconds(0)); });
  REQUIRE(Eventually([&] { return s.Stopping(); }));
  gate.Open();
  stopping.join();
  // The instant it was claiming finished (two jobs); the three after it were not claimed.
  CHECK(claims.load() == 2);
  CHECK(sim.Grep({"tick=2026-11-21T14:00:10Z"}).empty());
}

TEST_CASE("loop watch: the scheduler's own watch thread logs a stuck loop") {
  Sim sim(WallAt(kT0, 1'000));
  OversleepingClock clock(sim.clock);
  SchedulerOptions o;
  o.node = "a";
  o.max_real_wait = milliseconds(1);
  o.max_sleep = seconds(10);
  o.loop_check_every = milliseconds(5);
  Scheduler s(clock, sim.backend, sim.runner, sim.log, o);
  s.Start({EveryJob("hourly", 3600)});
  REQUIRE(Eventually([&] { return s.sleeping_until() && sim.clock.sleepers() == 1; }));
  sim.clock.Advance(seconds(16));  // 6 s past the planned wake-up
  REQUIRE(Eventually([&] { return !sim.Grep({" warn loop ", "outcome=stuck"}).empty(); }));
  sim.clock.Wake();
  REQUIRE(Eventually([&] { return !sim.Grep({" info loop ", "outcome=recovered"}).empty(); }));
  s.Shutdown(milliseconds(0));
}

}  // namespace
}  // namespace tickd::app::testing
