// The Redis backend behind Redis Sentinel (redis-sentinel://): the master found through
// the sentinels and checked with ROLE, a demoted master's READONLY answers, claims that
// carry on across a failover (`SENTINEL FAILOVER`) without a tick won twice (?wait), and
// the URL. Real servers: one master, two replicas, three sentinels on loopback ports.
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <map>
#include <thread>

#include "lock/redis/redis_backend.h"
#include "tests/redis/redis_sentinel.h"
#include "tests/support/claims.h"

using namespace std::chrono_literals;
using namespace tickd::lock;
using tickd::testing::NowUnix;
using tickd::testing::RedisSentinelSet;
using tickd::testing::Req;

namespace {

bool Available() {
  if (!RedisSentinelSet::Available()) WARN("redis-server or redis-sentinel missing: skipped");
  return RedisSentinelSet::Available();
}

// op_timeout: the tests of ?wait give WAIT (half of it) 1.5 s: on a loaded CI machine
// a replica acknowledged a first claim later than 500 ms.
RedisOptions OptionsFor(const RedisSentinelSet& set, const std::string& url,
                        std::chrono::milliseconds op_timeout = 1s) {
  RedisOptions options;
  options.url = url;
  options.password = set.password();
  options.op_timeout = op_timeout;
  return options;
}

// The backend on `url` (one of the set's), or the test fails.
std::unique_ptr<Backend> Open(const RedisSentinelSet& set, const std::string& url,
                              std::chrono::milliseconds op_timeout = 1s) {
  auto backend = NewRedisBackend(OptionsFor(set, url, op_timeout));
  if (!backend) FAIL(backend.error().ToString());
  return std::move(*backend);
}

// Retries `claim` every 100 ms until it answers without an Error, for up to 30 s:
// replicas resumed after a SIGSTOP, or a new master, may take that long to answer WAIT
// again on a loaded machine (5 s failed once here).
tickd::Result<ClaimOutcome> ClaimWithin(Backend& b, const ClaimRequest& req) {
  const auto until = std::chrono::steady_clock::now() + 30s;
  tickd::Result<ClaimOutcome> out = b.Claim(req);
  while (!out && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(100ms);
    out = b.Claim(req);
  }
  return out;
}

// A stale sentinel: answers every request on its port with the same master address
// (a replica's), as a sentinel that missed a failover would. Stops with the object.
class StaleSentinel {
 public:
  explicit StaleSentinel(int named_port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    ::listen(fd_, 8);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    const std::string port = std::to_string(named_port);
    reply_ = "*2\r\n$9\r\n127.0.0.1\r\n$" + std::to_string(port.size()) + "\r\n" + port + "\r\n";
    thread_ = std::thread([this] { Serve(); });
  }
  ~StaleSentinel() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }
  int port() const { return port_; }
  int asked() const { return asked_; }

 private:
  void Serve() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      const int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) continue;
      pollfd q{c, POLLIN, 0};
      char buf[512];
      if (::poll(&q, 1, 1000) > 0 && ::recv(c, buf, sizeof buf, 0) > 0) {
        ++asked_;
        (void)!::send(c, reply_.data(), reply_.size(), MSG_NOSIGNAL);
      }
      ::close(c);
    }
  }

  int fd_ = -1;
  int port_ = 0;
  std::string reply_;
  std::atomic<bool> stop_{false};
  std::atomic<int> asked_{0};
  std::thread thread_;
};

}  // namespace

TEST_CASE("redis sentinel: bad URLs are errors that say what is wrong", "[redis]") {
  for (const auto& [url, says] : std::map<std::string, std::string>{
           {"redis-sentinel://127.0.0.1:26379", "names no master"},
           {"redis-sentinel://127.0.0.1:26379/", "names no master"},
           {"redis-sentinel://127.0.0.1:x/m", "bad port"},
           {"redis-sentinel://127.0.0.1:26379/m/x", "bad database index"},
           {"redis-sentinel://127.0.0.1:26379/m?wait=-1", "bad wait"},
           {"redis://127.0.0.1:6379/0?wait=two", "bad wait"}}) {
    RedisOptions o;
    o.url = url;
    auto backend = NewRedisBackend(o);
    REQUIRE_FALSE(backend);
    CHECK_THAT(backend.error().detail, Catch::Contains(says));
  }
  // No sentinel answers: an error naming each one asked.
  RedisOptions o;
  const int dead = tickd::testing::FreeLoopbackPort();
  o.url = "redis-sentinel://127.0.0.1:" + std::to_string(dead) + "/m";
  o.op_timeout = 500ms;
  auto backend = NewRedisBackend(o);
  REQUIRE_FALSE(backend);
  CHECK_THAT(backend.error().detail, Catch::Contains("no sentinel named a master 'm'"));
  CHECK_THAT(backend.error().detail, Catch::Contains("127.0.0.1:" + std::to_string(dead)));
}

