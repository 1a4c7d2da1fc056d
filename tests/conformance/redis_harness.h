// The Redis harnesses of the conformance suite: a real redis-server per case (free
// loopback port, password, appendonly yes + appendfsync always, temporary --dir),
// or a Redis Cluster of three of them, stopped at the end of the case. Real time:
// leases expire on the server's clock.
#pragma once

#include <thread>

#include <catch2/catch.hpp>

#include "lock/redis/redis_backend.h"
#include "tests/conformance/harness.h"
#include "tests/redis/redis_server.h"

namespace tickd::conformance {

// Store: testing::RedisServer, or testing::RedisCluster (three primaries; the
// replicas are given the first node's URL and route every job to the node of its
// hash slot).
template <typename Store>
class RedisHarnessOn final : public Harness {
 public:
  std::string unavailable() const override {
    if (!testing::RedisServer::Available()) {
      return std::string(testing::RedisServer::kBinary) + " is not installed";
    }
    return store_.running() ? "" : "the Redis server or cluster did not start";
  }
  std::unique_ptr<lock::Backend> OpenReplica() override {
    lock::RedisOptions options;
    options.url = store_.url();
    options.password = store_.password();
    auto backend = lock::NewRedisBackend(options);
    if (!backend) FAIL(backend.error().ToString());
    return std::move(*backend);
  }
  Clock& clock() override { return clock_; }
  void Elapse(std::chrono::milliseconds d) override { std::this_thread::sleep_for(d); }
  std::chrono::milliseconds short_lease() const override {
    return std::chrono::milliseconds(400);
  }
  bool durable() const override { return true; }
  bool forkable() const override { return true; }
  bool detects_store_reset() const override { return true; }

 private:
  Store store_;
  RealClock clock_;
};

using RedisHarness = RedisHarnessOn<testing::RedisServer>;
using RedisClusterHarness = RedisHarnessOn<testing::RedisCluster>;

}  // namespace tickd::conformance
