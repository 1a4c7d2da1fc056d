// etcd-specific behaviour beyond the shared conformance suite: the URL, failover to
// the next member, failing closed within op_timeout when no member answers, a
// restart of etcd (the holder keeps its lease, a dead holder is taken over within
// one lease after the restart, fences keep growing), the TTL rounding, and batches
// (the lease shared by the runs of a batch).
#include "lock/etcd/etcd_backend.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <thread>

#include "lock/registry.h"
#include "tests/etcd/etcd_server.h"
#include "tests/support/claims.h"

using namespace std::chrono_literals;
using tickd::testing::NowUnix;
using tickd::testing::EtcdServer;
using namespace tickd::lock;
using tickd::testing::HeldOf;
using tickd::testing::MustClaim;
using tickd::testing::Req;
using std::chrono::steady_clock;

namespace {

std::unique_ptr<Backend> Open(const std::string& url, std::chrono::milliseconds timeout = 1s) {
  EtcdOptions options;
  options.url = url;
  options.op_timeout = timeout;
  auto backend = NewEtcdBackend(options);
  if (!backend) FAIL(backend.error().ToString());
  return std::move(*backend);
}

// A case's etcd: one member on free loopback ports, started for the case, and the
// replicas' backends on it. Where etcd is not installed nothing starts: the case
// returns at once (`if (skipped) return;`).
struct Member {
  Member() {
    if (skipped) {
      WARN("etcd is not installed: skipped");
    } else {
      REQUIRE(server.running());
    }
  }
  // A replica's backend on the member.
  std::unique_ptr<Backend> Replica(std::chrono::milliseconds timeout = 1s) const {
    return Open(server.url(), timeout);
  }
  const bool skipped = !EtcdServer::Available();
  EtcdServer server;
};

// The member and two replicas on it, a and b.
struct TwoReplicas : Member {
  std::unique_ptr<Backend> a = skipped ? nullptr : Replica();
  std::unique_ptr<Backend> b = skipped ? nullptr : Replica();
};

}  // namespace

std::int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Waits until 50–350 ms into a wall-clock second, then claims `job`'s tick of the next
// second with `max_lead`: 0.65 s or more before its due instant, so more than max_lead
// ahead of the member's clock (max_lead ≤ 100 ms), although inside the Date second
// before it. `second` is the current one; `outcome` is unset when the answer came too
// late in that second to be early (a loaded machine): not judged.
struct NextSecondClaim {
  std::int64_t second = 0;
  std::optional<ClaimOutcome> outcome;
};
NextSecondClaim ClaimNextSecond(Backend& backend, const std::string& job,
                                std::chrono::milliseconds max_lead) {
  while (WallMs() % 1000 < 50 || WallMs() % 1000 > 350) std::this_thread::sleep_for(5ms);
  NextSecondClaim out;
  out.second = WallMs() / 1000;
  auto ahead = Req(job, out.second + 1, "node-a", "tok-" + job);
  ahead.max_lead = max_lead;
  ahead.forbid_overlap = false;
  const ClaimOutcome answer = MustClaim(backend, ahead);
  if (WallMs() < out.second * 1000 + 650) {
    out.outcome = answer;
  } else {
    WARN("the claim took until " << WallMs() % 1000 << " ms into its second: not judged");
  }
  return out;
}

// A claim of the next second from early in this one (0.65 s or more ahead), with no
// tolerance, is refused `early` once the member's clock is narrowed.
void CheckNextSecondEarly(Backend& backend, const std::string& job) {
  const NextSecondClaim ahead = ClaimNextSecond(backend, job, 0ms);
  if (ahead.outcome) CHECK(std::string(ClaimStatusName(ahead.outcome->status)) == "early");
}

TEST_CASE_METHOD(Member,
                 "etcd: the clock check judges below a second once replies came at other phases of "
                 "the member's second (Date has whole seconds)",
                 "[etcd]") {
  if (skipped) return;
  auto backend = Replica();
  // Replies spread over more than a second (the skew watch's reads do this in the daemon).
  for (int i = 0; i < 20; ++i) {
    REQUIRE(backend->History("warm", 1));
    std::this_thread::sleep_for(60ms);
  }
  const NextSecondClaim ahead = ClaimNextSecond(*backend, "sub-second", 100ms);
  if (ahead.outcome) {
    CHECK(std::string(ClaimStatusName(ahead.outcome->status)) == "early");
    CHECK(ahead.outcome->store_ms >= ahead.second * 1000);
    CHECK(ahead.outcome->store_ms < (ahead.second + 1) * 1000);
  }
  // The current second is not early.
  auto on_time = Req("sub-second-now", ahead.second, "node-a", "tok-2");
  on_time.max_lead = 100ms;
  on_time.forbid_overlap = false;
  CHECK(MustClaim(*backend, on_time).status == ClaimStatus::kWon);
}

TEST_CASE_METHOD(Member,
                 "etcd: the start-up warnings narrow the member's clock: a replica under a "
                 "second ahead is refused from its first claim",
                 "[etcd]") {
  if (skipped) return;
  auto backend = Replica();
  (void)backend->StartupWarnings();  // what a daemon calls once, before its first claim
  // A bound from one Date's phase alone may be a second wide and let the claim pass;
  // narrowed, it cannot.
  CheckNextSecondEarly(*backend, "first-claim");
}