TEST_CASE("redis sentinel: the master comes from the sentinels; a stale one's answer fails ROLE",
          "[redis]") {
  if (!Available()) return;
  RedisSentinelSet set;
  REQUIRE(set.running());
  // The first sentinel asked names a replica: ROLE says slave, the next one is asked.
  StaleSentinel stale(set.server(1).port());
  auto a = Open(set, set.url("", "127.0.0.1:" + std::to_string(stale.port())));
  CHECK(stale.asked() == 1);
  const std::int64_t tick = NowUnix();
  const auto won = a->Claim(Req("found", tick, "node-a", "a-1"));
  REQUIRE(won);
  CHECK(won->status == ClaimStatus::kWon);
  CHECK(set.Cli(0, "EXISTS 'tickd:{found}:head'") == "1");
  // Without ?wait the start-up warnings say what a failover can do.
  std::string warnings;
  for (const std::string& w : a->StartupWarnings()) warnings += w + "\n";
  CHECK_THAT(warnings, Catch::Contains("no ?wait is set"));
  auto waiting = Open(set, set.url("?wait=1"));
  for (const std::string& w : waiting->StartupWarnings()) CHECK_THAT(w, !Catch::Contains("?wait"));

  // Only stale sentinels: no master is found.
  RedisOptions only_stale = OptionsFor(set, "redis-sentinel://127.0.0.1:" +
                                                std::to_string(stale.port()) + "/m/0");
  auto none = NewRedisBackend(only_stale);
  REQUIRE_FALSE(none);
  CHECK_THAT(none.error().detail, Catch::Contains("which says it is slave"));
}

TEST_CASE("redis sentinel: a demoted master's READONLY fails closed, then the sentinels are asked",
          "[redis]") {
  if (!Available()) return;
  RedisSentinelSet set;
  REQUIRE(set.running());
  auto a = Open(set, set.url());
  const std::int64_t tick = NowUnix();
  REQUIRE(a->Claim(Req("demoted", tick, "node-a", "a-1")));
  // (Another job: "demoted" is busy while its tick runs, an answer that writes nothing.)
  // Demote the master behind the sentinels' back (they notice only after seconds): it
  // keeps tickd's connection and answers writes with READONLY.
  const std::string r1 = std::to_string(set.server(1).port());
  const std::string m = std::to_string(set.server(0).port());
  REQUIRE(set.Cli(1, "REPLICAOF NO ONE") == "OK");
  REQUIRE(set.Cli(0, "REPLICAOF 127.0.0.1 " + r1) == "OK");
  const auto readonly = a->Claim(Req("demoted-2", tick, "node-a", "a-2"));
  REQUIRE_FALSE(readonly);
  CHECK_THAT(readonly.error().detail, Catch::Contains("READONLY"));
  // The next call asks the sentinels again; they still name the old master, whose ROLE
  // now says slave: an error, never a claim on a replica.
  const auto stale = a->Claim(Req("demoted-2", tick, "node-a", "a-2"));
  REQUIRE_FALSE(stale);
  CHECK_THAT(stale.error().detail, Catch::Contains("which says it is slave"));
  // Back as it was: the claim goes through again.
  REQUIRE(set.Cli(0, "REPLICAOF NO ONE") == "OK");
  REQUIRE(set.Cli(1, "REPLICAOF 127.0.0.1 " + m) == "OK");
  const auto again = ClaimWithin(*a, Req("demoted-2", tick, "node-a", "a-2"));
  REQUIRE(again);
  CHECK(again->status == ClaimStatus::kWon);
}

