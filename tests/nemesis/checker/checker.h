// The nemesis checker (issue #14): reads what the fenced resource journaled
// (tests/nemesis/resource/resource.h), what every replica logged (DESIGN §6 logfmt)
// and which faults the driver injected, and says whether tickd kept its promises. It
// shares no code with tickd: it parses the journal, the logs and the fault windows
// itself, so a bug in tickd's own parsing or bookkeeping cannot hide a violation.
//
// ---- Inputs -------------------------------------------------------------------------
// Attempt: one journal line (one BEGIN at the resource): job, tick, fence, replica,
//   accepted, start_ms/end_ms (the resource's real clock), ended, seq (decision order).
// LogEvent: one `tick`, `run` or `lease` line of a replica's log; ts_ms is the time the
//   line carries (that replica's wall clock: faked under a replica-clock fault).
// LeaseExpiry: one line of the driver's store leases file (driver/lease_watch.h): the
//   store's ListRunning showed the claim (job, tick, fence) still running but its
//   lease over on the store's clock, by expired_by_ms (real time). Optional.
// FaultWindow: one line of the driver's fault windows file: fault, target (a node id,
//   or the store), [start_ms, end_ms] real time, effect, took_effect. Windows with
//   took_effect=false or effect "none" explain nothing.
// CheckSpec: the expected ticks and each job's lease and concurrency (below).
//
// ---- Terms and counts ---------------------------------------------------------------
// tick            an expected (job, T): T a multiple of the job's `every_s` with
//                 window_start_ms <= T·1000 < window_end_ms, or T in the job's explicit
//                 `ticks` list. `ticks` counts them.
// run             a (job, T, fence) with a `run` line in some replica's log — a run
//                 tickd started and saw end. `runs` counts them.
// accepted        a journal attempt with accepted=true (any tick, expected or not).
// rejected_stale  a journal attempt with accepted=false: the resource refused a fence
//                 not above the job's highest accepted one (fencing at work).
// missed          an expected tick with no accepted attempt. Each is either explained
//                 (below) or counted in unexplained_missed too.
// duplicate       per (job, T) with n > 1 accepted attempts, n − 1 duplicates.
// fence order     per job, accepted attempts in decision order (seq; start_ms when
//                 there is no seq) must carry strictly increasing fences; each accepted
//                 attempt whose fence is not above every earlier accepted one of its job
//                 is a fence_order_violation.
// lease validity  (DESIGN §1 rule 2) for an accepted attempt (job, T, fence f, replica r,
//                 start s): r's `tick` line job=J tick=T outcome=won fence=f at t_won
//                 starts the lease; it ends at the earliest of t_won + lease_ms (no
//                 renewal counts: renewals keep a *running* job's lease, but a write
//                 begins as the run starts, so a run whose write begins a full lease
//                 after its claim started after the lease it was given ran out), r's
//                 `lease` line outcome=lost and r's `run` line outcome=lease-lost for
//                 (J, T, f). The attempt is a lease_violation when s > end +
//                 lease_tolerance_ms. Unverifiable — counted in lease_unchecked, never a
//                 violation — when r logged no such won line (a SIGKILLed replica may
//                 lose its last lines) or a took-effect replica-clock fault on r overlaps
//                 [s − lease_ms, s] (r's log times are then not real time).
// stale_accepted  accepted attempts that are a fence_order_violation or a
//                 lease_violation (or both: counted once).
// overlap         (concurrency forbid only) an accepted attempt that starts before an
//                 earlier-starting accepted attempt of the same job ended (start_ms <
//                 end_ms − overlap_tolerance_ms). `allow` jobs may overlap.
// lateness        for each expected tick with an accepted attempt, the first accepted
//                 attempt's start_ms − T·1000; lateness_p99_ms is the nearest-rank 99th
//                 percentile (0 when there is none), lateness_max_ms the largest.
// late write      (DESIGN §1 rule 2: by the end of its lease a run is gone) a write by
//                 a run — its BEGIN, or one of its WRITEs, accepted or refused — after
//                 the run was cut off: after the first write (start_ms) of an accepted
//                 attempt of the job with a higher fence, or after a replica's
//                 `tick … outcome=won` line of the job with a higher fence (the store
//                 had ended this run's lease when it granted that claim) — both only
//                 where the later fence shows the end of this run's claim: a `forbid`
//                 job, or a re-claim of the same tick
//                 (`recover`); an `allow` job's runs may overlap — or after the store
//                 said the run's own lease was over (a LeaseExpiry of its job, tick
//                 and fence): its lease's end as the store sees it. A won line of a
//                 replica with a took-effect replica-clock fault anywhere in the cell
//                 is not read (its time is not real time). A run whose replica was
//                 stopped (SIGSTOP) counts like any: its lease guard kills it at
//                 valid_until (DESIGN §1 rule 2). late_writes counts such writes;
//                 each cut-off run that wrote late is one violation.
// early start     (DESIGN §1 "Early claims": no run starts before T) an attempt, accepted
//                 or not, whose start_ms (the resource's real clock) is before T·1000 —
//                 by more than clock_tolerance_ms when its replica's clock was faked in
//                 the cell (rule 15: a clock ahead by less than lock.clock_tolerance is
//                 not refused and starts that much early; the bound its store keeps).
// injected        fault windows with took_effect=true.
// scope           every count and violation above but ticks, missed and lateness is
//                 limited to attempts (run lines, fault windows) inside the spec's scope
//                 (default: all); a duplicate is in scope when one of its attempts is.
//
// ---- When a missed tick is explained -----------------------------------------------
// A fault window F covers replica r for tick T when F took effect, its effect is not
// "none", it concerns r — effects "store-down" and "store-slow" (and any window whose
// target is "", "*", "all" or "store") concern every replica, other effects only the
// replica named in target — and [F.start_ms, F.end_ms] overlaps
// [T·1000 − lease_ms − before_ms, T·1000 + after_ms] (a fault shortly before T can still
// hold T back: a dead holder's lease, a reconnect). A replica-clock window is judged by
// the real clock: it may cost the cluster no more ticks than a crash of its replica at
// the step (start_ms) and at the step back (end_ms) would, so it covers r only when one
// of those two instants falls in that interval.
// Replica r could not run T when any of:
//   (a) a fault window covers r for T;
//   (b) r's tick line for T says an outcome other than won, lost and busy (error,
//       missed, superseded, or a word added later) — but not `superseded` by a
//       later_tick claimed more than 1 s (claim_lead's bound) before it was due, by the
//       time of r's line (r's clock not faked): only a clock ahead claims so early,
//       and that costs more than a crash;
//   (c) r's tick line says busy with holder h and holder_tick T', and either a fault
//       window covers h for T, or the run of (J, T') was still going at T·1000 (an
//       accepted attempt of (J, T') with end_ms >= T·1000, or h's `run` line for (J, T')
//       at or after T·1000), or h's tick line for (J, T') says error and T·1000 is
//       before that line's time + lease_ms (a claim answered with an error can stand in
//       the store unrun until its lease ends — Redis `?wait` refusing a claim too few
//       replicas acknowledged, a claim that timed out after it was written): forbid
//       doing its job;
//   (d) r's tick line says lost with winner w and a fault window covers w for T (the
//       winner's claim went through, then it could not run it: the answer was lost,
//       it was killed, cut off, stopped), or w's own tick line for (J, T) says error
//       (the claim stands in the store, its answer to w was an error: not run);
//   (A replica whose clock is ahead that claims later ticks early and begins their
//   runs at once, so that an on-time run the fence then refuses misses its tick, is
//   not an explanation: those runs are early starts, and the miss costs more than a
//   crash of that replica would.)
// A missed tick is explained when every replica (spec.replicas, or every node seen in
// the logs) could not run it; otherwise it is unexplained — e.g. some replica logged
// won (or lost to a winner) and no fault touched the winner, yet nothing reached the
// resource.
//
// A cell passes when duplicates, stale_accepted, overlaps, unexplained_missed,
// late_writes and early_starts are all 0.
#pragma once

