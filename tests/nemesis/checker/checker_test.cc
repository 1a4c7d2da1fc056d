// The checker (checker.h) must pass a clean run and fail every planted violation.
#include "tests/nemesis/checker/checker.h"

#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <map>

namespace tickd::nemesis {
namespace {

namespace fs = std::filesystem;

constexpr std::int64_t kT0 = 1764000000;  // the first tick of the window
constexpr int kTicks = 10;
const std::vector<std::string> kNodes = {"n1", "n2", "n3"};

std::string Ts(std::int64_t ms) {
  const std::time_t s = ms / 1000;
  std::tm tm{};
  gmtime_r(&s, &tm);
  char buf[96];
  std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(ms % 1000));
  return buf;
}

std::string Tick(std::int64_t t) {
  std::string s = Ts(t * 1000);
  return s.substr(0, 19) + "Z";
}

// A cluster of three replicas and two @every 1s jobs, j1 forbid and j2 allow, written
// as the logs and journal a healthy run leaves: each tick won by one replica (the
// others lose to it), its write accepted 5 ms after T and held 300 ms.
struct Scenario {
  Scenario() {
    spec.window_start_ms = kT0 * 1000;
    spec.window_end_ms = (kT0 + kTicks) * 1000;
    spec.replicas = kNodes;
    spec.jobs = {JobSpec{"j1", 1, {}, 3000, true}, JobSpec{"j2", 1, {}, 3000, false}};
    std::uint64_t fence = 0;
    for (std::int64_t t = kT0; t < kT0 + kTicks; ++t) {
      for (const std::string job : {"j1", "j2"}) {
        const std::string winner = kNodes[static_cast<std::size_t>(t % 3)];
        ++fence;
        for (const std::string& node : kNodes) {
          if (node == winner) {
            Line(node, t * 1000 + 3,
                 "tick job=" + job + " tick=" + Tick(t) + " node=" + node +
                     " outcome=won fence=" + std::to_string(fence));
          } else {
            Line(node, t * 1000 + 4,
                 "tick job=" + job + " tick=" + Tick(t) + " node=" + node +
                     " outcome=lost winner=" + winner);
          }
        }
        Write(job, t, fence, winner, t * 1000 + 5, t * 1000 + 305);
        Line(winner, t * 1000 + 306,
             "run job=" + job + " tick=" + Tick(t) + " node=" + winner +
                 " outcome=done exit=0 duration=0.301s fence=" + std::to_string(fence));
      }
    }
  }

  void Line(const std::string& node, std::int64_t ms, const std::string& rest) {
    logs[node].push_back(Ts(ms) + " info " + rest);
  }
  Attempt& Write(const std::string& job, std::int64_t tick, std::uint64_t fence,
                 const std::string& replica, std::int64_t start, std::int64_t end,
                 bool accepted = true) {
    Attempt a;
    a.job = job;
    a.tick = tick;
    a.fence = fence;
    a.replica = replica;
    a.accepted = accepted;
    a.start_ms = start;
    a.end_ms = end;
    a.ended = accepted ? "end" : "rejected";
    a.seq = journal.size() + 1;
    a.where = "journal:" + std::to_string(a.seq);
    journal.push_back(a);
    return journal.back();
  }
  // Drops tick t of `job` from the journal and from every log.
  void Forget(const std::string& job, std::int64_t t) {
    std::erase_if(journal, [&](const Attempt& a) { return a.job == job && a.tick == t; });
    for (auto& [node, lines] : logs) {
      std::erase_if(lines, [&](const std::string& l) {
        return l.find(" job=" + job + " tick=" + Tick(t)) != std::string::npos;
      });
    }
  }
  Attempt& Find(const std::string& job, std::int64_t t) {
    for (Attempt& a : journal) {
      if (a.job == job && a.tick == t) return a;
    }
    FAIL("no attempt");
    return journal.front();
  }

