// What the conformance suite cannot say about the ZooKeeper backend: sessions (an
// expired session loses its leases, and the survivor takes over at once), a server
// crash and restart (durable fences and records), a restart without its data (fences
// still grow; the same backend connects again and hears store-reset), failing closed
// within op_timeout (closed port, frozen server), holder_running, the URL forms, and a
// late renewal that must not revive an expired lease.
// One server for the whole binary (tests/zookeeper/zookeeper_server.h), a chroot per
// case.
#include "lock/zookeeper/zookeeper_backend.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <optional>
#include <thread>
#include <vector>

#include "tests/support/claims.h"
#include "tests/zookeeper/zookeeper_server.h"

using namespace std::chrono_literals;
using std::chrono::steady_clock;
using tickd::lock::ClaimOutcome;
using tickd::lock::ClaimRequest;
using tickd::lock::ClaimStatus;
using tickd::lock::CompleteStatus;
using tickd::lock::Completion;
using tickd::lock::HeldClaim;
using tickd::lock::RenewStatus;
using tickd::testing::NowUnix;
using tickd::testing::HeldOf;
using tickd::testing::ZookeeperServer;

namespace {

bool Available() {
  if (!ZookeeperServer::Available()) WARN("zookeeper or java not installed: skipped");
  return ZookeeperServer::Available() && ZookeeperServer::Shared().running();
}

std::unique_ptr<tickd::lock::Backend> Open(const std::string& chroot,
                                           std::chrono::milliseconds session_timeout = 30s,
                                           std::chrono::milliseconds op_timeout = 2s) {
  tickd::lock::ZookeeperOptions options;
  options.url = ZookeeperServer::Shared().url(chroot);
  options.session_timeout = session_timeout;
  options.op_timeout = op_timeout;
  auto backend = tickd::lock::NewZookeeperBackend(options);
  if (!backend) FAIL(backend.error().ToString());
  return std::move(*backend);
}

// A claim of a recover: true job with a 30 s lease.
ClaimRequest Req(const std::string& job, std::int64_t tick, const std::string& node,
                 const std::string& token) {
  ClaimRequest req = tickd::testing::Req(job, tick, node, token);
  req.lease = 30s;
  req.recover = true;
  return req;
}

template <typename F>
bool Eventually(F done, std::chrono::milliseconds timeout) {
  const auto until = steady_clock::now() + timeout;
  while (steady_clock::now() < until) {
    if (done()) return true;
    std::this_thread::sleep_for(50ms);
  }
  return done();
}

// The server stopped, its dataDir emptied, started again on the same port: every
// chroot of the binary is gone, and the zxids start over below what clients saw.
void RestartWithoutData() {
  ZookeeperServer& server = ZookeeperServer::Shared();
  server.Stop();
  std::filesystem::remove_all(server.dir() + "/data");
  std::filesystem::create_directories(server.dir() + "/data");
  std::this_thread::sleep_for(5ms);  // the clock moves past the old epoch
  REQUIRE(server.Start());
}

}  // namespace

