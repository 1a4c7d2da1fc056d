#include "tests/e2e/scenarios.h"

#include <signal.h>

#include <algorithm>
#include <cctype>
#include <ctime>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cron/schedule.h"

namespace tickd::e2e {

using namespace std::chrono_literals;

namespace {

// A job line a run appends to runs.txt: "<event> <tick_unix> <node> <fence> <unix time>".
struct RunRecord {
  std::string event;  // start | end
  long long tick = 0;
  std::string node;
  unsigned long long fence = 0;
  double at = 0;
};

std::vector<RunRecord> ReadRuns(const fs::path& file) {
  std::vector<RunRecord> out;
  for (const std::string& line : ReadLines(file)) {
    std::istringstream in(line);
    RunRecord r;
    if (in >> r.event >> r.tick >> r.node >> r.fence >> r.at) out.push_back(r);
  }
  return out;
}

// Shell for a job that records its start and end in runs.txt around `work`.
std::string RecordingShell(const std::string& work) {
  return "echo \"start $TICKD_TICK_UNIX $TICKD_NODE $TICKD_FENCE $(date +%s.%N)\" >> runs.txt; " +
         work +
         "; echo \"end $TICKD_TICK_UNIX $TICKD_NODE $TICKD_FENCE $(date +%s.%N)\" >> runs.txt";
}

// Runs the tickd binary with `args` in the backend's environment; it must exit 0.
std::string MustRunTickd(BackendFixture& backend, std::vector<std::string> args) {
  args.insert(args.begin(), TICKD_BINARY);
  auto [status, output] = RunCommand(args, backend.Env());
  INFO(output);
  REQUIRE(status == 0);
  return output;
}

void StopAll(Cluster& cluster) {
  for (auto& r : cluster.replicas()) {
    if (r->running()) r->Signal(SIGTERM);
  }
  for (auto& r : cluster.replicas()) {
    if (r->running()) {
      auto status = r->Wait(20s);
      INFO(r->node() << " log:\n" << r->LogText());
      REQUIRE(status.has_value());
      CHECK(*status == 0);
    }
  }
}

}  // namespace

void ScenarioSkewedReplicas(BackendFixture& backend) {
  Cluster cluster(backend);
  // concurrency: allow, because the point here is skew. With forbid, the replica
  // ahead claims T 0.7 s early; on a loaded machine the run of T−1 may not have
  // completed yet, and the replica rightly logs `busy` (naming T−1's holder), not the
  // winner of T, who claims once T−1 is done.
  cluster.WriteJobFile(
      "jobs:\n"
      "  - name: fast\n"
      "    schedule: \"* * * * * *\"\n"
      "    concurrency: allow\n"
      "    shell: " + RecordingShell("true") + "\n");
  cluster.StartReplica("node-a");
  cluster.StartReplica("node-behind", FakeTimeEnv(-1.5));
  cluster.StartReplica("node-ahead", FakeTimeEnv(0.7));
  std::this_thread::sleep_for(9s);
  StopAll(cluster);

  const auto lines = cluster.AllLines();
  const auto runs = ReadRuns(cluster.dir() / "runs.txt");
  INFO("folder " << cluster.dir());
  // Exactly once: every tick started once, and fences increase with the tick.
  std::map<long long, RunRecord> starts;
  for (const RunRecord& r : runs) {
    if (r.event != "start") continue;
    INFO("tick " << r.tick << " started twice");
    CHECK(starts.count(r.tick) == 0);
    starts[r.tick] = r;
  }
  REQUIRE(starts.size() >= 5);
  // Every replica logs one tick line per tick, naming the winner. Judge the ticks
  // that every replica was up for: between the latest first tick and earliest last.
  std::map<std::string, std::map<std::string, std::vector<LogLine>>> by_node_tick;
  for (const LogLine& l : Events(lines, "tick", "fast")) {
    by_node_tick[l.Get("node")][l.Get("tick")].push_back(l);
  }
  REQUIRE(by_node_tick.size() == 3);
  std::string from, to = "~";
  for (const auto& [node, ticks] : by_node_tick) {
    from = std::max(from, ticks.begin()->first);
    to = std::min(to, ticks.rbegin()->first);
  }
  std::map<std::string, std::string> winner_of;
  for (const LogLine& l : Events(lines, "tick", "fast")) {
    if (l.Get("outcome") == "won") {
      CHECK(winner_of.count(l.Get("tick")) == 0);
      winner_of[l.Get("tick")] = l.Get("node");
    }
  }
  // Fences increase with the tick. (Only once every replica runs: a replica whose
  // clock lags may, while starting, still win an older tick nobody claimed yet.)
  unsigned long long last_fence = 0;
  for (const auto& [tick, r] : starts) {
    if (TickText(tick) <= from || TickText(tick) >= to) continue;
    CHECK(r.fence > last_fence);
    last_fence = r.fence;
  }
  int judged = 0;
  for (const auto& [tick, winner] : winner_of) {
    if (tick <= from || tick >= to) continue;
    ++judged;
    for (const auto& [node, ticks] : by_node_tick) {
      INFO("node " << node << " tick " << tick);
      auto it = ticks.find(tick);
      REQUIRE(it != ticks.end());
      CHECK(it->second.size() == 1);
      const LogLine& l = it->second.front();
      // The replica 0.7 s ahead is beyond lock.claim_lead + lock.clock_tolerance: the
      // store refuses its claims (early; on etcd, judging by whole seconds, not always).
      if (node != winner && l.Get("outcome") != "early") {
        CHECK(l.Get("outcome") == "lost");
        CHECK(l.Get("winner") == winner);
      }
    }
  }
  CHECK(judged >= 4);
}

void ScenarioWrongClock(BackendFixture& backend) {
  Cluster cluster(backend);
  cluster.WriteJobFile(
      "jobs:\n"
      "  - name: every2\n"
      "    schedule: \"*/2 * * * * *\"\n"
      "    shell: " + RecordingShell("true") + "\n");
  cluster.StartReplica("node-a");
  cluster.StartReplica("node-b");
  const auto tick_lines = [&](const std::string& node) {
    int n = 0;
    for (const LogLine& l : Events(cluster.AllLines(), "tick", "every2")) n += l.Get("node") == node;
    return n;
  };
  REQUIRE(Cluster::WaitUntil([&] { return tick_lines("node-a") >= 2; }, 60s));
  // The wrong clock, one after the other; each claims at least three ticks.
  const std::vector<std::pair<std::string, double>> wrong = {
      {"node-ahead-30s", 30}, {"node-ahead-1h", 3600}, {"node-behind-30s", -30}};
  for (const auto& [node, offset] : wrong) {
    Replica& x = cluster.StartReplica(node, FakeTimeEnv(offset));
    INFO(node << " log:\n" << x.LogText());
    CHECK(Cluster::WaitUntil([&] { return tick_lines(node) >= 4; }, 60s));
    x.Signal(SIGTERM);
    REQUIRE(x.Wait(20s).has_value());
  }
  // After the wrong clock is gone, the right replicas run the next ticks.
  const double gone = std::chrono::duration<double>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  const auto runs_after = [&] {
    int n = 0;
    for (const RunRecord& r : ReadRuns(cluster.dir() / "runs.txt")) {
      n += r.event == "start" && r.tick > gone;
    }
    return n;
  };
  CHECK(Cluster::WaitUntil([&] { return runs_after() >= 2; }, 60s));
  // `tickd trigger` on a host whose clock is ahead: refused, nothing run, exit 1.
  std::vector<std::string> env = backend.Env();
  for (std::string& e : FakeTimeEnv(30)) env.push_back(std::move(e));
  auto [trigger_status, trigger_out] =
      RunCommand({TICKD_BINARY, "trigger", "-c", (cluster.dir() / "jobs.yaml").string(),
                  "--node-id", "node-trigger", "every2"},
                 env);
  INFO(trigger_out);
  CHECK(trigger_status == 1);
  CHECK(trigger_out.find("outcome=early") != std::string::npos);
  CHECK(trigger_out.find("ahead of the lock store's") != std::string::npos);
  StopAll(cluster);

  const auto lines = cluster.AllLines();
  INFO("folder " << cluster.dir());
  // Every tick from the first run to the last ran exactly once, on a right clock,
  // never before its instant by the real clock (the runs record it: `date` in the job).
  std::map<long long, RunRecord> starts;
  for (const RunRecord& r : ReadRuns(cluster.dir() / "runs.txt")) {
    if (r.event != "start") continue;
    INFO("tick " << r.tick << " on " << r.node);
    CHECK(starts.count(r.tick) == 0);
    CHECK((r.node == "node-a" || r.node == "node-b"));
    CHECK(r.at >= static_cast<double>(r.tick));
    starts[r.tick] = r;
  }
  REQUIRE(starts.size() >= 6);
  // How late the runs started (the first excepted: a replica that starts mid-second
  // runs the tick still startable at once). Reported, not judged: CI is loaded.
  double latest = 0;
  for (auto it = std::next(starts.begin()); it != starts.end(); ++it) {
    latest = std::max(latest, it->second.at - static_cast<double>(it->first));
  }
  WARN("latest start after its instant (by the real clock): " << latest << " s");
  for (long long t = starts.begin()->first; t <= starts.rbegin()->first; t += 2) {
    if (starts.count(t) == 1) continue;
    // A tick that ran nowhere is fine only when both right replicas said `busy` behind
    // the run of the tick before it (forbid at work: on a loaded machine that run, with
    // its complete, can take the 1.8 s to the next claim — clean-clone CI runs of
    // 536b2ad on etcd and of 05f5fed on PostgreSQL saw it once each).
    std::string said;
    int busy_behind = 0;
    for (const LogLine& l : lines) {
      if (l.Get("job") != "every2" || l.Get("tick") != TickText(t)) continue;
      said += l.raw + "\n";
      busy_behind += l.event == "tick" && (l.Get("node") == "node-a" || l.Get("node") == "node-b") &&
                     l.Get("outcome") == "busy" && l.Get("holder_tick") == TickText(t - 2) &&
                     (l.Get("holder") == "node-a" || l.Get("holder") == "node-b");
    }
    INFO("tick " << t << " did not run; its lines:\n" << said);
    CHECK(busy_behind == 2);
  }
  // The ahead replicas heard `early` (their offset to the store logged), never won;
  // the behind one never won either. Each logged its offset to the store.
  for (const auto& [node, offset] : wrong) {
    int early = 0;
    for (const LogLine& l : Events(lines, "tick", "every2")) {
      if (l.Get("node") != node) continue;
      INFO(l.raw);
      CHECK(l.Get("outcome") != "won");
      if (l.Get("outcome") == "early") {
        ++early;
        const double measured = std::stod(l.Get("offset"));
        CHECK(measured > offset - 5);
        CHECK(measured < offset + 5);
      }
    }
    if (offset > 0) CHECK(early >= 3);
    bool warned = false;
    for (const LogLine& l : lines) {
      warned = warned || (l.event == "store-clock" && l.Get("node") == node &&
                          l.Get("outcome") == (offset > 0 ? "ahead" : "behind"));
    }
    INFO(node);
    CHECK(warned);
  }
}

void ScenarioClockAheadWithinTolerance(BackendFixture& backend) {
  Cluster cluster(backend);
  // `date` without the preload: the host's clock, not the replica's.
  cluster.WriteJobFile(
      "jobs:\n"
      "  - name: beat\n"
      "    schedule: \"* * * * * *\"\n"
      "    shell: echo \"start $TICKD_TICK_UNIX $TICKD_NODE $TICKD_FENCE "
      "$(env -u LD_PRELOAD date +%s.%N)\" >> runs.txt\n");
  cluster.StartReplica("node-right");
  Replica& ahead = cluster.StartReplica("node-ahead", FakeTimeEnv(0.2));
  const auto judged = [&] {
    std::vector<RunRecord> out;
    for (const RunRecord& r : ReadRuns(cluster.dir() / "runs.txt")) {
      if (r.event == "start") out.push_back(r);
    }
    return out;
  };
  CHECK(Cluster::WaitUntil([&] { return judged().size() >= 8; }, 60s));
  INFO(ahead.LogText());
  StopAll(cluster);
  std::map<long long, int> runs_of;
  int won_ahead = 0;
  for (const RunRecord& r : judged()) {
    INFO("tick " << r.tick << " on " << r.node << " started " << std::fixed << r.at);
    CHECK(r.at >= static_cast<double>(r.tick) - 0.002);
    ++runs_of[r.tick];
    won_ahead += r.node == "node-ahead";
  }
  for (const auto& [tick, n] : runs_of) {
    INFO("tick " << tick);
    CHECK(n == 1);
  }
  CHECK(won_ahead >= 1);  // else this said nothing of the clock ahead
}

void ScenarioKillRunningReplica(BackendFixture& backend, bool recover) {
  Cluster cluster(backend);
  cluster.WriteJobFile(
      "jobs:\n"
      "  - name: slow\n"
      "    schedule: \"*/4 * * * * *\"\n"
      "    recover: " + std::string(recover ? "true" : "false") + "\n" +
      "    shell: " + RecordingShell("sleep 2") + "\n",
      "lease: 2s");
  cluster.StartReplica("node-a");
  cluster.StartReplica("node-b");
  cluster.StartReplica("node-c");
  // Wait for a run to start, then SIGKILL the replica running it.
  std::string victim;
  long long victim_tick = 0;
  REQUIRE(Cluster::WaitUntil([&] {
    for (const RunRecord& r : ReadRuns(cluster.dir() / "runs.txt")) {
      if (r.event == "start") {
        victim = r.node;
        victim_tick = r.tick;
        return true;
      }
    }
    return false;
  }, 15s));
  const auto kill_time = std::chrono::system_clock::now();
  for (auto& r : cluster.replicas()) {
    if (r->node() == victim) {
      r->Signal(SIGKILL);
      r->Wait(5s);
    }
  }
  // The survivors go on: two more ticks run after the kill.
  REQUIRE(Cluster::WaitUntil([&] {
    int later = 0;
    for (const RunRecord& r : ReadRuns(cluster.dir() / "runs.txt")) {
      if (r.event == "end" && r.tick > victim_tick) ++later;
    }
    return later >= 2;
  }, 20s));
  StopAll(cluster);

  const auto runs = ReadRuns(cluster.dir() / "runs.txt");
  INFO("folder " << cluster.dir() << " victim " << victim << " tick " << victim_tick);
  // No two runs overlap: a run lasts from its start to its end, or (killed with its
  // replica) to the kill.
  struct Interval { double from, to; std::string who; };
  std::vector<Interval> intervals;
  const double killed_at =
      std::chrono::duration<double>(kill_time.time_since_epoch()).count();
  for (const RunRecord& s : runs) {
    if (s.event != "start") continue;
    double end = killed_at;
    for (const RunRecord& e : runs) {
      if (e.event == "end" && e.tick == s.tick && e.fence == s.fence) end = e.at;
    }
    intervals.push_back({s.at, end, s.node + "@" + std::to_string(s.tick)});
  }
  std::sort(intervals.begin(), intervals.end(), [](auto& a, auto& b) { return a.from < b.from; });
  for (std::size_t i = 1; i < intervals.size(); ++i) {
    INFO(intervals[i - 1].who << " overlaps " << intervals[i].who);
    CHECK(intervals[i].from >= intervals[i - 1].to);
  }
  // The interrupted tick: re-run elsewhere with a higher fence only with recover.
  std::vector<RunRecord> victim_starts;
  for (const RunRecord& r : runs) {
    if (r.event == "start" && r.tick == victim_tick) victim_starts.push_back(r);
  }
  if (recover) {
    REQUIRE(victim_starts.size() == 2);
    CHECK(victim_starts[1].node != victim);
    CHECK(victim_starts[1].fence > victim_starts[0].fence);
  } else {
    CHECK(victim_starts.size() == 1);
  }
  // Every tick after the kill started exactly once.
  std::map<long long, int> starts_per_tick;
  for (const RunRecord& r : runs) {
    if (r.event == "start" && r.tick > victim_tick) ++starts_per_tick[r.tick];
  }
  for (const auto& [tick, n] : starts_per_tick) CHECK(n == 1);
}

void ScenarioPausedHolder(BackendFixture& backend) {
  Cluster cluster(backend);
  cluster.WriteJobFile(
      "jobs:\n"
      "  - name: long\n"
      "    schedule: \"*/3 * * * * *\"\n"
      "    timeout: 1m\n"
      "    kill_grace: 1s\n"
      "    shell: " + RecordingShell("sleep 8") + "\n",
      "lease: 2s");
  cluster.StartReplica("node-a");
  cluster.StartReplica("node-b");
  std::string holder;
  long long held_tick = 0;
  REQUIRE(Cluster::WaitUntil([&] {
    for (const RunRecord& r : ReadRuns(cluster.dir() / "runs.txt")) {
      if (r.event == "start") {
        holder = r.node;
        held_tick = r.tick;
        return true;
      }
    }
    return false;
  }, 15s));
  Replica* paused = nullptr;
  for (auto& r : cluster.replicas()) {
    if (r->node() == holder) paused = r.get();
  }
  REQUIRE(paused != nullptr);
  paused->Signal(SIGSTOP);
  // Another replica takes a later tick while the holder is frozen past its lease.
  const bool taken = Cluster::WaitUntil([&] {
    for (const RunRecord& r : ReadRuns(cluster.dir() / "runs.txt")) {
      if (r.event == "start" && r.node != holder && r.tick > held_tick) return true;
    }
    return false;
  }, 12s);
  paused->Signal(SIGCONT);
  INFO("folder " << cluster.dir() << " holder " << holder << " tick " << held_tick);
  CHECK(taken);
  // The paused one notices its lease is gone, ends its job and says so.
  const bool lease_lost_logged = Cluster::WaitUntil([&] {
    for (const LogLine& l : paused->Lines()) {
      if (l.event == "run" && l.Get("outcome") == "lease-lost") return true;
    }
    return false;
  }, 10s);
  INFO(paused->LogText());
  CHECK(lease_lost_logged);
  StopAll(cluster);
  // Its job was terminated: the held tick never reached its end.
  for (const RunRecord& r : ReadRuns(cluster.dir() / "runs.txt")) {
    if (r.event == "end") CHECK(!(r.tick == held_tick && r.node == holder));
  }
}

void ScenarioPauseResume(BackendFixture& backend) {
  Cluster cluster(backend);
  const fs::path file = cluster.WriteJobFile(
      "jobs:\n"
      "  - name: steady\n"
      "    schedule: \"* * * * * *\"\n"
      "    shell: " + RecordingShell("true") + "\n"
      "  - name: beat\n"
      "    schedule: \"* * * * * *\"\n"
      "    shell: \"true\"\n");
  for (const char* node : {"node-a", "node-b", "node-c"}) cluster.StartReplica(node);
  const fs::path runs_file = cluster.dir() / "runs.txt";
  REQUIRE(Cluster::WaitUntil([&] { return ReadRuns(runs_file).size() >= 6; }, 15s));
  const auto tickd = [&](std::vector<std::string> args) { return MustRunTickd(backend, args); };
  const auto now_unix = [] { return static_cast<long long>(std::time(nullptr)); };

  const std::string paused = tickd({"pause", "-c", file.string(), "--node-id", "operator",
                                    "--reason", "e2e", "steady"});
  CHECK(paused.find("pause job=steady outcome=paused by=operator") != std::string::npos);
  // The instant under way when the pause was written, or claimed already (early claims
  // come lock.claim_lead, 200 ms, before it), may still run (design.md §1 rule 13);
  // every later one must not.
  const long long first_paused = now_unix() + 2;
  std::this_thread::sleep_for(4500ms);
  const std::string status = tickd({"status", "-c", file.string(), "--job", "steady"});
  CHECK(status.find("PAUSED by operator: e2e") != std::string::npos);
  const long long last_paused = now_unix() - 1;
  for (const RunRecord& r : ReadRuns(runs_file)) CHECK(r.tick < first_paused);
  const std::string resumed = tickd({"resume", "-c", file.string(), "steady"});
  CHECK(resumed.find("pause job=steady outcome=resumed") != std::string::npos);
  const long long first_resumed = now_unix() + 1;
  REQUIRE(Cluster::WaitUntil(
      [&] {
        for (const RunRecord& r : ReadRuns(runs_file)) {
          if (r.event == "end" && r.tick >= first_resumed + 1) return true;
        }
        return false;
      },
      10s));
  StopAll(cluster);

  const auto lines = cluster.AllLines();
  // Every replica logged every fully paused tick of steady as skipped, naming who paused.
  for (auto& r : cluster.replicas()) {
    std::set<std::string> skipped;
    for (const LogLine& l : r->Lines()) {
      if (l.event == "tick" && l.Get("job") == "steady" && l.Get("outcome") == "skipped") {
        CHECK(l.Get("reason") == "paused");
        CHECK(l.Get("paused_by") == "operator");
        skipped.insert(l.Get("tick"));
      }
    }
    INFO(r->node() << ":\n" << r->LogText());
    for (long long t = first_paused; t <= last_paused; ++t) CHECK(skipped.contains(TickText(t)));
  }
  // beat ran on through the pause, once per tick.
  std::map<std::string, int> beat_wins;
  for (const LogLine& l : Events(lines, "tick", "beat")) {
    if (l.Get("outcome") == "won") ++beat_wins[l.Get("tick")];
  }
  for (long long t = first_paused; t <= last_paused; ++t) CHECK(beat_wins[TickText(t)] == 1);
  // steady: every tick that ran, ran once.
  std::map<long long, int> starts;
  for (const RunRecord& r : ReadRuns(runs_file)) {
    if (r.event == "start") ++starts[r.tick];
  }
  for (const auto& [tick, n] : starts) CHECK(n == 1);
}

void ScenarioRetries(BackendFixture& backend) {
  Cluster cluster(backend);
  const fs::path file = cluster.WriteJobFile(
      "jobs:\n"
      "  - name: flaky\n"
      "    schedule: \"*/3 * * * * *\"\n"
      "    retries: 3\n"
      "    retry_backoff: 200ms\n"
      "    shell: \"echo try $TICKD_TICK_UNIX $TICKD_NODE $TICKD_FENCE $TICKD_ATTEMPT >> tries.txt;"
      " test $TICKD_ATTEMPT -ge 3\"\n");
  for (const char* node : {"node-a", "node-b", "node-c"}) cluster.StartReplica(node);
  const fs::path tries_file = cluster.dir() / "tries.txt";
  struct Try {
    std::string node;
    unsigned long long fence = 0;
    int attempt = 0;
  };
  const auto read_tries = [&] {
    std::map<long long, std::vector<Try>> by_tick;
    for (const std::string& line : ReadLines(tries_file)) {
      std::istringstream in(line);
      std::string word;
      long long tick = 0;
      Try t;
      if (in >> word >> tick >> t.node >> t.fence >> t.attempt) by_tick[tick].push_back(t);
    }
    return by_tick;
  };
  // Four ticks tried three times each (the last one may still be under way).
  REQUIRE(Cluster::WaitUntil(
      [&] {
        int complete = 0;
        for (const auto& [tick, tries] : read_tries()) complete += tries.size() >= 3 ? 1 : 0;
        return complete >= 4;
      },
      40s));
  std::this_thread::sleep_for(1500ms);  // the last tick's run line and ledger write
  const auto tickd = [&](std::vector<std::string> args) { return MustRunTickd(backend, args); };
  const std::string status =
      tickd({"status", "-c", file.string(), "--job", "flaky", "--last", "20", "--json"});
  StopAll(cluster);

  const auto lines = cluster.AllLines();
  INFO("folder " << cluster.dir());
  std::map<std::string, LogLine> runs;  // tick → its run line
  for (const LogLine& l : Events(lines, "run", "flaky")) runs[l.Get("tick")] = l;
  std::map<std::string, std::vector<LogLine>> retries;  // tick → its retry lines
  for (const LogLine& l : Events(lines, "retry", "flaky")) retries[l.Get("tick")].push_back(l);
  unsigned long long previous_tick_fence = 0;
  int checked = 0;
  for (const auto& [tick, tries] : read_tries()) {
    const std::string tick_text = TickText(tick);
    INFO("tick " << tick_text);
    if (tries.size() < 3 || !runs.contains(tick_text)) continue;  // cut off by the stop
    REQUIRE(tries.size() == 3);
    for (std::size_t i = 0; i < tries.size(); ++i) {
      CHECK(tries[i].attempt == static_cast<int>(i) + 1);
      CHECK(tries[i].node == tries[0].node);  // every try on the winner
      if (i > 0) CHECK(tries[i].fence > tries[i - 1].fence);
    }
    CHECK(tries[0].fence > previous_tick_fence);
    previous_tick_fence = tries[2].fence;
    const LogLine& run = runs.at(tick_text);
    CHECK(run.Get("outcome") == "done");
    CHECK(run.Get("attempts") == "3");
    CHECK(run.Get("node") == tries[0].node);
    CHECK(run.Get("fence") == std::to_string(tries[2].fence));
    const auto& r = retries[tick_text];
    REQUIRE(r.size() == 2);
    CHECK(r[0].Get("outcome") == "started");
    CHECK(r[0].Get("attempt") == "2");
    CHECK(r[0].Get("backoff") == "0.200s");
    CHECK(r[0].Get("previous_fence") == std::to_string(tries[0].fence));
    CHECK(r[0].Get("fence") == std::to_string(tries[1].fence));
    CHECK(r[1].Get("attempt") == "3");
    CHECK(r[1].Get("backoff") == "0.400s");
    CHECK(r[1].Get("fence") == std::to_string(tries[2].fence));
    // The ledger keeps the last fence with the tick.
    CHECK(status.find("\"fence\": " + std::to_string(tries[2].fence)) != std::string::npos);
    ++checked;
  }
  CHECK(checked >= 3);
  // Every tick line of the other replicas names the winner: one winner per tick.
  std::map<std::string, int> wins;
  for (const LogLine& l : Events(lines, "tick", "flaky")) {
    if (l.Get("outcome") == "won") ++wins[l.Get("tick")];
  }
  for (const auto& [tick, n] : wins) CHECK(n == 1);
}

void ScenarioRunOutput(BackendFixture& backend) {
  Cluster cluster(backend);
  // 40 filler lines of 60 bytes are more than 1 KB: only the end of each run is kept.
  const fs::path file = cluster.WriteJobFile(
      "jobs:\n"
      "  - name: printer\n"
      "    schedule: \"*/2 * * * * *\"\n"
      "    shell: 'echo \"first $TICKD_TICK_UNIX\"; i=0; while [ $i -lt 40 ]; do "
      "echo \"filler $i .........................................\"; i=$((i+1)); done; "
      "echo \"warn $TICKD_TICK_UNIX <b>&amp;</b>\" >&2; echo \"last $TICKD_TICK_UNIX\"'\n",
      "history: {output: 1KB, runs: 2}");
  cluster.StartReplica("node-a");
  cluster.StartReplica("node-b");
  const auto done_runs = [&] {
    std::map<std::string, std::string> winners;  // tick → node, of runs that ended done
    for (const LogLine& l : Events(cluster.AllLines(), "run", "printer")) {
      if (l.Get("outcome") == "done") winners[l.Get("tick")] = l.Get("node");
    }
    return winners;
  };
  REQUIRE(Cluster::WaitUntil([&] { return done_runs().size() >= 4; }, 30s));
  // Another process, as an operator on another machine would run it.
  auto [status, out] = RunCommand({TICKD_BINARY, "status", "-c", file.string(), "printer",
                                   "--runs", "--limit", "6", "--json"},
                                  backend.Env());
  INFO(out);
  REQUIRE(status == 0);
  auto [text_status, text] = RunCommand(
      {TICKD_BINARY, "status", "-c", file.string(), "printer", "--runs"}, backend.Env());
  const std::map<std::string, std::string> winners = done_runs();
  StopAll(cluster);
  INFO(text);
  CHECK(text_status == 0);
  CHECK(text.find("earlier bytes not kept") != std::string::npos);
  CHECK(text.find("stderr  warn ") != std::string::npos);

  const nlohmann::json report = nlohmann::json::parse(out);
  CHECK(report["job"] == "printer");
  int with_output = 0;
  int finished = 0;
  for (const nlohmann::json& run : report["runs"]) {
    if (run["state"] != "done") continue;
    ++finished;
    const std::string tick = run["tick"];
    const std::string tick_unix = std::to_string(run["tick_unix"].get<long long>());
    if (winners.contains(tick)) CHECK(run["winner"] == winners.at(tick));
    const nlohmann::json& lines = run["output"];
    if (finished > 2) {
      CHECK(lines.empty());  // beyond the newest 2 (history.runs)
      continue;
    }
    ++with_output;
    REQUIRE(lines.size() >= 3);
    CHECK(lines.front()["stream"] == "tickd");  // cut: the note comes first
    bool last = false;
    bool warn = false;
    bool first = false;
    for (const nlohmann::json& l : lines) {
      const std::string text_line = l["line"];
      if (l["stream"] == "stdout" && text_line == "last " + tick_unix) last = true;
      if (l["stream"] == "stderr" && text_line == "warn " + tick_unix + " <b>&amp;</b>") {
        warn = true;
      }
      if (text_line.starts_with("first ")) first = true;
    }
    CHECK(last);
    CHECK(warn);
    CHECK_FALSE(first);  // the beginning did not fit into 1 KB
  }
  CHECK(with_output == 2);
  CHECK(finished >= 3);
}

void ScenarioGracefulShutdown(BackendFixture& backend) {
  Cluster cluster(backend);
  cluster.WriteJobFile(
      "shutdown_grace: 5s\n"
      "jobs:\n"
      "  - name: busy\n"
      "    schedule: \"* * * * * *\"\n"
      "    concurrency: allow\n"
      "    shell: " + RecordingShell("sleep 1") + "\n");
  cluster.StartReplica("node-a");
  cluster.StartReplica("node-b");
  cluster.StartReplica("node-c");
  REQUIRE(
      Cluster::WaitUntil([&] { return ReadRuns(cluster.dir() / "runs.txt").size() >= 4; }, 15s));
  const auto t0 = std::chrono::steady_clock::now();
  StopAll(cluster);
  CHECK(std::chrono::steady_clock::now() - t0 < 10s);
  // Every tick a replica won was completed: it logged the run's end.
  for (auto& r : cluster.replicas()) {
    const auto lines = r->Lines();
    std::set<std::string> won, ran;
    for (const LogLine& l : lines) {
      if (l.event == "tick" && l.Get("outcome") == "won") won.insert(l.Get("tick"));
      if (l.event == "run") ran.insert(l.Get("tick"));
    }
    INFO(r->node() << ":\n" << r->LogText());
    CHECK(won == ran);
  }
}

void ScenarioServerRestart(BackendFixture& backend, const std::string& secret) {
  REQUIRE(backend.CanRestart());
  Cluster cluster(backend);
  cluster.WriteJobFile(
      "jobs:\n"
      "  - name: steady\n"
      "    schedule: \"* * * * * *\"\n"
      "    shell: " + RecordingShell("true") + "\n",
      "lease: 2s");
  cluster.StartReplica("node-a");
  cluster.StartReplica("node-b");
  cluster.StartReplica("node-c");
  const fs::path runs_file = cluster.dir() / "runs.txt";
  REQUIRE(Cluster::WaitUntil([&] { return ReadRuns(runs_file).size() >= 6; }, 15s));
  // Let the ticks under way finish, then crash the server.
  std::this_thread::sleep_for(300ms);
  unsigned long long fence_before = 0;
  for (const RunRecord& r : ReadRuns(runs_file)) fence_before = std::max(fence_before, r.fence);
  backend.Restart();
  const double restarted_at =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  // The replicas reconnect: runs of ticks after the restart appear.
  auto runs_after = [&] {
    int n = 0;
    for (const RunRecord& r : ReadRuns(runs_file)) {
      if (r.event == "start" && r.tick > restarted_at + 1) ++n;
    }
    return n;
  };
  const bool resumed = Cluster::WaitUntil([&] { return runs_after() >= 4; }, 20s);
  StopAll(cluster);
  INFO("folder " << cluster.dir());
  CHECK(resumed);

  const auto runs = ReadRuns(runs_file);
  std::map<long long, RunRecord> starts;
  for (const RunRecord& r : runs) {
    if (r.event != "start") continue;
    INFO("tick " << r.tick << " started twice");
    CHECK(starts.count(r.tick) == 0);  // no duplicate run, restart or not
    starts[r.tick] = r;
  }
  unsigned long long last_fence = 0;
  for (const auto& [tick, r] : starts) {
    INFO("tick " << tick << " fence " << r.fence);
    CHECK(r.fence > last_fence);
    last_fence = r.fence;
    if (tick > restarted_at + 1) CHECK(r.fence > fence_before);
  }
  // Every replica went on after the restart: it logged a won or lost tick after it.
  const std::string after_tick = [&] {
    const auto t = std::chrono::system_clock::time_point(
        std::chrono::seconds(static_cast<long long>(restarted_at) + 2));
    const std::time_t tt = std::chrono::system_clock::to_time_t(t);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&tt));
    return std::string(buf);
  }();
  for (auto& r : cluster.replicas()) {
    bool claimed_after = false;
    for (const LogLine& l : r->Lines()) {
      const std::string outcome = l.Get("outcome");
      if (l.event == "tick" && l.Get("tick") >= after_tick &&
          (outcome == "won" || outcome == "lost")) {
        claimed_after = true;
      }
    }
    INFO(r->node() << ":\n" << r->LogText());
    CHECK(claimed_after);
    // The password reaches the replica through the environment: never a log line.
    CHECK(r->LogText().find(secret) == std::string::npos);
  }
}

