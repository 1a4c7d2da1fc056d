// Redis-specific behaviour beyond the shared conformance suite: durability of fences
// across a server crash, failing closed within op_timeout, the NOSCRIPT fallback,
// passwords kept out of errors, the durability warnings, batched claims and completes,
// holder_running, observations written by the claim script, and the URL.
#include "lock/redis/redis_backend.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <optional>
#include <catch2/catch.hpp>
#include <cstdio>
#include <map>
#include <thread>

#include "lock/registry.h"
#include "tests/redis/redis_server.h"
#include "tests/support/claims.h"

using namespace std::chrono_literals;
using tickd::testing::NowUnix;
using tickd::testing::RedisServer;
using namespace tickd::lock;
using tickd::testing::Req;

namespace {

RedisOptions OptionsFor(const RedisServer& server) {
  RedisOptions options;
  options.url = server.url();
  options.password = server.password();
  options.op_timeout = 1s;
  return options;
}

std::unique_ptr<Backend> Open(const RedisOptions& options) {
  auto backend = NewRedisBackend(options);
  if (!backend) FAIL(backend.error().ToString());
  return std::move(*backend);
}

// redis-cli against the test server.
std::string Cli(const RedisServer& server, const std::string& args) {
  return tickd::testing::RedisCli(server.port(), server.password(), args);
}

// Claims of T for job-0 … job-(n−1) by `node`, with tokens <token_prefix><i>.
std::vector<ClaimRequest> NumberedClaims(int n, std::int64_t tick, const std::string& node,
                                         const std::string& token_prefix) {
  std::vector<ClaimRequest> reqs;
  for (int i = 0; i < n; ++i)
    reqs.push_back(Req("job-" + std::to_string(i), tick, node, token_prefix + std::to_string(i)));
  return reqs;
}

bool Available() {
  if (!RedisServer::Available()) WARN("redis-server not installed: redis tests skipped");
  return RedisServer::Available();
}

}  // namespace

TEST_CASE("redis: fences strictly increase across a server crash and restart (AOF always)",
          "[redis]") {
  if (!Available()) return;
  RedisServer server;
  REQUIRE(server.running());
  auto a = Open(OptionsFor(server));
  const std::int64_t t0 = NowUnix();
  std::uint64_t last = 0;
  for (int i = 0; i < 5; ++i) {
    auto req = Req("durable", t0 + i, "node-a", "tok-" + std::to_string(i));
    req.forbid_overlap = false;
    auto won = a->Claim(req);
    REQUIRE(won);
    REQUIRE(won->status == ClaimStatus::kWon);
    CHECK(won->fence > last);
    last = won->fence;
  }
  server.Kill();
  // Fail closed while the server is down: an error, never a won.
  auto down = a->Claim(Req("durable", t0 + 10, "node-a", "tok-down"));
  CHECK_FALSE(down);
  REQUIRE(server.Start());

  // The same replica reconnects by itself (after its backoff pause).
  tickd::Result<ClaimOutcome> after = tl::unexpected(tickd::Error("", "not tried"));
  for (int attempt = 0; attempt < 40 && !after; ++attempt) {
    std::this_thread::sleep_for(100ms);
    auto req = Req("durable", t0 + 11, "node-a", "tok-after");
    req.forbid_overlap = false;
    after = a->Claim(req);
  }
  REQUIRE(after);
  REQUIRE(after->status == ClaimStatus::kWon);
  CHECK(after->fence > last);
  // The ticks claimed before the crash are remembered.
  auto b = Open(OptionsFor(server));
  auto again = b->Claim(Req("durable", t0, "node-b", "tok-b"));
  REQUIRE(again);
  CHECK(again->status == ClaimStatus::kLost);
  CHECK(again->holder_node == "node-a");
}

TEST_CASE(
    "redis: fences still grow after the server lost its data (FLUSHALL) or counted them "
    "the old way",
    "[redis]") {
  if (!Available()) return;
  RedisServer server;
  REQUIRE(server.running());
  auto a = Open(OptionsFor(server));
  const std::int64_t t0 = NowUnix();
  // A job whose fences an older tickd counted (INCR on P{job}:fence).
  REQUIRE(Cli(server, "SET 'tickd:{wiped}:fence' 1000000") == "OK");
  std::uint64_t last = 1'000'000;
  auto claim = [&](std::int64_t tick, const std::string& token) {
    auto req = Req("wiped", tick, "node-a", token);
    req.forbid_overlap = false;
    tickd::testing::MustWinHigher(*a, req, last);
  };
  for (int i = 0; i < 3; ++i) claim(t0 + i, "tok-" + std::to_string(i));
  std::this_thread::sleep_for(5ms);  // the server's clock moves past the epoch
  REQUIRE(Cli(server, "FLUSHALL") == "OK");
  // The head is gone with everything else: a claim of an earlier tick is no longer
  // superseded, and its fence comes from a new, later epoch.
  claim(t0, "tok-after-flush");
  claim(t0 + 1, "tok-after-flush-1");
}

