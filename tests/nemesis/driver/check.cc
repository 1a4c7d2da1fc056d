#include "tests/nemesis/driver/check.h"

#include <algorithm>

#ifdef TICKD_NEMESIS_HAVE_CHECKER
#include "tests/nemesis/checker/checker.h"
#endif

namespace tickd::nemesis {

#ifndef TICKD_NEMESIS_HAVE_CHECKER
// Part R's checker is not in this tree: every cell says so.
CheckOutput RunCheck(const CheckInput&) {
  CheckOutput out;
  out.error = "the checker (tests/nemesis/checker) is not built";
  return out;
}
#else
namespace {

// Whether the holder of `a` could not complete its tick before another replica's
// write `next` started: its replica was stopped or killed (a replica-down fault that
// took effect) from no later than one lease after `a` ended until `next` began. Its
// run may have ended (a SIGSTOP leaves the job's own process running), but the tick's
// record stayed `running` while the holder's lease ran out: recover re-runs it.
bool HolderDownUntil(const Attempt& a, const Attempt& next, const std::vector<FaultWindow>& faults,
                     std::int64_t lease_ms) {
  return std::any_of(faults.begin(), faults.end(), [&](const FaultWindow& f) {
    return f.took_effect && f.effect == "replica-down" && f.target == a.replica &&
           f.start_ms <= a.end_ms + lease_ms && f.end_ms >= next.start_ms;
  });
}

// Whether the holder of `a` logged that its completion of the tick failed (`warn
// complete … outcome=error`): the store never heard that the run ended, so to it the
// holder is one that died with the tick running, and recover re-runs it once the lease
// runs out (design §1 rules 4-5: at least once).
bool CompleteFailed(const Attempt& a, const std::vector<LogEvent>& logs) {
  return std::any_of(logs.begin(), logs.end(), [&](const LogEvent& e) {
    return e.event == "complete" && e.outcome == "error" && e.node == a.replica &&
           e.job == a.job && e.tick == a.tick;
  });
}

// `recover: true` re-runs a tick whose run was interrupted (DESIGN §1): at least once,
// with a higher fence. The checker knows no `recover`, so its duplicates of such a job
// are looked at here: when every accepted write of the (job, tick) but the last one
// ended without END (disconnect: the writer was killed; shutdown), or its holder was
// down from within a lease of its end until the next write began (HolderDownUntil: the
// holder never completed the tick), or its holder's completion failed (CompleteFailed),
// the later one is the recovery, not a duplicate.
// Returns how many were forgiven; `report` loses them.
long ForgiveRecoveredReruns(const std::vector<JobPlan>& jobs, const std::vector<Attempt>& journal,
                            const std::vector<FaultWindow>& faults,
                            const std::vector<LogEvent>& logs, std::int64_t lease_ms,
                            Report& report) {
  long forgiven = 0;
  std::vector<Violation> kept;
  for (const Violation& v : report.violations) {
    bool recover = false;
    for (const JobPlan& j : jobs) recover = recover || (j.name == v.job && j.recover);
    if (v.check != "duplicate" || !recover) {
      kept.push_back(v);
      continue;
    }
    std::vector<const Attempt*> accepted;
    for (const Attempt& a : journal) {
      if (a.job == v.job && a.tick == v.tick && a.accepted) accepted.push_back(&a);
    }
    std::sort(accepted.begin(), accepted.end(),
              [](const Attempt* a, const Attempt* b) { return a->seq < b->seq; });
    bool interrupted = !accepted.empty();
    for (std::size_t i = 0; i + 1 < accepted.size(); ++i) {
      interrupted =
          interrupted && (accepted[i]->ended != "end" ||
                          HolderDownUntil(*accepted[i], *accepted[i + 1], faults, lease_ms) ||
                          CompleteFailed(*accepted[i], logs));
    }
    if (!interrupted) {
      kept.push_back(v);
      continue;
    }
    const long extra = static_cast<long>(accepted.size()) - 1;
    forgiven += extra;
    report.counts.duplicates -= extra;
  }
  report.violations = std::move(kept);
  return forgiven;
}

}  // namespace

CheckOutput RunCheck(const CheckInput& input) {
  CheckOutput out;
  CheckSpec spec;
  spec.window_start_ms = input.window_start_ms;
  spec.window_end_ms = input.window_end_ms;
  spec.clock_tolerance_ms = input.clock_tolerance_ms;
  for (const JobPlan& j : input.jobs) {
    JobSpec job;
    job.name = j.name;
    job.every_s = j.every_s;
    job.lease_ms = static_cast<std::int64_t>(input.lease_s * 1000);
    job.forbid = j.forbid;
    spec.jobs.push_back(job);
  }
  std::vector<Attempt> journal;
  std::vector<LogEvent> logs;
  std::vector<FaultWindow> faults;
  std::string error;
  bool read = LoadJournal(input.journal, &journal, &error) &&
              LoadFaults(input.fault_windows, &faults, &error);
  std::vector<LeaseExpiry> expiries;
  read = read && (input.store_leases.empty() || !std::filesystem::exists(input.store_leases) ||
                  LoadLeaseExpiries(input.store_leases, &expiries, &error));
  for (const auto& log : input.logs) {
    read = read && LoadLog(log, &logs, &error);
    spec.replicas.push_back(log.stem().string());
  }
  if (!read) {
    out.error = error;
    return out;
  }
  Report report = Check(spec, journal, logs, faults, expiries);
  out.counts.recovered = ForgiveRecoveredReruns(
      input.jobs, journal, faults, logs, static_cast<std::int64_t>(input.lease_s * 1000), report);
  const Counts& c = report.counts;
  CellCounts& o = out.counts;
  o.ticks = c.ticks;
  o.runs = c.runs;
  o.accepted = c.accepted;
  o.rejected_stale = c.rejected_stale;
  o.missed = c.missed;
  o.duplicates = c.duplicates;
  o.stale_accepted = c.stale_accepted;
  o.unexplained_missed = c.unexplained_missed;
  o.overlaps = c.overlaps;
  o.fence_order_violations = c.fence_order_violations;
  o.lease_violations = c.lease_violations;
  o.late_writes = c.late_writes;
  o.early_starts = c.early_starts;
  o.lateness_p99_ms = static_cast<double>(c.lateness_p99_ms);
  for (const Violation& v : report.violations) {
    out.violations.push_back(v.check + " " + v.job + " tick " + std::to_string(v.tick) + ": " +
                             v.evidence);
  }
  out.ok = report.Passed();
  return out;
}
#endif

}  // namespace tickd::nemesis
