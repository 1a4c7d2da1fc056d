/* The scheduler loop
 * ------------------
 * One thread serves every job of this replica from ONE timer queue, one entry per job
 * holding its next tick: its ticks by due instant (instants_), rechecks, catch-ups
 * and claims put off to T in a min-heap (queue_). Each turn of the loop:
 *
 *   1. applies a pending reload (the job set is swapped between turns, never in
 *      the middle of one) and joins the supervisors of finished runs;
 *   2. reads the wall clock and pops every entry due (the ticks of one instant are
 *      due together, a lead before their T: claim_lead, or more for an instant with
 *      more claims than the store's measured pace decides in claim_lead, up to
 *      claim_lead_max and never before a job's previous tick — docs/design.md §1
 *      "Early claims", "Adaptive lead"; the claim names T, the store's lease counts
 *      from T, and the won run starts at T, made ready claim_lead before it). An entry whose
 *      T + starting_deadline is already past (the daemon was paused, the machine
 *      slept, the wall clock stepped forward) is `missed` without a claim; after a
 *      long pause the misses are logged one by one up to a limit and then summed
 *      up in one line, and the job jumps to its first tick still startable. Every
 *      other entry is claimed, and the job's following tick is pushed;
 *   3. claims the popped ticks that share one instant together (Backend::ClaimBatch:
 *      one round trip where the backend can), each with a fresh owner token, this
 *      replica's slice of them first (lock/claim_spread.h, app/peers.h), and never
 *      more than it has room to start (max_concurrent_runs less the runs going: in
 *      rounds, a round's lost answers leaving room for the next; the ticks beyond
 *      are `skipped` here and left to the other replicas' claims). Won
 *      ticks go to a RunSupervisor, on a thread of the scheduler's pool; lost /
 *      busy / missed / error are only logged (an error fails closed: nothing runs
 *      without `won`). Every outcome is recorded in the ledger, best effort, once
 *      the group's runs have started: a slow store must not hold a start up;
 *   4. sleeps until the next entry is due. Ticks are wall instants but the sleep
 *      is on the monotonic clock, for (due − wall now); after waking the wall clock is read
 *      again, so an NTP step in either direction only moves when the loop looks
 *      next (a step back sleeps again, a step forward makes ticks due or missed).
 *      A step back of more than a second takes each job up again from the new now,
 *      past the latest tick the store answered other than `early`: a clock that was
 *      ahead, mended, claims at once the ticks the store refused while it was ahead
 *      (docs/design.md §1 rule 15), never one the store decided.
 *
 * Every claim carries max_lead = its lead (at least claim_lead) + lock.clock_tolerance:
 * the store refuses it `early` when this replica's clock is more than the tolerance
 * ahead of the store's; nothing is written, the tick line says the offset, and the
 * replicas whose clocks are right run the tick. Every answer with the store's clock
 * updates the offset gauge and, beyond node.clock_skew_warning, a `store-clock` line
 * (SeeStoreClock).
 *
 * Why one queue and one thread: the loop never waits on a run (supervisors do),
 * so its only latency is the claim round trip; thousands of jobs cost one sleeping
 * thread, not one each, and there is no fixed-interval polling: the loop wakes for
 * a tick, a reload or shutdown (Clock::Wake), nothing else.
 *
 * recover: true jobs: a tick lost to another replica is claimed again every lease/2
 * for as long as the backend answers that it is still running
 * (ClaimOutcome::holder_running); it is won only once the holder died and its lease
 * expired on the backend (docs/design.md §1 rule 5), and then runs here. A done or missed
 * answer ends the rechecks.
 *
 * At startup only, each job's latest tick is looked at: still inside its starting
 * deadline → claimed now (a replica restarted at 14:00:00.5 still competes for
 * 14:00:00); past it and misfire: run-once → claimed without a deadline, so the
 * first replica back after an outage in which every replica was down runs it once
 * (anyone who recorded that tick makes it `lost`).
 *
 * Once an hour (and at start) the loop also prunes tick records older than the
 * retention; that deadline is part of its sleep like a tick.
 *
 * A loop that stops turning must not go unnoticed (an LD_PRELOAD clock faker once
 * made its sleep last for decades; a store call could hang): it publishes the
 * wake-up it plans before each sleep and stamps its progress inside a turn, and
 * another thread judges it from those alone (loop_health(), CheckLoop(): /healthz,
 * the stuck gauge, the `loop` lines). A loop that sleeps until a far tick is not
 * stuck; one that oversleeps its own plan, or makes no progress in a turn, is.
 *
 * The loop stops when Shutdown() is called: it finishes the turn it is in (claims
 * already sent are handled), claims nothing more and exits; Shutdown then lets
 * the runs finish for the grace period and terminates the rest.
 */
#include "app/scheduler.h"

#include <sys/random.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <exception>
#include <random>
#include <set>
#include <utility>

#include "app/backend_call.h"
#include "app/tzdata.h"
#include "lock/claim_spread.h"

