// Loading plugins: dlopen, the tickd_plugin_v1 symbol, abi_version, permissions —
// and how the validator reports each failure at the job's plugin key.
#include "jobs/plugin_loader.h"

#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "config/config.h"
#include "tests/config/temp_dir.h"

namespace tickd::jobs {
namespace {

using config::testing::TempDir;
namespace fs = std::filesystem;

TEST_CASE("a plugin opens and names itself", "[plugins]") {
  auto p = OpenPlugin(BEHAVE_PLUGIN);
  REQUIRE(p.has_value());
  CHECK(std::string((*p)->plugin().name) == "behave");
  CHECK((*p)->plugin().abi_version == TICKD_PLUGIN_ABI_VERSION);
  CHECK((*p)->path() == BEHAVE_PLUGIN);
}

TEST_CASE("each way a plugin fails to load names the path and the reason", "[plugins]") {
  auto missing = OpenPlugin("/nonexistent/libx.so");
  REQUIRE_FALSE(missing.has_value());
  CHECK(missing.error().context == "/nonexistent/libx.so");
  CHECK_THAT(missing.error().detail,
             Catch::Contains("dlopen: ") && Catch::Contains("No such file or directory"));

  auto no_symbol = OpenPlugin(NO_SYMBOL_PLUGIN);
  REQUIRE_FALSE(no_symbol.has_value());
  CHECK_THAT(no_symbol.error().ToString(),
             Catch::StartsWith(NO_SYMBOL_PLUGIN) &&
                 Catch::Contains("no tickd_plugin_v1 symbol: ") &&
                 Catch::Contains("undefined symbol: tickd_plugin_v1"));

  auto wrong = OpenPlugin(WRONG_ABI_PLUGIN);
  REQUIRE_FALSE(wrong.has_value());
  CHECK_THAT(wrong.error().detail, Catch::Contains("abi_version 2, this tickd supports 1"));

  TempDir dir;
  auto not_elf = OpenPlugin(dir.Write("fake.so", "not really a library"));
  REQUIRE_FALSE(not_elf.has_value());
  CHECK_THAT(not_elf.error().detail, Catch::Contains("dlopen: "));
}

TEST_CASE("a plugin file writable by group or others is refused", "[plugins]") {
  TempDir dir;
  const fs::path copy = dir.path() / "behave.so";
  fs::copy_file(BEHAVE_PLUGIN, copy);
  ::chmod(copy.c_str(), 0664);
  auto r = CheckPluginFile(copy.string(), true);
  REQUIRE_FALSE(r.has_value());
  CHECK_THAT(r.error().detail, Catch::Contains("writable by group or others (mode 0664)"));
  CHECK(CheckPluginFile(copy.string(), false).has_value());
  ::chmod(copy.c_str(), 0755);
  CHECK(CheckPluginFile(copy.string(), true).has_value());
}

TEST_CASE("the registry opens a library once and keeps it", "[plugins]") {
  PluginRegistry registry;
  auto a = registry.Get(BEHAVE_PLUGIN);
  auto b = registry.Get(BEHAVE_PLUGIN);
  REQUIRE(a.has_value());
  REQUIRE(b.has_value());
  CHECK(a->get() == b->get());
  CHECK_FALSE(registry.Get(WRONG_ABI_PLUGIN).has_value());
}

TEST_CASE("validation: a bad plugin is an error at the job's plugin key", "[plugins][config]") {
  TempDir dir;
  const std::string file = dir.Write("jobs.yaml", std::string(R"(version: 1
lock: {backend: none}
jobs:
  - name: good
    schedule: "@every 1m"
    plugin: {path: )") + BEHAVE_PLUGIN + R"(, config: {mode: ok}}
  - name: wrong-abi
    schedule: "@every 1m"
    plugin:
      path: )" + WRONG_ABI_PLUGIN + R"(
  - name: no-symbol
    schedule: "@every 1m"
    plugin: )" + NO_SYMBOL_PLUGIN + "\n");
  auto r = config::LoadConfig(file);
  REQUIRE_FALSE(r.has_value());
  REQUIRE(r.error().size() == 2);
  CHECK_THAT(r.error()[0].ToString(),
             Catch::StartsWith(file + ":10:13: jobs[1].plugin: " WRONG_ABI_PLUGIN ": ") &&
                 Catch::Contains("abi_version 2"));
  CHECK_THAT(r.error()[1].ToString(),
             Catch::StartsWith(file + ":13:13: jobs[2].plugin: " NO_SYMBOL_PLUGIN ": ") &&
                 Catch::Contains("undefined symbol: tickd_plugin_v1"));
}

}  // namespace
}  // namespace tickd::jobs
