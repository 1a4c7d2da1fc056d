// The etcd v3 backend: replicas anywhere share one etcd cluster (3.4+), reached
// through its JSON gateway (/v3/…) over HTTP. Claims are single transactions, leases
// expire on etcd's clock, fences are etcd revisions (durable: etcd fsyncs its WAL
// before it answers). The protocol is at the top of etcd_backend.cc.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "base/error.h"
#include "lock/backend.h"

namespace tickd::lock {

struct EtcdOptions {
  // etcd://host:port[,host:port…][?prefix=P]; the port defaults to 2379 and the key
  // prefix to "/tickd/". Plain HTTP (no TLS, no etcd authentication in this version).
  // Several endpoints (members of one cluster): a connection failure tries the next.
  std::string url;
  // Every call returns within this, with an Error when no member answered: fail closed.
  std::chrono::milliseconds op_timeout{2'000};
};

// Parses the URL and checks that a member answers (an Error otherwise, naming the URL).
// The Backend is thread-safe (one HTTP connection behind a mutex, reused).
Result<std::unique_ptr<Backend>> NewEtcdBackend(const EtcdOptions& options);

}  // namespace tickd::lock