namespace tickd::app {

using std::chrono::milliseconds;

namespace {

// With no job to wait for, the loop still wakes now and then (harmless; reloads
// and shutdown wake it anyway).
constexpr milliseconds kIdleSleep{3'600'000};
// After a pause this long in ticks, the loop stops walking the missed ticks one by
// one and jumps ahead (an @every 1s job paused for a month).
constexpr std::size_t kMaxMissedWalk = 100'000;
// While the loop stays stuck, its `loop outcome=stuck` line comes again this often.
constexpr milliseconds kStuckLogEvery{60'000};
// A wall clock this much behind the previous turn's was set back.
constexpr milliseconds kStepBack{1'000};
// Adaptive lead (docs/design.md §1): before any batch is measured, a claim is taken to
// cost this (1,000 claims/s); a lead is the instant's claims at the measured pace times
// kLeadSafety; a batch of kPaceClaims claims weighs half of the pace, and one of fewer
// than kPaceMinClaims is not measured (its time is mostly the round trip, which would
// make the pace of a big batch read many times too slow).
constexpr double kFirstClaimMs = 1.0;
constexpr double kLeadSafety = 1.5;
constexpr std::size_t kPaceClaims = 256;
constexpr std::size_t kPaceMinClaims = 16;

std::int64_t WallMs(const Clock& clock) { return clock.Wall().time_since_epoch().count(); }

std::int64_t FloorDiv(std::int64_t a, std::int64_t b) {
  return a / b - ((a % b != 0) && ((a < 0) != (b < 0)) ? 1 : 0);
}

// How long before its due instant (wall ms: T, or later with jitter) a claim was
// made (0: at or after it).
milliseconds LeadOf(std::int64_t due_ms, const lock::ClaimRequest& req) {
  const milliseconds ahead = WallTime(milliseconds(due_ms)) - req.node_wall;
  return std::max(milliseconds(0), ahead);
}

}  // namespace

std::string NewOwnerToken() {
  // getrandom(2), not std::random_device: libstdc++'s device is RDSEED/RDRAND here,
  // which a VM may trap or make retry; with a token per claim it was a quarter of the
  // daemon's CPU when 100 jobs were due at once.
  std::array<unsigned char, 16> bytes{};
  std::size_t have = 0;
  while (have < bytes.size()) {
    const ssize_t n = getrandom(bytes.data() + have, bytes.size() - have, 0);
    if (n > 0) {
      have += static_cast<std::size_t>(n);
    } else if (errno != EINTR) {
      // No entropy source at all: fall back to the device rather than fail the claim.
      std::random_device rd;
      for (std::size_t i = have; i < bytes.size(); ++i) bytes[i] = static_cast<unsigned char>(rd());
      break;
    }
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

Scheduler::Scheduler(Clock& clock, lock::Backend& backend, Runner& runner, Logger& log,
                     SchedulerOptions options)
    : clock_(clock),
      backend_(backend),
      runner_(runner),
      log_(log),
      options_(std::move(options)),
      late_completes_(clock_, backend_, log_, options_.node, options_.retention,
                      options_.max_real_wait) {}

Scheduler::~Scheduler() {
  bool running;
  {
    std::lock_guard lock(mu_);
    running = started_ && !(loop_exited_ && runs_.empty() && !watch_.joinable());
  }
  if (running) Shutdown(milliseconds(0));
  if (pruner_.joinable()) pruner_.join();
}

void Scheduler::Start(JobSet jobs) {
  Progress();  // before started_: loop_health() judges the loop from then on
  {
    std::lock_guard lock(mu_);
    if (started_) return;
    started_ = true;
    for (auto& job : jobs) jobs_[job->job.name] = std::move(job);
    for (const auto& [name, job] : jobs_) job_set_.push_back(job);
  }
  metrics().ClaimLead(options_.claim_lead);  // exported from the start
  started_wall_ms_ = WallMs(clock_);
  loop_ = std::thread([this] { Loop(); });
  if (options_.loop_check_every > milliseconds(0)) {
    metrics().LoopStuck(milliseconds(0));  // exported from the start, for alerts
    watch_ = std::thread([this] { Watch(); });
  }
}

void Scheduler::Reload(JobSet jobs) {
  std::uint64_t wanted;
  {
    std::lock_guard lock(mu_);
    pending_jobs_ = std::move(jobs);
    wanted = ++reload_requested_;
    if (!started_) return;  // Start() has not run: the loop takes it first thing
  }
  WakeLoopUntil([&] { return reload_applied_ >= wanted; });
}

template <typename Pred>
void Scheduler::WakeLoopUntil(Pred done) {
  std::unique_lock lock(mu_);
  // Clock::Wake may be taken by another thread sleeping on the same clock (other
  // replicas in tests), so keep waking until the loop has seen it.
  while (!done() && !loop_exited_) {
    lock.unlock();
    clock_.Wake();
    lock.lock();
    cv_.wait_for(lock, milliseconds(1));
  }
}

void Scheduler::Shutdown(milliseconds grace) {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    if (!started_) loop_exited_ = true;  // no loop to wait for
  }
  watch_cv_.notify_all();
  if (watch_.joinable()) watch_.join();
  WakeLoopUntil([] { return false; });
  if (loop_.joinable()) loop_.join();
  if (pruner_.joinable()) pruner_.join();  // a prune still going ends by its deadline

  auto active = [this] {
    return std::count_if(runs_.begin(), runs_.end(), [](const auto& r) { return !r->done(); });
  };
  std::list<std::unique_ptr<RunSupervisor>> runs;
  {
    std::unique_lock lock(mu_);
    for (auto& r : runs_) r->StopRetries();
    const SteadyTime end = clock_.Steady() + grace;
    while (active() > 0 && clock_.Steady() < end && !grace_ended_) {
      cv_.wait_for(lock, std::clamp<milliseconds>(end - clock_.Steady(), milliseconds(1),
                                                  options_.max_real_wait));
    }
    for (auto& r : runs_) {
      if (!r->done()) r->Terminate(jobs::RunOutcome::kKilled);
    }
    runs.swap(runs_);
  }
  runs.clear();  // joins: every claim is completed (or handed over) once this returns
  late_completes_.Stop();  // a shutdown ends their tries (docs/design.md §1 rule 4)
}

void Scheduler::EndGrace() {
  std::lock_guard lock(mu_);
  grace_ended_ = true;
  cv_.notify_all();
}

void Scheduler::RefreshPauses(std::int64_t now_ms) {
  Result<std::vector<lock::Pause>> read =
      CallBackend("pauses", [&] { return backend_.ListPauses(); });
  if (!read) {
    metrics().BackendError(backend_.name());
    if (!pauses_unreadable_) {
      log_.Log(LogLevel::kWarn, "pause",
               {{"node", options_.node},
                {"outcome", "error"},
                {"kept", pauses_.size()},
                {"error", read.error().ToString()}});
    }
    pauses_unreadable_ = true;
  } else {
    pauses_unreadable_ = false;
    pauses_ = std::move(*read);
  }
  // What changed since the last read, on the jobs this replica schedules.
  std::set<std::string> paused;
  std::vector<std::string> names;
  for (const auto& [name, job] : jobs_) {
    names.push_back(name);
    const lock::Pause* p = PauseOf(name, now_ms / 1000);
    if (p == nullptr) continue;
    paused.insert(name);
    if (paused_jobs_.contains(name)) continue;
    std::vector<Field> fields = {{"job", name},
                                 {"node", options_.node},
                                 {"outcome", "paused"},
                                 {"paused_by", p->by}};
    if (p->until) fields.emplace_back("until", FormatTimestamp(*p->until));
    if (!p->reason.empty()) fields.emplace_back("reason", p->reason);
    log_.Log(LogLevel::kInfo, "pause", fields);
  }
  for (const std::string& name : paused_jobs_) {
    if (!paused.contains(name) && jobs_.contains(name)) {
      log_.Log(LogLevel::kInfo, "pause",
               {{"job", name}, {"node", options_.node}, {"outcome", "resumed"}});
    }
  }
  paused_jobs_ = std::move(paused);
  metrics().JobsPaused(names, std::vector<std::string>(paused_jobs_.begin(), paused_jobs_.end()));
}

const lock::Pause* Scheduler::PauseOf(const std::string& job, std::int64_t tick) const {
  const WallTime at{std::chrono::seconds(tick)};
  for (const lock::Pause& p : pauses_) {
    if (lock::PauseHolds(p, job, at)) return &p;
  }
  return nullptr;
}

std::optional<std::int64_t> Scheduler::LocalRunOf(const std::string& job) const {
  std::lock_guard lock(mu_);
  for (const auto& r : runs_) {
    if (!r->done() && r->held().job == job) return r->held().tick_unix;
  }
  return std::nullopt;
}

int Scheduler::active_runs() const {
  std::lock_guard lock(mu_);
  return static_cast<int>(
      std::count_if(runs_.begin(), runs_.end(), [](const auto& r) { return !r->done(); }));
}

std::vector<std::string> Scheduler::job_names() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> names;
  for (const auto& job : job_set_) names.push_back(job->job.name);
  return names;
}

milliseconds SurelyApart(WallTime sent, WallTime answered, WallTime store) {
  const milliseconds at_send = sent - store;
  const milliseconds at_answer = std::max(answered, sent) - store;
  if (at_send > milliseconds(0)) return at_send;
  if (at_answer < milliseconds(0)) return at_answer;
  return milliseconds(0);
}

void Scheduler::NoteRecentClaims(const std::vector<lock::ClaimRequest>& reqs) {
  std::lock_guard lock(mu_);
  // The last ones sent are the newest; a batch bigger than the sample fills it alone.
  const std::size_t first = reqs.size() > kLedgerSample ? reqs.size() - kLedgerSample : 0;
  for (std::size_t i = first; i < reqs.size(); ++i) {
    std::erase(recent_claims_, reqs[i].job);
    recent_claims_.push_front(reqs[i].job);
  }
  while (recent_claims_.size() > kLedgerSample) recent_claims_.pop_back();
}

std::vector<std::string> Scheduler::ledger_sample() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> out(recent_claims_.begin(), recent_claims_.end());
  for (const auto& job : job_set_) {
    if (out.size() >= kLedgerSample) break;
    if (std::find(out.begin(), out.end(), job->job.name) == out.end()) {
      out.push_back(job->job.name);
    }
  }
  return out;
}

JobSet Scheduler::jobs() const {
  std::lock_guard lock(mu_);
  return job_set_;
}

std::optional<SteadyTime> Scheduler::sleeping_until() const {
  std::lock_guard lock(mu_);
  return sleeping_until_;
}

Scheduler::LoopHealth Scheduler::loop_health() const {
  const SteadyTime now = clock_.Steady();
  std::lock_guard lock(mu_);
  LoopHealth h;
  if (!started_ || stopping_ || loop_exited_) return h;
  if (sleeping_until_) {
    // The loop set it before sleeping and resets it (after Progress) once awake.
    h.sleeping = true;
    h.behind = std::max(milliseconds(0), now - *sleeping_until_);
    h.stuck = h.behind > options_.loop_slack;
  } else {
    h.behind = std::max(milliseconds(0), now - SteadyTime(milliseconds(progress_ms_.load())));
    h.stuck = h.behind > options_.turn_stall;
  }
  return h;
}

void Scheduler::CheckLoop() {
  const LoopHealth h = loop_health();
  const SteadyTime now = clock_.Steady();
  std::lock_guard lock(check_mu_);
  metrics().LoopStuck(h.stuck ? h.behind : milliseconds(0));
  if (h.stuck) {
    stuck_behind_ = h.behind;
    if (stuck_logged_ && now - *stuck_logged_ < kStuckLogEvery) return;
    stuck_logged_ = now;
    const milliseconds limit = h.sleeping ? options_.loop_slack : options_.turn_stall;
    log_.Log(LogLevel::kWarn, "loop",
             {{"node", options_.node},
              {"outcome", "stuck"},
              {"state", h.sleeping ? "sleeping" : "working"},
              {"stuck_for", FormatSeconds(h.behind)},
              {"limit", FormatSeconds(limit)}});
  } else if (stuck_logged_) {
    // `stuck_for`: as last judged stuck (the loop has moved since).
    stuck_logged_.reset();
    log_.Log(LogLevel::kInfo, "loop",
             {{"node", options_.node},
              {"outcome", "recovered"},
              {"stuck_for", FormatSeconds(stuck_behind_)}});
  }
}

bool Scheduler::Stopping() const {
  std::lock_guard lock(mu_);
  return stopping_;
}

void Scheduler::Watch() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    watch_cv_.wait_for(lock, options_.loop_check_every);
    if (stopping_) break;
    lock.unlock();
    CheckLoop();
    lock.lock();
  }
}

