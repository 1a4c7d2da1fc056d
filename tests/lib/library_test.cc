// The public API (include/tickd/) over a memory store and a FakeClock: schedulers in
// one process sharing a store, the outcomes of a function (returns, throws, ignores
// its stop token), try_lock, and the programming errors that throw.
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "lib/callable_runner.h"
#include "lib/store_impl.h"
#include "lock/memory/memory_backend.h"
#include "tests/app/sim.h"
#include "tickd/tickd.h"

namespace tickd {
namespace {

using app::testing::Eventually;
using app::testing::kT0;
using app::testing::TestBackend;
using app::testing::WallAt;
using std::chrono::milliseconds;
using std::chrono::seconds;

// Log lines, kept for the assertions.
class Lines {
 public:
  std::function<void(std::string_view)> Sink() {
    return [this](std::string_view line) {
      std::lock_guard lock(mu_);
      lines_.emplace_back(line);
    };
  }
  // The lines containing every one of `parts`.
  std::vector<std::string> With(std::initializer_list<std::string_view> parts) {
    std::lock_guard lock(mu_);
    std::vector<std::string> out;
    for (const std::string& l : lines_) {
      if (std::all_of(parts.begin(), parts.end(),
                      [&](std::string_view p) { return l.find(p) != std::string::npos; })) {
        out.push_back(l);
      }
    }
    return out;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> lines_;
};

// One memory store seen through a TestBackend, on a FakeClock at kT0 + 0.5 s.
struct World {
  FakeClock clock{WallAt(kT0, 500)};
  std::shared_ptr<lock::Backend> memory = lock::NewMemoryBackend(clock);
  std::shared_ptr<TestBackend> backend = std::make_shared<TestBackend>(memory);

