// One won tick on this replica, from the claim to its completion, on a thread of its
// own from a pool (the scheduler never waits on a run).
//
// The supervisor builds the job's environment (docs/design.md §5), starts each attempt
// through the Runner, keeps the lease alive (the watchdog below), retries failed
// attempts under the same claim, each retry under a new fence (Backend::Refence) and
// only while it can start before the job's next instant (design §1 rule 14), and — in
// a scope guard, on every path out, exceptions and shutdown included — completes the
// claim on the backend and logs the `run` line.
//
// Lease watchdog (docs/design.md §1 rule 2): renew every lease/3. The lease counts as valid
// until valid_until = t_sent + lease − 1 % − 2 ms on the monotonic clock, t_sent being
// when the last confirmed renewal (first: the claim) was sent. The renewals go out on
// threads of their own (WonTick::renew_threads): the supervisor's thread never waits
// on the store, so its deadlines are kept by its own timer whatever the store does.
// With on_lease_lost: terminate (the default), a run that has no renewal confirmed by
// valid_until − stop_grace has lost its lease: SIGTERM to its process group (an
// in-process call's stop token fires) then, and SIGKILL at valid_until (an in-process
// call still running then is left on its thread and reported). A renewal answered
// kLost loses the lease at once, with the same SIGKILL at valid_until. With
// on_lease_lost: continue the lease is lost at valid_until (or kLost) and the run goes
// on. With terminate, the run's process group and valid_until also go to the lease
// guard (WonTick::lease_guard, app/lease_guard.h), which kills it then should this
// daemon be stopped.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "app/late_completes.h"
#include "app/lease_guard.h"
#include "app/log.h"
#include "app/metrics.h"
#include "app/notifier.h"
#include "app/runner.h"
#include "app/scheduled_job.h"
#include "base/clock.h"
#include "base/thread_pool.h"
#include "jobs/execution.h"
#include "jobs/output_tail.h"
#include "lock/backend.h"

namespace tickd::app {

// A won tick handed from the scheduler to its supervisor.
struct WonTick {
  std::shared_ptr<const ScheduledJob> job;
  lock::HeldClaim held;
  SteadyTime claim_sent;  // Steady() when the claim was sent: the lease counts from here
  std::string node;
  bool manual = false;         // `tickd trigger`: the run line says manual=true
  Metrics* metrics = nullptr;  // run outcomes, lease losses, renewal errors; null: none
  // Claimed this long before T (lock.claim_lead or an adaptive lead; 0: at or after
  // T). The claim's lease was lead + held.lease from claim_sent, so it counts from T;
  // the first attempt is made ready (Runner::Prepare) prepare_ahead before T and
  // starts when the wall clock reads T.
  std::chrono::milliseconds lead{0};
  // Made ready no earlier than this before T (lock.claim_lead plus
  // InstantStartsDone(instant_claims): a claim made longer before T by an adaptive
  // lead waits until then first, so no prepared child or plugin sits out the whole
  // lead, while a big instant's runs have the time to be made ready). nullopt: at once.
  std::optional<std::chrono::milliseconds> prepare_ahead;
  // How far this replica's clock may be ahead of the store's, as its batch's answers
  // measured it (StoreClockAtSend in app/scheduler.h; 0: not ahead, or not measured).
  // The first attempt starts when this replica's clock reads the due instant plus this:
  // at the due instant by the store's clock, so a clock ahead by less than the store's
  // limit does not start early either.
  std::chrono::milliseconds start_delay{0};
  // Wall() read with claim_sent (the epoch: not read). The first attempt starts no
  // sooner than claim_sent + (its start instant − claim_wall) on the Steady() time
  // line: a wall clock stepped ahead, or running fast, after the claim does not start
  // it early (docs/design.md §1 rule 15).
  WallTime claim_wall{};
  // How many ticks of the same instant this replica claimed with it (the other
  // replicas claim them too, and each start costs the machine ~0.1 ms of CPU): a run
  // that starts itself at T is looked at once those starts are likely done.
  std::size_t instant_claims = 1;
  // on_success / on_failure of the job go here when the run ends; null: none.
  Notifier* notifier = nullptr;
  // Told the run's process group and valid_until, so that the run ends by then even
  // while this daemon is frozen (app/lease_guard.h; on_lease_lost: terminate only).
  // Null: none.
  LeaseGuard* lease_guard = nullptr;
  // lock.history: the last output_bytes of what the run printed go to the store with
  // its completion (0: nothing), and the job keeps the outputs of its newest
  // keep_outputs runs (lock::Completion).
  std::size_t output_bytes = 0;
  int keep_outputs = 0;
  // lock.stop_grace (≤ lease/3); nullopt: config::DefaultStopGrace(held.lease).
  std::optional<std::chrono::milliseconds> stop_grace;
  // Where renewals are sent from (the store may take up to op_timeout to answer); null:
  // a pool the supervisor keeps for itself. REQUIRES: outlives the supervisor.
  ThreadPool* renew_threads = nullptr;
  // Takes over a complete the store did not take while the lease lasted, for a job
  // with recover: false (app/late_completes.h). Null: it is not sent again (`tickd
  // trigger`, which exits). REQUIRES: outlives the supervisor.
  LateCompletes* late_completes = nullptr;
};

// How long after an instant the runs prepared for it, which start themselves at it,
// are likely all started, when this replica claimed `instant_claims` of its ticks
// (the other replicas claim them too): their supervisors look at them then. Also how
// much longer than claim_lead before it they are made ready (WonTick::prepare_ahead).
std::chrono::milliseconds InstantStartsDone(std::size_t instant_claims);

// The environment a job sees (DESIGN §5): the job's env, then TICKD_JOB, TICKD_TICK
// (RFC 3339 UTC), TICKD_TICK_UNIX, TICKD_NODE, TICKD_FENCE, TICKD_ATTEMPT (1-based),
// which the job's env cannot override.
std::map<std::string, std::string> JobEnvironment(const WonTick& tick, int attempt);

// The process to start for one attempt: shell → /bin/sh -c, run → argv.
jobs::ProcessSpec MakeProcessSpec(const WonTick& tick, int attempt);

using config::LeaseValidity;

// The most renewals in flight at once from one pool of renewal threads (each holds a
// thread until its store answers, within op_timeout): a store that hangs costs at most
// this many threads; a renewal beyond them fails (and is tried again) as if it had.
inline constexpr int kMaxRenewThreads = 128;

// Thread-safe. Start() once; the destructor joins.
class RunSupervisor {
 public:
  // `max_real_wait` bounds every real-time wait before the Clock is read again (a
  // FakeClock moves without waking us; with a RealClock any value works).
  // `on_done` runs on the supervisor's thread after the claim was completed.
  RunSupervisor(Clock& clock, lock::Backend& backend, Runner& runner, Logger& log, WonTick tick,
                std::chrono::milliseconds max_real_wait, std::function<void()> on_done);
  ~RunSupervisor();
  RunSupervisor(const RunSupervisor&) = delete;
  RunSupervisor& operator=(const RunSupervisor&) = delete;