TEST_CASE("zookeeper: an expired session loses its leases; a recover claimer takes over at once",
          "[zookeeper]") {
  if (!Available()) return;
  const std::string chroot = ZookeeperServer::NextChroot();
  // A's session: 1.5 s, so it expires while the server is frozen for 3 s.
  auto a = Open(chroot, 1500ms, 500ms);
  auto b = Open(chroot);
  const std::int64_t tick = NowUnix();
  const auto req_a = Req("expiring", tick, "node-a", "tok-a");
  const ClaimOutcome won_a = *a->Claim(req_a);
  REQUIRE(won_a.status == ClaimStatus::kWon);
  const HeldClaim held_a = HeldOf(req_a, won_a);
  REQUIRE(*a->Renew(held_a) == RenewStatus::kRenewed);
  const auto last_contact = std::chrono::steady_clock::now();

  ZookeeperServer::Shared().Pause();
  // Silent server: no answer is not a renewal, but not yet a loss either — as long as
  // less than 2/3 of the 1.5 s session passed since the last contact (a loaded machine
  // can make this call itself last past that, and then kLost is the right answer).
  auto during = a->Renew(held_a);
  if (std::chrono::steady_clock::now() - last_contact < 1000ms) {
    CHECK_FALSE(during.has_value());
  } else {
    CHECK((!during.has_value() || *during == RenewStatus::kLost));
  }
  // ...until 2/3 of the session timeout passed without an answer: the server may
  // expire the session from then on, so the lease is lost.
  std::this_thread::sleep_for(1200ms);
  auto later = a->Renew(held_a);
  REQUIRE(later.has_value());
  CHECK(*later == RenewStatus::kLost);
  std::this_thread::sleep_for(1800ms);
  ZookeeperServer::Shared().Resume();

  // The expired session's ephemeral lease node is gone: B re-claims now, long before
  // the 30 s lease would have run out.
  auto req_b = Req("expiring", tick, "node-b", "tok-b");
  ClaimOutcome won_b;
  CHECK(Eventually(
      [&] {
        auto out = b->Claim(req_b);
        if (out) won_b = *out;
        return out && out->status == ClaimStatus::kWon;
      },
      10s));
  CHECK(won_b.fence > won_a.fence);
  CHECK(*a->Renew(held_a) == RenewStatus::kLost);
  // A opened a new session on its own and works again, but cannot touch B's claim.
  CHECK(Eventually(
      [&] {
        return a->Complete(held_a, Completion{"done", 0, 1ms}).has_value();
      },
      5s));
  CHECK(*a->Complete(held_a, Completion{"done", 0, 1ms}) == CompleteStatus::kNotOwner);
  const ClaimOutcome seen = *a->Claim(Req("expiring", tick, "node-a", "tok-a2"));
  CHECK(seen.status == ClaimStatus::kLost);
  CHECK(seen.holder_node == "node-b");
  CHECK(seen.holder_running);
  REQUIRE(*b->Complete(HeldOf(req_b, won_b), Completion{"done", 0, 1ms}) ==
          CompleteStatus::kCompleted);
  const ClaimOutcome done = *a->Claim(Req("expiring", tick, "node-a", "tok-a3"));
  CHECK(done.status == ClaimStatus::kLost);
  CHECK_FALSE(done.holder_running);
}

TEST_CASE("zookeeper: a crash and restart of the server keeps records, and fences go on rising",
          "[zookeeper]") {
  if (!Available()) return;
  const std::string chroot = ZookeeperServer::NextChroot();
  auto a = Open(chroot, 30s, 1s);
  const std::int64_t t0 = NowUnix();
  auto first = Req("restarted", t0, "node-a", "tok-1");
  first.forbid_overlap = false;
  const ClaimOutcome won1 = *a->Claim(first);
  REQUIRE(won1.status == ClaimStatus::kWon);
  REQUIRE(*a->Complete(HeldOf(first, won1), Completion{"done", 0, 1ms}) ==
          CompleteStatus::kCompleted);

  ZookeeperServer::Shared().Kill();
  auto second = Req("restarted", t0 + 1, "node-a", "tok-2");
  second.forbid_overlap = false;
  const auto sent = steady_clock::now();
  CHECK_FALSE(a->Claim(second).has_value());  // fail closed
  CHECK(steady_clock::now() - sent < 2s);
  REQUIRE(ZookeeperServer::Shared().Start());

  ClaimOutcome won2;
  CHECK(Eventually(
      [&] {
        auto out = a->Claim(second);
        if (out) won2 = *out;
        return out.has_value();
      },
      10s));
  CHECK(won2.status == ClaimStatus::kWon);
  CHECK(won2.fence > won1.fence);
  auto fresh = Open(chroot);
  const ClaimOutcome again = *fresh->Claim(Req("restarted", t0, "node-b", "tok-3"));
  CHECK(again.status == ClaimStatus::kLost);  // the done tick survived the crash
  CHECK(again.holder_node == "node-a");
}

