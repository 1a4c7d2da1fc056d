// Reloading the job file while the daemon runs (DESIGN §4, §7): on SIGHUP or when
// the file changes. A file that fails validation is rejected whole and the jobs
// that were running keep running; a valid file replaces the job set.
#pragma once

#include <sys/types.h>

#include <ctime>
#include <optional>
#include <string>

#include "app/log.h"
#include "app/scheduler.h"
#include "config/config.h"

namespace tickd::app {

// Loads `path` and hands its jobs to `scheduler`. Logs each error (`config` lines)
// and one `reload` line either way: outcome=applied jobs=N, or outcome=rejected
// errors=N. Returns whether the new jobs were applied.
bool ReloadJobs(const std::string& path, Scheduler& scheduler, Logger& log,
                const config::LoadOptions& options = {});

// What identifies one version of the job file: a rewrite in place changes the
// mtime or the size, an editor's rename-over changes the inode.
struct FileIdentity {
  dev_t device = 0;
  ino_t inode = 0;
  off_t size = 0;
  std::timespec mtime{};
  bool operator==(const FileIdentity& o) const {
    return device == o.device && inode == o.inode && size == o.size &&
           mtime.tv_sec == o.mtime.tv_sec && mtime.tv_nsec == o.mtime.tv_nsec;
  }
};

// nullopt when the file cannot be stat'ed (being replaced, removed).
std::optional<FileIdentity> IdentifyFile(const std::string& path);

}  // namespace tickd::app