  std::vector<LogEvent> Events() const {
    std::vector<LogEvent> out;
    for (const auto& [node, lines] : logs) {
      for (std::size_t i = 0; i < lines.size(); ++i) {
        std::optional<LogEvent> e = ParseLogEvent(lines[i]);
        REQUIRE(e);
        e->where = node + ".log:" + std::to_string(i + 1);
        out.push_back(*e);
      }
    }
    return out;
  }
  Report Run() const {
    Report r = Check(spec, journal, Events(), faults);
    INFO(r.ToText());
    return r;
  }

  CheckSpec spec;
  std::vector<Attempt> journal;
  std::map<std::string, std::vector<std::string>> logs;
  std::vector<FaultWindow> faults;
};

std::size_t CountOf(const Report& r, const std::string& check) {
  return static_cast<std::size_t>(
      std::count_if(r.violations.begin(), r.violations.end(),
                    [&](const Violation& v) { return v.check == check; }));
}

TEST_CASE("checker: a clean run passes with its counts", "[nemesis][checker]") {
  const Scenario s;
  const Report r = s.Run();
  INFO(r.ToText());
  CHECK(r.Passed());
  CHECK(r.violations.empty());
  CHECK(r.counts.ticks == 2 * kTicks);
  CHECK(r.counts.runs == 2 * kTicks);
  CHECK(r.counts.accepted == 2 * kTicks);
  CHECK(r.counts.missed == 0);
  CHECK(r.counts.duplicates == 0);
  CHECK(r.counts.stale_accepted == 0);
  CHECK(r.counts.lease_unchecked == 0);
  CHECK(r.counts.lateness_p99_ms == 5);
  CHECK(r.counts.injected == 0);
}

TEST_CASE("checker: a planted duplicate fails it", "[nemesis][checker]") {
  Scenario s;
  // A second replica writes tick 4 of j1 again, later, with a higher fence.
  s.Line("n3", (kT0 + 4) * 1000 + 400,
         "tick job=j1 tick=" + Tick(kT0 + 4) + " node=n3 outcome=won fence=500");
  s.Write("j1", kT0 + 4, 500, "n3", (kT0 + 4) * 1000 + 410, (kT0 + 4) * 1000 + 500);
  const Report r = s.Run();
  CHECK_FALSE(r.Passed());
  CHECK(r.counts.duplicates == 1);
  REQUIRE(CountOf(r, "duplicate") == 1);
  CHECK(r.violations[0].job == "j1");
  CHECK(r.violations[0].tick == kT0 + 4);
  CHECK(r.violations[0].evidence.find("fence=500") != std::string::npos);
  // A cell scoped after it neither counts nor reports it.
  s.spec.scope_start_ms = (kT0 + 6) * 1000;
  const Report later = s.Run();
  CHECK(later.Passed());
  CHECK(later.counts.accepted == 2 * (kTicks - 6));
}

TEST_CASE("checker: a planted stale fence fails it", "[nemesis][checker]") {
  Scenario s;
  // Tick 6 of j1 is accepted with a fence below tick 5's.
  const std::uint64_t fence5 = s.Find("j1", kT0 + 5).fence;
  s.Find("j1", kT0 + 6).fence = fence5 - 1;
  for (std::string& l : s.logs["n1"]) {  // its won line says the same fence
    if (l.find("tick=" + Tick(kT0 + 6)) != std::string::npos &&
        l.find("job=j1") != std::string::npos) {
      l = l.substr(0, l.rfind("fence=")) + "fence=" + std::to_string(fence5 - 1);
    }
  }
  const Report r = s.Run();
  CHECK_FALSE(r.Passed());
  CHECK(r.counts.fence_order_violations == 1);
  CHECK(r.counts.stale_accepted == 1);
  CHECK(r.counts.duplicates == 0);
  CHECK(CountOf(r, "fence-order") == 1);
  // A cell that starts at that write still sees it: the earlier fences are history.
  s.spec.scope_start_ms = (kT0 + 6) * 1000;
  CHECK(s.Run().counts.fence_order_violations == 1);
  s.spec.scope_start_ms = (kT0 + 7) * 1000;
  CHECK(s.Run().counts.fence_order_violations == 0);
}

TEST_CASE("checker: a write accepted after the holder's lease was lost fails it",
          "[nemesis][checker]") {
  Scenario s;
  Attempt& a = s.Find("j1", kT0 + 3);  // won by n1 at T+3 ms
  SECTION("after the logged lease loss") {
    s.Line("n1", (kT0 + 3) * 1000 + 100,
           "lease job=j1 tick=" + Tick(kT0 + 3) +
               " node=n1 outcome=lost action=terminate "
               "reason=\"the lease ran out\" fence=" +
               std::to_string(a.fence));
    s.Line("n1", (kT0 + 3) * 1000 + 110,
           "run job=j1 tick=" + Tick(kT0 + 3) +
               " node=n1 outcome=lease-lost duration=0.1s "
               "fence=" +
               std::to_string(a.fence));
    a.start_ms = (kT0 + 3) * 1000 + 200;
  }
  SECTION("a full lease after the claim, no loss logged (a paused replica)") {
    a.start_ms = (kT0 + 3) * 1000 + 3 + 3000 + 50;
    a.end_ms = a.start_ms + 10;
    s.spec.jobs[0].forbid = false;  // keep the overlap it makes out of this test
  }
  const Report r = s.Run();
  CHECK_FALSE(r.Passed());
  CHECK(r.counts.lease_violations == 1);
  CHECK(r.counts.stale_accepted == 1);
  CHECK(CountOf(r, "lease") == 1);

  // Under a clock fault on the holder, its log times say nothing: unchecked, not failed.
  s.faults.push_back(
      FaultWindow{"clock-step", "n1", kT0 * 1000, (kT0 + 9) * 1000, "replica-clock", true});
  const Report clock = s.Run();
  CHECK(clock.counts.lease_violations == 0);
  CHECK(clock.counts.lease_unchecked >= 1);
}

TEST_CASE("checker: overlapping runs fail a forbid job, not an allow job", "[nemesis][checker]") {
  Scenario s;
  s.Find("j1", kT0 + 2).end_ms = (kT0 + 3) * 1000 + 100;  // still open when tick 3 starts
  s.Find("j2", kT0 + 2).end_ms = (kT0 + 3) * 1000 + 100;
  const Report r = s.Run();
  CHECK_FALSE(r.Passed());
  CHECK(r.counts.overlaps == 1);
  REQUIRE(CountOf(r, "overlap") == 1);
  for (const Violation& v : r.violations) CHECK(v.job == "j1");
  // A frozen daemon (SIGSTOP) is no excuse: its lease guard ends the run by valid_until
  // (DESIGN §1 rule 2). Counted whichever replica was stopped.
  const std::string holder = s.Find("j1", kT0 + 2).replica;
  s.faults.push_back(FaultWindow{"replica-sigstop", holder, (kT0 + 2) * 1000,
                                 (kT0 + 4) * 1000, "replica-down", true});
  CHECK(s.Run().counts.overlaps == 1);
}

TEST_CASE("checker: a missed tick is explained by a fault or the replicas' lines, else fails",
          "[nemesis][checker]") {
  Scenario s;
  const std::int64_t t = kT0 + 5;  // won by n3 in the clean run
  s.Forget("j1", t);
  SECTION("no fault, no line: unexplained") {
    const Report r = s.Run();
    CHECK_FALSE(r.Passed());
    CHECK(r.counts.missed == 1);
    CHECK(r.counts.unexplained_missed == 1);
    CHECK(CountOf(r, "unexplained-missed") == 1);
  }
  SECTION("won and lost to it, but nothing reached the resource and no fault: unexplained") {
    s.Line("n3", t * 1000 + 3, "tick job=j1 tick=" + Tick(t) + " node=n3 outcome=won fence=999");
    s.Line("n1", t * 1000 + 4, "tick job=j1 tick=" + Tick(t) + " node=n1 outcome=lost winner=n3");
    s.Line("n2", t * 1000 + 4, "tick job=j1 tick=" + Tick(t) + " node=n2 outcome=error");
    const Report r = s.Run();
    CHECK(r.counts.unexplained_missed == 1);
    CHECK(r.violations.at(0).evidence.find("n3") != std::string::npos);
    // The same with the winner killed at that moment: explained.
    s.faults.push_back(
        FaultWindow{"kill-replica", "n3", t * 1000 + 4, t * 1000 + 2000, "replica-down", true});
    const Report killed = s.Run();
    CHECK(killed.Passed());
    CHECK(killed.counts.missed == 1);
    CHECK(killed.counts.unexplained_missed == 0);
    CHECK(killed.counts.injected == 1);
    // A fault on another replica explains nothing.
    s.faults.back().target = "n1";
    CHECK(s.Run().counts.unexplained_missed == 1);
    // Nor one that did not take effect.
    s.faults.back().target = "n3";
    s.faults.back().took_effect = false;
    CHECK(s.Run().counts.unexplained_missed == 1);
  }
  SECTION("inside a store-down window: explained") {
    for (const std::string& node : kNodes) {
      s.Line(
          node, t * 1000 + 500,
          "tick job=j1 tick=" + Tick(t) + " node=" + node + " outcome=error error=\"timed out\"");
    }
    s.faults.push_back(
        FaultWindow{"store-pause", "store", t * 1000 - 200, t * 1000 + 1500, "store-down", true});
    const Report r = s.Run();
    CHECK(r.Passed());
    CHECK(r.counts.missed == 1);
    CHECK(r.counts.unexplained_missed == 0);
    // The window long over by then: unexplained.
    s.faults.back().start_ms = t * 1000 - 60000;
    s.faults.back().end_ms = t * 1000 - 50000;
    s.logs["n2"].back() =
        Ts(t * 1000 + 4) + " info tick job=j1 tick=" + Tick(t) + " node=n2 outcome=won fence=999";
    CHECK(s.Run().counts.unexplained_missed == 1);
  }
  SECTION("every replica says error, missed or superseded: explained") {
    s.Line("n1", t * 1000 + 4, "tick job=j1 tick=" + Tick(t) + " node=n1 outcome=error");
    s.Line("n2", t * 1000 + 4, "tick job=j1 tick=" + Tick(t) + " node=n2 outcome=missed");
    s.Line("n3", t * 1000 + 4, "tick job=j1 tick=" + Tick(t) + " node=n3 outcome=superseded");
    CHECK(s.Run().Passed());
  }
  SECTION("a claim sent again after an error finds the first one standing: explained") {
    s.Line("n2", t * 1000 + 1004,
           "tick job=j1 tick=" + Tick(t) + " node=n2 outcome=lost winner=n2 reason=\"an earlier "
           "claim of this replica, whose answer was lost, won it\"");
    for (const std::string node : {"n1", "n3"}) {
      s.Line(node, t * 1000 + 4,
             "tick job=j1 tick=" + Tick(t) + " node=" + node + " outcome=lost winner=n2");
    }
    CHECK(s.Run().Passed());
    // Lost to another replica that then said nothing: unexplained.
    s.logs["n2"].back() = Ts(t * 1000 + 1004) + " info tick job=j1 tick=" + Tick(t) +
                          " node=n2 outcome=lost winner=n3";
    CHECK(s.Run().counts.unexplained_missed == 1);
  }
  SECTION("busy while the previous run still ran: explained (forbid at work)") {
    s.Find("j1", t - 1).end_ms = t * 1000 + 20;
    s.spec.overlap_tolerance_ms = 0;
    for (const std::string& node : kNodes) {
      s.Line(node, t * 1000 + 4,
             "tick job=j1 tick=" + Tick(t) + " node=" + node +
                 " outcome=busy holder=n2 holder_tick=" + Tick(t - 1));
    }
    CHECK(s.Run().Passed());
    // Busy with a holder whose run had ended long before: unexplained.
    s.Find("j1", t - 1).end_ms = (t - 1) * 1000 + 305;
    CHECK(s.Run().counts.unexplained_missed == 1);
  }
  SECTION(
      "a claim answered with an error stands unrun: its tick and the busy ones in its "
      "lease are explained") {
    // n2 won T-1 in the store, but its answer was an error (Redis ?wait: too few
    // replicas acknowledged): nobody runs T-1, and T is busy behind the claim's lease.
    s.Forget("j1", t - 1);
    s.Line("n2", (t - 1) * 1000 + 3,
           "tick job=j1 tick=" + Tick(t - 1) +
               " node=n2 outcome=error error=\"claim won, but only 0 of 2 replicas "
               "acknowledged it in time (?wait): not run\"");
    for (const std::string node : {"n1", "n3"}) {
      s.Line(node, (t - 1) * 1000 + 4,
             "tick job=j1 tick=" + Tick(t - 1) + " node=" + node + " outcome=lost winner=n2");
    }
    for (const std::string& node : kNodes) {
      s.Line(node, t * 1000 + 4,
             "tick job=j1 tick=" + Tick(t) + " node=" + node +
                 " outcome=busy holder=n2 holder_tick=" + Tick(t - 1));
    }
    const Report r = s.Run();
    CHECK(r.Passed());
    CHECK(r.counts.missed == 2);
    // A lease shorter than the gap: T is no longer behind it.
    s.spec.jobs[0].lease_ms = 500;
    CHECK(s.Run().counts.unexplained_missed == 1);
    // A winner that answered won (and ran nothing): T-1 is unexplained too.
    s.spec.jobs[0].lease_ms = 3000;
    for (std::string& line : s.logs["n2"]) {
      if (line.find("tick=" + Tick(t - 1)) != std::string::npos) {
        line = Ts((t - 1) * 1000 + 3) + " info tick job=j1 tick=" + Tick(t - 1) +
               " node=n2 outcome=won fence=999";
      }
    }
    CHECK(s.Run().counts.unexplained_missed == 2);
  }
}

TEST_CASE(
    "checker: a replica whose clock is ahead beginning a later tick early fails it: "
    "an early start, and the on-time run it fenced out is a miss",
    "[nemesis][checker]") {
  // n2's clock is 30 s ahead: it claims j2's tick T+30 early and begins its run at
  // once, with a fence above T's. n1 won T on time (j2 is `allow`, so T+30's claim was
  // not busy) and begins after it: the resource refuses n1's lower fence.
  Scenario s;
  const std::int64_t t = kT0 + kTicks - 1;  // the last tick: no later fence of j2 follows
  s.Write("j2", t + 30, 10'000, "n2", t * 1000 - 100, t * 1000 + 200);
  Attempt& refused = s.Find("j2", t);
  refused.accepted = false;
  refused.ended = "rejected";
  refused.last_fence = 10'000;
  refused.end_ms = refused.start_ms;
  refused.seq = s.journal.size() + 1;  // decided after n2's
  s.faults.push_back(FaultWindow{"clock-step-forward", "n2", t * 1000 - 2000, t * 1000 + 6000,
                                 "replica-clock", true});
  const Report r = s.Run();
  CHECK_FALSE(r.Passed());
  CHECK(r.counts.early_starts == 1);
  REQUIRE(CountOf(r, "early-start") == 1);
  CHECK(r.counts.missed == 1);
  CHECK(r.counts.unexplained_missed == 1);
}

TEST_CASE(
    "checker: a clock fault explains no more misses than a crash of its replica at "
    "its steps would",
    "[nemesis][checker]") {
  Scenario s;
  const std::int64_t t = kT0 + 5;  // won by n3 in the clean run; the others lose to it
  s.Forget("j1", t);
  s.Line("n3", t * 1000 + 3, "tick job=j1 tick=" + Tick(t) + " node=n3 outcome=won fence=999");
  for (const std::string node : {"n1", "n2"}) {
    s.Line(node, t * 1000 + 4,
           "tick job=j1 tick=" + Tick(t) + " node=" + node + " outcome=lost winner=n3");
  }
  // n3's clock stepped 1 h ahead just before T: a crash then would cost T too.
  s.faults.push_back(FaultWindow{"clock-step-forward", "n3", t * 1000 - 500, t * 1000 + 20'000,
                                 "replica-clock", true});
  CHECK(s.Run().Passed());
  // The step long before T, the step back long after: a crash at either would not
  // have cost T, so the clock must not either.
  s.faults.back().start_ms = t * 1000 - 15'000;
  const Report r = s.Run();
  CHECK_FALSE(r.Passed());
  CHECK(r.counts.unexplained_missed == 1);
  // The step back just after T: explained again.
  s.faults.back().end_ms = t * 1000 + 400;
  CHECK(s.Run().Passed());
  // Any other fault that spans T explains it (the interval rule).
  s.faults.back() = FaultWindow{"partition-both",   "n3", t * 1000 - 15'000, t * 1000 + 20'000,
                                "replica-isolated", true};
  CHECK(s.Run().Passed());
}

TEST_CASE(
    "checker: a run that writes after a later fence began, or after the store granted "
    "a later claim, fails it (late writes)",
    "[nemesis][checker]") {
  Scenario s;
  // j1's tick 3 (n1) keeps writing every 100 ms for 2 s: well past tick 4's start.
  Attempt& a = s.Find("j1", kT0 + 3);
  const std::int64_t next_start = s.Find("j1", kT0 + 4).start_ms;
  for (std::int64_t w = a.start_ms + 100; w < a.start_ms + 2000; w += 100) a.writes.push_back(w);
  a.end_ms = a.start_ms + 2000;
  s.spec.overlap_tolerance_ms = 10'000;  // this case is about late writes, not overlaps
  SECTION("after a later fence's first write") {
    std::size_t refused = 0;  // the resource refuses those after tick 4's start
    std::size_t after = 0;    // late from n2's won line of tick 4 (3 ms after T) on
    for (const std::int64_t w : a.writes) {
      refused += w > next_start ? 1 : 0;
      after += w > (kT0 + 4) * 1000 + 3 ? 1 : 0;
    }
    a.writes_refused = refused;
    const Report r = s.Run();
    CHECK_FALSE(r.Passed());
    CHECK(r.counts.late_writes == static_cast<std::int64_t>(after));
    REQUIRE(CountOf(r, "late-write") == 1);
    CHECK(r.violations.at(0).tick == kT0 + 3);
    // An allow job's runs may overlap: the same writes of j2 are not late.
    Attempt& b = s.Find("j2", kT0 + 3);
    b.writes = a.writes;
    a.writes.clear();
    CHECK(s.Run().counts.late_writes == 0);
  }
  SECTION("after the store granted a later tick, before its run began") {
    // Only writes before tick 4's start: still late, after n2's won line of tick 4.
    std::erase_if(a.writes, [&](std::int64_t w) { return w >= next_start; });
    a.writes.push_back(next_start - 1);
    const std::int64_t granted = next_start - 2;
    for (std::string& l : s.logs["n2"]) {  // n2 won tick 4 at T+3 ms: make it earlier
      if (l.find("tick=" + Tick(kT0 + 4)) != std::string::npos &&
          l.find("job=j1") != std::string::npos) {
        l = Ts(granted) + l.substr(l.find(' '));
      }
    }
    const Report r = s.Run();
    CHECK(r.counts.late_writes == 1);
    CHECK(r.violations.at(0).evidence.find("granted") != std::string::npos);
    // A frozen daemon is no excuse: its lease guard kills the run (DESIGN §1 rule 2).
    s.faults.push_back(
        FaultWindow{"replica-sigstop", "n1", granted - 1000, granted + 5000, "replica-down", true});
    CHECK(s.Run().counts.late_writes == 1);
    // The store's own word that the lease was over, read from its running claims:
    // writes after it are late too, however early.
    s.faults.clear();
    const std::vector<LeaseExpiry> expired = {
        LeaseExpiry{"j1", kT0 + 3, a.fence, "n1", a.start_ms + 250, "store_leases.jsonl:1"}};
    const Report store = Check(s.spec, s.journal, s.Events(), s.faults, expired);
    CHECK(store.counts.late_writes == static_cast<std::int64_t>(a.writes.size()) - 2);
    CHECK(store.violations.at(0).evidence.find("store_leases.jsonl:1") != std::string::npos);
    // Another fence's expiry says nothing of this run.
    const std::vector<LeaseExpiry> other = {
        LeaseExpiry{"j1", kT0 + 3, a.fence + 1, "n1", a.start_ms + 250, "store_leases.jsonl:1"}};
    CHECK(Check(s.spec, s.journal, s.Events(), s.faults, other).counts.late_writes == 1);
    // The won line of a replica whose clock was faked is not read.
    s.faults.push_back(
        FaultWindow{"clock-step-back", "n2", kT0 * 1000, kT0 * 1000 + 1, "replica-clock", true});
    CHECK(s.Run().counts.late_writes == 0);
  }
}

TEST_CASE("checker: a run that begins before its tick fails it (early start)",
          "[nemesis][checker]") {
  Scenario s;
  s.Find("j2", kT0 + 6).start_ms = (kT0 + 6) * 1000 - 1;
  const Report r = s.Run();
  CHECK_FALSE(r.Passed());
  CHECK(r.counts.early_starts == 1);
  REQUIRE(CountOf(r, "early-start") == 1);
  CHECK(r.violations.at(0).evidence.find("1 ms before") != std::string::npos);
  // Within the clock tolerance, from a replica whose clock was faked: not early.
  s.spec.clock_tolerance_ms = 250;
  s.faults.push_back(
      FaultWindow{"clock-drift", "n3", kT0 * 1000, kT0 * 1000 + 9000, "replica-clock", true});
  CHECK(s.Run().counts.early_starts == 1);  // the writer n1's clock was right: still early
  s.faults.back().target = "n1";
  CHECK(s.Run().Passed());
  s.Find("j2", kT0 + 6).start_ms = (kT0 + 6) * 1000 - 251;
  CHECK(s.Run().counts.early_starts == 1);
}

TEST_CASE("checker: reads DESIGN §6 lines as tickd writes them", "[nemesis][checker]") {
  const auto won = ParseLogEvent(
      "2026-11-25T06:20:16.734Z info tick job=j1 tick=2026-11-25T06:20:16Z node=n3 "
      "outcome=won fence=1");
  REQUIRE(won);
  CHECK(won->event == "tick");
  CHECK(won->ts_ms == 1795587616734);
  CHECK(won->tick == 1795587616);
  CHECK(won->node == "n3");
  CHECK(won->outcome == "won");
  CHECK(won->fence == 1u);
  const auto busy = ParseLogEvent(
      "2026-11-25T06:20:17.005Z info tick job=j1 tick=2026-11-25T06:20:17Z node=n2 "
      "outcome=busy holder=n3 holder_tick=2026-11-25T06:20:16Z");
  REQUIRE(busy);
  CHECK(busy->holder == "n3");
  CHECK(busy->holder_tick == 1795587616);
  const auto lease = ParseLogEvent(
      "2026-11-25T06:20:17.500Z warn lease job=j1 tick=2026-11-25T06:20:16Z node=n2 "
      "outcome=lost action=terminate reason=\"the lease ran out without a confirmed renewal\" "
      "fence=7");
  REQUIRE(lease);
  CHECK(lease->fence == 7u);
  CHECK(lease->outcome == "lost");
  CHECK_FALSE(ParseLogEvent("2026-11-25T06:20:16.000Z info start node=n1 jobs=2"));
  CHECK_FALSE(ParseLogEvent("hello from a job"));
  CHECK_FALSE(ParseLogEvent("2026-11-25T06:20:16.000Z info tick job=j1 tick=yesterday"));
  CHECK(ParseUtcMs("1970-01-01T00:00:01Z") == 1000);
  CHECK(ParseUtcMs("2026-11-21T14:00:00.5Z") == 1795269600500);
  CHECK_FALSE(ParseUtcMs("2026-02-30T14:00:00Z"));
}

struct Files {
  Files() {
    std::string tmpl = (fs::temp_directory_path() / "nemesis-check-XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    dir = tmpl;
  }
  ~Files() { fs::remove_all(dir); }
  fs::path Write(const std::string& name, const std::string& text) {
    std::ofstream(dir / name) << text;
    return dir / name;
  }
  fs::path dir;
};

std::string JournalLine(const Attempt& a) {
  return "{\"job\":\"" + a.job + "\",\"tick\":" + std::to_string(a.tick) +
         ",\"fence\":" + std::to_string(a.fence) + ",\"replica\":\"" + a.replica +
         "\",\"accepted\":" + (a.accepted ? "true" : "false") +
         ",\"last_fence\":null,\"start_ms\":" + std::to_string(a.start_ms) +
         ",\"end_ms\":" + std::to_string(a.end_ms) + ",\"ended\":\"" + a.ended +
         "\",\"seq\":" + std::to_string(a.seq) + "}\n";
}

int RunCheck(const std::string& args) {
  const int status =
      std::system((std::string(NEMESIS_CHECK) + " " + args + " >/dev/null 2>&1").c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST_CASE("nemesis_check: files in, exit 0 pass / 1 fail / 2 bad input", "[nemesis][checker]") {
  Scenario s;
  Files f;
  std::string journal;
  for (const Attempt& a : s.journal) journal += JournalLine(a);
  std::string args =
      "--spec " + f.Write("spec.json", "{\"window\":{\"start_ms\":" + std::to_string(kT0 * 1000) +
                                           ",\"end_ms\":" + std::to_string((kT0 + kTicks) * 1000) +
                                           "},\"replicas\":[\"n1\",\"n2\",\"n3\"],\"jobs\":["
                                           "{\"name\":\"j1\",\"every_s\":1,\"lease_ms\":3000},"
                                           "{\"name\":\"j2\",\"every_s\":1,\"lease_ms\":3000,"
                                           "\"concurrency\":\"allow\"}]}")
                      .string();
  for (const auto& [node, lines] : s.logs) {
    std::string text = "2026-11-21T14:00:00.000Z info start node=" + node + "\nsome job output\n";
    for (const std::string& l : lines) text += l + "\n";
    args += " --log " + f.Write(node + ".log", text).string();
  }
  args += " --faults " + f.Write("faults.jsonl",
                                 "{\"fault\":\"none\",\"target\":\"\",\"start_ms\":1,\"end_ms\":2,"
                                 "\"effect\":\"none\",\"took_effect\":false}\n")
                             .string();
  const fs::path out = f.dir / "report.json";
  CHECK(RunCheck(args + " --journal " +
                 f.Write("j.jsonl", journal + "{\"job\":\"j1\",\"ti").string() + " --json " +
                 out.string()) == 0);
  std::ifstream report(out);
  const std::string text((std::istreambuf_iterator<char>(report)),
                         std::istreambuf_iterator<char>());
  CHECK(text.find("\"passed\":true") != std::string::npos);
  CHECK(text.find("\"ticks\":20") != std::string::npos);

  Attempt dup = s.journal.front();
  dup.fence = 900;
  dup.seq = 900;
  dup.replica = "n2";
  CHECK(RunCheck(args + " --journal " +
                 f.Write("dup.jsonl", journal + JournalLine(dup)).string()) == 1);
  CHECK(RunCheck(args + " --journal " + f.Write("bad.jsonl", "not json\n" + journal).string()) ==
        2);
  CHECK(RunCheck("--journal " + (f.dir / "j.jsonl").string()) == 2);  // no --spec
}

}  // namespace
}  // namespace tickd::nemesis