TEST_CASE_METHOD(Member,
                 "etcd: without start-up warnings (tickd trigger) the first checked claim "
                 "narrows the member's clock: a replica under a second ahead is refused",
                 "[etcd]") {
  if (skipped) return;
  auto backend = Replica();
  // The first claim that carries a max_lead narrows the bound (up to 1.2 s) before it is
  // judged; the claim the test times comes after it, with one Date of its own.
  auto first = Req("trigger-first", NowUnix() - 1, "node-a", "tok-first");
  first.max_lead = 0ms;
  first.forbid_overlap = false;
  CHECK(MustClaim(*backend, first).status == ClaimStatus::kWon);
  CheckNextSecondEarly(*backend, "trigger-ahead");
}

TEST_CASE_METHOD(Member,
                 "etcd: a claimer idle for more than a minute (the bound's window) still "
                 "refuses a replica under a second ahead: its Dates keep coming",
                 "[etcd]") {
  if (skipped) return;
  auto backend = Replica();
  (void)backend->StartupWarnings();
  // Dates older than a minute no longer count: without fresh ones the next claim would
  // be judged on its own Date alone, up to a second lenient.
  std::this_thread::sleep_for(62s);
  CheckNextSecondEarly(*backend, "idle-then-ahead");
}

TEST_CASE("etcd: bad URLs are refused and name the URL", "[etcd]") {
  for (const char* url : {"redis://127.0.0.1:2379", "etcd://", "etcd://h:99999", "etcd://h:x",
                          "etcd://h1:2379,,h2:2379", "etcd://u:pw@h:2379", "etcd://h:2379/path",
                          "etcd://h:2379?bogus=1"}) {
    EtcdOptions options;
    options.url = url;
    auto backend = NewEtcdBackend(options);
    REQUIRE_FALSE(backend);
    CHECK(backend.error().ToString().find("etcd ") == 0);
    CHECK(backend.error().ToString().find("pw") == std::string::npos);
  }
}

TEST_CASE("etcd: the registry opens etcd:// URLs; an unreachable member is an error", "[etcd]") {
  BackendOptions options;
  options.backend = "etcd";
  options.url = "etcd://127.0.0.1:" + std::to_string(tickd::testing::FreeLoopbackPort());
  options.op_timeout = 300ms;
  tickd::RealClock clock;
  const auto start = steady_clock::now();
  auto backend = OpenBackend(options, clock);
  REQUIRE_FALSE(backend);
  CHECK(steady_clock::now() - start < 2s);
  CHECK(backend.error().ToString().find("etcd") != std::string::npos);
}

TEST_CASE_METHOD(Member, "etcd: a member that cannot be reached passes the request to the next",
                 "[etcd]") {
  if (skipped) return;
  const int dead = tickd::testing::FreeLoopbackPort();
  auto b = Open("etcd://127.0.0.1:" + std::to_string(dead) +
                ",127.0.0.1:" + std::to_string(server.port()) + "?prefix=/failover/");
  const std::int64_t tick = NowUnix();
  const ClaimOutcome won = MustClaim(*b, Req("j", tick, "a", "tok-a"));
  CHECK(won.status == ClaimStatus::kWon);
  CHECK(won.fence > 0);
}

TEST_CASE_METHOD(Member,
                 "etcd: a paused member makes every call fail within op_timeout (fail closed)",
                 "[etcd]") {
  if (skipped) return;
  auto b = Replica(500ms);
  const std::int64_t tick = NowUnix();
  auto req = Req("paused", tick, "a", "tok-a");
  const ClaimOutcome won = MustClaim(*b, req);
  REQUIRE(won.status == ClaimStatus::kWon);

  server.Pause();
  const auto start = steady_clock::now();
  auto claim = b->Claim(Req("paused", tick + 1, "a", "tok-a1"));
  auto renew = b->Renew(HeldOf(req, won));
  const auto took = steady_clock::now() - start;
  server.Resume();
  CHECK_FALSE(claim);
  CHECK_FALSE(renew);
  CHECK(took < 1500ms);  // two calls, 500 ms each, plus slack

  // Once it answers again, the holder still holds its tick.
  CHECK(*b->Renew(HeldOf(req, won)) == RenewStatus::kRenewed);
}

TEST_CASE_METHOD(Member,
                 "etcd: across a restart the holder keeps its lease, a dead holder is taken over "
                 "within one lease after it, and fences keep growing",
                 "[etcd]") {
  if (skipped) return;
  const std::int64_t tick = NowUnix();
  auto live = Replica();
  auto dead = Replica();
  auto survivor = Replica();

  auto live_req = Req("kept", tick, "live", "tok-live");
  live_req.lease = 3s;
  const ClaimOutcome live_won = MustClaim(*live, live_req);
  REQUIRE(live_won.status == ClaimStatus::kWon);
  auto dead_req = Req("orphan", tick, "dead", "tok-dead");
  dead_req.lease = 3s;
  dead_req.recover = true;
  const ClaimOutcome dead_won = MustClaim(*dead, dead_req);
  REQUIRE(dead_won.status == ClaimStatus::kWon);
  dead.reset();  // the holder dies: nobody renews its lease any more

  server.Kill();
  REQUIRE(server.Start());
  const auto restarted = steady_clock::now();

  // The live holder renews through the restart (its client reconnects by itself): an
  // error while it reconnects is retried within the lease, as the watchdog does.
  auto renewed = live->Renew(HeldOf(live_req, live_won));
  while (!renewed && steady_clock::now() - restarted < 2500ms) {
    std::this_thread::sleep_for(100ms);
    renewed = live->Renew(HeldOf(live_req, live_won));
  }
  REQUIRE(renewed);
  CHECK(*renewed == RenewStatus::kRenewed);

  // The dead holder's tick: lost while etcd still counts its (restarted) lease, then
  // re-claimed with a higher fence, no later than one lease after the restart.
  auto take = Req("orphan", tick, "survivor", "tok-s");
  take.lease = 3s;
  take.recover = true;
  ClaimOutcome taken;
  do {
    taken = MustClaim(*survivor, take);
    if (taken.status == ClaimStatus::kWon) break;
    CHECK(taken.status == ClaimStatus::kLost);
    std::this_thread::sleep_for(100ms);
  } while (steady_clock::now() - restarted < 6s);
  REQUIRE(taken.status == ClaimStatus::kWon);
  // etcd's lessor checks expiry every 500 ms; the restart extends leases by their TTL.
  CHECK(steady_clock::now() - restarted < 3s + 1500ms);
  CHECK(taken.fence > dead_won.fence);  // fences grow per job (lock/backend.h)

  auto next = Req("kept", tick + 1, "survivor", "tok-next");
  next.forbid_overlap = false;
  const ClaimOutcome after = MustClaim(*survivor, next);
  REQUIRE(after.status == ClaimStatus::kWon);
  CHECK(after.fence > live_won.fence);
  // The live holder still owns its tick and completes it.
  CHECK(*live->Complete(HeldOf(live_req, live_won), Completion{"done", 0, 1ms}) ==
        CompleteStatus::kCompleted);
}