void Scheduler::Loop() {
  BuildInitialQueue(WallMs(clock_));
  while (true) {
    Progress();
    std::optional<JobSet> reload;
    std::uint64_t reload_number = 0;
    {
      // Here and before sleeping the loop reads stopping_ itself, not Stopping(): it
      // holds mu_ already (Stopping() takes mu_, which is not recursive), to read
      // stopping_ with pending_jobs_ and, there, to set sleeping_until_ in the same
      // section. Outside mu_ (ProcessDue, SkipMissed) it asks Stopping().
      std::lock_guard lock(mu_);
      if (stopping_) break;
      if (pending_jobs_) {
        reload = std::move(pending_jobs_);
        pending_jobs_.reset();
        reload_number = reload_requested_;
      }
    }
    if (reload) {
      ApplyReload(*reload, WallMs(clock_));
      std::lock_guard lock(mu_);
      reload_applied_ = reload_number;
      cv_.notify_all();
    }
    const std::int64_t turn_ms = WallMs(clock_);
    if (turn_ms < last_turn_ms_ - kStepBack.count()) RequeueAfterStepBack(turn_ms);
    last_turn_ms_ = turn_ms;
    ProcessDue(WallMs(clock_));
    // After the claims: joining the runs that ended (a hundred threads and their
    // stacks, after a busy second) takes milliseconds a due tick must not wait for.
    ReapFinished();
    Progress();
    PruneWhenDue(WallMs(clock_));
    Progress();
    metrics().LoopTurn();

    const std::int64_t now_ms = WallMs(clock_);
    milliseconds delay = std::min({kIdleSleep, options_.max_sleep,
                                   milliseconds(next_prune_ms_ - now_ms)});
    if (const std::optional<std::int64_t> act_ms = NextActMs()) {
      delay = std::min(delay, milliseconds(*act_ms - now_ms));
      if (delay <= milliseconds(0)) continue;  // became due while claiming
    }
    const SteadyTime deadline = clock_.Steady() + delay;
    {
      std::lock_guard lock(mu_);
      if (stopping_ || pending_jobs_) continue;
      sleeping_until_ = deadline;
    }
    clock_.SleepUntil(deadline);
    Progress();  // before the reset: a check in between must not see an old turn
    std::lock_guard lock(mu_);
    sleeping_until_.reset();
  }
  std::lock_guard lock(mu_);
  loop_exited_ = true;
  cv_.notify_all();
}

void Scheduler::BuildInitialQueue(std::int64_t now_ms) {
  const std::int64_t now_s = FloorDiv(now_ms, 1000);
  for (const auto& [name, job] : jobs_) {
    std::optional<std::int64_t> latest = job->prev ? job->prev(now_s + 1) : std::nullopt;
    if (latest) {
      if (*latest * 1000 + job->StartingDeadline(*latest).count() >= now_ms) {
        Push(TickEntry(*job, *latest));  // still startable: compete for it now
        continue;
      }
      if (job->job.misfire == config::Misfire::kRunOnce) {
        Push(TickEntry(*job, *latest, EntryKind::kCatchUp));
      }
    }
    PushNext(*job, now_s);
  }
}

void Scheduler::RequeueAfterStepBack(std::int64_t now_ms) {
  const std::int64_t now_s = FloorDiv(now_ms, 1000);
  for (Entry& e : TakeQueued()) {
    auto it = jobs_.find(e.job);
    if (e.kind == EntryKind::kTick && !e.at_instant && it != jobs_.end() && it->second->next) {
      std::int64_t answered = 0;
      {
        std::lock_guard lock(store_memory_mu_);
        answered = store_memory_[e.job].answered_tick;
      }
      // A tick at this very second included (next is strictly after).
      const std::optional<std::int64_t> t = it->second->next(std::max(now_s - 1, answered));
      if (t && *t < e.tick) {
        Push(TickEntry(*it->second, *t));
        claimed_through_[e.job] = std::min(claimed_through_[e.job], *t - 1);
        continue;
      }
    }
    Push(std::move(e));
  }
}

void Scheduler::ApplyReload(const JobSet& jobs, std::int64_t now_ms) {
  std::map<std::string, std::shared_ptr<const ScheduledJob>> next_jobs;
  for (const auto& job : jobs) next_jobs[job->job.name] = job;
  std::vector<Entry> kept_queue;
  std::set<std::string> kept;
  std::map<std::string, std::int64_t> arrived;  // changed jobs: a tick T <= now not yet claimed
  for (Entry& e : TakeQueued()) {
    auto now_it = jobs_.find(e.job);
    auto next_it = next_jobs.find(e.job);
    if (now_it != jobs_.end() && next_it != next_jobs.end() &&
        now_it->second->config_hash == next_it->second->config_hash) {
      kept_queue.push_back(e);  // unchanged: keeps the ticks it already waits for
      kept.insert(e.job);
    } else if (e.at_instant && next_it != next_jobs.end()) {
      kept_queue.push_back(e);  // a tick of the old schedule already due: claimed at T as planned
    } else if (e.kind == EntryKind::kTick && e.tick * 1000 <= now_ms) {
      arrived[e.job] = e.tick;
    }
  }
  jobs_ = std::move(next_jobs);
  for (Entry& e : kept_queue) Push(std::move(e));
  const std::int64_t now_s = FloorDiv(now_ms, 1000);
  JobSet job_set;
  job_set.reserve(jobs_.size());
  for (const auto& [name, job] : jobs_) {
    job_set.push_back(job);
    if (kept.contains(name)) continue;
    // A changed job whose tick T has come but was not claimed yet (its run was not due:
    // jitter; or the reload woke the loop just as T came) keeps T when the new
    // definition has it too: recomputing from now would silently drop it.
    if (auto a = arrived.find(name);
        a != arrived.end() && job->next && job->next(a->second - 1) == a->second) {
      Push(TickEntry(*job, a->second));
      continue;
    }
    // Past the ticks already claimed ahead of their instant: those run under the
    // definition they were claimed with, like runs already going.
    const auto ahead = claimed_through_.find(name);
    PushNext(*job, ahead != claimed_through_.end() ? std::max(now_s, ahead->second) : now_s);
  }
  std::erase_if(claimed_through_, [&](const auto& kv) { return !jobs_.contains(kv.first); });
  std::lock_guard lock(mu_);
  job_set_ = std::move(job_set);
}

