// Plugins end to end: the orders-cleanup plugin on three replicas (exactly once with
// a lock, double restores without one), and plugins that crash, hang or carry the
// wrong ABI (the replicas stay up; the wrong ABI is refused at validation).
#include <signal.h>

#include <catch2/catch.hpp>
#include <set>
#include <thread>

#include "tests/e2e/orders_scenario.h"

namespace tickd::e2e {
namespace {

TEST_CASE("orders: three replicas close every stale order exactly once", "[e2e][plugins]") {
  auto backend = MakeSqliteFixture();
  OrdersOutcome out = RunOrdersCleanup(*backend, /*check_fence=*/true);
  INFO(out.check_line);
  CHECK(out.exit_statuses == std::vector<int>{0, 0, 0});
  CHECK(out.counts["orders"] > 40);
  CHECK(out.counts["unpaid"] == 0);
  CHECK(out.counts["closed"] + out.counts["paid"] == out.counts["orders"]);
  CHECK(out.counts["restocks"] == out.counts["closed"]);
  CHECK(out.counts["restored_twice"] == 0);
  CHECK(out.counts["stock_off"] == 0);

  const auto runs = Events(out.lines, "run", "cleanup-unpaid-orders");
  REQUIRE(runs.size() >= 5);
  std::set<std::string> ticks;
  for (const LogLine& r : runs) {
    INFO(r.raw);
    CHECK(r.Get("outcome") == "done");
    CHECK(ticks.insert(r.Get("tick")).second);  // one run per tick
  }
  // The plugin's log() calls become daemon lines tagged with job, tick and node.
  bool logged = false;
  for (const LogLine& l : Events(out.lines, "output", "cleanup-unpaid-orders")) {
    if (l.Get("stream") == "plugin.info" &&
        l.Get("line").find("unpaid orders") != std::string::npos) {
      logged = !l.Get("tick").empty() && !l.Get("node").empty();
    }
  }
  CHECK(logged);
}

TEST_CASE("orders: without a lock (backend none) stock is restored more than once",
          "[e2e][plugins]") {
  auto backend = MakeNoneFixture();
  // With backend none every replica wins every tick; its fences come from a counter
  // of its own, so the shop's fence cannot tell the replicas apart: check_fence off
  // makes the outcome independent of when each replica started.
  OrdersOutcome out = RunOrdersCleanup(*backend, /*check_fence=*/false);
  INFO(out.check_line);
  CHECK(out.exit_statuses == std::vector<int>{0, 0, 0});
  CHECK(out.counts["unpaid"] == 0);
  CHECK(out.counts["restored_twice"] > 0);  // the failure tickd exists to prevent
  CHECK(out.counts["stock_off"] > 0);
  CHECK(out.counts["restocks"] > out.counts["closed"]);
}

TEST_CASE("plugins that crash or hang cost one run; every replica stays up", "[e2e][plugins]") {
  auto backend = MakeSqliteFixture();
  Cluster cluster(*backend);
  cluster.WriteJobFile(std::string(R"(jobs:
  - name: crasher
    schedule: "@every 1s"
    plugin: {path: )") +
                       BEHAVE_PLUGIN + R"(, config: {mode: crash}}
  - name: hanger
    schedule: "@every 2s"
    timeout: 700ms
    kill_grace: 200ms
    plugin: {path: )" + BEHAVE_PLUGIN +
                       R"(, config: {mode: hang}}
  - name: healthy
    schedule: "@every 1s"
    plugin: {path: )" + BEHAVE_PLUGIN +
                       R"(, config: {mode: ok}, isolation: none}
)");
  for (const char* node : {"node-a", "node-b", "node-c"}) cluster.StartReplica(node);
  const bool enough = Cluster::WaitUntil(
      [&] {
        const auto lines = cluster.AllLines();
        return Events(lines, "run", "crasher").size() >= 3 &&
               Events(lines, "run", "hanger").size() >= 2 &&
               Events(lines, "run", "healthy").size() >= 3;
      },
      std::chrono::seconds(15));
  CHECK(enough);
  for (auto& r : cluster.replicas()) {
    CHECK(::kill(r->pid(), 0) == 0);  // still running
    r->Signal(SIGTERM);
  }
  for (auto& r : cluster.replicas()) CHECK(r->Wait(std::chrono::seconds(15)) == 0);
  const auto lines = cluster.AllLines();
  for (const LogLine& l : Events(lines, "run", "crasher")) {
    INFO(l.raw);
    CHECK(l.Get("outcome") == "failed");
    CHECK(l.Get("signal") == std::to_string(SIGSEGV));
  }
  std::size_t timeouts = 0;
  for (const LogLine& l : Events(lines, "run", "hanger")) {
    INFO(l.raw);
    // The last one may be cut short by the shutdown.
    timeouts += l.Get("outcome") == "timeout" ? 1 : 0;
  }
  CHECK(timeouts >= 2);
  for (const LogLine& l : Events(lines, "run", "healthy")) {
    INFO(l.raw);
    CHECK(l.Get("outcome") == "done");
  }
}

TEST_CASE("a plugin with the wrong ABI version is a validation error (exit 2)", "[e2e][plugins]") {
  auto backend = MakeSqliteFixture();
  Cluster cluster(*backend);
  const fs::path file = cluster.WriteJobFile(std::string(R"(jobs:
  - name: future
    schedule: "@every 1s"
    plugin:
      path: )") + WRONG_ABI_PLUGIN + "\n");
  // Line 9: "version", "lock:" and its two lines come first.
  const std::string expected = file.string() +
                               ":9:13: jobs[0].plugin: " WRONG_ABI_PLUGIN
                               ": tickd_plugin_v1: abi_version 2, this tickd supports 1";
  auto [status, output] = RunCommand({TICKD_BINARY, "validate", "-c", file.string()});
  INFO(output);
  CHECK(status == 2);
  CHECK(output.find(expected) != std::string::npos);
  auto [run_status, run_output] = RunCommand({TICKD_BINARY, "run", "-c", file.string()});
  INFO(run_output);
  CHECK(run_status == 2);
  CHECK(run_output.find(expected) != std::string::npos);
}

}  // namespace
}  // namespace tickd::e2e