TEST_CASE_METHOD(TwoReplicas,
                 "etcd: a lease shorter than a second still expires (TTLs are whole seconds)",
                 "[etcd]") {
  if (skipped) return;
  const std::int64_t tick = NowUnix();
  auto first = Req("short", tick, "a", "tok-a");
  first.lease = 300ms;  // rounded up to etcd's 1 s
  first.recover = true;
  const ClaimOutcome won = MustClaim(*a, first);
  REQUIRE(won.status == ClaimStatus::kWon);
  auto second = Req("short", tick, "b", "tok-b");
  second.lease = 300ms;
  second.recover = true;
  CHECK(MustClaim(*b, second).status == ClaimStatus::kLost);  // the lease is still alive
  std::this_thread::sleep_for(2s);
  CHECK(MustClaim(*b, second).status == ClaimStatus::kWon);
}

TEST_CASE_METHOD(
    Member,
    "etcd: fences still grow after etcd starts over with a fresh data directory; claims "
    "are superseded by a later tick only while the head is there",
    "[etcd]") {
  if (skipped) return;
  const std::int64_t t0 = NowUnix();
  std::uint64_t last = 0;
  auto claim = [&](Backend& b, std::int64_t tick, const std::string& token) {
    auto req = Req("wiped", tick, "node-a", token);
    req.forbid_overlap = false;
    tickd::testing::MustWinHigher(b, req, last);
  };
  {
    auto a = Replica();
    for (int i = 0; i < 3; ++i) claim(*a, t0 + i, "tok-" + std::to_string(i));
    CHECK(MustClaim(*a, Req("wiped", t0 - 1, "node-b", "tok-old")).status ==
          ClaimStatus::kSuperseded);
  }
  server.Stop();
  std::filesystem::remove_all(server.dir() + "/data");
  std::this_thread::sleep_for(5ms);  // the clock moves past the old epoch
  REQUIRE(server.Start());
  auto b = Replica();
  // Everything is gone: the earlier tick can be claimed again, above every old fence.
  claim(*b, t0 - 1, "tok-after");
  claim(*b, t0, "tok-after-0");
}

TEST_CASE_METHOD(
    TwoReplicas,
    "etcd: the runs of a batch share its lease: completing some leaves the others held "
    "and renewable",
    "[etcd]") {
  if (skipped) return;
  const std::int64_t tick = NowUnix();
  std::vector<ClaimRequest> reqs;
  for (const char* job : {"x", "y", "z"}) {
    auto r = Req(job, tick, "node-a", std::string("tok-") + job);
    r.lease = 2s;
    r.recover = true;
    r.observe = true;
    reqs.push_back(r);
  }
  const auto outs = a->ClaimBatch(reqs);
  for (const auto& o : outs) {
    REQUIRE(o);
    REQUIRE(o->status == ClaimStatus::kWon);
    CHECK(o->observed);  // the batch wrote the observations: no Record call needed
  }
  CHECK(*a->Complete(HeldOf(reqs[0], *outs[0]), Completion{"done", 0, 1ms}) ==
        CompleteStatus::kCompleted);
  CHECK(*a->Complete(HeldOf(reqs[1], *outs[1]), Completion{"done", 0, 1ms}) ==
        CompleteStatus::kCompleted);
  // The shared lease was not revoked with the first two: z is still held, for longer
  // than one lease while it renews.
  for (int i = 0; i < 6; ++i) {
    std::this_thread::sleep_for(500ms);
    CHECK(*a->Renew(HeldOf(reqs[2], *outs[2])) == RenewStatus::kRenewed);
  }
  auto take = Req("z", tick, "node-b", "tok-b");
  take.recover = true;
  const ClaimOutcome held = MustClaim(*b, take);
  CHECK(held.status == ClaimStatus::kLost);
  CHECK(held.holder_running);
  CHECK(*a->Complete(HeldOf(reqs[2], *outs[2]), Completion{"done", 0, 1ms}) ==
        CompleteStatus::kCompleted);
}

