// The fault scenarios against the embedded SQLite backend (replicas on one host).
#include <catch2/catch.hpp>

#include "tests/e2e/scenarios.h"

namespace tickd::e2e {
namespace {

TEST_CASE("sqlite: skewed replicas run every tick exactly once", "[e2e][sqlite]") {
  auto backend = MakeSqliteFixture();
  ScenarioSkewedReplicas(*backend);
}

TEST_CASE("sqlite: SIGKILL of the running replica", "[e2e][sqlite]") {
  auto backend = MakeSqliteFixture();
  SECTION("at-most-once: the interrupted tick is not run again") {
    ScenarioKillRunningReplica(*backend, /*recover=*/false);
  }
  SECTION("recover: the interrupted tick runs once more elsewhere") {
    ScenarioKillRunningReplica(*backend, /*recover=*/true);
  }
}

TEST_CASE("sqlite: a paused holder loses its lease", "[e2e][sqlite]") {
  auto backend = MakeSqliteFixture();
  ScenarioPausedHolder(*backend);
}

TEST_CASE("sqlite: tickd pause and resume hold on every replica", "[e2e][sqlite]") {
  auto backend = MakeSqliteFixture();
  ScenarioPauseResume(*backend);
}

TEST_CASE("sqlite: SIGTERM drains and exits 0", "[e2e][sqlite]") {
  auto backend = MakeSqliteFixture();
  ScenarioGracefulShutdown(*backend);
}

TEST_CASE("sqlite: H and jitter spread the runs; each tick once, at its due instant",
          "[e2e][sqlite][spread]") {
  auto backend = MakeSqliteFixture();
  ScenarioSpread(*backend);
}

}  // namespace
}  // namespace tickd::e2e
