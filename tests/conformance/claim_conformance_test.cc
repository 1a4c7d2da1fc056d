// The claim contract of docs/design.md §1, checked identically against every backend in
// harnesses.h. Each case builds its own Harness, i.e. its own empty store.
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "lock/registry.h"
#include "tests/conformance/harnesses.h"
#include "tests/support/claims.h"

using namespace std::chrono_literals;
using tickd::Clock;
using tickd::Result;
using tickd::WallTime;
using namespace tickd::lock;
using tickd::conformance::AllHarnesses;
using tickd::conformance::Harness;
using tickd::testing::HeldOf;
using tickd::testing::MustClaim;

namespace {

bool Skipped(const Harness& h) {
  const std::string why = h.unavailable();
  if (!why.empty()) WARN("backend not available, conformance cases skipped: " << why);
  return !why.empty();
}

std::int64_t NowUnix(Clock& clock) {
  return std::chrono::duration_cast<std::chrono::seconds>(clock.Wall().time_since_epoch()).count();
}

// A 30 s lease, a config hash per node, and the harness's wall clock.
ClaimRequest Req(Harness& h, std::string job, std::int64_t tick, std::string node,
                 std::string token) {
  ClaimRequest req = tickd::testing::Req(std::move(job), tick, std::move(node), std::move(token));
  req.lease = 30s;
  req.config_hash = "hash-" + req.node;
  req.node_wall = h.clock().Wall();
  return req;
}

const char* Name(ClaimStatus s) { return ClaimStatusName(s).data(); }

// A claim that must be won, and what its holder renews, refences and completes with.
struct Won {
  ClaimOutcome outcome;
  HeldClaim held;
};
Won MustWin(Backend& b, const ClaimRequest& req) {
  const ClaimOutcome won = MustClaim(b, req);
  REQUIRE(won.status == ClaimStatus::kWon);
  return {won, HeldOf(req, won)};
}

// Wins `tick` of `job` on `b` for node-a, however long ago the tick was (no starting
// deadline) and beside other running ticks of the job (allow).
HeldClaim WinLate(Harness& h, Backend& b, const std::string& job, std::int64_t tick,
                  const std::string& token) {
  auto req = Req(h, job, tick, "node-a", token);
  req.starting_deadline = std::nullopt;
  req.forbid_overlap = false;
  return MustWin(b, req).held;
}

// The expiry cases: a claim of `tick` for `node` with the harness's short lease and
// recover set, both for the holder that stops renewing and for the replica that takes
// the tick over once that lease expired.
ClaimRequest ShortRecoverReq(Harness& h, std::string job, std::int64_t tick, std::string node,
                             std::string token) {
  ClaimRequest req = Req(h, std::move(job), tick, std::move(node), std::move(token));
  req.lease = h.short_lease();
  req.recover = true;
  return req;
}

// Lets a short lease whose holder stopped renewing expire (twice its length passes).
void LetShortLeaseExpire(Harness& h) { h.Elapse(h.short_lease() * 2); }

}  // namespace

TEMPLATE_LIST_TEST_CASE("conformance: one winner among concurrent claimers on many threads",
                        "[conformance]", AllHarnesses) {
  TestType h;
  if (Skipped(h)) return;
  constexpr int kReplicas = 6;
  constexpr int kTicks = 5;
  const std::int64_t t0 = NowUnix(h.clock());
  std::vector<std::unique_ptr<Backend>> replicas;
  for (int i = 0; i < kReplicas; ++i) replicas.push_back(h.OpenReplica());

  // outcomes[tick][replica]; claims use allow so that the ticks do not make each other busy.
  std::vector<std::vector<Result<ClaimOutcome>>> outcomes(
      kTicks, std::vector<Result<ClaimOutcome>>(kReplicas, ClaimOutcome{}));
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int r = 0; r < kReplicas; ++r) {
    threads.emplace_back([&, r] {
      while (!go.load()) std::this_thread::yield();
      for (int t = 0; t < kTicks; ++t) {
        auto req = Req(h, "race", t0 + t, "node-" + std::to_string(r),
                       "tok-" + std::to_string(r) + "-" + std::to_string(t));
        req.forbid_overlap = false;
        outcomes[t][r] = replicas[r]->Claim(req);
      }
    });
  }
  go = true;
  for (auto& th : threads) th.join();

  for (int t = 0; t < kTicks; ++t) {
    int winners = 0;
    std::string winner;
    for (int r = 0; r < kReplicas; ++r) {
      REQUIRE(outcomes[t][r]);
      const ClaimOutcome& o = *outcomes[t][r];
      CHECK((o.status == ClaimStatus::kWon || o.status == ClaimStatus::kLost));
      if (o.status == ClaimStatus::kWon) {
        ++winners;
        winner = "node-" + std::to_string(r);
      }
    }
    REQUIRE(winners == 1);
    for (int r = 0; r < kReplicas; ++r) {
      if (outcomes[t][r]->status == ClaimStatus::kLost) {
        CHECK(outcomes[t][r]->holder_node == winner);  // lost names the winner
        CHECK(outcomes[t][r]->holder_config_hash == "hash-" + winner);
      }
    }
  }
}

TEMPLATE_LIST_TEST_CASE(
    "conformance: three replicas race one batch of 300 ticks each, in their own orders: one "
    "winner per tick, and the wins complete in one batch",
    "[conformance]", AllHarnesses) {
  TestType h;
  if (Skipped(h)) return;
  constexpr int kReplicas = 3;
  constexpr int kJobs = 300;  // more than one chunk on etcd (120) and ZooKeeper (250)
  const std::int64_t tick = NowUnix(h.clock());
  std::vector<std::unique_ptr<Backend>> replicas;
  std::vector<std::vector<ClaimRequest>> reqs(kReplicas);
  for (int r = 0; r < kReplicas; ++r) {
    replicas.push_back(h.OpenReplica());
    for (int j = 0; j < kJobs; ++j) {
      const int job = (j + r * kJobs / kReplicas) % kJobs;  // each its own slice first
      auto req = Req(h, "batch-" + std::to_string(job), tick, "node-" + std::to_string(r),
                     "tok-" + std::to_string(r) + "-" + std::to_string(job));
      req.forbid_overlap = false;
      reqs[r].push_back(req);
    }
  }
  std::vector<std::vector<Result<ClaimOutcome>>> outs(kReplicas);
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int r = 0; r < kReplicas; ++r) {
    threads.emplace_back([&, r] {
      while (!go.load()) std::this_thread::yield();
      outs[r] = replicas[r]->ClaimBatch(reqs[r]);
    });
  }
  go = true;
  for (auto& th : threads) th.join();
  std::map<std::string, int> winners;
  for (int r = 0; r < kReplicas; ++r) {
    REQUIRE(outs[r].size() == reqs[r].size());
    std::vector<CompleteRequest> completes;
    for (std::size_t i = 0; i < outs[r].size(); ++i) {
      REQUIRE(outs[r][i]);
      if (outs[r][i]->status == ClaimStatus::kWon) {
        ++winners[reqs[r][i].job];
        completes.push_back({HeldOf(reqs[r][i], *outs[r][i]), Completion{"done", 0, 1ms}});
      } else {
        CHECK(Name(outs[r][i]->status) == std::string("lost"));
      }
    }
    for (const auto& done : replicas[r]->CompleteBatch(completes)) {
      REQUIRE(done);
      CHECK(*done == CompleteStatus::kCompleted);
    }
  }
  CHECK(winners.size() == static_cast<std::size_t>(kJobs));
  for (const auto& [job, count] : winners) CHECK(count == 1);
  const ClaimOutcome again = MustClaim(*replicas[0], Req(h, "batch-7", tick, "node-0", "tok-x"));
  CHECK(again.status == ClaimStatus::kLost);
  CHECK_FALSE(again.holder_running);
}

TEMPLATE_LIST_TEST_CASE("conformance: one winner among concurrent claimers in several processes",
                        "[conformance]", AllHarnesses) {
  TestType h;
  if (Skipped(h) || !h.forkable()) return;
  constexpr int kChildren = 5;
  const std::int64_t tick = NowUnix(h.clock());
  int start[2];
  REQUIRE(::pipe(start) == 0);
  std::vector<pid_t> children;
  for (int i = 0; i < kChildren; ++i) {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      // Child: open its own replica, wait for the start signal (the pipe closing), claim,
      // and report the status as the exit code (4 = error). Never returns to Catch.
      ::close(start[1]);
      int code = 4;
      try {
        auto replica = h.OpenReplica();
        char byte;
        while (::read(start[0], &byte, 1) > 0) {
        }
        auto out = replica->Claim(Req(h, "proc-race", tick, "child-" + std::to_string(i),
                                      "child-tok-" + std::to_string(i)));
        if (out) code = static_cast<int>(out->status);
      } catch (...) {
      }
      ::_exit(code);
    }
    children.push_back(pid);
  }
  ::close(start[0]);
  std::this_thread::sleep_for(200ms);  // let the children open their replicas
  ::close(start[1]);
  std::map<int, int> by_status;
  for (pid_t pid : children) {
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    REQUIRE(WIFEXITED(status));
    ++by_status[WEXITSTATUS(status)];
  }
  CHECK(by_status[static_cast<int>(ClaimStatus::kWon)] == 1);
  CHECK(by_status[static_cast<int>(ClaimStatus::kLost)] == kChildren - 1);
  CHECK(by_status[4] == 0);

  auto parent = h.OpenReplica();
  const ClaimOutcome late = MustClaim(*parent, Req(h, "proc-race", tick, "parent", "parent-tok"));
  CHECK(late.status == ClaimStatus::kLost);
  CHECK(late.holder_node.rfind("child-", 0) == 0);
}