TEST_CASE_METHOD(
    Member,
    "etcd: a run of a batch's first chunk that ends while later chunks still claim does "
    "not revoke the lease they claim under",
    "[etcd]") {
  if (skipped) return;
  const std::int64_t tick = NowUnix();
  auto a = Replica(5s);
  // More claims than one txn carries (791): at least two chunks under one lease.
  std::vector<ClaimRequest> reqs;
  for (int i = 0; i < 1000; ++i) {
    auto r = Req("chunked-" + std::to_string(i), tick, "node-a", "tok-" + std::to_string(i));
    r.lease = 3s;
    r.forbid_overlap = false;
    reqs.push_back(r);
  }
  // Each win completes at once, inside the answer (a run that ends before the next
  // chunk is sent, as an in-process job of a busy instant does).
  std::map<std::size_t, ClaimStatus> status;
  a->ClaimBatchAsAnswered(reqs, [&](std::size_t i, tickd::Result<ClaimOutcome> out) {
    INFO("claim " << i << ": " << (out ? "" : out.error().ToString()));
    REQUIRE(out);
    status[i] = out->status;
    if (out->status == ClaimStatus::kWon) {
      CHECK(*a->Complete(HeldOf(reqs[i], *out), Completion{"done", 0, 1ms}) ==
            CompleteStatus::kCompleted);
    }
  });
  REQUIRE(status.size() == reqs.size());
  for (const auto& [i, st] : status) {
    INFO("claim " << i);
    CHECK(st == ClaimStatus::kWon);
  }
}

namespace {

// A counter of the member's /metrics (0 when it cannot be read: the checks then fail).
double Metric(const EtcdServer& server, const std::string& name) {
  const std::string answer = server.Get("/metrics");
  const auto at = answer.find("\n" + name + " ");
  return at == std::string::npos ? 0 : std::stod(answer.substr(at + name.size() + 2));
}

// Puts key = value with etcdctl (keys as an older tickd wrote them).
void EtcdctlPut(const EtcdServer& server, const std::string& key, const std::string& value) {
  const std::string cmd = "ETCDCTL_API=3 etcdctl --endpoints=127.0.0.1:" +
                          std::to_string(server.port()) + " put -- '" + key + "' '" + value +
                          "' >/dev/null";
  REQUIRE(std::system(cmd.c_str()) == 0);
}

// How many keys start with `prefix`.
int EtcdctlCount(const EtcdServer& server, const std::string& prefix) {
  const std::string cmd = "ETCDCTL_API=3 etcdctl --endpoints=127.0.0.1:" +
                          std::to_string(server.port()) + " get --prefix --keys-only -- '" +
                          prefix + "' | grep -c .";
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  int n = 0;
  if (std::fscanf(p, "%d", &n) != 1) n = 0;
  ::pclose(p);
  return n;
}

// How many leases the member has (`etcdctl lease list`: "found N leases").
int EtcdctlLeases(const EtcdServer& server) {
  const std::string cmd = "ETCDCTL_API=3 etcdctl --endpoints=127.0.0.1:" +
                          std::to_string(server.port()) + " lease list | head -1";
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  int n = -1;
  if (std::fscanf(p, "found %d leases", &n) != 1) n = -1;
  ::pclose(p);
  return n;
}

std::string Pad20(std::int64_t t) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%020lld", static_cast<long long>(t));
  return buf;
}

// The Txn requests the member has handled (through the gateway too).
const std::string kTxns =
    R"(grpc_server_started_total{grpc_method="Txn",grpc_service="etcdserverpb.KV",)"
    R"(grpc_type="unary"})";

// Each replica's outcome in a tick's ledger.
std::map<std::string, std::string> OutcomesByNode(const TickHistory& t) {
  std::map<std::string, std::string> by_node;
  for (const Observation& o : t.observations) by_node[o.node] = o.outcome;
  return by_node;
}

}  // namespace

TEST_CASE_METHOD(Member,
                 "etcd: under a long prefix or long names a batch of claims goes in requests "
                 "etcd accepts",
                 "[etcd]") {
  if (skipped) return;
  // A request holds up to 791 claims; as many of 64-byte job and node names under a
  // 600-byte prefix would be about 5 MB, past etcd's --max-request-bytes (1.5 MiB):
  // ClaimBytes puts fewer in each. Half of them forbid overlap (the run key's compare,
  // put and failure range make a claim's txn its longest), tokens and hashes as the
  // daemon makes them. And 900 claims of short names under the default prefix: more
  // than one request holds.
  struct Case {
    std::string prefix;
    std::size_t name_bytes;
    int jobs;
  };
  for (const Case& c : {Case{"/" + std::string(598, 'p') + "/", 64, 400},
                        Case{"/tickd/", 0, 900}}) {
    auto a = Open(server.url() + "?prefix=" + c.prefix, 10s);
    auto b = Open(server.url() + "?prefix=" + c.prefix, 10s);
    const auto named = [&](std::string name) {
      if (name.size() < c.name_bytes) name += std::string(c.name_bytes - name.size(), 'n');
      return name;
    };
    const std::int64_t tick = NowUnix();
    std::vector<ClaimRequest> mine, theirs;
    for (int j = 0; j < c.jobs; ++j) {
      const std::string job = named("long-" + std::to_string(j) + "-");
      auto r = Req(job, tick, named("node-a"), std::string(32, 'a') + std::to_string(j));
      r.config_hash = std::string(64, 'h') + "@2024a";
      r.forbid_overlap = j % 2 == 0;
      mine.push_back(r);
      auto l = Req(job, tick, named("node-b"), std::string(32, 'b') + std::to_string(j));
      l.config_hash = r.config_hash;
      l.forbid_overlap = r.forbid_overlap;
      l.observe = true;
      l.likely_decided = true;
      theirs.push_back(l);
    }
    const auto won = a->ClaimBatch(mine);
    std::vector<CompleteRequest> completes;
    for (std::size_t j = 0; j < won.size(); ++j) {
      REQUIRE(won[j]);
      CHECK(won[j]->status == ClaimStatus::kWon);
      completes.push_back(CompleteRequest{HeldOf(mine[j], *won[j]), Completion{"done", 0, 1ms}});
    }
    for (const auto& o : b->ClaimBatch(theirs)) {
      REQUIRE(o);
      CHECK(o->status == ClaimStatus::kLost);
      CHECK(o->observed);
    }
    for (const auto& done : a->CompleteBatch(completes)) {
      REQUIRE(done);
      CHECK(*done == CompleteStatus::kCompleted);
    }
  }
}

