// A job as the scheduler holds it: the validated definition, its config hash and
// its tick function. Immutable once built, shared (shared_ptr<const>) by the
// scheduler and the supervisors of its running ticks, so a reload never changes
// the definition under a run.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "config/config.h"
#include "cron/schedule.h"

namespace tickd::app {

struct ScheduledJob {
  ScheduledJob() = default;
  // Not copyable or movable: `next` and `prev` of MakeScheduledJob point at `schedule`
  // of this very object (so that they need no allocation of their own).
  ScheduledJob(const ScheduledJob&) = delete;
  ScheduledJob& operator=(const ScheduledJob&) = delete;

  config::Job job;
  // Sent with every claim: job.ConfigHash() and the tz database version in use, as
  // WithTzdata writes them ("<hash> tz=2025b", app/tzdata.h).
  std::string config_hash;
  // The compiled `job.schedule_text` (MakeScheduledJob); nullopt for jobs that tests
  // give their own `next` / `prev`.
  std::optional<cron::Schedule> schedule;
  // The first tick strictly after `after`, the last strictly before `before` (unix
  // seconds, UTC); nullopt when there is none. The daemon's come from `schedule`,
  // the same code path as `tickd next`.
  std::function<std::optional<std::int64_t>(std::int64_t after)> next;
  std::function<std::optional<std::int64_t>(std::int64_t before)> prev;
  // The claim's lease when it is not the scheduler's (SchedulerOptions::lease):
  // library jobs may set their own (include/tickd/scheduler.h); the job file cannot.
  std::optional<std::chrono::milliseconds> lease;

  // How late tick T may still start: the job's starting_deadline, else
  // min(60 s, the gap to the following tick).
  std::chrono::milliseconds StartingDeadline(std::int64_t tick_unix) const;
  // When the run of tick T is due, in wall unix milliseconds: T, plus the job's jitter
  // offset (cron::JitterOffset) when it has `jitter`. Tick T stays the claim key; the
  // offset is shorter than the starting deadline (the loader checks it).
  std::int64_t DueMs(std::int64_t tick_unix) const;
};

using JobSet = std::vector<std::shared_ptr<const ScheduledJob>>;

// Parses the job's schedule. An Error naming the job when it does not parse (the
// config loader has already checked it, so this is a second line of defence).
// `lease`: ScheduledJob::lease.
Result<std::shared_ptr<const ScheduledJob>> MakeScheduledJob(
    const config::Job& job, std::optional<std::chrono::milliseconds> lease = std::nullopt);

// Every enabled job of `jobs` (copied), or the first Error.
Result<JobSet> MakeJobSet(const std::vector<config::Job>& jobs);

}  // namespace tickd::app