namespace {

// "2026-11-21T14:00:05.312+00:00" or "...Z" → unix milliseconds (the fraction kept).
long long UnixMs(const std::string& rfc3339) {
  const auto seconds = cron::ParseRfc3339(rfc3339);
  REQUIRE(seconds.has_value());
  long long ms = 0;
  const std::size_t dot = rfc3339.find('.');
  if (dot != std::string::npos) {
    int digits = 0;
    for (std::size_t i = dot + 1;
         i < rfc3339.size() && std::isdigit(static_cast<unsigned char>(rfc3339[i])); ++i) {
      if (digits++ < 3) ms = ms * 10 + (rfc3339[i] - '0');
    }
    for (; digits < 3; ++digits) ms *= 10;
  }
  return seconds->time_since_epoch().count() * 1000 + ms;
}

long long NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

void ScenarioSpread(BackendFixture& backend) {
  Cluster cluster(backend);
  const std::string record =
      "echo \"start $TICKD_JOB $TICKD_TICK_UNIX $TICKD_NODE $(date +%s.%N)\" >> spread-runs.txt";
  const fs::path file = cluster.WriteJobFile(
      "jobs:\n"
      "  - {name: spread-a, schedule: \"H/5 * * * * *\", jitter: 2s, shell: '" + record + "'}\n"
      "  - {name: spread-b, schedule: \"H/3 * * * * *\", jitter: 1500ms, shell: '" + record + "'}\n"
      "  - {name: spread-c, schedule: \"H/4 * * * * *\", jitter: 3s, shell: '" + record + "'}\n"
      "  - {name: hashed, schedule: \"H/2 * * * * *\", shell: '" + record + "'}\n");
  const long long started_ms = NowMs();
  for (const char* node : {"node-a", "node-b", "node-c"}) cluster.StartReplica(node);
  std::this_thread::sleep_for(16s);
  const long long stopped_ms = NowMs();
  StopAll(cluster);
  INFO("folder " << cluster.dir());

  // What `tickd next` says: (job, T) → due instant (ms). Judged: ticks from 3 s after
  // the start (every replica is up) whose due instant is 2 s before the stop.
  std::map<std::pair<std::string, long long>, long long> due_of;
  const std::string from = TickText(started_ms / 1000);
  for (const std::string job : {"spread-a", "spread-b", "spread-c", "hashed"}) {
    auto [status, output] = RunCommand(
        {TICKD_BINARY, "next", "-c", file.string(), "--job", job, "--from", from, "-n", "40"});
    INFO("tickd next --job " << job << ":\n" << output);
    REQUIRE(status == 0);
    std::istringstream in(output);
    int jittered = 0;
    for (std::string line; std::getline(in, line);) {
      const std::size_t sep = line.find(" tick=");
      const long long tick_ms = UnixMs(sep == std::string::npos ? line : line.substr(sep + 6));
      const long long due_ms = UnixMs(line.substr(0, sep));
      CHECK(due_ms >= tick_ms);
      jittered += due_ms > tick_ms ? 1 : 0;
      if (tick_ms >= started_ms + 3'000 && due_ms <= stopped_ms - 2'000) {
        due_of[{job, tick_ms / 1000}] = due_ms;
      }
    }
    CHECK((std::string(job) == "hashed" ? jittered == 0 : jittered > 0));
  }
  // 11 s judged: about 2 ticks of spread-a and spread-c, 3 of spread-b, 5 of hashed.
  REQUIRE(due_of.size() >= 10);

  // Runs: exactly one per judged tick, started at its due instant; none off the schedule.
  std::map<std::pair<std::string, long long>, std::vector<double>> starts;
  for (const std::string& line : ReadLines(cluster.dir() / "spread-runs.txt")) {
    std::istringstream in(line);
    std::string event, job, node;
    long long tick = 0;
    double at = 0;
    if (in >> event >> job >> tick >> node >> at) starts[{job, tick}].push_back(at);
  }
  constexpr long long kSlackMs = 1'500;  // a loaded machine: claim + spawn + date
  for (const auto& [key, at] : starts) {
    // Every tick that ran is on the schedule `tickd next` prints (judged or not).
    INFO(key.first << " tick " << key.second);
    auto [status, output] =
        RunCommand({TICKD_BINARY, "next", "-c", file.string(), "--job", key.first, "--from",
                    TickText(key.second - 1), "-n", "1"});
    REQUIRE(status == 0);
    const std::size_t sep = output.find(" tick=");
    const std::string tick_text = sep == std::string::npos ? output : output.substr(sep + 6);
    CHECK(UnixMs(tick_text.substr(0, tick_text.find('\n'))) == key.second * 1000);
  }
  for (const auto& [key, due_ms] : due_of) {
    INFO(key.first << " tick " << TickText(key.second) << " due " << due_ms);
    auto it = starts.find(key);
    REQUIRE(it != starts.end());
    REQUIRE(it->second.size() == 1);
    const long long at_ms = static_cast<long long>(it->second[0] * 1000);
    CHECK(at_ms >= due_ms - 1);  // `date` has more digits than the due instant
    CHECK(at_ms <= due_ms + kSlackMs);
  }

  // Every replica claimed each judged tick lock.claim_lead (default 200 ms) before its due
  // instant, never sooner (its run started at the due instant, above), and agrees on
  // the winner.
  constexpr long long kClaimLeadMs = 200;
  std::map<std::pair<std::string, long long>, std::vector<LogLine>> tick_lines;
  for (const LogLine& l : cluster.AllLines()) {
    if (l.event != "tick") continue;
    tick_lines[{l.Get("job"), UnixMs(l.Get("tick")) / 1000}].push_back(l);
  }
  for (const auto& [key, due_ms] : due_of) {
    INFO(key.first << " tick " << TickText(key.second) << " due " << due_ms);
    const auto& lines = tick_lines[key];
    REQUIRE(lines.size() == 3);
    int won = 0;
    std::string winner;
    for (const LogLine& l : lines) {
      INFO(l.raw);
      CHECK(UnixMs(l.ts) >= due_ms - kClaimLeadMs);  // never claimed before its lead
      CHECK(UnixMs(l.ts) <= due_ms + kSlackMs);
      if (l.Get("outcome") == "won") {
        ++won;
        winner = l.Get("node");
      }
    }
    CHECK(won == 1);
    for (const LogLine& l : lines) {
      if (l.Get("outcome") != "won") {
        CHECK(l.Get("outcome") == "lost");
        CHECK(l.Get("winner") == winner);
      }
    }
  }
}

}  // namespace tickd::e2e
