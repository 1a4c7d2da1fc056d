// The daemon's scheduler: one timer queue for every job, claims at each tick, and a
// supervisor per won run on a thread from a pool (the loop itself is described at the
// top of scheduler.cc).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <queue>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "app/late_completes.h"
#include "app/log.h"
#include "app/metrics.h"
#include "app/notifier.h"
#include "app/peers.h"
#include "app/run_supervisor.h"
#include "app/runner.h"
#include "app/scheduled_job.h"
#include "base/clock.h"
#include "base/thread_pool.h"
#include "lock/backend.h"

namespace tickd::app {

// This replica's clock minus the store's, as far as it surely is: the store read its
// clock (`store`) somewhere between the claim's send and the handling of its answer,
// by this replica's clock, so the offset lies between those two minus `store`; the
// one nearest zero (0 when they straddle it). A claim that waited in queues (a busy
// instant) reads as a slow answer, not as a store clock ahead of ours.
std::chrono::milliseconds SurelyApart(WallTime sent, WallTime answered, WallTime store);

struct SchedulerOptions {
  std::string node;                         // this replica's node id
  std::chrono::milliseconds lease{15'000};  // lock.lease: TTL of every claim, counted from T
  // lock.stop_grace: a run with no renewal confirmed this long before its lease ends is
  // told to stop (docs/design.md §1 rule 2); nullopt: config::DefaultStopGrace(lease).
  std::optional<std::chrono::milliseconds> stop_grace;
  // lock.claim_lead: the ticks of an instant are claimed at least this long before it,
  // and a won tick's process is made ready this long before T and released at T
  // (docs/design.md §1 "Early claims"). 0: claimed at T (no adaptive lead either).
  // REQUIRES: below 1 s.
  std::chrono::milliseconds claim_lead{0};
  // lock.claim_lead_max: an instant with more claims than the store decides in
  // claim_lead is claimed earlier, as early as its claims need by the store's measured
  // pace, up to this (docs/design.md §1 "Adaptive lead"). At most claim_lead: the lead
  // is claim_lead always.
  std::chrono::milliseconds claim_lead_max{0};
  // lock.clock_tolerance: every claim asks the store to refuse it `early` when its due
  // instant is further than its lead (at least claim_lead) + this ahead of the store's
  // clock, and to pass
  // over a claim head that far ahead (docs/design.md §1 rule 15). nullopt: no check.
  std::optional<std::chrono::milliseconds> clock_tolerance = std::chrono::milliseconds(250);
  // node.clock_skew_warning: a `store-clock` line when this replica's clock is further
  // than this from the store's, as its claims measure it; 0: never (the gauge stays).
  std::chrono::milliseconds store_clock_warning{1'000};
  // The runs this replica has going at most: an instant's ticks beyond the free room
  // are not claimed (left to the other replicas), so a won tick always starts.
  int max_concurrent_runs = 64;
  std::size_t missed_log_limit = 10;        // per job per wake-up; the rest is one summary
  std::chrono::milliseconds retention{7LL * 24 * 3'600'000};  // lock.retention: older ticks
  std::chrono::milliseconds prune_every{3'600'000};           //   are pruned this often
  config::HistorySettings history;          // lock.history: run outputs kept in the store
  // The longest real-time wait of a supervisor or of Shutdown before it reads the
  // Clock again. Only matters for a FakeClock (tests set 1 ms).
  std::chrono::milliseconds max_real_wait{1'000};
  // Counters for /metrics and the loop heartbeat (/healthz, systemd watchdog); null:
  // none. REQUIRES: outlives the scheduler.
  Metrics* metrics = nullptr;
  // The longest the loop sleeps without a turn (the heartbeat must keep coming while
  // nothing is due; the daemon sets it below the watchdog interval).
  std::chrono::milliseconds max_sleep{3'600'000};
  // The loop watch (docs/design.md §9): the loop is stuck once it has slept
  // `loop_slack` past the wake-up it planned, or spent `turn_stall` in a turn without
  // progress (a claim round or answer, a ledger write, the pause read). A thread of the
  // scheduler judges it every `loop_check_every` of real time (0: no such thread;
  // tests call CheckLoop()).
  std::chrono::milliseconds loop_check_every{0};
  std::chrono::milliseconds loop_slack{5'000};
  std::chrono::milliseconds turn_stall{30'000};
  // The replicas claiming beside this one: the ticks of one instant are claimed in
  // the order of this replica's rank among them (lock/claim_spread.h). Null: in the
  // order they were due. REQUIRES: outlives the scheduler.
  const Peers* peers = nullptr;
  // Notifications: won runs hand their end to it (on_success / on_failure), missed
  // ticks their miss (on_miss). Null: none. REQUIRES: outlives the scheduler.
  Notifier* notifier = nullptr;
  // Won runs tell it their process groups and leases (app/lease_guard.h). Null: none.
  // REQUIRES: outlives the scheduler.
  LeaseGuard* lease_guard = nullptr;
};

// A fresh claim owner token: 128 random bits from the kernel (getrandom), hex.
std::string NewOwnerToken();

// When a batch of claims was sent, on both clocks: a won tick's lease counts from
// `steady`, and its run starts no sooner, on the monotonic clock, than `wall` then
// said its instant was (WonTick::claim_wall).
struct ClaimSent {
  SteadyTime steady;
  WallTime wall;
};

// What a batch's answers prove of the store's clock when the batch was sent, and so how
// long after its due instant, on this replica's clock, a run won in it starts so that
// it starts at T by the store's clock (docs/design.md §1 rule 15). Each answer read the
// store's clock (ClaimOutcome::store_ms ± store_error_ms) somewhere between the batch's
// sending and its own arrival, so the store's clock read at least store_ms −
// store_error_ms − (arrival − sending) at the sending; etcd's (read off its bound) and
// SQLite's (the host's clock) are for the instant the batch began, at the sending
// (store_ms_at_batch_start). The latest such bound of the answers
// seen: a store that decides a big batch claim by claim reads its clock up to the
// batch's time after the sending, and counting from that reading alone started a
// replica ahead by 0.2 s up to 170 ms early at an instant of 3,000 jobs.
class StoreClockAtSend {
 public:
  explicit StoreClockAtSend(ClaimSent sent) : sent_(sent) {}
  // An answer, arrived at `arrived` (this replica's monotonic clock).
  void See(const lock::ClaimOutcome& outcome, SteadyTime arrived);
  // How far this replica's clock may have been ahead of the store's at the sending,
  // from the answers seen (0: not ahead, or no answer read the store's clock): a clock
  // that is right waits how late the best of them read it, about a one-way trip
  // (etcd: up to its bound's width). The clocks are read in whole ms (Clock), which
  // can make it up to 2 ms short.
  std::chrono::milliseconds StartDelay() const;

 private:
  ClaimSent sent_;
  std::optional<std::int64_t> earliest_ms_;  // the store's clock at the sending: at least
};

// Thread-safe. Start() once; Shutdown() (or the destructor) once.
class Scheduler {
 public:
  Scheduler(Clock& clock, lock::Backend& backend, Runner& runner, Logger& log,
            SchedulerOptions options);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Starts the loop with `jobs`. Ticks due now (within their starting deadline) are
  // claimed at once; misfire: run-once jobs claim their latest missed tick.
  void Start(JobSet jobs);
  // Replaces the job set: removed jobs get no more ticks, changed ones (other config
  // hash) get their next ticks recomputed (a tick already come but not yet claimed —
  // its jittered run not yet due — is kept when the new schedule has it), unchanged
  // ones keep theirs; running runs finish under the definition they started with.
  // Returns once the loop took it.
  void Reload(JobSet jobs);
  // Stops claiming, lets running runs finish for up to `grace`, then terminates them
  // (outcome killed) and waits until every claim is completed.
  void Shutdown(std::chrono::milliseconds grace);
  // Cuts a Shutdown's grace short (a second SIGTERM): the runs are terminated now.
  void EndGrace();

  // Runs whose claims are not completed yet.
  int active_runs() const;
  // Names of the jobs the loop schedules now.
  std::vector<std::string> job_names() const;
  // The jobs the loop schedules now (shared, not copied), in name order.
  JobSet jobs() const;
  // At most kLedgerSample jobs whose ledger shows what the replicas are doing now: the
  // jobs this replica sent claims for most recently, newest first, then (to fill up,
  // before the first claims) the first in name order. The skew watch reads only
  // these, so its reads twice a second cost the same at 10 jobs and at 10,000.
  static constexpr std::size_t kLedgerSample = 8;
  std::vector<std::string> ledger_sample() const;
  // For tests: while the loop sleeps with nothing due, the Steady() deadline it sleeps
  // until; nullopt while it works.
  std::optional<SteadyTime> sleeping_until() const;
  // Shutdown() has begun: the loop claims and records nothing more.
  bool Stopping() const;

  // The loop as another thread sees it (it needs nothing from the loop's thread, so a
  // stuck loop cannot hide). Not stuck before Start() and once Shutdown() began.
  struct LoopHealth {
    bool stuck = false;
    bool sleeping = false;  // the loop was asleep; else inside a turn
    // Asleep: how long past its planned wake-up (0 before it); in a turn: how long
    // since its last progress.
    std::chrono::milliseconds behind{0};
  };
  LoopHealth loop_health() const;
  // Judges the loop now: sets the stuck gauge and logs `loop outcome=stuck` when it
  // becomes stuck (again each minute it stays so, with how long by then) and
  // `outcome=recovered` when it moves again. The watch thread calls it.
  void CheckLoop();

 private:
  enum class EntryKind {
    kTick,     // the job's next tick
    kCatchUp,  // misfire run-once at startup: claimed without a deadline
    kRecheck,  // recover: true: a lost tick claimed again in case its holder died
  };
  struct Entry {
    std::int64_t due_ms = 0;  // when the loop acts on it (wall, ms): T + jitter offset
    std::int64_t tick = 0;
    std::string job;
    EntryKind kind = EntryKind::kTick;
    // kTick: claimed at T, not claim_lead before it (an early claim found the job's
    // previous run still going: it is asked again when it would have been without a lead).
    bool at_instant = false;
    // A kTick taken up ahead of its instant: not before this (wall ms), the due instant
    // of the job's previous tick, whatever lead its instant gets beyond claim_lead.
    std::int64_t not_before_ms = 0;
    // kTick: how many claims of this tick the store did not answer; each is sent again
    // while the tick can still start (RetryClaim).
    int errors = 0;
    bool operator>(const Entry& o) const { return due_ms > o.due_ms; }
    // Claimed with a lead: taken up with the other ticks of its due instant (instants_).
    bool Leads() const { return kind == EntryKind::kTick && !at_instant; }
  };
  // Tick `tick` of `job`, due at `due_ms` (ScheduledJob::DueMs: T, or later with
  // jitter). A kTick is taken up a lead before that (LeadOf(Instant)), the others then.
  Entry TickEntry(const ScheduledJob& job, std::int64_t tick,
                  EntryKind kind = EntryKind::kTick) const {
    return Entry{job.DueMs(tick), tick, job.job.name, kind};
  }
  using Heap = std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>>;
  // The kTicks due at one wall ms, taken up together a lead before it.
  struct Instant {
    std::vector<Entry> entries;
    std::int64_t not_before_ms = 0;  // the latest Entry::not_before_ms of them
  };
  // Queues an entry: a kTick with its instant (instants_), anything else in queue_.
  void Push(Entry e);
  // Every entry queued, in no order; both queues are left empty.
  std::vector<Entry> TakeQueued();
  // The lead an instant due at `due_ms` is claimed with now (docs/design.md §1
  // "Adaptive lead"): claim_lead, or what its claims need at the store's measured pace,
  // at most claim_lead_max, and beyond claim_lead never before `not_before_ms`.
  std::chrono::milliseconds InstantLead(std::int64_t due_ms, const Instant& instant) const;
  // The lead `claims` claims get at the measured pace: claim_lead to claim_lead_max.
  std::chrono::milliseconds LeadFor(std::size_t claims) const;
  // When the loop next has something to do for the queued entries (wall ms), or nullopt.
  std::optional<std::int64_t> NextActMs() const;
  // Learns the store's pace from a claim batch: `claims` decided in `took` (a batch of
  // only a few claims teaches nothing: its time is its round trip).
  void MeasureClaims(std::size_t claims, std::chrono::duration<double, std::milli> took);

  void Loop();
  // The watch thread: CheckLoop() every loop_check_every until Shutdown().
  void Watch();
  // The loop made progress (turn_stall counts from here).
  void Progress() { progress_ms_.store(clock_.Steady().time_since_epoch().count()); }
  void BuildInitialQueue(std::int64_t now_ms);
  void ApplyReload(const JobSet& jobs, std::int64_t now_ms);
  void ProcessDue(std::int64_t now_ms);
  // Takes every entry due at `now_ms` off the queues: queue_'s, and each instant whose
  // lead has come (all its ticks together) with the instants before it; sets the lead
  // gauge.
  std::vector<Entry> TakeDue(std::int64_t now_ms);
  // Pushes the first tick of `job` after `after` that the loop has not seen.
  void PushNext(const ScheduledJob& job, std::int64_t after);
  void SkipMissed(const ScheduledJob& job, std::int64_t first_missed, std::int64_t now_ms);
  // A `missed` tick line was logged: on_miss, if the job has one (the notifier's
  // thread asks the store who sends it). `store_said`: the claim answered missed.
  void NotifyMissed(const ScheduledJob& job, std::int64_t tick, bool store_said);
  // Claims the ticks of one instant (`group`), in rounds that fit the room for runs.
  void ClaimGroup(std::vector<Entry> group);
  // One round: claims group[from…] until `room` claims are sent, in one batch, and
  // handles the answers; returns the index of the first entry left for the next
  // round (group.size(): none). `room` <= 0: claims nothing; each claimable entry
  // goes to NoRoomFor.
  std::size_t ClaimRound(const std::vector<Entry>& group, std::size_t from, int room);
  // ledger_sample(): the jobs of the claims about to be sent.
  void NoteRecentClaims(const std::vector<lock::ClaimRequest>& reqs);
  // An entry this replica has no room to claim: a tick is logged `skipped`
  // (reason=max_concurrent_runs) and left to the other replicas; an early claim is
  // asked again at its instant, a recheck in lease/2. `lead`: as in ClaimRound.
  void NoRoomFor(const ScheduledJob& job, const Entry& e, const lock::ClaimRequest& req,
                 std::chrono::milliseconds lead);
  // `earlier_errors`: claims of this tick sent before this one that the store did not
  // answer (Entry::errors).
  void HandleOutcome(const std::shared_ptr<const ScheduledJob>& job, EntryKind kind,
                     const lock::ClaimRequest& req, const Result<lock::ClaimOutcome>& result,
                     ClaimSent claim_sent, const StoreClockAtSend& store_clock,
                     int earlier_errors);
  // A claim of a tick that the store did not answer (`error`, its `errors`-th) is sent
  // again while the tick can still start (docs/design.md §1 rule 7): kClaimRetryFirst
  // later, twice as long after each, up to kClaimRetryLongest; logged `claim …
  // outcome=error retry_in=`, the tick line waiting for the last answer. False when no
  // retry would be sent before the tick's starting deadline.
  bool RetryClaim(const ScheduledJob& job, const lock::ClaimRequest& req, int errors,
                  const Error& error);
  static constexpr std::chrono::milliseconds kClaimRetryFirst{1'000};
  static constexpr std::chrono::milliseconds kClaimRetryLongest{16'000};
  // recover: true: claims `tick` again in lease/2 (HandleOutcome decides whether to
  // go on: while the backend says it still runs).
  void ScheduleRecheck(const ScheduledJob& job, std::int64_t tick);
  // `lead`: how long before T the claim was sent (0: at or after T); the run is
  // released at T.
  // `start_delay`: its batch's StoreClockAtSend::StartDelay; the run starts that much
  // after its due instant on this replica's clock.
  void StartRun(const std::shared_ptr<const ScheduledJob>& job, lock::HeldClaim held,
                ClaimSent claim_sent, std::chrono::milliseconds lead,
                std::chrono::milliseconds start_delay);
  Metrics& metrics() const { return options_.metrics ? *options_.metrics : NullMetrics(); }
  // The job's `tick` line (docs/design.md §6); `due=` when the job has jitter.
  void LogTick(const ScheduledJob& job, const lock::ClaimRequest& req, std::string_view outcome,
               std::vector<Field> extra, LogLevel level = LogLevel::kInfo);
  // Records this replica's view of a tick in the ledger, best effort; inside
  // ClaimGroup only once the group's runs have started (observe_later_).
  void Observe(const lock::ClaimRequest& req, std::string_view outcome, std::uint64_t fence);
  void WriteObservation(const lock::Observation& obs);
  // What this replica learned of the store's claims of a job (docs/design.md §1 rule
  // 12): the latest tick it saw claimed, sent as ClaimRequest::known_tick so that a
  // store that lost it answers store-reset; and when it last answered that.
  struct StoreMemory {
    std::int64_t known_tick = 0;
    std::optional<std::int64_t> reset_seen_ms;  // wall ms of the last store-reset answer
    // The latest tick of the job whose claim the store answered other than early:
    // after a wall-clock step back, the ticks past it are taken up again (rule 15).
    std::int64_t answered_tick = 0;
  };
  // This replica's clock against the store's at a claim (ClaimOutcome::store_ms),
  // read between the claim's send (req.node_wall) and `answered` (this replica's
  // clock when the answer is handled): the offset gauge, and a `store-clock` line when
  // it goes beyond the warning and back.
  void SeeStoreClock(const lock::ClaimRequest& req, const lock::ClaimOutcome& outcome,
                     WallTime answered);
  // The wall clock went back (a clock that was ahead, mended): each job's next tick
  // is the first after now and after the latest tick the store answered other than
  // early, so the ticks its clock ran ahead to (refused, nothing run) are claimed again.
  void RequeueAfterStepBack(std::int64_t now_ms);
  // Updates the job's StoreMemory from a claim's answer.
  void Remember(const lock::ClaimRequest& req, const Result<lock::ClaimOutcome>& result);
  // Why this replica must not claim (job, tick) now after a store-reset (the fields of
  // its tick line), or nullopt: claim it, and the request's known_tick.
  std::optional<std::vector<Field>> HeldBackByStoreReset(const std::string& job,
                                                         std::int64_t tick, std::int64_t now_ms,
                                                         std::int64_t& known_tick);
  // `tickd pause` (docs/design.md §1 rule 13): reads the store's pauses, once per
  // turn that has ticks due, before their claims. A failed read keeps the pauses read
  // before (a pause holds through a store hiccup); changes are logged and exported.
  void RefreshPauses(std::int64_t now_ms);
  // The pause that stops (job, tick), or null.
  const lock::Pause* PauseOf(const std::string& job, std::int64_t tick) const;
  // The tick of a run of `job` this replica has not completed yet, if any.
  std::optional<std::int64_t> LocalRunOf(const std::string& job) const;
  void ReapFinished();
  // Forgets ticks older than the retention (every replica does it; it is idempotent).
  void PruneWhenDue(std::int64_t now_ms);
  // Wakes the loop until it has seen `done()` become true.
  template <typename Pred>
  void WakeLoopUntil(Pred done);

  Clock& clock_;
  lock::Backend& backend_;
  Runner& runner_;
  Logger& log_;
  const SchedulerOptions options_;

  // The loop thread only.
  std::map<std::string, std::shared_ptr<const ScheduledJob>> jobs_;
  Heap queue_;                                // rechecks, catch-ups, claims at T
  std::map<std::int64_t, Instant> instants_;  // kTicks by due instant (wall ms)
  std::size_t instant_ticks_ = 0;             // the entries of instants_, all together
  // The store's pace as this replica's claim batches measured it: ms per claim, an
  // average weighted by batch size (MeasureClaims); before any batch, kFirstClaimMs.
  double claim_ms_ = 0;
  bool claim_measured_ = false;
  std::int64_t next_prune_ms_ = 0;  // wall ms; 0: at the first turn
  // Prune runs on a thread of its own (at thousands of jobs it takes seconds, which a
  // due claim must not wait for); a prune still going when the next is due skips it.
  std::thread pruner_;
  std::atomic<bool> pruning_{false};
  bool pruned_once_ = false;        // the first prune's size warnings were start-up warnings
  std::int64_t last_turn_ms_ = 0;   // wall ms when the last turn began (a step back: less)
  std::vector<lock::Pause> pauses_;          // as last read (RefreshPauses)
  std::set<std::string> paused_jobs_;         // of jobs_, those paused at the last read
  bool pauses_unreadable_ = false;            // the last read failed (logged once)
  // Per job, the latest tick the loop has taken up (claimed, early or not): a reload
  // schedules the job's changed definition from the tick after it.
  std::map<std::string, std::int64_t> claimed_through_;
  // While ClaimGroup runs: where Observe puts the ledger writes it defers, and how
  // many ticks it claims (the runs it starts keep off the CPUs while the starts of
  // the instant go on: WonTick::instant_claims).
  std::vector<lock::Observation>* observe_later_ = nullptr;
  std::size_t instant_claims_ = 0;

  mutable std::mutex mu_;  // guards the fields below
  std::condition_variable cv_;
  std::thread loop_;
  bool started_ = false;
  bool stopping_ = false;
  bool grace_ended_ = false;
  bool loop_exited_ = false;
  std::optional<JobSet> pending_jobs_;
  std::uint64_t reload_requested_ = 0;
  std::uint64_t reload_applied_ = 0;
  std::optional<SteadyTime> sleeping_until_;
  std::thread watch_;                   // Watch(); joined by Shutdown()
  std::condition_variable watch_cv_;    // wakes Watch() for Shutdown()
  std::atomic<std::int64_t> progress_ms_{0};  // Steady() ms of the loop's last progress

  // CheckLoop's memory (its callers: the watch thread, tests).
  std::mutex check_mu_;
  std::optional<SteadyTime> stuck_logged_;  // when `loop outcome=stuck` was last logged
  std::chrono::milliseconds stuck_behind_{0};  // the last stuck judgement's `behind`
  JobSet job_set_;  // what jobs() and job_names() answer
  std::deque<std::string> recent_claims_;  // ledger_sample(): newest first, distinct
  // Before runs_: the runs' renewals are sent from here; its destructor waits for the
  // ones still in flight, so none outlives the scheduler (nor the backend).
  ThreadPool renew_threads_{std::chrono::seconds(60), kMaxRenewThreads};
  // Completes the store did not take while their lease lasted (recover: false); before
  // runs_: the runs hand theirs over as they end.
  LateCompletes late_completes_;
  ThreadPool run_threads_;  // before runs_: each run's thread comes from here
  std::list<std::unique_ptr<RunSupervisor>> runs_;

  // Claim answers may arrive on a backend's thread (ClaimBatchAsAnswered).
  std::mutex store_memory_mu_;
  std::map<std::string, StoreMemory> store_memory_;
  bool store_clock_warned_ = false;  // under store_memory_mu_: a store-clock line is out

  // WarnSharedNodeId's memory: the wall clock at Start(), and when (steady ms) it last
  // logged; the answers come on the loop's and the backend's threads.
  std::atomic<std::int64_t> started_wall_ms_{0};
  std::atomic<std::int64_t> shared_node_id_logged_ms_{-1};
  // A tick this replica lost to a winner of its own node id: another process claims
  // under the same id (docs/design.md §6 `node-id-conflict`).
  void WarnSharedNodeId(const lock::ClaimRequest& req);
};

}  // namespace tickd::app
