// Notifications (app/notifier.h): the queue, retries and backoff in simulated time
// with a fake sender; the real HTTP and shell senders against a loopback server and
// /bin/sh; who sends a miss (ClaimMissNotice) on the memory and SQLite stores; and
// three simulated replicas that each see a tick missed and send it once in all.
#include "app/notifier.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <set>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "lock/none/none_backend.h"
#include "lock/sqlite/sqlite_backend.h"
#include "tests/app/sim.h"
#include "tests/support/loopback_http.h"

namespace tickd::app::testing {
namespace {

using namespace std::chrono_literals;
using tickd::testing::LoopbackHttp;

// Records each try; fails the first `failures` of them.
struct FakeSender {
  std::mutex mu;
  std::vector<std::pair<std::string, SteadyTime>> tries;  // job@tick, when
  std::vector<NotifyEvent> events;                         // what each try was told
  int failures = 0;
  Clock* clock = nullptr;
  Gate* hold = nullptr;  // when set, each try waits on it (or is cancelled)

  NotifySender Fn() {
    return [this](const config::Notifier&, const NotifyEvent& e, CancelToken& cancel,
                  std::string* error) {
      if (hold != nullptr) {
        cancel.OnCancel([this] { hold->Open(); });
        hold->Wait();
        cancel.OnCancel({});
        if (cancel.cancelled()) {
          *error = "cancelled";
          return false;
        }
      }
      std::lock_guard lock(mu);
      tries.emplace_back(e.job + "@" + std::to_string(e.tick_unix), clock->Steady());
      events.push_back(e);
      if (failures > 0) {
        --failures;
        *error = "endpoint down";
        return false;
      }
      return true;
    };
  }
  std::size_t count() {
    std::lock_guard lock(mu);
    return tries.size();
  }
};

struct Counted : Metrics {
  std::mutex mu;
  std::map<std::string, int> by;  // "job event result"
  void Notification(std::string_view job, std::string_view event,
                    std::string_view result) override {
    std::lock_guard lock(mu);
    ++by[std::string(job) + " " + std::string(event) + " " + std::string(result)];
  }
  int Get(const std::string& key) {
    std::lock_guard lock(mu);
    return by[key];
  }
};

// One replica's notifier, as the single-notifier cases want it: a Sim at kT0, a
// FakeSender on its clock, counted metrics, and backoffs that never wait for real. A
// case adjusts `sender` and `options`, then Start()s the notifier.
struct OneNotifier {
  Sim sim{WallAt(kT0)};
  Gate hold;  // for sender.hold
  FakeSender sender;
  Counted metrics;
  NotifierOptions options;
  std::unique_ptr<Notifier> started;  // destroyed first