TEST_CASE("redis: an unreachable server gives an Error within op_timeout, never a won", "[redis]") {
  RedisOptions options;
  options.url = "redis://127.0.0.1:" + std::to_string(tickd::testing::FreeLoopbackPort()) + "/0";
  options.op_timeout = 300ms;
  const auto start = std::chrono::steady_clock::now();
  auto backend = NewRedisBackend(options);
  CHECK(std::chrono::steady_clock::now() - start < 300ms + 200ms);
  REQUIRE_FALSE(backend);
  CHECK(backend.error().ToString().find("127.0.0.1") != std::string::npos);

  SECTION("a server that accepts but never answers") {
    // A listening socket nobody reads: connect succeeds (backlog), no reply comes.
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
    REQUIRE(::listen(fd, 8) == 0);
    REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
    options.url = "redis://127.0.0.1:" + std::to_string(ntohs(addr.sin_port)) + "/0";
    const auto t = std::chrono::steady_clock::now();
    auto silent = NewRedisBackend(options);
    const auto took = std::chrono::steady_clock::now() - t;
    ::close(fd);
    REQUIRE_FALSE(silent);
    CHECK(took >= 250ms);
    CHECK(took < 300ms + 300ms);
  }

  SECTION("a server that dies under a connected replica") {
    if (!Available()) return;
    RedisServer server;
    auto opts = OptionsFor(server);
    opts.op_timeout = 300ms;
    auto replica = Open(opts);
    REQUIRE(replica->Claim(Req("gone", NowUnix(), "n", "t1")));
    server.Kill();
    for (int i = 0; i < 5; ++i) {
      const auto t = std::chrono::steady_clock::now();
      auto out = replica->Claim(Req("gone", NowUnix() + 1 + i, "n", "t" + std::to_string(i)));
      CHECK(std::chrono::steady_clock::now() - t < 300ms + 200ms);
      CHECK_FALSE(out);
      auto renew = replica->Renew(HeldClaim{"gone", NowUnix(), "t1", 1, 15s});
      CHECK_FALSE(renew);
    }
  }
}

TEST_CASE("redis: after SCRIPT FLUSH the scripts are sent again (NOSCRIPT → EVAL)", "[redis]") {
  if (!Available()) return;
  RedisServer server;
  auto a = Open(OptionsFor(server));
  const std::int64_t tick = NowUnix();
  auto first = Req("flushed", tick, "node-a", "tok-1");
  first.forbid_overlap = false;
  auto won = a->Claim(first);
  REQUIRE(won);
  REQUIRE(won->status == ClaimStatus::kWon);
  REQUIRE(Cli(server, "SCRIPT FLUSH") == "OK");

  auto lost = a->Claim(Req("flushed", tick, "node-b", "tok-2"));
  REQUIRE(lost);
  CHECK(lost->status == ClaimStatus::kLost);
  CHECK(lost->holder_node == "node-a");
  const HeldClaim held{"flushed", tick, "tok-1", won->fence, 15s};
  REQUIRE(Cli(server, "SCRIPT FLUSH") == "OK");
  auto renewed = a->Renew(held);
  REQUIRE(renewed);
  CHECK(*renewed == RenewStatus::kRenewed);
  REQUIRE(Cli(server, "SCRIPT FLUSH") == "OK");
  std::vector<ClaimRequest> batch;
  for (int i = 1; i <= 3; ++i) {
    batch.push_back(Req("flushed", tick + i, "node-a", "tok-b" + std::to_string(i)));
    batch.back().forbid_overlap = false;
  }
  for (auto& out : a->ClaimBatch(batch)) {
    REQUIRE(out);
    CHECK(out->status == ClaimStatus::kWon);
  }
  REQUIRE(Cli(server, "SCRIPT FLUSH") == "OK");
  auto done = a->Complete(held, Completion{"done", 0, 5ms});
  REQUIRE(done);
  CHECK(*done == CompleteStatus::kCompleted);
}

TEST_CASE("redis: a wrong password is an Error that does not contain the password", "[redis]") {
  if (!Available()) return;
  RedisServer server;
  RedisOptions options = OptionsFor(server);
  options.password = "wrong-Secret-123";
  auto from_option = NewRedisBackend(options);
  REQUIRE_FALSE(from_option);
  const std::string text = from_option.error().ToString();
  CHECK(text.find("wrong-Secret-123") == std::string::npos);
  CHECK(text.find(server.password()) == std::string::npos);
  CHECK(text.find("WRONGPASS") != std::string::npos);

  options.password.clear();
  options.url = "redis://default:url-Secret-456@127.0.0.1:" + std::to_string(server.port()) + "/0";
  auto from_url = NewRedisBackend(options);
  REQUIRE_FALSE(from_url);
  CHECK(from_url.error().ToString().find("url-Secret-456") == std::string::npos);
  CHECK(from_url.error().ToString().find("default:***@") != std::string::npos);

  // The right password in the URL (ACL user "default") works.
  options.url =
      "redis://default:" + server.password() + "@127.0.0.1:" + std::to_string(server.port()) + "/0";
  CHECK(NewRedisBackend(options));
  // No password at all: NOAUTH on the first command.
  options.url = server.url();
  auto none = NewRedisBackend(options);
  REQUIRE_FALSE(none);
  CHECK(none.error().ToString().find("NOAUTH") != std::string::npos);
}

TEST_CASE("redis: StartupWarnings says when a restart could forget claims", "[redis]") {
  if (!Available()) return;
  SECTION("no AOF") {
    RedisServer server(/*aof=*/false);
    auto warnings = Open(OptionsFor(server))->StartupWarnings();
    REQUIRE(warnings.size() == 1);
    CHECK(warnings[0].find("appendonly is off") != std::string::npos);
    CHECK(warnings[0].find("a tick could run twice") != std::string::npos);
  }
  SECTION("AOF with fsync every second") {
    RedisServer server;
    REQUIRE(Cli(server, "CONFIG SET appendfsync everysec") == "OK");
    auto warnings = Open(OptionsFor(server))->StartupWarnings();
    REQUIRE(warnings.size() == 1);
    CHECK(warnings[0].find("appendfsync is everysec") != std::string::npos);
  }
  SECTION("AOF always: nothing to say") {
    RedisServer server;
    CHECK(Open(OptionsFor(server))->StartupWarnings().empty());
  }
  SECTION("CONFIG not allowed for the ACL user") {
    RedisServer server;
    REQUIRE(Cli(server, "ACL SETUSER tickd on '>tickd-pw' '~*' '+@all' '-config'") == "OK");
    RedisOptions options = OptionsFor(server);
    options.url = "redis://tickd@127.0.0.1:" + std::to_string(server.port()) + "/0";
    options.password = "tickd-pw";
    auto warnings = Open(options)->StartupWarnings();
    REQUIRE(warnings.size() == 1);
    CHECK(warnings[0].find("could not check durability") != std::string::npos);
  }
}

