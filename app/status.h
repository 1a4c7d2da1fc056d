// The cluster-wide view of the ledger (docs/design.md §1 rule 8, §9) shared by `tickd
// status`, /api/status and the status page: per job its schedule, zone and next
// tick, and its last ticks with winner, run outcome, exit status, duration, fence,
// losers, what each replica saw (its own wall clock when it tried) and the measured
// skew between the replicas; and per replica the tz database version it claims with
// (app/tzdata.h), flagged when replicas differ.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "base/error.h"
#include "config/config.h"
#include "lock/backend.h"

namespace tickd::app {

struct JobStatus {
  std::string name;
  std::string schedule;  // as written
  std::string timezone;
  bool enabled = true;
  std::optional<std::int64_t> next_tick;  // unix s; nullopt: disabled or no further firing
  // With jitter: when the next tick's run is due (unix ms, T + the offset); else nullopt.
  std::optional<std::int64_t> next_due_ms;
  std::optional<lock::Pause> paused;      // the pause that holds now (`tickd pause`), if any
  std::vector<lock::TickHistory> ticks;   // newest first
};

// A replica as the ticks read show it.
struct ReplicaStatus {
  std::string node;
  std::string tzdata;          // from its newest observation; "" when not recorded
  std::int64_t last_tick = 0;  // that observation's tick, unix s
  // How long before T it claimed its newest tick of a job without jitter (the first
  // claim of that instant: docs/design.md §1 "Adaptive lead"), 0 at or after T;
  // nullopt: no such observation read.
  std::optional<std::chrono::milliseconds> lead;
};

struct StatusReport {
  WallTime generated;
  std::string backend;                  // the backend's name
  std::vector<JobStatus> jobs;          // in job-file order
  std::vector<ReplicaStatus> replicas;  // every node that tried a tick read, by name
};

// Reads the last `last` ticks of every job of `jobs` (only `only_job` when not empty)
// from the ledger. An Error when the backend fails, or when `only_job` is not a job
// of the file (context "job").
Result<StatusReport> CollectStatus(const std::vector<config::Job>& jobs, lock::Backend& backend,
                                   WallTime now, std::string_view only_job, int last);

// The measured skew of a tick: max − min of the replicas' wall clocks when they
// tried it; nullopt with fewer than two observations.
std::optional<std::chrono::milliseconds> TickSkew(const lock::TickHistory& tick);
// Nodes that tried the tick and did not win it (lost, busy), in observation order.
std::vector<std::string> Losers(const lock::TickHistory& tick);
// True when the replicas that tried the tick sent different config hashes.
bool ConfigMismatch(const lock::TickHistory& tick);
// The known tz database versions (KnownTzdata) the tick's replicas sent, sorted,
// each once.
std::vector<std::string> TzdataVersions(const lock::TickHistory& tick);
// True when the replicas that tried the tick sent different known tz database versions.
bool TzdataMismatch(const lock::TickHistory& tick);
// True when the replicas of the report have different known tz database versions.
bool TzdataMismatch(const StatusReport& report);

// `tickd status JOB --runs` and /api/runs (docs/design.md §9): the newest runs of one
// job (its ticks some replica won), each with the tail of what it printed
// (TickHistory::output, read with Backend::Outputs).
struct RunsReport {
  WallTime generated;
  std::string backend;
  std::string job;
  std::vector<lock::TickHistory> runs;  // newest first
};

// The last `limit` runs of `job` among its newest 4 × `limit` ticks (ticks nobody ran,
// missed or paused, are left out). An Error when the backend fails, or when `job` is
// not a job of `jobs` (context "job").
Result<RunsReport> CollectRuns(const std::vector<config::Job>& jobs, lock::Backend& backend,
                               WallTime now, std::string_view job, int limit);
// A header line per run, then its output, a line per line, marked with its stream.
std::string FormatRunsText(const RunsReport& report, bool color);
// The same as JSON; each output line is {"stream": "stdout"|"stderr"|"http"|"tickd", "line"}.
std::string FormatRunsJson(const RunsReport& report);

// Aligned columns for a terminal; ANSI colours only when `color`.
std::string FormatStatusText(const StatusReport& report, bool color);

// Whether `tickd status` colours its text: on a terminal, unless NO_COLOR (the value of
// the variable, nullptr when unset) is set and not empty (no-color.org).
bool UseColor(bool terminal, const char* no_color);
// JSON for scripts and /api/status (the same data).
std::string FormatStatusJson(const StatusReport& report);

}  // namespace tickd::app