void Scheduler::PushNext(const ScheduledJob& job, std::int64_t after) {
  if (!job.next) return;
  if (std::optional<std::int64_t> t = job.next(after)) {
    Entry e = TickEntry(job, *t);
    e.not_before_ms = job.DueMs(after);
    Push(std::move(e));
  }
}

void Scheduler::Push(Entry e) {
  if (!e.Leads()) {
    queue_.push(std::move(e));
    return;
  }
  Instant& instant = instants_[e.due_ms];
  instant.not_before_ms = std::max(instant.not_before_ms, e.not_before_ms);
  instant.entries.push_back(std::move(e));
  ++instant_ticks_;
}

std::vector<Scheduler::Entry> Scheduler::TakeQueued() {
  std::vector<Entry> out;
  for (; !queue_.empty(); queue_.pop()) out.push_back(queue_.top());
  for (auto& [due_ms, instant] : instants_) {
    for (Entry& e : instant.entries) out.push_back(std::move(e));
  }
  instants_.clear();
  instant_ticks_ = 0;
  return out;
}

milliseconds Scheduler::LeadFor(std::size_t claims) const {
  const milliseconds floor = options_.claim_lead;
  if (floor <= milliseconds(0) || options_.claim_lead_max <= floor) return floor;
  // The claims at the measured pace, with room to spare: the pace of the last batches
  // is not a promise for the next.
  const double need_ms = static_cast<double>(claims) *
                         (claim_measured_ ? claim_ms_ : kFirstClaimMs) * kLeadSafety;
  return std::clamp(milliseconds(static_cast<std::int64_t>(need_ms)), floor,
                    options_.claim_lead_max);
}

milliseconds Scheduler::InstantLead(std::int64_t due_ms, const Instant& instant) const {
  const milliseconds floor = options_.claim_lead;
  milliseconds lead = LeadFor(instant.entries.size());
  // Beyond claim_lead, never before a previous tick of one of its jobs: each job's
  // ticks are claimed in order, one taken up only once the one before it came.
  lead = std::min(lead, std::max(floor, milliseconds(due_ms - instant.not_before_ms)));
  return lead;
}

std::optional<std::int64_t> Scheduler::NextActMs() const {
  std::optional<std::int64_t> act;
  if (!queue_.empty()) act = queue_.top().due_ms;
  if (instants_.empty()) return act;
  // No instant has a longer lead than all the queued ticks together would get: none
  // further than that past the first can come before the first.
  const std::int64_t first_ms = instants_.begin()->first;
  const std::int64_t span_ms = LeadFor(instant_ticks_).count();
  for (auto it = instants_.begin(); it != instants_.end() && it->first <= first_ms + span_ms;
       ++it) {
    const std::int64_t at = it->first - InstantLead(it->first, it->second).count();
    act = act ? std::min(*act, at) : at;
  }
  return act;
}

void Scheduler::MeasureClaims(std::size_t claims, std::chrono::duration<double, std::milli> took) {
  if (claims < kPaceMinClaims) return;
  const double sample = took.count() / static_cast<double>(claims);
  // A batch of kPaceClaims claims weighs as much as everything measured before it.
  const double weight =
      1.0 - std::pow(0.5, static_cast<double>(claims) / static_cast<double>(kPaceClaims));
  claim_ms_ = claim_measured_ ? claim_ms_ + weight * (sample - claim_ms_) : sample;
  claim_measured_ = true;
}

std::vector<Scheduler::Entry> Scheduler::TakeDue(std::int64_t now_ms) {
  std::vector<Entry> popped;
  for (; !queue_.empty() && queue_.top().due_ms <= now_ms; queue_.pop()) {
    popped.push_back(queue_.top());
  }
  // Whole instants whose lead has come; and with the latest of them every earlier
  // instant whose jobs' previous ticks have come, so that none waits behind a big
  // instant's batch taken up long before it.
  std::optional<milliseconds> lead_taken;
  auto last = instants_.end();  // the latest instant whose lead has come
  const std::int64_t span_ms = LeadFor(instant_ticks_).count();  // no lead is longer
  for (auto it = instants_.begin(); it != instants_.end() && it->first <= now_ms + span_ms;
       ++it) {
    const milliseconds lead = InstantLead(it->first, it->second);
    if (it->first - lead.count() > now_ms) continue;
    lead_taken = std::max(lead_taken.value_or(lead), lead);
    last = it;
  }
  if (last == instants_.end()) return popped;
  const auto after_last = std::next(last);  // stays valid: erasing others keeps it
  for (auto it = instants_.begin(); it != after_last;) {
    const bool due = it->first - InstantLead(it->first, it->second).count() <= now_ms;
    if (!due && it->second.not_before_ms > now_ms) {
      ++it;
      continue;
    }
    instant_ticks_ -= it->second.entries.size();
    for (Entry& e : it->second.entries) popped.push_back(std::move(e));
    it = instants_.erase(it);
  }
  metrics().ClaimLead(*lead_taken);
  return popped;
}

void Scheduler::ProcessDue(std::int64_t now_ms) {
  std::vector<Entry> due;
  // Until nothing more is due: a missed tick's job may have one still startable now.
  for (std::vector<Entry> popped = TakeDue(now_ms); !popped.empty(); popped = TakeDue(now_ms)) {
    // Shutdown began: nothing more is claimed or recorded (each may take op_timeout
    // with the store gone, and a backlog of missed ticks would hold the stop for
    // minutes).
    if (Stopping()) return;
    for (Entry& e : popped) {
      auto it = jobs_.find(e.job);
      if (it == jobs_.end()) continue;
      const ScheduledJob& job = *it->second;
      if (e.kind == EntryKind::kTick && e.at_instant) {
        // Its following tick was pushed when it came up ahead of its instant.
        if (e.tick * 1000 + job.StartingDeadline(e.tick).count() < now_ms) {
          lock::ClaimRequest req;
          req.job = job.job.name;
          req.tick_unix = e.tick;
          req.node = options_.node;
          req.config_hash = job.config_hash;
          req.node_wall = clock_.Wall();
          LogTick(job, req, "missed", {});
          Observe(req, "missed", 0);
          NotifyMissed(job, e.tick, false);
          continue;
        }
      } else if (e.kind == EntryKind::kTick) {
        if (e.tick * 1000 + job.StartingDeadline(e.tick).count() < now_ms) {
          SkipMissed(job, e.tick, now_ms);  // pushes the first tick still startable
          continue;
        }
        PushNext(job, e.tick);
        claimed_through_[e.job] = e.tick;
      }
      due.push_back(std::move(e));
    }
  }
  if (!due.empty()) {
    RefreshPauses(now_ms);
    Progress();
  }
  std::stable_sort(due.begin(), due.end(),
                   [](const Entry& a, const Entry& b) { return a.tick < b.tick; });
  for (std::size_t i = 0; i < due.size();) {
    if (Stopping()) return;
    std::size_t j = i;
    while (j < due.size() && due[j].tick == due[i].tick) ++j;
    ClaimGroup(std::vector<Entry>(due.begin() + static_cast<std::ptrdiff_t>(i),
                                  due.begin() + static_cast<std::ptrdiff_t>(j)));
    i = j;
  }
}