  // Runs the tick on a thread of `threads`. Without a thread to run on, the claim is
  // completed at once, as failed, and the run line says why.
  void Start(ThreadPool& threads);
  // Shutdown began: no further attempts; the running one may finish.
  void StopRetries();
  // Ends the running attempt (and any further ones) with `reason` (kKilled).
  void Terminate(jobs::RunOutcome reason);
  // True once the claim has been completed and the run line logged.
  bool done() const { return done_.load(); }
  // The claim this run holds (or held). Its job and tick never change; its fence
  // changes with each retry, on the supervisor's thread.
  const lock::HeldClaim& held() const { return tick_.held; }
  // How the run ended. REQUIRES: done().
  jobs::RunOutcome outcome() const { return final_outcome_; }
  void Join();

 private:
  struct Outcome;
  void Main();
  void Supervise(Outcome& out);
  // Early claims: waits until the wall clock reads `at` (T, or T + the prepared
  // start's settle()) and Steady() has reached NotBefore(at). False when the run was
  // terminated meanwhile (shutdown). Renews
  // only if the wait outlasts the first renewal's time (the wall clock was set back),
  // never before: a start must not wait on the store; a renewal confirmed then moves
  // the start bound of `prepared` (if any).
  bool WaitForInstant(WallTime at, jobs::PreparedStart* prepared);
  // Runs one attempt to its end, renewing the lease meanwhile.
  jobs::RunResult WaitRun(jobs::Execution& exec);
  // Waits until Steady() >= until (retry backoff) while renewing; false if it was cut
  // short by shutdown or a lost lease.
  bool Backoff(SteadyTime until);
  // One wait on cv_, at most until `until` (a notify or a spurious wake-up ends it
  // sooner); false when StopRetries was called, before or during it.
  bool WaitUnlessStopped(SteadyTime until);
  // Before try `attempt` (2 or more): waits out its backoff (renewing meanwhile) and
  // gives the claim a new fence; `cut_timeout` is set when the try must end before the
  // job's next instant `retries_end` (WallTime::max(): none). False, with the `retry`
  // line logged, when the try must not start (next instant, no new fence, shutdown).
  bool PrepareRetry(int attempt, WallTime retries_end,
                    std::optional<std::chrono::milliseconds>& cut_timeout);
  // The due instant of the job's tick after this one (retries end there); nullopt
  // when the schedule has none.
  std::optional<WallTime> NextInstant() const;
  // Gives the claim a new fence for try `attempt`. False, with the `retry` line
  // logged (and the lease lost on a refusal), when the try must not start.
  bool Refence(int attempt, std::chrono::milliseconds backoff);
  // The `warn retry … outcome=not-started` line and its metric.
  void RetryNotStarted(int attempt, std::chrono::milliseconds backoff, std::string_view outcome,
                       const std::string& reason);
  // Applies a renewal's answer, judges the lease, sends a renewal when one is due, and
  // kills the run when its lease has ended. Never waits on the store; cheap when
  // nothing is due.
  void Upkeep();
  // The renewal answer that has arrived, if any, and the lease's validity against the
  // clock (the part of Upkeep that sends nothing).
  void CheckLease();
  // Arms the lease guard (WonTick::lease_guard) with the run's process group and
  // valid_until_ (again after each renewal); Unguard disarms it once the run is over.
  void Guard(std::optional<int> process_group);
  void Unguard();
  // When the lease counts as lost without a confirmed renewal: valid_until − stop_grace
  // (on_lease_lost: terminate) or valid_until (continue).
  SteadyTime LossAt() const;
  // When, on the Steady() time line, the wall clock as it read at the claim would read
  // `at` (WonTick::claim_wall), less the few ms the readings may disagree by; the
  // Steady() epoch when claim_wall was not read.
  SteadyTime NotBefore(WallTime at) const;
  void SendRenewal();
  bool RenewalInFlight() const;
  // On a renewal's thread: the store refused the renewal; a run that ends on a lost
  // lease is told to stop at once (the supervisor logs the loss at its next look).
  void RenewRefused();
  void LoseLease(std::string_view reason);
  // The next instant the watchdog must act at (renew, look for a renewal's answer,
  // stop, kill), if any.
  std::optional<SteadyTime> WatchdogDeadline() const;
  std::chrono::milliseconds RealWait(std::optional<SteadyTime> deadline) const;
  // `may_wait`: on the run's own thread (not when the run could not start), so the
  // complete may be sent again (CompleteClaim).
  void Finish(const Outcome& out, bool may_wait);
  // Completes the claim. A complete the store did not answer is sent again, after
  // 250 ms doubling up to 5 s, while the lease as last renewed lasts (it is not renewed
  // any more: a store that answers renewals but never a complete must not hold the
  // tick forever) and until a shutdown (StopRetries). A store's brief failure must not
  // leave the tick running until its lease ends: that keeps later ticks of a `forbid`
  // job `busy` until then and lets `recover: true` replicas run the finished tick again.
  Result<lock::CompleteStatus> CompleteClaim(const lock::Completion& completion, bool may_wait);
  // Hands the ended run to tick_.notifier (on_success / on_failure), if any.
  void Notify(const Outcome& out, std::chrono::milliseconds duration);

