// The fault scenarios against a real redis-server (tests/e2e/redis_fixture.cc), plus
// the server's own fault: a crash and restart in the middle of a run.
#include <catch2/catch.hpp>

#include "tests/e2e/notify_scenario.h"
#include "tests/e2e/scenarios.h"
#include "tests/redis/redis_server.h"

namespace tickd::e2e {
namespace {

bool Available() {
  if (!testing::RedisServer::Available()) WARN("redis-server not installed: skipped");
  return testing::RedisServer::Available();
}

TEST_CASE("redis: notifications once per tick, on_miss by one replica, http: jobs",
          "[e2e][redis][notify]") {
  auto backend = MakeRedisFixture();
  ScenarioNotifyAndHttp(*backend);
}

TEST_CASE("redis: skewed replicas run every tick exactly once", "[e2e][redis]") {
  if (!Available()) return;
  auto backend = MakeRedisFixture();
  ScenarioSkewedReplicas(*backend);
}

TEST_CASE("redis: a clock 30 s ahead, 1 h ahead, 30 s behind never runs a tick early",
          "[e2e][redis][clock]") {
  if (!Available()) return;
  auto backend = MakeRedisFixture();
  ScenarioWrongClock(*backend);
}

TEST_CASE("redis: a replica ahead by less than the tolerance starts no run before its tick",
          "[e2e][redis][clock]") {
  if (!Available()) return;
  auto backend = MakeRedisFixture();
  ScenarioClockAheadWithinTolerance(*backend);
}

TEST_CASE("redis: SIGKILL of the running replica", "[e2e][redis]") {
  if (!Available()) return;
  auto backend = MakeRedisFixture();
  SECTION("at-most-once: the interrupted tick is not run again") {
    ScenarioKillRunningReplica(*backend, /*recover=*/false);
  }
  SECTION("recover: the interrupted tick runs once more elsewhere") {
    ScenarioKillRunningReplica(*backend, /*recover=*/true);
  }
}

TEST_CASE("redis: a paused holder loses its lease", "[e2e][redis]") {
  if (!Available()) return;
  auto backend = MakeRedisFixture();
  ScenarioPausedHolder(*backend);
}

TEST_CASE("redis: a failing job is retried within its tick, each try under a new fence",
          "[e2e][redis][retries]") {
  if (!Available()) return;
  auto backend = MakeRedisFixture();
  ScenarioRetries(*backend);
}

TEST_CASE("redis: SIGTERM drains and exits 0", "[e2e][redis]") {
  if (!Available()) return;
  auto backend = MakeRedisFixture();
  ScenarioGracefulShutdown(*backend);
}

TEST_CASE("redis: tickd pause and resume hold on every replica", "[e2e][redis]") {
  if (!Available()) return;
  auto backend = MakeRedisFixture();
  ScenarioPauseResume(*backend);
}

TEST_CASE("redis: tickd status --runs shows what each run printed, from another process",
          "[e2e][redis][output]") {
  if (!Available()) return;
  auto backend = MakeRedisFixture();
  ScenarioRunOutput(*backend);
}

TEST_CASE("redis: server killed and restarted mid-run; the password is in no log line",
          "[e2e][redis]") {
  if (!Available()) return;
  auto backend = MakeRedisFixture();
  ScenarioServerRestart(*backend, testing::RedisServer::kDefaultPassword);
}

TEST_CASE("redis: H and jitter spread the runs; each tick once, at its due instant",
          "[e2e][redis][spread]") {
  if (!Available()) return;
  auto backend = MakeRedisFixture();
  ScenarioSpread(*backend);
}

}  // namespace
}  // namespace tickd::e2e