TEST_CASE("redis sentinel: claims go on across a failover; with wait no tick is won twice",
          "[redis]") {
  if (!Available()) return;
  RedisSentinelSet set;
  REQUIRE(set.running());
  const std::string url = set.url("?wait=2");
  auto a = Open(set, url);
  auto b = Open(set, url);
  const std::int64_t t0 = NowUnix();

  // Two replicas race for tick after tick (each 50 ms) while a failover happens.
  std::atomic<bool> failed_over{false};
  std::size_t new_master = set.servers();
  std::thread failover([&] {
    std::this_thread::sleep_for(1500ms);
    new_master = set.Failover();
    failed_over = true;
  });
  std::map<std::int64_t, int> winners;          // tick → how many won it
  std::map<std::int64_t, std::uint64_t> fences;  // tick → the fence of its win
  int errors = 0;
  int won_after = 0;
  std::map<int, int> statuses;
  std::int64_t tick = t0;
  const auto until = std::chrono::steady_clock::now() + 45s;
  for (; std::chrono::steady_clock::now() < until && won_after < 20; ++tick) {
    const bool after = failed_over;
    std::vector<tickd::Result<ClaimOutcome>> out(2, tl::unexpected(tickd::Error("", "")));
    std::thread other(
        [&] { out[1] = b->Claim(Req("orders", tick, "node-b", "b-" + std::to_string(tick))); });
    out[0] = a->Claim(Req("orders", tick, "node-a", "a-" + std::to_string(tick)));
    other.join();
    for (std::size_t k = 0; k < 2; ++k) {
      if (!out[k]) {
        ++errors;
        continue;
      }
      ++statuses[static_cast<int>(out[k]->status)];
      if (out[k]->status != ClaimStatus::kWon) continue;
      ++winners[tick];
      fences[tick] = out[k]->fence;
      if (after) ++won_after;
      Backend& holder = k == 0 ? *a : *b;
      const auto done =
          holder.Complete(HeldClaim{"orders", tick, (k == 0 ? "a-" : "b-") + std::to_string(tick),
                                    out[k]->fence, 15s},
                          Completion{"done", 0, 1ms});
      (void)done;  // a complete lost in the failover only leaves the job busy for a lease
    }
    std::this_thread::sleep_for(50ms);
  }
  failover.join();
  REQUIRE(new_master < set.servers());
  CHECK(new_master != 0);
  CHECK(won_after >= 20);  // claims carry on at the new master
  for (const auto& [t, n] : winners) {
    INFO("tick " << t);
    CHECK(n == 1);
  }
  std::uint64_t last = 0;
  for (const auto& [t, fence] : fences) {
    INFO("tick " << t);
    CHECK(fence > last);
    last = fence;
  }
  // The new master holds the ticks won before the failover (WAIT 2: on every replica).
  const std::string head = set.Cli(new_master, "HGET 'tickd:{orders}:head' tick");
  CHECK(std::stoll(head) >= fences.rbegin()->first);
  WARN("ticks " << (tick - t0) << ", won " << fences.size() << ", errors " << errors << ", lost "
                 << statuses[1] << ", busy " << statuses[2]);
}

TEST_CASE("redis sentinel: with wait, a claim no replica acknowledged in time is not run",
          "[redis]") {
  if (!Available()) return;
  RedisSentinelSet set;
  REQUIRE(set.running());
  auto a = Open(set, set.url("?wait=1"), 3s);
  auto b = Open(set, set.url("?wait=1"), 3s);
  const std::int64_t tick = NowUnix();
  const auto first = a->Claim(Req("durable", tick, "node-a", "a-1"));
  if (!first) FAIL(first.error().ToString());
  CHECK(first->status == ClaimStatus::kWon);
  REQUIRE(a->Complete(HeldClaim{"durable", tick, "a-1", first->fence, 15s},
                      Completion{"done", 0, 1ms}));
  // Both replicas frozen: the master takes the claim, WAIT 1 times out within op_timeout.
  set.server(1).Pause();
  set.server(2).Pause();
  const auto start = std::chrono::steady_clock::now();
  const auto unsure = a->Claim(Req("durable", tick + 1, "node-a", "a-2"));
  const auto took = std::chrono::steady_clock::now() - start;
  REQUIRE_FALSE(unsure);
  CHECK_THAT(unsure.error().detail, Catch::Contains("only 0 of 1 replicas acknowledged"));
  CHECK(took < 3500ms);  // within op_timeout
  // The claim stays in the store as written: nobody else runs that tick either (a lost
  // answer is given at once: it writes nothing, so WAIT has nothing to wait for).
  const auto lost = b->Claim(Req("durable", tick + 1, "node-b", "b-2"));
  REQUIRE(lost);
  CHECK(lost->status == ClaimStatus::kLost);
  CHECK(lost->holder_node == "node-a");
  CHECK(lost->holder_running);
  set.server(1).Resume();
  set.server(2).Resume();
  // Replicas back: claims count again.
  const auto next = ClaimWithin(*b, Req("durable-2", tick, "node-b", "b-3"));
  REQUIRE(next);
  CHECK(next->status == ClaimStatus::kWon);
}