TEST_CASE_METHOD(Member,
                 "etcd: a batch's lease is revoked after its last claim completes, not before",
                 "[etcd]") {
  if (skipped) return;
  auto a = Replica();
  const std::int64_t tick = NowUnix();
  std::vector<ClaimRequest> reqs;
  for (const char* job : {"rv-1", "rv-2"}) {
    auto r = Req(job, tick, "node-a", std::string("tok-") + job);
    r.lease = 60s;  // it cannot expire meanwhile: only a revoke ends it
    r.forbid_overlap = false;
    reqs.push_back(r);
  }
  const auto won = a->ClaimBatch(reqs);
  for (const auto& o : won) {
    REQUIRE(o);
    REQUIRE(o->status == ClaimStatus::kWon);
  }
  CHECK(EtcdctlLeases(server) == 1);
  CHECK(*a->Complete(HeldOf(reqs[0], *won[0]), Completion{"done", 0, 1ms}) ==
        CompleteStatus::kCompleted);
  std::this_thread::sleep_for(300ms);
  CHECK(EtcdctlLeases(server) == 1);  // rv-2 still holds it
  CHECK(*a->Complete(HeldOf(reqs[1], *won[1]), Completion{"done", 0, 1ms}) ==
        CompleteStatus::kCompleted);
  // The revoke runs on a thread of its own after the complete answered.
  int leases = -1;
  for (int i = 0; i < 100 && leases != 0; ++i) {
    std::this_thread::sleep_for(100ms);
    leases = EtcdctlLeases(server);
  }
  CHECK(leases == 0);
}

TEST_CASE_METHOD(TwoReplicas,
                 "etcd: a complete deletes the lease end `u` that a renewal through its handle "
                 "wrote; one written through another handle stays, beside the done record",
                 "[etcd]") {
  if (skipped) return;
  const std::int64_t tick = NowUnix();
  const auto until_key = [&](const std::string& job) {
    return "/tickd/job/" + job + "/tick/" + Pad20(tick) + "/u";
  };
  // Renewed through a, the handle that won: its complete deletes `u`.
  const ClaimRequest mine = Req("u-here", tick, "node-a", "tok-here");
  const ClaimOutcome won_here = MustClaim(*a, mine);
  REQUIRE(won_here.status == ClaimStatus::kWon);
  const HeldClaim here = HeldOf(mine, won_here);
  REQUIRE(*a->Renew(here) == RenewStatus::kRenewed);
  CHECK(EtcdctlCount(server, until_key("u-here")) == 1);
  REQUIRE(*a->Complete(here, Completion{"done", 0, 1ms}) == CompleteStatus::kCompleted);
  CHECK(EtcdctlCount(server, until_key("u-here")) == 0);
  // Renewed through b: a does not know of it and completes without a read; the dead
  // `u` stays until the tick is pruned, and the tick is done all the same.
  const ClaimRequest elsewhere = Req("u-there", tick, "node-a", "tok-there");
  const ClaimOutcome won_there = MustClaim(*a, elsewhere);
  REQUIRE(won_there.status == ClaimStatus::kWon);
  const HeldClaim there = HeldOf(elsewhere, won_there);
  REQUIRE(*b->Renew(there) == RenewStatus::kRenewed);
  REQUIRE(*a->Complete(there, Completion{"done", 0, 1ms}) == CompleteStatus::kCompleted);
  CHECK(EtcdctlCount(server, until_key("u-there")) == 1);
  auto history = b->History("u-there", 1);
  REQUIRE(history);
  REQUIRE(history->size() == 1);
  CHECK((*history)[0].state == "done");
  auto running = b->ListRunning();
  REQUIRE(running);
  for (const RunningClaim& c : *running) CHECK(c.job != "u-there");
}

TEST_CASE_METHOD(
    TwoReplicas,
    "etcd: a batch's likely decided claims are probed and observed as lost in one txn per "
    "791, nested two levels deep, and the ledger shows them",
    "[etcd]") {
  if (skipped) return;
  const std::int64_t tick = NowUnix();
  // 900 jobs: two chunks (791 + 109), the first one's 791 probes (a range, an
  // observation and a job name each: plain ops) in 38 nested txns of up to 63.
  std::vector<ClaimRequest> mine, theirs;
  for (int j = 0; j < 900; ++j) {
    const std::string job = "obs-" + std::to_string(j);
    auto r = Req(job, tick, "node-a", "tok-a" + std::to_string(j));
    r.forbid_overlap = false;
    r.observe = true;
    mine.push_back(r);
    auto l = Req(job, tick, "node-b", "tok-b" + std::to_string(j));
    l.forbid_overlap = false;
    l.observe = true;
    l.likely_decided = true;  // read by the record alone
    theirs.push_back(l);
  }
  for (const auto& o : a->ClaimBatch(mine)) {
    REQUIRE(o);
    CHECK(o->status == ClaimStatus::kWon);
  }
  const double before = Metric(server, kTxns);
  for (const auto& o : b->ClaimBatch(theirs)) {
    REQUIRE(o);
    CHECK(std::string(ClaimStatusName(o->status)) == "lost");
    CHECK(o->holder_node == "node-a");
    CHECK(o->observed);
  }
  // Per chunk one txn that probes the records and observes the lost claims; no read txn
  // and no observation txn besides.
  CHECK(Metric(server, kTxns) == before + 2);
  for (const int j : {0, 450, 790, 791, 899}) {
    auto history = a->History("obs-" + std::to_string(j), 5);
    REQUIRE(history);
    REQUIRE(history->size() == 1);
    std::map<std::string, std::string> by_node = OutcomesByNode(history->front());
    CHECK(by_node["node-a"] == "won");
    CHECK(by_node["node-b"] == "lost");
  }
}

