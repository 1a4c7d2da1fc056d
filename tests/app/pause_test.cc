// `tickd pause` as the scheduler honours it (docs/design.md §1 rule 13): simulated
// replicas on one memory store and one FakeClock.
#include "app/metrics.h"
#include "app/scheduler.h"
#include "tests/app/sim.h"

namespace tickd::app::testing {
namespace {

lock::Pause PauseOf(std::string job, std::optional<WallTime> until = std::nullopt) {
  return lock::Pause{std::move(job), until, WallAt(kT0), "operator", "incident 42"};
}

TEST_CASE("a paused job is skipped on every replica, logged and never claimed, until resumed") {
  Sim sim(WallAt(kT0, -500));
  REQUIRE(sim.store->SetPause(PauseOf("cleanup")));  // before the replicas' first claims
  for (const char* node : {"node-a", "node-b"}) {
    sim.AddReplica(node, {EveryJob("cleanup", 1), EveryJob("report", 1)});
  }
  // At start each replica competes for T0−1 (still startable), then T0 … T0+2.
  for (int i = 0; i < 3; ++i) sim.Step(seconds(1));
  sim.WaitQuiet();

  // Each replica logs each paused tick once, as skipped with who paused it.
  const auto skipped = sim.Grep({" info tick job=cleanup ", "outcome=skipped reason=paused",
                                 "paused_by=operator"});
  CHECK(skipped.size() == 2 * 4);
  CHECK(sim.Grep({"tick job=cleanup ", "outcome=won"}).empty());
  for (const lock::ClaimRequest& c : sim.backend.claims()) CHECK(c.job != "cleanup");
  // The other job runs as usual, once per tick.
  CHECK(sim.Grep({"tick job=report ", "outcome=won"}).size() == 4);
  // The change is logged once per replica.
  CHECK(sim.Grep({" info pause job=cleanup ", "outcome=paused", "reason=\"incident 42\""}).size() ==
        2);
  // The ledger has the replicas' skipped observations.
  auto history = sim.store->History("cleanup", 10);
  REQUIRE(history);
  REQUIRE(history->size() == 4);
  for (const lock::TickHistory& t : *history) {
    CHECK(t.winner.empty());
    REQUIRE(t.observations.size() == 2);
    for (const lock::Observation& o : t.observations) CHECK(o.outcome == "skipped");
  }

  REQUIRE(sim.store->ClearPause("cleanup"));
  sim.Step(seconds(1));  // T0+3
  sim.WaitQuiet();
  CHECK(sim.Grep({"tick job=cleanup ", "tick=2026-11-21T14:00:03Z", "outcome=won"}).size() == 1);
  CHECK(sim.Grep({" info pause job=cleanup ", "outcome=resumed"}).size() == 2);
}

TEST_CASE("a pause of every job stops them all; one with an end resumes by itself") {
  Sim sim(WallAt(kT0, -500));
  REQUIRE(sim.store->SetPause(PauseOf(std::string(lock::kAllJobs), WallAt(kT0 + 2))));
  sim.AddReplica("node-a", {EveryJob("a", 1), EveryJob("b", 1)});
  for (int i = 0; i < 4; ++i) sim.Step(seconds(1));  // T0 … T0+3
  sim.WaitQuiet();
  // T0−1 (claimed at start), T0 and T0+1 are before the end: skipped; T0+2 and T0+3 run.
  CHECK(sim.Grep({"outcome=skipped", "all=true", "until=2026-11-21T14:00:02.000Z"}).size() == 6);
  CHECK(sim.Grep({"tick=2026-11-21T14:00:02Z", "outcome=won"}).size() == 2);
  CHECK(sim.Grep({"tick=2026-11-21T14:00:03Z", "outcome=won"}).size() == 2);
  CHECK(sim.Grep({"tick=2026-11-21T14:00:01Z", "outcome=won"}).empty());
}

TEST_CASE(
    "pauses that cannot be read keep the ones read before: a pause holds through a store hiccup") {
  Sim sim(WallAt(kT0, -500));
  TestBackend& view = sim.NewView();
  PrometheusMetrics metrics(sim.clock);
  REQUIRE(sim.store->SetPause(PauseOf("cleanup")));
  sim.AddReplica(
      "node-a", {EveryJob("cleanup", 1)}, [&](SchedulerOptions& o) { o.metrics = &metrics; },
      &view);
  sim.Step(seconds(1));
  sim.WaitQuiet();
  CHECK(metrics.Render().find("tickd_job_paused{job_name=\"cleanup\"} 1") != std::string::npos);
  view.pauses_error = true;
  REQUIRE(sim.store->ClearPause("cleanup"));  // not seen: the read fails
  sim.Step(seconds(1));
  sim.Step(seconds(1));
  sim.WaitQuiet();
  CHECK(sim.Grep({"tick job=cleanup ", "outcome=won"}).empty());
  CHECK(sim.Grep({" warn pause ", "outcome=error", "kept=1"}).size() == 1);  // logged once
  view.pauses_error = false;
  sim.Step(seconds(1));
  sim.WaitQuiet();
  CHECK(sim.Grep({"tick job=cleanup ", "outcome=won"}).size() == 1);
  CHECK(metrics.Render().find("tickd_job_paused{job_name=\"cleanup\"} 0") != std::string::npos);
  CHECK(metrics.Render().find("tickd_ticks_total{job_name=\"cleanup\",outcome=\"skipped\"} 4") !=
        std::string::npos);
}

}  // namespace
}  // namespace tickd::app::testing
