// Early claims (lock.claim_lead, docs/design.md §1 "Early claims") in simulated time:
// ticks claimed ahead of T, runs released at T, and what happens in between — the
// winner dying, a reload, a busy previous run or a manual claim, a clock step,
// shutdown.
#include <mutex>
#include <vector>

#include "app/scheduler.h"
#include "tests/app/sim.h"

namespace tickd::app::testing {
namespace {

constexpr milliseconds kLead{200};

void EarlyClaims(SchedulerOptions& o) {
  o.claim_lead = kLead;
  o.lease = seconds(4);
}

// Records the simulated wall clock at each start of the Sim's runner; `hold`: the
// runs go on until the test ends them. The record is shared with the runner's plan:
// a run may start on its own thread while the test body ends.
class StartTimes {
 public:
  StartTimes(Sim& sim, bool hold) : runner_(sim.runner), record_(std::make_shared<Record>()) {
    sim.runner.plan = [record = record_, clock = &sim.clock, hold](const jobs::ProcessSpec& spec) {
      std::lock_guard lock(record->mu);
      record->walls.push_back(clock->Wall());
      record->envs.push_back(spec.env);
      return hold ? std::optional<int>() : std::optional<int>(0);
    };
  }
  // n starts recorded, each with its run at the runner (the plan records a start before
  // the runner has its run, which a test may finish).
  bool Seen(std::size_t n) { return walls().size() == n && runner_.starts() == n; }
  std::vector<WallTime> walls() {
    std::lock_guard lock(record_->mu);
    return record_->walls;
  }
  std::map<std::string, std::string> env(std::size_t i) {
    std::lock_guard lock(record_->mu);
    return record_->envs.at(i);
  }

