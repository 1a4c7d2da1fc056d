// The Redis harness of the conformance suite: a real redis-server per case (free
// loopback port, password, appendonly yes + appendfsync always, temporary --dir),
// stopped at the end of the case. Real time: leases expire on the server's clock.
#pragma once

#include <thread>

#include <catch2/catch.hpp>

#include "lock/redis/redis_backend.h"
#include "tests/conformance/harness.h"
#include "tests/redis/redis_server.h"

namespace tickd::conformance {

class RedisHarness final : public Harness {
 public:
  std::string unavailable() const override {
    if (!testing::RedisServer::Available()) {
      return std::string(testing::RedisServer::kBinary) + " is not installed";
    }
    return server_.running() ? "" : "redis-server did not start";
  }
  std::unique_ptr<lock::Backend> OpenReplica() override {
    lock::RedisOptions options;
    options.url = server_.url();
    options.password = server_.password();
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

 private:
  testing::RedisServer server_;
  RealClock clock_;
};

}  // namespace tickd::conformance