  Store NewStore() {
    return lib::MakeStore(lock::NewSharedBackendHandle(backend), clock, milliseconds(1));
  }
  // Moves the clock to `until` in 50 ms steps, giving the threads real time.
  void RunUntil(WallTime until) {
    while (clock.Wall() < until) {
      clock.Advance(milliseconds(50));
      std::this_thread::sleep_for(milliseconds(2));
    }
  }
};

// The value of `series` (name and labels, as rendered) in Prometheus text; 0 when absent.
double MetricValue(const std::string& text, const std::string& series) {
  const std::size_t at = text.find("\n" + series + " ");
  return at == std::string::npos ? 0 : std::stod(text.substr(at + series.size() + 2));
}

SchedulerOptions Options(const std::string& node, Lines& lines) {
  SchedulerOptions o;
  o.node = node;
  o.log = lines.Sink();
  return o;
}

TEST_CASE("library: two schedulers on one store run each tick once, fences increase") {
  World w;
  Lines lines;
  std::mutex mu;
  std::map<std::int64_t, std::vector<std::pair<std::string, std::uint64_t>>> runs;
  auto record = [&](const RunContext& run) {
    std::lock_guard lock(mu);
    runs[run.tick.time_since_epoch().count()].emplace_back(run.node, run.fence);
  };
  {
    Scheduler a(w.NewStore(), Options("a", lines));
    Scheduler b(w.NewStore(), Options("b", lines));
    a.add("cleanup", "@every 1s", record);
    b.add("cleanup", "@every 1s", record);
    a.start();
    b.start();
    w.RunUntil(WallAt(kT0 + 10, 500));
    REQUIRE(Eventually([&] { return a.active_runs() == 0 && b.active_runs() == 0; }));
    a.stop();
    b.stop();
    // The daemon's metrics: between them, the two counted one win per tick run.
    const std::string won = "tickd_ticks_total{job_name=\"cleanup\",outcome=\"won\"}";
    std::lock_guard lock(mu);
    CHECK(MetricValue(a.metrics_text(), won) + MetricValue(b.metrics_text(), won) ==
          static_cast<double>(runs.size()));
  }
  std::lock_guard lock(mu);
  REQUIRE(runs.size() >= 9);
  // The daemon's ledger: each tick run has both schedulers' observations.
  auto history = w.memory->History("cleanup", 20);
  REQUIRE(history);
  for (const lock::TickHistory& h : *history) {
    if (!runs.contains(h.tick_unix)) continue;
    std::set<std::string> observed;
    for (const lock::Observation& o : h.observations) observed.insert(o.node);
    CHECK(observed == std::set<std::string>{"a", "b"});
  }
  // And its tick lines: the loser names the winner.
  CHECK(!lines.With({" tick ", "job=cleanup", "outcome=lost", "winner="}).empty());
  std::uint64_t last_fence = 0;
  for (const auto& [tick, who] : runs) {
    INFO("tick " << tick);
    REQUIRE(who.size() == 1);
    REQUIRE(who[0].second > last_fence);
    last_fence = who[0].second;
  }
  CHECK(!lines.With({" run ", "job=cleanup", "outcome=done"}).empty());
  CHECK(lines.With({"start", "library=true"}).size() == 2);
}

TEST_CASE("library: a function that throws is a failed run and its claim is completed") {
  World w;
  Lines lines;
  Scheduler s(w.NewStore(), Options("a", lines));
  s.add("boom", "@every 1s", [](const RunContext&) { throw std::runtime_error("no database"); });
  s.start();
  w.RunUntil(WallAt(kT0 + 2, 500));
  REQUIRE(Eventually([&] { return !w.backend->completions().empty(); }));
  s.stop();
  const auto completions = w.backend->completions();
  CHECK(completions[0].second.outcome == "failed");
  auto history = w.memory->History("boom", 10);
  REQUIRE(history);
  for (const lock::TickHistory& h : *history) CHECK(h.state == "done");
  CHECK(!lines.With({"run", "outcome=failed", "exception: no database"}).empty());
}

TEST_CASE("library: a function that ignores its stop token past the lease is reported") {
  World w;
  Lines lines;
  std::atomic<bool> release{false};
  std::atomic<int> calls{0};
  Scheduler s(w.NewStore(), Options("a", lines));
  JobOptions o;
  o.stop_grace = milliseconds(100);
  o.lease = seconds(3);
  s.add(
      "stubborn", "@every 1s",
      [&](const RunContext& run) {
        ++calls;
        while (!release) std::this_thread::sleep_for(milliseconds(1));
        CHECK(run.stop.stop_requested());
      },
      o);
  s.start();
  w.RunUntil(WallAt(kT0 + 1, 100));
  REQUIRE(Eventually([&] { return calls.load() == 1; }));
  w.backend->renew_lost = true;  // the next renewal finds the claim taken
  w.RunUntil(WallAt(kT0 + 3, 500));
  REQUIRE(Eventually([&] { return !w.backend->completions().empty(); }));
  CHECK(w.backend->completions()[0].second.outcome == "lease-lost");
  // The run line follows the complete, so it may come a moment later.
  CHECK(Eventually([&] {
    return !lines.With({"run", "outcome=lease-lost", "ignored its stop token"}).empty();
  }));
  release = true;
  s.stop();
}

TEST_CASE("library: stop() ends a run past its grace; the destructor waits for the function") {
  World w;
  Lines lines;
  std::atomic<bool> started{false};
  std::atomic<bool> returned{false};
  {
    Scheduler s(w.NewStore(), Options("a", lines));
    JobOptions o;
    o.stop_grace = milliseconds(50);
    s.add(
        "slow", "@every 1s",
        [&](const RunContext&) {
          started = true;
          std::this_thread::sleep_for(milliseconds(300));  // ignores its token
          returned = true;
        },
        o);
    s.start();
    w.RunUntil(WallAt(kT0 + 1, 100));
    REQUIRE(Eventually([&] { return started.load(); }));
    s.stop(milliseconds(0));
    CHECK(s.active_runs() == 0);  // the claim is completed without the function
    CHECK(!lines.With({" run ", "job=slow", "outcome=killed", "ignored its stop token"}).empty());
  }
  CHECK(returned);  // ~Scheduler waited for it
}

TEST_CASE("library: try_lock excludes, names the holder, and is free again at once") {
  World w;
  Store store = w.NewStore();
  std::uint64_t last_fence = 0;
  for (int i = 0; i < 5; ++i) {  // all within one second of the clock
    LockAttempt first = store.try_lock("orders", seconds(5), "a");
    INFO("acquisition " << i << " holder " << first.holder());
    REQUIRE(first.status() == LockAttempt::Status::kAcquired);
    CHECK(first.guard().fence() > last_fence);
    last_fence = first.guard().fence();
    LockAttempt second = store.try_lock("orders", seconds(5), "b");
    CHECK(second.status() == LockAttempt::Status::kHeld);
    CHECK(second.holder() == "a");
    first.guard().release();
    CHECK_FALSE(first.guard().held());
  }
  {
    LockGuard kept = std::move(store.try_lock("orders", seconds(5), "a").guard());
    CHECK(kept.held());
    CHECK(store.try_lock("orders", seconds(5), "b").status() == LockAttempt::Status::kHeld);
  }  // released by the destructor
  CHECK(store.try_lock("orders", seconds(5), "b").acquired());
}

TEST_CASE("library: a lock whose renewal is refused fires its lost token") {
  World w;
  Store store = w.NewStore();
  LockAttempt got = store.try_lock("orders", seconds(3), "a");
  REQUIRE(got.acquired());
  std::stop_token lost = got.guard().lost();
  CHECK_FALSE(lost.stop_requested());
  w.backend->renew_lost = true;
  w.RunUntil(w.clock.Wall() + seconds(2));
  REQUIRE(Eventually([&] { return lost.stop_requested(); }));
  CHECK_FALSE(got.guard().held());
}

TEST_CASE("library: a lock whose store stops answering fires lost() lease/5 before the lease's "
          "end, however long the renewal hangs") {
  World w;
  app::testing::Gate store_answers;
  Store store = w.NewStore();
  LockAttempt got = store.try_lock("orders", seconds(5), "a");
  REQUIRE(got.acquired());
  // Let the store answer before the guard goes (release waits for the renewal).
  struct OpenAtEnd {
    app::testing::Gate& gate;
    ~OpenAtEnd() { gate.Open(); }
  } open_at_end{store_answers};
  std::stop_token lost = got.guard().lost();
  w.backend->before_renew = [&] { store_answers.Wait(seconds(60)); };
  // Acquired at 0; renewal at 1.667 s hangs; valid_until 4.948 s; lost() at 3.948 s.
  const SteadyTime acquired = w.clock.Steady();
  const auto at = [&](milliseconds t) {
    w.clock.Advance(acquired + t - w.clock.Steady());
    std::this_thread::sleep_for(milliseconds(20));
  };
  at(milliseconds(1'700));
  REQUIRE(Eventually([&] { return w.backend->renewals == 1; }));
  at(milliseconds(3'900));
  CHECK_FALSE(lost.stop_requested());
  at(milliseconds(3'948));
  REQUIRE(Eventually([&] { return lost.stop_requested(); }));
  CHECK_FALSE(got.guard().held());
}

TEST_CASE("library: programming errors throw, the store's answers do not") {
  World w;
  Lines lines;
  Scheduler s(w.NewStore(), Options("a", lines));
  CHECK_THROWS_AS(s.add("Bad Name", "* * * * *", [](const RunContext&) {}), std::invalid_argument);
  CHECK_THROWS_WITH(s.add("x", "61 * * * *", [](const RunContext&) {}),
                    Catch::Contains("job x") && Catch::Contains("61"));
  JobOptions zoned;
  zoned.zone = "Mars/Olympus";
  CHECK_THROWS_AS(s.add(
                      "y", "* * * * *", [](const RunContext&) {}, zoned),
                  std::invalid_argument);
  s.add("ok", "* * * * *", [](const RunContext&) {});
  CHECK_THROWS_AS(s.add("ok", "* * * * *", [](const RunContext&) {}), std::invalid_argument);
  s.start();
  CHECK_THROWS_AS(s.start(), std::logic_error);
  CHECK_THROWS_AS(s.add("late", "* * * * *", [](const RunContext&) {}), std::logic_error);
  s.stop();

  for (const std::string& node :
       std::vector<std::string>{"shop 1", "shop=1", "shop\"1", std::string(129, 'n'), "shop\xff"}) {
    CHECK_THROWS_AS(Scheduler(w.NewStore(), Options(node, lines)), std::invalid_argument);
  }

  Store store = w.NewStore();
  CHECK_THROWS_AS(store.try_lock("Orders!", seconds(5)), std::invalid_argument);
  w.backend->claim_error = true;
  LockAttempt failed = store.try_lock("orders", seconds(5));
  CHECK(failed.status() == LockAttempt::Status::kFailed);
  CHECK_THROWS_AS(failed.guard(), std::logic_error);

  Expected<Store> bad = Store::open("nosuch://x");
  REQUIRE_FALSE(bad.has_value());
  CHECK(bad.error().message.find("nosuch") != std::string::npos);
  CHECK_THROWS_AS(bad.value(), std::logic_error);
}

TEST_CASE("library: with the real clock a function claimed ahead is prepared: called at its "
          "instant, never when dropped before it") {
  // The CallableRunner alone, on the real clocks (Store::open's engine uses them).
  lib::CallableRunner runner(/*prepare_ahead=*/true);
  std::atomic<int> calls{0};
  std::mutex mu;
  std::optional<std::chrono::sys_seconds> tick_seen;
  std::chrono::system_clock::time_point called_at;
  runner.Add("j", [&](const RunContext& ctx) {
    std::lock_guard lock(mu);
    tick_seen = ctx.tick;
    called_at = std::chrono::system_clock::now();
    ++calls;
  });
  config::Job job;
  job.name = "j";
  jobs::ProcessSpec spec;
  spec.env = {{"TICKD_TICK_UNIX", "1700000000"}, {"TICKD_FENCE", "4"}, {"TICKD_NODE", "n"},
              {"TICKD_ATTEMPT", "1"}};
  const auto now = std::chrono::system_clock::now();
  const WallTime start_at =
      std::chrono::time_point_cast<milliseconds>(now) + milliseconds(100);
  const SteadyTime far = std::chrono::time_point_cast<milliseconds>(
      std::chrono::steady_clock::now() + std::chrono::hours(1));
  {
    auto dropped = runner.Prepare(job, spec, nullptr, start_at + seconds(60), far);
    REQUIRE(dropped.has_value());
    CHECK((*dropped)->checks_start_bound());
  }
  runner.WaitForCalls();  // the call never made is not waited for
  CHECK(calls == 0);
  auto prepared = runner.Prepare(job, spec, nullptr, start_at, far);
  REQUIRE(prepared.has_value());
  auto exec = (*prepared)->Release();
  REQUIRE(exec.has_value());
  std::optional<jobs::RunResult> r;
  for (int i = 0; i < 1'000 && !r; ++i) r = (*exec)->WaitFor(milliseconds(20));
  REQUIRE(r.has_value());
  CHECK(r->outcome == jobs::RunOutcome::kDone);
  runner.WaitForCalls();
  CHECK(calls == 1);
  std::lock_guard lock(mu);
  CHECK(tick_seen == std::chrono::sys_seconds(seconds(1'700'000'000)));
  CHECK(called_at >= std::chrono::system_clock::time_point(start_at));
}

}  // namespace
}  // namespace tickd
