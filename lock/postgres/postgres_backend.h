// The PostgreSQL backend: replicas anywhere share one PostgreSQL (≥ 12; tried on 15)
// database. The database's clock decides every lease, expiry and deadline; a sequence
// gives the fences; the lease table (not advisory locks) holds the claims, so a
// killed database session frees nothing that a replica still believes it holds. The
// protocol is at the top of postgres_backend.cc.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "base/error.h"
#include "lock/backend.h"
#include "lock/tls_files.h"

namespace tickd::lock {

struct PostgresOptions {
  // postgres://[user[:password]@]host[:port]/dbname[?param=value…] (postgresql://
  // too): a libpq connection URI, so every libpq parameter (sslmode, …) works.
  std::string url;
  // Used when the URL carries none: the role (lock.username) and its password
  // (lock.password_file or lock.password_env). The password is never logged, never
  // part of an error.
  std::string username;
  std::string password;
  // lock.tls: when enabled, sslmode=verify-full (the server's certificate must be
  // signed by ca_file and name the URL's host) with sslrootcert = ca_file and, when
  // set, the client certificate (sslcert/sslkey, for pg_hba `cert`). These win over
  // the same parameters in the URL.
  TlsFiles tls;
  // Every call (connect included) returns within this, with an Error when the
  // database did not answer: fail closed. Also sent as the session's
  // statement_timeout and lock_timeout, so the server gives up when we do.
  std::chrono::milliseconds op_timeout{2'000};
  // How long tick records and observations are kept (Prune removes older ones).
  std::chrono::milliseconds retention{7 * 24 * 3'600'000LL};
};

// Connects and creates or migrates the tables (tickd_schema holds their version).
// Errors — a bad URL, an unreachable server, a refused password, a schema newer
// than this build — name the URL with its password masked. The Backend is
// thread-safe (one connection behind a mutex); after a failure it reconnects on a
// later call, with a growing pause between attempts (≤ 2 s), and answers Error
// meanwhile.
Result<std::unique_ptr<Backend>> NewPostgresBackend(const PostgresOptions& options);

}  // namespace tickd::lock
