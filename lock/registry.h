// Backends are chosen from an explicit table keyed by URL scheme (no static
// self-registration): lock/registry.cc lists every backend built in.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/error.h"
#include "lock/backend.h"
#include "lock/tls_files.h"

namespace tickd::lock {

struct BackendOptions {
  std::string backend = "sqlite";    // sqlite | redis | etcd | postgres | zookeeper | none | memory
  std::string url;                   // e.g. sqlite://./tickd.db; relative paths already resolved
  std::string password;              // from lock.password_file or lock.password_env (a password
                                     // in the URL wins); never logged
  std::string username;              // lock.username ("" = the URL's user, if any)
  TlsFiles tls;                      // lock.tls (etcd, postgres)
  milliseconds op_timeout{2'000};    // every backend call returns within this
  milliseconds retention{7 * 24 * 3'600'000LL};  // how long tick records are kept
};

// Opens the backend named by options.backend. Errors name the backend and the URL
// with any password masked.
Result<std::unique_ptr<Backend>> OpenBackend(const BackendOptions& options, Clock& clock);

// The backend names this build knows (for "did you mean" and --help).
std::vector<std::string> BackendNames();

// Replaces a URL's password with "***" ("redis://u:***@h:6379/0").
std::string RedactUrl(const std::string& url);

}  // namespace tickd::lock
