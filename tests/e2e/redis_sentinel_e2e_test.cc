// Redis behind Sentinel, end to end: three tickd replicas (redis-sentinel://…?wait=2)
// run two @every 1s jobs that write to the fenced resource (nemesis_write) while
// `SENTINEL FAILOVER` moves the master to a replica; the independent checker then reads
// the resource's journal and the replicas' logs. Real servers: one master, two replicas
// and three sentinels on loopback ports (tests/redis/redis_sentinel.h).
#include <catch2/catch.hpp>
#include <thread>

#include "tests/e2e/harness.h"
#include "tests/e2e/redis_sentinel_fixture.h"
#include "tests/nemesis/checker/fenced_run.h"

namespace tickd::e2e {
namespace {

using std::chrono::milliseconds;
using testing::RedisSentinelSet;

std::int64_t NowMs() {
  return std::chrono::duration_cast<milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

TEST_CASE("redis sentinel: a failover while jobs run: no tick accepted twice, fences in order",
          "[e2e][redis]") {
  if (!RedisSentinelSet::Available()) {
    WARN("redis-server or redis-sentinel missing: skipped");
    return;
  }
  RedisSentinelSet set;
  REQUIRE(set.running());
  SentinelLockFixture backend(set);
  Cluster cluster(backend);
  nemesis::FencedRun run(cluster, NEMESIS_WRITE);
  INFO(run.error());
  REQUIRE(run.ok());
  nemesis::CheckSpec spec;
  spec.window_start_ms = NowMs() + 1000;
  std::this_thread::sleep_for(milliseconds(4000));
  nemesis::FaultWindow failover{"sentinel-failover", "", NowMs(), 0, "store-down", true};
  const std::size_t new_master = set.Failover();
  failover.end_ms = NowMs();
  REQUIRE(new_master < set.servers());
  CHECK(new_master != 0);
  const std::int64_t after_ms = failover.end_ms;
  std::this_thread::sleep_for(milliseconds(8000));
  spec.window_end_ms = NowMs() - 500;
  for (const auto& status : run.Stop()) CHECK(status == 0);
  nemesis::FencedRun::Describe(spec);

  std::vector<nemesis::Attempt> attempts;
  std::vector<nemesis::LogEvent> events;
  REQUIRE(run.Load(&attempts, &events));
  const nemesis::Report report = nemesis::Check(spec, attempts, events, {failover});
  INFO(report.ToText());
  // Passed: no duplicate, nothing stale accepted, no overlap, every miss explained.
  CHECK(report.Passed());
  CHECK(report.counts.duplicates == 0);
  CHECK(report.counts.stale_accepted == 0);
  // The jobs went on at the new master.
  int accepted_after = 0;
  for (const nemesis::Attempt& a : attempts) accepted_after += a.accepted && a.start_ms > after_ms;
  CHECK(accepted_after >= 8);
  WARN(report.ToText());
}

}  // namespace
}  // namespace tickd::e2e