TEST_CASE_METHOD(
    Member,
    "etcd: a likely decided claim sent again after it won answers won, and its probe's "
    "observation of a loss is taken back",
    "[etcd]") {
  if (skipped) return;
  auto a = Replica();
  const std::int64_t tick = NowUnix();
  std::vector<ClaimRequest> first;
  for (int j = 0; j < 5; ++j) {
    auto r = Req("again-" + std::to_string(j), tick, "node-a", "tok-a" + std::to_string(j));
    r.forbid_overlap = false;
    r.observe = true;
    first.push_back(r);
  }
  for (const auto& o : a->ClaimBatch(first)) {
    REQUIRE(o);
    CHECK(o->status == ClaimStatus::kWon);
  }
  // The same requests (tokens fresh per claim are the contract; this breaks it), now
  // probed: each finds its own record.
  std::vector<ClaimRequest> again = first;
  for (auto& r : again) r.likely_decided = true;
  for (const auto& o : a->ClaimBatch(again)) {
    REQUIRE(o);
    CHECK(o->status == ClaimStatus::kWon);
  }
  for (int j = 0; j < 5; ++j) {
    auto history = a->History("again-" + std::to_string(j), 5);
    REQUIRE(history);
    REQUIRE(history->size() == 1);
    REQUIRE(history->front().observations.size() == 1);
    CHECK(history->front().observations.front().node == "node-a");
    CHECK(history->front().observations.front().outcome == "won");
  }
}

TEST_CASE_METHOD(
    TwoReplicas,
    "etcd: a likely decided claim whose owner has not claimed yet is probed, its "
    "observation of a loss taken back, read in full and won; the ledger shows it won",
    "[etcd]") {
  if (skipped) return;
  const std::int64_t tick = NowUnix();
  // Jobs 0-2: node-a claims first (their probes find a record: lost). Jobs 3-5: nobody
  // has (their probes find none, write an observation in vain; it must go again).
  for (int j = 0; j < 3; ++j) {
    auto r = Req("open-" + std::to_string(j), tick, "node-a", "tok-a" + std::to_string(j));
    r.forbid_overlap = false;
    r.observe = true;
    auto won = a->Claim(r);
    REQUIRE(won);
    CHECK(won->status == ClaimStatus::kWon);
  }
  std::vector<ClaimRequest> theirs;
  for (int j = 0; j < 6; ++j) {
    auto l = Req("open-" + std::to_string(j), tick, "node-b", "tok-b" + std::to_string(j));
    l.forbid_overlap = false;
    l.observe = true;
    l.likely_decided = true;
    theirs.push_back(l);
  }
  const auto answers = b->ClaimBatch(theirs);
  for (int j = 0; j < 6; ++j) {
    const auto& o = answers[static_cast<std::size_t>(j)];
    REQUIRE(o);
    CHECK(std::string(ClaimStatusName(o->status)) == (j < 3 ? "lost" : "won"));
    if (j < 3) CHECK(o->holder_node == "node-a");
  }
  for (int j = 0; j < 6; ++j) {
    auto history = a->History("open-" + std::to_string(j), 5);
    REQUIRE(history);
    REQUIRE(history->size() == 1);
    std::map<std::string, std::string> by_node = OutcomesByNode(history->front());
    if (j < 3) {
      CHECK(by_node["node-a"] == "won");
      CHECK(by_node["node-b"] == "lost");
    } else {
      CHECK(history->front().winner == "node-b");
      CHECK(by_node.count("node-a") == 0);
      CHECK(by_node["node-b"] == "won");
    }
  }
}