#include <cstdint>
#include <filesystem>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tickd::nemesis {

struct Attempt {
  std::string job;
  std::int64_t tick = 0;
  std::uint64_t fence = 0;
  std::string replica;
  bool accepted = false;
  std::optional<std::uint64_t> last_fence;
  std::int64_t start_ms = 0;
  std::int64_t end_ms = 0;
  std::string ended;                 // "end" | "disconnect" | "rejected" | "shutdown" | …
  std::uint64_t seq = 0;             // 0: not journaled (then start_ms orders)
  std::vector<std::int64_t> writes;  // the WRITEs after BEGIN (resource ms), in order
  std::size_t writes_refused = 0;    // the last this many of them were refused
  std::string where;                 // "journal.jsonl:12", for evidence
};

struct LogEvent {
  std::string event;  // "tick" | "run" | "lease" | "complete" (a completion's warning)
  std::int64_t ts_ms = 0;
  std::string node;
  std::string job;
  std::int64_t tick = 0;
  std::string outcome;
  std::optional<std::uint64_t> fence;
  std::string winner;                       // lost
  std::string holder;                       // busy
  std::optional<std::int64_t> holder_tick;  // busy
  std::optional<std::int64_t> later_tick;   // superseded
  std::string where;                        // "n1.log:40"
};

struct LeaseExpiry {
  std::string job;
  std::int64_t tick = 0;
  std::uint64_t fence = 0;
  std::string holder;
  std::int64_t expired_by_ms = 0;
  std::string where;  // "store_leases.jsonl:3"
};

struct FaultWindow {
  std::string fault;
  std::string target;
  std::int64_t start_ms = 0;
  std::int64_t end_ms = 0;
  std::string effect;  // replica-isolated | store-down | store-slow | replica-clock |
                       // replica-down | none
  bool took_effect = false;
};

