// libFuzzer target for the job-file loader: the whole input is the job file's text,
// loaded by config::LoadConfigFromString — the code LoadConfig runs after reading the
// file: YAML, every key, ${VAR} expansion, each schedule parsed and its period found
// through the cron engine, the cross-field checks.
//
// Nothing outside the process is touched: the file is never opened (the owner/mode
// checks are LoadConfig's alone), plugins are not checked (check_plugins = false: no
// stat, no dlopen of a path the input names), and the job file's folder does not
// exist, so relative paths resolve to nowhere. What is left is read-only: one stat per
// `workdir` (is it a directory) and getenv for ${VAR} and lock.password_env.
//
// Beyond "no crash, no leak, no UB, no uncaught exception", it checks the loader's
// contract: a rejected file has at least one error, each with a message and the
// file's name; a loaded one has jobs that are complete (a valid name, exactly one
// command, a positive starting deadline) and hashable.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "config/config.h"

namespace {

constexpr char kPath[] = "/nonexistent-tickd-fuzz/jobs.yaml";

void Check(bool ok) {
  if (!ok) std::abort();
}

void CheckProblem(const tickd::config::ConfigError& e) {
  Check(!e.message.empty());
  Check(e.file == kPath);
  Check(e.line >= 0 && e.column >= 0);
  Check(e.ToString().rfind(kPath, 0) == 0);
}

void CheckJob(const tickd::config::Job& job) {
  Check(!job.name.empty() && job.name.size() <= 64);
  const int commands = (job.shell ? 1 : 0) + (job.argv.empty() ? 0 : 1) + (job.plugin ? 1 : 0);
  Check(commands == 1);
  Check(job.starting_deadline && job.starting_deadline->count() > 0);
  Check(job.retries.attempts >= 1);
  Check(!job.workdir.empty() && job.workdir[0] == '/');
  Check(job.ConfigHash().size() == 16);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // Variables the seeds and the dictionary name, one set and one set but empty, so
  // both arms of ${VAR:-default} are reachable. setenv here only: the loader reads.
  ::setenv("TICKD_FUZZ_SET", "value", 1);
  ::setenv("TICKD_FUZZ_EMPTY", "", 1);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  tickd::config::LoadOptions options;
  options.check_permissions = false;
  options.check_plugins = false;
  options.now = tickd::cron::Instant(std::chrono::seconds(1'767'225'600));  // 2026-01-01Z
  const auto loaded = tickd::config::LoadConfigFromString(text, kPath, options);
  if (!loaded) {
    Check(!loaded.error().empty());
    for (const auto& e : loaded.error()) CheckProblem(e);
    return 0;
  }
  Check(loaded->version == 1);
  Check(loaded->path == kPath);
  for (const auto& w : loaded->warnings) CheckProblem(w);
  for (const auto& job : loaded->jobs) CheckJob(job);
  return 0;
}
