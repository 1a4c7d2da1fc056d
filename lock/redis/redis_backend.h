// The Redis backend: replicas anywhere share one Redis primary (efficiency-grade:
// a failover or a restart without `appendonly yes` + `appendfsync always` can lose
// claims and repeat fences). The protocol (Lua scripts under one hash tag per job,
// the server's clock for leases and deadlines) is at the top of redis_backend.cc.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "base/error.h"
#include "lock/backend.h"

namespace tickd::lock {

struct RedisOptions {
  // redis://[user:password@]host:port[/db][?prefix=P][&wait=N]; host defaults to
  // 127.0.0.1, port to 6379, db to 0, prefix to "tickd:". Percent-escapes in
  // user/password work. Behind Redis Sentinel:
  // redis-sentinel://[user:password@]host:port[,host:port…]/<master>[/db][?…] (the
  // master asked of the sentinels, port 26379 by default). wait=N: a won claim counts
  // only once N replicas acknowledged it (WAIT), else it is an Error (not run).
  std::string url;
  // Used when the URL carries none: the ACL user (lock.username) and its password
  // (lock.password_file or lock.password_env). The password is never logged, never
  // part of an error. No TLS: Debian's hiredis is built without it (docs/stores.md,
  // Securing the store: stunnel in front of the server's tls-port).
  std::string username;
  std::string password;
  // Every call (connect included) returns within this, with an Error when the
  // server did not answer: fail closed.
  std::chrono::milliseconds op_timeout{2'000};
  // How long tick records and observations are kept (PX on their keys).
  std::chrono::milliseconds retention{7 * 24 * 3'600'000LL};
};

// Parses the URL and connects (AUTH, SELECT, SCRIPT LOAD). Errors — a bad URL, an
// unreachable server, a refused password — name the URL with its password masked.
// The Backend is thread-safe (one connection behind a mutex); after a failure it
// reconnects on a later call (through the sentinels, for a Sentinel URL), with a
// growing pause between attempts (≤ 2 s), and answers Error meanwhile. Complete calls made at the
// same time from several threads share one pipeline (group commit): each still gets its own answer.
Result<std::unique_ptr<Backend>> NewRedisBackend(const RedisOptions& options);

}  // namespace tickd::lock
