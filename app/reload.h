// Reloading the job file while the daemon runs (docs/design.md §4, §7): on SIGHUP or when
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

// A job file as the daemon keeps it: the settings, and the jobs once, as the job set.
struct LoadedJobFile {
  config::Config config;  // config.jobs is empty: the jobs are in `jobs`
  JobSet jobs;            // the enabled jobs
};

// How tickd's commands load a job file: as config::LoadConfig's defaults, but each
// plugin is loaded for its check in a child (`/proc/self/exe plugin-host --check`,
// jobs::CheckPluginInHost: the running tickd, also after an upgrade replaced the
// file), so that a library whose constructor crashes, exits or hangs is an error of
// the file and not the end of `tickd validate` or of a daemon reloading it.
config::LoadOptions CommandLoadOptions();

// config::LoadConfig + MakeJobSet, arranged so that the heap keeps only the result
// (see ReleaseFreedMemory): the file is parsed on a short-lived thread, so that the
// YAML tree and every string made while parsing sit in that thread's malloc arena
// (glibc gives a new thread its own), and the job set is copied from it here, packed
// together. Freeing the parse then leaves that arena only free pages, which are
// handed back. Parsed here, each job's strings would stay scattered between the
// tree's freed nodes, keeping nearly every page of it resident (2 KB per job).
// Errors: LoadConfig's, or one (line 0) for a schedule MakeJobSet cannot compile.
tl::expected<LoadedJobFile, std::vector<config::ConfigError>> LoadJobFile(
    const std::string& path, const config::LoadOptions& options = {});

// LoadJobFile, then hands its jobs to `scheduler`. Logs each error (`config` lines)
// and one `reload` line either way: outcome=applied jobs=N, or outcome=rejected
// errors=N. Returns whether the new jobs were applied.
bool ReloadJobs(const std::string& path, Scheduler& scheduler, Logger& log,
                const config::LoadOptions& options = {});

// Fixes glibc's malloc thresholds (mmap 128 KiB, trim 1 MiB), once at start-up,
// before any thread: by default, freeing a large block (the parsed job list of a
// big file) raises them for good, after which up to twice that block's size of free
// memory stays resident at the top of every heap. Nothing outside glibc.
void FixMallocThresholds();

// Hands the heap pages that hold no live allocation back to the system (glibc's
// malloc_trim; nothing elsewhere). Parsing keeps a whole YAML tree alive for a
// moment (about 3 KB per job); malloc would keep those pages resident once freed.
void ReleaseFreedMemory();

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