TEST_CASE("redis sentinel: with wait, a retry's new fence no replica acknowledged is an error",
          "[redis]") {
  if (!Available()) return;
  RedisSentinelSet set;
  REQUIRE(set.running());
  auto a = Open(set, set.url("?wait=1"), 3s);
  const std::int64_t tick = NowUnix();
  const auto won = a->Claim(Req("refenced", tick, "node-a", "a-1"));
  if (!won) FAIL(won.error().ToString());
  REQUIRE(won->status == ClaimStatus::kWon);
  HeldClaim held{"refenced", tick, "a-1", won->fence, 15s};
  // Replicas up: the new fence is acknowledged and the retry may run under it.
  const auto acked = a->Refence(held);
  if (!acked) FAIL(acked.error().ToString());
  REQUIRE(acked->status == RefenceStatus::kRefenced);
  CHECK(acked->fence > won->fence);
  held.fence = acked->fence;
  // Both replicas frozen: the master moves the fence, WAIT 1 times out: not to be run
  // under (a failover now could forget it and hand the same fence out again).
  set.server(1).Pause();
  set.server(2).Pause();
  const auto unsure = a->Refence(held);
  set.server(1).Resume();
  set.server(2).Resume();
  REQUIRE_FALSE(unsure);
  CHECK_THAT(unsure.error().detail, Catch::Contains("held by only 0 of 1 replicas"));
  // The claim is still ours: renew and complete go on.
  const auto renewed = a->Renew(held);
  REQUIRE(renewed);
  CHECK(*renewed == RenewStatus::kRenewed);
  const auto done = a->Complete(held, Completion{"failed", 1, 1ms});
  REQUIRE(done);
  CHECK(*done == CompleteStatus::kCompleted);
}

TEST_CASE("redis: a claim a promotion left behind is won again, with a higher fence; a replica "
          "that saw it hears store-reset",
          "[redis]") {
  if (!Available()) return;
  // What docs/stores.md "Redis behind Sentinel" says an asynchronous failover can do, without
  // the sentinels' timing: the replica is promoted by hand just before a claim, as if
  // the claim had not reached it.
  RedisSentinelSet set(/*replicas=*/1, /*sentinels=*/0);
  REQUIRE(set.running());
  const auto url = [&](std::size_t i) {
    return "redis://127.0.0.1:" + std::to_string(set.server(i).port()) + "/0";
  };
  auto old_master = Open(set, url(0));
  const std::int64_t tick = NowUnix();
  auto req = Req("lost", tick, "node-a", "a-1");
  req.forbid_overlap = false;
  const auto before = old_master->Claim(req);
  REQUIRE(before);
  REQUIRE(before->status == ClaimStatus::kWon);
  // Replicated before the promotion: this claim is the one the new master keeps (without
  // the wait, a replica that had not caught up yet lost it too; CI saw head 0).
  REQUIRE(set.Cli(0, "WAIT 1 5000") == "1");
  REQUIRE(set.Cli(1, "REPLICAOF NO ONE") == "OK");  // promoted
  req.tick_unix = tick + 1;
  req.owner_token = "a-2";
  const auto first = old_master->Claim(req);  // taken by the old master only
  REQUIRE(first);
  REQUIRE(first->status == ClaimStatus::kWon);

  // The replica that won T+1 at the old master knows it: its next claim of the job at
  // the new master answers store-reset (the head there says T), and writes nothing.
  auto new_master = Open(set, url(1));
  auto knew = Req("lost", tick + 2, "node-a", "a-3");
  knew.forbid_overlap = false;
  knew.known_tick = tick + 1;
  const auto reset = new_master->Claim(knew);
  REQUIRE(reset);
  CHECK(reset->status == ClaimStatus::kStoreReset);
  CHECK(reset->holder_tick_unix == tick);
  // A replica that had not claimed T+1 yet wins it again at the new master: a second
  // run, with a fence above the first run's, which a fenced resource accepts.
  auto late = Req("lost", tick + 1, "node-b", "b-2");
  late.forbid_overlap = false;
  late.known_tick = tick;
  const auto second = new_master->Claim(late);
  REQUIRE(second);
  CHECK(second->status == ClaimStatus::kWon);
  CHECK(second->fence > first->fence);
  // From then on the head is back at T+1: the replica that knew no longer notices.
  knew.tick_unix = tick + 3;
  knew.owner_token = "a-4";
  const auto unnoticed = new_master->Claim(knew);
  REQUIRE(unnoticed);
  CHECK(unnoticed->status == ClaimStatus::kWon);
}
