// Redis behind Sentinel as a nemesis backend ("redis-sentinel"): a master, two
// replicas and three sentinels of its own (tests/redis/redis_sentinel.h), replicas
// connecting through redis-sentinel://…?wait=1, and the fault that backend is for: the
// master hangs and the sentinels promote a replica.
#pragma once

#include <memory>
#include <string>

#include "tests/e2e/redis_sentinel_fixture.h"

namespace tickd::nemesis {

class SentinelFixture : public e2e::SentinelLockFixture {
 public:
  using SentinelLockFixture::SentinelLockFixture;
  // The Sentinel set is up (every sentinel knows the others); throws when it is not.
  static std::unique_ptr<SentinelFixture> Make();
  // Whether redis-server and redis-sentinel are installed.
  static bool Available();
  // SIGSTOPs the master the sentinels name, waits until they name another that says
  // ROLE master (≤ 20 s) and at least `hold_s`, then SIGCONTs the old master (the
  // sentinels turn it into a replica of the new one). True when the master moved;
  // *evidence says which ports and when.
  virtual bool FailOver(double hold_s, std::string* evidence) = 0;
};

}  // namespace tickd::nemesis
