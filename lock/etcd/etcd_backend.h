// The etcd v3 backend: replicas anywhere share one etcd cluster (3.4+), reached
// through its gRPC API (etcd_wire.h; GET /version over HTTP for its clock). Claims are single transactions, leases
// expire on etcd's clock, fences are etcd revisions (durable: etcd fsyncs its WAL
// before it answers). The protocol is at the top of etcd_backend.cc.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "base/error.h"
#include "lock/backend.h"
#include "lock/tls_files.h"

namespace tickd::lock {

struct EtcdOptions {
  // etcd://host:port[,host:port…][?prefix=P]; the port defaults to 2379 and the key
  // prefix to "/tickd/". Several endpoints (members of one cluster): a connection
  // failure tries the next. Credentials never go in the URL (see username).
  std::string url;
  // etcd authentication: with a username, the backend asks /v3/auth/authenticate for
  // a token and sends it with every request; a token that expired (simple tokens live
  // 5 minutes by default, --auth-token-ttl) is renewed and the request sent once more.
  // The password is never logged, never part of an error.
  std::string username;
  std::string password;
  // Enabled: https to every member, the server checked against ca_file (or the
  // system's CAs) and, when set, a client certificate (for --client-cert-auth).
  TlsFiles tls;
  // Every call returns within this, with an Error when no member answered: fail closed.
  std::chrono::milliseconds op_timeout{2'000};
  // The start-up warning of an etcd that never compacted its history: given when its
  // db is at least this large and revision 1 can still be read (tests lower it;
  // docs/stores.md, etcd, "Compact the history").
  std::int64_t uncompacted_warn_bytes = std::int64_t{256} << 20;
};

// Parses the URL and checks that a member answers (an Error otherwise, naming the URL).
// The Backend is thread-safe (one HTTP connection behind a mutex, reused).
Result<std::unique_ptr<Backend>> NewEtcdBackend(const EtcdOptions& options);

}  // namespace tickd::lock