 private:
  struct Record {
    std::mutex mu;
    std::vector<WallTime> walls;
    std::vector<std::map<std::string, std::string>> envs;
  };
  FakeRunner& runner_;
  std::shared_ptr<Record> record_;
};

// Lets the run threads look at the clock for a while (real time): a start that
// should not happen has had the chance to.
void LetRunsLook() { std::this_thread::sleep_for(milliseconds(50)); }

TEST_CASE(
    "early claims: claimed claim_lead before T, the lease counts from T, the run starts at T") {
  Sim sim(WallAt(kT0, -1'000));
  StartTimes starts(sim, false);
  Scheduler& a = sim.AddReplica("a", {EveryJob("j", 60)}, EarlyClaims);
  sim.WaitQuiet();
  REQUIRE(a.sleeping_until().has_value());
  CHECK(*a.sleeping_until() == sim.clock.Steady() + milliseconds(800));  // T − lead
  sim.Step(milliseconds(799));
  sim.WaitQuiet();
  CHECK(sim.backend.claims().empty());
  sim.Step(milliseconds(1));  // T − 200 ms
  sim.WaitQuiet(false);
  const auto claims = sim.backend.claims();
  REQUIRE(claims.size() == 1);
  CHECK(claims[0].tick_unix == kT0);
  CHECK(claims[0].node_wall == WallAt(kT0, -200));
  CHECK(claims[0].lease == seconds(4) + kLead);  // the store's TTL ends at T + lease
  CHECK(sim.Grep({"tick=2026-11-21T14:00:00Z", "outcome=won", "fence=1"}).size() == 1);
  const auto running = sim.store->ListRunning();
  REQUIRE(running.has_value());
  REQUIRE(running->size() == 1);
  CHECK(running->front().lease_left == seconds(4) + kLead);

  sim.Step(milliseconds(199), false);  // T − 1 ms
  LetRunsLook();
  CHECK(starts.walls().empty());  // no run before T
  sim.Step(milliseconds(1), false);  // T
  REQUIRE(Eventually([&] { return starts.Seen(1); }));
  CHECK(starts.walls()[0] == WallAt(kT0));
  CHECK(starts.env(0).at("TICKD_FENCE") == "1");
  REQUIRE(Eventually([&] { return a.active_runs() == 0; }));
  const auto done = sim.backend.completions();
  REQUIRE(done.size() == 1);
  CHECK(done[0].second.outcome == "done");
  CHECK(done[0].first.lease == seconds(4));  // renewals extend by lock.lease
}

TEST_CASE(
    "early claims: a clock ahead of the store's by less than its limit starts the run at T "
    "by the store's clock (rule 15)") {
  Sim sim(WallAt(kT0, -1'000));
  // The store's clock is 150 ms behind this replica's: within claim_lead + tolerance,
  // so the claim is taken, and the run must wait for T on the store's clock.
  StoreBehind& behind = sim.NewStoreBehind(milliseconds(150));
  const auto step = [&](milliseconds by) {
    behind.clock.Advance(by);
    sim.clock.Advance(by);
  };
  StartTimes starts(sim, false);
  Scheduler& a = sim.AddReplica("ahead", {EveryJob("j", 60)}, EarlyClaims, behind.store.get());
  sim.WaitQuiet();
  step(milliseconds(800));  // T − 200 ms here, T − 350 ms at the store: the early claim
  sim.WaitQuiet(false);
  REQUIRE(sim.Grep({"tick=2026-11-21T14:00:00Z", "node=ahead outcome=won"}).size() == 1);
  step(milliseconds(200));  // T here
  LetRunsLook();
  CHECK(starts.walls().empty());
  step(milliseconds(149));  // T − 1 ms at the store
  LetRunsLook();
  CHECK(starts.walls().empty());
  step(milliseconds(1));  // T at the store
  REQUIRE(Eventually([&] { return starts.Seen(1); }));
  CHECK(starts.walls()[0] == WallAt(kT0, 150));
  REQUIRE(Eventually([&] { return a.active_runs() == 0; }));
}

TEST_CASE("StoreClockAtSend: from the earliest the store's clock can have read at the sending") {
  const SteadyTime sent_steady{milliseconds(50'000)};
  const ClaimSent sent{sent_steady, WallAt(kT0, 0)};
  const auto after = [&](int ms) { return sent_steady + milliseconds(ms); };
  {
    StoreClockAtSend clock(sent);
    CHECK(clock.StartDelay() == milliseconds(0));  // no answer read the store's clock
    lock::ClaimOutcome none;
    clock.See(none, after(3));
    CHECK(clock.StartDelay() == milliseconds(0));
  }
  {
    // This clock is 200 ms ahead. The store decides claim by claim: the first answer's
    // clock was read 1 ms after the sending and arrived 2 ms after it; the last one's
    // 150 ms after it, arriving 152 ms after. Each proves at least 198 ms ahead; the
    // last alone read as if the sending were then would say 50 ms, and its run would
    // start 150 ms early.
    StoreClockAtSend clock(sent);
    lock::ClaimOutcome first;
    first.store_ms = kT0 * 1000 - 200 + 1;
    clock.See(first, after(2));
    CHECK(clock.StartDelay() == milliseconds(201));
    lock::ClaimOutcome last;
    last.store_ms = kT0 * 1000 - 200 + 150;
    clock.See(last, after(152));
    CHECK(clock.StartDelay() == milliseconds(201));
    // Seen alone, the last answer proves as much: it arrived 152 ms after the sending.
    StoreClockAtSend alone(sent);
    alone.See(last, after(152));
    CHECK(alone.StartDelay() == milliseconds(202));
  }
  {
    // etcd: the member's clock for the instant the batch began, ± half its window. The
    // member's clock read 50 to 250 ms before this one: waiting 250 ms starts at T by
    // it wherever in the window it was, however late the answer came.
    StoreClockAtSend clock(sent);
    lock::ClaimOutcome o;
    o.store_ms = kT0 * 1000 - 150;
    o.store_error_ms = 100;
    o.store_ms_at_batch_start = true;
    clock.See(o, after(40));
    CHECK(clock.StartDelay() == milliseconds(250));
  }
  {
    StoreClockAtSend clock(sent);
    lock::ClaimOutcome o;  // a clock that may be right waits the window
    o.store_ms = kT0 * 1000 + 20;
    o.store_error_ms = 100;
    o.store_ms_at_batch_start = true;
    clock.See(o, after(3));
    CHECK(clock.StartDelay() == milliseconds(80));
  }
  {
    StoreClockAtSend clock(sent);
    lock::ClaimOutcome o;  // this clock is behind
    o.store_ms = kT0 * 1000 + 120;
    clock.See(o, after(3));
    CHECK(clock.StartDelay() == milliseconds(0));
  }
}

TEST_CASE("early claims: renewals come lease/3 after T, not after the claim") {
  Sim sim(WallAt(kT0, -1'000));
  StartTimes starts(sim, true);
  Scheduler& a = sim.AddReplica("a", {EveryJob("j", 60)}, [](SchedulerOptions& o) {
    o.claim_lead = milliseconds(900);
    o.lease = milliseconds(2'400);  // renew every 800 ms
  });
  sim.Step(milliseconds(100), false);  // T − 900 ms: claimed
  sim.Step(milliseconds(900), false);  // T
  REQUIRE(Eventually([&] { return starts.Seen(1); }));
  sim.Step(milliseconds(799), false);  // T + 799 ms: 1,699 ms after the claim
  LetRunsLook();
  CHECK(sim.backend.renewals == 0);
  sim.Step(milliseconds(1), false);  // T + lease/3
  REQUIRE(Eventually([&] { return sim.backend.renewals == 1; }));
  sim.runner.run(0)->FinishWithExit(0);
  REQUIRE(Eventually([&] { return a.active_runs() == 0; }));
  CHECK(sim.Grep({"outcome=lease-lost"}).empty());
}

TEST_CASE("early claims: a winner that dies before T is taken over as if it died at T") {
  Sim sim(WallAt(kT0, -1'000));
  StartTimes starts(sim, true);
  TestBackend& a_view = sim.NewView();
  auto recover = [](config::Job& j) {
    j.recover = true;
    j.starting_deadline = seconds(30);
  };
  sim.AddReplica("a", {EveryJob("j", 60, recover)}, EarlyClaims, &a_view);
  sim.Step(milliseconds(800), false);  // T − 200 ms: a wins
  sim.WaitQuiet(false);
  REQUIRE(sim.Grep({"node=a", "outcome=won"}).size() == 1);
  a_view.dead = true;  // a freezes: nothing of it reaches the store any more
  sim.AddReplica("b", {EveryJob("j", 60, recover)}, EarlyClaims);  // T − 200 ms: lost
  sim.WaitQuiet(false);
  REQUIRE(sim.Grep({"node=b", "outcome=lost", "winner=a"}).size() == 1);
  // The store's lease of a's claim ends at T + lease (4 s), not 4 s after the claim.
  while (sim.clock.Wall() < WallAt(kT0, 3'900)) sim.Step(milliseconds(100), false);
  sim.WaitQuiet(false);
  CHECK(sim.Grep({"recovered=true"}).empty());
  for (int i = 0; i < 40 && sim.Grep({"recovered=true"}).empty(); ++i) {
    sim.Step(milliseconds(100), false);
  }
  sim.WaitQuiet(false);
  const auto recovered = sim.Grep({"node=b", "outcome=won", "recovered=true"});
  REQUIRE(recovered.size() == 1);
  CHECK(recovered[0].find("tick=2026-11-21T14:00:00Z") != std::string::npos);
  CHECK(recovered[0].find("fence=2") != std::string::npos);
}

TEST_CASE("early claims: a forbid job's previous run still going is asked again at T") {
  Sim sim(WallAt(kT0, -1'000));
  StartTimes starts(sim, true);
  auto long_lease = [](SchedulerOptions& o) {
    o.claim_lead = kLead;
    o.lease = std::chrono::minutes(10);
  };
  Scheduler& a = sim.AddReplica("a", {EveryJob("slow", 60)}, long_lease);
  Scheduler& b = sim.AddReplica("b", {EveryJob("slow", 60)}, long_lease);
  sim.Step(milliseconds(800), false);  // 14:00 − 200 ms: one wins
  sim.Step(milliseconds(200), false);  // 14:00: its run starts and goes on
  REQUIRE(Eventually([&] { return starts.Seen(1); }));
  sim.Step(milliseconds(59'800), false);  // 14:01 − 200 ms: still running
  sim.WaitQuiet(false);
  // Here (the holder: its own run) and there (the store says busy): no verdict yet.
  CHECK(sim.Grep({"tick=2026-11-21T14:01:00Z"}).empty());
  sim.runner.run(0)->FinishWithExit(0);  // ends before 14:01
  REQUIRE(Eventually([&] { return a.active_runs() + b.active_runs() == 0; }));
  sim.Step(milliseconds(200), false);  // 14:01: claimed again, at T
  sim.WaitQuiet(false);
  CHECK(sim.Grep({"tick=2026-11-21T14:01:00Z", "outcome=won"}).size() == 1);
  CHECK(sim.Grep({"tick=2026-11-21T14:01:00Z", "outcome=lost"}).size() == 1);
  CHECK(sim.Grep({"outcome=busy"}).empty());
  REQUIRE(Eventually([&] { return starts.Seen(2); }));
  CHECK(starts.walls()[1] == WallAt(kT0 + 60));

  // Still running at T: busy, once per replica, as without a lead.
  sim.Step(milliseconds(59'800), false);  // 14:02 − 200 ms
  sim.Step(milliseconds(200), false);     // 14:02
  sim.WaitQuiet(false);
  CHECK(sim.Grep({"tick=2026-11-21T14:02:00Z", "outcome=busy"}).size() == 2);
  sim.runner.run(1)->FinishWithExit(0);
}

TEST_CASE("early claims: a manual claim of the second before T races the early claim") {
  Sim sim(WallAt(kT0, -1'000));
  StartTimes starts(sim, true);
  Scheduler& a = sim.AddReplica("a", {EveryJob("j", 60)}, [](SchedulerOptions& o) {
    o.claim_lead = kLead;
    o.lease = std::chrono::minutes(10);
  });
  // What `tickd trigger` sends at T − 500 ms: the current second, T − 1.
  sim.Step(milliseconds(500));
  lock::ClaimRequest trigger;
  trigger.job = "j";
  trigger.tick_unix = kT0 - 1;
  trigger.node = "operator";
  trigger.owner_token = "manual-token";
  trigger.lease = std::chrono::minutes(10);
  trigger.starting_deadline = seconds(10);
  trigger.node_wall = sim.clock.Wall();
  const auto manual = sim.store->Claim(trigger);
  REQUIRE(manual.has_value());
  REQUIRE(manual->status == lock::ClaimStatus::kWon);
  sim.Step(milliseconds(300), false);  // T − 200 ms: the early claim hears busy
  sim.WaitQuiet(false);
  CHECK(sim.Grep({"tick=2026-11-21T14:00:00Z"}).empty());
  // The manual run ends before T: the tick is claimed at T and runs.
  REQUIRE(sim.store->Complete(lock::HeldClaim{"j", kT0 - 1, "manual-token", manual->fence,
                                              std::chrono::minutes(10)},
                              lock::Completion{"done", 0, milliseconds(100)}));
  sim.Step(milliseconds(200), false);  // T
  REQUIRE(Eventually([&] { return starts.Seen(1); }));
  CHECK(sim.Grep({"tick=2026-11-21T14:00:00Z", "outcome=won"}).size() == 1);
  CHECK(starts.walls()[0] == WallAt(kT0));

  // A manual claim made after the early claim names an earlier second: superseded.
  sim.runner.run(0)->FinishWithExit(0);
  REQUIRE(Eventually([&] { return a.active_runs() == 0; }));
  sim.Step(milliseconds(59'800), false);  // 14:01 − 200 ms: claimed, won
  sim.WaitQuiet(false);
  REQUIRE(sim.Grep({"tick=2026-11-21T14:01:00Z", "outcome=won"}).size() == 1);
  sim.Step(milliseconds(100), false);  // 14:01 − 100 ms: the trigger, for 14:00:59
  trigger.tick_unix = kT0 + 59;
  trigger.owner_token = "manual-token-2";
  trigger.node_wall = sim.clock.Wall();
  const auto late = sim.store->Claim(trigger);
  REQUIRE(late.has_value());
  CHECK(late->status == lock::ClaimStatus::kSuperseded);
  sim.Step(milliseconds(100), false);  // 14:01
  REQUIRE(Eventually([&] { return starts.Seen(2); }));
  CHECK(starts.walls()[1] == WallAt(kT0 + 60));
  sim.runner.run(1)->FinishWithExit(0);
}

TEST_CASE("early claims: a reload between the claim and T runs the claimed tick as claimed") {
  Sim sim(WallAt(kT0, -1'000));
  StartTimes starts(sim, false);
  auto version = [](const std::string& v) {
    // EveryJob made it non-const: the hash of the changed definition may be set.
    auto job = std::const_pointer_cast<ScheduledJob>(
        EveryJob("j", 60, [&](config::Job& j) { j.env["VERSION"] = v; }));
    job->config_hash = "hash-j-" + v;
    return std::shared_ptr<const ScheduledJob>(std::move(job));
  };
  Scheduler& a = sim.AddReplica("a", {version("1")}, EarlyClaims);
  sim.Step(milliseconds(800), false);  // T − 200 ms: claimed
  sim.WaitQuiet(false);
  a.Reload({version("2")});
  sim.Step(milliseconds(200), false);  // T
  REQUIRE(Eventually([&] { return starts.Seen(1); }));
  CHECK(starts.env(0).at("VERSION") == "1");
  sim.WaitQuiet();
  CHECK(sim.backend.claims().size() == 1);  // the claimed tick is not claimed again
  sim.Step(seconds(60));  // 14:01: the new definition
  REQUIRE(Eventually([&] { return starts.Seen(2); }));
  CHECK(starts.env(1).at("VERSION") == "2");
  CHECK(starts.walls()[1] == WallAt(kT0 + 60));
}

// Replica "a" with a job every minute, at T − 200 ms: its claim of T is won and its
// run waits for T.
Scheduler& ClaimedBeforeT(Sim& sim) {
  Scheduler& a = sim.AddReplica("a", {EveryJob("j", 60)}, EarlyClaims);
  sim.Step(milliseconds(800), false);
  sim.WaitQuiet(false);
  REQUIRE(sim.Grep({"tick=2026-11-21T14:00:00Z", "outcome=won"}).size() == 1);
  return a;
}

TEST_CASE(
    "early claims: a wall clock set back after the claim still starts at T on the wall clock") {
  Sim sim(WallAt(kT0, -1'000));
  StartTimes starts(sim, false);
  Scheduler& a = ClaimedBeforeT(sim);
  sim.clock.StepWall(-seconds(3));  // NTP sets the clock back: T is 3.2 s away again
  // Past the steady T and the lease's first renewal: the run waits, the lease lives.
  for (int i = 0; i < 31; ++i) sim.Step(milliseconds(100), false);
  LetRunsLook();
  CHECK(starts.walls().empty());
  CHECK(sim.clock.Wall() < WallAt(kT0));
  while (sim.clock.Wall() < WallAt(kT0)) sim.Step(milliseconds(100), false);
  REQUIRE(Eventually([&] { return starts.Seen(1); }));
  CHECK(starts.walls()[0] == WallAt(kT0));
  REQUIRE(Eventually([&] { return a.active_runs() == 0; }));
  CHECK(sim.backend.renewals >= 1);
  CHECK(sim.Grep({"outcome=lease-lost"}).empty());
  CHECK(sim.Grep({" run ", "outcome=done"}).size() == 1);
}

TEST_CASE(
    "early claims: a wall clock set forward past T after the claim starts the run at T on "
    "the monotonic clock, not before (rule 15)") {
  Sim sim(WallAt(kT0, -1'000));
  StartTimes starts(sim, false);
  ClaimedBeforeT(sim);  // at T − 200 ms
  sim.clock.StepWall(seconds(2));  // the wall clock reads T + 1.8 s; T is 200 ms away
  LetRunsLook();
  CHECK(starts.walls().empty());
  sim.clock.Advance(milliseconds(194));  // T − 6 ms, as the wall clock read it at the claim
  LetRunsLook();
  CHECK(starts.walls().empty());
  sim.clock.Advance(milliseconds(6));  // T (the start may come up to 5 ms before it)
  REQUIRE(Eventually([&] { return starts.Seen(1); }));
  CHECK(starts.walls()[0] == WallAt(kT0, 2'000));
}

TEST_CASE("early claims: shutdown before T starts nothing and completes the claim as killed") {
  Sim sim(WallAt(kT0, -1'000));
  StartTimes starts(sim, false);
  Scheduler& a = ClaimedBeforeT(sim);
  REQUIRE(a.active_runs() == 1);
  a.Shutdown(milliseconds(0));
  CHECK(starts.walls().empty());
  const auto done = sim.backend.completions();
  REQUIRE(done.size() == 1);
  CHECK(done[0].second.outcome == "killed");
  CHECK(sim.Grep({" run ", "outcome=killed"}).size() == 1);
}

TEST_CASE("early claims: shutdown before T with a grace starts the claimed tick at T") {
  Sim sim(WallAt(kT0, -1'000));
  StartTimes starts(sim, true);
  Scheduler& a = ClaimedBeforeT(sim);
  std::thread stopping([&] { a.Shutdown(seconds(1)); });  // ends at T + 800 ms
  sim.clock.Advance(milliseconds(100));
  LetRunsLook();
  CHECK(starts.walls().empty());
  sim.clock.Advance(milliseconds(100));  // T: the tick is ours, nobody else runs it
  REQUIRE(Eventually([&] { return starts.Seen(1); }));
  CHECK(starts.walls()[0] == WallAt(kT0));
  sim.clock.Advance(seconds(1));  // the grace ends (the lease has not): the run is killed
  stopping.join();
  const auto done = sim.backend.completions();
  REQUIRE(done.size() == 1);
  CHECK(done[0].second.outcome == "killed");
}

}  // namespace
}  // namespace tickd::app::testing

namespace tickd::app::testing {
namespace {

TEST_CASE("early claims with jitter: claimed claim_lead before the due instant, started at it") {
  // A job whose tick kT0 is due at least a second after T (jitter: 9 s).
  std::shared_ptr<const ScheduledJob> job;
  for (int i = 0; i < 100 && !job; ++i) {
    auto candidate = EveryJob("spread-" + std::to_string(i), 60,
                              [](config::Job& j) { j.jitter = seconds(9); });
    if (candidate->DueMs(kT0) >= kT0 * 1000 + 1'000) job = candidate;
  }
  REQUIRE(job);
  const std::int64_t due_ms = job->DueMs(kT0);
  Sim sim(WallAt(kT0, -1'000));
  StartTimes starts(sim, false);
  Scheduler& a = sim.AddReplica("a", {job}, EarlyClaims);
  sim.WaitQuiet();
  REQUIRE(a.sleeping_until().has_value());
  // Asleep until the due instant minus the lead, not T minus the lead.
  CHECK(*a.sleeping_until() ==
        sim.clock.Steady() + milliseconds(due_ms - kLead.count() - (kT0 * 1000 - 1'000)));
  sim.Step(milliseconds(due_ms - kLead.count() - (kT0 * 1000 - 1'000)));
  sim.WaitQuiet(false);
  const auto claims = sim.backend.claims();
  REQUIRE(claims.size() == 1);
  CHECK(claims[0].tick_unix == kT0);  // the claim still names T
  CHECK(claims[0].node_wall == WallTime(milliseconds(due_ms)) - kLead);
  CHECK(claims[0].lease == seconds(4) + kLead);  // the lease counts from the due instant
  sim.Step(kLead - milliseconds(1), false);
  LetRunsLook();
  CHECK(starts.walls().empty());  // nothing before the due instant
  sim.Step(milliseconds(1), false);
  REQUIRE(Eventually([&] { return starts.Seen(1); }));
  CHECK(starts.walls()[0] == WallTime(milliseconds(due_ms)));
  REQUIRE(Eventually([&] { return a.active_runs() == 0; }));
}

TEST_CASE("early claims: a pause written between the claim and T holds from the next instant") {
  Sim sim(WallAt(kT0, -1'000));
  StartTimes starts(sim, false);
  Scheduler& a = sim.AddReplica("a", {EveryJob("j", 60)}, EarlyClaims);
  sim.Step(milliseconds(800), false);  // T − 200 ms: claimed and won
  sim.WaitQuiet(false);
  REQUIRE(sim.Grep({"tick=2026-11-21T14:00:00Z", "outcome=won"}).size() == 1);
  REQUIRE(sim.store->SetPause(lock::Pause{"j", std::nullopt, sim.clock.Wall(), "operator", ""}));
  sim.Step(milliseconds(200), false);  // T: the claimed tick starts
  REQUIRE(Eventually([&] { return starts.Seen(1); }));
  CHECK(starts.walls()[0] == WallAt(kT0));
  REQUIRE(Eventually([&] { return a.active_runs() == 0; }));
  sim.Step(milliseconds(59'800), false);  // 14:01 − 200 ms: read the pause, no claim
  sim.WaitQuiet(false);
  CHECK(sim.Grep({"tick=2026-11-21T14:01:00Z", "outcome=skipped", "reason=paused"}).size() == 1);
  CHECK(sim.backend.claims().size() == 1);
  sim.Step(milliseconds(200), false);  // 14:01
  LetRunsLook();
  CHECK(starts.walls().size() == 1);
}

}  // namespace
}  // namespace tickd::app::testing

namespace tickd::app::testing {
namespace {

// Adaptive lead (docs/design.md §1): a replica whose store decides each claim in 2 ms
// of simulated time (before_claim), with 301 ticks due at 14:00 and 14:01 and one at
// 14:00:30. `max` is lock.claim_lead_max; 14:01 is expected taken up `lead` before it.
struct BurstRun {
  std::vector<lock::ClaimRequest> claims;  // every claim sent, in order
  std::string metrics;                     // /metrics once 14:01's claims were answered
  std::vector<WallTime> starts;            // the runs' starts, 14:01's included
};
BurstRun RunBurst(milliseconds max, milliseconds lead) {
  Sim sim(WallAt(kT0, -10'000));
  StartTimes starts(sim, false);
  sim.backend.before_claim = [&sim] { sim.clock.Advance(milliseconds(2)); };
  PrometheusMetrics metrics(sim.clock);
  // `allow`: on a loaded machine a run's completion may come after the job's next
  // claim in simulated time, which a forbid job would answer busy.
  const auto allow = [](config::Job& j) { j.concurrency = config::Concurrency::kAllow; };
  JobSet jobs;
  for (int i = 0; i < 300; ++i) jobs.push_back(EveryJob("big" + std::to_string(i), 60, allow));
  jobs.push_back(EveryJob("small", 30, allow));
  sim.AddReplica("a", jobs, [&](SchedulerOptions& o) {
    o.claim_lead = kLead;
    o.claim_lead_max = max;
    o.lease = seconds(4);
    o.max_concurrent_runs = 1'000;
    o.metrics = &metrics;
  });
  const auto to = [&](WallTime at) { sim.Step(at - sim.clock.Wall(), false); };
  const auto claimed = [&] { return sim.backend.claims().size(); };
  // Each instant: nothing 1 ms before it is due, all of it once due.
  // 14:00 is taken up before anything was measured (1 ms a claim): 301 × 1.5 ms.
  to(WallAt(kT0, -452));
  sim.WaitQuiet(false);
  CHECK(claimed() == 0);
  to(WallAt(kT0, -451));
  sim.WaitQuiet(false);
  CHECK(claimed() == 301);  // 602 ms: decided 151 ms late
  // Started (late) before simulated time goes on: a start that comes only after the
  // lease ran out would not start at all.
  CHECK(Eventually([&] { return starts.Seen(301); }));
  to(WallAt(kT0 + 30, -201));
  sim.WaitQuiet(false);
  CHECK(claimed() == 301);
  to(WallAt(kT0 + 30, -200));
  sim.WaitQuiet(false);
  CHECK(claimed() == 302);
  to(WallAt(kT0 + 30));
  CHECK(Eventually([&] { return starts.Seen(302); }));
  to(WallAt(kT0 + 60, -lead.count() - 1));
  sim.WaitQuiet(false);
  CHECK(claimed() == 302);
  to(WallAt(kT0 + 60, -lead.count()));
  sim.WaitQuiet(false);
  CHECK(claimed() == 603);
  BurstRun out;
  out.metrics = metrics.Render();
  // 1 ms before 14:01: none of its runs started.
  to(WallAt(kT0 + 60, -1));
  LetRunsLook();
  CHECK(starts.walls().size() == 302);
  to(WallAt(kT0 + 60));
  CHECK(Eventually([&] { return starts.Seen(603); }));
  out.claims = sim.backend.claims();
  out.starts = starts.walls();
  sim.WaitQuiet(true);
  return out;
}

TEST_CASE(
    "adaptive lead: a big instant is claimed as early as the store's measured pace needs, "
    "a small one claim_lead before it; the lease still ends lease after T, the runs start "
    "at T") {
  // 14:01: 301 claims × 2 ms × 1.5, once 14:00 measured the pace.
  const BurstRun run = RunBurst(seconds(30), milliseconds(903));
  REQUIRE(run.claims.size() == 603);
  for (const lock::ClaimRequest& c : run.claims) {
    const milliseconds lead = WallAt(c.tick_unix) - c.node_wall;
    INFO(c.job << " " << c.tick_unix << " lead " << lead.count());
    CHECK(c.lease == seconds(4) + std::max(lead, milliseconds(0)));  // ends 4 s after T
    if (c.tick_unix == kT0 + 60) {
      CHECK(lead > milliseconds(0));  // the whole batch decided before T
      REQUIRE(c.max_lead.has_value());
      CHECK(*c.max_lead == lead + milliseconds(250));  // rule 15 with its own lead
    }
  }
  CHECK(run.metrics.find("tickd_claim_lead_seconds 0.903\n") != std::string::npos);
  REQUIRE(run.starts.size() == 603);
  for (std::size_t i = 302; i < run.starts.size(); ++i) CHECK(run.starts[i] == WallAt(kT0 + 60));
}

TEST_CASE("adaptive lead: never beyond lock.claim_lead_max") {
  const BurstRun run = RunBurst(milliseconds(700), milliseconds(700));
  CHECK(run.metrics.find("tickd_claim_lead_seconds 0.7\n") != std::string::npos);
}

TEST_CASE("adaptive lead: a slow store raises the lead; it never takes a tick up before the "
          "job's previous tick") {
  Sim sim(WallAt(kT0, -900));
  StartTimes starts(sim, false);
  // The first 20 claims take 100 ms each; every claim after them none.
  std::atomic<int> slow{20};
  sim.backend.before_claim = [&] {
    if (slow.fetch_sub(1) > 0) sim.clock.Advance(milliseconds(100));
  };
  JobSet jobs;
  for (int i = 0; i < 20; ++i) {
    jobs.push_back(EveryJob("j" + std::to_string(i), 2,
                            [](config::Job& j) {
                              j.concurrency = config::Concurrency::kAllow;
                              j.starting_deadline = seconds(1);  // 13:59:58 is past it
                            }));
  }
  sim.AddReplica("a", jobs, [](SchedulerOptions& o) {
    o.claim_lead = kLead;
    o.claim_lead_max = seconds(30);
    o.lease = seconds(4);
    o.max_concurrent_runs = 1'000;  // runs not yet reaped on a loaded machine take no room
  });
  sim.Step(milliseconds(700), false);  // 14:00 − 200 ms: 20 × 1 ms × 1.5 is below the floor
  sim.WaitQuiet(false);  // 2 s later: 14:00:02 was taken up at once, late for its lead
  REQUIRE(sim.backend.claims().size() == 40);
  // 20 claims at ~95 ms a claim now need ~2.8 s: the lead is cut at the 2 s back to
  // the previous tick, which those jobs' claims never come before.
  for (std::int64_t t = kT0 + 2; t <= kT0 + 8; t += 2) {
    sim.Step(WallAt(t, -1) - sim.clock.Wall(), false);
    sim.WaitQuiet(false);
    CHECK(sim.backend.claims().size() == static_cast<std::size_t>(20 * ((t - kT0) / 2 + 1)));
    sim.Step(milliseconds(1), false);
    sim.WaitQuiet(false);
    CHECK(sim.backend.claims().size() == static_cast<std::size_t>(20 * ((t - kT0) / 2 + 2)));
  }
  for (const lock::ClaimRequest& c : sim.backend.claims()) {
    INFO(c.job << " " << c.tick_unix);
    CHECK(c.node_wall >= WallAt(c.tick_unix - 2));
    if (c.tick_unix == kT0) CHECK(c.node_wall >= WallAt(kT0, -200));
    if (c.tick_unix >= kT0 + 4) CHECK(c.node_wall == WallAt(c.tick_unix - 2));
  }
}

TEST_CASE("adaptive lead: an instant taken up early takes the earlier instants with it") {
  Sim sim(WallAt(kT0, -900));
  StartTimes starts(sim, false);
  // The first 20 claims take 100 ms each: 100 ms a claim, so 14:00:10's 20 ticks get 3 s.
  std::atomic<int> slow{20};
  sim.backend.before_claim = [&] {
    if (slow.fetch_sub(1) > 0) sim.clock.Advance(milliseconds(100));
  };
  const auto allow = [](config::Job& j) {
    j.concurrency = config::Concurrency::kAllow;
    j.starting_deadline = seconds(5);  // 14:00's last claims are decided at 14:00:01.8
  };
  JobSet jobs;
  for (int i = 0; i < 20; ++i) jobs.push_back(EveryJob("j" + std::to_string(i), 10, allow));
  // One tick at 14:00:08, inside 14:00:10's lead.
  auto small = std::make_shared<ScheduledJob>();
  small->job.name = "small";
  small->job.shell = "true";
  allow(small->job);
  small->config_hash = "hash-small";
  small->next = [](std::int64_t after) -> std::optional<std::int64_t> {
    return after < kT0 + 8 ? std::optional<std::int64_t>(kT0 + 8) : std::nullopt;
  };
  small->prev = [](std::int64_t) -> std::optional<std::int64_t> { return std::nullopt; };
  jobs.push_back(small);
  sim.AddReplica("a", jobs, [](SchedulerOptions& o) {
    o.claim_lead = kLead;
    o.claim_lead_max = seconds(30);
    o.lease = seconds(4);
    o.max_concurrent_runs = 1'000;
  });
  sim.Step(milliseconds(700), false);  // 14:00 − 200 ms: claimed in 2 s
  sim.WaitQuiet(false);
  REQUIRE(sim.backend.claims().size() == 20);
  CHECK(Eventually([&] { return starts.Seen(20); }));  // before their leases end
  sim.Step(WallAt(kT0 + 7, -1) - sim.clock.Wall(), false);
  sim.WaitQuiet(false);
  CHECK(sim.backend.claims().size() == 20);
  sim.Step(milliseconds(1), false);  // 14:00:07: 14:00:10's lead, and 14:00:08 with it
  sim.WaitQuiet(false);
  // The batch is decided on the claim threads: the loop may sleep before the last answer.
  CHECK(Eventually([&] { return sim.backend.claims().size() == 41; }));
  const auto claims = sim.backend.claims();
  REQUIRE(claims.size() == 41);
  CHECK(claims[20].job == "small");  // the earlier instant first
  CHECK(claims[20].node_wall == WallAt(kT0 + 7));
  CHECK(claims[20].lease == seconds(4) + seconds(1));  // its lease still ends 4 s after T
  for (std::size_t i = 21; i < claims.size(); ++i) CHECK(claims[i].tick_unix == kT0 + 10);
  sim.Step(WallAt(kT0 + 8, -1) - sim.clock.Wall(), false);
  LetRunsLook();
  CHECK(starts.walls().size() == 20);  // not before its T
  sim.Step(milliseconds(1), false);
  CHECK(Eventually([&] { return starts.Seen(21); }));
  CHECK(starts.walls()[20] == WallAt(kT0 + 8));
}

TEST_CASE("adaptive lead: a clock ahead beyond the tolerance is still refused early") {
  Sim sim(WallAt(kT0, -10'000));
  // The store's clock is 400 ms behind this replica's: more than lock.clock_tolerance.
  StoreBehind& behind = sim.NewStoreBehind(milliseconds(400));
  StartTimes starts(sim, false);
  JobSet jobs;
  for (int i = 0; i < 301; ++i) jobs.push_back(EveryJob("j" + std::to_string(i), 60));
  sim.AddReplica(
      "ahead", jobs,
      [](SchedulerOptions& o) {
        o.claim_lead = kLead;
        o.claim_lead_max = seconds(30);
        o.max_concurrent_runs = 1'000;
      },
      behind.store.get());
  const auto step = [&](milliseconds by) { behind.Step(by, false); };
  step(milliseconds(10'000 - 452));
  step(milliseconds(1));  // 451 ms before T here (301 × 1.5 ms), 851 ms at the store
  sim.WaitQuiet(false);
  CHECK(sim.Grep({"outcome=early", "max_lead=0.701s"}).size() == 301);
  step(milliseconds(1'000));
  sim.WaitQuiet(false);
  CHECK(sim.Grep({"outcome=won"}).empty());
  CHECK(starts.walls().empty());
}

}  // namespace
}  // namespace tickd::app::testing