  Clock& clock_;
  lock::Backend& backend_;
  Runner& runner_;
  Logger& log_;
  WonTick tick_;  // held.fence moves with each retry (Refence); the rest never changes
  const std::string tick_text_;
  const std::chrono::milliseconds max_real_wait_;
  std::function<void()> on_done_;
  std::atomic<bool> done_{false};
  jobs::RunOutcome final_outcome_ = jobs::RunOutcome::kFailed;  // set before done_
  std::uint64_t previous_fence_ = 0;  // the fence before the last Refence (the retry line)

  // What the run printed, from the execution's thread (the sink) and read by Finish.
  std::mutex output_mu_;
  jobs::OutputTail output_tail_;       // all attempts, for the store
  jobs::OutputTail notify_tail_;       // the last kNotifyOutputBytes, for a notification
                                       // (fed only when tick_.notifier is set)
  std::size_t logged_lines_ = 0;       // `output` log lines so far
  std::size_t dropped_lines_ = 0;      // lines beyond kLoggedLinesPerRun (not logged)

  // Watchdog state: the supervisor thread only.
  const std::chrono::milliseconds stop_grace_;
  bool lease_held_ = true;
  bool lease_lost_ = false;
  SteadyTime valid_until_;
  SteadyTime next_renew_;
  std::optional<SteadyTime> kill_at_;  // a lost lease's end: the run is killed then
  // The run's duration is from the first attempt's start (not the claim: a tick claimed
  // ahead waits for its instant first) to the last one's end. None: it never started;
  // no end: it ended without a result (an exception), and counts until Finish.
  std::optional<SteadyTime> job_started_;
  std::optional<SteadyTime> job_ended_;
  bool killed_ = false;                // Kill() was sent to a run still going
  std::optional<int> guarded_;         // the process group armed in tick_.lease_guard
  // The valid_until the guard last received; behind valid_until_ when an arm was not
  // sent (Upkeep sends it again).
  std::optional<SteadyTime> guard_knows_;
  std::uint64_t guard_generation_ = 0;  // the guard process that received it (generation())
  // Renewals: shared with the renewal in flight, which may outlive the supervisor.
  struct RenewSlot;
  std::shared_ptr<RenewSlot> renew_;
  std::unique_ptr<ThreadPool> own_renew_threads_;  // when tick_.renew_threads is null

  mutable std::mutex mu_;  // guards the fields below
  std::condition_variable cv_;
  jobs::Execution* exec_ = nullptr;  // the running attempt, if any
  bool stop_retries_ = false;
  std::optional<jobs::RunOutcome> terminate_reason_;
  bool started_ = false;   // Start() was called
  bool returned_ = false;  // Main() has returned on its thread: Join() may go on
};

}  // namespace tickd::app
