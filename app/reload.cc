#include "app/reload.h"

#include <sys/stat.h>

#include <thread>

#include "cron/schedule.h"
#include "cron/tzdata_version.h"
#include "jobs/plugin_execution.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace tickd::app {

namespace {

bool LoadAndApply(const std::string& path, Scheduler& scheduler, Logger& log,
                  const config::LoadOptions& options) {
  auto loaded = LoadJobFile(path, options);
  if (!loaded) {
    for (const config::ConfigError& e : loaded.error()) {
      log.Log(LogLevel::kError, "config", {{"file", path}, {"error", e.ToString()}});
    }
    log.Log(LogLevel::kWarn, "reload",
            {{"file", path},
             {"outcome", "rejected"},
             {"errors", loaded.error().size()},
             {"note", "the previous jobs keep running"}});
    return false;
  }
  for (const config::ConfigError& w : loaded->config.warnings) {
    log.Log(LogLevel::kWarn, "config", {{"file", path}, {"warning", w.ToString()}});
  }
  const std::size_t count = loaded->jobs.size();
  scheduler.Reload(std::move(loaded->jobs));
  log.Log(LogLevel::kInfo, "reload", {{"file", path}, {"outcome", "applied"}, {"jobs", count}});
  return true;
}

}  // namespace

config::LoadOptions CommandLoadOptions() {
  config::LoadOptions options;
  options.plugin_check = [](const std::string& path) {
    return jobs::CheckPluginInHost("/proc/self/exe", path);
  };
  return options;
}

tl::expected<LoadedJobFile, std::vector<config::ConfigError>> LoadJobFile(
    const std::string& path, const config::LoadOptions& options) {
  // The tz database is read once per process and kept: read it here, not amid the
  // parse (its ~600 zone names would keep ~1,000 pages of the parse's arena resident).
  // Its version is read at the same moment, once (every claim carries it).
  cron::FindZone("UTC");
  cron::TzdataVersionInUse();
  std::optional<tl::expected<config::Config, std::vector<config::ConfigError>>> parsed;
  std::thread([&] { parsed = config::LoadConfig(path, options); }).join();
  tl::expected<LoadedJobFile, std::vector<config::ConfigError>> out;
  if (!*parsed) {
    out = tl::unexpected(std::move(parsed->error()));
  } else if (Result<JobSet> jobs = MakeJobSet((*parsed)->jobs); !jobs) {
    out = tl::unexpected(
        std::vector<config::ConfigError>{config::ConfigError{path, 0, 0, jobs.error().ToString()}});
  } else {
    out->jobs = std::move(*jobs);
    const std::vector<config::Job> parsed_jobs = std::move((*parsed)->jobs);
    out->config = **parsed;  // a copy here too: the settings, without the jobs
  }
  parsed.reset();
  ReleaseFreedMemory();
  return out;
}

bool ReloadJobs(const std::string& path, Scheduler& scheduler, Logger& log,
                const config::LoadOptions& options) {
  const bool applied = LoadAndApply(path, scheduler, log, options);
  ReleaseFreedMemory();  // the previous jobs (those of running runs go when the runs end)
  return applied;
}

void FixMallocThresholds() {
#if defined(__GLIBC__)
  ::mallopt(M_MMAP_THRESHOLD, 128 * 1024);  // glibc's initial value
  // Above glibc's 128 KiB: a thread's heap is trimmed only when more than this sits
  // free at its top. At 128 KiB, the scheduler thread's heap crossed it on every
  // claim batch (SQLite frees its statement journals) and was cut back by 24 KiB —
  // an madvise per claim, each one interrupting the other core to flush its TLB,
  // and the pages faulted in again by the next claim.
  ::mallopt(M_TRIM_THRESHOLD, 1024 * 1024);
#endif
}

void ReleaseFreedMemory() {
#if defined(__GLIBC__)
  ::malloc_trim(0);
#endif
}

std::optional<FileIdentity> IdentifyFile(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  FileIdentity id;
  id.device = st.st_dev;
  id.inode = st.st_ino;
  id.size = st.st_size;
  id.mtime = st.st_mtim;
  return id;
}

}  // namespace tickd::app