struct JobSpec {
  std::string name;
  std::int64_t every_s = 0;         // @every N s: the ticks in the window; 0 = use `ticks`
  std::vector<std::int64_t> ticks;  // explicit expected ticks (added to every_s's)
  std::int64_t lease_ms = 15000;    // lock.lease
  bool forbid = true;               // concurrency: forbid (default) | allow
};

struct CheckSpec {
  std::int64_t window_start_ms = 0;  // expected ticks: window_start_ms <= T·1000 < end
  std::int64_t window_end_ms = 0;
  std::vector<JobSpec> jobs;          // a job met in the journal but not listed: forbid, 15 s
  std::vector<std::string> replicas;  // empty: every node seen in the logs
  std::int64_t before_ms = 2000;      // fault reach before T, on top of the lease
  std::int64_t after_ms = 1000;       // fault reach after T
  std::int64_t lease_tolerance_ms = 10;
  std::int64_t overlap_tolerance_ms = 0;
  // How early a replica whose clock was faked (a took-effect replica-clock window on
  // it) may begin a run without an early start: what its store's clock check allows.
  std::int64_t clock_tolerance_ms = 0;
  // The attempts this cell answers for: start_ms in [scope_start_ms, scope_end_ms).
  // Attempts outside are history only (the fence order and overlaps look back at
  // them) and are neither counted nor reported; nor are run lines or fault windows
  // outside it. Default: everything given. For a driver that runs cells one after
  // another against one resource and one journal.
  std::int64_t scope_start_ms = std::numeric_limits<std::int64_t>::min();
  std::int64_t scope_end_ms = std::numeric_limits<std::int64_t>::max();
};

struct Counts {
  std::int64_t injected = 0;
  std::int64_t ticks = 0;
  std::int64_t runs = 0;
  std::int64_t accepted = 0;
  std::int64_t rejected_stale = 0;
  std::int64_t missed = 0;
  std::int64_t unexplained_missed = 0;
  std::int64_t duplicates = 0;
  std::int64_t stale_accepted = 0;
  std::int64_t fence_order_violations = 0;
  std::int64_t lease_violations = 0;
  std::int64_t lease_unchecked = 0;
  std::int64_t overlaps = 0;
  std::int64_t late_writes = 0;
  std::int64_t early_starts = 0;
  std::int64_t lateness_p99_ms = 0;
  std::int64_t lateness_max_ms = 0;
};

struct Violation {
  std::string check;  // duplicate | fence-order | lease | overlap | unexplained-missed |
                      // late-write | early-start
  std::string job;
  std::int64_t tick = 0;
  std::string evidence;  // the journal and log places and values that show it
};

struct Report {
  Counts counts;
  std::vector<Violation> violations;
  bool Passed() const;
  std::string ToJson() const;  // {"passed":…, "counts":{…}, "violations":[{…}]}
  std::string ToText() const;  // counts on one line, then one line per violation
};

Report Check(const CheckSpec& spec, const std::vector<Attempt>& journal,
             const std::vector<LogEvent>& logs, const std::vector<FaultWindow>& faults,
             const std::vector<LeaseExpiry>& expiries = {});

// ---- Reading the inputs. Each returns false with *error = "FILE:LINE: reason" on a
// line it cannot read, and appends what it read. A torn last journal line (a resource
// killed mid-write) is skipped, not an error.
bool LoadJournal(const std::filesystem::path& file, std::vector<Attempt>* out, std::string* error);
// Keeps the tick, run and lease lines; every other line (other events, job output,
// text that is not logfmt) is skipped.
bool LoadLog(const std::filesystem::path& file, std::vector<LogEvent>* out, std::string* error);
bool LoadFaults(const std::filesystem::path& file, std::vector<FaultWindow>* out,
                std::string* error);
bool LoadLeaseExpiries(const std::filesystem::path& file, std::vector<LeaseExpiry>* out,
                       std::string* error);
// {"window":{"start_ms":…,"end_ms":…}, "scope":{"start_ms":…,"end_ms":…} (optional),
//  "replicas":["n1",…], "before_ms":…, "after_ms":…,
//  "lease_tolerance_ms":…, "overlap_tolerance_ms":…,
//  "jobs":[{"name":"j1","every_s":1,"ticks":[…],"lease_ms":3000,"concurrency":"forbid"}]}
bool LoadSpec(const std::filesystem::path& file, CheckSpec* out, std::string* error);

// One DESIGN §6 line ("<ts> <level> <event> k=v …"); nullopt when it is not a tick, run
// or lease line with a readable ts, job and tick.
std::optional<LogEvent> ParseLogEvent(std::string_view line);
// "2026-11-21T14:00:00.003Z" / "2026-11-21T14:00:00Z" → ms since the epoch.
std::optional<std::int64_t> ParseUtcMs(std::string_view text);

}  // namespace tickd::nemesis