TEST_CASE_METHOD(
    TwoReplicas,
    "etcd: a replica that saw a job's head claims its next ticks without a read; a head "
    "moved by another replica answers lost or superseded from the failed claim itself",
    "[etcd]") {
  if (skipped) return;
  const std::int64_t t0 = NowUnix();
  std::uint64_t last = 0;
  const auto req = [&](std::int64_t t, const std::string& node, const std::string& token) {
    auto r = Req("blind", t, node, token);
    r.forbid_overlap = false;
    r.observe = true;
    return r;
  };
  tickd::testing::MustWinHigher(*a, req(t0, "node-a", "tok-0"), last);  // reads: no head seen
  const double before = Metric(server, kTxns);
  REQUIRE(before > 0);
  const auto won1 = tickd::testing::MustWinHigher(*a, req(t0 + 1, "node-a", "tok-1"), last);
  const auto r2 = req(t0 + 2, "node-a", "tok-2");
  const auto won2 = tickd::testing::MustWinHigher(*a, r2, last);
  CHECK(won2.observed);  // in the record: nothing more to write
  // Neither claim nor the complete read anything first: one txn each.
  CHECK(*a->Complete(HeldOf(r2, won2), Completion{"done", 0, 1ms}) ==
        CompleteStatus::kCompleted);
  CHECK(Metric(server, kTxns) == before + 3);
  (void)won1;

  // Another replica moves the head: the blind claim of the same tick fails, and its
  // failure branch names the winner.
  tickd::testing::MustWinHigher(*b, req(t0 + 3, "node-b", "tok-b3"), last);
  const ClaimOutcome lost = MustClaim(*a, req(t0 + 3, "node-a", "tok-3"));
  CHECK(std::string(ClaimStatusName(lost.status)) == "lost");
  CHECK(lost.holder_node == "node-b");
  CHECK(lost.observed);
  // It saw the new head there: the next tick is won blind, above b's fence.
  tickd::testing::MustWinHigher(*a, req(t0 + 4, "node-a", "tok-4"), last);
  // A later tick claimed elsewhere: an earlier first claim is superseded.
  tickd::testing::MustWinHigher(*b, req(t0 + 6, "node-b", "tok-b6"), last);
  const ClaimOutcome superseded = MustClaim(*a, req(t0 + 5, "node-a", "tok-5"));
  CHECK(std::string(ClaimStatusName(superseded.status)) == "superseded");
  CHECK(superseded.holder_tick_unix == t0 + 6);
  // A claim the head moved under (b claimed t0 + 7 after a last saw the head) still wins
  // its own tick once it read.
  tickd::testing::MustWinHigher(*b, req(t0 + 7, "node-b", "tok-b7"), last);
  const auto late = req(t0 + 8, "node-a", "tok-8");
  tickd::testing::MustWinHigher(*a, late, last);

  // The ledger: the winner's observation from its record, the loser's own key.
  auto history = b->History("blind", 20);
  REQUIRE(history);
  bool seen3 = false;
  for (const TickHistory& t : *history) {
    if (t.tick_unix != t0 + 3) continue;
    seen3 = true;
    CHECK(t.winner == "node-b");
    std::map<std::string, std::string> by_node = OutcomesByNode(t);
    CHECK(by_node["node-b"] == "won");
    CHECK(by_node["node-a"] == "lost");
  }
  CHECK(seen3);
}

TEST_CASE_METHOD(
    Member, "etcd: a replica that saw a job's head still hears store-reset once etcd lost its data",
    "[etcd]") {
  if (skipped) return;
  auto a = Replica();
  const std::int64_t t0 = NowUnix();
  std::uint64_t last = 0;
  auto first = Req("amnesia", t0, "node-a", "tok-0");
  first.forbid_overlap = false;
  tickd::testing::MustWinHigher(*a, first, last);
  auto second = Req("amnesia", t0 + 1, "node-a", "tok-1");
  second.forbid_overlap = false;
  tickd::testing::MustWinHigher(*a, second, last);  // the head is now seen (cached)

  server.Stop();
  std::filesystem::remove_all(server.dir() + "/data");
  REQUIRE(server.Start());
  // Replies from before the restart still feed the clock reading: the claim goes blind,
  // and its compare (the head as seen) fails on the empty store.
  auto next = Req("amnesia", t0 + 2, "node-a", "tok-2");
  next.forbid_overlap = false;
  next.known_tick = t0 + 1;
  ClaimOutcome out;
  for (int i = 0; i < 50; ++i) {  // the member may still elect itself
    auto r = a->Claim(next);
    if (r) {
      out = *r;
      break;
    }
    std::this_thread::sleep_for(100ms);
  }
  CHECK(std::string(ClaimStatusName(out.status)) == "store-reset");
  CHECK(out.holder_tick_unix == 0);
  // Knowing nothing later, the claim wins, above every fence before the loss.
  next.known_tick = 0;
  next.owner_token = "tok-3";
  tickd::testing::MustWinHigher(*a, next, last);
}

TEST_CASE_METHOD(
    Member,
    "etcd: ticks an older tickd wrote (index, lease end, the winner's own observation key) "
    "are read, listed, released and pruned beside the lean ones",
    "[etcd]") {
  if (skipped) return;
  auto a = Replica();
  const std::int64_t t0 = NowUnix() - 120;
  const std::string job = "/tickd/job/mixed/";
  // An older tickd's done tick t0 (record, index, job name, winner's and loser's keys)…
  const std::string done = job + "tick/" + Pad20(t0) + "/";
  EtcdctlPut(server, done + "r",
             R"({"state":"done","node":"old-a","owner":"","hash":"h-old","fence":4096,)"
             R"("lease":"0","outcome":"success","exit":0,"duration_ms":5})");
  EtcdctlPut(server, done + "w/old-a",
             R"({"outcome":"won","wall_ms":1000,"hash":"h-old","fence":4096})");
  EtcdctlPut(server, done + "w/old-b",
             R"({"outcome":"lost","wall_ms":1001,"hash":"h-old","fence":0})");
  EtcdctlPut(server, job + "idx/" + Pad20(t0), "");
  EtcdctlPut(server, "/tickd/jobs/mixed", "");
  // …and its running tick t0 + 1 whose holder died (no lease key; lease end in u).
  const std::string running = job + "tick/" + Pad20(t0 + 1) + "/";
  EtcdctlPut(server, running + "r",
             R"({"state":"running","node":"old-a","owner":"tok-old","hash":"h-old",)"
             R"("fence":8192,"lease":"0"})");
  EtcdctlPut(server, running + "u", "1000");
  EtcdctlPut(server, job + "idx/" + Pad20(t0 + 1), "");

  // A lean tick of this tickd, won and observed by a second replica.
  auto b = Replica();
  auto mine = Req("mixed", t0 + 2, "new-a", "tok-new");
  mine.forbid_overlap = false;
  mine.starting_deadline = std::nullopt;
  mine.observe = true;
  const ClaimOutcome mine_won = MustClaim(*a, mine);
  REQUIRE(mine_won.status == ClaimStatus::kWon);
  auto theirs = mine;
  theirs.node = "new-b";
  theirs.owner_token = "tok-new-b";
  CHECK(MustClaim(*b, theirs).status == ClaimStatus::kLost);

  auto history = b->History("mixed", 10);
  REQUIRE(history);
  REQUIRE(history->size() == 3);
  CHECK(history->at(0).tick_unix == t0 + 2);
  CHECK(history->at(2).tick_unix == t0);
  std::map<std::string, Observation> old_obs, new_obs;
  for (const Observation& o : history->at(2).observations) old_obs[o.node] = o;
  for (const Observation& o : history->at(0).observations) new_obs[o.node] = o;
  CHECK(history->at(2).winner == "old-a");
  CHECK(old_obs.size() == 2);
  CHECK(old_obs["old-a"].outcome == "won");
  CHECK(old_obs["old-b"].outcome == "lost");
  CHECK(new_obs.size() == 2);
  CHECK(new_obs["new-a"].outcome == "won");
  CHECK(new_obs["new-a"].fence == history->at(0).fence);
  CHECK(new_obs["new-b"].outcome == "lost");
  auto newest = b->History("mixed", 1);
  REQUIRE(newest);
  REQUIRE(newest->size() == 1);
  CHECK(newest->front().tick_unix == t0 + 2);
  auto every = b->History("", -1);
  REQUIRE(every);
  CHECK(every->size() == 3);

  // The old running tick: listed without a live holder, released, pruned with its index.
  auto running_now = a->ListRunning();
  REQUIRE(running_now);
  bool listed = false;
  for (const RunningClaim& c : *running_now) {
    if (c.job == "mixed" && c.tick_unix == t0 + 1) {
      listed = true;
      CHECK_FALSE(c.holder_alive);
    }
  }
  CHECK(listed);
  CHECK(*a->ForceRelease("mixed", t0 + 1) == ForceReleaseStatus::kReleased);
  CHECK(*a->Complete(HeldOf(mine, mine_won), Completion{"done", 0, 1ms}) ==
        CompleteStatus::kCompleted);
  auto pruned = a->Prune(tickd::WallTime(std::chrono::seconds(t0 + 3)));
  REQUIRE(pruned);
  CHECK(*pruned == 3);
  CHECK(EtcdctlCount(server, job + "tick/") == 0);
  CHECK(EtcdctlCount(server, job + "idx/") == 0);
}

