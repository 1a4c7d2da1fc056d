// The fault scenarios against a real ZooKeeper (tests/e2e/zookeeper_fixture.cc, one
// server for the binary), the server's own crash and restart, and what only
// ZooKeeper has: a holder whose session is lost mid-run has its job terminated
// (lease-lost) long before its lease would have run out.
#include <signal.h>

#include <catch2/catch.hpp>

#include "tests/e2e/scenarios.h"
#include "tests/zookeeper/zookeeper_server.h"

namespace tickd::e2e {
namespace {

using namespace std::chrono_literals;
using testing::ZookeeperServer;

bool Available() {
  if (!ZookeeperServer::Available()) WARN("zookeeper or java not installed: skipped");
  return ZookeeperServer::Available();
}

TEST_CASE("zookeeper: skewed replicas run every tick exactly once", "[e2e][zookeeper]") {
  if (!Available()) return;
  auto backend = MakeZookeeperFixture();
  ScenarioSkewedReplicas(*backend);
}

TEST_CASE("zookeeper: a clock 30 s ahead, 1 h ahead, 30 s behind never runs a tick early",
          "[e2e][zookeeper][clock]") {
  if (!Available()) return;
  auto backend = MakeZookeeperFixture();
  ScenarioWrongClock(*backend);
}

TEST_CASE("zookeeper: a replica ahead by less than the tolerance starts no run before its tick",
          "[e2e][zookeeper][clock]") {
  if (!Available()) return;
  auto backend = MakeZookeeperFixture();
  ScenarioClockAheadWithinTolerance(*backend);
}

TEST_CASE("zookeeper: SIGKILL of the running replica", "[e2e][zookeeper]") {
  if (!Available()) return;
  auto backend = MakeZookeeperFixture();
  SECTION("at-most-once: the interrupted tick is not run again") {
    ScenarioKillRunningReplica(*backend, /*recover=*/false);
  }
  SECTION("recover: the interrupted tick runs once more elsewhere") {
    ScenarioKillRunningReplica(*backend, /*recover=*/true);
  }
}

TEST_CASE("zookeeper: a paused holder loses its lease", "[e2e][zookeeper]") {
  if (!Available()) return;
  auto backend = MakeZookeeperFixture();
  ScenarioPausedHolder(*backend);
}

TEST_CASE("zookeeper: server killed and restarted mid-run", "[e2e][zookeeper]") {
  if (!Available()) return;
  auto backend = MakeZookeeperFixture();
  ScenarioServerRestart(*backend, /*secret=*/"no-password-with-zookeeper");
}

// The test server grants sessions of at most 4 s; the lease is 15 s. Freezing the
// server for 7 s costs the holder its session: its watchdog hears no answer for 2/3 of
// the session timeout, the backend says the claim is no longer ours, and the run is
// terminated — 8 s before the lease itself would have run out. The freeze outlasts the
// first renewal (5 s after the claim) by 2 s, so that renewal always meets a client
// still disconnected; a shorter freeze lets it meet a client that has reconnected to a
// server that never noticed the silence, and the session rightly lives on.
TEST_CASE("zookeeper: losing the session during a run terminates the job", "[e2e][zookeeper]") {
  if (!Available()) return;
  auto backend = MakeZookeeperFixture();
  Cluster cluster(*backend);
  cluster.WriteJobFile(
      "shutdown_grace: 2s\n"
      "jobs:\n"
      "  - name: held\n"
      "    schedule: \"*/2 * * * * *\"\n"
      "    kill_grace: 1s\n"
      "    shell: sleep 30\n",
      "lease: 15s");
  Replica& a = cluster.StartReplica("node-a");
  Replica& b = cluster.StartReplica("node-b");
  Replica* holder = nullptr;
  REQUIRE(Cluster::WaitUntil(
      [&] {
        for (Replica* r : {&a, &b}) {
          for (const LogLine& l : r->Lines()) {
            if (l.event == "tick" && l.Get("outcome") == "won") holder = r;
          }
        }
        return holder != nullptr;
      },
      15s));
  ZookeeperServer::Shared().Pause();
  const auto paused_at = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(7s);
  ZookeeperServer::Shared().Resume();
  std::optional<std::chrono::steady_clock::duration> lost_after;
  const bool lost = Cluster::WaitUntil(
      [&] {
        for (const LogLine& l : holder->Lines()) {
          if (l.event == "run" && l.Get("outcome") == "lease-lost") {
            if (!lost_after) lost_after = std::chrono::steady_clock::now() - paused_at;
            return true;
          }
        }
        return false;
      },
      10s);
  INFO(holder->LogText());
  REQUIRE(lost);
  CHECK(*lost_after < 14s);  // before the 15 s lease could have run out on its own
  bool said_by_backend = false;
  for (const LogLine& l : holder->Lines()) {
    if (l.event == "lease" && l.Get("reason").find("no longer ours") != std::string::npos) {
      said_by_backend = true;
    }
  }
  CHECK(said_by_backend);
  for (auto& r : cluster.replicas()) r->Signal(SIGTERM);
  for (auto& r : cluster.replicas()) CHECK(r->Wait(20s) == 0);
}

}  // namespace
}  // namespace tickd::e2e
