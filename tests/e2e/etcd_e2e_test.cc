// The fault scenarios against a real etcd (tests/e2e/etcd_fixture.cc), plus the
// server's own fault: a crash and restart in the middle of a run.
#include <catch2/catch.hpp>

#include "tests/e2e/scenarios.h"
#include "tests/etcd/etcd_server.h"

namespace tickd::e2e {
namespace {

bool Available() {
  if (!testing::EtcdServer::Available()) WARN("etcd not installed: skipped");
  return testing::EtcdServer::Available();
}

TEST_CASE("etcd: skewed replicas run every tick exactly once", "[e2e][etcd]") {
  if (!Available()) return;
  auto backend = MakeEtcdFixture();
  ScenarioSkewedReplicas(*backend);
}

TEST_CASE("etcd: a clock 30 s ahead, 1 h ahead, 30 s behind never runs a tick early",
          "[e2e][etcd][clock]") {
  if (!Available()) return;
  auto backend = MakeEtcdFixture();
  ScenarioWrongClock(*backend);
}

TEST_CASE("etcd: a replica ahead by less than the tolerance starts no run before its tick",
          "[e2e][etcd][clock]") {
  if (!Available()) return;
  auto backend = MakeEtcdFixture();
  ScenarioClockAheadWithinTolerance(*backend);
}

TEST_CASE("etcd: SIGKILL of the running replica", "[e2e][etcd]") {
  if (!Available()) return;
  auto backend = MakeEtcdFixture();
  SECTION("at-most-once: the interrupted tick is not run again") {
    ScenarioKillRunningReplica(*backend, /*recover=*/false);
  }
  SECTION("recover: the interrupted tick runs once more elsewhere") {
    ScenarioKillRunningReplica(*backend, /*recover=*/true);
  }
}

TEST_CASE("etcd: a paused holder loses its lease", "[e2e][etcd]") {
  if (!Available()) return;
  auto backend = MakeEtcdFixture();
  ScenarioPausedHolder(*backend);
}

TEST_CASE("etcd: tickd status --runs shows what each run printed, from another process",
          "[e2e][etcd][output]") {
  if (!Available()) return;
  auto backend = MakeEtcdFixture();
  ScenarioRunOutput(*backend);
}

TEST_CASE("etcd: server killed and restarted mid-run", "[e2e][etcd]") {
  if (!Available()) return;
  auto backend = MakeEtcdFixture();
  // etcd runs without a password here: the secret only has to stay out of the logs.
  ScenarioServerRestart(*backend, "no-etcd-secret-in-this-test");
}

}  // namespace
}  // namespace tickd::e2e