TEMPLATE_LIST_TEST_CASE("conformance: a done tick is never claimed again", "[conformance]",
                        AllHarnesses) {
  TestType h;
  if (Skipped(h)) return;
  auto a = h.OpenReplica();
  auto b = h.OpenReplica();
  const std::int64_t tick = NowUnix(h.clock());
  const Won won = MustWin(*a, Req(h, "once", tick, "node-a", "tok-a"));
  REQUIRE(*a->Complete(won.held, Completion{"done", 0, 10ms}) ==
          CompleteStatus::kCompleted);

  // A lagging replica arriving after the run finished, even one allowed to recover.
  auto late = Req(h, "once", tick, "node-b", "tok-b");
  late.recover = true;
  const ClaimOutcome lost = MustClaim(*b, late);
  CHECK(lost.status == ClaimStatus::kLost);
  CHECK(lost.holder_node == "node-a");
  CHECK(lost.holder_tick_unix == tick);
  LetShortLeaseExpire(h);
  CHECK(MustClaim(*b, late).status == ClaimStatus::kLost);
  CHECK(MustClaim(*a, Req(h, "once", tick, "node-a", "tok-a2")).status == ClaimStatus::kLost);
}

// The run supervisor sends a complete again when the store did not answer it
// (docs/design.md §1 rule 4), also when the first one had landed: the second changes
// nothing and is not taken for someone else's claim.
TEMPLATE_LIST_TEST_CASE("conformance: a complete sent again by its holder answers completed",
                        "[conformance]", AllHarnesses) {
  TestType h;
  if (Skipped(h)) return;
  auto a = h.OpenReplica();
  const std::int64_t tick = NowUnix(h.clock());
  const Won won = MustWin(*a, Req(h, "twice", tick, "node-a", "tok-a"));
  REQUIRE(*a->Complete(won.held, Completion{"done", 0, 10ms}) == CompleteStatus::kCompleted);
  auto again = a->Complete(won.held, Completion{"done", 0, 10ms});
  REQUIRE(again);
  CHECK(*again == CompleteStatus::kCompleted);
  auto history = a->History("twice", 1);
  REQUIRE(history);
  REQUIRE(history->size() == 1);
  CHECK((*history)[0].state == "done");
  CHECK((*history)[0].run_outcome == "done");
}

TEMPLATE_LIST_TEST_CASE("conformance: a lost answer says whether the tick still runs",
                        "[conformance]", AllHarnesses) {
  TestType h;
  if (Skipped(h)) return;
  auto a = h.OpenReplica();
  auto b = h.OpenReplica();
  const std::int64_t tick = NowUnix(h.clock());
  const auto req = Req(h, "state", tick, "node-a", "tok-a");
  const ClaimOutcome won = MustClaim(*a, req);
  REQUIRE(won.status == ClaimStatus::kWon);
  const ClaimOutcome while_running = MustClaim(*b, Req(h, "state", tick, "node-b", "tok-b"));
  CHECK(while_running.status == ClaimStatus::kLost);
  CHECK(while_running.holder_running);
  REQUIRE(*a->Complete(HeldOf(req, won), Completion{"done", 0, 10ms}) ==
          CompleteStatus::kCompleted);
  const ClaimOutcome after_done = MustClaim(*b, Req(h, "state", tick, "node-b", "tok-b2"));
  CHECK(after_done.status == ClaimStatus::kLost);
  CHECK(after_done.holder_node == "node-a");
  CHECK_FALSE(after_done.holder_running);
}

TEMPLATE_LIST_TEST_CASE("conformance: busy under forbid while an earlier tick runs, not with allow",
                        "[conformance]", AllHarnesses) {
  TestType h;
  if (Skipped(h)) return;
  auto a = h.OpenReplica();
  auto b = h.OpenReplica();
  const std::int64_t t1 = NowUnix(h.clock());
  const auto first = Req(h, "overlap", t1, "node-a", "tok-1");
  const ClaimOutcome won1 = MustClaim(*a, first);
  REQUIRE(won1.status == ClaimStatus::kWon);

  const ClaimOutcome busy = MustClaim(*b, Req(h, "overlap", t1 + 1, "node-b", "tok-2"));
  CHECK(busy.status == ClaimStatus::kBusy);
  CHECK(busy.holder_node == "node-a");
  CHECK(busy.holder_tick_unix == t1);

  auto allow = Req(h, "overlap", t1 + 2, "node-b", "tok-3");
  allow.forbid_overlap = false;
  const ClaimOutcome won3 = MustClaim(*b, allow);
  CHECK(won3.status == ClaimStatus::kWon);
  CHECK(won3.fence > won1.fence);

  // Once both runs are over, forbid lets the next tick start.
  REQUIRE(*a->Complete(HeldOf(first, won1), Completion{"done", 0, 1ms}) ==
          CompleteStatus::kCompleted);
  REQUIRE(*b->Complete(HeldOf(allow, won3), Completion{"failed", 3, 1ms}) ==
          CompleteStatus::kCompleted);
  CHECK(MustClaim(*b, Req(h, "overlap", t1 + 3, "node-b", "tok-4")).status == ClaimStatus::kWon);
}

TEMPLATE_LIST_TEST_CASE("conformance: a tick past its starting deadline is missed", "[conformance]",
                        AllHarnesses) {
  TestType h;
  if (Skipped(h)) return;
  auto a = h.OpenReplica();
  const std::int64_t now = NowUnix(h.clock());
  auto old = Req(h, "late", now - 120, "node-a", "tok-1");
  old.starting_deadline = 60s;
  CHECK(std::string(Name(MustClaim(*a, old).status)) == "missed");
  // No deadline (misfire: run-once catching up): an old tick can still start.
  auto catch_up = Req(h, "late", now - 100, "node-a", "tok-3");
  catch_up.starting_deadline = std::nullopt;
  catch_up.forbid_overlap = false;
  CHECK(MustClaim(*a, catch_up).status == ClaimStatus::kWon);
  auto recent = Req(h, "late", now - 30, "node-a", "tok-2");
  recent.starting_deadline = 60s;
  recent.forbid_overlap = false;
  CHECK(MustClaim(*a, recent).status == ClaimStatus::kWon);
}

// on_miss (docs/backends.md "Reserved keys", app/notifier.h ClaimMissNotice): a replica
// that found a tick missed by its own reckoning asks with a zero starting deadline, and
// then every replica that saw it missed claims it under "!miss:<job>"; one sends.
TEMPLATE_LIST_TEST_CASE(
    "conformance: who sends a miss: a zero deadline tells a tick nobody claimed from one "
    "somebody ran, and the reserved !miss: key has one winner",
    "[conformance]", AllHarnesses) {
  TestType h;
  if (Skipped(h)) return;
  auto a = h.OpenReplica();
  auto b = h.OpenReplica();
  const std::int64_t now = NowUnix(h.clock());
  auto ran = Req(h, "nightly", now - 20, "node-a", "tok-ran");
  ran.starting_deadline = std::nullopt;
  ran.forbid_overlap = false;
  REQUIRE(MustClaim(*a, ran).status == ClaimStatus::kWon);

  auto probe = [&](std::int64_t tick, const std::string& token) {
    ClaimRequest req = Req(h, "nightly", tick, "node-b", token);
    req.starting_deadline = 0ms;
    req.forbid_overlap = false;
    return std::string(Name(MustClaim(*b, req).status));
  };
  CHECK(probe(now - 20, "tok-p1") == "lost");    // it ran: no notification
  CHECK(probe(now - 10, "tok-p2") == "missed");  // nobody claimed it
  CHECK(probe(now - 10, "tok-p3") == "missed");  // and the probe wrote nothing

  int won = 0;
  int n = 0;
  for (auto* replica : {a.get(), b.get(), a.get()}) {
    ClaimRequest notice =
        Req(h, "!miss:nightly", now - 10, "node-x", "tok-n" + std::to_string(++n));
    notice.starting_deadline = std::nullopt;
    notice.forbid_overlap = false;
    notice.node_wall = h.clock().Wall();
    const ClaimOutcome o = MustClaim(*replica, notice);
    if (o.status == ClaimStatus::kWon) {
      ++won;
      CHECK(*replica->Complete(HeldOf(notice, o), Completion{"done", std::nullopt, 0ms}) ==
            CompleteStatus::kCompleted);
    } else {
      CHECK(o.status == ClaimStatus::kLost);
    }
  }
  CHECK(won == 1);
  // The notice is no record of the job's own tick: the job's history does not show it.
  auto history = a->History("nightly", 10);
  REQUIRE(history);
  for (const TickHistory& t : *history) CHECK(t.tick_unix == now - 20);
}