TEST_CASE("zookeeper: calls fail closed within op_timeout", "[zookeeper]") {
  if (!Available()) return;
  SECTION("nothing listens on the port") {
    tickd::lock::ZookeeperOptions options;
    options.url =
        "zookeeper://127.0.0.1:" + std::to_string(tickd::testing::FreeLoopbackPort()) + "/x";
    options.op_timeout = 500ms;
    const auto sent = steady_clock::now();
    auto backend = tickd::lock::NewZookeeperBackend(options);
    CHECK_FALSE(backend.has_value());
    CHECK(steady_clock::now() - sent < 1500ms);
    if (!backend)
      CHECK(backend.error().ToString().find("zookeeper://127.0.0.1:") != std::string::npos);
  }
  SECTION("a frozen server") {
    auto a = Open(ZookeeperServer::NextChroot(), 30s, 500ms);
    ZookeeperServer::Shared().Pause();
    const auto sent = steady_clock::now();
    auto out = a->Claim(Req("frozen", NowUnix(), "node-a", "tok"));
    const auto took = steady_clock::now() - sent;
    ZookeeperServer::Shared().Resume();
    CHECK_FALSE(out.has_value());
    CHECK(took < 1500ms);
  }
}

TEST_CASE("zookeeper: URL forms", "[zookeeper]") {
  using tickd::lock::ParseZookeeperUrl;
  auto one = ParseZookeeperUrl("zookeeper://zk1/app/tickd");
  REQUIRE(one);
  CHECK(one->hosts == "zk1:2181");
  CHECK(one->chroot == "/app/tickd");
  auto many = ParseZookeeperUrl("zookeeper://10.0.0.1:2182,10.0.0.2:2183,[::1]:2184/");
  REQUIRE(many);
  CHECK(many->hosts == "10.0.0.1:2182,10.0.0.2:2183,[::1]:2184");
  CHECK(many->chroot.empty());
  CHECK_FALSE(ParseZookeeperUrl("redis://zk1:2181"));
  CHECK_FALSE(ParseZookeeperUrl("zookeeper://"));
  CHECK_FALSE(ParseZookeeperUrl("zookeeper://zk1:99999"));
  CHECK_FALSE(ParseZookeeperUrl("zookeeper://zk1:2181,/x"));
  CHECK_FALSE(ParseZookeeperUrl("zookeeper://user:pw@zk1:2181"));
  CHECK_FALSE(ParseZookeeperUrl("zookeeper://zk1//x"));
}

TEST_CASE(
    "zookeeper: fences still grow after the server starts over with a fresh data "
    "directory; a later tick supersedes an earlier one while the head is there",
    "[zookeeper]") {
  if (!Available()) return;
  const std::string chroot = ZookeeperServer::NextChroot();
  const std::int64_t t0 = NowUnix();
  std::uint64_t last = 0;
  auto claim = [&](tickd::lock::Backend& b, std::int64_t tick, const std::string& token) {
    auto req = Req("wiped", tick, "node-a", token);
    req.forbid_overlap = false;
    tickd::testing::MustWinHigher(b, req, last);
  };
  {
    auto a = Open(chroot);
    for (int i = 0; i < 3; ++i) claim(*a, t0 + i, "tok-" + std::to_string(i));
    const auto old = a->Claim(Req("wiped", t0 - 1, "node-b", "tok-old"));
    REQUIRE(old);
    CHECK(old->status == ClaimStatus::kSuperseded);
    CHECK(old->holder_tick_unix == t0 + 2);
    CHECK(old->holder_node == "node-a");
  }
  RestartWithoutData();
  auto b = Open(chroot);
  claim(*b, t0 - 1, "tok-after");  // everything is gone, the fences still grow
  claim(*b, t0, "tok-after-0");
}