  OneNotifier() {
    sender.clock = &sim.clock;
    options.max_real_wait = 1ms;
  }
  Notifier& Start() {
    started = std::make_unique<Notifier>(sim.clock, sim.log, &metrics, "node-a", options,
                                         sender.Fn());
    return *started;
  }
};

config::Job JobWith(const std::string& name) {
  config::Job job;
  job.name = name;
  job.shell = "true";
  config::Notifier target;
  target.url = "http://127.0.0.1:9/";
  target.attempts = 3;
  job.on_failure = target;
  return job;
}

NotifyEvent RunEvent(const std::string& job, std::int64_t tick, const std::string& outcome) {
  NotifyEvent e;
  e.job = job;
  e.tick_unix = tick;
  e.node = "node-a";
  e.fence = 7;
  e.outcome = outcome;
  return e;
}

TEST_CASE_METHOD(OneNotifier,
                 "a failed notification is retried 1 s, then 2 s later; then it is sent",
                 "[notify]") {
  sender.failures = 2;
  Notifier& notifier = Start();
  const config::Job job = JobWith("j");
  const SteadyTime t0 = sim.clock.Steady();
  notifier.RunEnded(job, RunEvent("j", kT0, "failed"));
  notifier.RunEnded(job, RunEvent("j", kT0 + 60, "done"));  // no on_success: nothing
  // Each backoff counts from when the failed try returned: the clock moves only once the
  // retry waits in the queue (a loaded machine returns late).
  REQUIRE(Eventually([&] { return notifier.WaitingRetries() == 1; }));
  std::this_thread::sleep_for(20ms);
  CHECK(sender.count() == 1);  // the backoff waits for the (fake) clock
  sim.clock.Advance(1'000ms);
  REQUIRE(Eventually([&] { return sender.count() == 2; }));
  REQUIRE(Eventually([&] { return notifier.WaitingRetries() == 1; }));
  sim.clock.Advance(1'000ms);
  std::this_thread::sleep_for(20ms);
  CHECK(sender.count() == 2);
  sim.clock.Advance(1'000ms);
  REQUIRE(Eventually([&] { return metrics.Get("j failure sent") == 1; }));
  REQUIRE(sender.count() == 3);
  CHECK(sender.tries[1].second - t0 == 1'000ms);
  CHECK(sender.tries[2].second - t0 == 3'000ms);
  CHECK(sim.Grep({"info notify job=j tick=2026-11-21T14:00:00Z node=node-a event=failure "
                  "target=http outcome=sent attempts=3"})
            .size() == 1);
}

TEST_CASE_METHOD(OneNotifier, "a dead endpoint costs one line and a metric after its last try",
                 "[notify]") {
  sender.failures = 100;
  Notifier& notifier = Start();
  notifier.RunEnded(JobWith("j"), RunEvent("j", kT0, "timeout"));
  for (int i = 0; i < 10 && metrics.Get("j failure failed") == 0; ++i) {
    std::this_thread::sleep_for(5ms);
    sim.clock.Advance(1'000ms);
  }
  REQUIRE(Eventually([&] { return metrics.Get("j failure failed") == 1; }));
  CHECK(sender.count() == 3);
  const auto lines = sim.Grep({"warn notify job=j", "outcome=failed attempts=3"});
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].find("error=\"endpoint down\"") != std::string::npos);
}

TEST_CASE_METHOD(OneNotifier,
                 "a full queue drops the newest notification with a line, never blocks",
                 "[notify]") {
  sender.hold = &hold;
  options.queue_limit = 2;
  Notifier& notifier = Start();
  const config::Job job = JobWith("j");
  notifier.RunEnded(job, RunEvent("j", kT0, "failed"));  // taken by the worker, held
  REQUIRE(Eventually([&] { return sim.Grep({"notify"}).empty(); }));
  std::this_thread::sleep_for(20ms);
  for (int i = 1; i <= 3; ++i) notifier.RunEnded(job, RunEvent("j", kT0 + 60 * i, "failed"));
  CHECK(metrics.Get("j failure dropped") == 1);
  CHECK(sim.Grep({"warn notify job=j tick=2026-11-21T14:03:00Z", "outcome=dropped",
                  "error=\"the queue is full\""})
            .size() == 1);
  // Shutdown: a short grace, then the try under way is cancelled and the rest dropped.
  std::thread grace_ends([this] {
    std::this_thread::sleep_for(20ms);
    sim.clock.Advance(100ms);
  });
  notifier.Shutdown(50ms);
  grace_ends.join();
  CHECK(metrics.Get("j failure dropped") == 4);
  CHECK(sim.Grep({"outcome=dropped", "shutting down"}).size() == 3);
}

TEST_CASE("the HTTP notifier POSTs the JSON with the job's headers", "[notify][http]") {
  LoopbackHttp endpoint;
  endpoint.Answer("/hook", 200);
  config::Notifier target;
  target.url = endpoint.Url("/hook");
  target.headers = {{"Authorization", "Bearer t"}};
  NotifyEvent e = RunEvent("report", kT0, "failed");
  e.event = "failure";
  e.exit_code = 3;
  e.duration = 1'500ms;
  e.attempts = 2;
  e.output = "one\ntwo";
  CancelToken cancel;
  std::string error;
  REQUIRE(SendNotification(target, e, cancel, &error));
  const auto requests = endpoint.Requests("/hook");
  REQUIRE(requests.size() == 1);
  CHECK(requests[0].method == "POST");
  const auto j = nlohmann::json::parse(requests[0].body);
  CHECK(j["event"] == "failure");
  CHECK(j["job"] == "report");
  CHECK(j["tick"] == "2026-11-21T14:00:00Z");
  CHECK(j["tick_unix"] == kT0);
  CHECK(j["node"] == "node-a");
  CHECK(j["fence"] == 7);
  CHECK(j["outcome"] == "failed");
  CHECK(j["exit"] == 3);
  CHECK(j["signal"].is_null());
  CHECK(j["duration_seconds"] == 1.5);
  CHECK(j["attempts"] == 2);
  CHECK(j["output"] == "one\ntwo");
  CHECK(requests[0].Header("Content-Type") == "application/json");
  CHECK(requests[0].Header("Authorization") == "Bearer t");

  LoopbackHttp broken;
  broken.Answer("/hook", 503);
  target.url = broken.Url("/hook");
  CHECK_FALSE(SendNotification(target, e, cancel, &error));
  CHECK(error == "HTTP status 503");
}

TEST_CASE("the shell notifier gets the JSON on stdin and TICKD_NOTIFY_* variables",
          "[notify]") {
  char dir_template[] = "/tmp/tickd-notify-XXXXXX";
  REQUIRE(mkdtemp(dir_template) != nullptr);
  const std::string dir = dir_template;
  config::Notifier target;
  target.shell = "cat > stdin.json && env | grep '^TICKD_' | sort > env.txt";
  NotifyEvent e = RunEvent("report", kT0, "timeout");
  e.event = "failure";
  e.workdir = dir;
  e.job_env = {{"REGION", "eu"}};
  e.duration = 250ms;
  CancelToken cancel;
  std::string error;
  REQUIRE(SendNotification(target, e, cancel, &error));
  std::ifstream json_file(dir + "/stdin.json");
  const auto j = nlohmann::json::parse(json_file);
  CHECK(j["outcome"] == "timeout");
  std::ifstream env_file(dir + "/env.txt");
  std::stringstream env;
  env << env_file.rdbuf();
  for (const char* line : {"TICKD_JOB=report\n", "TICKD_FENCE=7\n", "TICKD_NODE=node-a\n",
                           "TICKD_NOTIFY_EVENT=failure\n", "TICKD_NOTIFY_OUTCOME=timeout\n",
                           "TICKD_NOTIFY_DURATION=0.250\n", "TICKD_TICK=2026-11-21T14:00:00Z\n"}) {
    CHECK(env.str().find(line) != std::string::npos);
  }
  target.shell = "echo 'no route to pager' >&2; exit 4";
  CHECK_FALSE(SendNotification(target, e, cancel, &error));
  CHECK(error == "failed exit 4: no route to pager");
  std::filesystem::remove_all(dir);
}

TEST_CASE("a notification carries the last lines of the output, without stream tags", "[notify]") {
  jobs::OutputTail tail(24);
  bool truncated = true;
  tail.Add("stdout", "abc");
  CHECK(NotifyOutputText(tail, &truncated) == "abc");
  CHECK_FALSE(truncated);
  tail.Add("stderr", "defgh");
  tail.Add("stdout", "ijklmnop");
  CHECK(NotifyOutputText(tail, &truncated) == "defgh\nijklmnop");
  CHECK(truncated);
}

// Each replica's own view of one store: who sends the miss of one tick.
void OneSenderPerMiss(std::vector<lock::Backend*> replicas, Clock& clock) {
  config::Job job = JobWith("m");
  // Missed as the store said: exactly one of the replicas sends it.
  int senders = 0;
  for (std::size_t i = 0; i < replicas.size(); ++i) {
    auto mine = ClaimMissNotice(*replicas[i], job, "h", kT0, "node-" + std::to_string(i),
                                clock.Wall(), true);
    REQUIRE(mine);
    senders += *mine ? 1 : 0;
  }
  CHECK(senders == 1);
  // Found missed by the replicas alone (they were late): the store is asked first. A
  // tick somebody claimed was not missed: nobody sends.
  lock::ClaimRequest run;
  run.job = "m";
  run.tick_unix = kT0 + 60;
  run.node = "runner";
  run.owner_token = "tok";
  run.starting_deadline = std::nullopt;
  run.node_wall = clock.Wall();
  auto won = replicas[0]->Claim(run);
  REQUIRE(won);
  REQUIRE(won->status == lock::ClaimStatus::kWon);
  for (std::size_t i = 0; i < replicas.size(); ++i) {
    auto mine = ClaimMissNotice(*replicas[i], job, "h", kT0 + 60, "n", clock.Wall(), false);
    REQUIRE(mine);
    CHECK_FALSE(*mine);
  }
  // A tick nobody claimed (T + 120): one sender.
  senders = 0;
  for (std::size_t i = 0; i < replicas.size(); ++i) {
    auto mine = ClaimMissNotice(*replicas[i], job, "h", kT0 + 120, "n", clock.Wall(), false);
    REQUIRE(mine);
    senders += *mine ? 1 : 0;
  }
  CHECK(senders == 1);
  // The reserved key is no job's: the job's own history has no notice in it.
  auto history = replicas[0]->History("m", 10);
  REQUIRE(history);
  for (const lock::TickHistory& t : *history) CHECK(t.tick_unix == kT0 + 60);
}

TEST_CASE("one replica sends a miss: memory store", "[notify][miss]") {
  FakeClock clock(WallAt(kT0 + 300));
  auto store = lock::NewMemoryBackend(clock);
  OneSenderPerMiss({store.get(), store.get(), store.get()}, clock);
}

TEST_CASE("backend none: each replica notifies the misses it sees", "[notify][miss]") {
  FakeClock clock(WallAt(kT0 + 300));
  auto none = lock::NewNoneBackend(clock);
  for (bool store_said : {true, false}) {
    auto mine = ClaimMissNotice(*none, JobWith("m"), "h", kT0, "n", clock.Wall(), store_said);
    REQUIRE(mine);
    CHECK(*mine);
  }
}

TEST_CASE("one replica sends a miss: SQLite, three connections", "[notify][miss]") {
  char dir_template[] = "/tmp/tickd-miss-XXXXXX";
  REQUIRE(mkdtemp(dir_template) != nullptr);
  const std::string dir = dir_template;
  RealClock clock;
  std::vector<std::unique_ptr<lock::Backend>> replicas;
  for (int i = 0; i < 3; ++i) {
    lock::SqliteOptions options;
    options.path = dir + "/tickd.db";
    auto opened = lock::NewSqliteBackend(options, clock);
    REQUIRE(opened);
    replicas.push_back(std::move(*opened));
  }
  OneSenderPerMiss({replicas[0].get(), replicas[1].get(), replicas[2].get()}, clock);
  replicas.clear();
  std::filesystem::remove_all(dir);
}

// Replicas a, b, c with a notifier each (all trying through `sender`), running one
// job "j" every minute whose notifier `which` of the job is set.
void StartNotifyingReplicas(Sim& sim, FakeSender& sender,
                            std::vector<std::unique_ptr<Notifier>>& notifiers,
                            std::optional<config::Notifier> config::Job::*which) {
  NotifierOptions options;
  options.max_real_wait = 1ms;
  for (const char* node : {"a", "b", "c"}) {
    notifiers.push_back(
        std::make_unique<Notifier>(sim.clock, sim.log, nullptr, node, options, sender.Fn()));
    Notifier* n = notifiers.back().get();
    sim.AddReplica(node,
                   {EveryJob("j", 60,
                             [which](config::Job& job) {
                               job.*which = config::Notifier{};
                               (job.*which)->url = "http://127.0.0.1:9/";
                             })},
                   [n](SchedulerOptions& o) { o.notifier = n; });
  }
}

TEST_CASE("three replicas that wake late each see a tick missed; one notification each",
          "[notify][miss]") {
  std::vector<std::unique_ptr<Notifier>> notifiers;  // shut down before the Sim goes
  Sim sim(WallAt(kT0, -30'000));
  FakeSender sender;
  sender.clock = &sim.clock;
  StartNotifyingReplicas(sim, sender, notifiers, &config::Job::on_miss);
  sim.Step(seconds(30));          // 14:00 won by one
  sim.Step(seconds(4 * 60 + 5));  // all asleep until 14:04:05
  sim.WaitQuiet();
  CHECK(sim.Grep({"outcome=missed"}).size() == 9);  // 14:01, 14:02, 14:03 on each
  REQUIRE(Eventually([&] { return sender.count() == 3; }));
  std::this_thread::sleep_for(50ms);
  CHECK(sender.count() == 3);
  std::set<std::string> sent;
  for (const auto& t : sender.tries) sent.insert(t.first);
  CHECK(sent == std::set<std::string>{"j@" + std::to_string(kT0 + 60),
                                      "j@" + std::to_string(kT0 + 120),
                                      "j@" + std::to_string(kT0 + 180)});
  for (auto& n : notifiers) n->Shutdown(0ms);
}

TEST_CASE("three replicas, a failing job: the winner of each tick notifies it, once",
          "[notify]") {
  std::vector<std::unique_ptr<Notifier>> notifiers;  // shut down before the Sim goes
  Sim sim(WallAt(kT0, -30'000));
  sim.runner.plan = [](const jobs::ProcessSpec&) { return std::optional<int>(3); };
  FakeSender sender;
  sender.clock = &sim.clock;
  StartNotifyingReplicas(sim, sender, notifiers, &config::Job::on_failure);
  sim.Step(seconds(30));
  for (int i = 0; i < 4; ++i) sim.Step(seconds(60));
  sim.WaitQuiet();
  REQUIRE(Eventually([&] { return sender.count() == 5; }));  // 14:00 … 14:04
  std::this_thread::sleep_for(50ms);
  REQUIRE(sender.count() == 5);
  std::set<std::int64_t> ticks;
  for (const NotifyEvent& e : sender.events) {
    ticks.insert(e.tick_unix);
    CHECK(e.event == "failure");
    CHECK(e.outcome == "failed");
    CHECK(e.exit_code == std::optional<int>(3));
    CHECK(e.output == "hello from " + e.node);  // the winner's own output
    const auto won = sim.Grep({"tick job=j tick=" + FormatTick(e.tick_unix), "node=" + e.node,
                               "outcome=won fence=" + std::to_string(e.fence)});
    CHECK(won.size() == 1);
  }
  CHECK(ticks.size() == 5);
  for (auto& n : notifiers) n->Shutdown(0ms);
}

}  // namespace
}  // namespace tickd::app::testing
