#include "app/scheduled_job.h"

#include <algorithm>

#include "app/tzdata.h"
#include "cron/schedule.h"
#include "cron/tzdata_version.h"

namespace tickd::app {

using std::chrono::milliseconds;
using std::chrono::seconds;

namespace {
constexpr milliseconds kDefaultStartingDeadline{60'000};
}  // namespace

milliseconds ScheduledJob::StartingDeadline(std::int64_t tick_unix) const {
  if (job.starting_deadline) return *job.starting_deadline;
  std::optional<std::int64_t> following = next ? next(tick_unix) : std::nullopt;
  if (!following) return kDefaultStartingDeadline;
  return std::min<milliseconds>(kDefaultStartingDeadline, seconds(*following - tick_unix));
}

std::int64_t ScheduledJob::DueMs(std::int64_t tick_unix) const {
  const cron::Instant tick{seconds(tick_unix)};
  return tick_unix * 1000 + cron::JitterOffset(job.name, tick, job.jitter).count();
}

Result<std::shared_ptr<const ScheduledJob>> MakeScheduledJob(const config::Job& job,
                                                             std::optional<milliseconds> lease) {
  auto parsed = cron::Schedule::Parse(job.schedule_text, job.schedule_options);
  if (!parsed) return MakeError("job " + job.name, parsed.error().message);
  auto out = std::make_shared<ScheduledJob>();
  out->config_hash = WithTzdata(job.ConfigHash(), cron::TzdataVersionInUse());
  out->job = job;
  out->lease = lease;
  out->schedule = std::move(*parsed);
  // A plain pointer fits std::function's inline buffer: no allocation per job. It
  // stays valid because a ScheduledJob is never copied or moved.
  const cron::Schedule* schedule = &*out->schedule;
  out->next = [schedule](std::int64_t after) -> std::optional<std::int64_t> {
    auto t = schedule->Next(cron::Instant(seconds(after)));
    if (!t) return std::nullopt;
    return t->time_since_epoch().count();
  };
  out->prev = [schedule](std::int64_t before) -> std::optional<std::int64_t> {
    auto t = schedule->Prev(cron::Instant(seconds(before)));
    if (!t) return std::nullopt;
    return t->time_since_epoch().count();
  };
  return out;
}

Result<JobSet> MakeJobSet(const std::vector<config::Job>& jobs) {
  JobSet out;
  for (const config::Job& job : jobs) {
    if (!job.enabled) continue;
    auto sj = MakeScheduledJob(job);
    if (!sj) return tl::unexpected(sj.error());
    out.push_back(std::move(*sj));
  }
  out.shrink_to_fit();
  return out;
}

}  // namespace tickd::app
