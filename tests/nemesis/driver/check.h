// The driver's side of the checker (tests/nemesis/checker, part R): what one cell
// hands it and the counts it gives back. A thin adapter, so the driver does not
// depend on the checker's own types beyond this file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace tickd::nemesis {

struct JobPlan {
  std::string name;
  int every_s = 1;     // "@every Ns"
  bool forbid = true;  // concurrency: forbid (else allow)
  bool recover = false;
  int hold_ms = 0;         // nemesis_write --hold-ms
  int write_every_ms = 0;  // nemesis_write --write-every-ms (0: the BEGIN is its one write)
};

struct CheckInput {
  std::filesystem::path journal;            // nemesis_resource's JSONL
  std::vector<std::filesystem::path> logs;  // every replica's log
  std::filesystem::path fault_windows;      // the driver's JSONL
  std::filesystem::path store_leases;       // lease_watch.h's JSONL ("": none)
  std::vector<JobPlan> jobs;
  double lease_s = 3;
  std::int64_t clock_tolerance_ms = 0;  // CheckSpec::clock_tolerance_ms
  std::int64_t window_start_ms = 0;     // ticks in [start, end) are expected
  std::int64_t window_end_ms = 0;
};

struct CellCounts {
  long ticks = 0, runs = 0, accepted = 0, rejected_stale = 0, missed = 0, duplicates = 0,
       stale_accepted = 0, unexplained_missed = 0, overlaps = 0, fence_order_violations = 0,
       lease_violations = 0, late_writes = 0, early_starts = 0;
  // Re-runs of an interrupted tick of a `recover: true` job (not duplicates).
  long recovered = 0;
  double lateness_p99_ms = 0;
};

struct CheckOutput {
  CellCounts counts;
  std::vector<std::string> violations;  // each with its evidence
  bool ok = false;                      // the checker's own verdict
  std::string error;                    // the checker could not run
};

CheckOutput RunCheck(const CheckInput& input);

}  // namespace tickd::nemesis
