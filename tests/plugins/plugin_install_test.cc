// A plugin author needs the installed header alone: `cmake --install` to a fresh
// prefix, compile a plugin there with `cc -shared -fPIC -I<prefix>/include`, outside
// the build tree, and tickd loads and runs it.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "jobs/plugin_execution.h"

namespace tickd::jobs {
namespace {

namespace fs = std::filesystem;

constexpr const char* kPluginSource = R"(#include <stdio.h>
#include <tickd/plugin.h>

static int Run(const tickd_run *run, char *err, size_t err_len) {
  char message[128];
  snprintf(message, sizeof message, "hello from outside, fence %llu",
           (unsigned long long)run->fence);
  run->log(run->log_ctx, TICKD_LOG_INFO, message);
  (void)err;
  (void)err_len;
  return 0;
}

static const tickd_plugin kPlugin = {TICKD_PLUGIN_ABI_VERSION, "outside", NULL, Run, NULL};
TICKD_PLUGIN_EXPORT const tickd_plugin *tickd_plugin_v1(void) { return &kPlugin; }
)";

int Shell(const std::string& command) {
  INFO(command);
  const int rc = std::system(command.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

TEST_CASE("a plugin compiled against the installed header alone loads and runs", "[plugins]") {
  std::string templ = (fs::temp_directory_path() / "tickd-install-XXXXXX").string();
  REQUIRE(::mkdtemp(templ.data()) != nullptr);
  const fs::path dir = templ;
  const fs::path prefix = dir / "prefix";
  REQUIRE(Shell("cmake --install '" TICKD_BUILD_DIR "' --prefix '" + prefix.string() + "' > '" +
                (dir / "install.log").string() + "' 2>&1") == 0);
  const fs::path header = prefix / "include/tickd/plugin.h";
  REQUIRE(fs::exists(header));

  std::ofstream(dir / "outside.c") << kPluginSource;
  const std::string include = "-I'" + (prefix / "include").string() + "'";
  // Compiles from the temp folder: nothing of the source or build tree is reachable.
  REQUIRE(Shell("cd '" + dir.string() + "' && cc -std=c99 -Wall -Werror -pedantic -shared -fPIC " +
                include + " outside.c -o liboutside.so") == 0);
  // The header is C++-clean too (extern "C").
  REQUIRE(Shell("cd '" + dir.string() + "' && c++ -std=c++17 -Wall -Werror -fsyntax-only -x c++ " +
                include + " outside.c") == 0);

  PluginRegistry registry;
  std::string logged;
  ProcessSpec spec;
  spec.env = {{"TICKD_FENCE", "9"}};
  auto exec = StartPluginInProcess(
      registry, {(dir / "liboutside.so").string(), "{}"}, spec,
      [&](std::string_view, std::string_view line) { logged = std::string(line); });
  REQUIRE(exec.has_value());
  auto r = (*exec)->WaitFor(std::chrono::milliseconds(5'000));
  REQUIRE(r.has_value());
  CHECK(r->outcome == RunOutcome::kDone);
  CHECK(logged == "hello from outside, fence 9");
  exec->reset();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tickd::jobs
