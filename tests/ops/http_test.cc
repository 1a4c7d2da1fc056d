// The daemon's HTTP endpoints and warnings against real `tickd run` replicas sharing
// one SQLite store: /healthz, /metrics (docs/design.md §9 names), /api/status (the winners
// the logs report), the status page; a replica with a skewed clock and another job
// file (config-mismatch, clock-skew, their metrics); node.clock_skew_warning above the
// skew silences the warning; mismatched ticks flagged in /api/status and tickd status.
// A mismatch shows only on a tick both replicas tried: with one replica 3 s ahead, the
// newest ticks hold the early replica's observation alone, so the check waits for a
// flagged tick instead of reading the newest one. A replica with another tz database
// (TZDIR) is named once in a tzdata-mismatch warning, and shown by /metrics,
// /api/status and tickd status.
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "cron/tzdata_version.h"
#include "tests/e2e/harness.h"
#include "tests/support/server_process.h"

namespace tickd::e2e {
namespace {

TEST_CASE("http endpoints of a running two-replica cluster") {
  auto backend = MakeSqliteFixture();
  Cluster cluster(*backend);
  cluster.WriteJobFile(
      "http:\n  listen: 127.0.0.1:${HTTP_PORT}\n"
      "jobs:\n  - name: beat\n    schedule: \"@every 1s\"\n    shell: echo beat\n");
  const int port_a = tickd::testing::FreeLoopbackPort();
  const int port_b = tickd::testing::FreeLoopbackPort();
  cluster.StartReplica("node-a", {"HTTP_PORT=" + std::to_string(port_a)});
  cluster.StartReplica("node-b", {"HTTP_PORT=" + std::to_string(port_b)});
  REQUIRE(Cluster::WaitUntil(
      [&] {
        int runs = 0;
        for (const LogLine& l : cluster.AllLines()) runs += l.event == "run" ? 1 : 0;
        return runs >= 4;
      },
      milliseconds(15'000)));

  httplib::Client a("127.0.0.1", port_a);
  auto health = a.Get("/healthz");
  REQUIRE(health);
  CHECK(health->status == 200);
  CHECK(health->body == "ok\n");

  auto metrics = a.Get("/metrics");
  REQUIRE(metrics);
  CHECK(metrics->status == 200);
  CHECK(metrics->get_header_value("Content-Type").find("text/plain") == 0);
  for (const char* name :
       {"# TYPE tickd_ticks_total counter", "# TYPE tickd_runs_total counter",
        "# TYPE tickd_run_duration_seconds histogram",
        "tickd_claim_duration_seconds_count{backend=\"sqlite\"}",
        "tickd_fire_lateness_seconds_bucket{job_name=\"beat\",le=",
        "# TYPE tickd_lease_lost_total counter", "# TYPE tickd_backend_errors_total counter",
        "# TYPE tickd_config_mismatch_total counter", "# TYPE tickd_clock_skew_seconds gauge",
        "\ntickd_scheduler_loop_stuck_seconds 0\n"}) {
    INFO(name);
    CHECK(metrics->body.find(name) != std::string::npos);
  }
  CHECK((metrics->body.find("tickd_ticks_total{job_name=\"beat\",outcome=\"won\"}") !=
             std::string::npos ||
         metrics->body.find("tickd_ticks_total{job_name=\"beat\",outcome=\"lost\"}") !=
             std::string::npos));

  // /api/status: every finished tick's winner is the node whose log has its run line.
  std::map<std::string, std::string> ran;  // tick → node
  for (const LogLine& l : cluster.AllLines()) {
    if (l.event == "run") ran[l.Get("tick")] = l.Get("node");
  }
  auto status = a.Get("/api/status?last=50");
  REQUIRE(status);
  REQUIRE(status->status == 200);
  auto json = nlohmann::json::parse(status->body);
  REQUIRE(json["jobs"].size() == 1);
  CHECK(json["jobs"][0]["name"] == "beat");
  CHECK(json["jobs"][0]["next_tick"].is_string());
  int matched = 0;
  for (const auto& t : json["jobs"][0]["ticks"]) {
    auto it = ran.find(t["tick"].get<std::string>());
    if (it == ran.end()) continue;
    CHECK(t["winner"] == it->second);
    CHECK(t["exit_code"] == 0);
    CHECK(t["outcome"] == "done");
    ++matched;
  }
  CHECK(matched >= 3);
  auto unknown = a.Get("/api/status?job=nope");
  REQUIRE(unknown);
  CHECK(unknown->status == 404);
  // A count beyond any integer is the most there is; one that is no whole number, 400.
  auto huge = a.Get("/api/status?last=99999999999999999999");
  REQUIRE(huge);
  CHECK(huge->status == 200);
  for (const char* bad : {"12abc", "1.5", "abc", ""}) {
    INFO(bad);
    auto refused = a.Get(std::string("/api/status?last=") + bad);
    REQUIRE(refused);
    CHECK(refused->status == 400);
    CHECK(nlohmann::json::parse(refused->body)["error"] ==
          "last must be a whole number, 1 to 1000");
  }

  // /api/runs: the job's runs with what they printed (`echo beat`).
  auto runs = a.Get("/api/runs?job=beat&limit=3");
  REQUIRE(runs);
  REQUIRE(runs->status == 200);
  auto runs_json = nlohmann::json::parse(runs->body);
  CHECK(runs_json["job"] == "beat");
  CHECK(runs_json["runs"].size() <= 3);
  int printed = 0;
  for (const auto& r : runs_json["runs"]) {
    if (r["state"] != "done") continue;
    CHECK(r["output"] == nlohmann::json::parse(R"([{"stream":"stdout","line":"beat"}])"));
    ++printed;
  }
  CHECK(printed >= 1);
  auto no_job = a.Get("/api/runs");
  REQUIRE(no_job);
  CHECK(no_job->status == 400);
  auto unknown_runs = a.Get("/api/runs?job=nope");
  REQUIRE(unknown_runs);
  CHECK(unknown_runs->status == 404);
  auto bad_limit = a.Get("/api/runs?job=beat&limit=x");
  REQUIRE(bad_limit);
  CHECK(bad_limit->status == 400);

  auto page = a.Get("/");
  REQUIRE(page);
  CHECK(page->status == 200);
  CHECK(page->body.find("<title>tickd status</title>") != std::string::npos);
  CHECK(page->body.find("/*TICKD_INITIAL_STATUS*/") == std::string::npos);  // data inlined
  CHECK(page->body.find("\"name\": \"beat\"") != std::string::npos);
  CHECK(page->body.find("http://") == std::string::npos);  // no external assets
  CHECK(page->body.find("https://") == std::string::npos);

  // The second replica serves its own endpoints.
  httplib::Client b("127.0.0.1", port_b);
  auto health_b = b.Get("/healthz");
  REQUIRE(health_b);
  CHECK(health_b->status == 200);
}

TEST_CASE("a replica with a skewed clock and another job file is reported") {
  auto backend = MakeSqliteFixture();
  Cluster cluster(*backend);
  cluster.WriteJobFile(
      "http:\n  listen: 127.0.0.1:${HTTP_PORT}\n"
      "jobs:\n  - name: beat\n    schedule: \"@every 1s\"\n    shell: echo ${VARIANT:-one}\n");
  const int port_a = tickd::testing::FreeLoopbackPort();
  cluster.StartReplica("node-a", {"HTTP_PORT=" + std::to_string(port_a)});
  // node-b 3 s behind: it loses every tick to node-a, whose hash the answer names. (A
  // replica ahead by as much would hear `early` and name nobody's hash: rule 15.)
  std::vector<std::string> env = FakeTimeEnv(-3.0);
  const int port_b = tickd::testing::FreeLoopbackPort();
  env.push_back("HTTP_PORT=" + std::to_string(port_b));
  env.push_back("VARIANT=two");  // another effective job definition → another config hash
  cluster.StartReplica("node-b", env);
  auto has = [&](const std::string& event, const std::string& node) {
    for (const LogLine& l : cluster.AllLines()) {
      if (l.event == event && l.Get("node") == node) return true;
    }
    return false;
  };
  REQUIRE(Cluster::WaitUntil([&] { return has("clock-skew", "node-a"); }, milliseconds(20'000)));
  REQUIRE(
      Cluster::WaitUntil([&] { return has("config-mismatch", "node-b"); }, milliseconds(30'000)));
  for (const LogLine& l : cluster.AllLines()) {
    if (l.event == "clock-skew" && l.Get("node") == "node-a") {
      CHECK(l.level == "warn");
      CHECK(l.Get("peer") == "node-b");
    }
  }
  httplib::Client a("127.0.0.1", port_a);
  auto metrics = a.Get("/metrics");
  REQUIRE(metrics);
  const std::string& body = metrics->body;
  const std::string skew_key = "tickd_clock_skew_seconds{peer=\"node-b\"} ";
  const std::size_t at = body.find(skew_key);
  REQUIRE(at != std::string::npos);
  const double skew = std::stod(body.substr(at + skew_key.size()));  // peer − own
  CHECK(skew < -2.0);
  CHECK(skew > -4.0);
  httplib::Client b("127.0.0.1", port_b);
  auto metrics_b = b.Get("/metrics");
  REQUIRE(metrics_b);
  CHECK(metrics_b->body.find("tickd_config_mismatch_total{job_name=\"beat\"} ") !=
        std::string::npos);
}

// The ticks of `job` in a status document (/api/status or `tickd status --json`) that
// are flagged config_mismatch.
std::vector<nlohmann::json> MismatchedTicks(const nlohmann::json& status, const std::string& job) {
  std::vector<nlohmann::json> out;
  for (const auto& j : status["jobs"]) {
    if (j["name"] != job) continue;
    for (const auto& t : j["ticks"]) {
      if (t["config_mismatch"] == true) out.push_back(t);
    }
  }
  return out;
}

TEST_CASE(
    "node.clock_skew_warning above the skew silences the warning; mismatched config "
    "hashes show in /api/status and tickd status") {
  auto backend = MakeSqliteFixture();
  Cluster cluster(*backend);
  const fs::path file = cluster.WriteJobFile(
      "node:\n  clock_skew_warning: ${SKEW_WARNING:-1s}\n"
      "http:\n  listen: 127.0.0.1:${HTTP_PORT}\n"
      "jobs:\n  - name: beat\n    schedule: \"@every 1s\"\n    shell: echo ${VARIANT:-one}\n");
  const int port_a = tickd::testing::FreeLoopbackPort();
  // node-a tolerates 10 s; node-b (3 s ahead, another job definition) keeps the default.
  cluster.StartReplica("node-a", {"HTTP_PORT=" + std::to_string(port_a), "SKEW_WARNING=10s"});
  std::vector<std::string> env = FakeTimeEnv(3.0);
  env.push_back("HTTP_PORT=" + std::to_string(tickd::testing::FreeLoopbackPort()));
  env.push_back("VARIANT=two");
  cluster.StartReplica("node-b", env);
  auto has = [&](const std::string& event, const std::string& node) {
    for (const LogLine& l : cluster.AllLines()) {
      if (l.event == event && l.Get("node") == node) return true;
    }
    return false;
  };
  // The default threshold warns (node-b about node-a)...
  REQUIRE(Cluster::WaitUntil([&] { return has("clock-skew", "node-b"); }, milliseconds(20'000)));
  // ...while node-a measured the same skew and stayed quiet.
  httplib::Client a("127.0.0.1", port_a);
  const std::string skew_key = "tickd_clock_skew_seconds{peer=\"node-b\"} ";
  std::string metrics;
  REQUIRE(Cluster::WaitUntil(
      [&] {
        auto r = a.Get("/metrics");
        metrics = r ? r->body : "";
        return metrics.find(skew_key) != std::string::npos;
      },
      milliseconds(10'000)));
  CHECK(std::stod(metrics.substr(metrics.find(skew_key) + skew_key.size())) > 2.0);
  CHECK_FALSE(has("clock-skew", "node-a"));

  // A tick both replicas tried, with different hashes, is flagged in /api/status...
  nlohmann::json api;
  REQUIRE(Cluster::WaitUntil(
      [&] {
        auto r = a.Get("/api/status?last=50");
        if (!r || r->status != 200) return false;
        api = nlohmann::json::parse(r->body);
        return !MismatchedTicks(api, "beat").empty();
      },
      milliseconds(15'000)));
  const nlohmann::json tick = MismatchedTicks(api, "beat").front();
  INFO(tick.dump());
  std::set<std::string> hashes;
  for (const auto& o : tick["observations"]) hashes.insert(o["config_hash"].get<std::string>());
  CHECK(hashes.size() == 2);
  // (A tick every replica found busy has no winner, hence no winner's hash.)
  if (tick["winner"] != "") CHECK(tick["config_hash"].get<std::string>().size() > 0);
  // ...and by `tickd status --json` on the same ledger.
  // (The job file needs HTTP_PORT to load; status serves nothing.)
  auto [status, output] = RunCommand({"/usr/bin/env", "HTTP_PORT=1", TICKD_BINARY, "status", "-c",
                                      file.string(), "--json", "--last", "50"});
  INFO(output);
  REQUIRE(status == 0);
  const auto cli = MismatchedTicks(nlohmann::json::parse(output.substr(output.find('{'))), "beat");
  bool same_tick = false;
  for (const auto& t : cli) same_tick = same_tick || t["tick"] == tick["tick"];
  CHECK(same_tick);
}

// A tz database folder for one replica (TZDIR): every entry of the system's, linked,
// but a tzdata.zi that says `version`.
fs::path FakeTzdir(const fs::path& dir, const std::string& version) {
  fs::create_directories(dir);
  for (const auto& entry : fs::directory_iterator("/usr/share/zoneinfo")) {
    const std::string name = entry.path().filename().string();
    if (name == "tzdata.zi" || name == "+VERSION") continue;
    fs::create_directory_symlink(entry.path(), dir / name);
  }
  std::ofstream(dir / "tzdata.zi") << "# version " << version << "\n";
  return dir;
}

TEST_CASE("a replica with another tz database is named once; /metrics and status show it") {
  const std::string ours = cron::TzdataVersionIn("/usr/share/zoneinfo");
  REQUIRE(ours != "unknown");  // install-deps.sh installs tzdata
  auto backend = MakeSqliteFixture();
  Cluster cluster(*backend);
  const fs::path file = cluster.WriteJobFile(
      "http:\n  listen: 127.0.0.1:${HTTP_PORT}\n"
      "jobs:\n  - name: beat\n    schedule: \"@every 1s\"\n    shell: echo beat\n");
  const int port_a = tickd::testing::FreeLoopbackPort();
  cluster.StartReplica("node-a", {"HTTP_PORT=" + std::to_string(port_a)});
  cluster.StartReplica("node-b", {"HTTP_PORT=" + std::to_string(tickd::testing::FreeLoopbackPort()),
                                  "TZDIR=" + FakeTzdir(cluster.dir() / "tz", "1999z").string()});
  auto lines_of = [&](const std::string& event, const std::string& node) {
    std::vector<LogLine> out;
    for (const LogLine& l : cluster.AllLines()) {
      if (l.event == event && l.Get("node") == node) out.push_back(l);
    }
    return out;
  };
  REQUIRE(Cluster::WaitUntil([&] { return !lines_of("tzdata-mismatch", "node-a").empty(); },
                             milliseconds(15'000)));
  REQUIRE(Cluster::WaitUntil([&] { return !lines_of("tzdata-mismatch", "node-b").empty(); },
                             milliseconds(5'000)));
  // Some more ticks: still one warning each.
  const std::size_t runs_then = lines_of("run", "node-a").size() + lines_of("run", "node-b").size();
  REQUIRE(Cluster::WaitUntil(
      [&] {
        return lines_of("run", "node-a").size() + lines_of("run", "node-b").size() >= runs_then + 4;
      },
      milliseconds(15'000)));
  const auto a_warned = lines_of("tzdata-mismatch", "node-a");
  REQUIRE(a_warned.size() == 1);
  CHECK(a_warned[0].level == "warn");
  CHECK(a_warned[0].Get("tzdata") == ours);
  CHECK(a_warned[0].Get("peers") == "node-b:1999z");
  const auto b_warned = lines_of("tzdata-mismatch", "node-b");
  REQUIRE(b_warned.size() == 1);
  CHECK(b_warned[0].Get("tzdata") == "1999z");
  CHECK(b_warned[0].Get("peers") == "node-a:" + ours);
  REQUIRE(lines_of("start", "node-b").size() == 1);
  CHECK(lines_of("start", "node-b")[0].Get("tzdata") == "1999z");
  CHECK(lines_of("config-mismatch", "node-a").empty());  // the same job file
  CHECK(lines_of("config-mismatch", "node-b").empty());

  httplib::Client a("127.0.0.1", port_a);
  auto metrics = a.Get("/metrics");
  REQUIRE(metrics);
  CHECK(metrics->body.find("tickd_tzdata_mismatch 1\n") != std::string::npos);
  CHECK(metrics->body.find("tickd_tzdata_info{version=\"" + ours + "\"} 1\n") != std::string::npos);
  auto api = a.Get("/api/status?last=20");
  REQUIRE(api);
  REQUIRE(api->status == 200);
  const auto status = nlohmann::json::parse(api->body);
  INFO(status["replicas"].dump());
  CHECK(status["tzdata_mismatch"] == true);
  std::map<std::string, std::string> versions;
  for (const auto& r : status["replicas"]) versions[r["node"]] = r["tzdata"];
  CHECK(versions["node-a"] == ours);
  CHECK(versions["node-b"] == "1999z");
  // `tickd status` on the same ledger.
  auto [code, output] = RunCommand(
      {"/usr/bin/env", "HTTP_PORT=1", TICKD_BINARY, "status", "-c", file.string(), "--last", "5"});
  INFO(output);
  REQUIRE(code == 0);
  CHECK(output.find("node-b tzdata=1999z") != std::string::npos);
  CHECK(output.find("TZDATA MISMATCH") != std::string::npos);
}

}  // namespace
}  // namespace tickd::e2e