TEST_CASE("redis: ClaimBatch of 1,000 claims: one winner each, in order, one pipeline", "[redis]") {
  if (!Available()) return;
  RedisServer server;
  auto a = Open(OptionsFor(server));
  auto b = Open(OptionsFor(server));
  const std::int64_t tick = NowUnix();
  constexpr int kJobs = 1000;
  std::vector<ClaimRequest> from_a;
  std::vector<ClaimRequest> from_b;
  for (int i = 0; i < kJobs; ++i) {
    const std::string job = "job-" + std::to_string(i);
    from_a.push_back(Req(job, tick, "node-a", "a-" + std::to_string(i)));
    from_b.push_back(Req(job, tick, "node-b", "b-" + std::to_string(i)));
  }
  from_a[7].tick_unix = tick - 3600;  // past its deadline: missed, the others unaffected
  from_b[7].tick_unix = tick - 3600;
  const auto stats_before = Cli(server, "INFO stats");
  std::vector<tickd::Result<ClaimOutcome>> out_a;
  std::vector<tickd::Result<ClaimOutcome>> out_b;
  std::thread other([&] { out_b = b->ClaimBatch(from_b); });
  out_a = a->ClaimBatch(from_a);
  other.join();
  REQUIRE(out_a.size() == kJobs);
  REQUIRE(out_b.size() == kJobs);
  std::map<std::string, int> winners;
  for (int i = 0; i < kJobs; ++i) {
    REQUIRE(out_a[i]);
    REQUIRE(out_b[i]);
    if (i == 7) {
      CHECK(out_a[i]->status == ClaimStatus::kMissed);
      CHECK(out_b[i]->status == ClaimStatus::kMissed);
      continue;
    }
    const bool a_won = out_a[i]->status == ClaimStatus::kWon;
    const bool b_won = out_b[i]->status == ClaimStatus::kWon;
    REQUIRE(a_won != b_won);
    const ClaimOutcome& loser = a_won ? *out_b[i] : *out_a[i];
    CHECK(loser.status == ClaimStatus::kLost);
    CHECK(loser.holder_node == (a_won ? "node-a" : "node-b"));
    // Each job's first fence: the server's clock in ms, shifted (lock/backend.h), plus
    // twice the µs within that ms (below the next ms's floor).
    const std::uint64_t fence = (a_won ? out_a[i] : out_b[i])->fence;
    CHECK((fence & 2047) % 2 == 0);
    CHECK((fence & 2047) <= 1998);
    CHECK(static_cast<std::int64_t>(fence >> 11) / 1000 - tick < 60);
    ++winners[a_won ? "a" : "b"];
  }
  CHECK(winners["a"] + winners["b"] == kJobs - 1);

  // Every job is in the ledger index: History over all jobs sees them.
  auto history = a->History("", -1);
  REQUIRE(history);
  CHECK(history->size() == kJobs - 1);
}

TEST_CASE("redis: the URL chooses the db and the key prefix; bad URLs are errors", "[redis]") {
  if (!Available()) return;
  RedisServer server;
  RedisOptions options = OptionsFor(server);
  options.url = "redis://127.0.0.1:" + std::to_string(server.port()) + "/3?prefix=acme:";
  auto a = Open(options);
  const std::int64_t tick = NowUnix();
  auto won = a->Claim(Req("billing", tick, "node-a", "tok"));
  REQUIRE(won);
  REQUIRE(won->status == ClaimStatus::kWon);
  CHECK(Cli(server, "-n 3 EXISTS 'acme:{billing}:head'") == "1");
  CHECK(Cli(server, "-n 3 HGET 'acme:{billing}:t:" + std::to_string(tick) + "' owner") == "tok");
  CHECK(Cli(server, "-n 0 DBSIZE") == "0");
  CHECK(Cli(server, "-n 3 TTL 'acme:{billing}:head'") == "-1");  // no TTL

  // Through the registry, as the daemon opens it.
  BackendOptions via_registry;
  via_registry.backend = "redis";
  via_registry.url = options.url;
  via_registry.password = server.password();
  tickd::RealClock clock;
  auto opened = OpenBackend(via_registry, clock);
  REQUIRE(opened);
  CHECK((*opened)->name() == "redis");
  auto lost = (*opened)->Claim(Req("billing", tick, "node-b", "tok-b"));
  REQUIRE(lost);
  CHECK(lost->status == ClaimStatus::kLost);

  for (const char* bad : {"http://127.0.0.1:6379", "redis://127.0.0.1:notaport/0",
                          "redis://127.0.0.1:6379/x", "redis://127.0.0.1:6379/0?tls=1"}) {
    RedisOptions o;
    o.url = bad;
    auto backend = NewRedisBackend(o);
    CHECK_FALSE(backend);
  }
}

