#include "tests/nemesis/driver/check.h"

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
CheckOutput RunCheck(const CheckInput& input) {
  CheckOutput out;
  CheckSpec spec;
  spec.window_start_ms = input.window_start_ms;
  spec.window_end_ms = input.window_end_ms;
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
  for (const auto& log : input.logs) {
    read = read && LoadLog(log, &logs, &error);
    spec.replicas.push_back(log.stem().string());
  }
  if (!read) {
    out.error = error;
    return out;
  }
  const Report report = Check(spec, journal, logs, faults);
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