namespace {

// Claims of `jobs` distinct jobs at `tick` by node-a, in batches of 100; the first
// error's text, or "" when every batch answered.
std::string ClaimUntilError(Backend& b, int jobs, std::int64_t tick) {
  for (int first = 0; first < jobs; first += 100) {
    std::vector<ClaimRequest> batch;
    for (int j = first; j < std::min(jobs, first + 100); ++j) {
      auto r = Req("sized-" + std::to_string(j), tick, "node-a", "tok-" + std::to_string(j));
      r.forbid_overlap = false;
      batch.push_back(r);
    }
    for (const auto& answer : b.ClaimBatch(batch)) {
      if (!answer) return answer.error().ToString();
    }
  }
  return "";
}

bool AnyContains(const std::vector<std::string>& texts, const std::string& part) {
  return std::any_of(texts.begin(), texts.end(),
                     [&](const std::string& t) { return t.find(part) != std::string::npos; });
}

}  // namespace

TEST_CASE(
    "etcd: a member whose db reached its quota refuses claims with an error that says "
    "what to do",
    "[etcd]") {
  if (!EtcdServer::Available()) {
    WARN("etcd is not installed: skipped");
    return;
  }
  // A quota a few hundred claims fill (a job-tick is about 1.6 KB of etcd's db).
  EtcdServer server(std::nullopt, {"--quota-backend-bytes=1048576"});
  REQUIRE(server.running());
  auto a = Open(server.url());
  const std::string error = ClaimUntilError(*a, 5'000, NowUnix());
  INFO(error);
  REQUIRE_FALSE(error.empty());
  CHECK(error.find("database space exceeded") != std::string::npos);
  CHECK(error.find("--quota-backend-bytes") != std::string::npos);
  CHECK(error.find("compacted") != std::string::npos);
}

TEST_CASE_METHOD(Member,
                 "etcd: at start, a store that never compacted its history is warned about; "
                 "once compacted it is not",
                 "[etcd]") {
  if (skipped) return;
  auto a = Replica();
  REQUIRE(ClaimUntilError(*a, 30, NowUnix()).empty());
  CHECK_FALSE(AnyContains(a->StartupWarnings(), "compacted"));  // a db far below 256 MiB
  EtcdOptions options;
  options.url = server.url();
  options.uncompacted_warn_bytes = 1;  // the default, 256 MiB, is too much for a test
  auto opened = NewEtcdBackend(options);
  REQUIRE(opened);
  Backend& b = **opened;
  const std::vector<std::string> warned = b.StartupWarnings();
  std::string all;
  for (const std::string& w : warned) all += w + "\n";
  INFO(all);
  CHECK(AnyContains(warned, "never compacted its history"));
  CHECK(AnyContains(warned, "--auto-compaction-retention"));

  // Compacted up to the newest revision: revision 1 is gone, and so is the warning.
  const std::string cmd =
      "ETCDCTL_API=3 etcdctl --endpoints=127.0.0.1:" + std::to_string(server.port()) +
      " compact $(ETCDCTL_API=3 etcdctl --endpoints=127.0.0.1:" + std::to_string(server.port()) +
      " endpoint status -w json | sed 's/.*\"revision\":\\([0-9]*\\).*/\\1/')"
      " >/dev/null";
  REQUIRE(std::system(cmd.c_str()) == 0);
  CHECK_FALSE(AnyContains(b.StartupWarnings(), "compacted"));
}