TEST_CASE("redis: a lost claim says whether the tick's record is still running", "[redis]") {
  if (!Available()) return;
  RedisServer server;
  auto a = Open(OptionsFor(server));
  auto b = Open(OptionsFor(server));
  const std::int64_t tick = NowUnix();
  ClaimRequest from_a = Req("job", tick, "node-a", "token-a");
  from_a.lease = 300ms;
  auto won = a->Claim(from_a);
  REQUIRE(won);
  REQUIRE(won->status == ClaimStatus::kWon);

  auto lost = b->Claim(Req("job", tick, "node-b", "token-b"));
  REQUIRE(lost);
  CHECK(lost->status == ClaimStatus::kLost);
  CHECK(lost->holder_node == "node-a");
  CHECK(lost->holder_running);

  SECTION("the lease expired, recover off: the record is still running") {
    std::this_thread::sleep_for(500ms);
    auto later = b->Claim(Req("job", tick, "node-b", "token-b2"));
    REQUIRE(later);
    CHECK(later->status == ClaimStatus::kLost);
    CHECK(later->holder_running);
  }
  SECTION("completed: done, not running") {
    HeldClaim held{"job", tick, "token-a", won->fence, from_a.lease};
    REQUIRE(a->Complete(held, Completion{"done", 0, 5ms}) == CompleteStatus::kCompleted);
    auto after = b->Claim(Req("job", tick, "node-b", "token-b3"));
    REQUIRE(after);
    CHECK(after->status == ClaimStatus::kLost);
    CHECK(after->holder_node == "node-a");
    CHECK_FALSE(after->holder_running);
  }
}

