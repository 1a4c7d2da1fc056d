// `tickd locks` and `tickd trigger` through the real binary, against real `tickd run`
// replicas sharing one SQLite store: a long run's claim is listed (holder, tick, lease
// left; text and --json); a live holder's claim is never released; once the holder
// was SIGKILLed and its lease ran out, --release needs --yes, then frees it (logged);
// a trigger runs a job once now through the claim path (manual=true, in the ledger
// with its winner), a second one for the same tick or while the job runs is refused
// with a reason, and an unknown job is bad input.
#include <signal.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <thread>

#include "tests/e2e/harness.h"

namespace tickd::e2e {
namespace {

using nlohmann::json;

// The JSON document a command printed (stdout and stderr are one stream here: the
// document is everything from the first '[' or '{').
json ParseOutput(const std::string& output) {
  const std::size_t start = output.find_first_of("[{");
  REQUIRE(start != std::string::npos);
  return json::parse(output.substr(start));
}

// The logfmt lines of `event` among a command's output.
std::vector<LogLine> EventLines(const std::string& output, const std::string& event) {
  std::vector<LogLine> out;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);) {
    auto parsed = ParseLogLine(line);
    if (parsed && parsed->event == event) out.push_back(std::move(*parsed));
  }
  return out;
}

std::pair<int, std::string> Tickd(const fs::path& file, std::vector<std::string> args) {
  std::vector<std::string> argv = {TICKD_BINARY, args.front(), "-c", file.string()};
  argv.insert(argv.end(), args.begin() + 1, args.end());
  return RunCommand(argv);
}

// The ticks `tickd status --json` reports for `job`.
json StatusTicks(const fs::path& file, const std::string& job) {
  auto [status, output] = Tickd(file, {"status", "--json", "--job", job});
  INFO(output);
  REQUIRE(status == 0);
  const json doc = ParseOutput(output);
  for (const json& j : doc["jobs"]) {
    if (j["name"] == job) return j["ticks"];
  }
  FAIL("no job " << job << " in tickd status");
  return {};
}