void Scheduler::SkipMissed(const ScheduledJob& job, std::int64_t first_missed,
                           std::int64_t now_ms) {
  std::size_t count = 0;
  bool at_least = false;
  std::int64_t last = first_missed;
  std::optional<std::int64_t> t = first_missed;
  while (t && *t * 1000 + job.StartingDeadline(*t).count() < now_ms) {
    if (count < options_.missed_log_limit && !Stopping()) {
      lock::ClaimRequest req;
      req.job = job.job.name;
      req.tick_unix = *t;
      req.node = options_.node;
      req.config_hash = job.config_hash;
      req.node_wall = clock_.Wall();
      LogTick(job, req, "missed", {});
      Observe(req, "missed", 0);
      NotifyMissed(job, *t, false);
    }
    ++count;
    last = *t;
    if (count == kMaxMissedWalk) {
      // Jump close to now; the ticks jumped over are missed too but not counted.
      at_least = true;
      const std::int64_t from = FloorDiv(now_ms - job.StartingDeadline(last).count(), 1000) - 1;
      t = job.next(std::max(from, last));
      continue;
    }
    t = job.next(*t);
  }
  if (t) Push(TickEntry(job, *t));
  if (count > options_.missed_log_limit) {
    log_.Log(LogLevel::kWarn, "missed",
             {{"job", job.job.name},
              {"node", options_.node},
              {"count", (at_least ? ">=" : "") + std::to_string(count)},
              {"first", FormatTick(first_missed)},
              {"last", FormatTick(last)},
              {"logged", options_.missed_log_limit}});
  }
}

void Scheduler::NotifyMissed(const ScheduledJob& job, std::int64_t tick, bool store_said) {
  if (options_.notifier == nullptr || !job.job.on_miss) return;
  options_.notifier->Missed(backend_, job.job, job.config_hash, tick, store_said);
}

void Scheduler::ClaimGroup(std::vector<Entry> group) {
  // The ledger writes of this group wait until its runs have started: they are best
  // effort, and a store slow to answer, or cut off, would otherwise hold each start
  // up for its client's timeout and eat the lease (found by the nemesis).
  std::vector<lock::Observation> observations;
  observe_later_ = &observations;
  struct Unset {
    std::vector<lock::Observation>*& later;
    ~Unset() { later = nullptr; }
  } unset{observe_later_};
  const Peers::Rank rank = options_.peers != nullptr ? options_.peers->rank() : Peers::Rank{};
  if (rank.count > 1 && group.size() > 1) {
    // This replica's slice first, so the replicas do not all race for the same job
    // first (lock/claim_spread.h). Alone, the order stays: nothing to copy.
    std::vector<std::string_view> names;
    names.reserve(group.size());
    for (const Entry& e : group) names.push_back(e.job);
    std::vector<Entry> spread;
    spread.reserve(group.size());
    for (const std::size_t i : lock::SpreadOrder(names, rank.index, rank.count))
      spread.push_back(std::move(group[i]));
    group = std::move(spread);
  }
  // In rounds, each claiming no more ticks than this replica has room to start
  // (max_concurrent_runs less the runs going): a won tick always starts, and the
  // ticks it cannot start are left to the other replicas, which claim every tick of
  // the instant in their own order. A round's lost answers leave room for the next.
  for (std::size_t next = 0; next < group.size();) {
    Progress();
    next = ClaimRound(group, next, options_.max_concurrent_runs - active_runs());
  }
  observe_later_ = nullptr;
  for (const lock::Observation& obs : observations) WriteObservation(obs);
}

std::size_t Scheduler::ClaimRound(const std::vector<Entry>& group, std::size_t from, int room) {
  std::vector<lock::ClaimRequest> reqs;
  std::vector<std::shared_ptr<const ScheduledJob>> jobs;
  std::vector<EntryKind> kinds;  // parallel to reqs (entries held back here have none)
  std::vector<int> errors;       // parallel to reqs: Entry::errors
  const std::int64_t now_ms = WallMs(clock_);
  const Peers::Rank rank = options_.peers != nullptr ? options_.peers->rank() : Peers::Rank{};
  std::size_t next = from;
  for (; next < group.size(); ++next) {
    const Entry& e = group[next];
    const auto& job = jobs_.at(e.job);
    lock::ClaimRequest req;
    req.job = job->job.name;
    req.tick_unix = e.tick;
    req.node = options_.node;
    req.owner_token = NewOwnerToken();
    req.lease = job->lease.value_or(options_.lease);
    req.starting_deadline = e.kind == EntryKind::kCatchUp
                                ? std::nullopt
                                : std::optional<milliseconds>(job->StartingDeadline(e.tick));
    req.forbid_overlap = job->job.concurrency == config::Concurrency::kForbid;
    req.recover = job->job.recover;
    req.config_hash = job->config_hash;
    req.node_wall = clock_.Wall();
    // Claimed ahead of its due instant: the store's lease counts from that instant (it
    // gets lead + lease).
    const milliseconds lead = LeadOf(job->DueMs(req.tick_unix), req);
    // The store refuses a claim this replica's clock makes too soon (rule 15): one made
    // `lead` early by a clock that is right passes; one ahead beyond the tolerance not.
    if (options_.clock_tolerance) {
      req.max_lead = std::max(options_.claim_lead, lead) + *options_.clock_tolerance;
    }
    req.due_offset = milliseconds(job->DueMs(e.tick) - e.tick * 1000);
    req.likely_decided =
        rank.count > 1 && lock::SpreadSlice(req.job, rank.count) != rank.index;
    // Paused (`tickd pause`): no claim. A recheck of a lost tick just ends: the tick
    // line was logged at its first claim.
    if (const lock::Pause* pause = PauseOf(req.job, req.tick_unix)) {
      if (e.kind == EntryKind::kRecheck) continue;
      std::vector<Field> fields = {{"reason", "paused"}, {"paused_by", pause->by}};
      if (pause->until) fields.emplace_back("until", FormatTimestamp(*pause->until));
      if (pause->job == lock::kAllJobs) fields.emplace_back("all", "true");
      LogTick(*job, req, "skipped", std::move(fields));
      Observe(req, "skipped", 0);
      continue;
    }
    req.lease += lead;
    // forbid: a run of the job still going here is busy whatever the store says — a
    // store that lost its data (or a lease this replica just lost, its run still being
    // killed) would answer won and the two runs would overlap.
    if (req.forbid_overlap) {
      if (const auto running = LocalRunOf(req.job)) {
        if (lead > milliseconds(0) && e.kind == EntryKind::kTick) {
          // It may still end before its instant: ask then, as without a lead.
          queue_.push(Entry{job->DueMs(e.tick), e.tick, e.job, EntryKind::kTick, true});
          continue;
        }
        LogTick(*job, req, "busy",
                {{"holder", options_.node}, {"holder_tick", FormatTick(*running)}});
        Observe(req, "busy", 0);
        continue;
      }
    }
    if (auto held_back = HeldBackByStoreReset(req.job, req.tick_unix, now_ms, req.known_tick)) {
      if (e.kind != EntryKind::kRecheck) {
        LogTick(*job, req, "store-reset", std::move(*held_back), LogLevel::kWarn);
        Observe(req, "store-reset", 0);
      }
      continue;
    }
    if (static_cast<int>(reqs.size()) >= room) {
      if (room > 0) break;  // the next round claims it, with the room left then
      NoRoomFor(*job, e, req, lead);
      continue;
    }
    // The backend may write this replica's ledger observation with the claim (one
    // round trip, not two); a recheck records only a win, below.
    req.observe = e.kind != EntryKind::kRecheck;
    reqs.push_back(std::move(req));
    jobs.push_back(job);
    kinds.push_back(e.kind);
    errors.push_back(e.errors);
  }
  instant_claims_ = reqs.size();
  NoteRecentClaims(reqs);
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    if (kinds[i] != EntryKind::kTick) continue;  // catch-ups and rechecks are late by design
    // Measured from the due instant: a jittered run is not late for its jitter. An
    // early claim's run is measured at its release instead (RunSupervisor).
    if (LeadOf(jobs[i]->DueMs(reqs[i].tick_unix), reqs[i]) > milliseconds(0)) continue;
    metrics().FireLateness(
        reqs[i].job, reqs[i].node_wall - WallTime(milliseconds(jobs[i]->DueMs(reqs[i].tick_unix))));
  }
  // A won tick whose observation the claim wrote starts as soon as its answer is in
  // (a backend may answer a big batch call by call); everything else is handled once
  // the batch has returned, on this thread, because it may call the backend (Record),
  // which the batch may still hold. Answers come one at a time.
  std::vector<std::optional<Result<lock::ClaimOutcome>>> results(reqs.size());
  std::vector<char> handled(reqs.size(), 0);
  // When the batch is sent, on both clocks (ClaimSent): just before the call, as the
  // store's clock of etcd's answers is read for the instant the backend takes it.
  const ClaimSent claim_sent{clock_.Steady(), clock_.Wall()};
  StoreClockAtSend store_clock(claim_sent);
  const auto on_answer = [&](std::size_t i, Result<lock::ClaimOutcome> r) {
    if (i >= reqs.size()) return;
    if (r) store_clock.See(*r, clock_.Steady());
    if (r && r->status == lock::ClaimStatus::kWon && r->observed) {
      HandleOutcome(jobs[i], kinds[i], reqs[i], r, claim_sent, store_clock, errors[i]);
      handled[i] = 1;
    }
    results[i] = std::move(r);
  };
  try {
    backend_.ClaimBatchAsAnswered(reqs, on_answer);
  } catch (const std::exception& e) {
    for (auto& r : results) {
      if (!r) r = MakeError("claim", e.what());
    }
  }
  const auto took = clock_.Steady() - claim_sent.steady;
  metrics().ClaimDuration(backend_.name(), took);
  // The store's pace, from batches it answered in full (a failing store's timeouts
  // say nothing of how fast it decides).
  if (std::all_of(results.begin(), results.end(), [](const auto& r) { return r && *r; })) {
    MeasureClaims(reqs.size(), std::chrono::duration<double, std::milli>(took));
  }
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    if (handled[i]) continue;
    const Result<lock::ClaimOutcome> r =
        results[i] ? std::move(*results[i])
                   : Result<lock::ClaimOutcome>(
                         MakeError("claim", "the backend gave no answer for this tick"));
    HandleOutcome(jobs[i], kinds[i], reqs[i], r, claim_sent, store_clock, errors[i]);
  }
  return next;
}

