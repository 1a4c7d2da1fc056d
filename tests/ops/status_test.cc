// The ledger view of `tickd status` / /api/status over the memory and SQLite
// backends, with ledger data written through the Backend API as two replicas would.
#include "app/status.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "app/metrics.h"
#include "app/status_skew.h"
#include "lock/memory/memory_backend.h"
#include "lock/sqlite/sqlite_backend.h"

namespace tickd::app {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr std::int64_t kT = 1'795'000'000;  // a tick, unix seconds
// The first `@every 60s` tick (whole minutes since the epoch) after kT + 90 s.
constexpr std::int64_t kNext = ((kT + 90) / 60 + 1) * 60;

config::Job MakeJob(const std::string& name) {
  config::Job job;
  job.name = name;
  job.schedule_text = "@every 60s";
  job.shell = "true";
  return job;
}

lock::ClaimRequest Request(const std::string& job, std::int64_t tick, const std::string& node,
                           WallTime wall, const std::string& hash = "h1") {
  lock::ClaimRequest req;
  req.job = job;
  req.tick_unix = tick;
  req.node = node;
  req.owner_token = node + std::to_string(tick) + "0123456789abcdef0123456789abcdef";
  req.config_hash = hash;
  req.node_wall = wall;
  req.starting_deadline = std::nullopt;  // the clock is already past these ticks
  return req;
}

// Two replicas race for tick T: `a` (tries 5 ms after T) wins and finishes with exit 3
// after 1.5 s; `b` tries 40 ms after T and loses.
void RaceOneTick(lock::Backend& a, lock::Backend& b, std::int64_t tick,
                 const std::string& b_hash = "h1") {
  const WallTime t{seconds(tick)};
  auto ra = Request("cleanup", tick, "node-a", t + milliseconds(5));
  auto won = a.Claim(ra);
  REQUIRE(won);
  REQUIRE(won->status == lock::ClaimStatus::kWon);
  REQUIRE(a.Record({"cleanup", tick, "node-a", "won", ra.node_wall, "h1", won->fence}));
  auto rb = Request("cleanup", tick, "node-b", t + milliseconds(40), b_hash);
  auto lost = b.Claim(rb);
  REQUIRE(lost);
  REQUIRE(lost->status == lock::ClaimStatus::kLost);
  REQUIRE(b.Record({"cleanup", tick, "node-b", "lost", rb.node_wall, b_hash, 0}));
  lock::HeldClaim held{"cleanup", tick, ra.owner_token, won->fence, ra.lease};
  REQUIRE(a.Complete(held, {"failed", 3, milliseconds(1'500)}));
}

void CheckReport(lock::Backend& a, lock::Backend& b, const FakeClock& clock) {
  RaceOneTick(a, b, kT);
  RaceOneTick(a, b, kT + 60, "h2");
  auto report = CollectStatus({MakeJob("cleanup"), MakeJob("other")}, a, clock.Wall(), "", 10);
  REQUIRE(report);
  REQUIRE(report->jobs.size() == 2);
  const JobStatus& js = report->jobs[0];
  CHECK(js.name == "cleanup");
  CHECK(js.schedule == "@every 60s");
  REQUIRE(js.next_tick);
  CHECK(*js.next_tick == kNext);  // the clock is at T+90s
  REQUIRE(js.ticks.size() == 2);
  const lock::TickHistory& newest = js.ticks[0];
  CHECK(newest.tick_unix == kT + 60);
  CHECK(newest.winner == "node-a");
  CHECK(newest.run_outcome == "failed");
  CHECK(newest.exit_code == 3);
  CHECK(newest.duration == milliseconds(1'500));
  CHECK(Losers(newest) == std::vector<std::string>{"node-b"});
  REQUIRE(TickSkew(newest));
  CHECK(*TickSkew(newest) == milliseconds(35));
  CHECK(ConfigMismatch(newest));
  CHECK_FALSE(ConfigMismatch(js.ticks[1]));
  CHECK(report->jobs[1].ticks.empty());

  const std::string text = FormatStatusText(*report, false);
  CHECK(text.find("\033[") == std::string::npos);
  CHECK(text.find("cleanup  schedule=\"@every 60s\"  zone=UTC") != std::string::npos);
  CHECK(text.find("node-a +0.005s won") != std::string::npos);
  CHECK(text.find("MISMATCH") != std::string::npos);
  CHECK(text.find("no ticks recorded") != std::string::npos);
  // Aligned: the WINNER header starts where each row's winner does.
  const std::size_t header = text.find("TICK");
  const std::size_t row = text.find(FormatTick(kT + 60));
  REQUIRE(header != std::string::npos);
  REQUIRE(row != std::string::npos);
  const std::size_t header_col = text.find("WINNER", header) - header;
  const std::size_t row_col = text.find("node-a", row) - row;
  CHECK(header_col == row_col);
  CHECK(FormatStatusText(*report, true).find("\033[31mfailed") != std::string::npos);

  auto json = nlohmann::json::parse(FormatStatusJson(*report));
  CHECK(json["backend"] == std::string(a.name()));
  const auto& tick = json["jobs"][0]["ticks"][0];
  CHECK(tick["winner"] == "node-a");
  CHECK(tick["exit_code"] == 3);
  CHECK(tick["outcome"] == "failed");
  CHECK(tick["losers"] == nlohmann::json::array({"node-b"}));
  CHECK(tick["skew_seconds"].get<double>() == Approx(0.035));
  CHECK(tick["config_mismatch"] == true);
  CHECK(tick["observations"].size() == 2);
  CHECK(json["jobs"][0]["next_tick"] == FormatTick(kNext));

  auto only = CollectStatus({MakeJob("cleanup")}, a, clock.Wall(), "cleanup", 1);
  REQUIRE(only);
  CHECK(only->jobs[0].ticks.size() == 1);
  auto unknown = CollectStatus({MakeJob("cleanup")}, a, clock.Wall(), "nope", 1);
  REQUIRE_FALSE(unknown);
  CHECK(unknown.error().context == "job");
}

TEST_CASE("status over the memory backend") {
  FakeClock clock{WallTime(seconds(kT + 90))};
  std::shared_ptr<lock::Backend> shared = lock::NewMemoryBackend(clock);
  auto a = lock::NewSharedBackendHandle(shared);
  auto b = lock::NewSharedBackendHandle(shared);
  CheckReport(*a, *b, clock);
}

TEST_CASE("colours on a terminal unless NO_COLOR is set and not empty") {
  CHECK(UseColor(true, nullptr));
  CHECK(UseColor(true, ""));  // no-color.org: an empty value does not count
  CHECK_FALSE(UseColor(true, "1"));
  CHECK_FALSE(UseColor(false, nullptr));
}

TEST_CASE("a pause's reason stays on its job's line, control characters quoted") {
  StatusReport report;
  JobStatus js;
  js.name = "cleanup";
  js.schedule = "@every 60s";
  js.timezone = "UTC";
  js.paused = lock::Pause{"cleanup", std::nullopt, WallTime(seconds(kT)), "ops",
                          "incident 42\n\033[2Jcleared"};
  report.jobs.push_back(js);
  const std::string text = FormatStatusText(report, false);
  CHECK(text.find("PAUSED by ops: \"incident 42\\n\\u001b[2Jcleared\"\n") != std::string::npos);
  CHECK(text.find('\033') == std::string::npos);
  js.paused->reason = "incident 42";
  report.jobs = {js};
  CHECK(FormatStatusText(report, false).find("PAUSED by ops: incident 42\n") != std::string::npos);
  // Bytes that are not UTF-8 (a reason stored by an older tickd) do not fail the JSON.
  js.paused->reason = "bad \xff";
  report.jobs = {js};
  CHECK(FormatStatusJson(report).find("\"reason\": \"bad \xEF\xBF\xBD\"") != std::string::npos);
}

TEST_CASE("status --runs shows each run with what it printed, newest first") {
  FakeClock clock{WallTime(seconds(kT + 300))};
  std::shared_ptr<lock::Backend> shared = lock::NewMemoryBackend(clock);
  auto a = lock::NewSharedBackendHandle(shared);
  auto b = lock::NewSharedBackendHandle(shared);
  RaceOneTick(*a, *b, kT);  // no output
  // kT + 60: won, printed on both streams, some of it cut.
  auto req = Request("cleanup", kT + 60, "node-b", WallTime(seconds(kT + 60)));
  auto won = b->Claim(req);
  REQUIRE(won);
  REQUIRE(won->status == lock::ClaimStatus::kWon);
  lock::Completion printed{"done", 0, milliseconds(250)};
  printed.output = "! 12 earlier bytes not kept\no <b>hello</b>\ne oops\no \033[2J\ttab\x7f\n";
  REQUIRE(*b->Complete({"cleanup", kT + 60, req.owner_token, won->fence, req.lease}, printed) ==
          lock::CompleteStatus::kCompleted);
  // kT + 120: nobody won (missed): not a run.
  REQUIRE(a->Record({"cleanup", kT + 120, "node-a", "missed", clock.Wall(), "h1", 0}));

  auto report = CollectRuns({MakeJob("cleanup")}, *a, clock.Wall(), "cleanup", 5);
  REQUIRE(report);
  REQUIRE(report->runs.size() == 2);
  CHECK(report->runs[0].tick_unix == kT + 60);
  CHECK(report->runs[0].output == printed.output);
  CHECK(report->runs[1].output.empty());
  const std::string text = FormatRunsText(*report, false);
  INFO(text);
  CHECK(text.find("cleanup  " + FormatTick(kT + 60) + "  winner=node-b  fence=" +
                  std::to_string(won->fence) + "  outcome=done  exit=0  duration=0.250s\n"
                  "  ...     [12 earlier bytes not kept]\n"
                  "  stdout  <b>hello</b>\n"
                  "  stderr  oops\n"
                  // An escape sequence reaches no terminal; a tab stays.
                  "  stdout  \\x1b[2J\ttab\\x7f\n\n") == 0);
  CHECK(text.find("outcome=failed  exit=3  duration=1.500s\n  (no output kept)\n") !=
        std::string::npos);
  CHECK(FormatRunsText(*report, true).find("\033[31mstderr\033[0m  oops") != std::string::npos);

  auto json = nlohmann::json::parse(FormatRunsJson(*report));
  CHECK(json["job"] == "cleanup");
  REQUIRE(json["runs"].size() == 2);
  const auto& run = json["runs"][0];
  CHECK(run["winner"] == "node-b");
  CHECK(run["tick_unix"] == kT + 60);
  CHECK(run["exit_code"] == 0);
  CHECK(run["output"] == nlohmann::json::parse(
                             R"([{"stream":"tickd","line":"12 earlier bytes not kept"},
                                 {"stream":"stdout","line":"<b>hello</b>"},
                                 {"stream":"stderr","line":"oops"},
                                 {"stream":"stdout","line":"\u001b[2J\ttab\u007f"}])"));
  CHECK(json["runs"][1]["output"].empty());

  auto limited = CollectRuns({MakeJob("cleanup")}, *a, clock.Wall(), "cleanup", 1);
  REQUIRE(limited);
  CHECK(limited->runs.size() == 1);
  auto unknown = CollectRuns({MakeJob("cleanup")}, *a, clock.Wall(), "nope", 5);
  REQUIRE_FALSE(unknown);
  CHECK(unknown.error().context == "job");
  auto empty = CollectRuns({MakeJob("other")}, *a, clock.Wall(), "other", 5);
  REQUIRE(empty);
  CHECK(FormatRunsText(*empty, false) == "other: no runs recorded\n");
}

TEST_CASE("status shows when the next tick of a jittered job is due") {
  FakeClock clock{WallTime(seconds(kT + 90))};
  auto store = lock::NewMemoryBackend(clock);
  config::Job job = MakeJob("jittered");
  job.jitter = milliseconds(20'000);
  auto report = CollectStatus({job, MakeJob("plain")}, *store, clock.Wall(), "", 1);
  REQUIRE(report);
  const JobStatus& js = report->jobs[0];
  REQUIRE(js.next_tick);
  REQUIRE(js.next_due_ms);
  const std::int64_t offset =
      cron::JitterOffset("jittered", cron::Instant(seconds(kNext)), job.jitter).count();
  CHECK(*js.next_due_ms == kNext * 1000 + offset);
  CHECK_FALSE(report->jobs[1].next_due_ms);  // no jitter: due at T, nothing to add
  const std::string due = FormatTimestamp(WallTime(milliseconds(*js.next_due_ms)));
  CHECK(FormatStatusText(*report, false).find("  due=" + due + "\n") != std::string::npos);
  auto json = nlohmann::json::parse(FormatStatusJson(*report));
  CHECK(json["jobs"][0]["next_due"] == due);
  CHECK(json["jobs"][0]["next_due_unix_ms"] == *js.next_due_ms);
  CHECK(json["jobs"][1]["next_due"].is_null());
}

TEST_CASE("status shows each replica's lead: how long before T it claimed its newest instant") {
  FakeClock clock{WallTime(seconds(kT + 90))};
  auto store = lock::NewMemoryBackend(clock);
  config::Job jittered = MakeJob("jittered");
  jittered.jitter = milliseconds(20'000);
  const auto claim = [&](const std::string& job, std::int64_t tick, const std::string& node,
                         WallTime wall) {
    auto req = Request(job, tick, node, wall);
    auto r = store->Claim(req);
    REQUIRE(r);
    REQUIRE(store->Record({job, tick, node, std::string(lock::ClaimStatusName(r->status)),
                           wall, "h1", r->fence}));
  };
  const WallTime t{seconds(kT)};
  claim("plain", kT, "node-a", t - milliseconds(903));  // an adaptive lead
  claim("plain", kT, "node-b", t + milliseconds(40));   // late: no lead
  // A jittered job's claims come before T + its offset, not T: they say nothing.
  claim("jittered", kT + 60, "node-b", t + seconds(55));
  auto report = CollectStatus({MakeJob("plain"), jittered}, *store, clock.Wall(), "", 5);
  REQUIRE(report);
  REQUIRE(report->replicas.size() == 2);
  CHECK(report->replicas[0].lead == milliseconds(903));
  CHECK(report->replicas[1].lead == milliseconds(0));
  CHECK(report->replicas[1].last_tick == kT + 60);
  const std::string text = FormatStatusText(*report, false);
  CHECK(text.find(" lead=0.903s") != std::string::npos);
  CHECK(text.find(" lead=0.000s") != std::string::npos);
  auto json = nlohmann::json::parse(FormatStatusJson(*report));
  CHECK(json["replicas"][0]["lead_seconds"].get<double>() == Approx(0.903));
}

TEST_CASE("status over the sqlite backend") {
  FakeClock clock{WallTime(seconds(kT + 90))};
  const auto dir =
      std::filesystem::temp_directory_path() / ("tickd-status-test-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  lock::SqliteOptions options;
  options.path = (dir / "tickd.db").string();
  options.retention = milliseconds(0);
  auto a = lock::NewSqliteBackend(options, clock);
  auto b = lock::NewSqliteBackend(options, clock);
  REQUIRE(a);
  REQUIRE(b);
  CheckReport(**a, **b, clock);
  std::filesystem::remove_all(dir);
}

// A tick tried by node-a (the winner) and node-b, each sending `hash`.
lock::TickHistory TickWith(const std::string& a_hash, const std::string& b_hash) {
  lock::TickHistory t;
  t.job = "cleanup";
  t.tick_unix = kT;
  t.winner = "node-a";
  t.config_hash = a_hash;
  t.observations = {{"cleanup", kT, "node-a", "won", WallTime(seconds(kT)), a_hash, 1},
                    {"cleanup", kT, "node-b", "lost", WallTime(seconds(kT)), b_hash, 0}};
  return t;
}

TEST_CASE("config and tz database mismatches are told apart, old records never flagged") {
  // Same job file, different tz databases.
  const lock::TickHistory tz = TickWith("h1 tz=2025b", "h1 tz=2024a");
  CHECK_FALSE(ConfigMismatch(tz));
  CHECK(TzdataMismatch(tz));
  // Different job files, same tz database.
  const lock::TickHistory config = TickWith("h1 tz=2025b", "h2 tz=2025b");
  CHECK(ConfigMismatch(config));
  CHECK_FALSE(TzdataMismatch(config));
  // An older tickd (hash alone) beside a new one: same hash, no version to compare.
  const lock::TickHistory mixed = TickWith("h1 tz=2025b", "h1");
  CHECK_FALSE(ConfigMismatch(mixed));
  CHECK_FALSE(TzdataMismatch(mixed));
  CHECK(TzdataVersions(mixed) == std::vector<std::string>{"2025b"});
  // "unknown" (a replica that could not read its version) is not compared either.
  CHECK_FALSE(TzdataMismatch(TickWith("h1 tz=2025b", "h1 tz=unknown")));
}

TEST_CASE("metrics render the DESIGN §9 names in the Prometheus text format") {
  FakeClock clock{WallTime(seconds(kT))};
  int pings = 0;
  PrometheusMetrics m(clock, [&] { ++pings; });
  m.TickOutcome("cleanup", "won");
  m.TickOutcome("cleanup", "won");
  m.RunOutcome("cleanup", "done", Seconds(0.3));
  m.ClaimDuration("sqlite", Seconds(0.002));
  m.FireLateness("cleanup", Seconds(0.004));
  m.LeaseLost("cleanup");
  m.BackendError("sqlite");
  m.ConfigMismatch("cleanup");
  m.ClockSkew("node-b", Seconds(-2.5));
  m.StoreClockOffset("redis", Seconds(30.012));
  m.TickOutcome("cleanup", "early");
  m.TzdataVersion("2025b");
  m.TzdataMismatch(2);
  clock.Advance(milliseconds(700));
  CHECK(m.SinceLoopTurn() == milliseconds(700));
  m.LoopTurn();
  CHECK(pings == 1);
  CHECK(m.SinceLoopTurn() == milliseconds(0));
  const std::string text = m.Render();
  for (const char* line :
       {"tickd_ticks_total{job_name=\"cleanup\",outcome=\"won\"} 2\n",
        "tickd_runs_total{job_name=\"cleanup\",outcome=\"done\"} 1\n",
        "tickd_run_duration_seconds_bucket{job_name=\"cleanup\",le=\"0.25\"} 0\n",
        "tickd_run_duration_seconds_bucket{job_name=\"cleanup\",le=\"0.5\"} 1\n",
        "tickd_run_duration_seconds_count{job_name=\"cleanup\"} 1\n",
        "tickd_claim_duration_seconds_bucket{backend=\"sqlite\",le=\"+Inf\"} 1\n",
        "tickd_fire_lateness_seconds_sum{job_name=\"cleanup\"} 0.004\n",
        "tickd_lease_lost_total{job_name=\"cleanup\"} 1\n",
        "tickd_backend_errors_total{backend=\"sqlite\"} 1\n",
        "tickd_config_mismatch_total{job_name=\"cleanup\"} 1\n",
        "tickd_clock_skew_seconds{peer=\"node-b\"} -2.5\n",
        "tickd_store_clock_offset_seconds{backend=\"redis\"} 30.012\n",
        "# TYPE tickd_store_clock_offset_seconds gauge\n",
        "tickd_ticks_total{job_name=\"cleanup\",outcome=\"early\"} 1\n",
        "tickd_tzdata_info{version=\"2025b\"} 1\n", "tickd_tzdata_mismatch 2\n",
        "# TYPE tickd_tzdata_mismatch gauge\n", "# TYPE tickd_run_duration_seconds histogram\n",
        "# TYPE tickd_clock_skew_seconds gauge\n"}) {
    INFO(line);
    CHECK(text.find(line) != std::string::npos);
  }
}

// A skew watch's surroundings: a memory store on a fake clock, the lines it logs, its
// metrics. `options` names this replica "me".
struct SkewRig {
  FakeClock clock{WallTime(std::chrono::seconds(kT))};
  std::unique_ptr<lock::Backend> backend = lock::NewMemoryBackend(clock);
  std::vector<std::string> lines;
  Logger log{clock, LogFormat::kLogfmt, LogLevel::kInfo,
             [this](std::string_view line) { lines.emplace_back(line); }};
  PrometheusMetrics metrics{clock};
  SkewOptions options = [] {
    SkewOptions o;
    o.node = "me";
    return o;
  }();
};

TEST_CASE("the skew watch sees a peer whose clock runs ahead") {
  SkewRig rig;
  auto& [clock, backend, lines, log, metrics, options] = rig;
  SkewWatch watch(clock, *backend, log, metrics, options);
  // Something old exists before the first poll: it is only learned, not measured.
  REQUIRE(backend->Record({"job", kT - 60, "fast", "won", WallTime(seconds(kT - 60)), "h", 1}));
  watch.PollOnce();
  CHECK(metrics.Render().find("tickd_clock_skew_seconds{") == std::string::npos);
  // A peer 3 s ahead writes its observation of T+5 while our clock reads T+2.
  clock.Advance(milliseconds(2'000));
  REQUIRE(backend->Record({"job", kT + 5, "fast", "won", WallTime(seconds(kT + 5)), "h", 2}));
  clock.Advance(milliseconds(500));
  watch.PollOnce();
  CHECK(metrics.Render().find("tickd_clock_skew_seconds{peer=\"fast\"} 3.75") != std::string::npos);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].find("warn clock-skew node=me peer=fast skew=3.750s threshold=1.000s") !=
        std::string::npos);
  // A peer in step: no warning.
  clock.Advance(milliseconds(500));
  REQUIRE(backend->Record({"job", kT + 3, "steady", "lost", clock.Wall(), "h", 0}));
  clock.Advance(milliseconds(500));
  watch.PollOnce();
  CHECK(lines.size() == 1);
}

TEST_CASE("the skew watch takes late ledger writes for late writes, not for a clock behind") {
  SkewRig rig;
  auto& [clock, backend, lines, log, metrics, options] = rig;
  SkewWatch watch(clock, *backend, log, metrics, options);
  clock.Advance(milliseconds(1'000));
  watch.PollOnce();  // P1 = T+1
  // A busy instant: both replicas tried T at T (clocks right), and their observations
  // reach the ledger only at T+3.2, after a claim batch of thousands.
  clock.Advance(milliseconds(2'200));
  REQUIRE(backend->Record({"job", kT, "me", "won", WallTime(seconds(kT)), "h", 1}));
  REQUIRE(backend->Record({"job", kT, "peer", "lost", WallTime(seconds(kT)), "h", 0}));
  clock.Advance(milliseconds(300));
  watch.PollOnce();  // P2 = T+3.5: without our own delay, the peer would read 1–3.5 s behind
  CHECK(lines.empty());
  // The next busy instant: the peer's entry appears polls before ours (it got to the
  // job sooner); the delay ours took last time stands for it.
  clock.Advance(milliseconds(5'000));
  watch.PollOnce();  // T+8.5
  clock.Advance(milliseconds(2'700));
  REQUIRE(backend->Record({"job", kT + 10, "peer", "lost", WallTime(seconds(kT + 6)), "h", 0}));
  clock.Advance(milliseconds(300));
  watch.PollOnce();  // T+11.5
  CHECK(lines.empty());
  // Quiet again, a minute on: ours appears 100 ms after it tried, the peer's clock
  // really is 3 s behind.
  clock.Advance(milliseconds(61'000));
  watch.PollOnce();
  clock.Advance(milliseconds(1'600));
  REQUIRE(backend->Record({"job", kT + 80, "me", "won", clock.Wall(), "h", 2}));
  REQUIRE(backend->Record({"job", kT + 80, "peer", "lost", clock.Wall() - seconds(3), "h", 0}));
  clock.Advance(milliseconds(400));
  watch.PollOnce();
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].find("warn clock-skew node=me peer=peer skew=-") != std::string::npos);
}

TEST_CASE("before an entry of its own appeared, the skew watch judges no peer behind") {
  SkewRig rig;
  auto& [clock, backend, lines, log, metrics, options] = rig;
  SkewWatch watch(clock, *backend, log, metrics, options);
  clock.Advance(milliseconds(3'000));
  watch.PollOnce();  // T+3, just started
  // The first instant: the peer's entry, taken at T+1, appears at T+5.2 (a long batch).
  clock.Advance(milliseconds(2'200));
  REQUIRE(backend->Record({"job", kT + 2, "peer", "lost", WallTime(seconds(kT + 1)), "h", 0}));
  clock.Advance(milliseconds(300));
  watch.PollOnce();  // it reads 2–4.5 s behind; ours have not appeared: nothing said
  CHECK(lines.empty());
  CHECK(metrics.Render().find("tickd_clock_skew_seconds{peer=\"peer\"}") != std::string::npos);
}

TEST_CASE("the skew watch reads only the sampled jobs, and learns a job new to the sample") {
  SkewRig rig;
  auto& [clock, backend, lines, log, metrics, options] = rig;
  std::vector<std::string> sample = {"a"};
  options.jobs = [&sample] { return sample; };
  SkewWatch watch(clock, *backend, log, metrics, options);
  watch.PollOnce();
  // A peer 3 s ahead observes "b", which is not in the sample: not read, not measured.
  clock.Advance(milliseconds(2'000));
  REQUIRE(backend->Record({"b", kT + 5, "fast", "won", WallTime(seconds(kT + 5)), "h", 1}));
  clock.Advance(milliseconds(500));
  watch.PollOnce();
  CHECK(metrics.Render().find("tickd_clock_skew_seconds{") == std::string::npos);
  // "b" joins the sample long after: its observation is old news, learned only (measured,
  // it would read as a peer 25 s behind).
  clock.Advance(milliseconds(30'000));
  sample = {"b", "a"};
  watch.PollOnce();
  CHECK(metrics.Render().find("tickd_clock_skew_seconds{") == std::string::npos);
  CHECK(lines.empty());
  // Its next observation, written between two polls by the peer 3 s ahead, is measured.
  clock.Advance(milliseconds(2'000));
  REQUIRE(backend->Record(
      {"b", kT + 38, "fast", "won", WallTime(milliseconds((kT + 37) * 1000 + 500)), "h", 2}));
  clock.Advance(milliseconds(500));
  watch.PollOnce();
  CHECK(metrics.Render().find("tickd_clock_skew_seconds{peer=\"fast\"} 3.75") != std::string::npos);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].find("warn clock-skew node=me peer=fast") != std::string::npos);
}

}  // namespace
}  // namespace tickd::app