TEST_CASE(
    "zookeeper: a backend whose server came back without its data connects again with a "
    "new session, hears store-reset, and its runs of the old one lose their lease",
    "[zookeeper]") {
  if (!Available()) return;
  const std::string chroot = ZookeeperServer::NextChroot();
  // The server grants at most 4 s: a 2 s session is given up 2 s after the loss.
  auto a = Open(chroot, 2s, 1s);
  const std::int64_t t0 = NowUnix();
  const auto first = Req("forgotten", t0, "node-a", "tok-1");
  const ClaimOutcome won = *a->Claim(first);
  REQUIRE(won.status == ClaimStatus::kWon);
  const HeldClaim held = HeldOf(first, won);

  // The new server's zxids start below the last one the handle saw: it refuses the
  // old session ("client must try another server") for as long as the handle offers it.
  RestartWithoutData();
  auto next = Req("forgotten", t0 + 1, "node-a", "tok-2");
  next.forbid_overlap = false;
  next.known_tick = t0;  // what this replica saw claimed
  ClaimOutcome reset;
  int attempts = 0;
  const auto restarted = steady_clock::now();
  CHECK(Eventually(
      [&] {
        ++attempts;
        auto out = a->Claim(next);
        if (out) reset = *out;
        return out.has_value();
      },
      20s));
  INFO("attempts " << attempts);
  // The session limit (2 s) and one op_timeout, with room for a loaded machine.
  CHECK(steady_clock::now() - restarted < 10s);
  // The store forgot t0: it says so, and writes nothing.
  CHECK(reset.status == ClaimStatus::kStoreReset);
  CHECK(reset.holder_tick_unix == 0);
  const auto history = a->History("forgotten", 10);
  REQUIRE(history.has_value());
  CHECK(history->empty());
  // Once the replica trusts the store again (the scheduler waits a lease), it claims.
  next.known_tick = 0;
  const ClaimOutcome again = *a->Claim(next);
  CHECK(again.status == ClaimStatus::kWon);
  CHECK(again.fence > won.fence);  // the epoch is the new server's clock
  // The run claimed under the old session is over: the store forgot it.
  const auto renewed_old = a->Renew(held);
  REQUIRE(renewed_old.has_value());
  CHECK(*renewed_old == RenewStatus::kLost);
  const auto completed_old = a->Complete(held, Completion{"done", 0, 1ms});
  REQUIRE(completed_old.has_value());
  CHECK(*completed_old == CompleteStatus::kNotOwner);
  const auto renewed_new = a->Renew(HeldOf(next, again));
  REQUIRE(renewed_new.has_value());
  CHECK(*renewed_new == RenewStatus::kRenewed);
}

TEST_CASE(
    "zookeeper: a renewal that comes after the lease ran out is lost and does not revive "
    "the lease: a recover claimer takes the tick over at once",
    "[zookeeper]") {
  if (!Available()) return;
  const std::string chroot = ZookeeperServer::NextChroot();
  auto holder = Open(chroot);
  auto survivor = Open(chroot);
  const std::int64_t tick = NowUnix();
  auto req = Req("late", tick, "node-a", "tok-a");
  req.lease = 500ms;
  req.observe = true;
  const ClaimOutcome won = tickd::testing::MustClaim(*holder, req);
  REQUIRE(won.status == ClaimStatus::kWon);
  CHECK(won.observed);  // the claim wrote the observation: no Record call needed
  std::this_thread::sleep_for(1200ms);  // the session lives on; the lease runs out
  const auto renewed = holder->Renew(HeldOf(req, won));
  REQUIRE(renewed);
  CHECK(*renewed == RenewStatus::kLost);
  // Before, the late renewal's setData made the lease node look renewed for another
  // lease, and the survivor heard lost until it ran out again.
  auto take = Req("late", tick, "node-b", "tok-b");
  const ClaimOutcome taken = tickd::testing::MustClaim(*survivor, take);
  CHECK(taken.status == ClaimStatus::kWon);
  CHECK(taken.fence > won.fence);
}