TEMPLATE_LIST_TEST_CASE(
    "conformance: claims are monotonic per job: an earlier tick is superseded "
    "once a later one was claimed",
    "[conformance]", AllHarnesses) {
  TestType h;
  if (Skipped(h)) return;
  auto a = h.OpenReplica();
  auto b = h.OpenReplica();
  const std::int64_t t2 = NowUnix(h.clock());
  auto later = Req(h, "mono", t2, "node-a", "tok-a");
  later.forbid_overlap = false;
  const ClaimOutcome won = MustClaim(*a, later);
  REQUIRE(won.status == ClaimStatus::kWon);

  // A lagging replica claims the earlier tick: refused, naming the later one and its node,
  // while the later tick runs and after it is done, with or without a deadline.
  auto lagging = Req(h, "mono", t2 - 1, "node-b", "tok-b1");
  lagging.forbid_overlap = false;
  lagging.recover = true;
  lagging.observe = true;
  ClaimOutcome out = MustClaim(*b, lagging);
  CHECK(std::string(Name(out.status)) == "superseded");
  CHECK(out.holder_tick_unix == t2);
  CHECK(out.holder_node == "node-a");
  REQUIRE(*a->Complete(HeldOf(later, won), Completion{"done", 0, 1ms}) ==
          CompleteStatus::kCompleted);
  auto old = Req(h, "mono", t2 - 3600, "node-b", "tok-b2");
  old.starting_deadline = std::nullopt;  // misfire: run-once
  out = MustClaim(*b, old);
  CHECK(out.status == ClaimStatus::kSuperseded);
  CHECK(out.holder_tick_unix == t2);
  // Past its deadline too: superseded says more than missed.
  auto late = Req(h, "mono", t2 - 3600, "node-b", "tok-b3");
  late.starting_deadline = 60s;
  CHECK(MustClaim(*b, late).status == ClaimStatus::kSuperseded);

  // The same tick is still lost (naming its winner), later ticks and other jobs are free.
  const ClaimOutcome same = MustClaim(*b, Req(h, "mono", t2, "node-b", "tok-b4"));
  CHECK(same.status == ClaimStatus::kLost);
  CHECK(same.holder_node == "node-a");
  CHECK(MustClaim(*b, Req(h, "mono", t2 + 1, "node-b", "tok-b5")).status == ClaimStatus::kWon);
  CHECK(MustClaim(*b, Req(h, "mono-other", t2 - 1, "node-b", "tok-b6")).status ==
        ClaimStatus::kWon);
  // Now t2 + 1 is the latest claimed tick.
  out = MustClaim(*a, Req(h, "mono", t2 - 2, "node-a", "tok-a2"));
  CHECK(out.status == ClaimStatus::kSuperseded);
  CHECK(out.holder_tick_unix == t2 + 1);

  // A refused claim wrote no record: the earlier tick has none in the history; the
  // replica's observation says superseded when the claim recorded it.
  auto history = a->History("mono", 10);
  REQUIRE(history);
  for (const TickHistory& t : *history) {
    CHECK(t.tick_unix != t2 - 2);
    if (t.tick_unix == t2 - 1) {
      CHECK(t.winner.empty());
      CHECK(t.state.empty());
      for (const Observation& o : t.observations) CHECK(o.outcome == "superseded");
    }
  }
}

// A replica's view of a job (its head as last seen: ZooKeeper and etcd claim without a
// read on it) goes stale when another replica claims: its next claims must still be
// judged on the store as it is.
TEMPLATE_LIST_TEST_CASE(
    "conformance: a claim after another replica moved the job's head is judged on the "
    "store: superseded, won above the other's fence, busy under forbid",
    "[conformance]", AllHarnesses) {
  TestType h;
  if (Skipped(h)) return;
  auto a = h.OpenReplica();
  auto b = h.OpenReplica();
  const std::int64_t t0 = NowUnix(h.clock());
  auto claim = [&](Backend& r, const std::string& job, std::int64_t tick, const std::string& node,
                   const std::string& token, bool forbid) {
    auto req = Req(h, job, tick, node, token);
    req.forbid_overlap = forbid;
    req.observe = true;
    return std::pair{req, MustClaim(r, req)};
  };
  // a saw its own claim of t0 (twice, so its view is warm); b then claims t0 + 2.
  REQUIRE(claim(*a, "stale", t0 - 1, "node-a", "tok-a0", false).second.status ==
          ClaimStatus::kWon);
  REQUIRE(claim(*a, "stale", t0, "node-a", "tok-a1", false).second.status == ClaimStatus::kWon);
  const auto [b_req, b_won] = claim(*b, "stale", t0 + 2, "node-b", "tok-b1", false);
  REQUIRE(b_won.status == ClaimStatus::kWon);
  ClaimOutcome out = claim(*a, "stale", t0 + 1, "node-a", "tok-a2", false).second;
  CHECK(std::string(Name(out.status)) == "superseded");
  CHECK(out.holder_tick_unix == t0 + 2);
  CHECK(out.holder_node == "node-b");
  out = claim(*a, "stale", t0 + 3, "node-a", "tok-a3", false).second;
  REQUIRE(out.status == ClaimStatus::kWon);
  CHECK(out.fence > b_won.fence);
  std::size_t observed = out.observed ? 1 : 0;  // backends that observe in the claim
  // b's view is stale now: the tick a won is lost, naming a.
  out = claim(*b, "stale", t0 + 3, "node-b", "tok-b2", false).second;
  CHECK(out.status == ClaimStatus::kLost);
  CHECK(out.holder_node == "node-a");
  observed += out.observed ? 1 : 0;
  auto history = b->History("stale", 1);
  REQUIRE(history);
  REQUIRE(history->size() == 1);
  CHECK(history->front().winner == "node-a");
  CHECK(history->front().observations.size() == observed);

  // forbid: a's earlier run ended, b's later one runs: a's next tick is busy.
  const auto [a_req, a_won] = claim(*a, "stale-forbid", t0, "node-a", "tok-fa1", true);
  REQUIRE(a_won.status == ClaimStatus::kWon);
  REQUIRE(*a->Complete(HeldOf(a_req, a_won), Completion{"done", 0, 1ms}) ==
          CompleteStatus::kCompleted);
  REQUIRE(claim(*b, "stale-forbid", t0 + 1, "node-b", "tok-fb1", true).second.status ==
          ClaimStatus::kWon);
  out = claim(*a, "stale-forbid", t0 + 2, "node-a", "tok-fa2", true).second;
  CHECK(std::string(Name(out.status)) == "busy");
  CHECK(out.holder_tick_unix == t0 + 1);
  CHECK(out.holder_node == "node-b");
}

// The regression of a ZooKeeper complete sent without a read (nemesis proxy-delay,
// overlapping forbid runs): it deleted the run node by the version its claim left,
// which the run node of the tick claimed after its lease ran out has too.
TEMPLATE_LIST_TEST_CASE(
    "conformance: the complete of a forbid run whose lease ran out leaves the run marker of "
    "the tick claimed after it: a third tick is still busy",
    "[conformance]", AllHarnesses) {
  TestType h;
  if (Skipped(h)) return;
  auto a = h.OpenReplica();
  auto b = h.OpenReplica();
  auto c = h.OpenReplica();
  const std::int64_t t = NowUnix(h.clock());
  auto first = Req(h, "handover", t, "node-a", "tok-a");
  first.lease = h.short_lease();
  const Won a_won = MustWin(*a, first);
  LetShortLeaseExpire(h);
  REQUIRE(MustClaim(*b, Req(h, "handover", t + 1, "node-b", "tok-b")).status ==
          ClaimStatus::kWon);
  REQUIRE(a->Complete(a_won.held, Completion{"done", 0, 1ms}));  // whatever it answers
  const ClaimOutcome out = MustClaim(*c, Req(h, "handover", t + 2, "node-c", "tok-c"));
  CHECK(std::string(Name(out.status)) == "busy");
  CHECK(out.holder_tick_unix == t + 1);
  CHECK(out.holder_node == "node-b");
}

TEMPLATE_LIST_TEST_CASE(
    "conformance: a replica whose last view of a job is an instant old decides right after "
    "another replica moved it on: the same tick lost, an earlier one superseded, a later one "
    "won, a running one busy",
    "[conformance]", AllHarnesses) {
  // (etcd and ZooKeeper claim a job whose head they saw without reading it first: the
  // claim's own compare must carry every one of these answers.)
  TestType h;
  if (Skipped(h)) return;
  auto a = h.OpenReplica();
  auto b = h.OpenReplica();
  const std::int64_t t = NowUnix(h.clock());
  std::uint64_t last = 0;
  const auto req = [&](std::int64_t tick, const std::string& node, const std::string& token) {
    auto r = Req(h, "moved", tick, node, token);
    r.forbid_overlap = false;
    r.observe = true;
    return r;
  };
  tickd::testing::MustWinHigher(*a, req(t, "node-a", "tok-a0"), last);
  CHECK(MustClaim(*b, req(t, "node-b", "tok-b0")).status == ClaimStatus::kLost);
  tickd::testing::MustWinHigher(*b, req(t + 1, "node-b", "tok-b1"), last);
  ClaimOutcome out = MustClaim(*a, req(t + 1, "node-a", "tok-a1"));
  CHECK(std::string(Name(out.status)) == "lost");
  CHECK(out.holder_node == "node-b");
  tickd::testing::MustWinHigher(*b, req(t + 3, "node-b", "tok-b3"), last);
  out = MustClaim(*a, req(t + 2, "node-a", "tok-a2"));
  CHECK(std::string(Name(out.status)) == "superseded");
  CHECK(out.holder_tick_unix == t + 3);
  tickd::testing::MustWinHigher(*b, req(t + 4, "node-b", "tok-b4"), last);
  const auto a5 = req(t + 5, "node-a", "tok-a5");
  const ClaimOutcome won5 = tickd::testing::MustWinHigher(*a, a5, last);
  CHECK(*a->Complete(HeldOf(a5, won5), Completion{"done", 0, 1ms}) ==
        CompleteStatus::kCompleted);
  out = MustClaim(*b, req(t + 5, "node-b", "tok-b5"));
  CHECK(out.status == ClaimStatus::kLost);
  CHECK_FALSE(out.holder_running);
  // forbid: b runs t of another job, which a saw lost; a's claim of t + 1 is busy.
  auto b_run = Req(h, "moved-run", t, "node-b", "tok-r0");
  REQUIRE(MustClaim(*b, b_run).status == ClaimStatus::kWon);
  auto a_run = Req(h, "moved-run", t, "node-a", "tok-r1");
  CHECK(MustClaim(*a, a_run).status == ClaimStatus::kLost);
  a_run.tick_unix = t + 1;
  a_run.owner_token = "tok-r2";
  out = MustClaim(*a, a_run);
  CHECK(std::string(Name(out.status)) == "busy");
  CHECK(out.holder_tick_unix == t);
}

