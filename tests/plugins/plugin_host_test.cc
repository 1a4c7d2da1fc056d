// isolation: process — each run a child `tickd plugin-host`: records become log
// lines, the plugin's own stdout cannot forge one, and a crash, a hang or a
// cancellation ends the child, not the caller.
#include <signal.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include "jobs/plugin_execution.h"
#include "tests/plugins/plugin_test_util.h"

namespace tickd::jobs {
namespace {

using std::chrono::milliseconds;

using testing::Lines;

ProcessSpec Spec(milliseconds timeout = milliseconds(10'000)) {
  return testing::RunSpec(timeout, milliseconds(300));
}

RunResult Run(const std::string& config, ProcessSpec spec, Lines* out = nullptr) {
  auto exec = StartPluginProcess(TICKD_BINARY, {BEHAVE_PLUGIN, config}, spec,
                                 out != nullptr ? out->Sink() : OutputSink());
  REQUIRE(exec.has_value());
  auto r = (*exec)->WaitFor(milliseconds(10'000));
  REQUIRE(r.has_value());
  return *r;
}

TEST_CASE("plugin-host: a run's logs arrive as plugin lines; its stdout cannot forge one",
          "[plugins]") {
  Lines out;
  RunResult r = Run(R"({"mode":"ok"})", Spec(), &out);
  CHECK(r.outcome == RunOutcome::kDone);
  CHECK(r.exit_code == 0);
  CHECK(out.Has("plugin.info",
                R"(job=j node=node-a tick=1700000000 fence=42 attempt=1 config={"mode":"ok"})"));
  CHECK(out.Has("plugin.warn", "first"));
  CHECK(out.Has("plugin.warn", "second"));
  CHECK_FALSE(out.Has("plugin.warn", "\n"));  // one record per line
  CHECK(out.Has("plugin.error", "clamped to error"));
  CHECK(out.Has("stderr", "info forged record"));
  CHECK_FALSE(out.Has("plugin.info", "forged record"));
}

TEST_CASE("plugin-host, prepared ahead: the host starts at its instant; records as before",
          "[plugins]") {
  Lines out;
  const auto start_at = std::chrono::system_clock::now() + milliseconds(100);
  auto prepared = PreparePluginProcess(TICKD_BINARY, {BEHAVE_PLUGIN, R"({"mode":"ok"})"},
                                       Spec(), out.Sink(), start_at);
  REQUIRE(prepared.has_value());
  CHECK((*prepared)->settle() > milliseconds(0));
  auto exec = (*prepared)->Release();
  REQUIRE(exec.has_value());
  REQUIRE((*prepared)->started().has_value());
  CHECK(*(*prepared)->started() >= start_at);
  auto r = (*exec)->WaitFor(milliseconds(10'000));
  REQUIRE(r.has_value());
  CHECK(r->outcome == RunOutcome::kDone);
  CHECK(r->exit_code == 0);
  CHECK(out.Has("plugin.warn", "first"));
  CHECK(out.Has("stderr", "info forged record"));
  CHECK_FALSE(out.Has("plugin.info", "forged record"));
}

TEST_CASE("plugin-host: the exit status is run's return value, the err text the error",
          "[plugins]") {
  RunResult r = Run(R"({"mode":"fail"})", Spec());
  CHECK(r.outcome == RunOutcome::kFailed);
  CHECK(r.exit_code == 7);
  CHECK(r.error == "failed on purpose");
}

TEST_CASE("plugin-host: a crash costs the run only", "[plugins]") {
  RunResult r = Run(R"({"mode":"crash"})", Spec());
  CHECK(r.outcome == RunOutcome::kFailed);
  CHECK_FALSE(r.exit_code.has_value());
  CHECK(r.signal == SIGSEGV);
}

TEST_CASE("plugin-host: a hang is ended by the timeout (SIGKILL after the grace)", "[plugins]") {
  RunResult r = Run(R"({"mode":"hang"})", Spec(milliseconds(200)));
  CHECK(r.outcome == RunOutcome::kTimeout);
  CHECK(r.signal == SIGKILL);
}

TEST_CASE("plugin-host: SIGTERM makes cancelled() non-zero", "[plugins]") {
  auto exec =
      StartPluginProcess(TICKD_BINARY, {BEHAVE_PLUGIN, R"({"mode":"cooperative"})"}, Spec(), {});
  REQUIRE(exec.has_value());
  CHECK_FALSE((*exec)->WaitFor(milliseconds(200)).has_value());
  (*exec)->Terminate(RunOutcome::kLeaseLost);
  auto r = (*exec)->WaitFor(milliseconds(5'000));
  REQUIRE(r.has_value());
  CHECK(r->outcome == RunOutcome::kLeaseLost);
  CHECK(r->exit_code == 5);  // returned on its own, before the SIGKILL
  CHECK(r->error == "cancelled");
}

TEST_CASE("plugin-host: a plugin that cannot load fails the run with the reason", "[plugins]") {
  auto exec = StartPluginProcess(TICKD_BINARY, {"/nonexistent/lib.so", "{}"}, Spec(), {});
  REQUIRE(exec.has_value());
  auto r = (*exec)->WaitFor(milliseconds(10'000));
  REQUIRE(r.has_value());
  CHECK(r->outcome == RunOutcome::kFailed);
  CHECK(r->exit_code == 126);
  CHECK_THAT(r->error, Catch::Contains("/nonexistent/lib.so: dlopen: "));
}

// The validator's check in a child: whatever the library's constructor does to the
// process that loads it, the caller gets the plugin's error and goes on.
TEST_CASE("plugin-host --check: a plugin that loads, and one refused, say so", "[plugins]") {
  CHECK(CheckPluginInHost(TICKD_BINARY, BEHAVE_PLUGIN).has_value());
  auto abi = CheckPluginInHost(TICKD_BINARY, WRONG_ABI_PLUGIN);
  REQUIRE_FALSE(abi.has_value());
  CHECK(abi.error().context == WRONG_ABI_PLUGIN);
  CHECK_THAT(abi.error().ToString(),
             Catch::StartsWith(std::string(WRONG_ABI_PLUGIN) + ": tickd_plugin_v1: abi_version"));
  // No host to check in: the check is made in this process, with the same answers.
  CHECK(CheckPluginInHost("/nonexistent/tickd", BEHAVE_PLUGIN).has_value());
  auto here = CheckPluginInHost("/nonexistent/tickd", WRONG_ABI_PLUGIN);
  REQUIRE_FALSE(here.has_value());
  CHECK(here.error().ToString() == abi.error().ToString());
}

TEST_CASE("plugin-host --check: a constructor that crashes, exits, hangs or prints",
          "[plugins]") {
  const auto check = [](const char* mode) {
    ::setenv("TICKD_TEST_HOSTILE", mode, 1);  // the child inherits it
    auto r = CheckPluginInHost(TICKD_BINARY, HOSTILE_PLUGIN);
    ::unsetenv("TICKD_TEST_HOSTILE");
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().context == HOSTILE_PLUGIN);
    return r.error().ToString();
  };
  CHECK_THAT(check("crash"), Catch::Contains("loading it crashed the check (SIGSEGV)"));
  CHECK_THAT(check("exit"), Catch::Contains("loading it ended the check (exit status 0)"));
  CHECK_THAT(check("hang"), Catch::Contains("loading it did not finish within 10s"));
  // Its "ok" on stdout is not the check's verdict.
  CHECK_THAT(check("print"), Catch::Contains("no tickd_plugin_v1 symbol"));
}

}  // namespace
}  // namespace tickd::jobs
