// Per-run supervision in simulated time: the lease watchdog, retries, the job's
// environment, and the scope guard that completes the claim on every path.
#include "app/run_supervisor.h"

#include <thread>

#include "app/log.h"
#include "tests/app/sim.h"

namespace tickd::app::testing {
namespace {

std::optional<int> Hold(const jobs::ProcessSpec&) { return std::nullopt; }

// Replica "a" claims job "j"'s 14:00 tick (lease 3 s) straight from the store.
lock::HeldClaim WinTheTick(Sim& sim) {
  lock::ClaimRequest req;
  req.job = "j";
  req.tick_unix = kT0;
  req.node = "a";
  req.owner_token = "token-a";
  req.lease = seconds(3);
  auto won = sim.backend.Claim(req);
  REQUIRE(won);
  REQUIRE(won->status == lock::ClaimStatus::kWon);
  return lock::HeldClaim{"j", kT0, "token-a", won->fence, seconds(3)};
}

// One replica "a" with one job "j" (every minute) whose 14:00 tick it has won.
struct OneRun {
  // `before` sets the Sim up before the replica starts; `metrics` (if any) is the
  // replica's.
  explicit OneRun(const std::function<void(config::Job&)>& edit = nullptr,
                  milliseconds lease = seconds(3),
                  const std::function<void(Sim&)>& before = nullptr,
                  Metrics* metrics = nullptr)
      : sim(WallAt(kT0, -1'000)) {
    sim.runner.plan = Hold;
    if (before) before(sim);
    sim.AddReplica("a", {EveryJob("j", 60, edit)}, [lease, metrics](SchedulerOptions& o) {
      o.lease = lease;
      o.metrics = metrics;
    });
    sim.Step(seconds(1), false);
    REQUIRE(Eventually([&] { return sim.runner.starts() == 1; }));
  }
  Scheduler& replica() { return sim.replica(0); }
  bool Ended() { return replica().active_runs() == 0; }
  lock::Completion OnlyCompletion() {
    auto c = sim.backend.completions();
    REQUIRE(c.size() == 1);
    return c[0].second;
  }
  Sim sim;
};

TEST_CASE("the completion carries the end of what the run printed; the log its first lines") {
  Sim sim(WallAt(kT0, -1'000));
  sim.runner.print = [](const jobs::OutputSink& sink) {
    for (int i = 0; i < 1'500; ++i) {
      sink(i % 10 == 0 ? "stderr" : "stdout", "line " + std::to_string(i));
    }
  };
  sim.AddReplica("a", {EveryJob("j", 60)}, [](SchedulerOptions& o) {
    o.history.output_bytes = 1'024;
    o.history.runs = 7;
  });
  sim.Step(seconds(1), false);
  // The supervisor completes the claim first, then logs the run line.
  REQUIRE(Eventually([&] {
    return sim.backend.completions().size() == 1 && !sim.Grep({" run job=j"}).empty();
  }));
  // Every line reaches the supervisor; the log's cap is its own.
  CHECK(sim.runner.specs().at(0).max_output_lines == SIZE_MAX);
  const lock::Completion c = sim.backend.completions()[0].second;
  CHECK(c.keep_outputs == 7);
  CHECK(c.output.size() <= 1'024 + 48);
  CHECK(c.output.starts_with("! "));
  CHECK(c.output.find(" earlier bytes not kept\n") != std::string::npos);
  CHECK(c.output.ends_with("e line 1490\no line 1491\no line 1492\no line 1493\no line 1494\n"
                           "o line 1495\no line 1496\no line 1497\no line 1498\no line 1499\n"));
  CHECK(sim.Grep({" output job=j", "line=\"hello from a\""}).size() == 1);
  CHECK(sim.Grep({" output job=j", "line=\"line 998\""}).size() == 1);
  CHECK(sim.Grep({" output job=j", "line=\"line 999\""}).empty());  // the 1,001st line
  CHECK(sim.Grep({" run job=j", "dropped_lines=501"}).size() == 1);
}

TEST_CASE("lease validity is lease - 1% - 2ms") {
  CHECK(LeaseValidity(seconds(15)) == milliseconds(14'848));
  CHECK(LeaseValidity(seconds(3)) == milliseconds(2'968));
}

TEST_CASE("the watchdog renews every lease/3 and the run outlives its first lease") {
  OneRun r;
  for (int i = 1; i <= 9; ++i) {
    r.sim.clock.Advance(seconds(1));
    REQUIRE(Eventually([&] { return r.sim.backend.renewals >= i; }));
  }
  CHECK_FALSE(r.sim.runner.run(0)->was_terminated());
  r.sim.runner.run(0)->FinishWithExit(0);
  REQUIRE(Eventually([&] { return r.Ended(); }));
  CHECK(r.OnlyCompletion().outcome == "done");
  CHECK(r.sim.Grep({" lease "}).empty());
}

TEST_CASE("a run whose process left others in its group, ended, says leftovers=ended") {
  OneRun r;
  jobs::RunResult result;
  result.outcome = jobs::RunOutcome::kDone;
  result.exit_code = 0;
  result.leftovers_ended = true;
  r.sim.runner.run(0)->Finish(result);
  REQUIRE(Eventually([&] { return r.Ended(); }));
  CHECK(r.OnlyCompletion().outcome == "done");
  CHECK(r.sim.Grep({" info run job=j", "outcome=done", "leftovers=ended"}).size() == 1);
}

TEST_CASE("a renewal answered lost terminates the run: outcome lease-lost") {
  OneRun r;
  r.sim.backend.renew_lost = true;
  r.sim.clock.Advance(seconds(1));
  REQUIRE(Eventually([&] { return r.Ended(); }));
  CHECK(r.sim.runner.run(0)->terminated == jobs::RunOutcome::kLeaseLost);
  CHECK(r.sim.Grep({" warn lease job=j", "outcome=lost action=terminate"}).size() == 1);
  CHECK(r.sim.Grep({" warn run job=j", "outcome=lease-lost", "fence=1"}).size() == 1);
  CHECK(r.OnlyCompletion().outcome == "lease-lost");
}

// Steps the fake clock to `at` (ms of Steady() since the Sim's start), then gives the
// supervisor `look` of real time to act on it.
void StepTo(Sim& sim, std::int64_t at, milliseconds look = milliseconds(30)) {
  const SteadyTime target = SteadyTime(milliseconds(1'000'000 + at));
  sim.clock.Advance(target - sim.clock.Steady());
  std::this_thread::sleep_for(look);
}

TEST_CASE("renewals that fail until the validity runs out lose the lease") {
  OneRun r;
  r.sim.backend.renew_error = true;
  // Claimed at 1 s, lease 3 s: renewals fail from 2 s on, each tried again lease/15
  // later; the run is stopped at valid_until − stop_grace (lease/5): 1 + 2.968 − 0.6 s.
  StepTo(r.sim, 2'000);
  REQUIRE(Eventually([&] { return r.sim.backend.renewals >= 1; }));
  StepTo(r.sim, 2'300);
  REQUIRE(Eventually([&] { return r.sim.backend.renewals >= 2; }));
  StepTo(r.sim, 3'300);
  CHECK_FALSE(r.sim.runner.run(0)->was_terminated());
  StepTo(r.sim, 3'400, milliseconds(0));
  REQUIRE(Eventually([&] { return r.Ended(); }));
  CHECK(r.sim.Grep({" warn renew ", "outcome=error", "renew timed out"}).size() >= 2);
  CHECK(r.sim.Grep({" lease ", "reason=\"no renewal confirmed by 0.600s (lock.stop_grace) before "
                    "the lease's end\""}).size() == 1);
  CHECK(r.OnlyCompletion().outcome == "lease-lost");
}

// Lets a held-back store answer when a test ends, before its replica is stopped (which
// waits for the renewals in flight), however the test ends.
struct OpenAtEnd {
  Gate& gate;
  ~OpenAtEnd() { gate.Open(); }
};

TEST_CASE("a renewal the store never answers delays neither the SIGTERM at valid_until − "
          "stop_grace nor the SIGKILL at valid_until") {
  // Issue #24: the renewal ran on the watchdog's thread and held it for op_timeout.
  Gate store_answers;  // outlives the run: its renewal waits here
  FakeClock metrics_clock(WallAt(kT0));
  PrometheusMetrics metrics(metrics_clock);
  OneRun r(nullptr, seconds(3), [&](Sim& sim) {
    sim.runner.runs_ignore_term = true;
    sim.backend.before_renew = [&] { store_answers.Wait(seconds(60)); };
  }, &metrics);
  const OpenAtEnd answer_at_end{store_answers};
  // Claimed at 1 s; lease 3 s: renewal due at 2 s (it hangs), valid_until 3.968 s,
  // stop_grace 0.6 s.
  StepTo(r.sim, 2'000);
  REQUIRE(Eventually([&] { return r.sim.backend.renewals == 1; }));
  StepTo(r.sim, 3'300);
  CHECK_FALSE(r.sim.runner.run(0)->was_terminated());
  StepTo(r.sim, 3'400, milliseconds(0));
  REQUIRE(Eventually([&] { return r.sim.runner.run(0)->was_terminated(); }));
  CHECK(r.sim.runner.run(0)->terminated == jobs::RunOutcome::kLeaseLost);
  CHECK(r.sim.Grep({" warn lease job=j", "outcome=lost action=terminate",
                    "no renewal confirmed by 0.600s"}).size() == 1);
  StepTo(r.sim, 3'950);
  CHECK(r.sim.runner.run(0)->kills == 0);
  CHECK_FALSE(r.Ended());
  StepTo(r.sim, 3'968, milliseconds(0));
  REQUIRE(Eventually([&] { return r.Ended(); }));
  CHECK(r.sim.runner.run(0)->kills == 1);
  CHECK(r.sim.Grep({" warn run job=j", "outcome=lease-lost", "signal=9", "lease_end=killed"})
            .size() == 1);
  CHECK(r.OnlyCompletion().outcome == "lease-lost");
  CHECK(metrics.Render().find("tickd_run_lease_end_total{job_name=\"j\",state=\"killed\"} 1") !=
        std::string::npos);
}

TEST_CASE("an in-process call still running when its lease ends is reported, not waited for") {
  Gate store_answers;
  OneRun r(nullptr, seconds(3), [&](Sim& sim) {
    sim.runner.runs_ignore_term = true;
    sim.runner.kill_leaves_running = true;
    sim.backend.before_renew = [&] { store_answers.Wait(seconds(60)); };
  });
  const OpenAtEnd answer_at_end{store_answers};
  StepTo(r.sim, 2'000);
  StepTo(r.sim, 3'400, milliseconds(0));
  REQUIRE(Eventually([&] { return r.sim.runner.run(0)->was_terminated(); }));
  StepTo(r.sim, 3'968, milliseconds(0));
  REQUIRE(Eventually([&] { return r.Ended(); }));
  CHECK(r.sim.Grep({" warn run job=j", "outcome=lease-lost", "lease_end=running",
                    "ignored its stop token until its lease ended"}).size() == 1);
}

TEST_CASE("on_lease_lost: continue: a store that does not answer loses the lease at "
          "valid_until, and the run goes on") {
  Gate store_answers;
  OneRun r([](config::Job& j) { j.on_lease_lost = config::OnLeaseLost::kContinue; }, seconds(3),
           [&](Sim& sim) {
             sim.backend.before_renew = [&] { store_answers.Wait(seconds(60)); };
           });
  const OpenAtEnd answer_at_end{store_answers};
  StepTo(r.sim, 2'000);
  StepTo(r.sim, 3'900);
  CHECK(r.sim.Grep({" lease job=j"}).empty());
  StepTo(r.sim, 3'968, milliseconds(0));
  REQUIRE(Eventually(
      [&] { return !r.sim.Grep({" warn lease job=j", "action=continue"}).empty(); }));
  StepTo(r.sim, 6'000);
  CHECK_FALSE(r.sim.runner.run(0)->was_terminated());
  CHECK(r.sim.runner.run(0)->kills == 0);
  r.sim.runner.run(0)->FinishWithExit(0);
  REQUIRE(Eventually([&] { return r.Ended(); }));
  CHECK(r.sim.Grep({" info run job=j", "outcome=done"}).size() == 1);
}

TEST_CASE("a renewal answered late still counts from when it was sent") {
  // Sent at 2 s, answered at 3.5 s: valid until 2 + 2.968 s, so the run is stopped at
  // 4.368 s unless the next renewal (due at 3 s, sent once the first is answered) is.
  Gate store_answers;
  std::atomic<int> held_back{1};
  OneRun r(nullptr, seconds(3), [&](Sim& sim) {
    sim.runner.runs_ignore_term = true;
    sim.backend.before_renew = [&] {
      if (held_back-- > 0) store_answers.Wait(seconds(60));
    };
  });
  const OpenAtEnd answer_at_end{store_answers};
  StepTo(r.sim, 2'000);
  REQUIRE(Eventually([&] { return r.sim.backend.renewals == 1; }));
  StepTo(r.sim, 3'300);
  store_answers.Open();
  StepTo(r.sim, 3'310);
  // The answer is taken; the next renewal is due (3 s) and goes out at once, answered.
  REQUIRE(Eventually([&] { return r.sim.backend.renewals >= 2; }));
  // A third goes out at 3.31 + 1 s only once that answer was taken (valid until
  // 3.31 + 2.968 s): before the first renewal's stop (4.368 s).
  StepTo(r.sim, 4'350);
  REQUIRE(Eventually([&] { return r.sim.backend.renewals >= 3; }));
  StepTo(r.sim, 4'500);
  CHECK_FALSE(r.sim.runner.run(0)->was_terminated());
  CHECK(r.sim.Grep({" lease job=j"}).empty());
  r.sim.runner.run(0)->FinishWithExit(0);
  REQUIRE(Eventually([&] { return r.Ended(); }));
}

TEST_CASE("a claim whose lease ran out before its job started never starts the job") {
  // The supervisor's thread got to run only after the lease had passed (a paused daemon,
  // a starved machine): another replica may already run the tick, so nothing starts,
  // whatever on_lease_lost says.
  for (const auto policy : {config::OnLeaseLost::kTerminate, config::OnLeaseLost::kContinue}) {
    Sim sim(WallAt(kT0, 0));
    sim.runner.plan = Hold;
    auto job = EveryJob("j", 60, [policy](config::Job& j) { j.on_lease_lost = policy; });
    const lock::HeldClaim held = WinTheTick(sim);
    const SteadyTime claim_sent = sim.clock.Steady();
    sim.clock.Advance(seconds(4));
    bool ended = false;
    RunSupervisor run(sim.clock, sim.backend, sim.runner, sim.log,
                      WonTick{job, held, claim_sent, "a"},
                      milliseconds(50), [&] { ended = true; });
    ThreadPool threads;
    run.Start(threads);
    run.Join();
    CHECK(ended);
    CHECK(sim.runner.starts() == 0);
    CHECK(sim.Grep({" warn run job=j", "outcome=lease-lost"}).size() == 1);
    auto completions = sim.backend.completions();
    REQUIRE(completions.size() == 1);
    CHECK(completions[0].second.outcome == "lease-lost");
  }
}

// Prepares starts that check the lease themselves at their instant, as an in-process
// call does (jobs::PrepareThreadCall): each notes the bound it was given and, when
// released, starts its run through `runner` unless the clock has reached that bound.
class BoundCheckingRunner final : public Runner {
 public:
  BoundCheckingRunner(Runner& runner, Clock& clock) : runner_(runner), clock_(clock) {}

  Result<std::unique_ptr<jobs::Execution>> Start(const config::Job& job,
                                                 const jobs::ProcessSpec& spec,
                                                 jobs::OutputSink sink) override {
    return runner_.Start(job, spec, std::move(sink));
  }

  Result<std::unique_ptr<jobs::PreparedStart>> Prepare(const config::Job& job,
                                                       const jobs::ProcessSpec& spec,
                                                       jobs::OutputSink sink, WallTime,
                                                       SteadyTime start_bound) override {
    bounds.push_back(start_bound);
    return std::unique_ptr<jobs::PreparedStart>(
        std::make_unique<Prepared>(*this, job, spec, std::move(sink), start_bound));
  }

  std::vector<SteadyTime> bounds;  // the supervisor's thread writes, the test reads after Join
  // The prepared starts' settle(): > 0 for runs that start themselves at their instant.
  milliseconds settle{0};

 private:
  class Prepared final : public jobs::PreparedStart {
   public:
    Prepared(BoundCheckingRunner& runner, const config::Job& job, jobs::ProcessSpec spec,
             jobs::OutputSink sink, SteadyTime bound)
        : runner_(runner), job_(job), spec_(std::move(spec)), sink_(std::move(sink)),
          bound_(bound) {}
    Result<std::unique_ptr<jobs::Execution>> Release() override {
      if (runner_.clock_.Steady() >= bound_) {
        jobs::RunResult r;
        r.outcome = jobs::RunOutcome::kLeaseLost;
        r.error = "the lease ran out before the job started";
        return jobs::FinishedExecution(std::move(r));
      }
      return runner_.Start(job_, spec_, std::move(sink_));
    }
    bool checks_start_bound() const override { return true; }
    milliseconds settle() const override { return runner_.settle; }

   private:
    BoundCheckingRunner& runner_;
    const config::Job& job_;
    const jobs::ProcessSpec spec_;
    jobs::OutputSink sink_;
    const SteadyTime bound_;
  };

  Runner& runner_;
  Clock& clock_;
};

// Replica "a" has won job "j"'s 14:00 tick (lease 3 s) 500 ms before T, and its start
// is prepared by a BoundCheckingRunner.
struct PreparedRun {
  explicit PreparedRun(config::OnLeaseLost policy)
      : sim(WallAt(kT0, -500)),
        runner(sim.runner, sim.clock),
        job(EveryJob("j", 60, [policy](config::Job& j) { j.on_lease_lost = policy; })),
        tick{job, WinTheTick(sim), sim.clock.Steady(), "a"} {
    sim.runner.plan = Hold;
    tick.lead = milliseconds(500);
  }
  Sim sim;
  BoundCheckingRunner runner;
  std::shared_ptr<const ScheduledJob> job;
  WonTick tick;
};

TEST_CASE("a start prepared ahead that checks the lease itself gets the lease's end as its "
          "bound, and runs as before") {
  // Claimed 500 ms before T with a lease of 3 s: the claim's lease ends 3.5 s after it
  // was sent, the bound stop_grace before that (on_lease_lost: continue: at its end).
  for (const auto policy : {config::OnLeaseLost::kTerminate, config::OnLeaseLost::kContinue}) {
    PreparedRun p(policy);
    RunSupervisor run(p.sim.clock, p.sim.backend, p.runner, p.sim.log, p.tick, milliseconds(20),
                      nullptr);
    ThreadPool threads;
    run.Start(threads);
    std::this_thread::sleep_for(milliseconds(50));
    CHECK(p.sim.runner.starts() == 0);  // not before T
    p.sim.clock.Advance(milliseconds(500));
    REQUIRE(Eventually([&] { return p.sim.runner.starts() == 1; }));
    p.sim.runner.run(0)->FinishWithExit(0);
    run.Join();
    const milliseconds stop_grace = policy == config::OnLeaseLost::kTerminate
                                        ? config::DefaultStopGrace(seconds(3))
                                        : milliseconds(0);
    REQUIRE(p.runner.bounds.size() == 1);
    CHECK(p.runner.bounds[0] ==
          p.tick.claim_sent + config::LeaseValidity(milliseconds(3'500)) - stop_grace);
    CHECK(p.sim.Grep({"info run job=j", "outcome=done"}).size() == 1);
  }
}

// A PreparedRun's job starts at T; its supervisor sees it end `seen_after` later, and
// its execution says it ran `ran`.
void RunFromT(PreparedRun& p, milliseconds seen_after, milliseconds ran) {
  RunSupervisor run(p.sim.clock, p.sim.backend, p.runner, p.sim.log, p.tick, milliseconds(20),
                    nullptr);
  ThreadPool threads;
  run.Start(threads);
  p.sim.clock.Advance(milliseconds(500));
  REQUIRE(Eventually([&] { return p.sim.runner.starts() == 1; }));
  p.sim.clock.Advance(seen_after);
  p.sim.runner.run(0)->FinishWithExit(0, ran);
  run.Join();
}

// A run that starts itself at T is looked at once the instant's starts are done: 2 ms
// a claim of the instant up to its settle() (20 ms), so that a job that ends at once
// is not seen, and timed, as ending 20 ms after T at an instant of one job.
TEST_CASE("a run that starts itself is looked at 2 ms a claim of its instant after T, at most "
          "its settle") {
  for (const std::size_t claims : {std::size_t{1}, std::size_t{10}}) {
    INFO(claims << " claims");
    PreparedRun p(config::OnLeaseLost::kTerminate);
    p.runner.settle = milliseconds(20);
    p.tick.instant_claims = claims;
    const milliseconds look = milliseconds(claims == 1 ? 2 : 21);  // + 0.1 ms a claim
    RunSupervisor run(p.sim.clock, p.sim.backend, p.runner, p.sim.log, p.tick,
                      milliseconds(20), nullptr);
    ThreadPool threads;
    run.Start(threads);
    p.sim.clock.Advance(milliseconds(500) + look - milliseconds(1));
    std::this_thread::sleep_for(milliseconds(50));
    CHECK(p.sim.runner.starts() == 0);  // the supervisor has not looked yet
    p.sim.clock.Advance(milliseconds(1));
    REQUIRE(Eventually([&] { return p.sim.runner.starts() == 1; }));
    p.sim.runner.run(0)->FinishWithExit(0, milliseconds(1));
    run.Join();
  }
}

TEST_CASE("a run claimed ahead of T counts its duration from the job's start, not the claim") {
  // Claimed 500 ms before T; the job runs 700 ms from T. Its run line, completion and
  // metric say 0.7 s (they said 1.2 s, the wait for T included, until 2026-11-29).
  PreparedRun p(config::OnLeaseLost::kTerminate);
  RunFromT(p, milliseconds(700), milliseconds(700));
  CHECK(p.sim.Grep({"info run job=j", "outcome=done", "duration=0.700s"}).size() == 1);
  auto completions = p.sim.backend.completions();
  REQUIRE(completions.size() == 1);
  CHECK(completions[0].second.duration == milliseconds(700));
}

TEST_CASE("a run's duration ends when its execution says it ended, not when its supervisor "
          "looked") {
  // The process exited 100 ms after it started; the supervisor saw it 400 ms later.
  PreparedRun p(config::OnLeaseLost::kTerminate);
  RunFromT(p, milliseconds(500), milliseconds(100));
  CHECK(p.sim.Grep({"info run job=j", "outcome=done", "duration=0.100s"}).size() == 1);
}

TEST_CASE("a start prepared ahead that checks the lease itself and finds it ran out is "
          "lease-lost, as before: the job never starts") {
  for (const auto policy : {config::OnLeaseLost::kTerminate, config::OnLeaseLost::kContinue}) {
    PreparedRun p(policy);
    p.sim.clock.Advance(seconds(4));  // the supervisor's thread runs only after the lease ended
    bool ended = false;
    RunSupervisor run(p.sim.clock, p.sim.backend, p.runner, p.sim.log, p.tick, milliseconds(20),
                      [&] { ended = true; });
    ThreadPool threads;
    run.Start(threads);
    run.Join();
    CHECK(ended);
    CHECK(p.runner.bounds.size() == 1);
    CHECK(p.sim.runner.starts() == 0);
    CHECK(p.sim.Grep({" warn lease job=j", "outcome=lost"}).size() == 1);
    CHECK(p.sim.Grep({" warn run job=j", "outcome=lease-lost",
                      "the lease ran out before the job started"})
              .size() == 1);
    auto completions = p.sim.backend.completions();
    REQUIRE(completions.size() == 1);
    CHECK(completions[0].second.outcome == "lease-lost");
  }
}

TEST_CASE("a run that started itself at T and is terminated before its supervisor looks is "
          "released and terminated as any run going") {
  // Shut down (the grace ended) in the settle window: the run had started at T.
  PreparedRun p(config::OnLeaseLost::kTerminate);
  p.runner.settle = seconds(30);  // the supervisor looks long after T
  RunSupervisor run(p.sim.clock, p.sim.backend, p.runner, p.sim.log, p.tick, milliseconds(20),
                    nullptr);
  ThreadPool threads;
  run.Start(threads);
  p.sim.clock.Advance(milliseconds(600));  // past T, inside the settle window
  std::this_thread::sleep_for(milliseconds(50));
  run.Terminate(jobs::RunOutcome::kKilled);
  REQUIRE(Eventually([&] { return p.sim.runner.starts() == 1; }));
  REQUIRE(Eventually([&] { return p.sim.runner.run(0)->was_terminated(); }));
  p.sim.runner.run(0)->FinishWithExit(143);
  run.Join();
  CHECK(p.sim.Grep({" warn run job=j", "outcome=killed"}).size() == 1);
  CHECK(p.sim.Grep({"ended before its instant"}).empty());
}

TEST_CASE("a renewal due when the job starts is sent after the start, not before") {
  // The claim took more than lease/3 (a slow store): the renewal is due at once. A
  // store that then hangs must not hold up a start the lease still covers.
  Sim sim(WallAt(kT0, 0));
  sim.runner.plan = Hold;
  auto job = EveryJob("j", 60);
  const lock::HeldClaim held = WinTheTick(sim);
  const SteadyTime claim_sent = sim.clock.Steady();
  sim.clock.Advance(milliseconds(1'500));  // past lease/3, well inside the validity
  Gate store_answers;
  sim.backend.before_renew = [&] { store_answers.Wait(); };
  RunSupervisor run(sim.clock, sim.backend, sim.runner, sim.log,
                    WonTick{job, held, claim_sent, "a"},
                    milliseconds(50), nullptr);
  ThreadPool threads;
  run.Start(threads);
  CHECK(Eventually([&] { return sim.runner.starts() == 1; }, seconds(3)));
  store_answers.Open();
  REQUIRE(Eventually([&] { return sim.runner.starts() == 1; }));
  CHECK(Eventually([&] { return sim.backend.renewals >= 1; }));
  sim.runner.run(0)->FinishWithExit(0);
  run.Join();
  CHECK(sim.Grep({"info run job=j", "outcome=done"}).size() == 1);
}

TEST_CASE("a run that gets no thread fails at once and its claim is completed") {
  Sim sim(WallAt(kT0));
  auto job = EveryJob("j", 60);
  lock::ClaimRequest req;
  req.job = "j";
  req.tick_unix = kT0;
  req.node = "a";
  req.owner_token = "token-a";
  req.config_hash = job->config_hash;
  const auto claimed = sim.backend.Claim(req);
  REQUIRE(claimed);
  REQUIRE(claimed->status == lock::ClaimStatus::kWon);
  ThreadPool no_thread_left(seconds(60), 0);
  bool done = false;
  RunSupervisor run(sim.clock, sim.backend, sim.runner, sim.log,
                    WonTick{job, lock::HeldClaim{"j", kT0, "token-a", claimed->fence, req.lease},
                            sim.clock.Steady(), "a"},
                    milliseconds(1), [&] { done = true; });
  run.Start(no_thread_left);
  // Decided on the caller's thread before Start returns: nothing was started, the
  // claim is done (not left to its lease), the run line says why.
  CHECK(done);
  CHECK(sim.runner.starts() == 0);
  const auto completions = sim.backend.completions();
  REQUIRE(completions.size() == 1);
  CHECK(completions[0].second.outcome == "failed");
  CHECK(sim.Grep({" run job=j", "outcome=failed", "cannot start the run", "threads are busy"})
            .size() == 1);
  const auto held = sim.backend.ListRunning();
  REQUIRE(held);
  CHECK(held->empty());
}

TEST_CASE("on_lease_lost: continue keeps the run going with a warning") {
  OneRun r([](config::Job& j) { j.on_lease_lost = config::OnLeaseLost::kContinue; });
  r.sim.backend.renew_lost = true;
  r.sim.clock.Advance(seconds(1));
  REQUIRE(Eventually([&] { return !r.sim.Grep({"action=continue"}).empty(); }));
  std::this_thread::sleep_for(milliseconds(20));
  CHECK_FALSE(r.sim.runner.run(0)->was_terminated());
  r.sim.runner.run(0)->FinishWithExit(0);
  REQUIRE(Eventually([&] { return r.Ended(); }));
  CHECK(r.sim.Grep({" info run job=j", "outcome=done exit=0"}).size() == 1);
}

TEST_CASE("scope guard: the claim is completed on every path out") {
  Sim sim(WallAt(kT0, -1'000));
  std::string outcome, line_part;
  std::optional<int> exit_code;
  SECTION("normal exit") {
    outcome = "done";
    exit_code = 0;
    line_part = " info run job=j tick=2026-11-21T14:00:00Z node=a outcome=done exit=0 ";
  }
  SECTION("failure") {
    sim.runner.plan = [](const jobs::ProcessSpec&) { return std::optional<int>(3); };
    outcome = "failed";
    exit_code = 3;
    line_part = " warn run job=j tick=2026-11-21T14:00:00Z node=a outcome=failed exit=3 ";
  }
  SECTION("exception from the runner's start") {
    sim.runner.throw_on_start = true;
    outcome = "failed";
    line_part = "outcome=failed duration=0.000s fence=1 error=\"exception: boom\"";
  }
  SECTION("the runner cannot start the job") {
    sim.runner.fail_to_start = true;
    outcome = "failed";
    line_part = "outcome=failed duration=0.000s fence=1 error=\"spawn: no such workdir\"";
  }
  sim.AddReplica("a", {EveryJob("j", 60)});
  sim.Step(seconds(1));
  sim.WaitQuiet();
  const auto completions = sim.backend.completions();
  REQUIRE(completions.size() == 1);
  CHECK(completions[0].second.outcome == outcome);
  CHECK(completions[0].second.exit_code == exit_code);
  CHECK(sim.Grep({line_part}).size() == 1);
  auto history = sim.store->History("j", 1);
  REQUIRE(history);
  REQUIRE(history->size() == 1);
  CHECK((*history)[0].state == "done");
  CHECK((*history)[0].run_outcome == outcome);
}

TEST_CASE("shutdown: a run past the grace is killed and its claim completed") {
  OneRun r({}, seconds(60));
  r.replica().Shutdown(milliseconds(0));
  CHECK(r.sim.runner.run(0)->terminated == jobs::RunOutcome::kKilled);
  CHECK(r.OnlyCompletion().outcome == "killed");
  CHECK(r.sim.Grep({" warn run job=j", "outcome=killed"}).size() == 1);
}

TEST_CASE("shutdown: a run that ends within the grace finishes normally") {
  OneRun r({}, seconds(60));
  std::thread stopper([&] { r.replica().Shutdown(seconds(30)); });
  std::this_thread::sleep_for(milliseconds(20));
  r.sim.runner.run(0)->FinishWithExit(0);
  stopper.join();
  CHECK_FALSE(r.sim.runner.run(0)->was_terminated());
  CHECK(r.OnlyCompletion().outcome == "done");
}

TEST_CASE("shutdown: the grace runs on the clock, then the run is killed") {
  OneRun r({}, seconds(60));
  std::thread stopper([&] { r.replica().Shutdown(seconds(10)); });
  std::this_thread::sleep_for(milliseconds(20));
  CHECK_FALSE(r.sim.runner.run(0)->was_terminated());
  r.sim.clock.Advance(seconds(10));
  stopper.join();
  CHECK(r.OnlyCompletion().outcome == "killed");
}

TEST_CASE("shutdown: EndGrace (a second SIGTERM) kills the runs at once") {
  OneRun r({}, seconds(60));
  std::thread stopper([&] { r.replica().Shutdown(seconds(30)); });
  std::this_thread::sleep_for(milliseconds(20));
  CHECK_FALSE(r.sim.runner.run(0)->was_terminated());
  r.replica().EndGrace();
  stopper.join();
  CHECK(r.OnlyCompletion().outcome == "killed");
}

TEST_CASE("retries: a failed attempt is retried under the same claim, each under a new fence, "
          "with TICKD_ATTEMPT") {
  Sim sim(WallAt(kT0, -1'000));
  sim.runner.plan = [](const jobs::ProcessSpec& spec) {
    return std::optional<int>(spec.env.at("TICKD_ATTEMPT") == "3" ? 0 : 1);
  };
  sim.AddReplica("a",
                 {EveryJob("j", 60,
                           [](config::Job& j) {
                             j.retries = {3, seconds(2)};
                             j.env = {{"GREETING", "hi"}, {"TICKD_NODE", "spoofed"}};
                           })},
                 [](SchedulerOptions& o) { o.lease = seconds(60); });
  sim.Step(seconds(1), false);
  for (int i = 0; i < 40 && sim.runner.starts() < 3; ++i) {
    const std::size_t before = sim.runner.starts();
    sim.clock.Advance(milliseconds(500));
    // A step inside the backoff starts nothing: wait briefly, then step again.
    Eventually([&] { return sim.runner.starts() > before; }, milliseconds(50));
  }
  REQUIRE(Eventually([&] { return sim.replica(0).active_runs() == 0; }));
  const auto specs = sim.runner.specs();
  REQUIRE(specs.size() == 3);
  for (int i = 0; i < 3; ++i) {
    const auto& env = specs[static_cast<std::size_t>(i)].env;
    CHECK(env.at("TICKD_ATTEMPT") == std::to_string(i + 1));
    CHECK(env.at("TICKD_JOB") == "j");
    CHECK(env.at("TICKD_TICK") == "2026-11-21T14:00:00Z");
    CHECK(env.at("TICKD_TICK_UNIX") == std::to_string(kT0));
    CHECK(env.at("TICKD_NODE") == "a");
    // The memory store's fences are plain counters: the claim's 1, then one per retry.
    CHECK(env.at("TICKD_FENCE") == std::to_string(i + 1));
    CHECK(env.at("GREETING") == "hi");
  }
  CHECK(specs[0].argv == std::vector<std::string>{"/bin/sh", "-c", "true"});
  CHECK(sim.Grep({" info retry job=j", "outcome=started attempt=2 backoff=2.000s fence=2 "
                  "previous_fence=1"}).size() == 1);
  CHECK(sim.Grep({" info retry job=j", "outcome=started attempt=3 backoff=2.000s fence=3 "
                  "previous_fence=2"}).size() == 1);
  CHECK(sim.Grep({" info run job=j", "outcome=done exit=0", "fence=3", "attempts=3"}).size() == 1);
  const auto refences = sim.backend.refences();
  REQUIRE(refences.size() == 2);
  CHECK(refences[0].fence == 1);
  CHECK(refences[1].fence == 2);
  const auto completions = sim.backend.completions();
  REQUIRE(completions.size() == 1);  // one claim for all attempts
  CHECK(completions[0].first.fence == 3);
  CHECK(completions[0].second.outcome == "done");
  auto history = sim.store->History("j", 1);
  REQUIRE(history);
  REQUIRE(history->size() == 1);
  CHECK(history->front().fence == 3);  // the record shows the last attempt's fence
  CHECK(history->front().run_outcome == "done");
}

namespace {

// Steps the fake clock by `step` until `done()` or `limit` of simulated time, giving
// the supervisor a moment of real time after each step.
void StepUntil(Sim& sim, const std::function<bool()>& done, milliseconds step,
               milliseconds limit) {
  for (milliseconds t{0}; t < limit && !done(); t += step) {
    sim.clock.Advance(step);
    Eventually(done, milliseconds(20));
  }
}

// The specs of the starts of tick kT0 (a later tick of the job may start as well).
std::vector<jobs::ProcessSpec> FirstTickSpecs(Sim& sim) {
  std::vector<jobs::ProcessSpec> out;
  for (const auto& spec : sim.runner.specs()) {
    if (spec.env.at("TICKD_TICK_UNIX") == std::to_string(kT0)) out.push_back(spec);
  }
  return out;
}

}  // namespace

TEST_CASE("a complete the store did not answer is sent again while the lease lasts") {
  Sim sim(WallAt(kT0, -1'000));
  int failing = 0;
  std::string state;
  SECTION("the store answers the third: the tick is done") {
    failing = 2;
    state = "done";
  }
  SECTION("the store never answers: the tries end before the lease does") {
    failing = 1'000;
    state = "running";
  }
  sim.backend.complete_errors = failing;
  sim.AddReplica("a", {EveryJob("j", 60)}, [](SchedulerOptions& o) { o.lease = seconds(10); });
  sim.Step(seconds(1), false);
  // Claimed at 1 s, lease 10 s (valid until 1 + 9.898 s); the run ends at once. The
  // completes go at 1, 1.25, 1.75, 2.75, 4.75 and 8.75 s; the next, at 13.75 s, would
  // come after the lease's end, which no renewal moves any more. (A supervisor slower
  // than the stepped clock sends its tries later, so fewer of them fit.)
  StepUntil(sim, [&] { return sim.replica(0).active_runs() == 0 && sim.runner.starts() > 0; },
            milliseconds(100), seconds(15));
  REQUIRE(sim.replica(0).active_runs() == 0);
  const std::size_t sent = sim.backend.completions().size();
  if (failing == 2) {
    CHECK(sent == 3);
  } else {
    CHECK(sent >= 3);
    CHECK(sent <= 6);
  }
  CHECK(sim.Grep({" warn complete job=j", "complete timed out"}).size() ==
        std::min<std::size_t>(sent, static_cast<std::size_t>(failing)));
  CHECK(sim.Grep({" info run job=j", "outcome=done"}).size() == 1);
  auto history = sim.store->History("j", 1);
  REQUIRE(history);
  REQUIRE(history->size() == 1);
  CHECK((*history)[0].state == state);
}

TEST_CASE("a complete the store takes only after the lease ended lands late, "
          "unless the job has recover: true") {
  Sim sim(WallAt(kT0, -1'000));
  const bool recover = GENERATE(false, true);
  CAPTURE(recover);
  sim.backend.complete_errors = 1'000'000;
  sim.AddReplica("a", {EveryJob("j", 3'600, [&](config::Job& j) { j.recover = recover; })},
                 [](SchedulerOptions& o) { o.lease = seconds(10); });
  sim.Step(seconds(1), false);
  // The run ends at once; its completes fail until the lease's end (about 11 s).
  StepUntil(sim, [&] { return sim.replica(0).active_runs() == 0 && sim.runner.starts() > 0; },
            milliseconds(100), seconds(15));
  REQUIRE(sim.replica(0).active_runs() == 0);
  CHECK(sim.Grep({" info run job=j", "outcome=done"}).size() == 1);
  // The store is back.
  sim.backend.complete_errors = 0;
  const std::size_t sent = sim.backend.completions().size();
  StepUntil(sim, [&] { return !sim.Grep({" complete job=j", "outcome=completed"}).empty(); },
            milliseconds(500), seconds(30));
  auto history = sim.store->History("j", 1);
  REQUIRE(history);
  REQUIRE(history->size() == 1);
  if (recover) {
    // Left running, so that another replica re-runs it (design.md §1 rule 5).
    CHECK(sim.backend.completions().size() == sent);
    CHECK((*history)[0].state == "running");
  } else {
    CHECK(sim.Grep({" info complete job=j tick=2026-11-21T14:00:00Z node=a outcome=completed",
                    "late="}).size() == 1);
    CHECK((*history)[0].state == "done");
    CHECK((*history)[0].run_outcome == "done");
  }
}

TEST_CASE("late completes: tried oldest first, given up at shutdown and beyond retention") {
  FakeClock clock(WallAt(kT0, 0));
  std::vector<std::string> lines;
  std::mutex lines_mu;
  Logger log(clock, LogFormat::kLogfmt, LogLevel::kInfo, [&](std::string_view line) {
    std::lock_guard lock(lines_mu);
    lines.emplace_back(line);
  });
  std::shared_ptr<lock::Backend> store = lock::NewMemoryBackend(clock);
  TestBackend backend(store);
  const auto grep = [&](std::string_view part) {
    std::lock_guard lock(lines_mu);
    return std::count_if(lines.begin(), lines.end(),
                         [&](const std::string& l) { return l.find(part) != std::string::npos; });
  };
  // Two won claims, one of a tick older than the retention (1 h).
  std::vector<lock::CompleteRequest> held;
  for (std::int64_t tick : {kT0 - 7'200, kT0 - 60}) {
    lock::ClaimRequest req;
    req.job = tick == kT0 - 60 ? "j" : "old";
    req.tick_unix = tick;
    req.node = "a";
    req.owner_token = "token-" + std::to_string(tick);
    req.lease = seconds(600);
    req.starting_deadline = seconds(86'400);
    req.node_wall = clock.Wall();
    auto won = store->Claim(req);
    REQUIRE(won);
    REQUIRE(won->status == lock::ClaimStatus::kWon);
    lock::Completion c;
    c.outcome = "lease-lost";
    held.push_back({lock::HeldClaim{req.job, tick, req.owner_token, won->fence, req.lease}, c});
  }
  LateCompletes late(clock, backend, log, "a", seconds(3'600), milliseconds(1));
  backend.complete_errors = 1'000'000;
  for (const auto& h : held) late.Add(h);
  CHECK(late.pending() == 2);
  SECTION("the store comes back") {
    // Tries at 1, 2, 4, 8 s… each failing; the store is back from 5 s on.
    for (int i = 0; i < 50 && clock.Steady().time_since_epoch() < seconds(5); ++i) {
      clock.Advance(milliseconds(100));
      std::this_thread::sleep_for(milliseconds(2));
    }
    backend.complete_errors = 0;
    for (int i = 0; i < 200 && late.pending() > 0; ++i) {
      clock.Advance(milliseconds(100));
      std::this_thread::sleep_for(milliseconds(2));
    }
    CHECK(late.pending() == 0);
    CHECK(grep("outcome=given-up reason=\"older than lock.retention\"") == 1);
    CHECK(grep("tick=2026-11-21T13:59:00Z node=a outcome=completed late=") == 1);
    auto history = store->History("j", 1);
    REQUIRE(history);
    REQUIRE(history->size() == 1);
    CHECK((*history)[0].state == "done");
    CHECK((*history)[0].run_outcome == "lease-lost");
    history = store->History("old", 1);
    REQUIRE(history);
    REQUIRE(history->size() == 1);
    CHECK((*history)[0].state == "running");
  }
  SECTION("the daemon stops first") {
    late.Stop();
    CHECK(grep("outcome=given-up reason=shutdown") == 2);
    late.Add(held[1]);  // after the stop: given up at once
    CHECK(grep("outcome=given-up reason=shutdown") == 3);
    CHECK(late.pending() == 0);
  }
}

TEST_CASE("retries: retry_backoff doubles with each retry") {
  Sim sim(WallAt(kT0, -1'000));
  sim.runner.plan = [](const jobs::ProcessSpec&) { return std::optional<int>(1); };
  sim.AddReplica("a", {EveryJob("j", 3'600, [](config::Job& j) {
                   j.retries = {4, seconds(1), true};
                 })},
                 [](SchedulerOptions& o) { o.lease = seconds(60); });
  sim.Step(seconds(1), false);
  StepUntil(sim, [&] { return sim.replica(0).active_runs() == 0 && sim.runner.starts() > 0; },
            milliseconds(250), seconds(20));
  REQUIRE(sim.runner.starts() == 4);
  CHECK(sim.Grep({" info retry job=j", "attempt=2 backoff=1.000s fence=2"}).size() == 1);
  CHECK(sim.Grep({" info retry job=j", "attempt=3 backoff=2.000s fence=3"}).size() == 1);
  CHECK(sim.Grep({" info retry job=j", "attempt=4 backoff=4.000s fence=4"}).size() == 1);
  CHECK(sim.Grep({" warn run job=j", "outcome=failed exit=1", "fence=4", "attempts=4"}).size() ==
        1);
}

TEST_CASE("retries: no retry starts at or past the job's next instant, and the last one's "
          "timeout is cut there") {
  Sim sim(WallAt(kT0, -1'000));
  sim.runner.plan = [](const jobs::ProcessSpec&) { return std::optional<int>(1); };
  sim.AddReplica("a", {EveryJob("j", 60, [](config::Job& j) {
                   j.retries = {5, seconds(25)};  // retries at T+25 and T+50; T+75 is too late
                   j.timeout = seconds(30);
                 })},
                 [](SchedulerOptions& o) { o.lease = seconds(60); });
  sim.Step(seconds(1), false);
  StepUntil(sim, [&] { return !sim.Grep({" retry job=j", "outcome=not-started"}).empty(); },
            milliseconds(500), seconds(70));
  const auto specs = FirstTickSpecs(sim);
  REQUIRE(specs.size() == 3);
  CHECK(specs[0].timeout == seconds(30));
  CHECK(specs[1].timeout == seconds(30));  // at T+25: 35 s are left before T+60
  // At T+50, or a clock step later when the supervisor saw the failure late (as under
  // a sanitizer): cut at T+60.
  CHECK(specs[2].timeout <= seconds(10));
  CHECK(specs[2].timeout >= seconds(9));
  CHECK(sim.Grep({" info retry job=j", "attempt=3 backoff=25.000s",
                  "timeout=" + FormatSeconds(specs[2].timeout)}).size() == 1);
  const auto given_up = sim.Grep({" warn retry job=j tick=2026-11-21T14:00:00Z",
                                  "outcome=not-started attempt=4 backoff=25.000s",
                                  "next instant 2026-11-21T14:01:00.000Z"});
  CHECK(given_up.size() == 1);
  REQUIRE(Eventually([&] {
    return !sim.Grep({" warn run job=j tick=2026-11-21T14:00:00Z", "attempts=3"}).empty();
  }));
  CHECK(sim.Grep({" warn run job=j tick=2026-11-21T14:00:00Z", "outcome=failed", "fence=3",
                  "attempts=3"}).size() == 1);
}

TEST_CASE("retries: a new fence refused ends the run as lease-lost; one not answered ends the "
          "retries") {
  Sim sim(WallAt(kT0, -1'000));
  sim.runner.plan = [](const jobs::ProcessSpec&) { return std::optional<int>(1); };
  const bool refused = GENERATE(true, false);
  if (refused) {
    sim.backend.refence_not_owner = true;
  } else {
    sim.backend.refence_error = true;
  }
  sim.AddReplica("a", {EveryJob("j", 60, [](config::Job& j) { j.retries = {3, seconds(2)}; })},
                 [](SchedulerOptions& o) { o.lease = seconds(60); });
  sim.Step(seconds(1), false);
  StepUntil(sim, [&] { return !sim.Grep({" run job=j"}).empty(); }, milliseconds(500),
            seconds(10));
  CHECK(sim.runner.starts() == 1);  // the retry never started
  CHECK(sim.backend.refences().size() == 1);
  const auto completions = sim.backend.completions();
  REQUIRE(completions.size() == 1);
  CHECK(completions[0].first.fence == 1);
  if (refused) {
    CHECK(sim.Grep({" warn retry job=j", "outcome=not-started attempt=2",
                    "no longer ours"}).size() == 1);
    CHECK(sim.Grep({" warn lease job=j", "outcome=lost"}).size() == 1);
    CHECK(completions[0].second.outcome == "lease-lost");
  } else {
    CHECK(sim.Grep({" warn retry job=j", "outcome=not-started attempt=2",
                    "no new fence", "refence timed out"}).size() == 1);
    CHECK(sim.Grep({" lease job=j"}).empty());
    CHECK(completions[0].second.outcome == "failed");
    CHECK(completions[0].second.exit_code == 1);
  }
}

TEST_CASE("retries stop when shutdown begins") {
  Sim sim(WallAt(kT0, -1'000));
  sim.runner.plan = [](const jobs::ProcessSpec&) { return std::optional<int>(1); };
  sim.AddReplica("a", {EveryJob("j", 60, [](config::Job& j) { j.retries = {5, seconds(2)}; })});
  sim.Step(seconds(1), false);
  // The first attempt failed at once; its supervisor waits out the backoff (the fake
  // clock stands still) or has not looked yet: either way no retry starts.
  REQUIRE(Eventually([&] { return sim.runner.starts() == 1; }));
  sim.replica(0).Shutdown(seconds(30));
  CHECK(sim.runner.starts() == 1);
  const auto completions = sim.backend.completions();
  REQUIRE(completions.size() == 1);
  CHECK(completions[0].second.outcome == "failed");
  CHECK(completions[0].second.exit_code == 1);
}

TEST_CASE("a run: job's argv is used as is") {
  config::Job job;
  job.name = "r";
  job.argv = {"/bin/echo", "a b"};
  auto sj = std::make_shared<ScheduledJob>();
  sj->job = job;
  WonTick tick{sj, lock::HeldClaim{"r", kT0, "tok", 9, seconds(15)}, SteadyTime{}, "n"};
  const jobs::ProcessSpec spec = MakeProcessSpec(tick, 2);
  CHECK(spec.argv == job.argv);
  CHECK(spec.env.at("TICKD_FENCE") == "9");
  CHECK(spec.env.at("TICKD_ATTEMPT") == "2");
  CHECK(spec.timeout == job.timeout);
  CHECK(spec.kill_grace == job.kill_grace);
}

}  // namespace
}  // namespace tickd::app::testing
