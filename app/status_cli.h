// What the operator subcommands (`tickd status`, `trigger`, `locks`) share: load the
// job file exactly as the daemon does and open its lock backend.
#pragma once

#include <memory>
#include <string>
#include <variant>

#include "base/clock.h"
#include "config/config.h"
#include "lock/registry.h"
#include "lock/backend.h"

namespace tickd::app {

struct OpsContext {
  config::Config config;
  std::unique_ptr<lock::Backend> backend;
};

// The loaded file and its opened backend, or the exit status to return after the
// errors were printed on stderr (kExitBadInput for a bad file, kExitFailure when the
// backend cannot be opened).
std::variant<OpsContext, int> OpenOpsContext(const std::string& config_path, Clock& clock);

// This replica's node id: `flag` (--node-id), else the job file's node.id, else
// <hostname>-<pid>.
std::string NodeIdFor(const std::string& flag, const config::Config& cfg);
// <hostname>-<pid>: a node id when nobody named one (the library's default too).
std::string DefaultNodeId();

// The job named `name` in `cfg`, or null after printing "<file>: no job named …
// (jobs: …)" on stderr (the caller exits kExitBadInput).
const config::Job* FindJobOrSay(const config::Config& cfg, const std::string& config_path,
                                const std::string& name);

// The options that open the backend of `cfg`: URL, user, TLS files and the password,
// read now from lock.password_file or lock.password_env (an Error names the file when
// it cannot be read). Retention as configured.
Result<lock::BackendOptions> BackendOptionsFor(const config::Config& cfg);

// Opens the backend of `cfg` (BackendOptionsFor), for readers: retention 0, no pruning.
Result<std::unique_ptr<lock::Backend>> OpenConfiguredBackend(const config::Config& cfg,
                                                             Clock& clock);

}  // namespace tickd::app
