// The claim interface: for each tick (job, T) of each job, a Backend decides which
// replica runs it. The contract is docs/design.md §1; the per-store protocols are in
// docs/backends.md and at the top of each backend's .cc file.
//
// Three things are kept apart in every backend:
//   - the tick record (job, T): running → done, owner token, node, fence, exit
//     status, config hash; remembered for the retention period so a finished tick
//     is never claimed again (the key is the tick, not the job);
//   - the lease: expires on the backend's own clock when the holder stops renewing;
//   - the fence counter per job: durable, strictly increasing, and still increasing
//     after the store lost its data (see "Fences" below).
//
// Claims are monotonic per job: once a tick T2 of a job has been claimed (won by
// anyone, running or done, while the store remembers it: its record, or on Redis,
// etcd and ZooKeeper the job's head, which names the latest claimed tick), a first
// claim of an earlier tick T1 < T2 of that job is refused as kSuperseded, atomically
// inside the backend's claim decision. A lagging replica (its clock behind, or just started)
// can therefore never run an older tick after a newer one has started. A re-claim
// of a tick that was itself claimed before (recover: true after its holder's lease
// expired) is not a first claim and is still allowed: that tick was claimed before
// the later one, and recover promises it runs at least once.
//
// A claim that checks the clock (ClaimRequest::max_lead: every claim of the scheduler
// and of `tickd trigger`, not an ad-hoc lock's) is judged on the store's own clock
// first: further than max_lead ahead of its due instant → kEarly, nothing written; and
// a head of the job further than max_lead ahead of the store's clock (claimed for the
// future by an unchecked claim) does not supersede it (docs/design.md §1 rule 15).
//
// Fences only grow, even when the store comes back without its data (a Redis without
// persistence restarted, a fresh etcd data directory, a recreated database): every
// fence is at least a clock reading, in milliseconds, shifted left by 11 bits
// (kFenceEpochShift), so a store that starts over starts above every fence it handed
// out before. Two forms, by what the store's counter allows:
//   - a counter tickd writes (SQLite, Redis): fence = max(last fence + 1,
//     now_ms << 11), now from the store's clock — a hybrid logical clock. It also
//     covers a store that lost only its last writes (Redis appendfsync everysec);
//   - a count kept beside an epoch record (PostgreSQL: the sequence and tickd_epoch;
//     etcd and ZooKeeper: the job's head, moved by the claim's transaction): fence =
//     epoch_ms << 11 + n, epoch_ms read when tickd creates the epoch record in the
//     store, n the claims counted since then.
// Either way a fence is above every earlier one as long as the store's clock, when it
// starts over, is past the old fences' time — i.e. it was not set back, and the
// counter grew by fewer than 2^11 a millisecond on average (no store comes near).
// Counters of an older tickd (small numbers) are left far below. Fences are positive
// int64 and stay below 2^53 until the year 2109 (exact in a double: Lua, JSON). The
// memory backend keeps plain counters: nothing of it outlives the process.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "base/error.h"