void Scheduler::NoRoomFor(const ScheduledJob& job, const Entry& e, const lock::ClaimRequest& req,
                          milliseconds lead) {
  if (e.kind == EntryKind::kRecheck) {
    ScheduleRecheck(job, e.tick);  // as after a lost answer: asked again in lease/2
    return;
  }
  if (lead > milliseconds(0) && e.kind == EntryKind::kTick) {
    // Claimed ahead of its instant: runs may end before then. Asked again at it.
    queue_.push(Entry{job.DueMs(e.tick), e.tick, e.job, EntryKind::kTick, true});
    return;
  }
  LogTick(job, req, "skipped",
          {{"reason", "max_concurrent_runs"},
           {"limit", options_.max_concurrent_runs},
           {"running", active_runs()}},
          LogLevel::kWarn);
  Observe(req, "skipped", 0);
}

void Scheduler::HandleOutcome(const std::shared_ptr<const ScheduledJob>& job, EntryKind kind,
                              const lock::ClaimRequest& req,
                              const Result<lock::ClaimOutcome>& result, ClaimSent claim_sent,
                              const StoreClockAtSend& store_clock, int earlier_errors) {
  Progress();
  Remember(req, result);
  if (result) SeeStoreClock(req, *result, clock_.Wall());
  if (kind == EntryKind::kRecheck && !(result && result->status == lock::ClaimStatus::kWon)) {
    // A recheck only matters when it wins (the holder died, its lease expired): the
    // tick line for this tick was logged at the first claim.
    if (log_.Enabled(LogLevel::kDebug)) {
      log_.Log(LogLevel::kDebug, "recheck",
               {{"job", req.job},
                {"tick", FormatTick(req.tick_unix)},
                {"node", req.node},
                {"outcome", result ? lock::ClaimStatusName(result->status) : "error"},
                {"error", result ? std::string() : result.error().ToString()}});
    }
    // Go on while the tick may still need a new holder: still running (its holder may
    // be dead, its lease not yet expired), held up by another run (busy), or unknown
    // (error). Done, missed, superseded, a store that lost the tick, and won end the
    // rechecks.
    const bool settled =
        result && (result->status == lock::ClaimStatus::kMissed ||
                   result->status == lock::ClaimStatus::kSuperseded ||
                   result->status == lock::ClaimStatus::kStoreReset ||
                   (result->status == lock::ClaimStatus::kLost && !result->holder_running));
    if (!settled) ScheduleRecheck(*job, req.tick_unix);
    return;
  }
  if (!result) {
    metrics().BackendError(backend_.name());
    if (kind == EntryKind::kTick && RetryClaim(*job, req, earlier_errors + 1, result.error())) {
      return;
    }
    std::vector<Field> fields = {{"error", result.error().ToString()}};
    if (earlier_errors > 0) fields.emplace_back("tries", earlier_errors + 1);
    LogTick(*job, req, "error", std::move(fields), LogLevel::kWarn);
    Observe(req, "error", 0);
    return;
  }
  const lock::ClaimOutcome& o = *result;
  switch (o.status) {
    case lock::ClaimStatus::kWon: {
      if (kind == EntryKind::kRecheck) {
        LogTick(*job, req, "won", {{"fence", o.fence}, {"recovered", "true"}});
      } else {
        LogTick(*job, req, "won", {{"fence", o.fence}});
      }
      const milliseconds lead = LeadOf(job->DueMs(req.tick_unix), req);
      // Renewals extend by lock.lease; the claim's own TTL was lead + lock.lease.
      // Claimed within this replica's room (ClaimGroup): it always starts.
      lock::HeldClaim held{req.job, req.tick_unix, req.owner_token, o.fence, req.lease - lead};
      if (!o.observed) Observe(req, "won", o.fence);
      StartRun(job, std::move(held), claim_sent, lead, store_clock.StartDelay());
      return;
    }
    case lock::ClaimStatus::kLost:
      if (o.holder_node == req.node && earlier_errors > 0) {
        // Most likely the claim before, whose answer never came, was taken: no run
        // holds it, and it is not run (each claim has a token of its own).
        LogTick(*job, req, "lost",
                {{"winner", o.holder_node},
                 {"reason", "an earlier claim of this replica, whose answer was lost, won it"}},
                LogLevel::kWarn);
      } else {
        LogTick(*job, req, "lost", {{"winner", o.holder_node}});
        if (o.holder_node == req.node) WarnSharedNodeId(req);
      }
      if (!o.observed) Observe(req, "lost", 0);
      if (job->job.recover && o.holder_running) ScheduleRecheck(*job, req.tick_unix);
      break;
    case lock::ClaimStatus::kBusy:
      if (kind == EntryKind::kTick && LeadOf(job->DueMs(req.tick_unix), req) > milliseconds(0)) {
        // Claimed ahead of its instant while the earlier run still went: it may end
        // before then. Asked again at the instant (the ledger's observation of this
        // replica is replaced then).
        queue_.push(
            Entry{job->DueMs(req.tick_unix), req.tick_unix, req.job, EntryKind::kTick, true});
        return;
      }
      LogTick(*job, req, "busy",
              {{"holder", o.holder_node}, {"holder_tick", FormatTick(o.holder_tick_unix)}});
      if (!o.observed) Observe(req, "busy", 0);
      break;
    case lock::ClaimStatus::kMissed:
      LogTick(*job, req, "missed", {});
      if (!o.observed) Observe(req, "missed", 0);
      NotifyMissed(*job, req.tick_unix, true);
      return;
    case lock::ClaimStatus::kSuperseded: {
      // A later tick of the job was claimed first: claims are monotonic per job.
      std::vector<Field> later = {{"later_tick", FormatTick(o.holder_tick_unix)}};
      if (!o.holder_node.empty()) later.emplace_back("later_node", o.holder_node);
      LogTick(*job, req, "superseded", std::move(later));
      if (!o.observed) Observe(req, "superseded", 0);
      return;
    }
    case lock::ClaimStatus::kEarly:
      // This replica's clock is ahead of the store's (rule 15): the store wrote nothing,
      // and the replicas whose clocks are right claim the tick at its time.
      LogTick(*job, req, "early",
              {{"offset", FormatOffset(req.node_wall - WallTime(milliseconds(o.store_ms)))},
               {"store_clock", FormatTimestamp(WallTime(milliseconds(o.store_ms)))},
               {"max_lead", FormatSeconds(req.max_lead.value_or(milliseconds(0)))}},
              LogLevel::kWarn);
      Observe(req, "early", 0);
      return;
    case lock::ClaimStatus::kStoreReset:
      // The store forgot a claim this replica saw: Remember has held the job back.
      LogTick(*job, req, "store-reset",
              {{"known_tick", FormatTick(req.known_tick)},
               {"store_tick", o.holder_tick_unix > 0 ? FormatTick(o.holder_tick_unix) : "none"},
               {"until", FormatTimestamp(WallTime(milliseconds(WallMs(clock_)) + options_.lease))}},
              LogLevel::kWarn);
      Observe(req, "store-reset", 0);
      return;
  }
  if (!o.holder_config_hash.empty() && o.holder_config_hash != req.config_hash) {
    // The hash parts only: a tz database difference is the skew watch's (app/tzdata.h).
    const ClaimHash ours = SplitClaimHash(req.config_hash);
    const ClaimHash theirs = SplitClaimHash(o.holder_config_hash);
    if (theirs.config != ours.config) {
      metrics().ConfigMismatch(req.job);
      log_.Log(LogLevel::kWarn, "config-mismatch",
               {{"job", req.job},
                {"tick", FormatTick(req.tick_unix)},
                {"node", req.node},
                {"peer", o.holder_node},
                {"hash", ours.config},
                {"peer_hash", theirs.config}});
    }
  }
}

