// The scheduler in simulated time: replicas are Scheduler instances sharing one
// memory backend and one FakeClock.
#include "app/scheduler.h"

#include <algorithm>
#include <regex>
#include <set>
#include <thread>

#include "lock/claim_spread.h"
#include "tests/app/sim.h"

namespace tickd::app::testing {
namespace {

std::uint64_t FenceOf(const std::string& line) {
  std::smatch m;
  REQUIRE(std::regex_search(line, m, std::regex(" fence=([0-9]+)")));
  return std::stoull(m[1]);
}

std::string TickOf(const std::string& line) {
  std::smatch m;
  REQUIRE(std::regex_search(line, m, std::regex(" tick=([^ ]+)")));
  return m[1];
}

TEST_CASE("three replicas, a job every minute for six simulated hours: one winner per tick") {
  Sim sim(WallAt(kT0, -30'000));  // 13:59:30
  for (const char* node : {"node-a", "node-b", "node-c"}) {
    sim.AddReplica(node, {EveryJob("cleanup", 60)});
  }
  sim.Step(seconds(30));  // 14:00:00
  for (int minute = 0; minute < 6 * 60; ++minute) sim.Step(seconds(60));
  sim.WaitQuiet();

  const auto won = sim.Grep({" info tick ", "outcome=won"});
  const auto lost = sim.Grep({" info tick ", "outcome=lost"});
  REQUIRE(won.size() == 361);  // 14:00 … 20:00
  CHECK(lost.size() == 2 * 361);
  CHECK(sim.Grep({"outcome=busy"}).empty());
  CHECK(sim.Grep({"outcome=missed"}).empty());
  CHECK(sim.Grep({" run ", "outcome=done", "exit=0"}).size() == 361);

  std::map<std::string, std::uint64_t> fence_by_tick;
  for (const std::string& l : won) {
    CHECK(fence_by_tick.emplace(TickOf(l), FenceOf(l)).second);  // won exactly once
  }
  CHECK(fence_by_tick.begin()->first == "2026-11-21T14:00:00Z");
  CHECK(fence_by_tick.rbegin()->first == "2026-11-21T20:00:00Z");
  std::uint64_t previous = 0;
  for (const auto& [tick, fence] : fence_by_tick) {  // RFC 3339 UTC sorts by time
    CHECK(fence > previous);
    previous = fence;
  }
  // Every loser names the winner of its tick.
  std::map<std::string, std::string> winner;
  for (const std::string& l : won) {
    std::smatch m;
    REQUIRE(std::regex_search(l, m, std::regex(" node=([^ ]+)")));
    winner[TickOf(l)] = m[1];
  }
  for (const std::string& l : lost) {
    CHECK(l.find(" winner=" + winner[TickOf(l)]) != std::string::npos);
  }
}

TEST_CASE("tick lines read as DESIGN §6 shows them") {
  Sim sim(WallAt(kT0, -1'000));
  sim.AddReplica("node-a", {EveryJob("cleanup-unpaid-orders", 60)});
  sim.Step(seconds(1));
  sim.WaitQuiet();
  sim.AddReplica("node-b", {EveryJob("cleanup-unpaid-orders", 60)});  // starts at 14:00:00 too
  sim.WaitQuiet();
  const auto lines = sim.lines();
  CHECK(std::count(lines.begin(), lines.end(),
                   "2026-11-21T14:00:00.000Z info tick job=cleanup-unpaid-orders "
                   "tick=2026-11-21T14:00:00Z node=node-a outcome=won fence=1\n") == 1);
  CHECK(std::count(lines.begin(), lines.end(),
                   "2026-11-21T14:00:00.000Z info tick job=cleanup-unpaid-orders "
                   "tick=2026-11-21T14:00:00Z node=node-b outcome=lost winner=node-a\n") == 1);
  CHECK(std::count(lines.begin(), lines.end(),
                   "2026-11-21T14:00:00.000Z info run job=cleanup-unpaid-orders "
                   "tick=2026-11-21T14:00:00Z node=node-a outcome=done exit=0 duration=0.000s "
                   "fence=1\n") == 1);
  CHECK(std::count(lines.begin(), lines.end(),
                   "2026-11-21T14:00:00.000Z info output job=cleanup-unpaid-orders "
                   "tick=2026-11-21T14:00:00Z node=node-a stream=stdout "
                   "line=\"hello from node-a\"\n") == 1);
}

// Another process of node id "same" wins job "cleanup"'s tick, claimed straight in the
// store now with its own owner token.
void WinAsTwin(Sim& sim, std::int64_t tick, const std::string& token, seconds lease) {
  lock::ClaimRequest twin;
  twin.job = "cleanup";
  twin.tick_unix = tick;
  twin.node = "same";
  twin.owner_token = token + "-0123456789abcdef0123456789abcdef";
  twin.node_wall = sim.clock.Wall();
  twin.starting_deadline = seconds(60);
  twin.lease = lease;
  auto claimed = sim.backend.Claim(twin);
  REQUIRE(claimed);
  REQUIRE(claimed->status == lock::ClaimStatus::kWon);
}

// Two processes under one node id: every tick still runs once, but the logs and the
// ledger cannot tell them apart, so the one that loses to "itself" says so, once per
// 10 minutes (docs/design.md §6 `node-id-conflict`). The other process here is a
// claim made straight in the store a second before each tick.
TEST_CASE("a replica that loses a tick to its own node id warns, at most every 10 minutes") {
  Sim sim(WallAt(kT0, -1'000));
  sim.AddReplica("same", {EveryJob("cleanup", 60)});
  for (int minute = 0; minute <= 12; ++minute) {
    sim.WaitQuiet();
    // A lease of 10 s ends before the next minute: never `busy`.
    WinAsTwin(sim, kT0 + 60 * minute, "twin-" + std::to_string(minute), seconds(10));
    sim.Step(seconds(1));
    if (minute < 12) sim.Step(seconds(59));
  }
  sim.WaitQuiet();
  REQUIRE(sim.Grep({"node=same outcome=lost winner=same"}).size() == 13);
  const auto warned = sim.Grep({" warn node-id-conflict job=cleanup "});
  REQUIRE(warned.size() == 2);
  CHECK(warned[0].find(" tick=2026-11-21T14:00:00Z node=same") != std::string::npos);
  CHECK(warned[1].find(" tick=2026-11-21T14:10:00Z node=same") != std::string::npos);
}

// A replica restarted under its id may find ticks its former self claimed before the
// restart (up to claim_lead_max ahead): no warning for those.
TEST_CASE("a restarted replica that loses a tick its former self claimed does not warn") {
  Sim sim(WallAt(kT0, 0));
  WinAsTwin(sim, kT0, "former-process", seconds(30));  // just before this one started
  sim.AddReplica("same", {EveryJob("cleanup", 60)});  // at 14:00:00: claims 14:00 too
  sim.WaitQuiet();
  REQUIRE(sim.Grep({"tick=2026-11-21T14:00:00Z node=same outcome=lost winner=same"}).size() == 1);
  CHECK(sim.Grep({"node-id-conflict"}).empty());
}

TEST_CASE(
    "a tick whose job already had a later tick claimed is superseded: logged, observed, "
    "not run") {
  Sim sim(WallAt(kT0, -1'000));
  // A replica whose clock is a minute ahead already claimed 14:01 (a claim that did
  // not check the clock: rule 15 would refuse it, and pass it over; see below).
  lock::ClaimRequest ahead;
  ahead.job = "lagging";
  ahead.tick_unix = kT0 + 60;
  ahead.node = "node-ahead";
  ahead.owner_token = "token-ahead";
  ahead.starting_deadline = std::nullopt;
  auto claimed = sim.store->Claim(ahead);
  REQUIRE(claimed);
  REQUIRE(claimed->status == lock::ClaimStatus::kWon);
  sim.AddReplica("node-b", {EveryJob("lagging", 60)},
                 [](SchedulerOptions& o) { o.clock_tolerance = std::nullopt; });
  sim.Step(seconds(1));  // 14:00:00
  sim.WaitQuiet();
  const auto lines = sim.lines();
  CHECK(std::count(lines.begin(), lines.end(),
                   "2026-11-21T14:00:00.000Z info tick job=lagging tick=2026-11-21T14:00:00Z "
                   "node=node-b outcome=superseded later_tick=2026-11-21T14:01:00Z "
                   "later_node=node-ahead\n") == 1);
  CHECK(sim.Grep({" run "}).empty());
  auto history = sim.store->History("lagging", 10);
  REQUIRE(history);
  bool observed = false;
  for (const lock::TickHistory& h : *history) {
    for (const lock::Observation& o : h.observations) {
      if (h.tick_unix == kT0 && o.node == "node-b") observed = o.outcome == "superseded";
    }
  }
  CHECK(observed);
}

TEST_CASE(
    "a tick claimed a minute into the future does not supersede the ticks of a replica "
    "whose clock is right (rule 15)") {
  Sim sim(WallAt(kT0, -1'000));
  lock::ClaimRequest ahead;  // unchecked: an older tickd with its clock a minute ahead
  ahead.job = "held";
  ahead.tick_unix = kT0 + 60;
  ahead.node = "node-ahead";
  ahead.owner_token = "token-ahead";
  ahead.starting_deadline = std::nullopt;
  ahead.forbid_overlap = false;
  ahead.lease = milliseconds(1);  // its holder is gone: no busy under forbid
  REQUIRE(sim.store->Claim(ahead)->status == lock::ClaimStatus::kWon);
  sim.AddReplica("node-b", {EveryJob("held", 10)});
  sim.Step(seconds(1));   // 14:00:00
  sim.Step(seconds(10));  // 14:00:10
  sim.WaitQuiet();
  CHECK(sim.Grep({"outcome=superseded"}).empty());
  CHECK(sim.Grep({"node=node-b outcome=won"}).size() == 2);
  CHECK(sim.Grep({" run ", "outcome=done"}).size() == 2);
}

TEST_CASE("the store-clock offset is how far the clocks surely are apart") {
  const auto at = [](std::int64_t ms) { return WallTime(milliseconds(ms)); };
  // Answered at once: the store's reading against our send.
  CHECK(SurelyApart(at(10'000), at(10'000), at(9'000)) == milliseconds(1'000));
  CHECK(SurelyApart(at(10'000), at(10'000), at(12'000)) == milliseconds(-2'000));
  // A claim that waited 13 s in queues: the store read its clock 13 s after our send,
  // which is a slow answer, not a store 13 s ahead.
  CHECK(SurelyApart(at(10'000), at(23'005), at(23'000)) == milliseconds(0));
  // A store really ahead shows even through a slow answer (by the part beyond it).
  CHECK(SurelyApart(at(10'000), at(13'000), at(43'000)) == milliseconds(-30'000));
  // Ahead is judged from the send: the store cannot have read before it.
  CHECK(SurelyApart(at(40'000), at(45'000), at(10'000)) == milliseconds(30'000));
}

TEST_CASE(
    "a replica whose clock is ahead of the store's hears early: logged with its offset, "
    "observed, never run; once the clocks agree it claims again, without a restart") {
  Sim sim(WallAt(kT0, -1'000));
  StoreBehind& behind = sim.NewStoreBehind(seconds(30));
  auto& store = behind.store;
  auto& store_clock = behind.clock;
  const auto step = [&](milliseconds by) { behind.Step(by); };
  sim.AddReplica("node-ahead", {EveryJob("job", 10)}, nullptr, store.get());
  step(seconds(1));  // 14:00:00 here, 13:59:30 at the store
  sim.WaitQuiet();
  CHECK(sim.Grep({"warn tick job=job tick=2026-11-21T14:00:00Z node=node-ahead outcome=early "
                  "offset=+30.000s store_clock=2026-11-21T13:59:30.000Z max_lead=0.250s"})
            .size() == 1);
  CHECK(sim.Grep({"warn store-clock node=node-ahead backend=memory outcome=ahead "
                  "offset=+30.000s threshold=1.000s"})
            .size() == 1);
  CHECK(sim.Grep({" run "}).empty());
  // (13:59:50, still startable when it started, was early too.)
  auto history = store->History("job", 10);
  REQUIRE(history);
  REQUIRE(history->size() == 2);
  for (const lock::TickHistory& t : *history) {
    CHECK(t.winner.empty());
    REQUIRE(t.observations.size() == 1);
    CHECK(t.observations.front().outcome == "early");
  }

  // The store's clock is set right: the next tick is claimed and run.
  store_clock.StepWall(seconds(30));
  step(seconds(10));  // 14:00:10 on both
  sim.WaitQuiet();
  CHECK(sim.Grep({"tick=2026-11-21T14:00:10Z node=node-ahead outcome=won"}).size() == 1);
  CHECK(sim.Grep({"info store-clock node=node-ahead backend=memory outcome=back "
                  "offset=+0.000s"})
            .size() == 1);
  CHECK(sim.Grep({" run ", "outcome=done"}).size() == 1);
}

TEST_CASE(
    "a replica whose clock was an hour ahead claims again as soon as its clock is set back, "
    "not an hour later") {
  Sim sim(WallAt(kT0, -1'000));
  StoreBehind& behind = sim.NewStoreBehind(seconds(3600));
  const auto step = [&](milliseconds by) { behind.Step(by); };
  sim.AddReplica("node-ahead", {EveryJob("job", 10)}, nullptr, behind.store.get());
  step(seconds(1));  // 14:00:00 here, 13:00:00 at the store
  sim.WaitQuiet();
  CHECK(sim.Grep({"tick=2026-11-21T14:00:00Z node=node-ahead outcome=early"}).size() == 1);
  sim.clock.StepWall(-seconds(3600));  // NTP mends it: 13:00:00 on both
  step(seconds(10));
  sim.WaitQuiet();
  CHECK(sim.Grep({"tick=2026-11-21T13:00:10Z node=node-ahead outcome=won"}).size() == 1);
  CHECK(sim.Grep({" run ", "outcome=done"}).size() == 1);
}

TEST_CASE("forbid: a tick while the previous run still runs is busy on every replica") {
  Sim sim(WallAt(kT0, -1'000));
  sim.runner.plan = [](const jobs::ProcessSpec&) { return std::optional<int>(); };  // hold
  auto long_lease = [](SchedulerOptions& o) { o.lease = std::chrono::minutes(10); };
  sim.AddReplica("a", {EveryJob("slow", 60)}, long_lease);
  sim.AddReplica("b", {EveryJob("slow", 60)}, long_lease);
  sim.Step(seconds(1), false);   // 14:00 won by one
  sim.Step(seconds(60), false);  // 14:01: still running
  sim.WaitQuiet(false);
  const auto won = sim.Grep({"outcome=won"});
  REQUIRE(won.size() == 1);
  const std::string holder = won[0].find("node=a ") != std::string::npos ? "a" : "b";
  const auto busy = sim.Grep({"tick=2026-11-21T14:01:00Z", "outcome=busy"});
  REQUIRE(busy.size() == 2);
  for (const auto& l : busy) {
    CHECK(l.find("holder=" + holder + " holder_tick=2026-11-21T14:00:00Z") != std::string::npos);
  }
  REQUIRE(Eventually([&] { return sim.runner.starts() == 1; }));
  sim.runner.run(0)->FinishWithExit(0);
  REQUIRE(
      Eventually([&] { return sim.replica(0).active_runs() + sim.replica(1).active_runs() == 0; }));
  sim.Step(seconds(60));  // 14:02: free again
  sim.WaitQuiet(false);
  CHECK(sim.Grep({"tick=2026-11-21T14:02:00Z", "outcome=won"}).size() == 1);
}

// Regression (nemesis, Redis store-restart-without-data): the store forgot the running
// tick, answered won for the next one, and the replica still running the job started
// it beside the old run.
TEST_CASE(
    "forbid: a run still going on this replica makes the next tick busy, whatever the store says") {
  Sim sim(WallAt(kT0, -1'000));
  sim.runner.plan = [](const jobs::ProcessSpec&) { return std::optional<int>(); };  // hold
  auto long_lease = [](SchedulerOptions& o) { o.lease = std::chrono::minutes(10); };
  sim.AddReplica("a", {EveryJob("slow", 60)}, long_lease);
  sim.Step(seconds(1), false);  // 14:00 won
  sim.WaitQuiet(false);
  REQUIRE(sim.Grep({"tick=2026-11-21T14:00:00Z", "outcome=won"}).size() == 1);
  REQUIRE(Eventually([&] { return sim.runner.starts() == 1; }));
  sim.backend.ForgetEverything(lock::NewMemoryBackend(sim.clock));  // the store lost its data
  sim.Step(seconds(60), false);  // 14:01: the store would say won
  sim.WaitQuiet(false);
  const auto busy = sim.Grep({"tick=2026-11-21T14:01:00Z", "outcome=busy"});
  REQUIRE(busy.size() == 1);
  CHECK(busy[0].find("holder=a holder_tick=2026-11-21T14:00:00Z") != std::string::npos);
  CHECK(sim.runner.starts() == 1);
  sim.runner.run(0)->FinishWithExit(0);
  REQUIRE(Eventually([&] { return sim.replica(0).active_runs() == 0; }));
  sim.Step(seconds(60), false);  // 14:02: nothing runs here, but the store forgot 14:00
  sim.WaitQuiet(false);
  const auto reset = sim.Grep({"tick=2026-11-21T14:02:00Z", "outcome=store-reset"});
  REQUIRE(reset.size() == 1);
  CHECK(reset[0].find("known_tick=2026-11-21T14:00:00Z store_tick=none") != std::string::npos);
  CHECK(sim.runner.starts() == 1);
}

// The store lost its data: every replica that saw a claim of the job the store no
// longer knows holds the job back for one lease (a run of a forgotten claim may still
// be going), then claims again.
TEST_CASE("a store that forgot a claim this replica saw holds the job back for one lease") {
  Sim sim(WallAt(kT0, -1'000));
  auto lease = [](SchedulerOptions& o) { o.lease = std::chrono::minutes(3); };
  sim.AddReplica("a", {EveryJob("j", 60)}, lease);
  sim.AddReplica("b", {EveryJob("j", 60)}, lease);
  sim.Step(seconds(1));  // 14:00: won by one, lost by the other
  sim.WaitQuiet();
  REQUIRE(sim.Grep({"tick=2026-11-21T14:00:00Z", "outcome=won"}).size() == 1);
  REQUIRE(sim.Grep({"tick=2026-11-21T14:00:00Z", "outcome=lost"}).size() == 1);
  sim.backend.ForgetEverything(lock::NewMemoryBackend(sim.clock));
  sim.Step(seconds(60));  // 14:01: both knew 14:00, the store does not
  sim.WaitQuiet();
  const auto reset = sim.Grep({"tick=2026-11-21T14:01:00Z", "outcome=store-reset"});
  REQUIRE(reset.size() == 2);
  for (const auto& l : reset) {
    CHECK(l.find("known_tick=2026-11-21T14:00:00Z store_tick=none until=2026-11-21T14:04:00") !=
          std::string::npos);
  }
  sim.Step(seconds(60));  // 14:02: held back
  sim.Step(seconds(60));  // 14:03: held back
  sim.WaitQuiet();
  CHECK(sim.Grep({"outcome=store-reset", "reason=lease-after-store-reset",
                  "reset_seen=2026-11-21T14:01:00"})
            .size() == 4);
  CHECK(sim.Grep({"outcome=won"}).size() == 1);
  sim.Step(seconds(60));  // 14:04: the hold is over
  sim.WaitQuiet();
  CHECK(sim.Grep({"tick=2026-11-21T14:04:00Z", "outcome=won"}).size() == 1);
  CHECK(sim.Grep({"tick=2026-11-21T14:04:00Z", "outcome=lost"}).size() == 1);
  CHECK(Eventually([&] { return sim.runner.starts() == 2; }));
}

TEST_CASE("concurrency allow: overlapping runs are fine") {
  Sim sim(WallAt(kT0, -1'000));
  sim.runner.plan = [](const jobs::ProcessSpec&) { return std::optional<int>(); };
  sim.AddReplica(
      "a",
      {EveryJob("par", 60, [](config::Job& j) { j.concurrency = config::Concurrency::kAllow; })},
      [](SchedulerOptions& o) { o.lease = std::chrono::minutes(10); });
  sim.Step(seconds(1), false);
  sim.Step(seconds(60), false);
  sim.WaitQuiet(false);
  CHECK(sim.Grep({"outcome=won"}).size() == 2);
  CHECK(sim.replica(0).active_runs() == 2);
}

TEST_CASE("a replica that wakes late logs the ticks it can no longer start as missed") {
  Sim sim(WallAt(kT0, -30'000));
  sim.AddReplica("a", {EveryJob("j", 60)});  // starting_deadline 10 s
  sim.Step(seconds(30));                     // 14:00 won
  sim.Step(seconds(4 * 60 + 5));             // paused until 14:04:05
  sim.WaitQuiet();
  CHECK(sim.Grep({"outcome=missed"}).size() == 3);  // 14:01, 14:02, 14:03
  for (const char* t : {"14:01:00Z", "14:02:00Z", "14:03:00Z"}) {
    CHECK(sim.Grep({"tick=2026-11-21T" + std::string(t), "outcome=missed"}).size() == 1);
  }
  CHECK(sim.Grep({"tick=2026-11-21T14:04:00Z", "outcome=won"}).size() == 1);
  // Missed locally: never claimed.
  for (const auto& req : sim.backend.claims()) CHECK(req.tick_unix % 60 == 0);
  CHECK(sim.backend.claims().size() == 2);
}

TEST_CASE("thousands of missed ticks are summed up in one line") {
  Sim sim(WallAt(kT0));
  // allow: the two ticks still startable at the end are claimed back to back.
  sim.AddReplica("a", {EveryJob("fast", 1, [](config::Job& j) {
                   j.concurrency = config::Concurrency::kAllow;
                 })});  // claims 14:00:00 at once
  sim.Step(std::chrono::hours(24));
  sim.WaitQuiet();
  CHECK(sim.Grep({"outcome=missed"}).size() == 10);
  const auto summary = sim.Grep({" warn missed job=fast node=a count=86398 "});
  REQUIRE(summary.size() == 1);
  CHECK(summary[0].find("first=2026-11-21T14:00:01Z last=2026-11-22T13:59:58Z") !=
        std::string::npos);
  CHECK(sim.Grep({"outcome=won"}).size() == 3);  // 14:00:00, then the last two still startable
}

TEST_CASE("a wall-clock step back delays ticks; the loop re-reads the wall clock") {
  Sim sim(WallAt(kT0, -10'000));  // 13:59:50, loop sleeps 10 s
  sim.AddReplica("a", {EveryJob("j", 60)});
  sim.WaitQuiet();
  sim.clock.StepWall(-seconds(30));  // NTP: wall is 13:59:20 now
  sim.Step(seconds(10));             // steady deadline passes, wall 13:59:30
  sim.WaitQuiet();
  CHECK(sim.backend.claims().empty());
  sim.Step(seconds(30));  // wall 14:00:00
  sim.WaitQuiet();
  CHECK(sim.Grep({"tick=2026-11-21T14:00:00Z", "outcome=won"}).size() == 1);
}

TEST_CASE("misfire run-once: the first replica back after an outage runs the latest tick once") {
  Sim sim(WallAt(kT0, 5 * 60'000 + 30'000));  // 14:05:30, everyone was down since 13:58
  auto run_once = [](config::Job& j) { j.misfire = config::Misfire::kRunOnce; };
  sim.AddReplica("a", {EveryJob("report", 60, run_once)});
  sim.WaitQuiet();
  auto won = sim.Grep({"tick=2026-11-21T14:05:00Z", "outcome=won"});
  REQUIRE(won.size() == 1);
  CHECK(won[0].find("node=a") != std::string::npos);
  CHECK(sim.Grep({"tick=2026-11-21T14:04:00Z"}).empty());  // only the latest
  sim.clock.Advance(seconds(5));
  sim.AddReplica("b", {EveryJob("report", 60, run_once)});
  sim.WaitQuiet();
  CHECK(sim.Grep({"tick=2026-11-21T14:05:00Z", "node=b", "outcome=lost", "winner=a"}).size() == 1);
  CHECK(sim.runner.starts() == 1);
  bool deadline_free = false;
  for (const auto& req : sim.backend.claims()) deadline_free |= !req.starting_deadline;
  CHECK(deadline_free);
}

TEST_CASE("misfire skip: nothing is caught up after an outage") {
  Sim sim(WallAt(kT0, 5 * 60'000 + 30'000));
  sim.AddReplica("a", {EveryJob("report", 60)});
  sim.WaitQuiet();
  CHECK(sim.lines().empty());
  CHECK(sim.backend.claims().empty());
}

TEST_CASE("a won tick starts while the rest of its batch is still being answered") {
  Sim sim(WallAt(kT0, -1'000));
  sim.runner.plan = [](const jobs::ProcessSpec&) { return std::optional<int>(); };  // hold
  bool started_before_the_rest = false;
  sim.backend.observe_in_claim = true;
  sim.backend.after_first_answer = [&] {
    sim.backend.after_first_answer = nullptr;  // the first batch only
    started_before_the_rest = Eventually([&] { return sim.runner.starts() == 1; });
  };
  sim.AddReplica("a", {EveryJob("first", 60), EveryJob("second", 60)});
  sim.Step(seconds(1), false);  // 14:00:00: both due, one batch
  REQUIRE(Eventually([&] { return sim.runner.starts() == 2; }));
  CHECK(started_before_the_rest);
  CHECK(sim.Grep({"outcome=won"}).size() == 2);
}

TEST_CASE("a ledger write slow to answer does not hold up won runs") {
  // The store cut off just after the claims were answered: each ledger write hangs
  // for the client's timeout. The runs already won start first (found by the
  // nemesis: a won tick started only after the write timed out, its lease gone).
  Sim sim(WallAt(kT0, -1'000));
  sim.runner.plan = [](const jobs::ProcessSpec&) { return std::optional<int>(); };  // hold
  Gate store_answers;
  sim.backend.before_record = [&] { store_answers.Wait(); };
  sim.AddReplica("a", {EveryJob("first", 60), EveryJob("second", 60)});
  sim.Step(seconds(1), false);  // 14:00:00: both due, both won, nothing observed yet
  CHECK(Eventually([&] { return sim.runner.starts() == 2; }, seconds(3)));
  store_answers.Open();
  REQUIRE(Eventually([&] { return sim.runner.starts() == 2; }));
  CHECK(sim.Grep({"outcome=won"}).size() == 2);
  sim.runner.run(0)->FinishWithExit(0);
  sim.runner.run(1)->FinishWithExit(0);
}

TEST_CASE("recover: another replica re-claims the tick of a holder that died") {
  Sim sim(WallAt(kT0, -1'000));
  sim.runner.plan = [](const jobs::ProcessSpec&) { return std::optional<int>(); };  // hold
  TestBackend& a_view = sim.NewView();
  auto recover = [](config::Job& j) {
    j.recover = true;
    j.starting_deadline = seconds(30);
  };
  auto lease = [](SchedulerOptions& o) { o.lease = seconds(4); };
  sim.AddReplica("a", {EveryJob("j", 60, recover)}, lease, &a_view);
  sim.Step(seconds(1), false);
  sim.WaitQuiet(false);
  // a's run starts on its own thread: simulated time must not pass its lease before.
  REQUIRE(Eventually([&] { return sim.runner.starts() == 1; }));
  sim.AddReplica("b", {EveryJob("j", 60, recover)}, lease);  // 14:00:00 lost to a
  sim.WaitQuiet(false);
  REQUIRE(sim.Grep({"node=b", "outcome=lost", "winner=a"}).size() == 1);
  a_view.dead = true;  // a freezes: no renewals reach the store any more
  for (int i = 0; i < 20 && sim.Grep({"recovered=true"}).empty(); ++i) sim.Step(seconds(1), false);
  // The recovered run starts on its own thread.
  REQUIRE(Eventually([&] { return sim.runner.starts() == 2; }));
  const auto recovered = sim.Grep({"node=b", "outcome=won", "recovered=true"});
  REQUIRE(recovered.size() == 1);
  CHECK(recovered[0].find("tick=2026-11-21T14:00:00Z") != std::string::npos);
  CHECK(recovered[0].find("fence=2") != std::string::npos);
  CHECK(sim.runner.specs()[1].env.at("TICKD_NODE") == "b");
}

TEST_CASE("recover: a holder that dies after the job's following tick is still taken over") {
  Sim sim(WallAt(kT0, -1'000));
  sim.runner.plan = [](const jobs::ProcessSpec&) { return std::optional<int>(); };  // hold
  TestBackend& a_view = sim.NewView();
  auto recover = [](config::Job& j) {
    j.recover = true;
    j.starting_deadline = seconds(30);
  };
  auto lease = [](SchedulerOptions& o) { o.lease = seconds(60); };  // renewed every 20 s
  sim.AddReplica("a", {EveryJob("long", 120, recover)}, lease, &a_view);
  sim.Step(seconds(1), false);  // 14:00:00 won by a
  sim.WaitQuiet(false);
  REQUIRE(Eventually([&] { return sim.runner.starts() == 1; }));
  sim.AddReplica("b", {EveryJob("long", 120, recover)}, lease);
  for (int n = 1; n <= 15; ++n) {  // a runs healthily past 14:02:00 (busy for b)
    sim.Step(seconds(10), false);
    REQUIRE(Eventually([&] { return a_view.renewals >= n / 2; }));
  }
  CHECK(sim.Grep({"tick=2026-11-21T14:02:00Z", "node=b", "outcome=busy"}).size() == 1);
  a_view.dead = true;  // 14:02:30: a freezes
  a_view.claim_error = true;
  for (int i = 0; i < 30 && sim.Grep({"recovered=true"}).empty(); ++i) {
    sim.Step(seconds(10), false);
  }
  const auto recovered = sim.Grep({"node=b", "outcome=won", "recovered=true"});
  REQUIRE(recovered.size() == 1);
  CHECK(recovered[0].find("tick=2026-11-21T14:00:00Z") != std::string::npos);
  REQUIRE(Eventually([&] { return sim.runner.starts() == 2; }));
}

TEST_CASE("recover: false never re-claims a lost tick") {
  Sim sim(WallAt(kT0, -1'000));
  sim.AddReplica("a", {EveryJob("j", 60)});
  sim.Step(seconds(1));
  sim.AddReplica("b", {EveryJob("j", 60)});
  for (int i = 0; i < 30; ++i) sim.Step(seconds(1));
  sim.WaitQuiet();
  CHECK(sim.backend.claims().size() == 2);
}

TEST_CASE("tick records older than the retention are pruned") {
  Sim sim(WallAt(kT0, -1'000));
  sim.AddReplica("a", {EveryJob("daily", 86'400)},
                 [](SchedulerOptions& o) { o.retention = std::chrono::hours(48); });
  sim.Step(seconds(1));  // 14:00 is not a daily tick: the first is at midnight
  for (int hour = 0; hour < 6 * 24; ++hour) sim.Step(std::chrono::hours(1));
  sim.WaitQuiet();
  CHECK(sim.Grep({"outcome=won"}).size() == 6);
  // Prune runs on its own thread: the last one may still be going (bounded wait). A
  // prune due while the one before is still going is skipped until the next hour (on a
  // loaded machine the last step's can be), so the clock moves on an hour when none
  // came: up to 5 (the next daily tick is 10 h away, the kept ones stay the same).
  std::size_t kept = 0;
  for (int hour = 0; hour < 5 && kept != 2 && kept != 3; ++hour) {
    if (hour > 0) sim.Step(std::chrono::hours(1));
    for (int i = 0; i < 200; ++i) {
      auto history = sim.store->History("daily", 100);
      REQUIRE(history);
      kept = history->size();
      if (kept <= 3) break;
      std::this_thread::sleep_for(milliseconds(10));
    }
  }
  CHECK(kept <= 3);  // ticks of the last 48 h (+ the one not yet pruned)
  CHECK(kept >= 2);
}

TEST_CASE("a store's size warnings are logged after each hourly prune, not again at start") {
  Sim sim(WallAt(kT0, -1'000));
  sim.backend.size_warnings = {"the store is filling up"};
  sim.AddReplica("a", {EveryJob("daily", 86'400)});
  sim.Step(seconds(1));
  // The prune at start asks nothing: its size warnings were among the start-up warnings.
  REQUIRE(Eventually([&] { return sim.backend.prunes >= 1; }));
  CHECK(sim.backend.size_asks == 0);
  // An hour later: the hourly prune, then the warning, on the pruner's thread.
  sim.Step(std::chrono::hours(1));
  REQUIRE(Eventually([&] { return !sim.Grep({"the store is filling up"}).empty(); }));
  const std::vector<std::string> warned = sim.Grep({"the store is filling up"});
  REQUIRE(warned.size() == 1);
  CHECK(warned[0].find("backend") != std::string::npos);
  CHECK(warned[0].find("node=a") != std::string::npos);
  CHECK(sim.backend.size_asks == 1);
}

// What the store holds when node a's first claim of j at kT0 landed but its answer
// was lost: a claim of a under a token a never learnt (lease 10 s).
void LandUnanswered(Sim& sim, bool recover) {
  lock::ClaimRequest earlier;
  earlier.job = "j";
  earlier.tick_unix = kT0;
  earlier.node = "a";
  earlier.owner_token = "lost-answer-0123456789abcdef0123456789abcdef";
  earlier.node_wall = sim.clock.Wall();
  earlier.starting_deadline = seconds(60);
  earlier.recover = recover;
  earlier.lease = seconds(10);
  auto claimed = sim.store->Claim(earlier);
  REQUIRE(claimed);
  REQUIRE(claimed->status == lock::ClaimStatus::kWon);
}

TEST_CASE("a claim the store does not answer is sent again until the tick's deadline, and "
          "fails closed: nothing runs") {
  Sim sim(WallAt(kT0, -1'000));
  sim.backend.claim_error = true;
  sim.AddReplica("a", {EveryJob("j", 60, [](config::Job& j) { j.starting_deadline = seconds(60); })});
  for (int i = 0; i < 70; ++i) sim.Step(seconds(1));
  sim.WaitQuiet();
  // Sent at T and 1, 2, 4, 8, 16, 16 s after each failure (T+1, 3, 7, 15, 31, 47); the
  // next would come at T+63, past the deadline: the tick line then, once.
  const auto retried = sim.Grep({" warn claim job=j tick=2026-11-21T14:00:00Z node=a outcome=error",
                                 "error=\"test: backend down\""});
  REQUIRE(retried.size() == 6);
  const char* waits[] = {"1.000s", "2.000s", "4.000s", "8.000s", "16.000s", "16.000s"};
  for (std::size_t i = 0; i < retried.size(); ++i) {
    CHECK(retried[i].find(std::string("retry_in=") + waits[i]) != std::string::npos);
  }
  CHECK(sim.Grep({" tick job=j tick=2026-11-21T14:00:00Z"}).size() == 1);
  CHECK(sim.Grep({" warn tick job=j tick=2026-11-21T14:00:00Z node=a outcome=error",
                  "error=\"test: backend down\" tries=7"}).size() == 1);
  CHECK(sim.runner.starts() == 0);
}

TEST_CASE("a claim the store did not answer wins when sent again, with one tick line") {
  Sim sim(WallAt(kT0, -1'000));
  sim.backend.claim_error = true;
  sim.AddReplica("a", {EveryJob("j", 60)});
  sim.Step(seconds(1));
  sim.WaitQuiet();
  REQUIRE(sim.Grep({" warn claim job=j", "retry_in=1.000s"}).size() == 1);
  CHECK(sim.Grep({" tick job=j"}).empty());
  sim.backend.claim_error = false;
  bool landed_before = false;
  SECTION("the store answers the retry") {}
  SECTION("the first claim had landed, its answer lost") {
    // Nobody runs it; no node-id warning either (it is this replica's).
    LandUnanswered(sim, false);
    landed_before = true;
  }
  sim.Step(seconds(1));
  sim.WaitQuiet();
  const auto lines = sim.Grep({" tick job=j tick=2026-11-21T14:00:00Z node=a"});
  REQUIRE(lines.size() == 1);
  if (landed_before) {
    CHECK(lines[0].find(" warn tick ") != std::string::npos);
    CHECK(lines[0].find("outcome=lost winner=a reason=\"an earlier claim of this replica, "
                        "whose answer was lost, won it\"") != std::string::npos);
    CHECK(sim.Grep({"node-id-conflict"}).empty());
    CHECK(sim.runner.starts() == 0);
  } else {
    CHECK(lines[0].find(" info tick ") != std::string::npos);
    CHECK(lines[0].find("outcome=won") != std::string::npos);
    CHECK(sim.runner.starts() == 1);
  }
}

TEST_CASE("recover: true re-claims a tick lost to this replica's own unanswered claim once "
          "that claim's lease expired") {
  Sim sim(WallAt(kT0, -1'000));
  sim.backend.claim_error = true;
  sim.AddReplica("a", {EveryJob("j", 3'600, [](config::Job& j) {
                   j.recover = true;
                   j.starting_deadline = seconds(60);
                 })},
                 [](SchedulerOptions& o) { o.lease = seconds(10); });
  sim.Step(seconds(1));
  sim.WaitQuiet();
  REQUIRE(sim.Grep({" warn claim job=j", "retry_in=1.000s"}).size() == 1);
  LandUnanswered(sim, true);
  sim.backend.claim_error = false;
  for (int i = 0; i < 30 && sim.Grep({"recovered=true"}).empty(); ++i) sim.Step(seconds(1));
  sim.WaitQuiet();
  CHECK(sim.Grep({" warn tick job=j", "outcome=lost winner=a reason="}).size() == 1);
  CHECK(sim.Grep({" info tick job=j tick=2026-11-21T14:00:00Z node=a outcome=won",
                  "recovered=true"}).size() == 1);
  REQUIRE(Eventually([&] { return sim.runner.starts() == 1; }));
}

TEST_CASE("ticks due at one instant are claimed in one batch, each with its own token") {
  Sim sim(WallAt(kT0, -1'000));
  sim.AddReplica("a", {EveryJob("x", 60), EveryJob("y", 60), EveryJob("z", 30)});
  sim.Step(seconds(1));
  sim.WaitQuiet();
  const auto claims = sim.backend.claims();
  REQUIRE(claims.size() == 3);
  std::set<std::string> tokens;
  for (const auto& c : claims) {
    CHECK(c.owner_token.size() == 32);
    CHECK(c.owner_token.find_first_not_of("0123456789abcdef") == std::string::npos);
    CHECK(c.config_hash == "hash-" + c.job);
    CHECK(c.node == "a");
    tokens.insert(c.owner_token);
  }
  CHECK(tokens.size() == 3);
}

TEST_CASE("replicas that know each other start their batches on different slices of the jobs") {
  Sim sim(WallAt(kT0, -1'000));
  JobSet jobs;
  for (int i = 0; i < 30; ++i) jobs.push_back(EveryJob("job-" + std::to_string(i), 60));
  const std::vector<std::string> nodes = {"node-a", "node-b", "node-c"};
  std::vector<std::unique_ptr<Peers>> peers;
  std::vector<TestBackend*> views;
  for (const std::string& node : nodes) {
    peers.push_back(std::make_unique<Peers>(node));
    peers.back()->Saw({nodes.begin(), nodes.end()});
    views.push_back(&sim.NewView());
    sim.AddReplica(
        node, jobs, [&](SchedulerOptions& o) { o.peers = peers.back().get(); }, views.back());
  }
  sim.Step(seconds(1));
  sim.WaitQuiet();
  REQUIRE(sim.Grep({" info tick ", "outcome=won"}).size() == 30);  // still one winner each
  std::set<std::string> firsts;
  for (std::size_t rank = 0; rank < nodes.size(); ++rank) {
    const auto claims = views[rank]->claims();
    REQUIRE(claims.size() == 30);
    // Rank r sends its own slice first: the first claim is in it, and once a claim is
    // outside it, none after is in it.
    CHECK(lock::SpreadSlice(claims.front().job, 3) == rank);
    std::size_t k = 0;
    while (k < claims.size() && lock::SpreadSlice(claims[k].job, 3) == rank) ++k;
    for (; k < claims.size(); ++k) CHECK(lock::SpreadSlice(claims[k].job, 3) != rank);
    firsts.insert(claims.front().job);
  }
  CHECK(firsts.size() == 3);  // no two replicas race for the same job first
}

TEST_CASE("max_concurrent_runs: a replica claims no more of an instant than it can start") {
  Sim sim(WallAt(kT0, -1'000));
  sim.runner.plan = [](const jobs::ProcessSpec&) { return std::optional<int>(); };
  sim.AddReplica("a", {EveryJob("x", 60), EveryJob("y", 60)}, [](SchedulerOptions& o) {
    o.max_concurrent_runs = 1;
    o.lease = std::chrono::minutes(10);
  });
  sim.Step(seconds(1), false);
  sim.WaitQuiet(false);
  REQUIRE(Eventually([&] { return sim.runner.starts() == 1; }));  // on the run's own thread
  // One claim, won and started; the other tick is skipped before any claim, so it
  // stays free for the other replicas: nothing won is released unrun.
  CHECK(sim.backend.claims().size() == 1);
  CHECK(sim.Grep({"outcome=won"}).size() == 1);
  CHECK(sim.Grep({" warn tick ", "outcome=skipped", "reason=max_concurrent_runs", "limit=1",
                  "running=1"})
            .size() == 1);
  CHECK(sim.Grep({" skip "}).empty());
  CHECK(sim.backend.completions().empty());
  const auto history = sim.store->History("", 10);
  REQUIRE(history);
  REQUIRE(history->size() == 2);
  for (const lock::TickHistory& h : *history) {
    REQUIRE(h.observations.size() == 1);
    // The skipped tick has no claim record: no winner, nobody's run.
    CHECK(h.observations[0].outcome == (h.winner.empty() ? "skipped" : "won"));
  }
  // Once the run has ended there is room again, for one: the next instant wins one
  // tick (its run held again) and skips the other.
  sim.runner.run(0)->FinishWithExit(0);
  REQUIRE(Eventually([&] { return sim.replica(0).active_runs() == 0; }));
  sim.Step(seconds(60), false);
  sim.WaitQuiet(false);
  REQUIRE(Eventually([&] { return sim.runner.starts() == 2; }));
  CHECK(sim.Grep({"tick=2026-11-21T14:01:00Z", "outcome=won"}).size() == 1);
  CHECK(sim.Grep({"tick=2026-11-21T14:01:00Z", "outcome=skipped"}).size() == 1);
  CHECK(sim.backend.claims().size() == 2);
}

TEST_CASE("max_concurrent_runs: two replicas with room for k each and 3k ticks due start 2k, "
          "every won tick starts, the rest is skipped on both") {
  constexpr int kRoom = 4;
  Sim sim(WallAt(kT0, -1'000));
  sim.runner.plan = [](const jobs::ProcessSpec&) { return std::optional<int>(); };
  JobSet jobs;
  for (int i = 0; i < 3 * kRoom; ++i) jobs.push_back(EveryJob("job-" + std::to_string(i), 60));
  // No peers: both claim in the same order, so the second to claim loses its first
  // round whole and must go on claiming, in rounds, while it has room.
  for (const char* node : {"a", "b"}) {
    sim.AddReplica(node, jobs, [](SchedulerOptions& o) {
      o.max_concurrent_runs = kRoom;
      o.lease = std::chrono::minutes(10);
    });
  }
  sim.Step(seconds(1), false);
  sim.WaitQuiet(false);
  REQUIRE(Eventually([&] { return sim.runner.starts() == 2 * kRoom; }));
  CHECK(sim.replica(0).active_runs() == kRoom);
  CHECK(sim.replica(1).active_runs() == kRoom);
  const auto won = sim.Grep({"outcome=won"});
  CHECK(won.size() == 2 * kRoom);  // every won tick started
  std::set<std::string> won_jobs;
  for (const std::string& l : won) {
    std::smatch m;
    REQUIRE(std::regex_search(l, m, std::regex(" job=([^ ]+)")));
    won_jobs.insert(m[1]);
  }
  CHECK(won_jobs.size() == 2 * kRoom);
  // Every tick nobody won was skipped by both, before any claim (no claim record).
  for (const auto& job : jobs) {
    if (won_jobs.contains(job->job.name)) continue;
    CHECK(sim.Grep({" job=" + job->job.name + " ", "outcome=skipped", "reason=max_concurrent_runs",
                    "limit=4"})
              .size() == 2);
  }
  // One tick line per tick on each replica: won, lost or skipped.
  CHECK(sim.Grep({" tick ", " node=a "}).size() == 3 * kRoom);
  CHECK(sim.Grep({" tick ", " node=b "}).size() == 3 * kRoom);
  CHECK(sim.backend.completions().empty());
  CHECK(sim.Grep({" skip "}).empty());
}

TEST_CASE("max_concurrent_runs: a full replica's early claim is asked again at the instant") {
  Sim sim(WallAt(kT0, -1'000));
  sim.runner.plan = [](const jobs::ProcessSpec&) { return std::optional<int>(); };
  // concurrency allow: what holds minutely back is the room alone, not its own run.
  const auto allow = [](config::Job& j) { j.concurrency = config::Concurrency::kAllow; };
  sim.AddReplica("a", {EveryJob("hourly", 3600, allow), EveryJob("minutely", 60, allow)},
                 [](SchedulerOptions& o) {
                   o.max_concurrent_runs = 1;
                   o.claim_lead = milliseconds(200);
                   o.lease = std::chrono::minutes(10);
                 });
  // 14:00:00: both due, room for one.
  sim.Step(seconds(1), false);
  sim.WaitQuiet(false);
  REQUIRE(Eventually([&] { return sim.runner.starts() == 1; }));
  CHECK(sim.Grep({"tick=2026-11-21T14:00:00Z", "outcome=skipped"}).size() == 1);
  // 14:00:59.800: minutely's early claim finds no room: asked again at 14:01:00,
  // by when the first run has ended.
  sim.Step(milliseconds(59'800), false);
  sim.WaitQuiet(false);
  CHECK(sim.backend.claims().size() == 1);
  CHECK(sim.Grep({"tick=2026-11-21T14:01:00Z"}).empty());
  sim.runner.run(0)->FinishWithExit(0);
  REQUIRE(Eventually([&] { return sim.replica(0).active_runs() == 0; }));
  sim.Step(milliseconds(200), false);
  sim.WaitQuiet(false);
  CHECK(sim.Grep({"job=minutely", "tick=2026-11-21T14:01:00Z", "outcome=won"}).size() == 1);
  CHECK(sim.Grep({"tick=2026-11-21T14:01:00Z", "outcome=skipped"}).empty());
  REQUIRE(Eventually([&] { return sim.runner.starts() == 2; }));
}

TEST_CASE("reload: removed jobs stop, new ones start, unchanged ones keep their ticks") {
  Sim sim(WallAt(kT0, -1'000));
  Scheduler& s = sim.AddReplica("a", {EveryJob("keep", 60), EveryJob("drop", 60)});
  sim.Step(seconds(1));
  sim.WaitQuiet();
  s.Reload({EveryJob("keep", 60), EveryJob("new", 60)});
  CHECK(s.job_names() == std::vector<std::string>{"keep", "new"});
  sim.Step(seconds(60));
  sim.WaitQuiet();
  CHECK(sim.Grep({"tick=2026-11-21T14:01:00Z", "job=keep", "outcome=won"}).size() == 1);
  CHECK(sim.Grep({"tick=2026-11-21T14:01:00Z", "job=new", "outcome=won"}).size() == 1);
  CHECK(sim.Grep({"tick=2026-11-21T14:01:00Z", "job=drop"}).empty());
}

TEST_CASE("reload: a changed job keeps a tick that came but whose jittered run was not due") {
  auto jittered = [](const std::string& name, std::int64_t jitter_ms, const std::string& hash) {
    auto job = std::const_pointer_cast<ScheduledJob>(
        EveryJob(name, 60, [&](config::Job& j) { j.jitter = milliseconds(jitter_ms); }));
    job->config_hash = hash;
    return std::shared_ptr<const ScheduledJob>(job);
  };
  // A name whose offsets for tick kT0 leave room: over 2 s under both jitters.
  std::string name;
  for (int i = 0; i < 100 && name.empty(); ++i) {
    const std::string candidate = "late-" + std::to_string(i);
    if (jittered(candidate, 9'000, "")->DueMs(kT0) >= kT0 * 1000 + 2'000 &&
        jittered(candidate, 8'000, "")->DueMs(kT0) >= kT0 * 1000 + 2'000) {
      name = candidate;
    }
  }
  REQUIRE(!name.empty());
  Sim sim(WallAt(kT0, -1'000));
  Scheduler& s = sim.AddReplica("a", {jittered(name, 9'000, "hash-old")});
  sim.Step(seconds(1));  // T has come, its run is not due yet
  sim.WaitQuiet();
  CHECK(sim.backend.claims().empty());
  const auto changed = jittered(name, 8'000, "hash-new");
  s.Reload({changed});
  const std::int64_t due_ms = changed->DueMs(kT0);
  sim.Step(milliseconds(due_ms - 1 - kT0 * 1000));
  sim.WaitQuiet();
  CHECK(sim.backend.claims().empty());
  sim.Step(milliseconds(1));
  sim.WaitQuiet();
  const auto claims = sim.backend.claims();
  REQUIRE(claims.size() == 1);
  CHECK(claims[0].tick_unix == kT0);
  CHECK(claims[0].node_wall == WallTime(milliseconds(due_ms)));
}

}  // namespace
}  // namespace tickd::app::testing

TEST_CASE("owner tokens are 128 random bits in hex, a new one each time", "[scheduler]") {
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    const std::string token = tickd::app::NewOwnerToken();
    REQUIRE(token.size() == 32);
    CHECK(token.find_first_not_of("0123456789abcdef") == std::string::npos);
    seen.insert(token);
  }
  CHECK(seen.size() == 1000);
}

namespace tickd::app::testing {

// docs/design.md §2: with jitter, tick T is claimed (by every replica, T still the key)
// at its due instant T + offset, not before, and the offset changes from tick to tick.
TEST_CASE("jitter: every replica claims tick T at its due instant, one wins") {
  std::int64_t now_ms = kT0 * 1000 - 1'000;
  Sim sim{WallTime(milliseconds(now_ms))};
  auto jittered = [](const std::string& name) {
    return EveryJob(name, 60, [](config::Job& j) { j.jitter = milliseconds(9'000); });
  };
  const JobSet jobs = {jittered("spread-a"), jittered("spread-b")};
  for (const char* node : {"node-a", "node-b", "node-c"}) sim.AddReplica(node, jobs);

  struct Due {
    std::int64_t due_ms;
    std::string job;
    std::int64_t tick;
  };
  std::vector<Due> dues;
  std::set<std::int64_t> offsets;
  for (int k = 0; k < 5; ++k) {
    const std::int64_t tick = kT0 + 60 * k;
    for (const auto& job : jobs) {
      dues.push_back({job->DueMs(tick), job->job.name, tick});
      offsets.insert(job->DueMs(tick) - tick * 1000);
    }
  }
  std::sort(dues.begin(), dues.end(),
            [](const Due& a, const Due& b) { return a.due_ms < b.due_ms; });
  CHECK(offsets.size() >= 8);  // 10 hashed offsets in [0, 9 s): nearly all different
  for (std::int64_t off : offsets) CHECK((off >= 0 && off < 9'000));

  auto claims_of = [&](const Due& d) {
    std::vector<lock::ClaimRequest> out;
    for (const auto& c : sim.backend.claims()) {
      if (c.job == d.job && c.tick_unix == d.tick) out.push_back(c);
    }
    return out;
  };
  for (const Due& d : dues) {
    INFO(d.job << " tick " << d.tick << " due " << d.due_ms);
    if (d.due_ms - 1 > now_ms) {
      sim.Step(milliseconds(d.due_ms - 1 - now_ms));
      now_ms = d.due_ms - 1;
      sim.WaitQuiet();
      CHECK(claims_of(d).empty());  // not a millisecond early
    }
    sim.Step(milliseconds(d.due_ms - now_ms));
    now_ms = d.due_ms;
    sim.WaitQuiet();
    const auto claims = claims_of(d);
    REQUIRE(claims.size() == 3);
    for (const auto& c : claims) CHECK(c.node_wall == WallTime(milliseconds(d.due_ms)));
  }
  const auto won = sim.Grep({" info tick ", "outcome=won"});
  CHECK(won.size() == dues.size());
  std::set<std::string> won_ticks;
  for (const std::string& l : won) {
    std::smatch m;
    REQUIRE(std::regex_search(l, m, std::regex(" job=([^ ]+)")));
    won_ticks.insert(m[1].str() + "@" + TickOf(l));
  }
  CHECK(won_ticks.size() == dues.size());  // one winner per (job, T)
  // Each tick line says when the tick was due (docs/design.md §6).
  for (const Due& d : dues) {
    const auto lines = sim.Grep({" info tick ", "job=" + d.job + " ", "tick=" + FormatTick(d.tick),
                                 " due=" + FormatTimestamp(WallTime(milliseconds(d.due_ms)))});
    CHECK(lines.size() == 3);
  }
  CHECK(sim.Grep({"outcome=missed"}).empty());
}

}  // namespace tickd::app::testing
