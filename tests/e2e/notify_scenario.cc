#include "tests/e2e/notify_scenario.h"

#include <signal.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <ctime>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>

#include "tests/support/loopback_http.h"
#include "tests/support/refused_port.h"

namespace tickd::e2e {
namespace {

using namespace std::chrono_literals;

// The notifications POSTed to `path`, parsed (one that is not JSON reads as discarded).
std::vector<nlohmann::json> Posts(tickd::testing::LoopbackHttp& endpoint,
                                  const std::string& path) {
  std::vector<nlohmann::json> posts;
  for (const auto& r : endpoint.Requests(path)) {
    posts.push_back(nlohmann::json::parse(r.body, nullptr, false));
  }
  return posts;
}

}  // namespace

void ScenarioNotifyAndHttp(BackendFixture& backend) {
  // Notifications go to /fail and /miss, the http: job to /job.
  tickd::testing::LoopbackHttp endpoint;
  endpoint.Answer("/fail", 204);
  endpoint.Answer("/miss", 204);
  endpoint.Answer("/job", 200, "pong\n");
  testing::RefusedPort dead;
  Cluster cluster(backend);
  cluster.WriteJobFile(
      "shutdown_grace: 5s\n"
      "jobs:\n"
      "  - name: failing\n"
      "    schedule: \"* * * * * *\"\n"
      "    shell: \"echo about to fail; exit 3\"\n"
      "    on_failure: {http: {url: \"" + endpoint.Url("/fail") + "\", timeout: 2s}}\n"
      "  - name: pinger\n"
      "    schedule: \"* * * * * *\"\n"
      "    http:\n"
      "      url: \"" + endpoint.Url("/job") + "\"\n"
      "      headers: {Authorization: \"Bearer ${TICKD_E2E_TOKEN}\"}\n"
      "    on_success: {http: \"http://127.0.0.1:" + std::to_string(dead.port()) + "/\"}\n"
      "  - name: rare\n"
      "    schedule: \"*/2 * * * * *\"\n"
      "    starting_deadline: 1s\n"
      "    shell: \"true\"\n"
      "    on_miss: {http: \"" + endpoint.Url("/miss") + "\"}\n");
  for (const char* node : {"node-a", "node-b", "node-c"}) {
    cluster.StartReplica(node, {"TICKD_E2E_TOKEN=t0k"});
  }
  REQUIRE(Cluster::WaitUntil([&] { return Posts(endpoint, "/fail").size() >= 3; }, 15s));
  // Every replica stops past rare's deadline (1 s): its ticks meanwhile are missed.
  const auto stopped_at = std::chrono::system_clock::now();
  for (auto& r : cluster.replicas()) r->Signal(SIGSTOP);
  std::this_thread::sleep_for(4'500ms);
  for (auto& r : cluster.replicas()) r->Signal(SIGCONT);
  const auto resumed_at = std::chrono::system_clock::now();
  std::this_thread::sleep_for(3s);

  // What the replicas logged: the ticks of `failing` that ran, the missed ticks of `rare`.
  std::map<std::string, std::string> failed_runs;  // tick unix → "node fence"
  std::set<std::string> missed;                     // tick (RFC 3339) of rare
  std::map<std::string, std::string> pinger_won;    // tick → fence
  std::set<std::string> pinger_busy;                // ticks an earlier run held up
  auto collect = [&] {
    failed_runs.clear();
    missed.clear();
    pinger_won.clear();
    pinger_busy.clear();
    for (const LogLine& l : cluster.AllLines()) {
      if (l.event == "run" && l.Get("job") == "failing") {
        failed_runs[l.Get("tick")] = l.Get("node") + " " + l.Get("fence");
      }
      if (l.event == "tick" && l.Get("job") == "rare" && l.Get("outcome") == "missed") {
        missed.insert(l.Get("tick"));
      }
      if (l.event == "tick" && l.Get("job") == "pinger" && l.Get("outcome") == "won") {
        pinger_won[l.Get("tick")] = l.Get("fence");
      }
      if (l.event == "tick" && l.Get("job") == "pinger" && l.Get("outcome") == "busy") {
        pinger_busy.insert(l.Get("tick"));
      }
    }
  };
  // Each failed run's notification arrives (the queue drains on its own).
  const bool drained = Cluster::WaitUntil(
      [&] {
        collect();
        return Posts(endpoint, "/fail").size() >= failed_runs.size() &&
               Posts(endpoint, "/miss").size() >= missed.size();
      },
      10s);
  std::this_thread::sleep_for(500ms);  // a duplicate would come now
  // Stop claiming; what ran until then is what is judged.
  for (auto& r : cluster.replicas()) r->Signal(SIGTERM);
  for (auto& r : cluster.replicas()) {
    auto status = r->Wait(20s);
    INFO(r->node() << " log:\n" << r->LogText());
    REQUIRE(status.has_value());
    CHECK(*status == 0);
  }
  collect();
  INFO("folder " << cluster.dir());
  CHECK(drained);

  // on_failure: once per tick that ran, from its winner, with its fence.
  std::map<std::string, int> posted;
  for (const nlohmann::json& j : Posts(endpoint, "/fail")) {
    REQUIRE(j.is_object());
    const std::string tick = j["tick"];
    ++posted[tick];
    CHECK(j["event"] == "failure");
    CHECK(j["job"] == "failing");
    CHECK(j["outcome"] == "failed");
    CHECK(j["exit"] == 3);
    CHECK(j["output"] == "about to fail");
    auto run = failed_runs.find(tick);
    REQUIRE(run != failed_runs.end());
    CHECK(run->second ==
          std::string(j["node"]) + " " + std::to_string(j["fence"].get<std::uint64_t>()));
  }
  CHECK(failed_runs.size() >= 4);
  // Once per try: the winner's `notify … attempts=N` line. A second try follows only
  // one that failed — on a loaded machine, an answer later than the 2 s timeout to a
  // POST the endpoint had taken (HTTP cannot tell it from a lost request).
  std::map<std::string, int> tries;  // tick → attempts of its sent notification
  for (const LogLine& l : cluster.AllLines()) {
    if (l.event == "notify" && l.Get("job") == "failing" && l.Get("outcome") == "sent") {
      tries[l.Get("tick")] = std::stoi(l.Get("attempts"));
    }
  }
  for (const auto& [tick, node_fence] : failed_runs) {
    INFO("tick " << tick << ", notified in " << tries[tick] << " tries");
    CHECK(posted[tick] >= 1);
    CHECK(posted[tick] <= std::max(1, tries[tick]));
  }

  // on_miss: every missed tick of rare once in all (every replica logged it missed).
  CHECK_FALSE(missed.empty());
  std::map<std::string, int> miss_posts;
  for (const nlohmann::json& j : Posts(endpoint, "/miss")) {
    REQUIRE(j.is_object());
    ++miss_posts[j["tick"]];
    CHECK(j["event"] == "miss");
    CHECK(j["outcome"] == "missed");
  }
  for (const std::string& tick : missed) {
    INFO("missed tick " << tick);
    CHECK(miss_posts[tick] == 1);
  }
  CHECK(miss_posts.size() == missed.size());

  // The http: job: one request per tick won, fences increasing with the tick, the
  // header's ${VAR} expanded; its dead on_success endpoint held up no tick: a run that
  // waited on it (refused, retried 1 s and 2 s later) would have held the next ticks
  // busy and started its own seconds late. So no tick was busy, and each request came
  // within 2.5 s of its tick, the stop and the second after it excepted (a loaded
  // machine started one 1.002 s and one 1.001 s after its tick: not a bound of 1 s).
  const auto requests = endpoint.Requests("/job");
  std::map<long long, unsigned long long> fence_of;
  for (const auto& r : requests) {
    CHECK(r.Header("Authorization") == "Bearer t0k");
    const long long tick = std::stoll(r.Header("X-Tickd-Tick-Unix"));
    CHECK(fence_of.count(tick) == 0);
    fence_of[tick] = std::stoull(r.Header("X-Tickd-Fence"));
    // A tick claimed just before the stop starts late after it, as it should; so may
    // one due in the second after SIGCONT, while the replicas catch up on what the stop
    // left (its missed ticks logged, its leases judged).
    const auto due = std::chrono::system_clock::time_point(std::chrono::seconds(tick));
    if (due > stopped_at - 1s && due < resumed_at + 1s) continue;
    CHECK(r.at - due < 2500ms);
  }
  const auto rfc3339 = [](std::chrono::system_clock::time_point t) {
    const std::time_t secs = std::chrono::system_clock::to_time_t(t);
    std::tm tm{};
    gmtime_r(&secs, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return std::string(buf);
  };
  for (const std::string& tick : pinger_busy) {
    // The same format throughout: strings order as the instants do.
    if (tick >= rfc3339(stopped_at - 2s) && tick <= rfc3339(resumed_at + 1s)) continue;
    INFO("pinger busy at " << tick);
    CHECK(false);
  }
  CHECK(fence_of.size() == pinger_won.size());
  CHECK(fence_of.size() >= 4);
  unsigned long long last = 0;
  for (const auto& [tick, fence] : fence_of) {
    CHECK(fence > last);
    last = fence;
  }
  // The dead endpoint cost a line per notification and nothing else.
  int dead_lines = 0;
  for (const LogLine& l : cluster.AllLines()) {
    if (l.event == "notify" && l.Get("job") == "pinger") {
      CHECK(l.Get("outcome") != "sent");
      ++dead_lines;
    }
    // Header values never reach a log line.
    CHECK(l.raw.find("t0k") == std::string::npos);
  }
  CHECK(dead_lines > 0);
}

}  // namespace tickd::e2e
