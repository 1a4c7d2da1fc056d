#include "app/status_cli.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "app/commands.h"
#include "app/reload.h"
#include "lock/registry.h"

namespace tickd::app {

std::string NodeIdFor(const std::string& flag, const config::Config& cfg) {
  if (!flag.empty()) return flag;
  if (!cfg.node_id.empty()) return cfg.node_id;
  return DefaultNodeId();
}

std::string DefaultNodeId() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') {
    std::snprintf(host, sizeof host, "%s", "tickd");
  }
  return std::string(host) + "-" + std::to_string(::getpid());
}

const config::Job* FindJobOrSay(const config::Config& cfg, const std::string& config_path,
                                const std::string& name) {
  for (const config::Job& j : cfg.jobs) {
    if (j.name == name) return &j;
  }
  std::string names;
  for (const config::Job& j : cfg.jobs) names += (names.empty() ? "" : ", ") + j.name;
  std::cerr << config_path << ": no job named " << name
            << " (jobs: " << (names.empty() ? "none" : names) << ")\n";
  return nullptr;
}

Result<lock::BackendOptions> BackendOptionsFor(const config::Config& cfg) {
  lock::BackendOptions options;
  options.backend = cfg.lock.backend;
  options.url = cfg.lock.url;
  options.username = cfg.lock.username;
  options.tls = cfg.lock.tls;
  auto password = config::ReadLockPassword(cfg.lock);
  if (!password) return MakeError("lock backend " + cfg.lock.backend, password.error());
  options.password = std::move(*password);
  options.op_timeout = cfg.lock.op_timeout;
  options.retention = cfg.lock.retention;
  return options;
}

Result<std::unique_ptr<lock::Backend>> OpenConfiguredBackend(const config::Config& cfg,
                                                             Clock& clock) {
  auto options = BackendOptionsFor(cfg);
  if (!options) return tl::unexpected(options.error());
  // Readers never prune: retention is the daemons' business.
  options->retention = std::chrono::milliseconds(0);
  return lock::OpenBackend(*options, clock);
}

std::variant<OpsContext, int> OpenOpsContext(const std::string& config_path, Clock& clock) {
  auto loaded = config::LoadConfig(config_path, CommandLoadOptions());
  if (!loaded) {
    for (const config::ConfigError& e : loaded.error()) std::cerr << e.ToString() << "\n";
    return kExitBadInput;
  }
  auto backend = OpenConfiguredBackend(*loaded, clock);
  if (!backend) {
    std::cerr << "tickd: " << backend.error().ToString() << "\n";
    return kExitFailure;
  }
  return OpsContext{std::move(*loaded), std::move(*backend)};
}

}  // namespace tickd::app