void Scheduler::WarnSharedNodeId(const lock::ClaimRequest& req) {
  // A tick that could have been claimed before this process started (its lead is at
  // most claim_lead_max) may have been won by this replica before a restart.
  const std::int64_t latest_lead_ms =
      std::max(options_.claim_lead, options_.claim_lead_max).count();
  if (req.tick_unix * 1000 - latest_lead_ms <= started_wall_ms_) return;
  // Once per 10 minutes: two replicas of one id lose about every other tick.
  const std::int64_t now = clock_.Steady().time_since_epoch().count();
  std::int64_t last = shared_node_id_logged_ms_;
  if (last >= 0 && now - last < 600'000) return;
  if (!shared_node_id_logged_ms_.compare_exchange_strong(last, now)) return;
  log_.Log(LogLevel::kWarn, "node-id-conflict",
           {{"job", req.job}, {"tick", FormatTick(req.tick_unix)}, {"node", req.node}});
}

void Scheduler::Remember(const lock::ClaimRequest& req,
                         const Result<lock::ClaimOutcome>& result) {
  if (!result) return;
  std::int64_t claimed = 0;  // a tick the answer shows claimed in the store
  switch (result->status) {
    case lock::ClaimStatus::kWon:
    case lock::ClaimStatus::kLost:
      claimed = req.tick_unix;
      break;
    case lock::ClaimStatus::kBusy:
    case lock::ClaimStatus::kSuperseded:
      claimed = result->holder_tick_unix;
      break;
    case lock::ClaimStatus::kMissed:
    case lock::ClaimStatus::kEarly:
      break;
    case lock::ClaimStatus::kStoreReset: {
      std::lock_guard lock(store_memory_mu_);
      StoreMemory& m = store_memory_[req.job];
      // Trust the store again once the hold is over: what it knows from then on is
      // all there is (it would answer store-reset forever otherwise).
      m.known_tick = 0;
      m.reset_seen_ms = WallMs(clock_);
      return;
    }
  }
  std::lock_guard lock(store_memory_mu_);
  StoreMemory& m = store_memory_[req.job];
  m.known_tick = std::max(m.known_tick, claimed);
  if (result->status != lock::ClaimStatus::kEarly) {
    m.answered_tick = std::max(m.answered_tick, req.tick_unix);
  }
}

void StoreClockAtSend::See(const lock::ClaimOutcome& outcome, SteadyTime arrived) {
  if (outcome.store_ms == 0) return;  // the backend did not read its clock
  // Read after the sending, the store's clock was at most that much further on then.
  const milliseconds read_after = outcome.store_ms_at_batch_start
                                     ? milliseconds(0)
                                     : std::max(milliseconds(0), arrived - sent_.steady);
  const std::int64_t read_after_ms = read_after.count();
  const std::int64_t earliest = outcome.store_ms - outcome.store_error_ms - read_after_ms;
  earliest_ms_ = std::max(earliest_ms_.value_or(earliest), earliest);
}

milliseconds StoreClockAtSend::StartDelay() const {
  if (!earliest_ms_) return milliseconds(0);
  return std::max(milliseconds(0), sent_.wall - WallTime(milliseconds(*earliest_ms_)));
}

void Scheduler::SeeStoreClock(const lock::ClaimRequest& req, const lock::ClaimOutcome& outcome,
                              WallTime answered) {
  if (outcome.store_ms == 0) return;  // the backend did not read its clock
  const milliseconds offset =
      SurelyApart(req.node_wall, answered, WallTime(milliseconds(outcome.store_ms)));
  metrics().StoreClockOffset(backend_.name(), offset);
  const milliseconds limit = options_.store_clock_warning;
  if (limit.count() <= 0) return;
  std::lock_guard lock(store_memory_mu_);
  const bool beyond = offset >= limit || offset <= -limit;
  if (beyond == store_clock_warned_) return;
  // Back once within half the limit (no line per claim around the limit).
  if (!beyond && (offset >= limit / 2 || offset <= -limit / 2)) return;
  store_clock_warned_ = beyond;
  log_.Log(beyond ? LogLevel::kWarn : LogLevel::kInfo, "store-clock",
           {{"node", req.node},
            {"backend", backend_.name()},
            {"outcome", !beyond ? "back" : offset.count() > 0 ? "ahead" : "behind"},
            {"offset", FormatOffset(offset)},
            {"threshold", FormatSeconds(limit)}});
}

std::optional<std::vector<Field>> Scheduler::HeldBackByStoreReset(const std::string& job,
                                                                  std::int64_t tick,
                                                                  std::int64_t now_ms,
                                                                  std::int64_t& known_tick) {
  std::lock_guard lock(store_memory_mu_);
  const StoreMemory& m = store_memory_[job];
  known_tick = m.known_tick;
  if (!m.reset_seen_ms) return std::nullopt;
  // Two holds after the store lost claims (rule 12): for one lease, nothing of the
  // job starts (a run of a forgotten claim may still be going on a replica that has
  // not yet lost its renewal); and a tick at or before the loss is never claimed
  // again (it may have run before the loss).
  const std::int64_t until_ms = *m.reset_seen_ms + options_.lease.count();
  if (now_ms >= until_ms && tick * 1000 > *m.reset_seen_ms) return std::nullopt;
  return std::vector<Field>{
      {"reason", now_ms < until_ms ? "lease-after-store-reset" : "tick-before-store-reset"},
      {"reset_seen", FormatTimestamp(WallTime(milliseconds(*m.reset_seen_ms)))},
      {"until", FormatTimestamp(WallTime(milliseconds(until_ms)))}};
}

bool Scheduler::RetryClaim(const ScheduledJob& job, const lock::ClaimRequest& req, int errors,
                           const Error& error) {
  const milliseconds wait =
      std::min(kClaimRetryFirst * (1 << std::min(errors - 1, 8)), kClaimRetryLongest);
  const std::int64_t due_ms = WallMs(clock_) + wait.count();
  if (due_ms >= req.tick_unix * 1000 + job.StartingDeadline(req.tick_unix).count()) return false;
  log_.Log(LogLevel::kWarn, "claim",
           {{"job", req.job},
            {"tick", FormatTick(req.tick_unix)},
            {"node", req.node},
            {"outcome", "error"},
            {"error", error.ToString()},
            {"retry_in", FormatSeconds(wait)}});
  // At its instant (no lead), and its following tick was pushed already.
  Entry retry{due_ms, req.tick_unix, req.job, EntryKind::kTick, /*at_instant=*/true};
  retry.errors = errors;
  queue_.push(std::move(retry));
  return true;
}

void Scheduler::ScheduleRecheck(const ScheduledJob& job, std::int64_t tick) {
  // A dead holder's lease runs out at most one lease after its last renewal, and the
  // backend lets the tick be re-claimed within the starting deadline counted from
  // then: looking every lease/2 finds it in time, however long ago T was (a holder
  // may die an hour into a long run). HandleOutcome stops the rechecks once the
  // backend says the tick is done or missed.
  const std::int64_t due_ms =
      WallMs(clock_) + std::max<milliseconds>(options_.lease / 2, milliseconds(100)).count();
  queue_.push(Entry{due_ms, tick, job.job.name, EntryKind::kRecheck});
}

void Scheduler::StartRun(const std::shared_ptr<const ScheduledJob>& job, lock::HeldClaim held,
                         ClaimSent claim_sent, milliseconds lead, milliseconds start_delay) {
  WonTick won{job, std::move(held), claim_sent.steady, options_.node, false, options_.metrics};
  won.claim_wall = claim_sent.wall;
  won.lead = lead;
  // The runs of a big instant take time to make ready too (a thread or a child each):
  // begun claim_lead before T plus what their starts cost, they are ready by T.
  won.prepare_ahead = options_.claim_lead + InstantStartsDone(instant_claims_);
  won.start_delay = start_delay;
  won.notifier = options_.notifier;
  won.lease_guard = options_.lease_guard;
  won.instant_claims = instant_claims_;
  won.output_bytes = options_.history.output_bytes;
  won.keep_outputs = options_.history.runs;
  won.stop_grace = options_.stop_grace;
  won.renew_threads = &renew_threads_;
  won.late_completes = &late_completes_;
  auto run = std::make_unique<RunSupervisor>(
      clock_, backend_, runner_, log_, std::move(won),
      options_.max_real_wait, [this] {
        std::lock_guard lock(mu_);
        cv_.notify_all();
      });
  RunSupervisor* started = run.get();
  {
    std::lock_guard lock(mu_);
    runs_.push_back(std::move(run));
  }
  started->Start(run_threads_);
}

void Scheduler::PruneWhenDue(std::int64_t now_ms) {
  if (now_ms < next_prune_ms_) return;
  next_prune_ms_ = now_ms + options_.prune_every.count();
  if (pruning_) return;  // the last one is still going: this one is skipped
  if (pruner_.joinable()) pruner_.join();  // ended
  pruning_ = true;
  const bool warn_size = std::exchange(pruned_once_, true);  // not again at start
  pruner_ = std::thread([this, older_than = clock_.Wall() - options_.retention, warn_size] {
    const Result<int> removed =
        CallBackend("prune", [&] { return backend_.Prune(older_than); });
    if (!removed) {
      log_.Log(
          LogLevel::kWarn, "prune",
          {{"node", options_.node}, {"outcome", "error"}, {"error", removed.error().ToString()}});
    } else if (*removed > 0) {
      log_.Log(LogLevel::kDebug, "prune", {{"node", options_.node}, {"removed", *removed}});
    }
    // A store that grows toward its limit is said hourly, not only at start (etcd's
    // history, when nothing compacts it, fills its quota in days at fleet scale).
    if (warn_size) {
      for (const std::string& w : backend_.SizeWarnings()) {
        log_.Log(LogLevel::kWarn, "backend", {{"node", options_.node}, {"warning", w}});
      }
    }
    pruning_ = false;
  });
}

void Scheduler::ReapFinished() {
  std::list<std::unique_ptr<RunSupervisor>> finished;
  {
    std::lock_guard lock(mu_);
    for (auto it = runs_.begin(); it != runs_.end();) {
      auto here = it++;
      if ((*here)->done()) finished.splice(finished.end(), runs_, here);
    }
  }
  finished.clear();  // joins, outside the lock: a finishing run takes it in on_done
}

void Scheduler::LogTick(const ScheduledJob& job, const lock::ClaimRequest& req,
                        std::string_view outcome, std::vector<Field> extra, LogLevel level) {
  std::vector<Field> fields = {{"job", req.job},
                               {"tick", FormatTick(req.tick_unix)},
                               {"node", req.node},
                               {"outcome", outcome}};
  for (Field& f : extra) fields.push_back(std::move(f));
  // With jitter the claim is sent at the due instant, not at T (docs/design.md §6).
  if (job.job.jitter > milliseconds(0)) {
    fields.emplace_back("due", FormatTimestamp(WallTime(milliseconds(job.DueMs(req.tick_unix)))));
  }
  log_.Log(level, "tick", fields);
  metrics().TickOutcome(req.job, outcome);
}

void Scheduler::Observe(const lock::ClaimRequest& req, std::string_view outcome,
                        std::uint64_t fence) {
  lock::Observation obs;
  obs.job = req.job;
  obs.tick_unix = req.tick_unix;
  obs.node = req.node;
  obs.outcome = std::string(outcome);
  obs.node_wall = req.node_wall;
  obs.config_hash = req.config_hash;
  obs.fence = fence;
  if (observe_later_ != nullptr) {
    observe_later_->push_back(std::move(obs));
  } else {
    WriteObservation(obs);
  }
}

void Scheduler::WriteObservation(const lock::Observation& obs) {
  Result<void> r = CallBackend("ledger", [&] { return backend_.Record(obs); });
  Progress();
  if (!r) {
    LogBackendError(log_, LogLevel::kDebug, "ledger", obs.job, FormatTick(obs.tick_unix), obs.node,
                    r.error());
  }
}

}  // namespace tickd::app
