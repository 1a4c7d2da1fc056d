// The fault scenarios against a real PostgreSQL 15 (tests/e2e/postgres_fixture.cc):
// skewed replicas, SIGKILL and SIGSTOP of replicas, and a crash and restart of the
// server in the middle of a run. (The database's clock under libfaketime and the
// advisory-lock control are backend tests: tests/postgres/postgres_backend_test.cc.)
#include <catch2/catch.hpp>

#include "tests/e2e/scenarios.h"
#include "tests/postgres/postgres_server.h"

namespace tickd::e2e {
namespace {

bool Available() {
  if (!testing::PostgresServer::Available()) WARN("postgres 15 not installed: skipped");
  return testing::PostgresServer::Available();
}

TEST_CASE("postgres: skewed replicas run every tick exactly once", "[e2e][postgres]") {
  if (!Available()) return;
  auto backend = MakePostgresFixture();
  ScenarioSkewedReplicas(*backend);
}

TEST_CASE("postgres: a clock 30 s ahead, 1 h ahead, 30 s behind never runs a tick early",
          "[e2e][postgres][clock]") {
  if (!Available()) return;
  auto backend = MakePostgresFixture();
  ScenarioWrongClock(*backend);
}

TEST_CASE("postgres: a replica ahead by less than the tolerance starts no run before its tick",
          "[e2e][postgres][clock]") {
  if (!Available()) return;
  auto backend = MakePostgresFixture();
  ScenarioClockAheadWithinTolerance(*backend);
}

TEST_CASE("postgres: SIGKILL of the running replica", "[e2e][postgres]") {
  if (!Available()) return;
  auto backend = MakePostgresFixture();
  SECTION("at-most-once: the interrupted tick is not run again") {
    ScenarioKillRunningReplica(*backend, /*recover=*/false);
  }
  SECTION("recover: the interrupted tick runs once more elsewhere") {
    ScenarioKillRunningReplica(*backend, /*recover=*/true);
  }
}

TEST_CASE("postgres: a paused holder loses its lease", "[e2e][postgres]") {
  if (!Available()) return;
  auto backend = MakePostgresFixture();
  ScenarioPausedHolder(*backend);
}

TEST_CASE("postgres: server killed and restarted mid-run; the password is in no log line",
          "[e2e][postgres]") {
  if (!Available()) return;
  auto backend = MakePostgresFixture();
  ScenarioServerRestart(*backend, testing::PostgresServer::kDefaultPassword);
}

}  // namespace
}  // namespace tickd::e2e
