// The lock section for a RedisSentinelSet (tests/redis/redis_sentinel.h): replicas
// reach it through redis-sentinel://…?wait=N, the password through lock.password_env.
// The set is the caller's (the e2e test's, or the nemesis driver's backend).
#pragma once

#include <string>
#include <vector>

#include "tests/e2e/harness.h"
#include "tests/redis/redis_sentinel.h"

namespace tickd::e2e {

class SentinelLockFixture : public BackendFixture {
 public:
  // `wait`: the replicas each claim waits for (`?wait=N`).
  explicit SentinelLockFixture(testing::RedisSentinelSet& set, int wait = 2)
      : set_(set), wait_(wait) {}
  std::string name() const override { return "redis-sentinel"; }
  std::string LockYaml(const fs::path&) const override {
    return "  url: " + set_.url("?wait=" + std::to_string(wait_)) + "\n  password_env: " + kPasswordVar +
           "\n  op_timeout: 1s\n";
  }
  std::vector<std::string> Env() const override {
    return {std::string(kPasswordVar) + "=" + set_.password()};
  }

 protected:
  static constexpr const char* kPasswordVar = "TICKD_E2E_REDIS_PASSWORD";
  testing::RedisSentinelSet& set_;
  int wait_;
};

}  // namespace tickd::e2e