TEMPLATE_LIST_TEST_CASE(
    "conformance: a claim further ahead of the store's clock than its max_lead is refused "
    "early and writes nothing",
    "[conformance]", AllHarnesses) {
  TestType h;
  if (Skipped(h)) return;
  auto a = h.OpenReplica();
  auto b = h.OpenReplica();
  const std::int64_t now = NowUnix(h.clock());
  // A replica whose clock is 30 s ahead claims what its clock says is due.
  auto ahead = Req(h, "clock", now + 30, "node-ahead", "tok-a1");
  ahead.max_lead = 450ms;
  ahead.observe = true;
  const ClaimOutcome refused = MustClaim(*a, ahead);
  CHECK(std::string(Name(refused.status)) == "early");
  CHECK_FALSE(refused.observed);
  // The store says what its clock read (etcd: its Date second + 500 ms).
  const std::int64_t wall_ms = h.clock().Wall().time_since_epoch().count();
  CHECK(refused.store_ms > wall_ms - 5'000);
  CHECK(refused.store_ms < wall_ms + 5'000);
  // The due instant counts, not T: a past tick whose jitter puts it 40 s ahead.
  auto jittered = Req(h, "clock-jitter", now - 5, "node-ahead", "tok-a2");
  jittered.max_lead = 450ms;
  jittered.due_offset = 45s;
  CHECK(MustClaim(*a, jittered).status == ClaimStatus::kEarly);
  jittered.due_offset = 0ms;
  CHECK(MustClaim(*a, jittered).status == ClaimStatus::kWon);

  // Nothing was written: the on-time tick before it is won (not superseded, not busy
  // under forbid), and the refused tick has no record.
  auto on_time = Req(h, "clock", now, "node-b", "tok-b1");
  on_time.max_lead = 450ms;
  CHECK(MustClaim(*b, on_time).status == ClaimStatus::kWon);
  auto history = b->History("clock", 10);
  REQUIRE(history);
  for (const TickHistory& t : *history) {
    if (t.tick_unix == now + 30) CHECK(t.winner.empty());
  }
  // The same claim once the replica's clock is right again (its tick on time): won.
  auto mended = Req(h, "clock", now + 1, "node-ahead", "tok-a3");
  mended.max_lead = 1'450ms;
  mended.forbid_overlap = false;
  CHECK(MustClaim(*a, mended).status == ClaimStatus::kWon);
}

TEMPLATE_LIST_TEST_CASE(
    "conformance: a tick claimed for the future does not supersede the claims of clocks "
    "that are right; they stay monotonic among themselves",
    "[conformance]", AllHarnesses) {
  TestType h;
  if (Skipped(h)) return;
  auto a = h.OpenReplica();
  auto b = h.OpenReplica();
  const std::int64_t now = NowUnix(h.clock());
  // An unchecked claim an hour ahead (a replica of an older tickd with its clock ahead).
  auto future = Req(h, "ahead", now + 3600, "node-ahead", "tok-f");
  future.forbid_overlap = false;
  MustWin(*a, future);
  const auto checked = [&](std::int64_t tick, const std::string& node, const std::string& token) {
    auto req = Req(h, "ahead", tick, node, token);
    req.max_lead = 450ms;
    req.forbid_overlap = false;
    return MustClaim(*b, req);
  };
  // The replicas whose clocks are right go on running the job.
  CHECK(checked(now - 2, "node-b", "tok-b1").status == ClaimStatus::kWon);
  CHECK(checked(now - 1, "node-b", "tok-b2").status == ClaimStatus::kWon);
  // Among them claims stay monotonic: an earlier tick is superseded by the latest of
  // theirs, not by the head an hour ahead.
  const ClaimOutcome lagging = checked(now - 3, "node-c", "tok-c1");
  CHECK(lagging.status == ClaimStatus::kSuperseded);
  CHECK(lagging.holder_tick_unix == now - 1);
  CHECK(lagging.holder_node == "node-b");
  // A claim that checks no clock (an ad-hoc lock's) is judged against the latest tick
  // claimed, as before; and the future tick itself stays claimed.
  auto unchecked = Req(h, "ahead", now, "node-c", "tok-c2");
  unchecked.forbid_overlap = false;
  const ClaimOutcome old_rule = MustClaim(*b, unchecked);
  CHECK(old_rule.status == ClaimStatus::kSuperseded);
  CHECK(old_rule.holder_tick_unix == now + 3600);
  auto same = Req(h, "ahead", now + 3600, "node-c", "tok-c3");
  same.forbid_overlap = false;
  const ClaimOutcome lost = MustClaim(*b, same);
  CHECK(lost.status == ClaimStatus::kLost);
  CHECK(lost.holder_node == "node-ahead");
  // The replicas that saw the latest tick (known_tick) hear no store-reset.
  auto next = Req(h, "ahead", now, "node-b", "tok-b3");
  next.max_lead = 450ms;
  next.forbid_overlap = false;
  next.known_tick = now + 3600;
  CHECK(MustClaim(*b, next).status == ClaimStatus::kWon);
}

TEMPLATE_LIST_TEST_CASE(
    "conformance: a recover re-claim of a tick claimed before a later one "
    "still wins after the lease expired",
    "[conformance]", AllHarnesses) {
  TestType h;
  if (Skipped(h)) return;
  auto a = h.OpenReplica();
  auto b = h.OpenReplica();
  const std::int64_t t1 = NowUnix(h.clock());
  auto first = ShortRecoverReq(h, "mono-recover", t1, "node-a", "tok-a");
  first.forbid_overlap = false;
  const Won won_a = MustWin(*a, first);
  // concurrency: allow: the next tick starts while the first still runs.
  auto next = Req(h, "mono-recover", t1 + 1, "node-b", "tok-b1");
  next.forbid_overlap = false;
  const Won won_next = MustWin(*b, next);

  // A stops renewing; B re-claims the first tick once its lease expired.
  LetShortLeaseExpire(h);
  auto again = ShortRecoverReq(h, "mono-recover", t1, "node-b", "tok-b2");
  again.forbid_overlap = false;
  const Won recovered = MustWin(*b, again);
  CHECK(recovered.outcome.fence > won_next.outcome.fence);
  CHECK(*a->Renew(won_a.held) == RenewStatus::kLost);
}

TEMPLATE_LIST_TEST_CASE(
    "conformance: a batch is monotonic too, within itself and against "
    "earlier claims",
    "[conformance]", AllHarnesses) {
  TestType h;
  if (Skipped(h)) return;
  auto a = h.OpenReplica();
  auto b = h.OpenReplica();
  const std::int64_t t = NowUnix(h.clock());
  auto req = [&](const std::string& job, std::int64_t tick, const std::string& token) {
    auto r = Req(h, job, tick, "node-b", token);
    r.forbid_overlap = false;
    r.observe = true;
    return r;
  };
  REQUIRE(MustClaim(*a, Req(h, "batch-x", t, "node-a", "tok-a")).status == ClaimStatus::kWon);
  // x@t-1 is superseded by A's earlier claim; z@t-1 then z@t both win (in order); y@t
  // wins, and y@t-1 after it in the same batch is superseded by it, or, on a backend
  // that decides a batch's ticks of one job in tick order (PostgreSQL), wins first.
  const std::vector<ClaimRequest> reqs = {
      req("batch-x", t - 1, "tok-1"), req("batch-y", t, "tok-2"), req("batch-y", t - 1, "tok-3"),
      req("batch-z", t - 1, "tok-4"), req("batch-z", t, "tok-5")};
  std::vector<Result<ClaimOutcome>> outs = b->ClaimBatch(reqs);
  REQUIRE(outs.size() == reqs.size());
  for (const auto& o : outs) REQUIRE(o);
  CHECK(Name(outs[0]->status) == std::string("superseded"));
  CHECK(outs[0]->holder_tick_unix == t);
  CHECK(outs[0]->holder_node == "node-a");
  CHECK(outs[1]->status == ClaimStatus::kWon);
  if (outs[2]->status == ClaimStatus::kWon) {
    CHECK(outs[2]->fence < outs[1]->fence);  // decided first: fences follow the ticks
  } else {
    CHECK(Name(outs[2]->status) == std::string("superseded"));
    CHECK(outs[2]->holder_tick_unix == t);
  }
  CHECK(outs[3]->status == ClaimStatus::kWon);
  CHECK(outs[4]->status == ClaimStatus::kWon);
  CHECK(outs[4]->fence > outs[3]->fence);

  // ClaimBatchAsAnswered decides the same way.
  const std::vector<ClaimRequest> more = {req("batch-x", t - 2, "tok-6"),
                                          req("batch-x", t + 1, "tok-7")};
  std::vector<std::optional<ClaimStatus>> answered(more.size());
  b->ClaimBatchAsAnswered(more, [&](std::size_t i, Result<ClaimOutcome> o) {
    if (i < answered.size() && o) answered[i] = o->status;
  });
  REQUIRE(answered[0]);
  REQUIRE(answered[1]);
  CHECK(Name(*answered[0]) == std::string("superseded"));
  CHECK(*answered[1] == ClaimStatus::kWon);
}

TEMPLATE_LIST_TEST_CASE("conformance: renew keeps a lease; expiry lets recover re-claim with a "
                        "higher fence; the stale holder is refused",
                        "[conformance]", AllHarnesses) {
  TestType h;
  if (Skipped(h)) return;
  auto a = h.OpenReplica();
  auto b = h.OpenReplica();
  const auto lease = h.short_lease();
  const std::int64_t tick = NowUnix(h.clock());
  const Won won_a = MustWin(*a, ShortRecoverReq(h, "crashy", tick, "node-a", "tok-a"));
  const HeldClaim& held_a = won_a.held;

  auto second = ShortRecoverReq(h, "crashy", tick, "node-b", "tok-b");
  second.starting_deadline = 60s;

  // Renewed at half the lease, A's lease outlives its first term.
  h.Elapse(lease / 2);
  REQUIRE(*a->Renew(held_a) == RenewStatus::kRenewed);
  h.Elapse(lease * 5 / 8);
  CHECK(MustClaim(*b, second).status == ClaimStatus::kLost);

  // A stops renewing: after expiry, without recover the tick is not run again...
  h.Elapse(lease + lease / 2);
  auto no_recover = second;
  no_recover.recover = false;
  no_recover.owner_token = "tok-b0";
  const ClaimOutcome refused = MustClaim(*b, no_recover);
  CHECK(refused.status == ClaimStatus::kLost);
  CHECK(refused.holder_node == "node-a");
  // ...with recover it is re-claimed, with a higher fence.
  const Won won_b = MustWin(*b, second);
  CHECK(won_b.outcome.fence > won_a.outcome.fence);

  // The stale holder can neither renew nor complete, and changes nothing.
  CHECK(*a->Renew(held_a) == RenewStatus::kLost);
  CHECK(*a->Complete(held_a, Completion{"done", 0, 1ms}) == CompleteStatus::kNotOwner);
  auto history = b->History("crashy", 10);
  REQUIRE(history);
  REQUIRE(history->size() == 1);
  CHECK(history->front().winner == "node-b");
  CHECK(history->front().state == "running");
  CHECK(history->front().fence == won_b.outcome.fence);
  CHECK(MustClaim(*a, Req(h, "crashy", tick, "node-a", "tok-a2")).status == ClaimStatus::kLost);

  // The new holder still owns it.
  const HeldClaim& held_b = won_b.held;
  CHECK(*b->Renew(held_b) == RenewStatus::kRenewed);
  CHECK(*b->Complete(held_b, Completion{"done", 7, 25ms}) == CompleteStatus::kCompleted);
  history = b->History("crashy", 10);
  REQUIRE(history);
  REQUIRE(history->size() == 1);
  CHECK(history->front().state == "done");
  CHECK(history->front().run_outcome == "done");
  CHECK(history->front().exit_code == 7);
  CHECK(history->front().duration == 25ms);
  CHECK(*b->Renew(held_b) == RenewStatus::kLost);  // a done claim cannot be renewed
}

TEMPLATE_LIST_TEST_CASE("conformance: fences strictly increase and survive reopening",
                        "[conformance]", AllHarnesses) {
  TestType h;
  if (Skipped(h)) return;
  const std::int64_t t0 = NowUnix(h.clock());
  std::uint64_t last = 0;
  {
    auto a = h.OpenReplica();
    auto b = h.OpenReplica();
    for (int i = 0; i < 6; ++i) {
      Backend& replica = i % 2 == 0 ? *a : *b;
      const auto req = Req(h, "fenced", t0 + i, "node", "tok-" + std::to_string(i));
      const ClaimOutcome won = MustClaim(replica, req);
      REQUIRE(won.status == ClaimStatus::kWon);
      CHECK(won.fence > last);
      last = won.fence;
      REQUIRE(*replica.Complete(HeldOf(req, won), Completion{"done", 0, 1ms}) ==
              CompleteStatus::kCompleted);
    }
    // Another job's claims never make this job's fence go back.
    CHECK(MustClaim(*a, Req(h, "other", t0, "node", "tok-o")).status == ClaimStatus::kWon);
  }
  if (!h.durable()) return;
  auto reopened = h.OpenReplica();
  const ClaimOutcome after = MustClaim(*reopened, Req(h, "fenced", t0 + 10, "node", "tok-r"));
  REQUIRE(after.status == ClaimStatus::kWon);
  CHECK(after.fence > last);
  // The done ticks were remembered too.
  CHECK(MustClaim(*reopened, Req(h, "fenced", t0, "node", "tok-r0")).status == ClaimStatus::kLost);
}

// ClaimRequest::likely_decided is a hint (lock/backend.h: etcd and ZooKeeper read such
// claims first instead of claiming blind): every answer must be the one the claim gets
// without it, in a batch beside claims without the hint too.
TEMPLATE_LIST_TEST_CASE(
    "conformance: a likely_decided claim answers as without the hint: an open tick is won, "
    "a decided one lost naming its winner; early, missed, busy, superseded, store-reset "
    "unchanged",
    "[conformance]", AllHarnesses) {
  TestType h;
  if (Skipped(h)) return;
  auto a = h.OpenReplica();
  auto b = h.OpenReplica();
  const std::int64_t t = NowUnix(h.clock());
  const auto hinted = [&](std::string job, std::int64_t tick, std::string token) {
    auto req = Req(h, std::move(job), tick, "node-b", std::move(token));
    req.likely_decided = true;
    req.observe = true;
    req.forbid_overlap = false;
    return req;
  };
  // What node-a decided first: a running tick, a done one, a later tick (supersedes), a
  // tick still running under forbid (busy).
  auto running = Req(h, "hint-running", t, "node-a", "tok-a1");
  running.forbid_overlap = false;
  MustWin(*a, running);
  auto done = Req(h, "hint-done", t, "node-a", "tok-a2");
  done.forbid_overlap = false;
  const Won done_won = MustWin(*a, done);
  REQUIRE(*a->Complete(done_won.held, Completion{"done", 0, 1ms}) == CompleteStatus::kCompleted);
  auto later = Req(h, "hint-later", t, "node-a", "tok-a3");
  later.forbid_overlap = false;
  MustWin(*a, later);
  MustWin(*a, Req(h, "hint-busy", t - 1, "node-a", "tok-a4"));
  // B knew none of these heads before: a replica that claimed them once (the second
  // batch below) claims blind without the hint.
  for (int round = 0; round < 2; ++round) {
    const std::string r = std::to_string(round);
    std::vector<ClaimRequest> reqs = {
        hinted("hint-open-" + r, t, "tok-b-open-" + r),
        hinted("hint-running", t, "tok-b-run-" + r),
        hinted("hint-done", t, "tok-b-done-" + r),
        hinted("hint-later", t - 1, "tok-b-later-" + r),
        hinted("hint-busy", t, "tok-b-busy-" + r),
        hinted("hint-missed-" + r, t - 120, "tok-b-missed-" + r),
        Req(h, "hint-plain-" + r, t, "node-b", "tok-b-plain-" + r),  // beside unhinted ones
    };
    reqs[6].forbid_overlap = false;
    reqs[1].known_tick = t;  // it saw this very tick claimed: no store-reset either
    reqs[4].forbid_overlap = true;
    reqs[5].starting_deadline = 60s;
    const std::vector<Result<ClaimOutcome>> outs = b->ClaimBatch(reqs);
    REQUIRE(outs.size() == reqs.size());
    for (const auto& o : outs) REQUIRE(o);
    CHECK(std::string(Name(outs[0]->status)) == "won");
    CHECK(std::string(Name(outs[1]->status)) == "lost");
    CHECK(outs[1]->holder_node == "node-a");
    CHECK(outs[1]->holder_tick_unix == t);
    CHECK(outs[1]->holder_config_hash == "hash-node-a");
    CHECK(outs[1]->holder_running);
    CHECK(std::string(Name(outs[2]->status)) == "lost");
    CHECK(outs[2]->holder_node == "node-a");
    CHECK_FALSE(outs[2]->holder_running);
    CHECK(std::string(Name(outs[3]->status)) == "superseded");
    CHECK(outs[3]->holder_tick_unix == t);
    CHECK(std::string(Name(outs[4]->status)) == "busy");
    CHECK(outs[4]->holder_tick_unix == t - 1);
    CHECK(std::string(Name(outs[5]->status)) == "missed");
    CHECK(std::string(Name(outs[6]->status)) == "won");
    // The hinted winner holds its tick: the other replica loses it to node-b.
    const ClaimOutcome after =
        MustClaim(*a, Req(h, "hint-open-" + r, t, "node-a", "tok-a-open-" + r));
    CHECK(after.status == ClaimStatus::kLost);
    CHECK(after.holder_node == "node-b");
    // A lost claim's observation is in the ledger as without the hint.
    if (outs[1]->observed) {
      auto history = a->History("hint-running", 10);
      REQUIRE(history);
      REQUIRE(history->size() == 1);
      bool seen = false;
      for (const Observation& o : history->front().observations) {
        if (o.node == "node-b") seen = o.outcome == "lost";
      }
      CHECK(seen);
    }
  }
  // One at a time (a batch of one) too, and the answers that write nothing.
  CHECK(MustClaim(*b, hinted("hint-running", t, "tok-b-run-2")).status == ClaimStatus::kLost);
  CHECK(MustClaim(*b, hinted("hint-single", t, "tok-b-single")).status == ClaimStatus::kWon);
  {
    auto ahead = hinted("hint-early", t + 30, "tok-b-early");
    ahead.max_lead = 450ms;
    const ClaimOutcome early = MustClaim(*b, ahead);
    CHECK(std::string(Name(early.status)) == "early");
    CHECK_FALSE(early.observed);
  }
  if (h.detects_store_reset()) {
    auto reset = hinted("hint-running", t + 1, "tok-b-reset");
    reset.known_tick = t + 5;
    const ClaimOutcome out = MustClaim(*b, reset);
    CHECK(std::string(Name(out.status)) == "store-reset");
    CHECK(out.holder_tick_unix == t);
    CHECK_FALSE(out.observed);
  }
  // A hinted claim of a tick whose holder stopped renewing: recover re-claims it (last:
  // the lease's expiry moves the test's clock).
  const Won expiring = MustWin(*a, ShortRecoverReq(h, "hint-recover", t, "node-a", "tok-a5"));
  LetShortLeaseExpire(h);
  auto retake = ShortRecoverReq(h, "hint-recover", t, "node-b", "tok-b-recover");
  retake.likely_decided = true;
  const ClaimOutcome retaken = MustClaim(*b, retake);
  CHECK(retaken.status == ClaimStatus::kWon);
  CHECK(retaken.fence > expiring.outcome.fence);
}

TEMPLATE_LIST_TEST_CASE(
    "conformance: a claim that knows a later claim than the store has hears store-reset",
    "[conformance]", AllHarnesses) {
  TestType h;
  if (Skipped(h)) return;
  if (!h.detects_store_reset()) {
    WARN("this backend ignores known_tick (docs/design.md §1 rule 12): case skipped");
    return;
  }
  auto a = h.OpenReplica();
  const std::int64_t t = NowUnix(h.clock());
  auto first = Req(h, "amnesia", t, "node-a", "tok-a1");
  first.forbid_overlap = false;
  REQUIRE(MustClaim(*a, first).status == ClaimStatus::kWon);

  // The replica saw t + 5 claimed; the store's latest is t: it lost data. Nothing is
  // written, not even with a deadline passed or with observe.
  auto next = Req(h, "amnesia", t + 1, "node-a", "tok-a2");
  next.forbid_overlap = false;
  next.observe = true;
  next.known_tick = t + 5;
  ClaimOutcome out = MustClaim(*a, next);
  CHECK(std::string(Name(out.status)) == "store-reset");
  CHECK(out.holder_tick_unix == t);
  CHECK_FALSE(out.observed);
  // A job the store has never seen claimed: its latest is none (0).
  auto other = Req(h, "amnesia-other", t, "node-a", "tok-a3");
  other.known_tick = t - 60;
  out = MustClaim(*a, other);
  CHECK(out.status == ClaimStatus::kStoreReset);
  CHECK(out.holder_tick_unix == 0);
  auto history = a->History("amnesia", 10);
  REQUIRE(history);
  for (const TickHistory& th : *history) CHECK(th.tick_unix == t);

  // What the store knows is enough: known_tick at or below its head claims as usual.
  next.owner_token = "tok-a4";
  next.known_tick = t;
  CHECK(MustClaim(*a, next).status == ClaimStatus::kWon);
  other.owner_token = "tok-a5";
  other.known_tick = 0;
  CHECK(MustClaim(*a, other).status == ClaimStatus::kWon);
}

TEMPLATE_LIST_TEST_CASE(
    "conformance: the ledger shows a claimer's win over an older "
    "observation of its own of that tick; a later one replaces the win",
    "[conformance]", AllHarnesses) {
  TestType h;
  if (Skipped(h)) return;
  auto a = h.OpenReplica();
  auto b = h.OpenReplica();
  const std::int64_t tick = NowUnix(h.clock());
  auto req = Req(h, "stale-obs", tick, "node-a", "tok-a");
  req.forbid_overlap = false;
  req.observe = true;
  // A loss node-a saw before it won the tick (a loss seen before a re-claim; on etcd a
  // probe's observation whose taking back failed before the claim went out).
  REQUIRE(a->Record(Observation{req.job, tick, "node-a", "lost", req.node_wall, "h", 0}));
  const ClaimOutcome won = MustClaim(*a, req);
  REQUIRE(won.status == ClaimStatus::kWon);
  if (!won.observed) {  // as the scheduler does when the claim did not write it
    REQUIRE(a->Record(
        Observation{req.job, tick, "node-a", "won", req.node_wall, req.config_hash, won.fence}));
  }
  const auto outcome_of_a = [&] {
    auto history = b->History("stale-obs", 5);
    REQUIRE(history);
    REQUIRE(history->size() == 1);
    CHECK(history->front().winner == "node-a");
    CHECK(history->front().observations.size() == 1);
    std::string outcome;
    for (const Observation& o : history->front().observations) {
      if (o.node == "node-a") outcome = o.outcome;
    }
    return outcome;
  };
  CHECK(outcome_of_a() == "won");
  // A later attempt of node-a at the same tick (a restarted replica) is newer news.
  REQUIRE(a->Record(Observation{req.job, tick, "node-a", "lost", req.node_wall + 1s, "h", 0}));
  CHECK(outcome_of_a() == "lost");
}

TEMPLATE_LIST_TEST_CASE("conformance: pruning removes old done ticks, never a running one",
                        "[conformance]", AllHarnesses) {
  TestType h;
  if (Skipped(h)) return;
  auto a = h.OpenReplica();
  const std::int64_t now = NowUnix(h.clock());
  auto claim_at = [&](std::int64_t tick, const std::string& token) {
    return WinLate(h, *a, "pruned", tick, token);
  };
  const HeldClaim old_done = claim_at(now - 7200, "tok-old-done");
  const HeldClaim old_running = claim_at(now - 7100, "tok-old-running");
  const HeldClaim recent = claim_at(now - 10, "tok-recent");
  REQUIRE(*a->Complete(old_done, Completion{"done", 0, 1ms}) == CompleteStatus::kCompleted);
  REQUIRE(*a->Complete(recent, Completion{"done", 0, 1ms}) == CompleteStatus::kCompleted);
  Observation obs{"pruned", now - 7200, "node-b", "lost", h.clock().Wall(), "hash", 0};
  REQUIRE(a->Record(obs));

  auto removed = a->Prune(WallTime(std::chrono::seconds(now - 3600)));
  REQUIRE(removed);
  CHECK(*removed == 1);
  auto history = a->History("pruned", 10);
  REQUIRE(history);
  REQUIRE(history->size() == 2);
  CHECK(history->at(0).tick_unix == now - 10);
  CHECK(history->at(1).tick_unix == now - 7100);
  CHECK(history->at(1).state == "running");
  CHECK(*a->Renew(old_running) == RenewStatus::kRenewed);
}

TEMPLATE_LIST_TEST_CASE("conformance: the ledger keeps what every replica saw of a tick",
                        "[conformance]", AllHarnesses) {
  TestType h;
  if (Skipped(h)) return;
  std::vector<std::unique_ptr<Backend>> replicas;
  for (int i = 0; i < 3; ++i) replicas.push_back(h.OpenReplica());
  const std::int64_t t0 = NowUnix(h.clock());
  const WallTime base = h.clock().Wall();
  for (int t = 0; t < 3; ++t) {
    const std::int64_t tick = t0 + t;
    for (int r = 0; r < 3; ++r) {
      const std::string node = "node-" + std::to_string(r);
      auto req = Req(h, "audited", tick, node, "tok-" + std::to_string(t) + node);
      req.forbid_overlap = false;
      const ClaimOutcome out = MustClaim(*replicas[r], req);
      Observation obs{"audited", tick, node, std::string(ClaimStatusName(out.status)),
                      base + std::chrono::milliseconds(r * 7), req.config_hash, out.fence};
      REQUIRE(replicas[r]->Record(obs));
    }
  }
  Observation other{"elsewhere", t0, "node-0", "won", base, "h", 1};
  REQUIRE(replicas[0]->Record(other));

  auto history = replicas[2]->History("audited", 2);
  REQUIRE(history);
  REQUIRE(history->size() == 2);  // the limit, newest first
  CHECK(history->at(0).tick_unix == t0 + 2);
  CHECK(history->at(1).tick_unix == t0 + 1);
  const TickHistory& newest = history->at(0);
  CHECK(newest.job == "audited");
  CHECK(newest.winner == "node-0");
  CHECK(newest.config_hash == "hash-node-0");
  REQUIRE(newest.observations.size() == 3);
  std::map<std::string, Observation> by_node;
  for (const Observation& o : newest.observations) by_node[o.node] = o;
  REQUIRE(by_node.size() == 3);
  CHECK(by_node["node-0"].outcome == "won");
  CHECK(by_node["node-0"].fence == newest.fence);
  CHECK(by_node["node-1"].outcome == "lost");
  CHECK(by_node["node-2"].node_wall == base + 14ms);
  CHECK(by_node["node-2"].config_hash == "hash-node-2");

  auto all = replicas[1]->History("", 100);
  REQUIRE(all);
  CHECK(all->size() == 4);
  auto only_other = replicas[1]->History("elsewhere", 100);
  REQUIRE(only_other);
  REQUIRE(only_other->size() == 1);
  CHECK(only_other->front().winner.empty());  // observed, but no tick record
  CHECK(only_other->front().observations.size() == 1);
}

namespace {

// The running claims of `job` (other jobs of the store are not this case's).
std::vector<RunningClaim> RunningOf(Backend& b, const std::string& job) {
  auto all = b.ListRunning();
  if (!all) FAIL("list running: " << all.error().ToString());
  std::vector<RunningClaim> out;
  for (const RunningClaim& c : *all) {
    if (c.job == job) out.push_back(c);
  }
  return out;
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("conformance: locks lists a running claim; a release waits until the "
                        "holder is gone and then shuts the old holder out",
                        "[conformance]", AllHarnesses) {
  TestType h;
  if (Skipped(h)) return;
  auto a = h.OpenReplica();
  auto b = h.OpenReplica();
  const std::int64_t tick = NowUnix(h.clock());
  const Won won = MustWin(*a, ShortRecoverReq(h, "stuck", tick, "node-a", "tok-a"));
  const HeldClaim& held = won.held;

  // Listed from another replica, with its holder, tick, fence and config hash.
  auto running = RunningOf(*b, "stuck");
  REQUIRE(running.size() == 1);
  CHECK(running[0].tick_unix == tick);
  CHECK(running[0].node == "node-a");
  CHECK(running[0].fence == won.outcome.fence);
  CHECK(running[0].config_hash == "hash-node-a");
  CHECK(running[0].holder_alive);
  if (running[0].lease_left) CHECK(*running[0].lease_left <= h.short_lease());

  // A live holder's claim is never released.
  CHECK(*b->ForceRelease("stuck", tick) == ForceReleaseStatus::kHolderAlive);
  CHECK(*a->Renew(held) == RenewStatus::kRenewed);

  // The holder stops renewing; once its lease expired the claim can be released.
  LetShortLeaseExpire(h);
  running = RunningOf(*b, "stuck");
  REQUIRE(running.size() == 1);
  CHECK_FALSE(running[0].holder_alive);
  if (running[0].lease_left) CHECK(*running[0].lease_left == 0ms);
  CHECK(*b->ForceRelease("stuck", tick) == ForceReleaseStatus::kReleased);
  CHECK(*b->ForceRelease("stuck", tick) == ForceReleaseStatus::kNotRunning);
  CHECK(RunningOf(*b, "stuck").empty());

  // The old holder is shut out and changes nothing.
  CHECK(*a->Renew(held) == RenewStatus::kLost);
  CHECK(*a->Complete(held, Completion{"done", 0, 5ms}) == CompleteStatus::kNotOwner);
  auto history = b->History("stuck", 10);
  REQUIRE(history);
  REQUIRE(history->size() == 1);
  CHECK(history->front().state == "done");
  CHECK(history->front().run_outcome == "released");
  CHECK(history->front().winner == "node-a");
  CHECK(history->front().fence == won.outcome.fence);

  // Released is done: even a recover claim never runs the tick again, and under
  // forbid the job's next tick is no longer busy.
  auto again = Req(h, "stuck", tick, "node-b", "tok-b");
  again.recover = true;
  const ClaimOutcome lost = MustClaim(*b, again);
  CHECK(lost.status == ClaimStatus::kLost);
  CHECK(lost.holder_node == "node-a");
  CHECK_FALSE(lost.holder_running);
  CHECK(MustClaim(*b, Req(h, "stuck", tick + 1, "node-b", "tok-next")).status ==
        ClaimStatus::kWon);
}

TEMPLATE_LIST_TEST_CASE("conformance: releasing a tick that is not running changes nothing",
                        "[conformance]", AllHarnesses) {
  TestType h;
  if (Skipped(h)) return;
  auto a = h.OpenReplica();
  const std::int64_t tick = NowUnix(h.clock());
  CHECK(*a->ForceRelease("never", tick) == ForceReleaseStatus::kNotRunning);
  const Won won = MustWin(*a, Req(h, "finished", tick, "node-a", "tok-a"));
  REQUIRE(*a->Complete(won.held, Completion{"done", 0, 3ms}) ==
          CompleteStatus::kCompleted);
  CHECK(RunningOf(*a, "finished").empty());
  CHECK(*a->ForceRelease("finished", tick) == ForceReleaseStatus::kNotRunning);
  auto history = a->History("finished", 1);
  REQUIRE(history);
  REQUIRE(history->size() == 1);
  CHECK(history->front().run_outcome == "done");
}

TEMPLATE_LIST_TEST_CASE(
    "conformance: observations written with the claim keep each replica's "
    "config hash, as Record does",
    "[conformance]", AllHarnesses) {
  TestType h;
  if (Skipped(h)) return;
  std::vector<std::unique_ptr<Backend>> replicas;
  for (int i = 0; i < 3; ++i) replicas.push_back(h.OpenReplica());
  const std::int64_t tick = NowUnix(h.clock());
  // Tick T: one winner and two losers; tick T+1 under forbid: busy for everyone.
  for (std::int64_t t : {tick, tick + 1}) {
    for (int r = 0; r < 3; ++r) {
      const std::string node = "node-" + std::to_string(r);
      auto req = Req(h, "hashed", t, node, "tok-" + std::to_string(t) + node);
      req.observe = true;  // as the scheduler claims
      const ClaimOutcome out = MustClaim(*replicas[r], req);
      if (!out.observed) {
        REQUIRE(replicas[r]->Record(Observation{req.job, t, node,
                                                std::string(ClaimStatusName(out.status)),
                                                req.node_wall, req.config_hash, out.fence}));
      }
    }
  }
  auto history = replicas[0]->History("hashed", 2);
  REQUIRE(history);
  REQUIRE(history->size() == 2);
  const TickHistory& busy = history->at(0);
  const TickHistory& won = history->at(1);
  REQUIRE(won.tick_unix == tick);
  CHECK(won.winner == "node-0");
  CHECK(won.config_hash == "hash-node-0");
  REQUIRE(won.observations.size() == 3);
  for (const Observation& o : won.observations) {
    CHECK(o.config_hash == "hash-" + o.node);
    CHECK(o.outcome == (o.node == "node-0" ? "won" : "lost"));
  }
  CHECK(busy.winner.empty());
  REQUIRE(busy.observations.size() == 3);
  for (const Observation& o : busy.observations) {
    CHECK(o.config_hash == "hash-" + o.node);
    CHECK(o.outcome == "busy");
  }
}

TEMPLATE_LIST_TEST_CASE("conformance: a pause set by one replica is read by every other, "
                        "replaced, listed in job order and cleared",
                        "[conformance]", AllHarnesses) {
  TestType h;
  if (Skipped(h)) return;
  auto a = h.OpenReplica();
  auto b = h.OpenReplica();
  REQUIRE(b->ListPauses()->empty());
  const WallTime since = h.clock().Wall();
  const WallTime until = since + 3600s;
  REQUIRE(a->SetPause(Pause{"reports", std::nullopt, since, "ops-1", ""}));
  REQUIRE(a->SetPause(Pause{"cleanup", until, since, "ops-1", "incident \"42\": stock"}));
  REQUIRE(a->SetPause(Pause{std::string(kAllJobs), std::nullopt, since, "ops-2", ""}));
  auto seen = b->ListPauses();
  REQUIRE(seen);
  REQUIRE(seen->size() == 3);
  CHECK(seen->at(0).job == "*");
  CHECK(seen->at(1).job == "cleanup");
  CHECK(seen->at(2).job == "reports");
  const Pause& cleanup = seen->at(1);
  CHECK(cleanup.by == "ops-1");
  CHECK(cleanup.reason == "incident \"42\": stock");
  CHECK(cleanup.since == since);
  REQUIRE(cleanup.until);
  CHECK(*cleanup.until == until);
  CHECK_FALSE(seen->at(2).until);
  CHECK(PauseHolds(cleanup, "cleanup", since));
  CHECK_FALSE(PauseHolds(cleanup, "cleanup", until));
  CHECK(PauseHolds(seen->at(0), "anything", until));
  // Setting again replaces: the pause of cleanup now has no end.
  REQUIRE(b->SetPause(Pause{"cleanup", std::nullopt, since, "ops-3", ""}));
  seen = a->ListPauses();
  REQUIRE(seen);
  REQUIRE(seen->size() == 3);
  CHECK(seen->at(1).by == "ops-3");
  CHECK_FALSE(seen->at(1).until);
  // Clearing says whether there was one; the all-jobs pause is its own entry.
  CHECK(*b->ClearPause("cleanup") == true);
  CHECK(*b->ClearPause("cleanup") == false);
  CHECK(*a->ClearPause(kAllJobs) == true);
  seen = b->ListPauses();
  REQUIRE(seen);
  REQUIRE(seen->size() == 1);
  CHECK(seen->front().job == "reports");
}

TEMPLATE_LIST_TEST_CASE("conformance: a run's output is read back by another replica, cut at the "
                        "store's limit, and goes with retention by count and by age",
                        "[conformance]", AllHarnesses) {
  TestType h;
  if (Skipped(h)) return;
  auto a = h.OpenReplica();
  auto b = h.OpenReplica();
  const std::int64_t now = NowUnix(h.clock());
  auto claim_at = [&](std::int64_t tick, const std::string& token) {
    return WinLate(h, *a, "printer", tick, token);
  };
  // Far beyond what lock.history.output allows (64 KB): the store keeps the end.
  std::string big;
  for (int i = 0; big.size() < 2 * kMaxStoredOutputBytes; ++i) {
    big += (i % 7 == 0 ? "e " : "o ") + std::string("line ") + std::to_string(i) + " " +
           std::string(90, 'x') + " \xC3\xA9\n";
  }
  const std::int64_t t_count = now - 7200;  // loses its output by count
  const std::int64_t t_age = now - 7100;    // keeps it by count, loses it by age
  const std::int64_t t_kept = now - 20;
  const std::int64_t t_big = now - 10;
  const std::int64_t t_stolen = now - 5;    // completed by a token that is not the owner's
  const std::int64_t t_running = now - 1;   // not completed
  int n = 0;
  for (const std::int64_t tick : {t_count, t_age, t_kept, t_big}) {
    const HeldClaim held = claim_at(tick, "tok-out-" + std::to_string(n));
    Completion c{n % 2 == 0 ? "done" : "failed", n % 2, 5ms};
    c.output =
        tick == t_big ? big : "o run " + std::to_string(n) + "\ne <b>oops</b> \xE2\x9C\x93\n";
    c.keep_outputs = 3;
    REQUIRE(*a->Complete(held, c) == CompleteStatus::kCompleted);
    ++n;
  }
  HeldClaim stolen = claim_at(t_stolen, "tok-out-stolen");
  stolen.owner_token = "tok-not-the-owner";
  Completion intruder{"done", 0, 1ms};
  intruder.output = "o written by a stranger\n";
  REQUIRE(*b->Complete(stolen, intruder) == CompleteStatus::kNotOwner);
  claim_at(t_running, "tok-out-running");

  const std::vector<std::int64_t> ticks = {t_running, t_stolen, t_big, t_kept, t_age, t_count};
  auto outputs = b->Outputs("printer", ticks);
  REQUIRE(outputs);
  REQUIRE(outputs->size() == ticks.size());
  CHECK(outputs->at(0).empty());
  CHECK(outputs->at(1).empty());
  const std::string& cut = outputs->at(2);
  CHECK(cut == OutputToStore(big));
  CHECK(cut.size() <= kMaxStoredOutputBytes);
  CHECK(cut.size() > kMaxStoredOutputBytes - 200);
  CHECK(big.ends_with(cut));
  CHECK((cut.starts_with("o line ") || cut.starts_with("e line ")));
  CHECK(outputs->at(3) == "o run 2\ne <b>oops</b> \xE2\x9C\x93\n");
  CHECK(outputs->at(4) == "o run 1\ne <b>oops</b> \xE2\x9C\x93\n");
  CHECK(outputs->at(5).empty());  // beyond the newest 3
  // Dropping an output by count keeps the tick's record: it is still never re-run.
  auto history = b->History("printer", 10);
  REQUIRE(history);
  REQUIRE(history->size() == 6);
  CHECK(history->back().tick_unix == t_count);
  CHECK(history->back().state == "done");
  CHECK(history->at(3).run_outcome == "done");
  CHECK(history->at(3).exit_code == 0);

  REQUIRE(a->Prune(WallTime(std::chrono::seconds(now - 3600))));
  auto after = b->Outputs("printer", std::vector<std::int64_t>{t_big, t_kept, t_age, t_count});
  REQUIRE(after);
  REQUIRE(after->size() == 4);
  CHECK(after->at(0) == cut);
  CHECK(!after->at(1).empty());
  CHECK(after->at(2).empty());  // went with its record (age)
  CHECK(after->at(3).empty());
  auto none = b->Outputs("no-such-job", std::vector<std::int64_t>{now});
  REQUIRE(none);
  REQUIRE(none->size() == 1);
  CHECK(none->front().empty());
}

TEMPLATE_LIST_TEST_CASE("conformance: a batch of completes that each printed the most stays "
                        "within the store's request limits",
                        "[conformance]", AllHarnesses) {
  TestType h;
  if (Skipped(h)) return;
  auto a = h.OpenReplica();
  const std::int64_t now = NowUnix(h.clock());
  // 40 outputs of 64 KiB: 2.5 MiB in one CompleteBatch, above etcd's 1.5 MiB request
  // limit and ZooKeeper's 1 MB jute.maxbuffer were they sent as one request.
  std::string full;
  while (full.size() + 80 <= kMaxStoredOutputBytes) full += "o " + std::string(77, 'y') + "\n";
  std::vector<CompleteRequest> batch;
  for (int i = 0; i < 40; ++i) {
    const std::string job = "loud-" + std::to_string(i);
    Completion c{"done", 0, 1ms};
    c.output = full;
    c.output[2] = static_cast<char>('A' + i % 26);  // each its own
    c.keep_outputs = 5;
    batch.push_back({WinLate(h, *a, job, now - 1, "tok-loud-" + std::to_string(i)), c});
  }
  const std::vector<Result<CompleteStatus>> done = a->CompleteBatch(batch);
  REQUIRE(done.size() == batch.size());
  auto b = h.OpenReplica();
  for (std::size_t i = 0; i < batch.size(); ++i) {
    INFO("complete " << i);
    REQUIRE(done[i]);
    CHECK(*done[i] == CompleteStatus::kCompleted);
    auto stored = b->Outputs(batch[i].held.job, std::vector<std::int64_t>{now - 1});
    REQUIRE(stored);
    REQUIRE(stored->size() == 1);
    CHECK(stored->front() == batch[i].completion.output);
  }
}

namespace {

// The backend's answer to a refence; the test fails when it is an Error.
RefenceOutcome MustRefence(Backend& b, const HeldClaim& held) {
  auto out = b.Refence(held);
  if (!out) FAIL("refence " << held.job << "@" << held.tick_unix << ": " << out.error().ToString());
  return *out;
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("conformance: a refence gives the running claim a greater fence, kept in "
                        "its record; another owner is refused; renew and complete go on",
                        "[conformance]", AllHarnesses) {
  TestType h;
  if (Skipped(h)) return;
  auto a = h.OpenReplica();
  auto b = h.OpenReplica();
  const std::int64_t tick = NowUnix(h.clock());
  auto req = Req(h, "retried", tick, "node-a", "tok-a");
  req.forbid_overlap = false;
  const Won won = MustWin(*a, req);
  HeldClaim held = won.held;

  // Another job's claim in between never makes this job's fence go back.
  CHECK(MustClaim(*b, Req(h, "retried-other", tick, "node-b", "tok-o")).status ==
        ClaimStatus::kWon);
  const RefenceOutcome first = MustRefence(*a, held);
  REQUIRE(first.status == RefenceStatus::kRefenced);
  CHECK(first.fence > won.outcome.fence);
  CHECK(first.fence < (std::uint64_t{1} << 53));
  held.fence = first.fence;
  const RefenceOutcome second = MustRefence(*a, held);
  REQUIRE(second.status == RefenceStatus::kRefenced);
  CHECK(second.fence > first.fence);
  held.fence = second.fence;

  // Kept in the record: another replica's `tickd locks` and history show it.
  auto running = RunningOf(*b, "retried");
  REQUIRE(running.size() == 1);
  CHECK(running[0].fence == second.fence);
  CHECK(running[0].node == "node-a");
  CHECK(running[0].holder_alive);
  auto history = b->History("retried", 10);
  REQUIRE(history);
  REQUIRE(history->size() == 1);
  CHECK(history->front().fence == second.fence);
  CHECK(history->front().state == "running");

  // Another owner token changes nothing, and the tick is still held.
  HeldClaim other = held;
  other.owner_token = "tok-b";
  CHECK(MustRefence(*b, other).status == RefenceStatus::kNotOwner);
  CHECK(RunningOf(*b, "retried").at(0).fence == second.fence);
  auto again = Req(h, "retried", tick, "node-b", "tok-b");
  again.forbid_overlap = false;
  const ClaimOutcome lost = MustClaim(*b, again);
  CHECK(lost.status == ClaimStatus::kLost);
  CHECK(lost.holder_node == "node-a");
  CHECK(lost.holder_running);

  // The holder renews and completes under the new fence.
  CHECK(*a->Renew(held) == RenewStatus::kRenewed);
  auto next = Req(h, "retried", tick + 1, "node-b", "tok-b1");
  next.forbid_overlap = false;
  const ClaimOutcome won_next = MustClaim(*b, next);
  REQUIRE(won_next.status == ClaimStatus::kWon);
  CHECK(won_next.fence > second.fence);  // the next claim's fence is greater still
  REQUIRE(*a->Complete(held, Completion{"done", 0, 4ms}) == CompleteStatus::kCompleted);
  history = b->History("retried", 10);
  REQUIRE(history);
  REQUIRE(history->size() == 2);
  CHECK(history->back().tick_unix == tick);
  CHECK(history->back().state == "done");
  CHECK(history->back().run_outcome == "done");
  CHECK(history->back().fence == second.fence);
  // A done claim is not refenced.
  CHECK(MustRefence(*a, held).status == RefenceStatus::kNotOwner);
  CHECK(*b->Complete(HeldOf(next, won_next), Completion{"done", 0, 1ms}) ==
        CompleteStatus::kCompleted);
}

TEMPLATE_LIST_TEST_CASE("conformance: a claim whose lease expired is not refenced, and its "
                        "recovered successor is",
                        "[conformance]", AllHarnesses) {
  TestType h;
  if (Skipped(h)) return;
  auto a = h.OpenReplica();
  auto b = h.OpenReplica();
  const std::int64_t tick = NowUnix(h.clock());
  const Won won_a = MustWin(*a, ShortRecoverReq(h, "refence-late", tick, "node-a", "tok-a"));
  const HeldClaim& held_a = won_a.held;

  LetShortLeaseExpire(h);
  CHECK(MustRefence(*a, held_a).status == RefenceStatus::kNotOwner);

  auto second = Req(h, "refence-late", tick, "node-b", "tok-b");  // a 30 s lease
  second.recover = true;
  second.starting_deadline = 60s;
  const Won won_b = MustWin(*b, second);
  CHECK(won_b.outcome.fence > won_a.outcome.fence);
  CHECK(MustRefence(*a, held_a).status == RefenceStatus::kNotOwner);
  HeldClaim held_b = won_b.held;
  const RefenceOutcome moved = MustRefence(*b, held_b);
  REQUIRE(moved.status == RefenceStatus::kRefenced);
  CHECK(moved.fence > won_b.outcome.fence);
  held_b.fence = moved.fence;
  CHECK(RunningOf(*a, "refence-late").at(0).fence == moved.fence);
  CHECK(*a->Complete(held_a, Completion{"done", 0, 1ms}) == CompleteStatus::kNotOwner);
  CHECK(*b->Renew(held_b) == RenewStatus::kRenewed);
  CHECK(*b->Complete(held_b, Completion{"failed", 1, 2ms}) == CompleteStatus::kCompleted);
  auto history = a->History("refence-late", 10);
  REQUIRE(history);
  REQUIRE(history->size() == 1);
  CHECK(history->front().winner == "node-b");
  CHECK(history->front().fence == moved.fence);
  CHECK(history->front().run_outcome == "failed");
}