namespace tickd::lock {

using std::chrono::milliseconds;

// A fence is at least (clock_ms << kFenceEpochShift): see the top of this file.
inline constexpr int kFenceEpochShift = 11;

struct ClaimRequest {
  std::string job;
  std::int64_t tick_unix = 0;              // T: the scheduled instant, seconds since epoch (UTC)
  std::string node;                        // this replica's node id
  std::string owner_token;                 // fresh per claim, ≥128 random bits, hex
  milliseconds lease{15'000};              // lease TTL on the backend's clock
  // The tick is `missed` once the backend's clock is past T + starting_deadline.
  // std::nullopt: no deadline (misfire: run-once catching up after an outage).
  std::optional<milliseconds> starting_deadline = milliseconds(60'000);
  bool forbid_overlap = true;              // concurrency: forbid → `busy` while another tick runs
  bool recover = false;                    // a running tick whose lease expired may be re-claimed
  std::string config_hash;                 // hash of the job's effective definition
  WallTime node_wall;                      // this replica's wall clock when it tried (ledger, skew)
  // Also record this replica's Observation of the outcome (won lost busy missed, with
  // node, node_wall, config_hash, fence) in the same call, when the backend can:
  // ClaimOutcome::observed says it did, and the caller then does not Record it. Saves
  // the ledger its own round trip per claim. Backends that cannot ignore it.
  bool observe = false;
  // The latest tick of this job this replica has seen claimed in the store (its own
  // win, or a lost, busy or superseded answer naming it); 0: none. A store whose claim
  // head of the job (or, without a head, its latest record) is below it has lost data
  // this replica saw: it restarted empty, or lost its last writes. The backend then
  // answers kStoreReset and writes nothing, in the same atomic decision as the claim.
  // Backends that keep no such head (memory, SQLite) may ignore it.
  std::int64_t known_tick = 0;
  // The store's clock check (docs/design.md §1 rule 15). Set: the claim is refused as
  // kEarly, nothing written, when the store's clock reads before T + due_offset −
  // max_lead (a replica whose clock is ahead claims before its tick's time); and a
  // head of the job further than max_lead ahead of the store's clock (a claim a wrong
  // clock, or an unchecked claim, made for the future) does not make this claim
  // kSuperseded. The scheduler sends the claim's lead (at least lock.claim_lead) +
  // lock.clock_tolerance.
  // std::nullopt: no check (ad-hoc locks, whose fresh ticks run ahead of the clock by
  // design). The none backend has no store and checks nothing; SQLite's store clock
  // is the host's kernel clock, which a replica's own faked clock does not move.
  std::optional<milliseconds> max_lead;
  milliseconds due_offset{0};              // T's jitter offset: its due instant is T + this
  // A hint, never a rule: the tick lies in another replica's slice of the instant
  // (lock/claim_spread.h), which that replica claims first, so by the time this claim
  // is sent it is most likely decided. A backend may read such claims before it
  // claims (a read is cheaper than a claim that loses) and claim only those still
  // open; it must answer exactly as it would have without the hint.
  bool likely_decided = false;
};

enum class ClaimStatus {
  kWon,     // this replica runs the tick; `fence` is set
  kLost,    // another replica holds or finished this tick; `holder_node` names it
  kBusy,    // forbid: an earlier tick of the job still runs; holder_node/holder_tick_unix say where
  kMissed,  // the backend's clock is past T + starting_deadline: nobody may start it
  // A later tick of the job was already claimed (won by anyone, running or done):
  // claims are monotonic per job, so this earlier tick never runs. holder_tick_unix
  // is that later tick (the latest claimed), holder_node who claimed it when the
  // backend knows (empty otherwise). Not returned for a recover re-claim of a tick
  // claimed before.
  kSuperseded,
  // The store no longer knows a claim of this job that this replica saw
  // (ClaimRequest::known_tick): it lost its data. Nothing was written. holder_tick_unix
  // is the latest tick the store still knows of the job (0: none). The caller does not
  // run: a run of a forgotten claim may still be going elsewhere, and the forgotten
  // tick may be claimed again (docs/design.md §1 rule 12).
  kStoreReset,
  // ClaimRequest::max_lead: the store's clock reads before the tick's due instant minus
  // max_lead, so this replica's clock is ahead of the store's. Nothing was written (the
  // caller records its observation). store_ms is the store's clock that judged it.
  kEarly,
};

// "won" "lost" "busy" "missed" "superseded" "store-reset" "early" (inline: every backend target uses it,
// and they are linked into tickd_lock, not the other way round).
inline std::string_view ClaimStatusName(ClaimStatus s) {
  switch (s) {
    case ClaimStatus::kWon:
      return "won";
    case ClaimStatus::kLost:
      return "lost";
    case ClaimStatus::kBusy:
      return "busy";
    case ClaimStatus::kMissed:
      return "missed";
    case ClaimStatus::kSuperseded:
      return "superseded";
    case ClaimStatus::kStoreReset:
      return "store-reset";
    case ClaimStatus::kEarly:
      return "early";
  }
  return "unknown";
}

struct ClaimOutcome {
  ClaimStatus status = ClaimStatus::kLost;
  std::uint64_t fence = 0;  // kWon: strictly greater than every earlier fence of the job
  // kLost: the winner; kBusy: the node running the earlier tick; kSuperseded: the node
  // that claimed the later tick, when known.
  std::string holder_node;
  // kBusy: the tick that holder runs; kLost: T; kSuperseded: the later tick claimed.
  std::int64_t holder_tick_unix = 0;
  std::string holder_config_hash;          // kLost/kBusy: the holder's config hash, when known
  // kLost: true while the tick's record is still `running` (its holder runs it, or
  // died and its lease has not expired yet); false once it is `done`. A recover: true
  // loser keeps re-claiming the tick only while this is true.
  bool holder_running = false;
  // The backend recorded this replica's Observation of this outcome with the claim
  // (ClaimRequest::observe): no Record call is needed for it.
  bool observed = false;
  // The store's clock when it decided, ms since the epoch; 0 when the backend did not
  // read it (none, a claim without max_lead). etcd's is the middle of what its members'
  // Date headers (whole seconds) bound its clock to when the claim's batch began, just
  // after node_wall was read (lock/clock_check.h, SecondClockBound).
  std::int64_t store_ms = 0;
  // How far store_ms may be off either way (etcd: half its narrowed Date window; 0
  // where the store's clock is read exactly).
  std::int64_t store_error_ms = 0;
  // store_ms is the store's clock when the claim's batch began, just after node_wall
  // and the scheduler's sending (etcd: read off its bound for that instant), not when
  // the claim was decided, somewhere between the sending and the answer's arrival.
  bool store_ms_at_batch_start = false;
};

// A claim this replica won and still holds.
struct HeldClaim {
  std::string job;
  std::int64_t tick_unix = 0;
  std::string owner_token;
  std::uint64_t fence = 0;
  milliseconds lease{15'000};
};

enum class RenewStatus {
  kRenewed,  // the lease runs for another `lease` from the backend's now
  kLost,     // the claim is no longer ours (expired and taken, or released): stop the run
};

// What Refence did (docs/design.md §1 rule 14: each retry of a run under a new fence).
enum class RefenceStatus {
  kRefenced,  // the tick record now carries `fence`; the lease and owner are unchanged
  kNotOwner,  // the claim is not ours any more (another owner, done, or the lease
              // expired): nothing was changed
};

struct RefenceOutcome {
  RefenceStatus status = RefenceStatus::kNotOwner;
  // kRefenced: the claim's new fence, drawn as a claim's fence is (see "Fences" at the
  // top of this file): strictly greater than every fence the job had before, this
  // claim's included, and below every later claim's.
  std::uint64_t fence = 0;
};

// How a run ended, recorded on the tick when the claim is completed.
struct Completion {
  std::string outcome;               // "done" "failed" "timeout" "lease-lost" "killed" "released"
  std::optional<int> exit_code;      // absent when the job never ran or died of a signal
  milliseconds duration{0};
  // The tail of what the run printed, stored with the tick (docs/design.md §4
  // lock.history): text as jobs/output_tail.h writes it (valid UTF-8, no NUL, at most
  // kMaxStoredOutputBytes); "" when it printed nothing or nothing is kept. Written in
  // the same owner-checked step as the completion: a non-owner stores nothing.
  std::string output;
  // Retention by count: once this output is stored, only the outputs of the job's
  // newest `keep_outputs` runs that stored one are kept (older ticks keep their record
  // and lose their output). 0: no count limit (age retention, Prune, still applies).
  int keep_outputs = 0;
};

// The largest Completion::output a backend accepts (lock.history.output ≤ 64 KiB, plus
// the tail's note): what the per-store request limits are sized against
// (docs/backends.md). Backends store OutputToStore(output).
inline constexpr std::size_t kMaxStoredOutputBytes = 64 * 1024 + 64;

// `output`, or when it is longer than kMaxStoredOutputBytes its end from the first
// whole line that fits (a line boundary is never inside a UTF-8 character).
inline std::string_view OutputToStore(std::string_view output) {
  if (output.size() <= kMaxStoredOutputBytes) return output;
  const std::size_t nl = output.find('\n', output.size() - kMaxStoredOutputBytes - 1);
  return nl == std::string_view::npos ? std::string_view() : output.substr(nl + 1);
}

enum class CompleteStatus {
  kCompleted,  // the record is `done` with the completion; the lease is gone
  kNotOwner,   // the stored owner token is not ours: nothing was changed
};

// One claim to complete in a CompleteBatch.
struct CompleteRequest {
  HeldClaim held;
  Completion completion;
};

// What one replica saw of one tick (DESIGN §1 rule 8).
struct Observation {
  std::string job;
  std::int64_t tick_unix = 0;
  std::string node;
  std::string outcome;  // the tick outcome: won lost busy missed superseded error (+ skipped)
  WallTime node_wall;                // the replica's own wall clock when it tried
  std::string config_hash;
  std::uint64_t fence = 0;           // for won
};

// Everything the ledger knows of one tick, for `tickd status` and /api/status.
struct TickHistory {
  std::string job;
  std::int64_t tick_unix = 0;
  std::string winner;                // empty when nobody won (all missed / errors)
  std::string state;                 // "running" "done" or "" (no record)
  std::string run_outcome;           // Completion::outcome once done
  std::optional<int> exit_code;
  milliseconds duration{0};
  std::uint64_t fence = 0;
  std::string config_hash;           // the winner's
  std::vector<Observation> observations;  // one per replica that tried
  // Completion::output while kept, "" otherwise. History leaves it empty (its frequent
  // readers, the skew watch on every replica, must not page through outputs); the
  // readers of outputs fill it from Backend::Outputs.
  std::string output;
};

// The ledger keeps one observation per replica and tick, the latest by node_wall
// (docs/design.md §1 rule 8). A store that keeps the claimer's observation in the
// tick's record (etcd, ZooKeeper) adds it here: it replaces one of the claimer's own
// from no later than its claim (a loss seen before it re-claimed the tick), the record
// winning a tie, and stays behind a later one.
inline void AddClaimerObservation(std::vector<Observation>& observations, Observation claimer) {
  for (Observation& own : observations) {
    if (own.node != claimer.node) continue;
    if (own.node_wall <= claimer.node_wall) own = std::move(claimer);
    return;
  }
  observations.push_back(std::move(claimer));
}

// A claim that is still running, as `tickd locks` lists it.
struct RunningClaim {
  std::string job;
  std::int64_t tick_unix = 0;
  std::string node;                  // the holder
  std::uint64_t fence = 0;
  std::string config_hash;
  std::optional<milliseconds> lease_left;  // nullopt: the backend cannot tell
  bool holder_alive = true;          // false: the lease expired or the holder is known dead
};

enum class ForceReleaseStatus {
  kReleased,     // the running record is now `done` with outcome "released"
  kNotRunning,   // no running record for (job, T): nothing changed
  kHolderAlive,  // the holder still holds a live lease: nothing changed
};

// A job paused cluster-wide by `tickd pause` (docs/design.md §1 rule 13): while it
// holds, no replica claims the job's ticks; each replica logs them `skipped`.
struct Pause {
  std::string job;                   // a job name, or kAllJobs: every job of the store
  std::optional<WallTime> until;     // ends by itself at this instant; nullopt: until resumed
  WallTime since;                    // when it was set, on the clock of who set it
  std::string by;                    // who set it (the node id of `tickd pause`)
  std::string reason;                // free text for the operators; may be empty
};

// Pause::job of a pause of every job (not a valid job name: names are [a-z0-9._-]).
inline constexpr std::string_view kAllJobs = "*";

// Whether `pause` stops the tick of `job` at T: it names the job or every job, and
// T is before its end.
inline bool PauseHolds(const Pause& pause, std::string_view job, WallTime tick) {
  return (pause.job == job || pause.job == kAllJobs) && (!pause.until || tick < *pause.until);
}

// A Backend decides, for each tick of each job, which replica runs it.
// Thread-safe. No call waits for another replica; each returns within the
// backend's operation timeout. Errors are returned, never thrown: an error from
// Claim means "unknown" and the caller must not run (fail closed).
class Backend {
 public:
  virtual ~Backend() = default;

  // The scheme this backend serves ("sqlite", "memory", "redis", …), for logs/metrics.
  virtual std::string_view name() const = 0;

  // Things the operator should know at start (no persistence, remote file system…).
  virtual std::vector<std::string> StartupWarnings() { return {}; }

  // What the operator should know of the store's size as it grows (etcd: a history
  // never compacted, a db near its quota; ZooKeeper: the znodes its last Prune left).
  // etcd's are part of StartupWarnings; the scheduler asks after each hourly prune.
  virtual std::vector<std::string> SizeWarnings() { return {}; }

  // Won / Lost / Busy / Missed / Superseded as ClaimStatus says; an Error when the backend did
  // not answer or failed (the claim may or may not have been recorded).
  virtual Result<ClaimOutcome> Claim(const ClaimRequest& req) = 0;

  // Claims several ticks due at the same instant. Backends that can batch (one
  // round trip) override it; results are in the order of `reqs`.
  virtual std::vector<Result<ClaimOutcome>> ClaimBatch(std::span<const ClaimRequest> reqs) {
    std::vector<Result<ClaimOutcome>> out;
    out.reserve(reqs.size());
    for (const ClaimRequest& r : reqs) out.push_back(Claim(r));
    return out;
  }

  // Called once per request of ClaimBatchAsAnswered, with its index in `reqs`.
  using ClaimAnswer = std::function<void(std::size_t index, Result<ClaimOutcome> outcome)>;

  // As ClaimBatch, but hands each answer over as soon as the backend knows it, so the
  // first jobs of a big batch can start before the last claims are decided. Calls
  // `on_answer` exactly once per request, in any order, one call at a time (not
  // necessarily on the calling thread), and returns after the last. `on_answer` must
  // not call this backend: the batch may hold its connection until it returns.
  // Backends that answer a batch at once keep this default.
  virtual void ClaimBatchAsAnswered(std::span<const ClaimRequest> reqs,
                                    const ClaimAnswer& on_answer) {
    std::vector<Result<ClaimOutcome>> out = ClaimBatch(reqs);
    out.resize(reqs.size(), MakeError(std::string(name()), "no answer for this claim"));
    for (std::size_t i = 0; i < reqs.size(); ++i) on_answer(i, std::move(out[i]));
  }

  // REQUIRES: `held` came from a kWon outcome of this backend.
  // Extends the lease by held.lease from the backend's now, only if the stored owner
  // token is still held.owner_token and the lease has not expired.
  virtual Result<RenewStatus> Renew(const HeldClaim& held) = 0;

  // REQUIRES: `held` came from a kWon outcome of this backend (with the fence of its
  // last kRefenced, if any).
  // Gives the claim a new fence, in one atomic step of the store, only if the stored
  // owner token is still held.owner_token, the record is running and the lease has not
  // expired (the same test as Renew's). The record, History and ListRunning show the
  // new fence; the lease is not extended. The caller then renews and completes with
  // held.fence set to the new fence (backends that key anything by the fence move it
  // here). An Error when the store did not answer: the fence may or may not have moved,
  // and the claim is still this caller's as far as Renew and Complete are concerned.
  virtual Result<RefenceOutcome> Refence(const HeldClaim& held) = 0;

  // Owner-checked: marks the tick done with `completion` and drops the lease (and the
  // job's run marker). Never touches a claim whose token differs.
  virtual Result<CompleteStatus> Complete(const HeldClaim& held, const Completion& completion) = 0;

  // Completes several claims, each as Complete does; results are in the order of
  // `reqs`. Backends that can batch (one round trip) override it.
  virtual std::vector<Result<CompleteStatus>> CompleteBatch(
      std::span<const CompleteRequest> reqs) {
    std::vector<Result<CompleteStatus>> out;
    out.reserve(reqs.size());
    for (const CompleteRequest& r : reqs) out.push_back(Complete(r.held, r.completion));
    return out;
  }

  // Ledger: records what this replica saw of a tick. Best effort for the caller:
  // a failure is logged, never changes what runs.
  virtual Result<void> Record(const Observation& obs) = 0;

  // The last `limit` ticks of `job` (all jobs when empty), newest first.
  virtual Result<std::vector<TickHistory>> History(std::string_view job, int limit) = 0;

  // The stored outputs (Completion::output) of `ticks` of `job`, in the order of
  // `ticks`: "" for a tick without one (it printed nothing, it is not done, or its
  // output was dropped by retention). The default is for stores that keep no outputs.
  virtual Result<std::vector<std::string>> Outputs(std::string_view job,
                                                   std::span<const std::int64_t> ticks) {
    (void)job;
    (void)ticks;
    return MakeError(std::string(name()), "this lock backend keeps no run output");
  }

  // Forgets tick records and observations of ticks before `older_than` (retention),
  // and the outputs of those ticks.
  // Never removes a record that is still running with a live lease.
  // Returns how many tick records were removed.
  virtual Result<int> Prune(WallTime older_than) = 0;

  // Operations (`tickd locks`).
  // Every tick record still in state running, oldest first, with its holder, fence,
  // config hash, what is left of the lease on the backend's clock (nullopt when the
  // backend cannot tell) and whether the holder still holds it.
  virtual Result<std::vector<RunningClaim>> ListRunning() = 0;
  // Marks a running tick whose holder is gone (lease expired or holder dead) as done
  // with outcome "released", atomically against the holder's Renew and Complete, which
  // are refused afterwards (kLost / kNotOwner); never touches a live holder's claim
  // (kHolderAlive). kNotRunning when (job, T) has no running record. An Error when the
  // backend did not answer (the release may or may not have happened).
  virtual Result<ForceReleaseStatus> ForceRelease(std::string_view job, std::int64_t tick_unix) = 0;

  // Pauses (`tickd pause` / `tickd resume`), kept in the store so every replica sees
  // them. A pause is read by the scheduler before each instant's claims; it is not
  // part of the claim's atomic decision (docs/design.md §1 rule 13).
  // Sets `pause`, replacing any pause of the same Pause::job.
  virtual Result<void> SetPause(const Pause& pause) = 0;
  // Removes the pause of `job` (kAllJobs: the pause of every job, not the pauses of
  // single jobs). False when there was none.
  virtual Result<bool> ClearPause(std::string_view job) = 0;
  // Every pause stored, ended ones included (the caller judges them with PauseHolds),
  // in job order.
  virtual Result<std::vector<Pause>> ListPauses() = 0;
};

}  // namespace tickd::lock
