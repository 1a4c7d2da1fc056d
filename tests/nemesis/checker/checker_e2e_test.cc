// The checker over a real run: three tickd replicas on the embedded SQLite backend
// whose jobs write to the fenced resource through nemesis_write. A healthy run must
// pass with every lease verified, and the same run with one planted duplicate must
// fail — so the checker reads tickd's real log lines, not only the ones its unit tests
// write.
#include <catch2/catch.hpp>
#include <fstream>
#include <thread>

#include "tests/e2e/harness.h"
#include "tests/nemesis/checker/checker.h"
#include "tests/nemesis/checker/fenced_run.h"

namespace tickd::nemesis {
namespace {

using std::chrono::milliseconds;

std::int64_t NowMs() {
  return std::chrono::duration_cast<milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

TEST_CASE("checker: a real three-replica run passes, with a planted duplicate it fails",
          "[nemesis][checker][e2e]") {
  auto backend = e2e::MakeSqliteFixture();
  e2e::Cluster cluster(*backend);
  FencedRun run(cluster, NEMESIS_WRITE);
  INFO(run.error());
  REQUIRE(run.ok());
  CheckSpec spec;
  spec.window_start_ms = NowMs() + 1000;
  std::this_thread::sleep_for(milliseconds(7000));
  spec.window_end_ms = NowMs() - 500;
  for (const auto& status : run.Stop()) CHECK(status == 0);
  FencedRun::Describe(spec);

  std::vector<Attempt> attempts;
  std::vector<LogEvent> events;
  REQUIRE(run.Load(&attempts, &events));
  const Report clean = Check(spec, attempts, events, {});
  INFO(clean.ToText());
  CHECK(clean.Passed());
  CHECK(clean.counts.ticks >= 10);
  CHECK(clean.counts.accepted >= clean.counts.ticks - clean.counts.missed);
  CHECK(clean.counts.missed <= 2);           // at most a busy tick after a late first run
  CHECK(clean.counts.lease_unchecked == 0);  // every write matched its won line
  CHECK(clean.counts.runs == clean.counts.accepted);

  // The same run, with one write accepted twice (another replica, a higher fence).
  REQUIRE(!attempts.empty());
  Attempt dup = attempts.back();
  dup.replica = dup.replica == "n1" ? "n2" : "n1";
  dup.fence += 1000;
  dup.seq += 1000;
  dup.start_ms = dup.end_ms + 1;
  dup.end_ms = dup.start_ms + 1;
  attempts.push_back(dup);
  const Report planted = Check(spec, attempts, events, {});
  INFO(planted.ToText());
  CHECK_FALSE(planted.Passed());
  CHECK(planted.counts.duplicates == 1);
}

}  // namespace
}  // namespace tickd::nemesis
