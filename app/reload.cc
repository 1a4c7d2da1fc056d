#include "app/reload.h"

#include <sys/stat.h>

namespace tickd::app {

bool ReloadJobs(const std::string& path, Scheduler& scheduler, Logger& log,
                const config::LoadOptions& options) {
  auto loaded = config::LoadConfig(path, options);
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
  Result<JobSet> jobs = MakeJobSet(loaded->jobs);
  if (!jobs) {
    log.Log(LogLevel::kError, "config", {{"file", path}, {"error", jobs.error().ToString()}});
    log.Log(LogLevel::kWarn, "reload",
            {{"file", path},
             {"outcome", "rejected"},
             {"errors", 1},
             {"note", "the previous jobs keep running"}});
    return false;
  }
  for (const config::ConfigError& w : loaded->warnings) {
    log.Log(LogLevel::kWarn, "config", {{"file", path}, {"warning", w.ToString()}});
  }
  const std::size_t count = jobs->size();
  scheduler.Reload(std::move(*jobs));
  log.Log(LogLevel::kInfo, "reload", {{"file", path}, {"outcome", "applied"}, {"jobs", count}});
  return true;
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
