// Every harness the conformance suite runs against. A new backend adds its Harness
// here, behind its TICKD_WITH_<BACKEND> build option.
#pragma once

#include <filesystem>
#include <thread>
#include <tuple>

#include <catch2/catch.hpp>

#include "lock/memory/memory_backend.h"
#include "tests/conformance/harness.h"
#ifdef TICKD_CONFORMANCE_SQLITE
#include "lock/sqlite/sqlite_backend.h"
#include "tests/lock/temp_dir.h"
#endif
#ifdef TICKD_CONFORMANCE_REDIS
#include "tests/conformance/redis_harness.h"
#endif
#ifdef TICKD_CONFORMANCE_ZOOKEEPER
#include "tests/conformance/zookeeper_harness.h"
#endif
#ifdef TICKD_CONFORMANCE_POSTGRES
#include "tests/conformance/postgres_harness.h"
#endif
#ifdef TICKD_CONFORMANCE_ETCD
#include "tests/conformance/etcd_harness.h"
#endif

namespace tickd::conformance {

// One in-process store on a FakeClock: leases expire only when the test says so.
class MemoryHarness final : public Harness {
 public:
  MemoryHarness()
      : clock_(WallTime(std::chrono::seconds(1'800'000'000))),
        store_(lock::NewMemoryBackend(clock_)) {}
  std::unique_ptr<lock::Backend> OpenReplica() override {
    return lock::NewSharedBackendHandle(store_);
  }
  Clock& clock() override { return clock_; }
  void Elapse(std::chrono::milliseconds d) override { clock_.Advance(d); }
  std::chrono::milliseconds short_lease() const override { return std::chrono::seconds(15); }
  bool durable() const override { return false; }
  bool forkable() const override { return false; }
  bool detects_store_reset() const override { return true; }

 private:
  FakeClock clock_;
  std::shared_ptr<lock::Backend> store_;
};

#ifdef TICKD_CONFORMANCE_SQLITE
// A fresh database in a temporary folder; real time (leases on CLOCK_BOOTTIME).
class SqliteHarness final : public Harness {
 public:
  std::unique_ptr<lock::Backend> OpenReplica() override {
    lock::SqliteOptions options;
    options.path = dir_.path() + "/tickd.db";
    auto backend = lock::NewSqliteBackend(options, clock_);
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
  testing::TempDir dir_;
  RealClock clock_;
};
#endif

using AllHarnesses = std::tuple<MemoryHarness
#ifdef TICKD_CONFORMANCE_SQLITE
                                ,
                                SqliteHarness
#endif
#ifdef TICKD_CONFORMANCE_REDIS
                                ,
                                RedisHarness, RedisClusterHarness
#endif
#ifdef TICKD_CONFORMANCE_ZOOKEEPER
                                ,
                                ZookeeperHarness
#endif
#ifdef TICKD_CONFORMANCE_POSTGRES
                                ,
                                PostgresHarness
#endif
#ifdef TICKD_CONFORMANCE_ETCD
                                ,
                                EtcdHarness
#endif
                                >;

}  // namespace tickd::conformance