TEST_CASE("tickd locks lists a long run's claim and releases it only once its holder is gone") {
  auto backend = MakeSqliteFixture();
  Cluster cluster(*backend);
  const fs::path pid_file = cluster.dir() / "job.pid";
  const fs::path file = cluster.WriteJobFile(
      "jobs:\n  - name: long\n    schedule: \"@every 1s\"\n    shell: echo $$ > " +
          pid_file.string() + "; exec sleep 30\n",
      "lease: 2s");
  Replica& holder = cluster.StartReplica("node-a");
  REQUIRE(Cluster::WaitUntil([&] { return fs::exists(pid_file); }, milliseconds(15'000)));

  // Listed with its holder, tick and lease left.
  auto [text_status, text] = Tickd(file, {"locks"});
  INFO(text);
  CHECK(text_status == 0);
  CHECK(text.find("LEASE LEFT") != std::string::npos);
  CHECK(text.find("long") != std::string::npos);
  CHECK(text.find("node-a") != std::string::npos);
  auto [json_status, json_text] = Tickd(file, {"locks", "--json"});
  INFO(json_text);
  REQUIRE(json_status == 0);
  const json claims = ParseOutput(json_text);
  REQUIRE(claims.size() == 1);
  CHECK(claims[0]["job"] == "long");
  CHECK(claims[0]["holder"] == "node-a");
  CHECK(claims[0]["holder_alive"] == true);
  CHECK(claims[0]["lease_left_seconds"].get<double>() > 0);
  CHECK(claims[0]["lease_left_seconds"].get<double>() <= 2.0);
  CHECK(claims[0]["fence"].get<std::uint64_t>() > 0);
  const std::int64_t tick = claims[0]["tick_unix"];

  // A live holder's claim is refused, whatever the operator says.
  auto [alive_status, alive] = Tickd(file, {"locks", "--release", "long", "--yes"});
  INFO(alive);
  CHECK(alive_status != 0);
  auto refused = EventLines(alive, "release");
  REQUIRE(refused.size() == 1);
  CHECK(refused[0].Get("outcome") == "holder-alive");
  CHECK(ParseOutput(Tickd(file, {"locks", "--json"}).second)[0]["holder_alive"] == true);

  // The holder dies; its job process (its own process group) is stopped too.
  holder.Signal(SIGKILL);
  REQUIRE(holder.Wait(milliseconds(5'000)));
  std::ifstream pid_in(pid_file);
  pid_t job_pid = 0;
  pid_in >> job_pid;
  if (job_pid > 0) ::kill(job_pid, SIGKILL);
  std::this_thread::sleep_for(milliseconds(2'500));  // the lease runs out

  const json dead = ParseOutput(Tickd(file, {"locks", "--json"}).second);
  REQUIRE(dead.size() == 1);
  CHECK(dead[0]["holder_alive"] == false);
  CHECK(dead[0]["tick_unix"] == tick);

  // Without --yes: nothing changes, and it says so.
  auto [dry_status, dry] = Tickd(file, {"locks", "--release", "long"});
  INFO(dry);
  CHECK(dry_status == 2);
  CHECK(dry.find("not releasing without --yes") != std::string::npos);
  CHECK(EventLines(dry, "release").empty());
  CHECK(ParseOutput(Tickd(file, {"locks", "--json"}).second).size() == 1);

  // With --yes: released, logged, gone from the list, `released` in the ledger.
  auto [yes_status, yes] = Tickd(file, {"locks", "--release", "long", "--yes"});
  INFO(yes);
  CHECK(yes_status == 0);
  auto released = EventLines(yes, "release");
  REQUIRE(released.size() == 1);
  CHECK(released[0].Get("outcome") == "released");
  CHECK(released[0].Get("holder") == "node-a");
  CHECK(released[0].Get("job") == "long");
  CHECK(ParseOutput(Tickd(file, {"locks", "--json"}).second).empty());
  CHECK(Tickd(file, {"locks"}).second.find("no running claims") != std::string::npos);
  bool in_ledger = false;
  for (const json& t : StatusTicks(file, "long")) {
    if (t["winner"] == "node-a" && t["outcome"] == "released") in_ledger = true;
  }
  CHECK(in_ledger);

  // Nothing left to release.
  CHECK(Tickd(file, {"locks", "--release", "long", "--yes"}).first != 0);
}

TEST_CASE("tickd trigger runs a job once now through the claim path") {
  auto backend = MakeSqliteFixture();
  Cluster cluster(*backend);
  const fs::path runs = cluster.dir() / "runs";
  const fs::path file = cluster.WriteJobFile(
      "jobs:\n"
      "  - name: report\n    schedule: \"0 0 1 1 *\"\n    shell: echo ran >> " +
      runs.string() + "\n" +
      "  - name: slow\n    schedule: \"0 0 1 1 *\"\n    shell: sleep 2; echo slow >> " +
      runs.string() + "\n");

  auto [status, output] = Tickd(file, {"trigger", "report", "--node-id", "op-1"});
  INFO(output);
  REQUIRE(status == 0);
  auto ticks = EventLines(output, "tick");
  REQUIRE(ticks.size() == 1);
  CHECK(ticks[0].Get("manual") == "true");
  CHECK(ticks[0].Get("outcome") == "won");
  CHECK(ticks[0].Get("node") == "op-1");
  CHECK(ReadLines(runs) == std::vector<std::string>{"ran"});
  bool found = false;
  for (const json& t : StatusTicks(file, "report")) {
    if (t["tick"] == ticks[0].Get("tick")) {
      found = true;
      CHECK(t["winner"] == "op-1");
      CHECK(t["outcome"] == "done");
      CHECK(t["exit_code"] == 0);
    }
  }
  CHECK(found);

  auto [unknown_status, unknown] = Tickd(file, {"trigger", "nope"});
  INFO(unknown);
  CHECK(unknown_status == 2);
  CHECK(unknown.find("no job named nope (jobs: report, slow)") != std::string::npos);

  // Two operators trigger the same job at once: the same second is the same tick
  // (lost), the next second finds the first run still going (busy under forbid).
  // Either way it runs once, and the other says why it did not run.
  auto first = std::async(std::launch::async,
                          [&] { return Tickd(file, {"trigger", "slow", "--node-id", "op-1"}); });
  auto second = std::async(std::launch::async,
                           [&] { return Tickd(file, {"trigger", "slow", "--node-id", "op-2"}); });
  const auto a = first.get();
  const auto b = second.get();
  INFO(a.second << "\n---\n" << b.second);
  CHECK(((a.first == 0) != (b.first == 0)));
  const std::string& refused = a.first == 0 ? b.second : a.second;
  CHECK((refused.find("was already claimed by") != std::string::npos ||
         refused.find("still runs on") != std::string::npos));
  CHECK(refused.find("slow was not run") != std::string::npos);
  int slow_runs = 0;
  for (const std::string& l : ReadLines(runs)) slow_runs += l == "slow" ? 1 : 0;
  CHECK(slow_runs == 1);
}

TEST_CASE("tickd trigger while a daemon runs the job: busy under forbid, with the holder") {
  auto backend = MakeSqliteFixture();
  Cluster cluster(*backend);
  const fs::path started = cluster.dir() / "started";
  const fs::path file = cluster.WriteJobFile(
      "jobs:\n  - name: long\n    schedule: \"@every 1s\"\n    shell: touch " + started.string() +
      "; sleep 5\n");
  cluster.StartReplica("node-a");
  REQUIRE(Cluster::WaitUntil([&] { return fs::exists(started); }, milliseconds(15'000)));
  // Past the second of the daemon's tick (within it the trigger would be that tick: lost).
  std::this_thread::sleep_for(milliseconds(1'200));
  auto [status, output] = Tickd(file, {"trigger", "long", "--node-id", "op-1"});
  INFO(output);
  CHECK(status == 1);
  auto ticks = EventLines(output, "tick");
  REQUIRE(ticks.size() == 1);
  CHECK(ticks[0].Get("outcome") == "busy");
  CHECK(ticks[0].Get("holder") == "node-a");
  CHECK(ticks[0].Get("manual") == "true");
  CHECK(output.find("long was not run: its tick") != std::string::npos);
}

}  // namespace
}  // namespace tickd::e2e
