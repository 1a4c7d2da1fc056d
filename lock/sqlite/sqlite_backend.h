// The embedded default backend: replicas on ONE host share a SQLite database file.
// The protocol (WAL, BEGIN IMMEDIATE, CLOCK_BOOTTIME leases + boot id, flock'd lock
// files for instant takeover after a crash) is described at the top of
// sqlite_backend.cc.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/clock.h"
#include "base/error.h"
#include "lock/backend.h"

namespace tickd::lock {

struct SqliteOptions {
  std::string path;                                // the database file; created if absent
  std::chrono::milliseconds busy_timeout{2'000};   // longest wait for another replica's write
  // At open, tick records and observations older than this are pruned (0: never).
  std::chrono::milliseconds retention{7 * 24 * 3'600'000LL};
  // The boot this process runs in; empty: /proc/sys/kernel/random/boot_id. Tests set
  // it to simulate a reboot (leases written under another boot id are void).
  std::string boot_id;
};

// Opens (creating if needed) the database and the lock-file folder `<path>.locks/`.
// `missed` is judged on clock.Wall(); leases on CLOCK_BOOTTIME. Errors name the path.
// Each Backend is one replica: it owns its connection and its holder-file descriptors,
// so two replicas in one process really compete (open-file-description locks,
// F_OFD_SETLK, belong to the open file, not to the process).
// Thread-safe (calls are serialized on the connection). REQUIRES: `clock` outlives it.
Result<std::unique_ptr<Backend>> NewSqliteBackend(const SqliteOptions& options, Clock& clock);

// "sqlite:///abs/path.db" → "/abs/path.db"; "sqlite://./rel.db" → "./rel.db".
// A bare path is accepted as is. Errors on an empty path or another scheme.
Result<std::string> SqlitePathFromUrl(std::string_view url);

// The name of a network file system for a statfs() f_type ("nfs", "cifs", …), or
// nullopt for a local one. SQLite's WAL needs shared memory on one host: a database
// on such a file system is warned about at start.
std::optional<std::string_view> RemoteFileSystemName(long f_type);

}  // namespace tickd::lock