TEST_CASE("redis: a claim with observe records the replica's observation in the same script",
          "[redis]") {
  if (!Available()) return;
  RedisServer server;
  auto backend = Open(OptionsFor(server));
  const std::int64_t tick = NowUnix();
  auto observed = [&](std::string node, std::int64_t t, bool forbid, std::int64_t wall_ms) {
    ClaimRequest req = Req("job", t, node, "token-" + node);
    req.forbid_overlap = forbid;
    req.observe = true;
    req.node_wall = tickd::WallTime(std::chrono::milliseconds(wall_ms));
    req.config_hash = "hash-" + node;
    auto out = backend->Claim(req);
    if (!out) FAIL(out.error().ToString());
    CHECK(out->observed);
    return *out;
  };
  CHECK(observed("d", tick - 3'600, true, 4'000).status == ClaimStatus::kMissed);
  const ClaimOutcome won_a = observed("a", tick, true, 1'000);
  CHECK(won_a.status == ClaimStatus::kWon);
  CHECK(observed("b", tick, true, 2'000).status == ClaimStatus::kLost);
  CHECK(observed("c", tick + 60, true, 3'000).status == ClaimStatus::kBusy);
  CHECK(observed("e", tick - 1, true, 5'000).status == ClaimStatus::kSuperseded);
  // Without observe nothing is written for the replica.
  auto plain = backend->Claim(Req("job", tick, "e", "token-e"));
  REQUIRE(plain);
  CHECK_FALSE(plain->observed);

  auto history = backend->History("job", -1);
  REQUIRE(history);
  std::map<std::pair<std::int64_t, std::string>, Observation> seen;  // (T, node)
  for (const TickHistory& h : *history) {
    for (const Observation& o : h.observations) seen[{h.tick_unix, o.node}] = o;
  }
  REQUIRE(seen.size() == 5);
  const Observation& a = seen[{tick, "a"}];
  CHECK(a.outcome == "won");
  CHECK(a.fence == won_a.fence);
  CHECK(seen[{tick - 1, "e"}].outcome == "superseded");
  CHECK(a.config_hash == "hash-a");
  CHECK(a.node_wall == tickd::WallTime(std::chrono::milliseconds(1'000)));
  CHECK(seen[{tick, "b"}].outcome == "lost");
  CHECK(seen[{tick, "b"}].node_wall == tickd::WallTime(std::chrono::milliseconds(2'000)));
  CHECK(seen[{tick, "b"}].config_hash == "hash-b");
  CHECK(seen[{tick + 60, "c"}].outcome == "busy");
  CHECK(seen[{tick - 3'600, "d"}].outcome == "missed");
  CHECK(seen[{tick - 3'600, "d"}].config_hash == "hash-d");

  // A later Record of the same replica replaces it (a won claim released as skipped).
  Observation skipped = a;
  skipped.outcome = "skipped";
  REQUIRE(backend->Record(skipped));
  history = backend->History("job", -1);
  REQUIRE(history);
  for (const TickHistory& h : *history) {
    if (h.tick_unix != tick) continue;
    CHECK(h.observations.size() == 2);
    for (const Observation& o : h.observations) {
      if (o.node == "a") CHECK(o.outcome == "skipped");
    }
  }

  // Observations live in the tick's hash: the busy tick, which has only c's
  // observation there, is still won once the earlier run is done, and keeps it.
  REQUIRE(backend->Complete(HeldClaim{"job", tick, "token-a", won_a.fence, 15s},
                            Completion{"done", 0, 1ms}) == CompleteStatus::kCompleted);
  const ClaimOutcome retry = observed("c", tick + 60, true, 5'000);
  CHECK(retry.status == ClaimStatus::kWon);
  CHECK(retry.fence > won_a.fence);
  history = backend->History("job", 1);
  REQUIRE(history);
  REQUIRE(history->size() == 1);
  CHECK(history->front().tick_unix == tick + 60);
  CHECK(history->front().state == "running");
  CHECK(history->front().winner == "c");
  REQUIRE(history->front().observations.size() == 1);
  CHECK(history->front().observations[0].outcome == "won");  // c's busy, replaced
}

TEST_CASE("redis: every lost claim of a batch that spans script calls is observed", "[redis]") {
  if (!Available()) return;
  RedisServer server;
  auto backend = Open(OptionsFor(server));
  const std::int64_t tick = NowUnix();
  // 70 jobs: more than two script calls' worth, so the observations span calls too.
  auto batch = [&](const std::string& node) {
    std::vector<ClaimRequest> reqs;
    for (int j = 0; j < 70; ++j) {
      ClaimRequest req = Req("job-" + std::to_string(j), tick, node, "token-" + node);
      req.observe = true;
      req.node_wall = tickd::WallTime(std::chrono::milliseconds(7'000 + j));
      req.config_hash = "hash-" + node;
      reqs.push_back(req);
    }
    return reqs;
  };
  const std::vector<ClaimRequest> first = batch("a");
  for (const auto& r : backend->ClaimBatch(first)) {
    REQUIRE(r);
    CHECK(r->status == ClaimStatus::kWon);
  }
  const std::vector<ClaimRequest> second = batch("b");
  for (const auto& r : backend->ClaimBatch(second)) {
    REQUIRE(r);
    CHECK(r->status == ClaimStatus::kLost);
    CHECK(r->observed);
  }
  for (int j = 0; j < 70; ++j) {
    auto history = backend->History("job-" + std::to_string(j), 1);
    REQUIRE(history);
    REQUIRE(history->size() == 1);
    std::map<std::string, Observation> by_node;
    for (const Observation& o : history->front().observations) by_node[o.node] = o;
    REQUIRE(by_node.size() == 2);
    CHECK(by_node["a"].outcome == "won");
    CHECK(by_node["b"].outcome == "lost");
    CHECK(by_node["b"].config_hash == "hash-b");
    CHECK(by_node["b"].node_wall == tickd::WallTime(std::chrono::milliseconds(7'000 + j)));
  }
}

TEST_CASE("redis: a server that lost its data answers store-reset per claim, in every script call",
          "[redis]") {
  if (!Available()) return;
  RedisServer server;
  auto backend = Open(OptionsFor(server));
  const std::int64_t tick = NowUnix();
  // 70 jobs: more than two script calls' worth, so each call decides its own claims.
  auto batch = [&](std::int64_t t, const std::string& token, std::int64_t known) {
    std::vector<ClaimRequest> reqs;
    for (int j = 0; j < 70; ++j) {
      ClaimRequest req = Req("job-" + std::to_string(j), t, "node-a", token + std::to_string(j));
      req.forbid_overlap = false;
      req.observe = true;
      req.node_wall = tickd::WallTime(std::chrono::milliseconds(7'000 + j));
      req.known_tick = known;
      reqs.push_back(req);
    }
    return reqs;
  };
  for (const auto& r : backend->ClaimBatch(batch(tick - 2, "tok-old-", 0))) {
    REQUIRE(r);
    REQUIRE(r->status == ClaimStatus::kWon);
  }
  // The server loses its data (and the scripts: the next calls go through EVAL); the
  // even jobs are claimed again at tick − 1 by a replica that knows nothing.
  REQUIRE(Cli(server, "FLUSHALL") == "OK");
  REQUIRE(Cli(server, "SCRIPT FLUSH") == "OK");
  std::vector<ClaimRequest> even;
  for (const ClaimRequest& req : batch(tick - 1, "tok-even-", 0)) {
    if (std::stoi(req.job.substr(4)) % 2 == 0) even.push_back(req);
  }
  for (const auto& r : backend->ClaimBatch(even)) {
    REQUIRE(r);
    REQUIRE(r->status == ClaimStatus::kWon);
  }
  // A replica that saw tick − 1 claimed: the even jobs' heads know it, the odd ones
  // have no head (store-reset naming none, nothing written, not even the observation).
  const std::vector<ClaimRequest> next = batch(tick, "tok-new-", tick - 1);
  const auto answers = backend->ClaimBatch(next);
  REQUIRE(answers.size() == next.size());
  for (int j = 0; j < 70; ++j) {
    const auto& r = answers[static_cast<std::size_t>(j)];
    REQUIRE(r);
    auto history = backend->History("job-" + std::to_string(j), 10);
    REQUIRE(history);
    if (j % 2 == 0) {
      CHECK(r->status == ClaimStatus::kWon);
      CHECK(r->observed);
      CHECK(history->size() == 2);
    } else {
      CHECK(r->status == ClaimStatus::kStoreReset);
      CHECK(r->holder_tick_unix == 0);
      CHECK_FALSE(r->observed);
      CHECK(history->empty());
    }
  }
  // A known tick above an existing head: store-reset naming the head's tick.
  auto above = Req("job-0", tick + 1, "node-a", "tok-above");
  above.known_tick = tick + 5;
  auto out = backend->Claim(above);
  REQUIRE(out);
  CHECK(out->status == ClaimStatus::kStoreReset);
  CHECK(out->holder_tick_unix == tick);
}

TEST_CASE("redis: CompleteBatch completes each owned claim, in order; a foreign token is kept",
          "[redis]") {
  if (!Available()) return;
  RedisServer server;
  auto backend = Open(OptionsFor(server));
  const std::int64_t tick = NowUnix();
  constexpr int kJobs = 200;
  std::vector<CompleteRequest> reqs;
  for (int i = 0; i < kJobs; ++i) {
    const std::string job = "job-" + std::to_string(i);
    const std::string token = "token-" + std::to_string(i);
    auto won = backend->Claim(Req(job, tick, "node-a", token));
    REQUIRE(won);
    REQUIRE(won->status == ClaimStatus::kWon);
    reqs.push_back(CompleteRequest{HeldClaim{job, tick, token, won->fence, 15s},
                                   Completion{"failed", i, std::chrono::milliseconds(i)}});
  }
  reqs[3].held.owner_token = "not-ours";
  auto out = backend->CompleteBatch(reqs);
  REQUIRE(out.size() == kJobs);
  for (int i = 0; i < kJobs; ++i) {
    REQUIRE(out[i]);
    CHECK(*out[i] == (i == 3 ? CompleteStatus::kNotOwner : CompleteStatus::kCompleted));
  }
  auto history = backend->History("", -1);
  REQUIRE(history);
  REQUIRE(history->size() == kJobs);
  for (const TickHistory& h : *history) {
    const int i = std::stoi(h.job.substr(4));
    if (i == 3) {
      CHECK(h.state == "running");
      continue;
    }
    CHECK(h.state == "done");
    CHECK(h.run_outcome == "failed");
    CHECK(h.exit_code == i);
    CHECK(h.duration == std::chrono::milliseconds(i));
  }
}

TEST_CASE("redis: Complete from many threads at once: coalesced, each caller gets its own answer",
          "[redis]") {
  if (!Available()) return;
  RedisServer server;
  auto backend = Open(OptionsFor(server));
  const std::int64_t tick = NowUnix();
  constexpr int kThreads = 32;
  constexpr int kPerThread = 25;
  std::vector<ClaimRequest> claims;
  for (int i = 0; i < kThreads * kPerThread; ++i) {
    claims.push_back(Req("job-" + std::to_string(i), tick, "node-a", "token-" + std::to_string(i)));
    claims.back().forbid_overlap = i % 2 == 0;  // half of them also drop a run key
  }
  auto won = backend->ClaimBatch(claims);
  for (const auto& w : won) {
    REQUIRE(w);
    REQUIRE(w->status == ClaimStatus::kWon);
  }
  // Every 7th caller completes with a foreign token: kNotOwner for it alone. Every
  // 5th completes twice: the second answer is kCompleted too, and changes nothing.
  std::vector<std::vector<tickd::Result<CompleteStatus>>> answers(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int k = 0; k < kPerThread; ++k) {
        const int i = t * kPerThread + k;
        HeldClaim held{claims[i].job, tick, i % 7 == 0 ? "not-ours" : claims[i].owner_token,
                       won[i]->fence, 15s};
        const Completion completion{"done", i, std::chrono::milliseconds(i)};
        answers[t].push_back(backend->Complete(held, completion));
        if (i % 5 == 0) answers[t].push_back(backend->Complete(held, Completion{"failed", 1, 1ms}));
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    std::size_t a = 0;
    for (int k = 0; k < kPerThread; ++k) {
      const int i = t * kPerThread + k;
      const CompleteStatus want =
          i % 7 == 0 ? CompleteStatus::kNotOwner : CompleteStatus::kCompleted;
      for (int repeat = 0; repeat < (i % 5 == 0 ? 2 : 1); ++repeat) {
        REQUIRE(a < answers[t].size());
        REQUIRE(answers[t][a]);
        CHECK(*answers[t][a] == want);
        ++a;
      }
    }
    CHECK(a == answers[t].size());
  }
  auto history = backend->History("", -1);
  REQUIRE(history);
  REQUIRE(history->size() == kThreads * kPerThread);
  for (const TickHistory& h : *history) {
    const int i = std::stoi(h.job.substr(4));
    if (i % 7 == 0) {
      CHECK(h.state == "running");
      continue;
    }
    CHECK(h.state == "done");
    CHECK(h.run_outcome == "done");  // the first complete's, not the repeat's
    CHECK(h.exit_code == i);
  }
  // The run keys of the completed forbid claims are gone; the foreign-token ones stay.
  for (int i = 0; i < kThreads * kPerThread; i += 2) {
    const std::string exists = Cli(server, "EXISTS 'tickd:{job-" + std::to_string(i) + "}:run'");
    CHECK(exists == (i % 7 == 0 ? "1" : "0"));
  }
}

TEST_CASE("redis: claims leave the ledger index's lifetime to Prune, which sets it", "[redis]") {
  if (!Available()) return;
  RedisServer server;
  RedisOptions options = OptionsFor(server);
  options.retention = 3'600'000ms;
  auto backend = Open(options);
  const std::int64_t tick = NowUnix();
  auto won = backend->Claim(Req("report", tick, "node-a", "tok"));
  REQUIRE(won);
  REQUIRE(won->status == ClaimStatus::kWon);
  const std::string index = "'tickd:{report}:ticks'";
  CHECK(Cli(server, "ZSCORE " + index + " " + std::to_string(tick)) == std::to_string(tick));
  CHECK(Cli(server, "PTTL " + index) == "-1");  // no TTL call on the claim path
  // The record has its retention from the claim.
  const std::int64_t record_ttl =
      std::stoll(Cli(server, "PTTL 'tickd:{report}:t:" + std::to_string(tick) + "'"));
  CHECK(record_ttl > 3'500'000);
  CHECK(record_ttl <= 3'600'000);
  auto pruned = backend->Prune(tickd::WallTime(std::chrono::seconds(tick - 60)));
  REQUIRE(pruned);
  CHECK(*pruned == 0);
  const std::int64_t index_ttl = std::stoll(Cli(server, "PTTL " + index));
  CHECK(index_ttl > 3'500'000);
  CHECK(index_ttl <= 3'600'000);
}

TEST_CASE("redis: a ClaimBatch of 6,000 goes over several connections, every answer in its place",
          "[redis]") {
  if (!Available()) return;
  RedisServer server;
  auto a = Open(OptionsFor(server));
  auto b = Open(OptionsFor(server));
  const std::int64_t tick = NowUnix();
  constexpr int kJobs = 6000;
  std::vector<ClaimRequest> from_a = NumberedClaims(kJobs, tick, "node-a", "a-");
  // One claim in 700 is past its deadline, at places spread over every stripe.
  for (int i = 699; i < kJobs; i += 700) from_a[i].tick_unix = tick - 3600;
  auto out_a = a->ClaimBatch(from_a);
  REQUIRE(out_a.size() == kJobs);
  for (int i = 0; i < kJobs; ++i) {
    REQUIRE(out_a[i]);
    CHECK(out_a[i]->status == (i % 700 == 699 ? ClaimStatus::kMissed : ClaimStatus::kWon));
  }
  // More than a's and b's one connection each (and redis-cli's): the batch was spread.
  const std::string clients = Cli(server, "INFO clients");
  const auto at = clients.find("connected_clients:");
  REQUIRE(at != std::string::npos);
  CHECK(std::stoi(clients.substr(at + 18)) > 3);
  // b's claims of the same ticks, in another order of jobs: each lost to a, in place.
  std::vector<ClaimRequest> from_b;
  for (int i = kJobs - 1; i >= 0; --i) {
    if (i % 700 == 699) continue;
    from_b.push_back(Req("job-" + std::to_string(i), tick, "node-b", "b-" + std::to_string(i)));
  }
  auto out_b = b->ClaimBatch(from_b);
  REQUIRE(out_b.size() == from_b.size());
  for (std::size_t k = 0; k < from_b.size(); ++k) {
    REQUIRE(out_b[k]);
    CHECK(out_b[k]->status == ClaimStatus::kLost);
    CHECK(out_b[k]->holder_node == "node-a");
  }
  // Completes of a's wins, spread the same way, each owner-checked on its own claim.
  std::vector<CompleteRequest> done;
  for (int i = 0; i < kJobs; ++i) {
    if (i % 700 == 699) continue;
    const std::string token = i % 3 == 0 ? "wrong" : from_a[i].owner_token;
    done.push_back(CompleteRequest{HeldClaim{from_a[i].job, tick, token, out_a[i]->fence, 15s},
                                   Completion{"done", i % 100, 1ms}});
  }
  auto completed = a->CompleteBatch(done);
  REQUIRE(completed.size() == done.size());
  for (std::size_t k = 0; k < done.size(); ++k) {
    REQUIRE(completed[k]);
    const bool ours = done[k].held.owner_token != "wrong";
    CHECK(*completed[k] == (ours ? CompleteStatus::kCompleted : CompleteStatus::kNotOwner));
  }
}

TEST_CASE("redis: ClaimBatchAsAnswered hands answers over while most of the batch is undecided",
          "[redis]") {
  if (!Available()) return;
  RedisServer server;
  // This case is about the order of the answers, not their speed: 20,000 claims may take
  // longer than these tests' 1 s op_timeout on a loaded machine (CI under load 28 did).
  auto options = OptionsFor(server);
  options.op_timeout = std::chrono::seconds(60);
  auto a = Open(options);
  const std::int64_t tick = NowUnix();
  constexpr int kJobs = 20000;
  const std::vector<ClaimRequest> reqs = NumberedClaims(kJobs, tick, "node-a", "a-");
  // Answers come from the threads reading the connections, one at a time: recorded
  // here, checked after (Catch2 assertions belong on the test's thread).
  std::vector<int> times_answered(kJobs, 0);
  std::vector<ClaimStatus> status(kJobs, ClaimStatus::kMissed);
  std::vector<char> errors(kJobs, 0);
  std::optional<std::chrono::steady_clock::time_point> first_answer;
  std::vector<std::size_t> answer_order;
  const auto start = std::chrono::steady_clock::now();
  a->ClaimBatchAsAnswered(reqs, [&](std::size_t i, tickd::Result<ClaimOutcome> r) {
    if (!first_answer) first_answer = std::chrono::steady_clock::now();
    answer_order.push_back(i);
    ++times_answered[i];
    if (r) {
      status[i] = r->status;
    } else {
      errors[i] = 1;
    }
  });
  const auto end = std::chrono::steady_clock::now();
  for (int i = 0; i < kJobs; ++i) {
    REQUIRE(times_answered[i] == 1);
    REQUIRE_FALSE(errors[i]);
    CHECK(status[i] == ClaimStatus::kWon);
  }
  // The batch goes out in chunks with at most two unanswered per connection, and the
  // first call's answers are handed over as soon as they are read: well before the
  // end (a batch answered at once would hand everything over at its end).
  REQUIRE(first_answer);
  CHECK(*first_answer - start < (end - start) / 2);
  // The connections are dealt the calls in turn, not cut into blocks, so the server
  // meets the claims in about the order given (a replica's own slice first,
  // lock/claim_spread.h): the first tenth answered all come from the first half.
  REQUIRE(answer_order.size() == kJobs);
  CHECK(*std::max_element(answer_order.begin(), answer_order.begin() + kJobs / 10) < kJobs / 2);
}

TEST_CASE("redis: a spread batch fails closed when the server dies, and reconnects after",
          "[redis]") {
  if (!Available()) return;
  RedisServer server;
  auto a = Open(OptionsFor(server));
  const std::int64_t tick = NowUnix();
  const auto batch = [&](std::int64_t t, const std::string& node) {
    std::vector<ClaimRequest> reqs;
    for (int i = 0; i < 3000; ++i) {
      reqs.push_back(Req("job-" + std::to_string(i), t, node, node + std::to_string(i)));
      reqs.back().starting_deadline = std::nullopt;
      reqs.back().forbid_overlap = false;  // tick + 2 runs while tick still runs
    }
    return reqs;
  };
  for (const auto& out : a->ClaimBatch(batch(tick, "a"))) {
    REQUIRE(out);
    CHECK(out->status == ClaimStatus::kWon);
  }
  server.Kill();
  const auto start = std::chrono::steady_clock::now();
  for (const auto& out : a->ClaimBatch(batch(tick + 1, "a"))) CHECK_FALSE(out);
  CHECK(std::chrono::steady_clock::now() - start < 1500ms);  // op_timeout is 1 s
  REQUIRE(server.Start());
  std::vector<tickd::Result<ClaimOutcome>> after;
  for (int attempt = 0; attempt < 40 && (after.empty() || !after.front()); ++attempt) {
    std::this_thread::sleep_for(100ms);
    after = a->ClaimBatch(batch(tick + 2, "a"));
  }
  REQUIRE(after.size() == 3000);
  for (const auto& out : after) {
    REQUIRE(out);
    CHECK(out->status == ClaimStatus::kWon);
  }
  // The ticks won before the crash are remembered (AOF always).
  auto b = Open(OptionsFor(server));
  for (const auto& out : b->ClaimBatch(batch(tick, "b"))) {
    REQUIRE(out);
    CHECK(out->status == ClaimStatus::kLost);
    CHECK(out->holder_node == "a");
  }
}

TEST_CASE("redis cluster: jobs go to the node of their slot, and follow a slot that moves",
          "[redis]") {
  if (!Available()) return;
  tickd::testing::RedisCluster cluster;
  REQUIRE(cluster.running());
  RedisOptions options;
  options.url = cluster.url();  // the first node only: the others are learnt from it
  options.password = cluster.password();
  auto a = Open(options);
  const std::int64_t tick = NowUnix();
  // Jobs on every node, claimed in one batch (one job per script call on a cluster).
  for (const auto& out : a->ClaimBatch(NumberedClaims(60, tick, "node-a", "a-"))) {
    REQUIRE(out);
    CHECK(out->status == ClaimStatus::kWon);
  }
  for (std::size_t i = 0; i < cluster.size(); ++i) CHECK(cluster.Cli(i, "DBSIZE") != "0");

  const auto claimed = a->Claim(Req("moving", tick, "node-a", "a-moving"));
  REQUIRE(claimed);
  REQUIRE(claimed->status == ClaimStatus::kWon);
  // Move the job's slot and its keys to another node, as a resharding does; `a` still
  // has the old map.
  tickd::testing::SlotMigration migration(cluster, "tickd:{moving}:head");
  REQUIRE(migration.found());
  CHECK(migration.Open());
  CHECK(migration.MoveKeys());
  CHECK(migration.Finish());
  CHECK(migration.KeysOn(migration.from()) == "0");

  // MOVED: the calls are sent again to the new node, and the claim's state came along.
  const auto done = a->Complete(HeldClaim{"moving", tick, "a-moving", claimed->fence, 15s},
                                Completion{"done", 0, 1ms});
  REQUIRE(done);
  CHECK(*done == CompleteStatus::kCompleted);
  const auto next = a->Claim(Req("moving", tick + 1, "node-a", "a-moving-2"));
  REQUIRE(next);
  CHECK(next->status == ClaimStatus::kWon);
  CHECK(next->fence > claimed->fence);
  auto b = Open(options);
  const auto again = b->Claim(Req("moving", tick, "node-b", "b-moving"));
  REQUIRE(again);
  CHECK(again->status == ClaimStatus::kLost);
  CHECK(again->holder_node == "node-a");
}

TEST_CASE("redis cluster: ASK is followed during a slot's migration, never on half a job's keys",
          "[redis]") {
  if (!Available()) return;
  tickd::testing::RedisCluster cluster;
  REQUIRE(cluster.running());
  RedisOptions options;
  options.url = cluster.url();
  options.password = cluster.password();
  auto a = Open(options);
  const std::int64_t tick = NowUnix();
  const auto claimed = a->Claim(Req("asking", tick, "node-a", "a-1"));
  REQUIRE(claimed);
  REQUIRE(claimed->status == ClaimStatus::kWon);

  // Open the migration of the job's slot (both nodes marked), no key moved yet.
  tickd::testing::SlotMigration migration(cluster, "tickd:{asking}:head");
  REQUIRE(migration.found());
  REQUIRE(migration.Open());

  // A plain command on a key the migrating node lacks answers ASK: followed, the
  // observation lands on the importing node.
  Observation obs;
  obs.job = "asking";
  obs.tick_unix = tick + 5;
  obs.node = "node-a";
  obs.outcome = "missed";
  obs.node_wall = tickd::WallTime(std::chrono::milliseconds(tick * 1000 + 5'000));
  obs.config_hash = "hash";
  const auto recorded = a->Record(obs);
  REQUIRE(recorded);
  CHECK(migration.KeysOn(migration.to()) == "1");

  // A claim while the job's keys are split between the nodes is not decided: the
  // importing node would see no head and no record of T.
  const auto split = a->Claim(Req("asking", tick, "node-b", "b-1"));
  REQUIRE_FALSE(split);
  CHECK(split.error().detail.find("ASK") != std::string::npos);

  // Every key moved, the slot still migrating: claims follow ASK to the importing node
  // and are decided on the whole job.
  REQUIRE(migration.MoveKeys());
  REQUIRE(migration.KeysOn(migration.from()) == "0");
  const auto lost = a->Claim(Req("asking", tick, "node-b", "b-1"));
  REQUIRE(lost);
  CHECK(lost->status == ClaimStatus::kLost);
  CHECK(lost->holder_node == "node-a");
  const auto first_done = a->Complete(HeldClaim{"asking", tick, "a-1", claimed->fence, 15s},
                                      Completion{"done", 0, 1ms});
  REQUIRE(first_done);
  CHECK(*first_done == CompleteStatus::kCompleted);
  const auto next = a->Claim(Req("asking", tick + 1, "node-b", "b-2"));
  REQUIRE(next);
  CHECK(next->status == ClaimStatus::kWon);
  CHECK(next->fence > claimed->fence);
  const auto done = a->Complete(HeldClaim{"asking", tick + 1, "b-2", next->fence, 15s},
                                Completion{"done", 0, 1ms});
  REQUIRE(done);
  CHECK(*done == CompleteStatus::kCompleted);
  const auto history = a->History("asking", 10);
  REQUIRE(history);
  CHECK(history->size() == 3);  // T, T+1, and the observation of T+5
  // The slot map was not changed by ASK: the migrating node is still asked first.
  CHECK(migration.KeysOn(migration.from()) == "0");

  // ?wait counts one server's replicas: refused on a cluster, with the reason.
  RedisOptions waiting = options;
  waiting.url += "?wait=1";
  auto refused = NewRedisBackend(waiting);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().detail.find("not supported on Redis Cluster") != std::string::npos);
}
