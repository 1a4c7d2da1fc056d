// The tz database version inside what claims carry: written after the config hash,
// read back tolerantly (records of an older tickd have the hash alone), and the
// reload's check of the database on disk.
#include "app/tzdata.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/metrics.h"
#include "app/peers.h"
#include "app/status.h"
#include "app/status_skew.h"
#include "tests/app/sim.h"

namespace tickd::app {
namespace {

using testing::EveryJob;
using testing::kT0;
using testing::Sim;
using testing::WallAt;

TEST_CASE("the version travels after the config hash and comes back apart") {
  const std::string carried = WithTzdata("3f9a0c1d2b4e5f60", "2025b");
  CHECK(carried == "3f9a0c1d2b4e5f60 tz=2025b");
  const ClaimHash split = SplitClaimHash(carried);
  CHECK(split.config == "3f9a0c1d2b4e5f60");
  CHECK(split.tzdata == "2025b");
  // No version to send: the hash alone, as an older tickd sends it.
  CHECK(WithTzdata("3f9a0c1d2b4e5f60", "") == "3f9a0c1d2b4e5f60");
}

TEST_CASE("what an older tickd recorded reads as a hash without a version") {
  const ClaimHash old = SplitClaimHash("3f9a0c1d2b4e5f60");
  CHECK(old.config == "3f9a0c1d2b4e5f60");
  CHECK(old.tzdata.empty());
  const ClaimHash none = SplitClaimHash("");
  CHECK(none.config.empty());
  CHECK(none.tzdata.empty());
}

TEST_CASE("other words after the hash are skipped, wherever the version is") {
  const ClaimHash later = SplitClaimHash("abc future=1 tz=2024a");
  CHECK(later.config == "abc");
  CHECK(later.tzdata == "2024a");
  const ClaimHash only_other = SplitClaimHash("abc future=1");
  CHECK(only_other.config == "abc");
  CHECK(only_other.tzdata.empty());
}

TEST_CASE("unknown versions are not compared") {
  CHECK(KnownTzdata("2025b"));
  CHECK_FALSE(KnownTzdata(""));
  CHECK_FALSE(KnownTzdata("unknown"));
}

TEST_CASE("peers with their versions, for log lines") {
  CHECK(FormatTzdataPeers({{"node-c", "2023c"}, {"node-b", "2024a"}}) ==
        "node-b:2024a,node-c:2023c");
  CHECK(FormatTzdataPeers({}).empty());
}

TEST_CASE("a reload that finds another version on disk warns once per version") {
  FakeClock clock{WallTime(std::chrono::seconds(1'795'000'000))};
  std::vector<std::string> lines;
  Logger log(clock, LogFormat::kLogfmt, LogLevel::kInfo,
             [&](std::string_view line) { lines.emplace_back(line); });
  TzdataUpdateCheck check("2025a");
  CHECK_FALSE(check.Check("2025a", log, "node-a"));  // unchanged
  CHECK(lines.empty());
  CHECK(check.Check("2025b", log, "node-a"));
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].find(" warn tzdata-changed node=node-a tzdata=2025a on_disk=2025b ") !=
        std::string::npos);
  CHECK_FALSE(check.Check("2025b", log, "node-a"));  // the next reload: said already
  CHECK(check.Check("2025c", log, "node-a"));        // a newer one again
  CHECK(lines.size() == 2);
  // Put back as it was, then changed again: news again.
  CHECK_FALSE(check.Check("2025a", log, "node-a"));
  CHECK(check.Check("2025c", log, "node-a"));
  CHECK(lines.size() == 3);
}

// Two simulated replicas `a` and `b` claim job `j` every minute, sending
// `a_tzdata` and `b_tzdata` with the same config hash; `a`'s ledger watch polls
// after every tick.
struct TwoReplicas {
  TwoReplicas(const std::string& a_tzdata, const std::string& b_tzdata)
      : sim(WallAt(kT0, -1'000)), metrics(sim.clock), peers("a") {
    metrics.TzdataVersion(a_tzdata);
    SkewOptions options;
    options.node = "a";
    options.peers = &peers;
    options.tzdata = a_tzdata;
    watch = std::make_unique<SkewWatch>(sim.clock, *sim.store, sim.log, metrics, options);
    sim.AddReplica("a", {Job(a_tzdata)});
    sim.AddReplica("b", {Job(b_tzdata)});
  }
  static std::shared_ptr<const ScheduledJob> Job(const std::string& tzdata) {
    auto job = std::const_pointer_cast<ScheduledJob>(EveryJob("j", 60));
    job->config_hash = WithTzdata("hash-j", tzdata);
    return job;
  }
  // Lets `ticks` ticks happen, the watch polling after each.
  void Ticks(int ticks) {
    for (int i = 0; i < ticks; ++i) {
      sim.Step(i == 0 ? std::chrono::seconds(1) : std::chrono::seconds(60));
      sim.WaitQuiet();
      watch->PollOnce();
    }
  }
  StatusReport Status() {
    config::Job job;
    job.name = "j";
    job.schedule_text = "@every 60s";
    job.shell = "true";
    Result<StatusReport> report = CollectStatus({job}, *sim.store, sim.clock.Wall(), "", 10);
    REQUIRE(report);
    return *report;
  }

  Sim sim;
  PrometheusMetrics metrics;
  Peers peers;
  std::unique_ptr<SkewWatch> watch;
};

TEST_CASE("replicas with different tz databases: one warning naming the other, status flags it") {
  TwoReplicas cluster("2025b", "2024a");
  cluster.Ticks(4);
  Sim& sim = cluster.sim;
  REQUIRE(sim.Grep({" info tick ", "job=j"}).size() == 8);  // both replicas tried every tick
  const auto warnings = sim.Grep({" warn tzdata-mismatch "});
  REQUIRE(warnings.size() == 1);  // once, not per tick
  CHECK(warnings[0].find("node=a tzdata=2025b peers=b:2024a ") != std::string::npos);
  // The config hashes agree: that is not a config mismatch.
  CHECK(sim.Grep({"config-mismatch"}).empty());
  CHECK(cluster.metrics.Render().find("tickd_tzdata_mismatch 1\n") != std::string::npos);
  CHECK(cluster.metrics.Render().find("tickd_tzdata_info{version=\"2025b\"} 1\n") !=
        std::string::npos);

  const StatusReport report = cluster.Status();
  REQUIRE(report.replicas.size() == 2);
  CHECK(report.replicas[0].node == "a");
  CHECK(report.replicas[0].tzdata == "2025b");
  CHECK(report.replicas[1].node == "b");
  CHECK(report.replicas[1].tzdata == "2024a");
  CHECK(TzdataMismatch(report));
  REQUIRE_FALSE(report.jobs[0].ticks.empty());
  const lock::TickHistory& tick = report.jobs[0].ticks[0];
  CHECK(TzdataMismatch(tick));
  CHECK(TzdataVersions(tick) == std::vector<std::string>{"2024a", "2025b"});
  CHECK_FALSE(ConfigMismatch(tick));
  const std::string text = FormatStatusText(report, false);
  // Each replica's database (and, since the adaptive lead, its lead), then the flag.
  const std::string replicas = text.substr(0, text.find('\n') + 1);
  INFO(replicas);
  CHECK(replicas.rfind("replicas  a tzdata=2025b ", 0) == 0);
  CHECK(replicas.find("  b tzdata=2024a ") != std::string::npos);
  CHECK(replicas.size() > 18);
  CHECK(replicas.substr(replicas.size() - 18) == "  TZDATA MISMATCH\n");
  CHECK(text.find("2024a/2025b MISMATCH") != std::string::npos);
  CHECK(text.find("hash-j ") != std::string::npos);  // the CONFIG column: the hash alone
  const auto json = nlohmann::json::parse(FormatStatusJson(report));
  CHECK(json["tzdata_mismatch"] == true);
  CHECK(json["replicas"][1]["node"] == "b");
  CHECK(json["replicas"][1]["tzdata"] == "2024a");
  const auto& t = json["jobs"][0]["ticks"][0];
  CHECK(t["tzdata_mismatch"] == true);
  CHECK(t["config_mismatch"] == false);
  CHECK(t["config_hash"] == "hash-j");
  for (const auto& o : t["observations"]) {
    CHECK(o["config_hash"] == "hash-j");
    CHECK(o["tzdata"] == (o["node"] == "a" ? "2025b" : "2024a"));
  }

  SECTION("b is upgraded: the watch says they agree again, once") {
    sim.replica(1).Reload({TwoReplicas::Job("2025b")});
    cluster.Ticks(3);
    CHECK(sim.Grep({" warn tzdata-mismatch "}).size() == 1);
    const auto agree = sim.Grep({" info tzdata-match "});
    REQUIRE(agree.size() == 1);
    CHECK(agree[0].find("node=a tzdata=2025b") != std::string::npos);
    CHECK(cluster.metrics.Render().find("tickd_tzdata_mismatch 0\n") != std::string::npos);
    // The newest ticks agree; the report still shows the older ones that did not.
    const StatusReport now = cluster.Status();
    CHECK_FALSE(TzdataMismatch(now));
    CHECK_FALSE(TzdataMismatch(now.jobs[0].ticks[0]));
  }
}

TEST_CASE("replicas with the same tz database: no warning, nothing flagged") {
  TwoReplicas cluster("2025b", "2025b");
  cluster.Ticks(3);
  CHECK(cluster.sim.Grep({" info tick ", "job=j"}).size() == 6);
  CHECK(cluster.sim.Grep({"tzdata-"}).empty());
  CHECK(cluster.metrics.Render().find("tickd_tzdata_mismatch 0\n") != std::string::npos);
  const StatusReport report = cluster.Status();
  REQUIRE(report.replicas.size() == 2);
  CHECK_FALSE(TzdataMismatch(report));
  const std::string text = FormatStatusText(report, false);
  CHECK(text.find("MISMATCH") == std::string::npos);
  const std::string replicas = text.substr(0, text.find('\n') + 1);
  INFO(replicas);
  CHECK(replicas.rfind("replicas  a tzdata=2025b", 0) == 0);
  CHECK(replicas.find("  b tzdata=2025b") != std::string::npos);
}

TEST_CASE("a replica of an older tickd (no version recorded) is shown, never flagged") {
  TwoReplicas cluster("2025b", "");
  cluster.Ticks(2);
  CHECK(cluster.sim.Grep({"tzdata-"}).empty());
  const StatusReport report = cluster.Status();
  REQUIRE(report.replicas.size() == 2);
  CHECK(report.replicas[1].tzdata.empty());
  CHECK_FALSE(TzdataMismatch(report));
  CHECK_FALSE(TzdataMismatch(report.jobs[0].ticks[0]));
  CHECK(FormatStatusText(report, false).find("b tzdata=-") != std::string::npos);
}

}  // namespace
}  // namespace tickd::app
