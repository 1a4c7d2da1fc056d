// isolation: none — runs on a worker thread: parameters, log lines, outcomes,
// cooperative cancellation and the timeout of a plugin that ignores it.
#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "jobs/plugin_execution.h"
#include "tests/plugins/plugin_test_util.h"

namespace tickd::jobs {
namespace {

using std::chrono::milliseconds;

using testing::Lines;

ProcessSpec Spec(milliseconds timeout = milliseconds(10'000),
                 milliseconds grace = milliseconds(300)) {
  return testing::RunSpec(timeout, grace, /*attempt=*/2);
}

RunResult Wait(Execution& e) {
  auto r = e.WaitFor(milliseconds(10'000));
  REQUIRE(r.has_value());
  return *r;
}

// The run started at once, or prepared ahead (PreparePluginInProcess) and released.
Result<std::unique_ptr<Execution>> StartOrPrepare(bool prepare, PluginRegistry& registry,
                                                  const PluginJob& plugin, OutputSink sink) {
  if (!prepare) return StartPluginInProcess(registry, plugin, Spec(), std::move(sink));
  const auto start_at = std::chrono::system_clock::now() + milliseconds(100);
  auto prepared = PreparePluginInProcess(registry, plugin, Spec(), std::move(sink), start_at,
                                         std::chrono::steady_clock::now() + std::chrono::hours(1));
  REQUIRE(prepared.has_value());
  auto exec = (*prepared)->Release();
  if ((*prepared)->checks_start_bound()) {  // a call made (not a plugin that cannot load)
    REQUIRE((*prepared)->started().has_value());
    CHECK(*(*prepared)->started() >= start_at);
  }
  return exec;
}

TEST_CASE("in-process: the plugin sees the run's parameters and its logs become lines; "
          "prepared ahead, the same at its instant",
          "[plugins]") {
  for (const bool prepare : {false, true}) {
    PluginRegistry registry;
    Lines out;
    auto exec = StartOrPrepare(prepare, registry, {BEHAVE_PLUGIN, R"({"mode":"ok"})"}, out.Sink());
    REQUIRE(exec.has_value());
    RunResult r = Wait(**exec);
    CHECK(r.outcome == RunOutcome::kDone);
    CHECK(r.exit_code == 0);
    CHECK(out.Has("plugin.info", R"(job=j node=node-a tick=1700000000 fence=42 attempt=2 )"
                                 R"(config={"mode":"ok"})"));
    CHECK(out.Has("plugin.warn", "first\nsecond"));
    CHECK(out.Has("plugin.error", "clamped to error"));
  }
}

TEST_CASE("in-process: a failed run reports its status and err text", "[plugins]") {
  PluginRegistry registry;
  auto exec = StartPluginInProcess(registry, {BEHAVE_PLUGIN, R"({"mode":"fail"})"}, Spec(), {});
  REQUIRE(exec.has_value());
  RunResult r = Wait(**exec);
  CHECK(r.outcome == RunOutcome::kFailed);
  CHECK(r.exit_code == 7);
  CHECK(r.error == "failed on purpose");

  auto init =
      StartPluginInProcess(registry, {BEHAVE_PLUGIN, R"({"mode":"init-fails"})"}, Spec(), {});
  REQUIRE(init.has_value());
  RunResult ri = Wait(**init);
  CHECK(ri.outcome == RunOutcome::kFailed);
  CHECK(ri.exit_code == 4);
  CHECK(ri.error == "init: init refused the config");
}

TEST_CASE("in-process: a plugin that cannot load is a failed run (prepared: at its release)",
          "[plugins]") {
  for (const bool prepare : {false, true}) {
    PluginRegistry registry;
    auto exec = StartOrPrepare(prepare, registry, {WRONG_ABI_PLUGIN, "{}"}, {});
    REQUIRE(exec.has_value());
    RunResult r = Wait(**exec);
    CHECK(r.outcome == RunOutcome::kFailed);
    CHECK_THAT(r.error, Catch::Contains("abi_version 2"));
  }
}

TEST_CASE("in-process: Terminate sets cancelled(); the outcome is the reason", "[plugins]") {
  PluginRegistry registry;
  auto exec =
      StartPluginInProcess(registry, {BEHAVE_PLUGIN, R"({"mode":"cooperative"})"}, Spec(), {});
  REQUIRE(exec.has_value());
  CHECK_FALSE((*exec)->WaitFor(milliseconds(50)).has_value());
  (*exec)->Terminate(RunOutcome::kLeaseLost);
  RunResult r = Wait(**exec);
  CHECK(r.outcome == RunOutcome::kLeaseLost);
  CHECK(r.exit_code == 5);
  CHECK(r.error == "cancelled");
}

TEST_CASE("in-process: the timeout cancels; a plugin that ignores it is abandoned", "[plugins]") {
  PluginRegistry registry;
  auto coop = StartPluginInProcess(registry, {BEHAVE_PLUGIN, R"({"mode":"cooperative"})"},
                                   Spec(milliseconds(100)), {});
  REQUIRE(coop.has_value());
  RunResult rc = Wait(**coop);
  CHECK(rc.outcome == RunOutcome::kTimeout);
  CHECK(rc.exit_code == 5);

  const auto start = std::chrono::steady_clock::now();
  auto hang = StartPluginInProcess(registry, {BEHAVE_PLUGIN, R"({"mode":"hang"})"},
                                   Spec(milliseconds(100), milliseconds(100)), {});
  REQUIRE(hang.has_value());
  RunResult rh = Wait(**hang);
  CHECK(rh.outcome == RunOutcome::kTimeout);
  CHECK_FALSE(rh.exit_code.has_value());
  CHECK_THAT(rh.error, Catch::Contains("its thread keeps running"));
  CHECK(std::chrono::steady_clock::now() - start < milliseconds(2'000));
  hang->reset();  // detaches the thread: the test process goes on
}

}  // namespace
}  // namespace tickd::jobs