TEST_CASE("zookeeper: renewals from many threads at once are each answered as one alone, "
          "and the completes after them go by the versions they left",
          "[zookeeper]") {
  if (!Available()) return;
  auto a = Open(ZookeeperServer::NextChroot());
  const std::int64_t t = NowUnix();
  constexpr int kJobs = 40;
  std::vector<ClaimRequest> reqs;
  for (int j = 0; j < kJobs; ++j) {
    auto req = Req("renew-" + std::to_string(j), t, "node-a", "tok-" + std::to_string(j));
    req.forbid_overlap = false;
    reqs.push_back(req);
  }
  const auto won = a->ClaimBatch(reqs);
  std::vector<HeldClaim> helds;
  for (int j = 0; j < kJobs; ++j) {
    REQUIRE(won[j]);
    REQUIRE(won[j]->status == ClaimStatus::kWon);
    helds.push_back(HeldOf(reqs[j], *won[j]));
  }
  // Job 0 is done (its lease node is gone); job 1's renewal carries a token not ours;
  // job 2 is renewed by two threads at once.
  REQUIRE(*a->Complete(helds[0], Completion{"done", 0, 1ms}) == CompleteStatus::kCompleted);
  std::vector<HeldClaim> renewals = helds;
  renewals[1].owner_token = "tok-someone-else";
  renewals.push_back(helds[2]);
  std::vector<std::optional<tickd::Result<RenewStatus>>> answers(renewals.size());
  std::vector<std::thread> threads;
  std::atomic<bool> go{false};
  for (std::size_t i = 0; i < renewals.size(); ++i) {
    threads.emplace_back([&, i] {
      while (!go.load()) std::this_thread::yield();
      answers[i] = a->Renew(renewals[i]);
    });
  }
  go = true;
  for (auto& th : threads) th.join();
  for (std::size_t i = 0; i < renewals.size(); ++i) {
    INFO("renewal " << i);
    REQUIRE(answers[i]);
    REQUIRE(*answers[i]);
    CHECK(**answers[i] == (i < 2 ? RenewStatus::kLost : RenewStatus::kRenewed));
  }
  // The renewed leases' versions moved: every complete still finds its claim ours.
  for (int j = 1; j < kJobs; ++j) {
    INFO("job " << j);
    CHECK(*a->Complete(helds[j], Completion{"done", 0, 1ms}) == CompleteStatus::kCompleted);
  }
  // And a renewal after its complete is lost.
  CHECK(*a->Renew(helds[3]) == RenewStatus::kLost);
}

TEST_CASE(
    "zookeeper: after a prune, a store holding more of tickd's znodes than "
    "znodes_warn is warned about",
    "[zookeeper]") {
  if (!Available()) return;
  tickd::lock::ZookeeperOptions options;
  options.url = ZookeeperServer::Shared().url(ZookeeperServer::NextChroot());
  options.znodes_warn = 5;
  auto opened = tickd::lock::NewZookeeperBackend(options);
  REQUIRE(opened);
  tickd::lock::Backend& a = **opened;
  const std::int64_t t0 = NowUnix();
  for (int i = 0; i < 4; ++i) {
    auto req = Req("sized", t0 + i, "node-a", "tok-" + std::to_string(i));
    req.forbid_overlap = false;
    req.observe = true;
    auto won = a.Claim(req);
    REQUIRE(won);
    REQUIRE(won->status == ClaimStatus::kWon);
    REQUIRE(a.Record(
        tickd::lock::Observation{"sized", t0 + i, "node-b", "lost", req.node_wall, "hash", 0}));
  }
  CHECK(a.SizeWarnings().empty());  // no prune yet: nothing counted
  // Nothing is old enough to go: 4 records and 4 observations stay.
  auto removed = a.Prune(tickd::WallTime(std::chrono::seconds(t0 - 3'600)));
  REQUIRE(removed);
  CHECK(*removed == 0);
  const std::vector<std::string> warned = a.SizeWarnings();
  REQUIRE(warned.size() == 1);
  CHECK(warned[0].find("holds 8 of tickd's znodes after the last prune") != std::string::npos);
  CHECK(warned[0].find("-Xmx") != std::string::npos);
  // Everything pruned: nothing to warn about.
  removed = a.Prune(tickd::WallTime(std::chrono::seconds(t0 + 3'600)));
  REQUIRE(removed);
  CHECK(a.SizeWarnings().empty());
}
